/*
 * writer.c: turning the rings into a trace. It runs under hl_wlock, in the
 * writer thread (SCHED_IDLE, all signals blocked, never recorded), in a
 * producer whose ring is half full, or in a thread that ends the trace (exit,
 * exec, a fatal signal).
 *
 *   rings (one per thread, records in seq order)
 *      |  min-heap on each ring's head key (seq, or seq1 for the release
 *      v  half of a realloc); a missing seq is waited for while its thread
 *   merge  says it is in flight (`pending`), skipped when nobody holds it
 *      |
 *      v
 *   address -> object id:  nursery (last 4096 objects, ring + index)
 *      |                   -> map (open addressing, page-local hash)
 *   stack hash -> stack    (frames kept as raw addresses; turned into
 *      |                    (module, offset) when first used in a trace)
 *      v
 *   batch of hl_event_t -> hltrace writer: MODULES/STACKS/THREADS before
 *   the EVENTS block that needs them; a block every block_events events
 *   or flush interval.
 *
 * Invariants: every object in the nursery or the map (never both) is live in
 * the trace being written (in a fork child before its trace opens: in the
 * parent's view); next_seq - 1 is the highest seq processed in order; the
 * ids counted here (next_id) are the ones the hltrace writer assigns.
 */
#include "agent.h"

#include <elf.h>
#include <errno.h>
#include <link.h>
#include <sched.h>
#include <sys/file.h>
#include <string.h>
#include <sys/prctl.h>
#include <unistd.h>

void hl_thread_recycle(hl_thread_t *t);
void hl_hooks_fork_prepare(void);
void hl_hooks_fork_parent(void);
void hl_hooks_fork_child(void);
int hl_agent_ctor_done(void);
void hl_agent_meta(hl_meta_t *m, hl_bytes_t *argv, size_t max_argv, char *buf, size_t bufsize);
const char *hl_agent_exe(void);

/* ---------------------------------------------------------------- state */

static hl_writer_t *W; /* NULL: no trace open (yet) */
static int W_fd = -1;
static hl_sink_t W_sink;
static char W_path[4200];
static int W_child;          /* a fork child: its trace opens on first need */
static int W_closed;         /* END written for good */
static int W_broken;         /* the trace could not be written */
static pid_t W_parent;       /* META parent pid of a fork child */
static hl_thread_t *W_first; /* thread 0 of a fork child's trace */
static uint64_t next_seq = 1;
static uint64_t last_flush_ns, last_recycle_ns;
static uint64_t unknown_frees;
static uint64_t fake_ids; /* object ids while absorbing in a fork child */
static uint64_t gap_seq, gap_since;
static int absorbing;
#define BATCH 1024
static hl_event_t batch[BATCH]; /* events on their way to W (see emit) */
static size_t batch_n;
static uint64_t next_id; /* the next object id of the trace being written */
#ifndef HL_BUSY_SLEEP_NS
#define HL_BUSY_SLEEP_NS 1000000
#endif

enum { DRAIN_NORMAL, DRAIN_FINAL, DRAIN_ABSORB };

/* Time stamps to trace units. With the TSC, ticks become ns along the line
 * through (hl_tsc0, hl_mono0) and the latest (rdtsc, CLOCK_MONOTONIC) pair:
 * the longer the baseline, the better the slope. The conversion is fixed
 * point: units = base + (stamp - origin) * mult / 2^40. */
static uint64_t t_origin, t_base, t_mult;
static double stamps_per_ns = 1.0;

static void calibrate(void) {
    double unit = (double)hl_cfg.time_unit_ns, per_unit = 1.0 / unit;
    if (hl_tsc) {
        uint64_t t = __builtin_ia32_rdtsc(), m = hl_now_ns();
        while (m - hl_mono0 < 20000) { /* a first slope needs ~20 us of baseline */
            t = __builtin_ia32_rdtsc();
            m = hl_now_ns();
        }
        if (t <= hl_tsc0) return;
        stamps_per_ns = (double)(t - hl_tsc0) / (double)(m - hl_mono0);
        per_unit = (double)(m - hl_mono0) / (double)(t - hl_tsc0) / unit;
        t_origin = hl_tsc0;
        t_base = hl_mono0 / hl_cfg.time_unit_ns;
    }
    t_mult = (uint64_t)(per_unit * (double)(1ull << 40));
}

static inline uint64_t to_units(uint64_t stamp) {
    uint64_t d = stamp > t_origin ? stamp - t_origin : 0;
    return t_base + (uint64_t)(((unsigned __int128)d * t_mult) >> 40);
}

static void broken(const char *why) {
    if (W_broken) return;
    W_broken = 1;
    atomic_store(&hl_off, 1);
    hl_note("cannot write the trace: ", why, W_path);
}

/* growable arrays over mmap */
static int grow(void **p, size_t *cap, size_t elem, size_t need) {
    if (need <= *cap) return 0;
    size_t n = *cap ? *cap : 1024;
    while (n < need)
        n *= 2;
    void *q = hl_os_grow(*p, *cap * elem, n * elem);
    if (!q) return -1;
    *p = q;
    *cap = n;
    return 0;
}

/* ---------------------------------------------------------------- the address map */

typedef struct obj {
    uint64_t addr; /* 0: empty slot */
    uint64_t id;
    uint64_t size;
    uint32_t stack; /* stack table entry, 0 none */
    uint8_t kind, align_log2;
    uint16_t pad;
} obj_t;

static obj_t *objs;
static size_t objs_cap, objs_n; /* cap: a power of two */

static unsigned objs_shift = 64; /* 64 - log2(objs_cap) */

/* Objects of one 4 KiB page land in consecutive slots from a random start:
 * consecutive allocations, and a resize, then touch a few cache lines
 * instead of one per object, while pages stay spread over the table. */
