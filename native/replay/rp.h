/*
 * rp.h: what the files of the replayer (native/replay) share.
 *
 *   main.c    flags, the two passes over the trace, the JSON report
 *   exec.c    the executors: a lean threaded loop (plain mode) and a general
 *             one (touch, check, site hints, per-kind call counting)
 *   check.c   payload patterns and the address-ordered treap of live blocks
 *   fmt.c     a string builder for messages and JSON (no malloc, no stdio)
 *   threads.c threaded replay: one thread per recorded thread, per-object
 *             ready flags where one thread's op waits for another's
 *   count.c   instructions per allocator call: under heaplab's counting tool
 *             (--vg-count) or from the CPU's counter (--count perf)
 *   os.c      the only file that talks to the OS: mmap, files, clocks, /proc,
 *             the performance counter
 *
 * The replayer never calls malloc for its own needs: every buffer comes from
 * mmap (os.c), so the heap it measures holds only the trace's objects.
 *
 * An op (16 bytes), decoded from one trace event outside the timed region:
 *
 *    w = size << 8 | op byte          x = old object id   (free, realloc_free, realloc)
 *        op byte = kind | FAILED | OLD_NULL                 alignment (memalign family)
 *                                                           0 (malloc, calloc)
 *
 * New object ids are not stored: they are assigned in stream order, so the
 * executor counts them (`nid`) exactly as the recorder did.  A sentinel op
 * (byte RP_OP_END) closes every chunk, so the lean loop has no bounds test.
 */
#ifndef RP_H
#define RP_H

#include "hltrace.h"

#include <stddef.h>
#include <stdint.h>

#define RP_OP_END   0xffu
#define RP_SIZE_MAX ((UINT64_C(1) << 56) - 1) /* sizes above are clamped (failed calls only) */
#define RP_CHUNK    65536                     /* ops decoded, then executed, at a time */

typedef struct rp_op {
    uint64_t w;
    uint64_t x;
} rp_op_t;

static inline uint8_t rp_op_byte(const rp_op_t *o) {
    return (uint8_t)o->w;
}
static inline uint64_t rp_op_size(const rp_op_t *o) {
    return o->w >> 8;
}

enum { RP_PLAIN = 0, RP_TOUCH = 1, RP_CHECK = 2 };

/* What the first pass learns about a trace (and what the ops cache keeps). */
typedef struct rp_summary {
    uint64_t events, kinds[HL_KIND_COUNT], failed, inherited, ids, threads;
    uint64_t peak_live, peak_objects;
    uint64_t cut_short;
    uint64_t cut_offset, cut_events; /* where the reader stopped, and the events before it */
    char warning[512];
} rp_summary_t;

/* ---------------------------------------------------------------- os.c */

void *rp_map(size_t bytes); /* zeroed pages; exits with a message on failure */
void rp_unmap(void *p, size_t bytes);
void *rp_remap(void *p, size_t old_bytes, size_t new_bytes); /* exits on failure */
uint64_t rp_file_size(int fd); /* 0 when unknown */
extern const hl_mem_t rp_mem;  /* a caching hl_mem_t for the trace reader */
uint64_t rp_now_ns(void);      /* CLOCK_MONOTONIC */
int rp_open(const char *path); /* -1 with errno */
int rp_rewind(int fd);         /* 0 or -1 */
void rp_close(int fd);
void rp_write_all(int fd, const char *buf, size_t len);
__attribute__((noreturn)) void rp_exit(int code);
const char *rp_strerror(int err);
int rp_errno(void);
/* The ops cache's files (cache.c). */
int rp_file_id(const char *path, char *abs, size_t abs_len, uint64_t *size, uint64_t *mtime_ns);
int rp_create(const char *path);
int rp_mkdir(const char *path);
int rp_rename(const char *from, const char *to);
void rp_remove(const char *path);
int rp_pid(void);
int rp_pwrite_all(int fd, const void *buf, size_t len, uint64_t off);
/* An exclusive flock on path (created if absent), waited for: an fd, or -1
 * when the file cannot be made or locked. rp_unlock releases it (and -1 is
 * ignored); so does the process's exit. */
int rp_lock(const char *path);
void rp_unlock(int fd);
ssize_t rp_read_full(int fd, void *buf, size_t len);
/* Resident set now and its high-water mark, in bytes, from /proc/self/status
 * (0 when unreadable). */
