/*
 * seg_front.c: what the front end's inline paths (seg_front.h) leave to a
 * call, and each thread's start, exit and counters.  Runs without the lock
 * unless said otherwise:
 *
 *   the thread's first call   register its exit hook, join the registry, copy
 *                             the class map, set its identification (the
 *                             predictor's); the fast cores start their own
 *                             part (a slot each) at their first slow call
 *   a miss of the fast path   sf_malloc_slow of the segment's core (medium
 *                             sizes, another thread's frees, a new slab);
 *                             else the locked path with the segment pending
 *   free of another thread's  its slot's remote stack (sf_free_slow), else the
 *   block, or a large one     locked path
 *   thread exit (the lock)    its counters to the retired totals (each core's
 *                             own hook hands its lists back to its slot)
 *   fork child (the lock)     the other threads are gone: their counters kept
 *
 *   registry: threads ─▶ [t1] ─▶ [t2] ─▶ ...   (seg_tls_t.next, under the lock)
 *
 * Slots: every slot a core gives this thread is entered in hl_seg_slot_seg
 * before a block of it is handed out, so that free finds the segment of any
 * block from its address.
 */
#include "hl_internal.h"
#include "seg.h"
#include "seg_front.h"
#include "seg_heap.h"
#include "seg_thread.h"

#include <string.h>

__attribute__((visibility("hidden"), tls_model("initial-exec"))) __thread seg_tls_t hl_seg_t = {
    .core = {{.t = SF_TLS_INIT}, {.t = SF_TLS_INIT}, {.t = SF_TLS_INIT}, {.t = SF_TLS_INIT}},
    .ident = hl_seg_ident_start,
    .ident_mode = hl_seg_ident_start,
    .ctxp = hl_seg_ctx_none, /* (every lookup misses until the thread starts: seg_ident.h) */
    .spp = hl_seg_ra_none,
};

__attribute__((visibility("hidden"), tls_model("initial-exec"))) __thread seg_caches_t hl_seg_caches;

uint16_t hl_seg_slot_seg[SEG_SLOT_TABLE];

static seg_tls_t *threads;
/* the counters of threads that are gone */
static uint64_t gone_hinted[HL_SEG_CLASSES];
static uint64_t gone_lv[2 * HL_SEG_LEVELS];
static hl_seg_cache_counts_t gone_cache;

static void add_cache(hl_seg_cache_counts_t *to, const hl_seg_cache_counts_t *from) {
    to->ctx_misses += from->ctx_misses;
    to->ctx_others += from->ctx_others;
    to->cx_hits += from->cx_hits;
    to->walks += from->walks;
    to->uncached += from->uncached;
    to->longs += from->longs;
    to->ra_misses += from->ra_misses;
    to->path_hits += from->path_hits;
    to->path_misses += from->path_misses;
}

/* ------------------------------------------------------------------------ */
/* Threads                                                                   */
/* ------------------------------------------------------------------------ */

static void keep_counts(seg_tls_t *t) {
    for (unsigned c = 0; c < HL_SEG_CLASSES; c++)
        gone_hinted[c] += t->hinted[c];
    uint64_t lv[2 * HL_SEG_LEVELS];
    memcpy(lv, t->lv, sizeof lv);
    hl_seg_ident_count(t, lv);
    for (unsigned i = 0; i < 2 * HL_SEG_LEVELS; i++)
        gone_lv[i] += lv[i];
    add_cache(&gone_cache, &t->cnt);
    memset(t->hinted, 0, sizeof t->hinted);
    memset(t->lv, 0, sizeof t->lv);
    for (unsigned i = 0; t->ctx && i < SEG_CTX_SLOTS; i++)
        t->ctx[i].hits = 0;
    for (unsigned i = 0; t->ra && i < SEG_RA_SLOTS; i++)
        t->ra[i].hits = 0;
    memset(&t->cnt, 0, sizeof t->cnt);
}

static void unlink_thread(seg_tls_t *t) {
    for (seg_tls_t **pp = &threads; *pp; pp = &(*pp)->next)
        if (*pp == t) {
            *pp = t->next;
            break;
        }
    t->next = NULL;
}