static inline size_t obj_hash(uint64_t addr) {
    uint64_t page = (addr >> 12) * 0x9E3779B97F4A7C15ull;
    return (size_t)((page >> objs_shift) + ((addr & 4095) >> 4)) & (objs_cap - 1);
}

static inline void obj_prefetch(uint64_t addr) {
    if (objs_cap) __builtin_prefetch(&objs[obj_hash(addr)]);
}

static obj_t *obj_find(uint64_t addr) {
    if (!objs_cap) return NULL;
    size_t i = obj_hash(addr);
    while (objs[i].addr) {
        if (objs[i].addr == addr) return &objs[i];
        i = (i + 1) & (objs_cap - 1);
    }
    return NULL;
}

static int obj_rehash(size_t cap) {
    obj_t *n = hl_os_alloc_populated(cap * sizeof *n), *old = objs;
    if (!n) return -1;
    size_t oc = objs_cap;
    objs = n;
    objs_cap = cap;
    objs_shift = 64 - (unsigned)__builtin_ctzll(cap);
    for (size_t i = 0; i < oc; i++) {
        if (!old[i].addr) continue;
        size_t j = obj_hash(old[i].addr);
        while (objs[j].addr)
            j = (j + 1) & (cap - 1);
        objs[j] = old[i];
    }
    hl_os_free(old, oc * sizeof *old);
    return 0;
}

/* The slot for addr, new or (an address whose free was not recorded) old. */
static obj_t *obj_insert(uint64_t addr) {
    if ((objs_n + 1) * 10 > objs_cap * 7 && obj_rehash(objs_cap ? objs_cap * 2 : 1 << 16))
        return NULL;
    size_t i = obj_hash(addr);
    while (objs[i].addr && objs[i].addr != addr)
        i = (i + 1) & (objs_cap - 1);
    if (!objs[i].addr) objs_n++;
    objs[i].addr = addr;
    return &objs[i];
}

static void obj_remove(obj_t *o) {
    size_t mask = objs_cap - 1, i = (size_t)(o - objs), j = i;
    for (;;) {
        j = (j + 1) & mask;
        if (!objs[j].addr) break;
        size_t home = obj_hash(objs[j].addr);
        if (((j - home) & mask) >= ((j - i) & mask)) {
            objs[i] = objs[j];
            i = j;
        }
    }
    objs[i].addr = 0;
    objs_n--;
}

/* The nursery: the last NURSERY_SLOTS objects created, in creation order
 * (a ring), with a small index by address. Most objects die young and are
 * freed from here without touching the big map. The oldest is pushed into
 * the map when the ring wraps, so objects enter the map in creation order:
 * neighbours in memory then, and (obj_hash keeps a page's objects together)
 * in the map too, so those inserts hit a few cache lines, not one each.
 * An address is in one of the two, never both. */
#ifndef NURSERY_SLOTS
#define NURSERY_SLOTS 4096
#endif
#define NURSERY_INDEX      (NURSERY_SLOTS * 4)
#define NURSERY_INDEX_BITS (__builtin_ctz(NURSERY_INDEX))
static obj_t nursery[NURSERY_SLOTS];
static uint32_t nindex[NURSERY_INDEX]; /* position in the ring + 1; 0: empty */
static uint64_t nursery_next;          /* objects put in the ring so far */

static inline uint32_t *nursery_index(uint64_t addr) {
    return &nindex[((addr >> 4) * 0xff51afd7ed558ccdull) >> (64 - NURSERY_INDEX_BITS)];
}

static inline int in_nursery(const obj_t *o) {
    return o >= nursery && o < nursery + NURSERY_SLOTS;
}

static inline obj_t *nursery_find(uint64_t addr) {
    uint32_t e = *nursery_index(addr);
    return e && nursery[e - 1].addr == addr ? &nursery[e - 1] : NULL;
}

static obj_t *obj_lookup(uint64_t addr) {
    obj_t *n = nursery_find(addr);
    return n ? n : obj_find(addr);
}

/* Moves a nursery object into the map. */
static void nursery_evict(obj_t *n) {
    uint32_t *ix = nursery_index(n->addr);
    if (*ix == (uint32_t)(n - nursery) + 1) *ix = 0;
    obj_t *m = obj_insert(n->addr);
    if (m) *m = *n;
    n->addr = 0;
}

static void obj_delete(obj_t *o) {
    if (in_nursery(o)) {
        uint32_t *ix = nursery_index(o->addr);
        if (*ix == (uint32_t)(o - nursery) + 1) *ix = 0;
        o->addr = 0;
    } else {
        obj_remove(o);
    }
}

/* The slot for a new object at addr. */
static obj_t *obj_new(uint64_t addr) {
    /* the object 16 creations from now pushes this one into the map */
    uint64_t later = nursery[(nursery_next + 16) & (NURSERY_SLOTS - 1)].addr;
    if (later) obj_prefetch(later);
    obj_t *n = &nursery[nursery_next & (NURSERY_SLOTS - 1)];
    if (n->addr) nursery_evict(n); /* the oldest */
    uint32_t *ix = nursery_index(addr);
    if (*ix && nursery[*ix - 1].addr) {
        if (nursery[*ix - 1].addr == addr) {
            /* its free was not recorded: it is this object now */
            nursery[*ix - 1].addr = 0;
        } else {
            nursery_evict(&nursery[*ix - 1]); /* an index collision */
        }
    }
    n->addr = addr;
    *ix = (uint32_t)(nursery_next & (NURSERY_SLOTS - 1)) + 1;
    nursery_next++;
    return n;
}

/* Everything into the map (before walking it). */
static void nursery_flush(void) {
    for (size_t i = 0; i < NURSERY_SLOTS; i++)
        if (nursery[i].addr) nursery_evict(&nursery[i]);
    memset(nindex, 0, sizeof nindex);
}