void rp_rss(uint64_t *rss, uint64_t *hwm);
int rp_reset_hwm(void); /* writes 5 to /proc/self/clear_refs: 1 if it worked */
/* Calls handler(signal) on SIGSEGV, SIGBUS, SIGABRT, SIGFPE, SIGILL. */
void rp_on_crash(void (*handler)(int));
const char *rp_signal_name(int sig);
/* A waiting thread's n-th turn round a spin loop: a CPU pause at first, then
 * the processor is given up (sched_yield), so that the thread it waits for
 * can run on a machine with fewer cores than replay threads. */
void rp_relax(unsigned n);
/* A private futex on a 32-bit word: sleep while *word == expected; wake up
 * to n sleepers.  Both keep errno. */
void rp_futex_wait(uint32_t *word, uint32_t expected);
void rp_futex_wake(uint32_t *word, int n);
uint64_t rp_cpu_ns(void); /* CLOCK_PROCESS_CPUTIME_ID: CPU time of every thread */

/* ---------------------------------------------------------------- cache.c */

/* The ops cache (--ops-cache DIR): a trace decoded once into DIR/KEY.ops,
 * a header then 16-byte ops, so later runs skip both passes of decoding.
 * KEY hashes the trace's absolute path, size and mtime and the replayer's
 * version. */
int rp_cache_name(const char *dir, const char *trace, const char *version, char *file, size_t len,
                  uint64_t *key);
/* An fd positioned at the first op, with *s filled; -1 if absent or stale. */
int rp_cache_open(const char *file, uint64_t key, rp_summary_t *s);
/* Waits for the exclusive lock of file's writer (file.lock): an fd for
 * rp_unlock, or -1 (no lock to be had: go on without). */
int rp_cache_lock(const char *file);
/* Starts writing the cache: returns an fd (tmp holds its temporary name) or -1. */
int rp_cache_begin(const char *file, char *tmp, size_t len);
int rp_cache_add(int fd, const rp_op_t *ops, size_t n, uint64_t *off);
/* Writes the header and renames tmp to file; on failure removes tmp. */
void rp_cache_commit(int fd, const char *tmp, const char *file, uint64_t key, const rp_summary_t *s,
                     int ok);

/* ---------------------------------------------------------------- fmt.c */

typedef struct rp_buf {
    char *p;
    size_t len, cap;
} rp_buf_t;

void rp_buf_init(rp_buf_t *b, size_t cap); /* mmap'd; grows with mremap */
void rp_puts(rp_buf_t *b, const char *s);
void rp_putn(rp_buf_t *b, const char *s, size_t n);
void rp_putc(rp_buf_t *b, char c);
void rp_putu(rp_buf_t *b, uint64_t v);
void rp_putx(rp_buf_t *b, uint64_t v);                                 /* 0x... */
void rp_putfix(rp_buf_t *b, uint64_t num, uint64_t den, int decimals); /* num/den, rounded */
void rp_put_jstr(rp_buf_t *b, const char *s); /* a JSON string, quoted and escaped */
void rp_put_jstrn(rp_buf_t *b, const char *s, size_t n);
void rp_key(rp_buf_t *b, int *first, const char *key); /* ,"key": */
void rp_flush(rp_buf_t *b, int fd);

/* ---------------------------------------------------------------- check.c */

/* Per-object state of check mode, indexed by object id. */
typedef struct rp_check {
    uint64_t *size; /* requested size */
    uint64_t *born; /* event index that created the object */
    uint32_t *left, *right;
    uint8_t *live; /* 1 live and in the treap, 2 live but not in the treap (it overlapped) */
    uint32_t root;
    uint64_t problems;
    uint64_t max_report;
    rp_buf_t *msgs; /* each problem, one line (up to max_report) */
    rp_buf_t *json; /* the same as JSON strings, comma-separated */
} rp_check_t;

#define RP_NIL UINT32_MAX

void rp_check_init(rp_check_t *c, uint64_t ids, uint64_t max_report, rp_buf_t *msgs,
                   rp_buf_t *json);
void rp_fill(void *p, uint64_t size, uint64_t id);
/* First byte in [from, size) of p that differs from id's pattern, or size. */
uint64_t rp_verify(const void *p, uint64_t from, uint64_t size, uint64_t id);
uint8_t rp_pattern_byte(uint64_t id, uint64_t offset);
/* Inserts id (at obj[id], c->size[id] bytes); if it overlaps a live block,
 * returns that block's id and leaves id out of the treap, else RP_NIL. */
