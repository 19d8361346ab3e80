/*
 * heaplab-replay: re-executes a heaplab trace against whatever malloc the
 * process has loaded (LD_PRELOAD picks the allocator), and prints one JSON
 * object on stdout.  docs/replay.md is the user's manual.
 *
 *   pass 1  read the whole trace: validate it (a bad trace fails here, before
 *           any allocation), count events and objects, peak live bytes, the
 *           stack table for site hints
 *   setup   map and touch every table the replay needs (object id -> pointer,
 *           ...), reset the RSS high-water mark, take the baseline
 *   pass 2  read again; decode RP_CHUNK events into ops (untimed), run them
 *           (timed), repeat
 *   report  footprint (heaplab_alloc_stats when the allocator exports it),
 *           RSS growth, check results, JSON
 *
 * One thread replays every event in trace order (--threads serial), or each
 * recorded thread's events run on a thread of their own (threads.c).
 * Nothing here calls malloc: memory is mmap'd (os.c), output goes through
 * write(2) (fmt.c), and the allocator's optional exports are weak references,
 * not dlsym, whose failure path allocates.
 */
#include "rp.h"

#include <limits.h>
#include <string.h>

/* Under callgrind, `valgrind --tool=callgrind --instr-atstart=no` counts only
 * the timed regions (the runs of ops), and decoding runs uninstrumented, about
 * ten times faster.  Natively each request is a few no-op instructions per
 * chunk, outside the timed region. */
#if __has_include(<valgrind/callgrind.h>)
#include <valgrind/callgrind.h>
#else
#define CALLGRIND_START_INSTRUMENTATION
#define CALLGRIND_STOP_INSTRUMENTATION
#endif

#define VERSION "heaplab-replay 0.1.0"

static const char USAGE[] =
    "usage: heaplab-replay [--mode plain|touch|check] [--site-hints] [--per-call] [--general]\n"
    "                      [--max-problems N] [--ops-cache DIR] [--count vgcount|perf]\n"
    "                      [--threads recorded|serial|unordered] [--footprint-every N]\n"
    "                      [--fill-cache] TRACE\n"
    "\n"
    "Replays a heaplab trace against the malloc this process has loaded (choose it with\n"
    "LD_PRELOAD=libX.so) and prints one JSON object on stdout (docs/replay.md).\n"
    "\n"
    "  --mode plain    the allocator's cost alone: calls only, payloads untouched (default)\n"
    "  --mode touch    write every new object's bytes, as a program initializes what it\n"
    "                  allocates; also tracks malloc_usable_size (internal fragmentation)\n"
    "  --mode check    fill every payload with a per-object pattern, verify it at free,\n"
    "                  realloc and the end, detect overlapping live blocks, misalignment and\n"
    "                  calloc blocks that are not zeroed; exit status 3 on any problem\n"
    "  --site-hints    before each allocation, pass the recorded call site to the\n"
    "                  allocator's heaplab_site_hint() if it exports one (heaplab_site.h)\n"
    "  --per-call      make every call through one noinline function per entry point\n"
    "                  (rp_call_malloc, rp_call_free, ...), so that callgrind attributes\n"
    "                  instructions to each kind of call (heaplab compare does this)\n"
    "  --general       run plain mode through the general loop (which always calls\n"
    "                  through those functions) instead of the lean one\n"
    "  --max-problems N  check mode: describe at most N problems (default 20; all are counted)\n"
    "  --vg-marks      under valgrind --tool=heaplab-measure (heaplab locality runs it):\n"
    "                  replay event by event and mark each for the tool (refs.c)\n"
    "  --count vgcount  count the instructions of each allocator call, run under\n"
    "                  VALGRIND_LIB=build/lib/valgrind valgrind --tool=heaplab-count (count.c):\n"
    "                  callgrind's inclusive counts at about the speed of Valgrind's none tool\n"
    "  --count perf    the same natively, from the CPU's instruction counter (perf_event_open\n"
    "                  and rdpmc); exit status 5 where the machine gives none\n"
    "  --threads recorded  replay each recorded thread on a thread of its own, waiting only\n"
    "                  where one thread's event needs another's (a free of an object another\n"
    "                  thread made; a thread's start): the default for a trace of more than\n"
    "                  one thread (not with --site-hints, --vg-marks or --count)\n"
    "  --threads serial  every event on one thread, in the trace's merged order (the default\n"
    "                  for a one-thread trace)\n"
    "  --wait futex    --threads recorded: a thread whose wait is not over after a short spin\n"
    "                  sleeps on a futex until the thread it waits for wakes it (the default)\n"
    "  --wait spin     a waiting thread never sleeps: it spins, then yields the CPU\n"
    "                  (sched_yield) until it may go on; costs a core per waiting thread\n"
    "  --no-edges      --threads recorded: wait only for objects and thread starts, not for\n"
    "                  the trace's other recorded edges (a reuse after another thread's free)\n"
    "  --threads unordered  for testing check mode: the threads' events one thread at a time,\n"
    "                  the last thread first, with no waits, so every cross-thread dependency\n"
    "                  breaks; check mode reports each release of an object not yet made\n"
    "  --footprint-every N  after every N events (1..65536), take the allocator's exact\n"
    "                  footprint from heaplab_alloc_stats (the zoo's allocators export it) and\n"
    "                  report the series as footprint_series: [events, trace time, live bytes\n"
    "                  requested, footprint now, footprint peak since the last sample];\n"
    "                  replays serially and without the ops cache\n"
    "  --ops-cache DIR  keep the decoded trace in DIR (one file per trace, keyed by its path,\n"
    "                  size and mtime) and reuse it, so later runs skip decoding (not with\n"
    "                  --site-hints); runs started together decode it once (the others\n"
    "                  wait for the one decoding it)\n"
    "  --fill-cache    with --ops-cache: decode the trace into the cache unless it is there,\n"
    "                  print {events, ops_cache, decode_ns} and stop without replaying\n"
    "\n"
    "Exit status: 0 done,\n"
    "1 unreadable trace, 2 bad usage, 3 check found problems, 4 a call that succeeded when\n"
    "recorded returned NULL, 5 the counter asked for is not available here.\n";