/* ---------------------------------------------------------------- modules */

typedef struct mod {
    uint64_t bias, lo, hi; /* runtime range [lo, hi); offset = addr - bias */
    uint32_t path_at, path_len;
    uint8_t bid[40];
    uint8_t bid_len;
    uint8_t loaded;
    uint32_t trace_id; /* 0: not defined in the current trace */
} mod_t;

static mod_t *mods;
static size_t mods_cap, mods_n;
static char *strs;
static size_t strs_cap, strs_n;
static uint32_t *msorted; /* loaded modules by lo */
static size_t msorted_cap, msorted_n;
static unsigned long long seen_adds = ~0ull, seen_subs = ~0ull;

static void build_id(const struct dl_phdr_info *info, mod_t *m) {
    m->bid_len = 0;
    for (int i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        if (ph->p_type != PT_NOTE) continue;
        const uint8_t *p = (const uint8_t *)(info->dlpi_addr + ph->p_vaddr), *end = p + ph->p_memsz;
        while (p + sizeof(ElfW(Nhdr)) <= end) {
            const ElfW(Nhdr) *nh = (const ElfW(Nhdr) *)p;
            size_t nsz = (nh->n_namesz + 3) & ~3u, dsz = (nh->n_descsz + 3) & ~3u;
            const uint8_t *name = p + sizeof *nh, *desc = name + nsz;
            if (desc + dsz > end) break;
            if (nh->n_type == NT_GNU_BUILD_ID && nh->n_namesz == 4 && !memcmp(name, "GNU", 4) &&
                nh->n_descsz <= sizeof m->bid) {
                memcpy(m->bid, desc, nh->n_descsz);
                m->bid_len = (uint8_t)nh->n_descsz;
                return;
            }
            p = desc + dsz;
        }
    }
}

static int scan_cb(struct dl_phdr_info *info, size_t size, void *arg) {
    (void)size;
    (void)arg;
    uint64_t lo = UINT64_MAX, hi = 0;
    for (int i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        if (ph->p_type != PT_LOAD) continue;
        if (ph->p_vaddr < lo) lo = ph->p_vaddr;
        if (ph->p_vaddr + ph->p_memsz > hi) hi = ph->p_vaddr + ph->p_memsz;
    }
    if (hi <= lo) return 0;
    const char *name = info->dlpi_name && *info->dlpi_name ? info->dlpi_name : hl_agent_exe();
    size_t nlen = strlen(name);
    uint64_t bias = info->dlpi_addr;
    for (size_t i = 0; i < mods_n; i++) {
        mod_t *m = &mods[i];
        if (m->bias == bias && m->lo == bias + lo && m->path_len == nlen &&
            !memcmp(strs + m->path_at, name, nlen)) {
            m->loaded = 2;
            return 0;
        }
    }
    if (grow((void **)&mods, &mods_cap, sizeof *mods, mods_n + 1) ||
        grow((void **)&strs, &strs_cap, 1, strs_n + nlen + 1))
        return 1;
    mod_t *m = &mods[mods_n++];
    memset(m, 0, sizeof *m);
    m->bias = bias;
    m->lo = bias + lo;
    m->hi = bias + hi;
    m->path_at = (uint32_t)strs_n;
    m->path_len = (uint32_t)nlen;
    memcpy(strs + strs_n, name, nlen + 1);
    strs_n += nlen + 1;
    m->loaded = 2;
    build_id(info, m);
    return 0;
}

static int counts_cb(struct dl_phdr_info *info, size_t size, void *arg) {
    unsigned long long *c = arg;
    if (size >= offsetof(struct dl_phdr_info, dlpi_subs) + sizeof info->dlpi_subs) {
        c[0] = info->dlpi_adds;
        c[1] = info->dlpi_subs;
    }
    return 1;
}

/* Re-reads the module list if objects were loaded or unloaded since the
 * last look. Returns 1 if it changed. */
static int modules_refresh(void) {
    unsigned long long c[2] = {0, 0};
    dl_iterate_phdr(counts_cb, c);
    if (c[0] == seen_adds && c[1] == seen_subs) return 0;
    seen_adds = c[0];
    seen_subs = c[1];
    for (size_t i = 0; i < mods_n; i++)
        mods[i].loaded = mods[i].loaded ? 1 : 0;
    dl_iterate_phdr(scan_cb, NULL);
    msorted_n = 0;
    if (grow((void **)&msorted, &msorted_cap, sizeof *msorted, mods_n)) return 0;
    for (size_t i = 0; i < mods_n; i++) {
        if (mods[i].loaded != 2) {
            mods[i].loaded = 0;
            continue;
        }
        mods[i].loaded = 1;
        size_t k = msorted_n++;
        while (k && mods[msorted[k - 1]].lo > mods[i].lo) {
            msorted[k] = msorted[k - 1];
            k--;
        }
        msorted[k] = (uint32_t)i;
    }
    return 1;
}

static mod_t *module_of(uint64_t addr, int *refreshed) {
    for (;;) {
        size_t lo = 0, hi = msorted_n;
        while (lo < hi) {
            size_t mid = (lo + hi) / 2;
            if (mods[msorted[mid]].lo <= addr)
                lo = mid + 1;
            else
                hi = mid;
        }
        if (lo && addr < mods[msorted[lo - 1]].hi) return &mods[msorted[lo - 1]];
        if (*refreshed) return NULL;
        *refreshed = 1;
        if (!modules_refresh()) return NULL;
    }
}

static uint32_t module_trace_id(mod_t *m) {
    if (!m->trace_id) {
        int64_t id = hl_writer_module(W, m->bias, m->hi - m->lo, strs + m->path_at, m->path_len,
                                      m->bid, m->bid_len);
        if (id < 0) {
            broken(hl_writer_error(W));
            return 0;
        }
        m->trace_id = (uint32_t)id;
    }
    return m->trace_id;
}