uint32_t rp_treap_insert(rp_check_t *c, void *const *obj, uint32_t id);
void rp_treap_remove(rp_check_t *c, void *const *obj, uint32_t id);
void rp_problem(rp_check_t *c, const char *text); /* records one problem */

/* ---------------------------------------------------------------- exec.c */

typedef struct rp_stats {
    uint64_t unexpected_null;     /* a call that succeeded when recorded returned NULL */
    uint64_t failed_replayed;     /* FAILED allocations replayed as the same call */
    uint64_t failed_now_succeed;  /* ... that succeeded now (the block is freed at once) */
    uint64_t failed_realloc_skip; /* FAILED reallocs, skipped */
    uint64_t realloc0_block;      /* realloc(p, 0) returned a block (freed at once) */
    uint64_t hints;               /* site hints delivered */
    uint64_t misaligned;          /* blocks not aligned as asked */
    uint64_t live_bytes, peak_live_bytes;
    uint64_t live_usable, usable_at_peak, peak_live_usable;
} rp_stats_t;

typedef struct rp_sites {
    uint64_t nstacks;   /* stack ids 1..nstacks */
    uint64_t *first;    /* per stack id: index of its first key in keys */
    uint32_t *nframes;  /* per stack id */
    uint64_t *site_key; /* per stack id */
    uint64_t *keys;     /* frame keys */
} rp_sites_t;

/* The four entry points the lean loop calls (the offsets are lean_x86_64.S's). */
typedef struct rp_calls {
    void *(*malloc)(size_t);
    void *(*calloc)(size_t, size_t);
    void *(*realloc)(void *, size_t);
    void (*free)(void *);
} rp_calls_t;

typedef struct rp_ctx {
    int mode;
    int per_call;             /* lean loop: call through the rp_call_* functions */
    int hints;                /* deliver site hints */
    void **obj;               /* object id -> pointer */
    uint64_t *usable;         /* touch: object id -> usable size */
    uint64_t *size;           /* touch: object id -> requested size */
    uint64_t nid;             /* the next object id */
    uint64_t event;           /* index of the first event of the chunk being run */
    const uint32_t *op_stack; /* hints: stack id of each op of the chunk */
    const rp_op_t *chunk;     /* the chunk being run (the lean loop's rare path) */
    const rp_sites_t *sites;
    rp_check_t *check;
    rp_stats_t st;
    /* threaded replay (threads.c) */
    rp_stats_t *book;      /* touch, check: live-byte figures shared by the threads (else &st) */
    const uint8_t *ready;  /* check: object id -> its creation has run (else NULL) */
    int locked;            /* touch, check: created()/released() under exec.c's lock */
} rp_ctx_t;

extern volatile uint64_t rp_current_event; /* for the crash report (general loop only) */

/* The calls the replayer makes into the allocator, one entry point each, in
 * this order (heaplab-compare's callgrind.rs names them the same way). */
enum {
    RP_W_MALLOC,
    RP_W_CALLOC,
    RP_W_MEMALIGN,
    RP_W_POSIX_MEMALIGN,
    RP_W_ALIGNED_ALLOC,
    RP_W_VALLOC,
    RP_W_PVALLOC,
    RP_W_FREE,
    RP_W_REALLOC_FREE,
    RP_W_REALLOC,
    RP_W_COUNT
};
/* Each slot holds a function of the entry point's own type: void *(size_t)
 * for malloc, valloc, pvalloc; void *(size_t a, size_t n) for calloc(a, n)
 * and the memalign family (alignment, size); void *(void *, size_t) for
 * realloc; void *(void *) for realloc_free (realloc(p, 0)); void (void *)
 * for free. */
typedef struct rp_api {
    void (*fn[RP_W_COUNT])(void);
} rp_api_t;
extern const rp_api_t rp_api_wrappers; /* rp_call_malloc, ... (exec.c) */
/* Every later call (lean loop with --per-call, general loop) goes through a. */
void rp_use_api(const rp_api_t *a);

/* One op through the general path, creating object ctx->nid if it creates
 * one; its messages name event ctx->event (threads.c). */
void rp_exec_one(rp_ctx_t *ctx, const rp_op_t *op);
/* The lean loop: plain mode, no hints. Runs ops up to the sentinel. */
uint64_t rp_exec_lean(const rp_op_t *op, rp_ctx_t *ctx);
/* The general loop: every mode; calls go through one noinline function per
 * entry point (rp_call_malloc, ...), which callgrind reports one by one. */