static void thread_exit(void *arg) {
    seg_tls_t *t = arg;
    hl_front_enter();
    t->state = SEG_T_OFF;
    keep_counts(t);
    unlink_thread(t);
    hl_front_leave();
}

static unsigned ident_other(void *const *fp, size_t size, seg_tls_t *t) {
    (void)fp;
    (void)size;
    (void)t;
    return HL_SEG_OTHER;
}

static unsigned ident_random(void *const *fp, size_t size, seg_tls_t *t) {
    (void)fp;
    (void)size;
    (void)t;
    return hl_seg_random(hl_seg_table.seed,
                         __atomic_fetch_add(&hl_seg_allocations, 1, __ATOMIC_RELAXED));
}

/* The identification of a mode. */
static seg_ident_fn ident_of(unsigned mode) {
    switch (mode) {
    case SEG_MODE_STACK:
        return hl_seg_ident_of_stack();
    case SEG_MODE_SP:
        return hl_seg_ident_of_sp();
    case SEG_MODE_RANDOM:
        return ident_random;
    default:
        return ident_other;
    }
}

void hl_seg_thread_start(seg_tls_t *t) {
    if (t->state != SEG_T_NEW) return;
    t->state = SEG_T_STARTING;
    seg_caches_t *c = &hl_seg_caches;
    t->ctx = c->ctx;
    t->cx = c->cx;
    t->ra = c->ra;
    t->path = c->path;
    t->rules = c->rules;
    hl_front_enter(); /* initialises the allocator on first use */
    unsigned mode = hl_seg_mode;
    hl_front_leave();
    /* the exit hook unlinks the thread before its TLS goes away; without it
     * the thread stays out of the registry (and its counters out of the report) */
    t->caches_on = (uint8_t)hl_seg_caching;
    if (hl_platform_thread_exit(thread_exit, t) != 0) {
        t->ident_mode = ident_of(mode);
        hl_seg_ident_home(t);
        if (t->pend == SEG_PEND_HINT) hl_seg_ident_away(t); /* (this call's) */
        t->state = SEG_T_OFF;
        return;
    }
    hl_front_enter();
    t->next = threads;
    threads = t;
    for (size_t n = 0; n <= SF_MAP_MAX; n++)
        t->map[n] = (unsigned char)sf_class_of(&hl_seg_cores[0], n);
    t->ident_mode = ident_of(mode);
    hl_seg_ident_home(t);
    /* a site hint that came before the start is this call's */
    if (t->pend == SEG_PEND_HINT && mode != SEG_MODE_RANDOM && mode != SEG_MODE_ONE) {
        t->ident = hl_seg_ident_hinted;
        hl_seg_ident_away(t);
    }
    t->state = hl_seg_front_on ? SEG_T_ARMED : SEG_T_OFF;
    if (!hl_seg_front_on) memset(t->map, 0, sizeof t->map); /* every call takes the lock */
    hl_front_leave();
}

unsigned hl_seg_ident_start(void *const *fp, size_t size, seg_tls_t *t) {
    if (t->state == SEG_T_NEW) hl_seg_thread_start(t);
    if (t->ident == hl_seg_ident_start) /* a nested call during the start (the exit hook's) */
        return HL_SEG_OTHER;
    return t->ident(fp, size, t);
}

unsigned hl_seg_ident_hinted(void *const *fp, size_t size, seg_tls_t *t) {
    (void)fp;
    (void)size;
    hl_seg_ident_home(t);
    unsigned c = t->hint_cls;
    if (c >= HL_SEG_CLASSES) c = HL_SEG_OTHER;
    if (t->pend == SEG_PEND_HINT) { /* the hint is spent here, not on the locked path */
        t->hinted[c]++;
        t->pend = SEG_PEND_NONE;
    }
    return c;
}

/* calloc's miss handed over to malloc's path: the same segment, not identified twice. */
static unsigned ident_pending(void *const *fp, size_t size, seg_tls_t *t) {
    (void)fp;
    (void)size;
    hl_seg_ident_home(t);
    t->pend = SEG_PEND_NONE;
    return t->hint_cls < HL_SEG_CLASSES ? t->hint_cls : HL_SEG_OTHER;
}