/* ---------------------------------------------------------------- stacks */

typedef struct stk {
    uint64_t hash;
    uint64_t frames_at;
    uint32_t trace_id;
    uint32_t nframes;
} stk_t;

static stk_t *stks; /* entry 0 unused */
static size_t stks_cap, stks_n = 1;
static uint32_t *sidx; /* hash -> entry, open addressing */
static size_t sidx_cap;
static uint64_t *frames;
static size_t frames_cap, frames_n;

static uint32_t stk_find(uint64_t hash) {
    if (!sidx_cap) return 0;
    size_t i = (size_t)(hash * 0x9E3779B97F4A7C15ull >> 24) & (sidx_cap - 1);
    while (sidx[i]) {
        if (stks[sidx[i]].hash == hash) return sidx[i];
        i = (i + 1) & (sidx_cap - 1);
    }
    return 0;
}

static void sidx_put(uint32_t e) {
    size_t i = (size_t)(stks[e].hash * 0x9E3779B97F4A7C15ull >> 24) & (sidx_cap - 1);
    while (sidx[i])
        i = (i + 1) & (sidx_cap - 1);
    sidx[i] = e;
}

static uint32_t stk_add(uint64_t hash, const uint64_t *f, unsigned n) {
    if (stks_n * 2 >= sidx_cap) {
        size_t cap = sidx_cap ? sidx_cap * 2 : 1 << 14;
        uint32_t *s = hl_os_alloc(cap * sizeof *s);
        if (!s) return 0;
        hl_os_free(sidx, sidx_cap * sizeof *sidx);
        sidx = s;
        sidx_cap = cap;
        for (uint32_t e = 1; e < stks_n; e++)
            sidx_put(e);
    }
    if (grow((void **)&stks, &stks_cap, sizeof *stks, stks_n + 1) ||
        grow((void **)&frames, &frames_cap, sizeof *frames, frames_n + n))
        return 0;
    uint32_t e = (uint32_t)stks_n++;
    stks[e] = (stk_t){hash, frames_n, 0, n};
    memcpy(frames + frames_n, f, n * sizeof *f);
    frames_n += n;
    sidx_put(e);
    return e;
}

/* The table entry of a record's stack (interning its frames if it has them). */
static uint32_t stack_entry(const hl_rec_t *r) {
    if (!r->hash) return 0;
    uint32_t e = stk_find(r->hash);
    if (!e && r->nframes) e = stk_add(r->hash, (const uint64_t *)(r + 1), r->nframes);
    return e;
}

/* The id of a stack table entry in the current trace, defining it (and its
 * modules) on first use. */
static __attribute__((noinline)) uint32_t stack_trace_id(uint32_t e) {
    if (!e) return 0;
    stk_t *s = &stks[e];
    if (s->trace_id) return s->trace_id;
    hl_frame_t f[HL_MAX_DEPTH];
    int refreshed = 0;
    unsigned n = s->nframes > HL_MAX_DEPTH ? HL_MAX_DEPTH : s->nframes;
    for (unsigned i = 0; i < n; i++) {
        uint64_t a = frames[s->frames_at + i];
        mod_t *m = module_of(a, &refreshed);
        f[i] = m ? (hl_frame_t){module_trace_id(m), a - m->bias} : (hl_frame_t){0, a};
    }
    int64_t id = hl_writer_stack(W, f, n);
    if (id < 0) {
        broken(hl_writer_error(W));
        return 0;
    }
    s->trace_id = (uint32_t)id;
    return s->trace_id;
}

static inline uint32_t stacks_cached(uint32_t e) {
    return HL_LIKELY(stks[e].trace_id != 0) ? stks[e].trace_id : stack_trace_id(e);
}

/* ---------------------------------------------------------------- the trace file */

static void write_inherited(void);

static int open_trace(void) {
    int claim = !W_child;
    int fd = hl_os_open_trace(hl_cfg.out, claim, W_path, sizeof W_path);
    if (fd < 0) {
        broken(strerror(errno));
        return -1;
    }
    hl_meta_t meta;
    hl_bytes_t argv[256];
    static char buf[16384];
    hl_agent_meta(&meta, argv, 256, buf, sizeof buf);
    if (W_child) {
        meta.has_parent_pid = 1;
        meta.parent_pid = (uint64_t)W_parent;
    }
    hl_writer_opts_t o = {hl_cfg.zstd_level, hl_cfg.block_events};
    hl_sink_init(&W_sink, fd, W_path);
    W = hl_writer_new(&hl_os_mem, hl_os_write, &W_sink, &meta, &o);
    flock(W_sink.fd, LOCK_UN);
    if (!W) {
        close(W_sink.fd);
        broken(strerror(errno));
        return -1;
    }
    W_fd = W_sink.fd;
    next_id = 0;
    batch_n = 0;
    last_flush_ns = hl_now_ns();
    if (W_child) write_inherited();
    return 0;
}

static int ensure_open(void) {
    if (W) return 1;
    if (W_closed || W_broken) return 0;
    return open_trace() == 0;
}

static __attribute__((noinline)) uint32_t define_thread(hl_thread_t *t) {
    char name[32];
    hl_os_thread_name(t->tid, name, sizeof name);
    if (!name[0]) strcpy(name, t->name);
    int64_t idx = hl_writer_thread(W, (uint64_t)t->tid, name, strlen(name));
    if (idx < 0) {
        broken(hl_writer_error(W));
        return 0;
    }
    t->trace_index = (int32_t)idx;
    return (uint32_t)idx;
}

static inline uint32_t thread_index(hl_thread_t *t) {
    return HL_LIKELY(t->trace_index >= 0) ? (uint32_t)t->trace_index : define_thread(t);
}

static inline int kind_releases(unsigned kind) {
    return kind == HL_FREE || kind == HL_REALLOC_FREE;
}