enum { T_DEFAULT, T_SERIAL, T_RECORDED, T_UNORDERED };

static void die_usage(const char *what, const char *arg) {
    rp_buf_t b;
    rp_buf_init(&b, 4096);
    rp_puts(&b, "heaplab-replay: ");
    rp_puts(&b, what);
    if (arg) {
        rp_puts(&b, arg);
    }
    rp_puts(&b, "\n\n");
    rp_puts(&b, USAGE);
    rp_flush(&b, 2);
    rp_exit(2);
}

/* ---------------------------------------------------------------- growable arrays */

typedef struct vec {
    void *p;
    size_t len, cap, elem;
} vec_t;

static void vec_push(vec_t *v, const void *e) {
    if (v->len == v->cap) {
        size_t cap = v->cap ? v->cap * 2 : 4096;
        v->p = rp_remap(v->p, v->cap * v->elem, cap * v->elem);
        v->cap = cap;
    }
    memcpy((char *)v->p + v->len * v->elem, e, v->elem);
    v->len++;
}

/* ---------------------------------------------------------------- pass 1 */

typedef struct trace_info {
    rp_summary_t s;
    uint64_t live;
    vec_t mod_hash;    /* module id -> fnv1a64(basename); index 0 unused */
    vec_t stack_first; /* stack id -> first frame index; index 0 unused */
    vec_t stack_n;     /* stack id -> nframes (uint32) */
    vec_t frame_mod;   /* uint32 */
    vec_t frame_off;   /* uint64 */
    vec_t thread_events; /* thread index -> its events (uint64) */
    vec_t thread_edges;  /* thread index -> the recorded edges on its events (uint64) */
} trace_info_t;

static void trace_error(const hl_error_t *e) {
    char msg[1024];
    hl_error_format(e, msg, sizeof msg);
    rp_buf_t b;
    rp_buf_init(&b, 4096);
    rp_puts(&b, "heaplab-replay: ");
    rp_puts(&b, msg);
    rp_putc(&b, '\n');
    rp_flush(&b, 2);
}

static hl_reader_t *open_reader(int fd, const char *path) {
    hl_error_t err;
    hl_reader_t *r = hl_reader_new(&rp_mem, hl_fd_read, (void *)(intptr_t)fd, path, &err);
    if (!r) {
        trace_error(&err);
        rp_exit(1);
    }
    return r;
}

/* An event as the replay loop takes it (and the ops cache keeps it). */
static inline void to_op(const hl_event_t *e, rp_op_t *op) {
    uint8_t b = e->kind;
    uint64_t x = 0;
    if (e->failed) b |= HL_OP_FAILED;
    if (hl_kind_is_release(e->kind) || (e->kind == HL_REALLOC && e->has_old))
        x = e->old;
    else if (e->kind == HL_REALLOC)
        b |= HL_OP_OLD_NULL;
    else if (hl_kind_has_align(e->kind))
        x = e->align;
    uint64_t size = e->size > RP_SIZE_MAX ? RP_SIZE_MAX : e->size;
    if (hl_kind_is_release(e->kind)) size = 0;
    op->w = size << 8 | b;
    op->x = x;
}

/* Pass 1: what the trace holds (ti). With cache >= 0, also every event as
 * an op into that cache file (its ops from byte *off), *ok cleared on a
 * write error; a trace that cannot be read removes cache_tmp first. */
static void pass1(int fd, const char *path, int want_sites, trace_info_t *ti, int cache,
                  const char *cache_tmp, uint64_t *off, int *ok) {
    static rp_op_t sink[4096];
    size_t sunk = 0;
    hl_reader_t *r = open_reader(fd, path);
    hl_item_t it;
    int rc;
    uint64_t zero = 0;
    uint32_t zero32 = 0;
    ti->mod_hash.elem = 8;
    ti->stack_first.elem = 8;
    ti->stack_n.elem = 4;
    ti->frame_mod.elem = 4;
    ti->frame_off.elem = 8;
    ti->thread_events.elem = 8;
    ti->thread_edges.elem = 8;
    if (want_sites) {
        vec_push(&ti->mod_hash, &zero);
        vec_push(&ti->stack_first, &zero);
        vec_push(&ti->stack_n, &zero32);
    }
    while ((rc = hl_reader_next(r, &it)) == 1) {
        switch (it.kind) {
        case HL_ITEM_EVENT: {
            const hl_event_t *e = &it.u.event;
            while (ti->thread_events.len <= e->thread) {
                vec_push(&ti->thread_events, &zero);
                vec_push(&ti->thread_edges, &zero);
            }
            ((uint64_t *)ti->thread_events.p)[e->thread]++;
            ((uint64_t *)ti->thread_edges.p)[e->thread] += e->n_after;
            if (cache >= 0) {
                to_op(e, &sink[sunk++]);
                if (sunk == sizeof sink / sizeof *sink) {
                    *ok &= rp_cache_add(cache, sink, sunk, off) == 0;
                    sunk = 0;
                }
            }
            ti->s.events++;
            ti->s.kinds[e->kind]++;
            ti->s.failed += e->failed;
            ti->s.inherited += e->inherited;
            if (e->has_id) {
                ti->s.ids = e->id + 1;
                /* sizes come from the trace: stop at 2^64-1 rather than wrap */
                ti->live = ti->live > UINT64_MAX - e->size ? UINT64_MAX : ti->live + e->size;
            }
            if (hl_kind_is_release(e->kind) || (e->kind == HL_REALLOC && e->has_old && !e->failed)) {
                uint64_t gone = e->kind == HL_REALLOC ? e->old_size : e->size;
                ti->live = ti->live < gone ? 0 : ti->live - gone;
            }
            if (ti->live > ti->s.peak_live) ti->s.peak_live = ti->live;
            uint64_t lo = hl_reader_live_objects(r);
            if (lo > ti->s.peak_objects) ti->s.peak_objects = lo;
            break;
        }
        case HL_ITEM_THREAD:
            ti->s.threads++;
            break;
        case HL_ITEM_MODULE:
            if (want_sites) {
                /* the key's module half: the same fold heaplab_frame_key does */
                uint64_t h =
                    heaplab_frame_key((const char *)it.u.module.path.ptr, it.u.module.path.len, 0);
                while (ti->mod_hash.len < (size_t)it.u.module.id)
                    vec_push(&ti->mod_hash, &zero);
                vec_push(&ti->mod_hash, &h);
            }
            break;
        case HL_ITEM_STACK:
            if (want_sites) {
                uint64_t first = ti->frame_off.len;
                uint32_t n = it.u.stack.nframes;
                vec_push(&ti->stack_first, &first);
                vec_push(&ti->stack_n, &n);
                for (uint32_t i = 0; i < n; i++) {
                    vec_push(&ti->frame_mod, &it.u.stack.frames[i].module);
                    vec_push(&ti->frame_off, &it.u.stack.frames[i].offset);
                }
            }
            break;
        default:
            break;
        }
    }
    if (cache >= 0 && sunk) *ok &= rp_cache_add(cache, sink, sunk, off) == 0;
    if (rc < 0) {
        const hl_error_t *e = hl_reader_error(r);
        if (!hl_error_is_cut_short(e)) {
            trace_error(e);
            if (cache >= 0) rp_remove(cache_tmp);
            rp_exit(1);
        }
        ti->s.cut_short = 1;
        ti->s.cut_offset = e->offset;
        ti->s.cut_events = e->events;
        hl_error_format(e, ti->s.warning, sizeof ti->s.warning);
    }
    hl_reader_free(r);
}