/* ------------------------------------------------------------------------ */
/* The slow paths                                                            */
/* ------------------------------------------------------------------------ */

/* A slot of segment s this thread now has: entered before its blocks leave. */
static inline void note_slot(const sf_tls_t *c, unsigned s) {
    if (HL_LIKELY(c->base != SF_NO_BASE) && HL_UNLIKELY(seg_of_slot((void *)c->base) != s + 1))
        __atomic_store_n(&hl_seg_slot_seg[(c->base >> SF_SLOT_SHIFT) & (SEG_SLOT_TABLE - 1)],
                         (uint16_t)(s << SEG_CORE_SHIFT | SEG_SLOT_CORE), __ATOMIC_RELEASE);
}

static void *more(size_t size, unsigned s, int *fresh) {
    seg_tls_t *t = &hl_seg_t;
    if (HL_UNLIKELY(t->state != SEG_T_ARMED)) {
        if (t->state == SEG_T_NEW) hl_seg_thread_start(t);
    }
    if (s >= HL_SEG_CLASSES) s = HL_SEG_OTHER;
    if (t->state == SEG_T_ARMED && size <= SEG_FAST_MAX) {
        sf_tls_t *c = &t->core[s].t;
        void *p = sf_malloc_slow(&hl_seg_cores[s], c, size, fresh);
        note_slot(c, s);
        if (p) return p;
    }
    /* the locked path: segregated.c takes the class from here */
    if (t->pend != SEG_PEND_HINT || hl_seg_mode == SEG_MODE_RANDOM) {
        t->pend = hl_seg_mode == SEG_MODE_UNREADY ? SEG_PEND_NONE : SEG_PEND_FRONT;
        t->pend_cls = (uint8_t)s;
    }
    return NULL;
}

void *__attribute__((noinline)) hl_seg_front_more(size_t size, unsigned s) {
    int fresh;
    return more(size, s, &fresh);
}

void *__attribute__((noinline)) hl_seg_front_more_calloc(size_t size, unsigned s) {
    int fresh = 0;
    void *p = more(size, s, &fresh);
    if (p) return fresh ? p : memset(p, 0, size);
    /* the shim's calloc now calls malloc's path: the same segment, once */
    seg_tls_t *t = &hl_seg_t;
    if (t->ident_mode != hl_seg_ident_start && t->ident == t->ident_mode &&
        t->pend != SEG_PEND_HINT) {
        t->hint_cls = (uint8_t)s;
        t->pend = SEG_PEND_CALLOC;
        t->ident = ident_pending;
        hl_seg_ident_away(t);
    }
    return NULL;
}

void *__attribute__((noinline)) hl_seg_front_alloc_miss(size_t size, void *const *fp,
                                                          seg_ctx_t *e, int zero) {
    seg_tls_t *t = &hl_seg_t;
    return hl_seg_front_take(t, (size_t)hl_seg_ident_miss(fp, size, t, e) << SEG_CORE_SHIFT, size, zero);
}

void *__attribute__((noinline)) hl_seg_front_alloc_other(size_t size, void *const *fp,
                                                           seg_ctx_t *e, int zero, uintptr_t y0,
                                                           uintptr_t y1) {
    seg_tls_t *t = &hl_seg_t;
    return hl_seg_front_take(t, (size_t)hl_seg_ident_other(fp, size, t, e, y0, y1) << SEG_CORE_SHIFT,
                             size, zero);
}

/* malloc's misses (seg_front.h's hl_seg_front_malloc_whole), each finished
 * here: the cores' block, else the shim's locked path (with the segment
 * pending, as hl_seg_front_more leaves it). */
void *__attribute__((noinline)) hl_seg_front_malloc_more(size_t size, size_t core) {
    void *p = hl_seg_front_more(size, (unsigned)(core >> SEG_CORE_SHIFT));
    return p ? p : hl_front_malloc_locked(size);
}

void *__attribute__((noinline)) hl_seg_front_malloc_miss(size_t size, void *const *fp, seg_ctx_t *e) {
    void *p = hl_seg_front_alloc_miss(size, fp, e, 0);
    return p ? p : hl_front_malloc_locked(size);
}