/* Events wait in a batch and reach the hltrace writer together (its column
 * cursors then stay in registers). Ids are counted here meanwhile: the
 * writer assigns the same ones, in the same order. Definitions the events
 * need are made at once, so they always precede the batch. */

static void batch_flush(void) {
    if (batch_n && W && !W_broken && hl_writer_append(W, batch, batch_n))
        broken(hl_writer_error(W));
    batch_n = 0;
}

/* Queues one event; returns the new object id (UINT64_MAX: none). The
 * caller has opened the trace (process() does, first thing). */
static uint64_t emit(hl_thread_t *t, uint64_t time_ns, unsigned kind, int failed, int has_old,
                     uint64_t old, uint64_t size, uint64_t align, uint32_t stack_e, int inherited) {
    int creates = !kind_releases(kind) && !failed;
    if (HL_UNLIKELY(absorbing || !W || W_broken)) return creates ? fake_ids++ : UINT64_MAX;
    hl_event_t *ev = &batch[batch_n]; /* the writer reads only the fields set here */
    ev->kind = (uint8_t)kind;
    ev->failed = (uint8_t)failed;
    ev->inherited = (uint8_t)inherited;
    ev->has_old = (uint8_t)has_old;
    ev->old = old;
    ev->thread = thread_index(t);
    ev->time = to_units(time_ns);
    ev->size = size;
    ev->align = align;
    ev->stack = HL_LIKELY(!stack_e) ? 0 : stacks_cached(stack_e);
    if (++batch_n == BATCH) batch_flush();
    return creates ? next_id++ : UINT64_MAX;
}

static inline void set_obj(obj_t *o, uint64_t id, const hl_rec_t *r, uint32_t se) {
    o->id = id;
    o->size = r->size;
    o->stack = se;
    o->kind = r->op;
    o->align_log2 = (uint8_t)(r->align ? __builtin_ctz(r->align) : 0);
}

/* A fork child's trace begins with the parent's live objects, oldest first. */
static void write_inherited(void) {
    uint64_t now = hl_now_ns();
    hl_thread_t *t = W_first;
    if (!t) return;
    thread_index(t);
    nursery_flush();
    size_t n = objs_n, bytes = (n ? n : 1) * 2 * sizeof(uint64_t);
    uint64_t *v = hl_os_alloc(bytes); /* pairs (old id, slot) */
    if (!v) return;
    size_t k = 0;
    for (size_t i = 0; i < objs_cap && k < n; i++)
        if (objs[i].addr) v[2 * k] = objs[i].id, v[2 * k + 1] = i, k++;
    /* heapsort the pairs by old id */
    for (size_t start = k / 2; start-- > 0 || 0;) {
        for (size_t root = start;;) {
            size_t c = 2 * root + 1;
            if (c >= k) break;
            if (c + 1 < k && v[2 * (c + 1)] > v[2 * c]) c++;
            if (v[2 * root] >= v[2 * c]) break;
            uint64_t a = v[2 * root], b = v[2 * root + 1];
            v[2 * root] = v[2 * c], v[2 * root + 1] = v[2 * c + 1], v[2 * c] = a, v[2 * c + 1] = b;
            root = c;
        }
        if (start == 0) break;
    }
    for (size_t end = k; end > 1;) {
        end--;
        uint64_t a = v[0], b = v[1];
        v[0] = v[2 * end], v[1] = v[2 * end + 1], v[2 * end] = a, v[2 * end + 1] = b;
        for (size_t root = 0;;) {
            size_t c = 2 * root + 1;
            if (c >= end) break;
            if (c + 1 < end && v[2 * (c + 1)] > v[2 * c]) c++;
            if (v[2 * root] >= v[2 * c]) break;
            uint64_t x = v[2 * root], y = v[2 * root + 1];
            v[2 * root] = v[2 * c], v[2 * root + 1] = v[2 * c + 1], v[2 * c] = x, v[2 * c + 1] = y;
            root = c;
        }
    }
    for (size_t i = 0; i < k; i++) {
        obj_t *o = &objs[v[2 * i + 1]];
        unsigned kind = o->kind;
        uint64_t align = hl_kind_has_align(kind) ? 1ull << o->align_log2 : 0;
        o->id = emit(t, now, kind, 0, 0, 0, o->size, align, o->stack, 1);
    }
    hl_os_free(v, bytes);
}

/* ---------------------------------------------------------------- records to events */

/* The release half of a realloc, at its seq1: the old block is free from
 * here on (another thread may be handed the same address before seq). */
static void realloc_release(hl_thread_t *t, const hl_rec_t *r) {
    if (HL_UNLIKELY(!W) && !absorbing)
        ensure_open(); /* a fork child's first event renumbers the objects */
    t->stash_known = 0;
    if (!r->addr && r->size != 0) return; /* failed: the old block stays */
    obj_t *o = obj_lookup(r->old);
    if (!o) return;
    t->stash_known = 1;
    t->stash_id = o->id;
    obj_delete(o);
}

static void new_object(hl_thread_t *t, const hl_rec_t *r, unsigned kind, int has_old, uint64_t old,
                       uint32_t se) {
    uint64_t align = kind >= HL_MEMALIGN && kind <= HL_PVALLOC ? r->align : 0;
    if (!r->addr) {
        emit(t, r->time, kind, 1, has_old, old, r->size, align, se, 0);
        return;
    }
    uint64_t id = emit(t, r->time, kind, 0, has_old, old, r->size, align, se, 0);
    obj_t *o = obj_new(r->addr);
    if (o) set_obj(o, id, r, se);
}