/* Frame keys from the trace's (module, offset) frames (heaplab_site.h). */
static void build_sites(trace_info_t *ti, rp_sites_t *s) {
    s->nstacks = ti->stack_n.len ? ti->stack_n.len - 1 : 0;
    s->first = ti->stack_first.p;
    s->nframes = ti->stack_n.p;
    s->keys = rp_map((ti->frame_off.len + 1) * 8);
    s->site_key = rp_map((s->nstacks + 1) * 8);
    const uint32_t *fm = ti->frame_mod.p;
    const uint64_t *fo = ti->frame_off.p;
    const uint64_t *mh = ti->mod_hash.p;
    uint64_t empty = heaplab_frame_key("", 0, 0);
    for (size_t i = 0; i < ti->frame_off.len; i++) {
        uint64_t h = fm[i] && fm[i] < ti->mod_hash.len ? mh[fm[i]] : empty;
        s->keys[i] = h ^ (fo[i] * 0x9E3779B97F4A7C15ull);
    }
    for (uint64_t id = 1; id <= s->nstacks; id++)
        s->site_key[id] = heaplab_site_hash(s->keys + s->first[id], s->nframes[id]);
}

/* ---------------------------------------------------------------- crash report */

static rp_ctx_t *crash_ctx;
static int crash_lean, crash_threaded;

static void on_crash(int sig) {
    char tmp[400];
    rp_buf_t b = {tmp, 0, sizeof tmp};
    rp_puts(&b, "heaplab-replay: died of ");
    rp_puts(&b, rp_signal_name(sig));
    if (crash_ctx) {
        if (crash_threaded) {
            rp_puts(&b, " in a threaded replay");
        } else if (crash_lean) {
            rp_puts(&b, " in the chunk of events starting at event ");
            rp_putu(&b, crash_ctx->event);
        } else {
            rp_puts(&b, " while replaying event ");
            rp_putu(&b, rp_current_event);
        }
        rp_puts(&b, " (in the allocator, or writing a block it handed out)\n");
    } else {
        rp_puts(&b, " before the replay began\n");
    }
    rp_write_all(2, b.p, b.len);
}

/* ---------------------------------------------------------------- main */

static void *touch_table(uint64_t n, size_t elem) {
    size_t bytes = (size_t)(n ? n : 1) * elem;
    void *p = rp_map(bytes);
    memset(p, 0, bytes); /* fault every page in now, so that it is in the baseline */
    return p;
}