void rp_exec_general(const rp_op_t *op, rp_ctx_t *ctx);

/* The lean loops' four entry points: the allocator's, or with per_call the
 * rp_call_* functions (exec.c). */
const rp_calls_t *rp_lean_calls(int per_call);

/* ---------------------------------------------------------------- threads.c */

/* An op of a threaded replay: the op, and the id of the object it creates
 * (ids follow the merged order, so a stream cannot count them). */
typedef struct rp_top {
    rp_op_t op;
    uint64_t id;
} rp_top_t;

typedef struct rp_tstream {
    rp_top_t *ops;        /* this thread's ops, EDGE and SIG ops, END */
    uint64_t *ev;         /* touch, check: each op's index in the merged order */
    uint64_t *steps;      /* decoding: the thread's steps up to each op (trace-format.md) */
    uint64_t twostep;     /* decoding: two-step events so far */
    uint32_t edge_src[64];  /* decoding: the last edge waited for, by source thread % 64 */
    const rp_top_t *edge_op[64];
    uint64_t events, len, cap;
    uint32_t start_after; /* the thread that started it (THREADS), UINT32_MAX for thread 0 */
    int waits_start;      /* a SIG in its creator's stream starts it */
    const rp_top_t *start_sig; /* that SIG */
} rp_tstream_t;

struct rp_tplan;
typedef struct rp_thread {
    /* the last op this thread completed (an address in its stream), for
     * other threads' EDGE ops, and the threads asleep on a wait for this
     * one; alone in their cache line (threads.c, "Waiting") */
    uintptr_t done __attribute__((aligned(64)));
    uint32_t sleepers, sleeper_gen; /* asleep on this thread now; registrations ever */
    uint32_t seen_gen;              /* this thread's: sleeper_gen at its last scan */
    uintptr_t next_wake;            /* this thread's: the least wop of its sleepers then */
    /* this thread's own wait while it sleeps, read by the thread it waits
     * for: wsrc (NULL when not asleep); the wait ends when *wflag is set, or
     * when *wword >= wtarget; wsrc's op wop ends it (UINTPTR_MAX: no op of
     * any thread's, see wake_scan); wake is the futex word (0 asleep) */
    struct rp_thread *wsrc __attribute__((aligned(64)));
    const uint8_t *wflag;
    const uintptr_t *wword;
    uintptr_t wtarget, wop, wlate;
    uint32_t wake;
    struct rp_tplan *plan __attribute__((aligned(64)));
    rp_tstream_t *stream;
    uint32_t index;
    int general;
    const rp_calls_t *calls;
    uint64_t waits;      /* waits that found their flag unset */
    uint64_t edge_waits; /* of which on a recorded edge */
    uint64_t sleeps;     /* futex sleeps (a wait can sleep more than once) */
    rp_ctx_t ctx;
} __attribute__((aligned(64))) rp_thread_t;

typedef struct rp_tplan {
    uint32_t n, active, made; /* streams; with events; pthreads made */
    uint64_t ids;
    int mode, unordered;
    int spin;         /* --wait spin: a wait never sleeps (pause, then sched_yield) */
    rp_tstream_t *s;
    rp_top_t **born;  /* object id -> the op that creates it (whom a wait sleeps on) */
    uint8_t *ready;   /* object id -> created (set only where another stream waits, or check) */
    uint8_t *started; /* thread -> its SIG has been passed */
    rp_thread_t *th;
    void *tids;       /* pthread_t per stream */
    uint64_t waits, edge_waits, edges, sleeps;
    int edges_off;    /* --no-edges: object and start waits only */
    uint8_t go __attribute__((aligned(64))), leave;
    uintptr_t ended __attribute__((aligned(64))); /* worker streams that have ended */
} rp_tplan_t;

/* Decoding: begin (per-thread event counts from pass 1), then every THREADS
 * item's start edge and every event in the merged order, then end. */
void rp_threads_begin(rp_tplan_t *pl, const uint64_t *events_of, const uint64_t *edges_of,
                      uint32_t nthreads, uint64_t ids, int mode);