static void process(hl_thread_t *t, const hl_rec_t *r) {
    if (HL_UNLIKELY(!W) && !absorbing)
        ensure_open(); /* a fork child's first event renumbers the objects */
    unsigned kind = r->op;
    uint32_t se = stack_entry(r);
    switch (kind) {
    case HL_FREE: {
        obj_t *o = obj_lookup(r->addr);
        if (!o) {
            unknown_frees++;
            return;
        }
        emit(t, r->time, HL_FREE, 0, 1, o->id, 0, 0, se, 0);
        obj_delete(o);
        return;
    }
    case HL_REALLOC:
        if (!r->old) {
            new_object(t, r, HL_REALLOC, 0, 0, se);
        } else if (!r->addr && r->size == 0) {
            if (t->stash_known)
                emit(t, r->time, HL_REALLOC_FREE, 0, 1, t->stash_id, 0, 0, se, 0);
            else
                unknown_frees++;
        } else if (!r->addr) {
            obj_t *o = obj_lookup(r->old);
            emit(t, r->time, HL_REALLOC, 1, o != NULL, o ? o->id : 0, r->size, 0, se, 0);
        } else if (t->stash_known) {
            new_object(t, r, HL_REALLOC, 1, t->stash_id, se);
        } else {
            unknown_frees++; /* its old block was never seen allocated */
            new_object(t, r, HL_REALLOC, 0, 0, se);
        }
        t->stash_known = 0;
        return;
    default:
        new_object(t, r, kind, 0, 0, se);
        return;
    }
}

/* ---------------------------------------------------------------- merging the rings */

typedef struct head {
    hl_thread_t *t;
    hl_rec_t *r;
    uint64_t key;
} head_t;

static head_t *heap;
static size_t heap_cap, heap_n;

static inline int head_less(const head_t *a, const head_t *b) {
    return a->key < b->key;
}

static void heap_down(size_t i) {
    for (;;) {
        size_t l = 2 * i + 1, m = i;
        if (l < heap_n && head_less(&heap[l], &heap[m])) m = l;
        if (l + 1 < heap_n && head_less(&heap[l + 1], &heap[m])) m = l + 1;
        if (m == i) return;
        head_t x = heap[i];
        heap[i] = heap[m];
        heap[m] = x;
        i = m;
    }
}

static void heap_up(size_t i) {
    while (i) {
        size_t p = (i - 1) / 2;
        if (!head_less(&heap[i], &heap[p])) return;
        head_t x = heap[i];
        heap[i] = heap[p];
        heap[p] = x;
        i = p;
    }
}

/* The head record of t's ring, or NULL when it has none published. */
static hl_rec_t *ring_head(hl_thread_t *t, int refresh) {
    for (;;) {
        if (t->chead >= t->ctail_w) {
            if (!refresh) return NULL;
            t->ctail_w = atomic_load_explicit(&t->tail_pub, memory_order_acquire);
            refresh = 0;
            if (t->chead >= t->ctail_w) return NULL;
        }
        uint64_t off = t->chead & t->mask;
        hl_rec_t *r = (hl_rec_t *)(t->ring + off);
        if (r->seq == 0) { /* padding */
            t->chead += t->mask + 1 - off;
            continue;
        }
        return r;
    }
}

static inline uint64_t rec_key(const hl_thread_t *t, const hl_rec_t *r) {
    return (r->op == HL_REALLOC && r->old && !t->phase2) ? r->seq1 : r->seq;
}

static void heap_build(void) {
    heap_n = 0;
    for (hl_thread_t *t = atomic_load(&hl_threads); t; t = t->next) {
        if (atomic_load_explicit(&t->state, memory_order_acquire) == TS_FREE) continue;
        hl_rec_t *r = ring_head(t, 1);
        if (!r) continue;
        if (grow((void **)&heap, &heap_cap, sizeof *heap, heap_n + 1)) return;
        heap[heap_n] = (head_t){t, r, rec_key(t, r)};
        heap_up(heap_n++);
    }
}

static void publish_heads(void) {
    for (hl_thread_t *t = atomic_load(&hl_threads); t; t = t->next)
        if (atomic_load_explicit(&t->head_pub, memory_order_relaxed) != t->chead)
            atomic_store_explicit(&t->head_pub, t->chead, memory_order_release);
}

/* next_seq is missing while later records wait. Returns 1 to go on (the
 * seq arrived, or nobody holds it and it was skipped), 0 to wait. */
static int gap(int mode, uint64_t top_key, uint64_t deadline) {
    int inflight = 0;
    uint64_t lowest = top_key;
    for (hl_thread_t *t = atomic_load(&hl_threads); t; t = t->next) {
        uint64_t p = atomic_load_explicit(&t->pending, memory_order_acquire);
        if (p == UINT64_MAX)
            inflight = 1;
        else if (p >= next_seq && p < lowest)
            lowest = p;
    }
    /* pending was read first: a claim finished since is visible in its ring now */
    heap_build();
    if (heap_n && heap[0].key <= next_seq) return 1;
    uint64_t now = hl_now_ns();
    if (gap_seq != next_seq) gap_seq = next_seq, gap_since = now;
    int waiting = inflight || lowest == next_seq;
    if (waiting && (mode == DRAIN_FINAL ? now < deadline : now - gap_since < 2000000000ull))
        return 0;
    /* nobody will publish the seqs below `lowest` (or we gave up on them) */
    next_seq = lowest > next_seq ? lowest : next_seq + 1;
    if (heap_n && heap[0].key < next_seq) next_seq = heap[0].key;
    return 1;
}

/* The object-map slots the next few records of t will probe: a map far
 * bigger than the caches costs a memory round trip per lookup otherwise. */