int main(int argc, char **argv) {
    int mode = RP_PLAIN, hints = 0, general = 0, per_call = 0, vgmarks = 0, counter = 0;
    int threads = T_DEFAULT, no_edges = 0, wait_spin = 0, fill_only = 0;
    const char *cache_dir = NULL;
    uint64_t max_problems = 20, foot_every = 0;
    const char *path = NULL;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            rp_write_all(1, USAGE, sizeof USAGE - 1);
            return 0;
        } else if (!strcmp(a, "--version")) {
            rp_write_all(1, VERSION "\n", sizeof VERSION);
            return 0;
        } else if (!strcmp(a, "--mode") || !strncmp(a, "--mode=", 7)) {
            const char *v = a[6] == '=' ? a + 7 : (i + 1 < argc ? argv[++i] : NULL);
            if (!v) die_usage("--mode needs a value: plain, touch or check", NULL);
            if (!strcmp(v, "plain"))
                mode = RP_PLAIN;
            else if (!strcmp(v, "touch"))
                mode = RP_TOUCH;
            else if (!strcmp(v, "check"))
                mode = RP_CHECK;
            else
                die_usage("--mode takes plain, touch or check, not ", v);
        } else if (!strcmp(a, "--threads") || !strncmp(a, "--threads=", 10)) {
            const char *v = a[9] == '=' ? a + 10 : (i + 1 < argc ? argv[++i] : NULL);
            if (!v) die_usage("--threads needs a value: recorded, serial or unordered", NULL);
            if (!strcmp(v, "recorded"))
                threads = T_RECORDED;
            else if (!strcmp(v, "serial"))
                threads = T_SERIAL;
            else if (!strcmp(v, "unordered"))
                threads = T_UNORDERED;
            else
                die_usage("--threads takes recorded, serial or unordered, not ", v);
        } else if (!strcmp(a, "--wait") || !strncmp(a, "--wait=", 7)) {
            const char *v = a[6] == '=' ? a + 7 : (i + 1 < argc ? argv[++i] : NULL);
            if (!v) die_usage("--wait needs a value: futex or spin", NULL);
            if (!strcmp(v, "futex"))
                wait_spin = 0;
            else if (!strcmp(v, "spin"))
                wait_spin = 1;
            else
                die_usage("--wait takes futex or spin, not ", v);
        } else if (!strcmp(a, "--no-edges")) {
            no_edges = 1;
        } else if (!strcmp(a, "--site-hints")) {
            hints = 1;
        } else if (!strcmp(a, "--ops-cache")) {
            cache_dir = i + 1 < argc ? argv[++i] : NULL;
            if (!cache_dir || !*cache_dir) die_usage("--ops-cache needs a directory", NULL);
        } else if (!strcmp(a, "--fill-cache")) {
            fill_only = 1;
        } else if (!strcmp(a, "--per-call")) {
            per_call = 1;
        } else if (!strcmp(a, "--general")) {
            general = 1;
        } else if (!strcmp(a, "--vg-marks")) {
            vgmarks = 1;
        } else if (!strcmp(a, "--count") || !strncmp(a, "--count=", 8)) {
            const char *v = a[7] == '=' ? a + 8 : (i + 1 < argc ? argv[++i] : NULL);
            if (!v) die_usage("--count needs a value: vgcount or perf", NULL);
            if (!strcmp(v, "vgcount"))
                counter = RP_COUNT_VG;
            else if (!strcmp(v, "perf"))
                counter = RP_COUNT_PERF;
            else
                die_usage("--count takes vgcount or perf, not ", v);
        } else if (!strcmp(a, "--max-problems")) {
            const char *v = i + 1 < argc ? argv[++i] : NULL;
            if (!v || !*v) die_usage("--max-problems needs a number", NULL);
            max_problems = 0;
            for (const char *s = v; *s; s++) {
                if (*s < '0' || *s > '9') die_usage("--max-problems takes a number, not ", v);
                max_problems = max_problems * 10 + (uint64_t)(*s - '0');
            }
        } else if (!strcmp(a, "--footprint-every")) {
            const char *v = i + 1 < argc ? argv[++i] : NULL;
            if (!v || !*v) die_usage("--footprint-every needs a number of events (1..65536)", NULL);
            foot_every = 0;
            for (const char *s = v; *s; s++) {
                if (*s < '0' || *s > '9' || foot_every > RP_CHUNK)
                    die_usage("--footprint-every takes a number of events from 1 to 65536, not ", v);
                foot_every = foot_every * 10 + (uint64_t)(*s - '0');
            }
            if (foot_every < 1 || foot_every > RP_CHUNK)
                die_usage("--footprint-every takes a number of events from 1 to 65536, not ", v);
        } else if (a[0] == '-' && a[1]) {
            die_usage("unknown option ", a);
        } else if (!path) {
            path = a;
        } else {
            die_usage("one trace at a time; extra argument ", a);
        }
    }
    if (!path) die_usage("no trace given", NULL);
    if (fill_only && (!cache_dir || hints))
        die_usage("--fill-cache needs --ops-cache (and no --site-hints)", NULL);
    if (counter && vgmarks) die_usage("--count and --vg-marks need different Valgrind tools", NULL);
    if (counter == RP_COUNT_PERF) per_call = 1; /* perf counts in its wrappers (count.c) */
    int threads_ok = !hints && !vgmarks && !counter;
    if ((threads == T_RECORDED || threads == T_UNORDERED) && !threads_ok)
        die_usage("--threads recorded and unordered replay serially only without --site-hints, "
                  "--vg-marks and --count; add --threads serial", NULL);
    if (foot_every && (threads == T_RECORDED || threads == T_UNORDERED))
        die_usage("--footprint-every samples between events in the trace's order; "
                  "use --threads serial", NULL);
    if (foot_every) {
        threads = T_SERIAL;
        cache_dir = NULL; /* the cache keeps no times */
    }

    int fd = rp_open(path);
    if (fd < 0) {
        rp_buf_t b;
        rp_buf_init(&b, 4096);
        rp_puts(&b, "heaplab-replay: ");
        rp_puts(&b, path);
        rp_puts(&b, ": ");
        rp_puts(&b, rp_strerror(rp_errno()));
        rp_putc(&b, '\n');
        rp_flush(&b, 2);
        return 1;
    }

    /* pass 1, unless the ops cache has this trace */
    static trace_info_t ti;
    uint64_t t_decode0 = rp_now_ns();
    static char cache_file[PATH_MAX], cache_tmp[PATH_MAX + 32];
    uint64_t cache_key = 0, cache_off = 0;
    int cache_fd = -1, cache_out = -1;
    int use_cache =
        cache_dir && !hints &&
        rp_cache_name(cache_dir, path, VERSION, cache_file, sizeof cache_file, &cache_key) == 0;
    /* a threaded run cannot use the cache (it holds no threads), but fills it
     * for the serial runs beside it (counted replays are serial) */
    int cache_serves = use_cache && threads != T_RECORDED && threads != T_UNORDERED;
    int cache_filled = 0, cache_ok = 1;
    if (use_cache) cache_fd = rp_cache_open(cache_file, cache_key, &ti.s);
    if (use_cache && cache_fd < 0) {
        /* one run decodes the trace into the cache, in its first pass; runs
         * started beside it wait for it here, then find the cache */
        int lock = rp_cache_lock(cache_file);
        cache_fd = rp_cache_open(cache_file, cache_key, &ti.s);
        if (cache_fd < 0)
            cache_out = rp_cache_begin(cache_file, cache_tmp, sizeof cache_tmp);
        if (cache_out >= 0) {
            pass1(fd, path, hints, &ti, cache_out, cache_tmp, &cache_off, &cache_ok);
            rp_cache_commit(cache_out, cache_tmp, cache_file, cache_key, &ti.s,
                            cache_ok && cache_off == ti.s.events * sizeof(rp_op_t));
            cache_out = -1; /* closed */
            cache_filled = 1;
            if (cache_serves) cache_fd = rp_cache_open(cache_file, cache_key, &ti.s);
        }
        rp_unlock(lock);
    }
    if (fill_only) {
        if (!cache_filled && cache_fd < 0) {
            rp_buf_t b;
            rp_buf_init(&b, 4096);
            rp_puts(&b, "heaplab-replay: cannot write the ops cache ");
            rp_puts(&b, cache_file);
            rp_putc(&b, '\n');
            rp_flush(&b, 2);
            return 1;
        }
        rp_buf_t b;
        rp_buf_init(&b, 4096);
        int f = 1;
        rp_putc(&b, '{');
        rp_key(&b, &f, "replayer");
        rp_put_jstr(&b, VERSION);
        rp_key(&b, &f, "trace");
        rp_put_jstr(&b, path);
        rp_key(&b, &f, "events");
        rp_putu(&b, ti.s.events);
        rp_key(&b, &f, "ops_cache");
        rp_put_jstr(&b, cache_filled ? "written" : "hit");
        rp_key(&b, &f, "decode_ns");
        rp_putu(&b, rp_now_ns() - t_decode0);
        rp_puts(&b, "}\n");
        rp_flush(&b, 1);
        return 0;
    }
    if (cache_fd >= 0 && (!cache_serves || (threads == T_DEFAULT && ti.s.threads > 1))) {
        rp_close(cache_fd); /* threaded: the cache cannot serve it */
        cache_fd = -1;
        use_cache = 0;
        if (!cache_filled) memset(&ti.s, 0, sizeof ti.s); /* pass 1 counts afresh */
    }
    if (cache_filled) use_cache = 0; /* written once is enough, whether it serves or not */
    if (cache_fd < 0 && !cache_filled) pass1(fd, path, hints, &ti, -1, NULL, NULL, NULL);
    if (threads == T_DEFAULT)
        threads = threads_ok && ti.thread_events.len > 1 ? T_RECORDED : T_SERIAL;
    if (threads != T_SERIAL) use_cache = 0;
    if (ti.s.ids >= RP_NIL && mode == RP_CHECK)
        die_usage("check mode handles fewer than 2^32 objects", NULL);

    /* setup: every table now, touched */
    static rp_ctx_t ctx;
    static rp_check_t chk;
    static rp_sites_t sites;
    rp_buf_t msgs, jprobs, out;
    rp_buf_init(&msgs, 1 << 16);
    rp_buf_init(&jprobs, 1 << 16);
    rp_buf_init(&out, 1 << 16);
    ctx.mode = mode;
    ctx.per_call = per_call;
    ctx.hints = hints && heaplab_site_hint != NULL;
    ctx.obj = touch_table(ti.s.ids, sizeof(void *));
    if (mode == RP_TOUCH) {
        ctx.usable = touch_table(ti.s.ids, 8);
        ctx.size = touch_table(ti.s.ids, 8);
    }
    if (mode == RP_CHECK) {
        rp_check_init(&chk, ti.s.ids, max_problems, &msgs, &jprobs);
        memset(chk.size, 0, (ti.s.ids ? ti.s.ids : 1) * 8);
        memset(chk.born, 0, (ti.s.ids ? ti.s.ids : 1) * 8);
        ctx.check = &chk;
        ctx.size = chk.size;
    }
    uint32_t *op_stack = NULL;
    if (ctx.hints) {
        build_sites(&ti, &sites);
        ctx.sites = &sites;
        op_stack = touch_table(RP_CHUNK + 1, sizeof *op_stack);
        ctx.op_stack = op_stack;
    }
    rp_op_t *ops = touch_table(RP_CHUNK + 1, sizeof *ops);
    int lean = mode == RP_PLAIN && !ctx.hints && !general && !vgmarks;
    if (vgmarks && !rp_refs_init())
        die_usage("--vg-marks: not running under valgrind --tool=heaplab-measure", NULL);
    if (rp_resolve_entries() != 0) {
        rp_buf_t b;
        rp_buf_init(&b, 512);
        rp_puts(&b, "heaplab-replay: warning: the loaded malloc lacks part of the memalign family "
                    "and has neither memalign nor aligned_alloc to emulate it with; those calls "
                    "go to whichever library defines them\n");
        rp_flush(&b, 2);
    }
    if (counter) rp_count_init(counter);

    /* pass 2: from the cache, or decoding again (and filling the cache) */
    hl_reader_t *r = NULL;
    if (cache_fd < 0) {
        if (rp_rewind(fd) != 0)
            die_usage("cannot read the trace twice (it must be a regular file): ", path);
        r = open_reader(fd, path);
        if (use_cache) cache_out = rp_cache_begin(cache_file, cache_tmp, sizeof cache_tmp);
    }
    /* threaded: every event now, split by thread (threads.c), and the threads made */
    static rp_tplan_t plan;
    int threaded = threads != T_SERIAL;
    if (threaded) {
        rp_threads_begin(&plan, ti.thread_events.p, ti.thread_edges.p,
                         (uint32_t)ti.thread_events.len, ti.s.ids, mode);
        plan.edges_off = no_edges;
        plan.spin = wait_spin;
        hl_item_t tit;
        uint64_t index = 0;
        while (hl_reader_next(r, &tit) == 1) {
            if (tit.kind == HL_ITEM_THREAD && tit.u.thread.has_start)
                rp_threads_thread(&plan, tit.u.thread.index, tit.u.thread.start_thread);
            else if (tit.kind == HL_ITEM_EVENT)
                rp_threads_event(&plan, &tit.u.event, index++);
        }
        /* an error here is the cut-short tail pass 1 already reported */
        rp_threads_end(&plan);
        rp_threads_prepare(&plan, &ctx, !lean, threads == T_UNORDERED, rp_lean_calls(per_call),
                           &ctx.st);
    }
    uint64_t decode_ns = rp_now_ns() - t_decode0;
    heaplab_alloc_stats_t st0;
    memset(&st0, 0, sizeof st0);
    if (heaplab_alloc_stats) heaplab_alloc_stats(&st0, sizeof st0); /* the lock's counts so far */
    if (heaplab_alloc_stats_reset_peak) heaplab_alloc_stats_reset_peak();
    int hwm_reset = rp_reset_hwm();
    uint64_t rss0, hwm0;
    rp_rss(&rss0, &hwm0);
    crash_ctx = &ctx;
    crash_lean = lean;
    crash_threaded = threaded;
    rp_on_crash(on_crash);

    uint64_t timed_ns = 0, chunks = 0;
    /* the CPU time of every thread over the timed region (outside it) */
    uint64_t timed_cpu_ns = 0;
    /* --footprint-every: [events, time, live, footprint, peak] per sample */
    vec_t foot = {NULL, 0, 0, 5 * sizeof(uint64_t)};
    uint64_t foot_live = 0, foot_time = 0;
    size_t chunk_max = foot_every ? (size_t)foot_every : RP_CHUNK;
    hl_item_t it;
    int rc = 1;
    if (threaded) {
        uint64_t c0 = rp_cpu_ns();
        timed_ns = rp_threads_run(&plan);
        timed_cpu_ns = rp_cpu_ns() - c0;
        chunks = 1;
        rc = 0;
    }
    while (rc == 1) {
        uint64_t t0 = rp_now_ns();
        size_t n = 0;
        if (cache_fd >= 0) {
            ssize_t got = rp_read_full(cache_fd, (char *)ops, RP_CHUNK * sizeof *ops);
            if (got < 0 || got % (ssize_t)sizeof *ops) {
                rp_buf_t b;
                rp_buf_init(&b, 4096);
                rp_puts(&b, "heaplab-replay: the ops cache ");
                rp_puts(&b, cache_file);
                rp_puts(&b, " is damaged; delete it\n");
                rp_flush(&b, 2);
                rp_exit(1);
            }
            n = (size_t)got / sizeof *ops;
            rc = n == RP_CHUNK ? 1 : 0;
        }
        while (cache_fd < 0 && n < chunk_max && (rc = hl_reader_next(r, &it)) == 1) {
            if (it.kind != HL_ITEM_EVENT) continue;
            const hl_event_t *e = &it.u.event;
            if (foot_every) { /* live bytes as the trace has them (the reader's sizes) */
                foot_time = e->time;
                if (e->failed) {
                } else if (hl_kind_is_release(e->kind)) {
                    foot_live -= e->size;
                } else {
                    if (e->kind == HL_REALLOC && e->has_old) foot_live -= e->old_size;
                    foot_live += e->size;
                }
            }
            to_op(e, &ops[n]);
            if (op_stack) op_stack[n] = e->stack;
            n++;
        }
        if (cache_out >= 0 && n) cache_ok &= rp_cache_add(cache_out, ops, n, &cache_off) == 0;
        ops[n].w = RP_OP_END;
        ops[n].x = 0;
        uint64_t t1 = rp_now_ns();
        decode_ns += t1 - t0;
        if (n == 0) break;
        uint64_t nid0 = ctx.nid;
        uint64_t c0 = rp_cpu_ns();
        CALLGRIND_START_INSTRUMENTATION;
        rp_count_start();
        uint64_t s = rp_now_ns();
        if (vgmarks)
            rp_refs_exec(ops, &ctx);
        else if (lean)
            ctx.nid = rp_exec_lean(ops, &ctx);
        else
            rp_exec_general(ops, &ctx);
        timed_ns += rp_now_ns() - s;
        rp_count_stop();
        CALLGRIND_STOP_INSTRUMENTATION;
        timed_cpu_ns += rp_cpu_ns() - c0;
        if (mode == RP_PLAIN) /* other modes count them as they happen */
            for (uint64_t id = nid0; id < ctx.nid; id++)
                ctx.st.unexpected_null += ctx.obj[id] == NULL;
        ctx.event += n;
        chunks++;
        if (foot_every && heaplab_alloc_stats) { /* outside the timed region */
            heaplab_alloc_stats_t fs;
            memset(&fs, 0, sizeof fs);
            heaplab_alloc_stats(&fs, sizeof fs);
            uint64_t row[5] = {ctx.event, foot_time, foot_live, fs.footprint_bytes,
                               fs.footprint_peak_bytes};
            vec_push(&foot, row);
            if (heaplab_alloc_stats_reset_peak) heaplab_alloc_stats_reset_peak();
        }
    }
    crash_ctx = NULL;
    if (cache_out >= 0)
        rp_cache_commit(cache_out, cache_tmp, cache_file, cache_key, &ti.s,
                        cache_ok && cache_off == ti.s.events * sizeof(rp_op_t));
    /* rc < 0 here is the cut-short tail pass 1 already reported */

    uint64_t rss1, hwm1;
    rp_rss(&rss1, &hwm1);
    heaplab_alloc_stats_t st1;
    int have_stats = heaplab_alloc_stats != NULL;
    if (have_stats) {
        memset(&st1, 0, sizeof st1);
        heaplab_alloc_stats(&st1, sizeof st1);
    }
    if (threaded) rp_threads_finish(&plan, &ctx); /* after the figures: the threads' exits free */
    if (mode == RP_CHECK) rp_check_live_at_end(&ctx);

    /* ---- the report ---- */
    int f = 1;
    rp_putc(&out, '{');
    rp_key(&out, &f, "replayer");
    rp_put_jstr(&out, VERSION);
    rp_key(&out, &f, "trace");
    rp_put_jstr(&out, path);
    rp_key(&out, &f, "mode");
    rp_put_jstr(&out, mode == RP_PLAIN ? "plain" : mode == RP_TOUCH ? "touch" : "check");
    rp_key(&out, &f, "loop");
    rp_put_jstr(&out, lean ? (per_call ? "lean-per-call" : "lean") : "general");
    rp_key(&out, &f, "allocator");
    if (heaplab_alloc_info && heaplab_alloc_info())
        rp_put_jstr(&out, heaplab_alloc_info()->name);
    else
        rp_puts(&out, "null");
    rp_key(&out, &f, "events");
    rp_putu(&out, ti.s.events);
    rp_key(&out, &f, "kinds");
    rp_putc(&out, '{');
    for (unsigned k = 0; k < HL_KIND_COUNT; k++) {
        if (k) rp_putc(&out, ',');
        rp_put_jstr(&out, hl_kind_name(k));
        rp_putc(&out, ':');
        rp_putu(&out, ti.s.kinds[k]);
    }
    rp_putc(&out, '}');
    rp_key(&out, &f, "failed_events");
    rp_putu(&out, ti.s.failed);
    rp_key(&out, &f, "inherited_events");
    rp_putu(&out, ti.s.inherited);
    rp_key(&out, &f, "objects");
    rp_putu(&out, ti.s.ids);
    rp_key(&out, &f, "trace_threads");
    rp_putu(&out, ti.s.threads);
    rp_key(&out, &f, "replay_threads");
    rp_putu(&out, threaded ? (plan.active ? plan.active : 1) : 1);
    rp_key(&out, &f, "threads_mode");
    rp_put_jstr(&out, threads == T_RECORDED ? "recorded" : threads == T_UNORDERED ? "unordered" : "serial");
    rp_key(&out, &f, "thread_waits");
    rp_putu(&out, plan.waits);
    rp_key(&out, &f, "thread_edges");
    rp_putu(&out, plan.edges);
    rp_key(&out, &f, "thread_edge_waits");
    rp_putu(&out, plan.edge_waits);
    rp_key(&out, &f, "thread_sleeps");
    rp_putu(&out, plan.sleeps);
    rp_key(&out, &f, "thread_wait"); /* null where no thread waits for another */
    if (threads == T_RECORDED)
        rp_put_jstr(&out, wait_spin ? "spin" : "futex");
    else
        rp_puts(&out, "null");
    rp_key(&out, &f, "cut_short");
    rp_puts(&out, ti.s.cut_short ? "true" : "false");
    rp_key(&out, &f, "trace_warning");
    if (ti.s.cut_short)
        rp_put_jstr(&out, ti.s.warning);
    else
        rp_puts(&out, "null");
    rp_key(&out, &f, "cut_at_byte");
    if (ti.s.cut_short)
        rp_putu(&out, ti.s.cut_offset);
    else
        rp_puts(&out, "null");
    rp_key(&out, &f, "cut_after_events");
    if (ti.s.cut_short)
        rp_putu(&out, ti.s.cut_events);
    else
        rp_puts(&out, "null");
    rp_key(&out, &f, "timed_ns");
    rp_putu(&out, timed_ns);
    rp_key(&out, &f, "timed_cpu_ns");
    rp_putu(&out, timed_cpu_ns);
    rp_key(&out, &f, "decode_ns");
    rp_putu(&out, decode_ns);
    rp_key(&out, &f, "ops_cache");
    rp_put_jstr(&out, cache_filled || cache_out >= 0 ? "written" : cache_fd >= 0 ? "hit" : "off");
    rp_key(&out, &f, "chunks");
    rp_putu(&out, chunks);
    rp_key(&out, &f, "peak_live_bytes");
    rp_putu(&out, ti.s.peak_live);
    rp_key(&out, &f, "peak_live_objects");
    rp_putu(&out, ti.s.peak_objects);

    rp_key(&out, &f, "footprint");
    if (have_stats) {
        int g = 1;
        rp_putc(&out, '{');
        rp_key(&out, &g, "source");
        rp_put_jstr(&out, "heaplab_alloc_stats");
        rp_key(&out, &g, "peak_bytes");
        rp_putu(&out, st1.footprint_peak_bytes);
        rp_key(&out, &g, "end_bytes");
        rp_putu(&out, st1.footprint_bytes);
        rp_key(&out, &g, "heap_peak_bytes");
        rp_putu(&out, st1.heap_peak_bytes);
        rp_key(&out, &g, "mapped_peak_bytes");
        rp_putu(&out, st1.mapped_peak_bytes);
        rp_key(&out, &g, "os_calls");
        rp_putu(&out, st1.os_calls);
        rp_key(&out, &g, "mallocs");
        rp_putu(&out, st1.mallocs);
        rp_key(&out, &g, "frees");
        rp_putu(&out, st1.frees);
        rp_key(&out, &g, "reallocs");
        rp_putu(&out, st1.reallocs);
        rp_key(&out, &g, "memaligns");
        rp_putu(&out, st1.memaligns);
        rp_key(&out, &g, "pad");
        rp_putu(&out, st1.pad);
        rp_putc(&out, '}');
    } else {
        rp_puts(&out, "null");
    }
    /* the zoo shim's one lock over the replay (hl_alloc.h): null where the
     * allocator does not count it (not heaplab's, or built before it did) */
    rp_key(&out, &f, "lock");
    if (have_stats && st1.size >= offsetof(heaplab_alloc_stats_t, lock_wait_ns) + 8) {
        int g = 1;
        rp_putc(&out, '{');
        rp_key(&out, &g, "contended");
        rp_putu(&out, st1.lock_contended - st0.lock_contended);
        rp_key(&out, &g, "sleeps");
        rp_putu(&out, st1.lock_sleeps - st0.lock_sleeps);
        rp_key(&out, &g, "wait_ns");
        rp_putu(&out, st1.lock_wait_ns - st0.lock_wait_ns);
        rp_putc(&out, '}');
    } else {
        rp_puts(&out, "null");
    }

    rp_key(&out, &f, "footprint_every");
    rp_putu(&out, foot_every);
    rp_key(&out, &f, "footprint_series");
    if (foot_every && have_stats) {
        rp_putc(&out, '[');
        const uint64_t *row = foot.p;
        for (size_t i = 0; i < foot.len; i++, row += 5) {
            rp_puts(&out, i ? ",[" : "[");
            for (int k = 0; k < 5; k++) {
                if (k) rp_putc(&out, ',');
                rp_putu(&out, row[k]);
            }
            rp_putc(&out, ']');
        }
        rp_putc(&out, ']');
    } else {
        rp_puts(&out, "null");
    }

    rp_key(&out, &f, "rss");
    {
        int g = 1;
        rp_putc(&out, '{');
        rp_key(&out, &g, "baseline_bytes");
        rp_putu(&out, rss0);
        rp_key(&out, &g, "peak_bytes");
        rp_putu(&out, hwm1);
        rp_key(&out, &g, "growth_bytes");
        rp_putu(&out, hwm1 > rss0 ? hwm1 - rss0 : 0);
        rp_key(&out, &g, "end_bytes");
        rp_putu(&out, rss1);
        rp_key(&out, &g, "hwm_reset");
        rp_puts(&out, hwm_reset ? "true" : "false");
        rp_putc(&out, '}');
    }

    rp_key(&out, &f, "usable");
    if (mode == RP_TOUCH) {
        int g = 1;
        rp_putc(&out, '{');
        rp_key(&out, &g, "peak_live_usable_bytes");
        rp_putu(&out, ctx.st.peak_live_usable);
        rp_key(&out, &g, "usable_at_peak_live_bytes");
        rp_putu(&out, ctx.st.usable_at_peak);
        rp_key(&out, &g, "peak_live_bytes");
        rp_putu(&out, ctx.st.peak_live_bytes);
        rp_putc(&out, '}');
    } else {
        rp_puts(&out, "null");
    }

    rp_key(&out, &f, "site_hints");
    {
        int g = 1;
        rp_putc(&out, '{');
        rp_key(&out, &g, "requested");
        rp_puts(&out, hints ? "true" : "false");
        rp_key(&out, &g, "hook");
        rp_puts(&out, heaplab_site_hint ? "true" : "false");
        rp_key(&out, &g, "delivered");
        rp_putu(&out, ctx.st.hints);
        rp_key(&out, &g, "stacks");
        rp_putu(&out, sites.nstacks);
        rp_putc(&out, '}');
    }

    rp_key(&out, &f, "replay");
    {
        int g = 1;
        rp_putc(&out, '{');
        rp_key(&out, &g, "unexpected_null");
        rp_putu(&out, ctx.st.unexpected_null);
        rp_key(&out, &g, "failed_replayed");
        rp_putu(&out, ctx.st.failed_replayed);
        rp_key(&out, &g, "failed_now_succeeded");
        rp_putu(&out, ctx.st.failed_now_succeed);
        rp_key(&out, &g, "failed_realloc_skipped");
        rp_putu(&out, ctx.st.failed_realloc_skip);
        rp_key(&out, &g, "realloc0_returned_block");
        rp_putu(&out, ctx.st.realloc0_block);
        rp_putc(&out, '}');
    }

    rp_count_report(&out, &f);
    rp_emulated_report(&out, &f);

    rp_key(&out, &f, "check");
    if (mode == RP_CHECK) {
        int g = 1;
        rp_putc(&out, '{');
        rp_key(&out, &g, "problems");
        rp_putu(&out, chk.problems);
        rp_key(&out, &g, "misaligned");
        rp_putu(&out, ctx.st.misaligned);
        rp_key(&out, &g, "reported");
        rp_putc(&out, '[');
        rp_putn(&out, jprobs.p, jprobs.len);
        rp_putc(&out, ']');
        rp_putc(&out, '}');
    } else {
        rp_puts(&out, "null");
    }
    rp_puts(&out, "}\n");
    rp_flush(&out, 1);

    if (ti.s.cut_short) {
        rp_buf_t b;
        rp_buf_init(&b, 4096);
        rp_puts(&b, "heaplab-replay: warning: ");
        rp_puts(&b, ti.s.warning);
        rp_puts(&b, "; replayed the events before it\n");
        rp_flush(&b, 2);
    }
    if (mode == RP_CHECK && chk.problems) {
        if (chk.problems > max_problems) {
            rp_puts(&msgs, "heaplab-replay: check: ... and ");
            rp_putu(&msgs, chk.problems - max_problems);
            rp_puts(&msgs, " more problems\n");
        }
        rp_flush(&msgs, 2);
        return 3;
    }
    if (ctx.st.unexpected_null) {
        rp_buf_t b;
        rp_buf_init(&b, 4096);
        rp_puts(&b, "heaplab-replay: ");
        rp_putu(&b, ctx.st.unexpected_null);
        rp_puts(&b, " allocations that succeeded when recorded returned NULL\n");
        rp_flush(&b, 2);
        return 4;
    }
    return 0;
}