void *__attribute__((noinline)) hl_seg_front_malloc_other(size_t size, void *const *fp, seg_ctx_t *e,
                                                            uintptr_t y0, uintptr_t y1) {
    void *p = hl_seg_front_alloc_other(size, fp, e, 0, y0, y1);
    return p ? p : hl_front_malloc_locked(size);
}

void *__attribute__((noinline)) hl_seg_front_malloc_sp_miss(size_t size, void *const *fp,
                                                             seg_ra_slot_t *e) {
    seg_tls_t *t = &hl_seg_t;
    size_t core = (size_t)hl_seg_sp_miss(fp, size, t, e) << SEG_CORE_SHIFT;
    void *p = hl_seg_front_take(t, core, size, 0);
    return p ? p : hl_front_malloc_locked(size);
}

int __attribute__((noinline)) hl_seg_front_free_more(void *p) {
    unsigned s = seg_of_slot(p);
    if (!s) return 0; /* a large block (the segment's best fit), or not ours */
    seg_tls_t *t = &hl_seg_t;
    return sf_free_slow(&hl_seg_cores[s - 1], &t->core[s - 1].t, p); /* (counted there) */
}

/* ------------------------------------------------------------------------ */
/* Counters, statistics, fork (under the lock)                               */
/* ------------------------------------------------------------------------ */

static void add_ident(hl_seg_ident_stats_t *to, const uint64_t *lv) {
    for (unsigned l = 0; l < HL_SEG_LEVELS; l++) {
        uint64_t n = lv[l] + lv[l + HL_SEG_LEVELS];
        to->level[l] += n;
        to->calls += n;
        to->unknown += lv[l + HL_SEG_LEVELS];
    }
}

void hl_seg_front_sum(hl_seg_counts_t *c) {
    memset(c, 0, sizeof *c);
    unsigned nsegs = hl_seg_table.nsegments == 4 ? 4 : 1;
    for (unsigned s = 0; s < nsegs; s++) {
        heaplab_alloc_stats_t st;
        memset(&st, 0, sizeof st);
        sf_stats_locked(&hl_seg_cores[s], &st);
        c->objects[s] = st.mallocs;
        c->frees += st.frees;
    }
    memcpy(c->hinted, gone_hinted, sizeof gone_hinted);
    add_ident(&c->id, gone_lv);
    hl_seg_ident_stats_t *id = &c->id;
    id->cache = gone_cache;
    int self = 0;
    for (const seg_tls_t *t = threads;; t = t->next) {
        if (!t) { /* a thread that never armed (the report's own, at exit) */
            if (self) break;
            t = &hl_seg_t;
            self = 2;
        }
        /* another thread's counters move while we read them: a report, not a check */
        for (unsigned i = 0; i < HL_SEG_CLASSES; i++)
            c->hinted[i] += t->hinted[i];
        uint64_t lv[2 * HL_SEG_LEVELS];
        memcpy(lv, t->lv, sizeof lv);
        hl_seg_ident_count(t, lv);
        add_ident(id, lv);
        add_cache(&id->cache, &t->cnt);
        if (self == 2) break;
        self |= t == &hl_seg_t;
    }
    for (unsigned l = 0; l < HL_SEG_LEVELS; l++)
        id->frames += (uint64_t)l * id->level[l];
}

void hl_seg_front_stats(struct heaplab_alloc_stats *s) {
    hl_seg_counts_t c;
    hl_seg_front_sum(&c);
    for (unsigned i = 0; i < HL_SEG_CLASSES; i++)
        s->mallocs += c.objects[i];
    s->frees += c.frees;
}

void hl_seg_front_fork_child(void) {
    seg_tls_t *self = &hl_seg_t;
    unsigned nsegs = hl_seg_table.nsegments == 4 ? 4 : 1;
    for (unsigned s = 0; s < nsegs; s++)
        if (hl_seg_cores[s].inited) sf_fork_child_locked(&hl_seg_cores[s], &self->core[s].t);
    for (seg_tls_t *t = threads, *n; t; t = n) {
        n = t->next;
        if (t != self) {
            keep_counts(t);
            unlink_thread(t);
        }
    }
}