static inline void prefetch_ahead(hl_thread_t *t) {
    if (t->pf < t->chead) t->pf = t->chead;
    uint64_t limit = t->chead + 32 * sizeof(hl_rec_t);
    while (t->pf < t->ctail_w && t->pf < limit) {
        uint64_t off = t->pf & t->mask;
        const hl_rec_t *r = (const hl_rec_t *)(t->ring + off);
        if (r->seq == 0) {
            t->pf += t->mask + 1 - off;
            continue;
        }
        /* a free of an object older than the nursery looks it up in the map */
        uint64_t gone = r->op == HL_FREE ? r->addr : r->op == HL_REALLOC ? r->old : 0;
        if (gone && !nursery_find(gone)) obj_prefetch(gone);
        t->pf += sizeof(hl_rec_t) + (uint64_t)r->nframes * sizeof(uint64_t);
    }
}

/* Processes records in seq order, at most `budget`. Returns how many. */
static size_t drain(int mode, size_t budget, uint64_t deadline) {
    size_t done = 0;
    unsigned spins = 0;
    calibrate();
    heap_build();
    while (heap_n && done < budget) {
        head_t *h = &heap[0];
        if (mode != DRAIN_ABSORB && h->key > next_seq) {
            if (gap(mode, h->key, deadline)) continue;
            if (mode == DRAIN_NORMAL && ++spins > 64) break;
            if (mode == DRAIN_FINAL && hl_now_ns() >= deadline) break;
            publish_heads();
            sched_yield();
            continue;
        }
        hl_thread_t *t = h->t;
        const hl_rec_t *r = h->r;
        uint64_t key = h->key;
        /* take this ring's records while they come next in order */
        for (;;) {
            if (key >= next_seq) next_seq = key + 1;
            if (r->op == HL_REALLOC && r->old && !t->phase2) {
                realloc_release(t, r); /* at seq1; the record stays, keyed by seq */
                t->phase2 = 1;
                key = r->seq;
            } else {
                process(t, r);
                t->phase2 = 0;
                t->chead += sizeof(hl_rec_t) + (uint64_t)r->nframes * sizeof(uint64_t);
                r = ring_head(t, 1);
                prefetch_ahead(t);
                if (r) key = rec_key(t, r);
            }
            if ((++done & 255) == 0)
                atomic_store_explicit(&t->head_pub, t->chead, memory_order_release);
            if (!r || key > next_seq || done >= budget) break;
        }
        if (r) {
            h->r = (hl_rec_t *)r;
            h->key = key;
        } else {
            heap[0] = heap[--heap_n];
        }
        heap_down(0);
    }
    publish_heads();
    batch_flush();
    return done;
}

static int rings_empty(void) {
    for (hl_thread_t *t = atomic_load(&hl_threads); t; t = t->next)
        if (atomic_load_explicit(&t->state, memory_order_acquire) != TS_FREE && ring_head(t, 1))
            return 0;
    return 1;
}

/* ---------------------------------------------------------------- the writer thread */

static void flush_on_time(int force) {
    if (!W || W_broken) return;
    batch_flush();
    uint64_t now = hl_now_ns();
    if (!hl_writer_buffered(W)) {
        last_flush_ns = now;
    } else if (force || now - last_flush_ns >= hl_cfg.flush_ns) {
        if (hl_writer_flush(W)) broken(hl_writer_error(W));
        last_flush_ns = now;
    }
    /* producers write an overdue block themselves (hooks.c, flush_if_due) */
    atomic_store_explicit(&hl_flush_due,
                          hl_stamp() + (uint64_t)((double)hl_cfg.flush_ns * stamps_per_ns),
                          memory_order_relaxed);
}

/* States of threads that have exited go back to the free list once their
 * ring is drained and the thread is really gone. */
static void recycle(void) {
    uint64_t now = hl_now_ns();
    if (now - last_recycle_ns < 10000000ull) return;
    last_recycle_ns = now;
    for (hl_thread_t *t = atomic_load(&hl_threads); t; t = t->next) {
        if (atomic_load_explicit(&t->state, memory_order_acquire) != TS_EXITING) continue;
        if (ring_head(t, 1) || hl_os_thread_alive(t->tid)) continue;
        if (ring_head(t, 1)) continue; /* it published on its way out */
        if (atomic_load(&t->pending)) continue;
        t->tail = t->head_seen = t->chead;
        hl_thread_recycle(t);
    }
}

static void *writer_main(void *arg) {
    (void)arg;
    hl_busy_enter(); /* nothing this thread does is recorded */
    prctl(PR_SET_NAME, "heaplab-writer", 0, 0, 0);
    /* Run only on CPU time nobody else wants: on an idle core the rings
     * drain in parallel; on a busy machine the writer never preempts the
     * program (producers drain their rings themselves when half full). */
    struct sched_param sp = {0};
    sched_setscheduler(0, SCHED_IDLE, &sp);
    uint64_t idle_ns = 0;
    for (;;) {
        pthread_mutex_lock(&hl_wlock);
        if (W_closed || W_broken || hl_pid != getpid()) {
            pthread_mutex_unlock(&hl_wlock);
            break;
        }
        int sig = atomic_load(&hl_fatal_sig);
        if (sig) {
            hl_finish_locked(HL_END_SIGNAL, (uint64_t)sig, 1);
            atomic_store(&hl_fatal_done, 1);
            pthread_mutex_unlock(&hl_wlock);
            break;
        }
        size_t n = drain(DRAIN_NORMAL, 1 << 16, 0);
        flush_on_time(0);
        recycle();
        pthread_mutex_unlock(&hl_wlock);
        /* Let records pile up between passes: a writer that polls a ring it
         * has caught up with pulls the producer's cache lines across cores
         * at every event. Idle, back off to 1 ms; busy, 50 us (a 1 MiB ring
         * holds 16K records, ~2 ms of the fastest allocator loops; the default 8 MiB, 128K). */
        if (n >= 4096)
            idle_ns = 0;
        else
            idle_ns = n ? HL_BUSY_SLEEP_NS
                        : (idle_ns ? (idle_ns * 2 > 1000000 ? 1000000 : idle_ns * 2) : 50000);
        if (idle_ns) hl_os_sleep_ns(idle_ns);
    }
    atomic_store(&hl_writer_running, 0);
    return NULL;
}