void rp_threads_thread(rp_tplan_t *pl, uint32_t thread, uint32_t started_by);
void rp_threads_event(rp_tplan_t *pl, const hl_event_t *e, uint64_t index);
void rp_threads_end(rp_tplan_t *pl);
/* Makes the threads (each with a copy of proto), waiting to start.  book:
 * the live-byte figures the threads share in touch and check mode. */
void rp_threads_prepare(rp_tplan_t *pl, const rp_ctx_t *proto, int general, int unordered,
                        const rp_calls_t *calls, rp_stats_t *book);
/* Runs every stream; returns the wall time from start to the last stream's end. */
uint64_t rp_threads_run(rp_tplan_t *pl);
/* Lets the threads exit, joins them, and adds their counts into ctx. */
void rp_threads_finish(rp_tplan_t *pl, rp_ctx_t *ctx);

/* ---------------------------------------------------------------- count.c */

/* The counters: 0 none, or one of these. */
enum { RP_COUNT_NONE = 0, RP_COUNT_VG = 1, RP_COUNT_PERF = 2 };
/* Sets the counter up before the replay: registers the wrappers with
 * heaplab-count, or opens the CPU's counter and calibrates; exits with a
 * message (status 5) when the counter cannot be had here. */
void rp_count_init(int counter);
/* Around each run of ops (perf: the replay's own instructions). */
void rp_count_start(void);
void rp_count_stop(void);
/* `,"counts":{...}` or `,"counts":null` into the JSON report. */
void rp_count_report(rp_buf_t *out, int *first);

/* ---------------------------------------------------------------- os.c: the counter */

/* A user-mode instruction counter of this thread, readable with rdpmc:
 * returns its mmap'd control page (struct perf_event_mmap_page), or NULL with
 * a reason in why. */
void *rp_perf_open(char *why, size_t why_len);

/* ---------------------------------------------------------------- os.c: the loaded malloc */

/* The base address of the object that defines the `name` this process's
 * calls bind to, or NULL (dlsym(RTLD_DEFAULT) then dladdr). */
const void *rp_os_definer(const char *name);
size_t rp_os_page_size(void);

/* ---------------------------------------------------------------- exec.c: entry points the allocator lacks */

/* Bits of rp_emulated: the entry points of the memalign family that the
 * loaded malloc does not define (Debian's jemalloc has no pvalloc), so that
 * the name binds to glibc's, which would allocate from glibc's heap a block
 * the allocator's free cannot take.  Their wrappers (rp_call_pvalloc, ...)
 * emulate them with the allocator's own memalign (or aligned_alloc):
 * valloc(n) = memalign(page, n); pvalloc(n) = memalign(page, n rounded up to
 * a page, at least one); memalign(a, n) = aligned_alloc(a, n rounded up to
 * a); aligned_alloc(a, n) and posix_memalign(a, n) = memalign(a, n) (posix's
 * EINVAL checks kept). The JSON report lists them ("emulated"). */
enum {
    RP_EMU_MEMALIGN = 1,
    RP_EMU_POSIX_MEMALIGN = 2,
    RP_EMU_ALIGNED_ALLOC = 4,
    RP_EMU_VALLOC = 8,
    RP_EMU_PVALLOC = 16
};
extern unsigned rp_emulated;
/* Decide rp_emulated for the malloc this process has loaded (call once,
 * before any replay). Returns 0, or -1 when an entry point is missing and
 * the allocator has neither memalign nor aligned_alloc to emulate it with
 * (then the names stay bound as they are). */
int rp_resolve_entries(void);
/* `"emulated":["pvalloc",...]` into the JSON report. */
void rp_emulated_report(rp_buf_t *out, int *first);

/* ---------------------------------------------------------------- refs.c */

/* --vg-marks: tell heaplab's Valgrind tool where the replayer's code is;
 * 0 when not running under valgrind --tool=heaplab-measure. */
int rp_refs_init(void);
/* Runs a chunk event by event, marking each for the tool. */
void rp_refs_exec(const rp_op_t *op, rp_ctx_t *ctx);
/* Check mode: verify the payload of every object still live. */
void rp_check_live_at_end(rp_ctx_t *ctx);

/* The optional exports of heaplab's allocators, as weak references: no
 * dlsym, whose failure path would call malloc. */
#include "../alloc/hl_alloc.h"
#include "heaplab_site.h"
#pragma weak heaplab_alloc_stats
#pragma weak heaplab_alloc_stats_reset_peak
#pragma weak heaplab_alloc_info
#pragma weak heaplab_site_hint

#endif