static __thread int t_helping __attribute__((tls_model("initial-exec")));

int hl_writer_helping(void) {
    return t_helping;
}

int hl_writer_help(void) {
    if (W_closed || W_broken || pthread_mutex_trylock(&hl_wlock)) return 0;
    t_helping = 1;
    size_t n = 0;
    if (!W_closed && !W_broken) {
        n = drain(DRAIN_NORMAL, 1 << 14, 0);
        flush_on_time(0);
    }
    pthread_mutex_unlock(&hl_wlock);
    t_helping = 0;
    int sig = atomic_exchange(&hl_deferred_sig, 0);
    if (sig) raise(sig); /* taken by the fatal handler now */
    return n > 0;
}

void hl_writer_ensure_running(void) {
    if (atomic_load_explicit(&hl_writer_running, memory_order_relaxed) || W_closed || W_broken)
        return;
    if (!hl_agent_ctor_done()) return; /* until then, full rings are drained by their producers */
    int expected = 0;
    if (!atomic_compare_exchange_strong(&hl_writer_running, &expected, 1)) return;
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    pthread_attr_t a;
    pthread_attr_init(&a);
    pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED);
    pthread_attr_setstacksize(&a, 1 << 20);
    pthread_t tid;
    hl_busy_enter();
    if (pthread_create(&tid, &a, writer_main, NULL)) atomic_store(&hl_writer_running, 0);
    hl_busy_leave();
    pthread_attr_destroy(&a);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
}

/* ---------------------------------------------------------------- ends, fork, exec */

int hl_writer_init(void) {
    modules_refresh();
    return open_trace();
}

int hl_finish_locked(int reason, uint64_t status, int close_for_good) {
    if (W_closed) return -1;
    if (!W && (W_broken || (W_child && reason == HL_END_EXEC && rings_empty()))) {
        /* a fork child that recorded nothing before exec leaves no trace */
        if (close_for_good) W_closed = 1, atomic_store(&hl_off, 1);
        return -1;
    }
    uint64_t deadline = hl_now_ns() + (reason == HL_END_SIGNAL ? 300000000ull : 100000000ull);
    while (drain(DRAIN_FINAL, SIZE_MAX, deadline) && hl_now_ns() < deadline) {
    }
    int rc = -1;
    if (ensure_open()) {
        batch_flush();
        hl_end_t e = {.reason = (uint64_t)reason,
                      .status = status,
                      .end_ns = hl_os_realtime_ns(),
                      .unrecorded = atomic_load(&hl_unrecorded),
                      .unknown_frees = unknown_frees};
        if (hl_writer_end(W, &e))
            broken(hl_writer_error(W));
        else
            rc = 0;
        last_flush_ns = hl_now_ns();
        if (hl_cfg.verbose && rc == 0) {
            char ev[24], by[24];
            hl_fmt_u64(ev, hl_writer_events(W));
            hl_fmt_u64(by, hl_writer_bytes(W));
            hl_note("wrote ", W_path, reason == HL_END_EXEC ? " (before exec)" : "");
            hl_note("  events ", ev, "");
            hl_note("  bytes ", by, "");
        }
    }
    if (close_for_good) {
        W_closed = 1;
        atomic_store(&hl_off, 1);
    }
    return rc;
}

void hl_fork_prepare(void) {
    pthread_mutex_lock(&hl_wlock);
    hl_hooks_fork_prepare();
}

void hl_fork_parent(void) {
    hl_hooks_fork_parent();
    pthread_mutex_unlock(&hl_wlock);
}

/* In the child, before fork returns. Other threads do not exist here: their
 * published records are absorbed into the object map (they happened before
 * the fork), their states freed. The child's trace opens on first need and
 * starts with the live objects as INHERITED allocations. */
void hl_fork_child(pid_t parent) {
    pthread_mutex_init(&hl_wlock, NULL);
    hl_hooks_fork_child();
    hl_pid = getpid();
    atomic_store(&hl_writer_running, 0);
    if (!hl_cfg.follow_forks || W_closed || W_broken) {
        atomic_store(&hl_off, 1);
        W_closed = 1;
        return;
    }
    absorbing = 1;
    drain(DRAIN_ABSORB, SIZE_MAX, 0);
    absorbing = 0;
    hl_thread_t *self = hl_thread_adopt();
    for (hl_thread_t *t = atomic_load(&hl_threads); t; t = t->next) {
        uint64_t pub = atomic_load(&t->tail_pub);
        t->chead = t->ctail_w = t->tail = t->head_seen = pub;
        atomic_store(&t->head_pub, pub);
        atomic_store(&t->pending, 0);
        t->phase2 = t->stash_known = 0;
        t->trace_index = -1;
        if (t != self && atomic_load(&t->state) != TS_FREE) hl_thread_recycle(t);
    }
    for (size_t e = 1; e < stks_n; e++)
        stks[e].trace_id = 0;
    for (size_t i = 0; i < mods_n; i++)
        mods[i].trace_id = 0;
    if (W) hl_writer_free(W);
    W = NULL;
    batch_n = 0;
    if (W_fd >= 0) hl_sink_close(&W_sink);
    W_fd = -1;
    W_child = 1;
    W_parent = parent;
    W_first = self;
    next_seq = atomic_load(&hl_seq);
    gap_seq = 0;
    unknown_frees = 0;
    atomic_store(&hl_unrecorded, 0);
    hl_writer_ensure_running();
}

void hl_exec_prepare(void) {
    pthread_mutex_lock(&hl_wlock);
    hl_finish_locked(HL_END_EXEC, 0, 0);
}

void hl_exec_failed(void) {
    pthread_mutex_unlock(&hl_wlock);
}
