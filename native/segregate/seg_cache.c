/*
 * seg_cache.c: the per-thread caches of free blocks, and the per-thread
 * counters (seg_thread.h draws them; seg_front.h has the fast paths, which
 * run without the lock).  What is here runs rarely, under the shim's lock
 * unless said otherwise:
 *
 *   thread start (outside the lock)  register the exit hook, join the registry
 *   thread exit                      every cached block back to its segment,
 *                                    the counters to the retired totals
 *   fork child                       the other threads are gone: their caches
 *                                    are dropped (their blocks stay "in use":
 *                                    a thread may have been half-way through
 *                                    a list), their counters kept
 *   second free of a cached block    a fatal error (found on this thread's list)
 *   the checker                      this thread's lists against the segments
 *
 *   registry: threads ─▶ [t1] ─▶ [t2] ─▶ ...   (seg_thread_t.next, under the lock)
 *
 * Invariants (between calls, for an armed thread t):
 *   count[c][i] == length of head[c][i] <= hl_seg_cache_cap[i];
 *   every block on head[c][i] is in use in segment c, of (i + 2) * 16 bytes,
 *   with hl_seg_cache_key in its second word; no block is on two lists.
 */
#include "hl_internal.h"
#include "seg.h"
#include "seg_front.h"
#include "seg_heap.h"
#include "seg_thread.h"

#include <string.h>

__attribute__((visibility("hidden"), tls_model("initial-exec"))) __thread seg_thread_t hl_seg_tls;

static seg_thread_t *threads;
/* the counters of threads that are gone */
static uint64_t gone_pops[HL_SEG_CLASSES], gone_pushes, gone_hinted[HL_SEG_CLASSES];
static hl_seg_ident_stats_t gone_id;

/* A thread's identification counters into the report's form. */
static void add_ident(hl_seg_ident_stats_t *to, const seg_thread_t *t) {
    for (unsigned l = 0; l < HL_SEG_LEVELS; l++) {
        uint64_t n = t->lv[l] + t->lv[l + HL_SEG_LEVELS];
        to->level[l] += n;
        to->calls += n;
        to->unknown += t->lv[l + HL_SEG_LEVELS];
    }
    to->ra_misses += t->ra_misses;
    to->path_hits += t->path_hits;
    to->path_misses += t->path_misses + t->pfx_misses; /* (a prefix filled: a walk's miss) */
    to->frames += t->frames;
}

static void keep_counts(const seg_thread_t *t) {
    for (unsigned c = 0; c < HL_SEG_CLASSES; c++) {
        gone_pops[c] += t->pops[c];
        gone_hinted[c] += t->hinted[c];
    }
    gone_pushes += t->pushes;
    add_ident(&gone_id, t);
}

static void unlink_thread(seg_thread_t *t) {
    for (seg_thread_t **pp = &threads; *pp; pp = &(*pp)->next)
        if (*pp == t) {
            *pp = t->next;
            break;
        }
    t->next = NULL;
}

/* Under the lock: every cached block of t back to its segment. */
static void flush(seg_thread_t *t) {
    for (unsigned c = 0; c < HL_SEG_CLASSES; c++)
        for (unsigned i = 0; i < SEG_NSIZES; i++) {
            void **b = (void **)t->head[c][i];
            while (b) {
                void **next = (void **)b[0];
                b[1] = NULL;
                sh_free(c, b);
                b = next;
            }
            t->head[c][i] = NULL;
            t->count[c][i] = 0;
        }
}

static void thread_exit(void *arg) {
    seg_thread_t *t = arg;
    hl_front_enter();
    t->state = SEG_T_OFF; /* what it frees from now on goes to the segments */
    flush(t);
    keep_counts(t);
    memset(t->pops, 0, sizeof t->pops);
    memset(t->hinted, 0, sizeof t->hinted);
    t->pushes = 0;
    memset(t->lv, 0, sizeof t->lv);
    t->ra_misses = t->path_hits = t->path_misses = t->frames = t->pfx_misses = 0;
    unlink_thread(t);
    hl_front_leave();
}

void hl_seg_thread_start(void) {
    seg_thread_t *t = &hl_seg_tls;
    if (t->state != SEG_T_NEW) return;
    t->state = SEG_T_STARTING;
    hl_front_enter(); /* initialises the allocator on first use */
    int on = hl_seg_cache_cap[0] != 0;
    hl_front_leave();
    /* the exit hook unlinks the thread before its TLS goes away; without it
     * the thread stays out of the registry (and its counters out of the report) */
    if (hl_platform_thread_exit(thread_exit, t) != 0) {
        t->state = SEG_T_OFF;
        return;
    }
    hl_front_enter();
    t->next = threads;
    threads = t;
    t->state = on ? SEG_T_ARMED : SEG_T_OFF; /* off: HEAPLAB_SEG_CACHE=0, the pad layer */
    hl_front_leave();
}

/* The class of a new object when there are four segments. */
static inline unsigned front_class(seg_thread_t *t, unsigned mode, void *const *fp, size_t size) {
    if (HL_LIKELY(mode == SEG_MODE_STACK))
        return t->pend == SEG_PEND_HINT ? t->pend_cls : hl_seg_identify(fp, size);
    if (mode == SEG_MODE_RANDOM)
        return hl_seg_random(hl_seg_table.seed,
                             __atomic_fetch_add(&hl_seg_allocations, 1, __ATOMIC_RELAXED));
    if (mode == SEG_MODE_SP) return t->pend == SEG_PEND_HINT ? t->pend_cls : hl_seg_identify_sp(fp);
    return t->pend == SEG_PEND_HINT ? t->pend_cls : HL_SEG_OTHER; /* ONE, OTHER, UNREADY */
}

void *__attribute__((noinline)) hl_seg_front_malloc4(size_t size, void *const *fp) {
    seg_thread_t *t = &hl_seg_tls;
    if (HL_UNLIKELY(t->state == SEG_T_NEW)) hl_seg_thread_start(); /* initialises the allocator */
    unsigned mode = hl_seg_mode;
    unsigned c = mode == SEG_MODE_ONE ? 0 : front_class(t, mode, fp, size);
    if (c >= HL_SEG_CLASSES) c = HL_SEG_OTHER;
    unsigned pend = t->pend;
    if (t->state == SEG_T_ARMED && size <= SEG_MAX_BLOCK - 8) {
        unsigned i = seg_size_index(SH_BLOCK(size));
        void **b = (void **)t->head[c][i];
        if (b) {
            t->head[c][i] = b[0];
            t->count[c][i]--;
            b[1] = NULL;
            t->pops[c]++;
            if (pend == SEG_PEND_HINT) t->hinted[c]++;
            t->pend = SEG_PEND_NONE;
            return b;
        }
    }
    if (pend != SEG_PEND_HINT) t->pend = mode == SEG_MODE_UNREADY ? SEG_PEND_NONE : SEG_PEND_FRONT;
    t->pend_cls = (uint8_t)c;
    return NULL;
}

int hl_seg_cache_refree(void *p) {
    seg_thread_t *t = &hl_seg_tls;
    unsigned c = sh_index_of(p);
    if (c >= HL_SEG_CLASSES) return 0;
    unsigned i = seg_size_index(SH_HDR_SIZE(sh_header(p)));
    for (void **b = (void **)t->head[c][i]; b; b = (void **)b[0])
        if (b == p) hl_fatal("free of %p, which is already free (a double free)", p);
    return 0;
}

void hl_seg_cache_sum(uint64_t pops[HL_SEG_CLASSES], uint64_t *pushes,
                      uint64_t hinted[HL_SEG_CLASSES], hl_seg_ident_stats_t *id) {
    memcpy(pops, gone_pops, sizeof gone_pops);
    memcpy(hinted, gone_hinted, sizeof gone_hinted);
    *pushes = gone_pushes;
    *id = gone_id;
    int self = 0;
    for (const seg_thread_t *t = threads; t; t = t->next) {
        /* another thread's counters move while we read them: a report, not a check */
        for (unsigned c = 0; c < HL_SEG_CLASSES; c++) {
            pops[c] += t->pops[c];
            hinted[c] += t->hinted[c];
        }
        *pushes += t->pushes;
        add_ident(id, t);
        self |= t == &hl_seg_tls;
    }
    if (!self) { /* a thread that never armed (the report's own, at exit) */
        const seg_thread_t *t = &hl_seg_tls;
        for (unsigned c = 0; c < HL_SEG_CLASSES; c++) {
            pops[c] += t->pops[c];
            hinted[c] += t->hinted[c];
        }
        *pushes += t->pushes;
        add_ident(id, t);
    }
}

void hl_seg_cache_stats(struct heaplab_alloc_stats *s) {
    uint64_t pops[HL_SEG_CLASSES], pushes, hinted[HL_SEG_CLASSES];
    hl_seg_ident_stats_t id;
    hl_seg_cache_sum(pops, &pushes, hinted, &id);
    for (unsigned c = 0; c < HL_SEG_CLASSES; c++)
        s->mallocs += pops[c];
    s->frees += pushes;
}

void hl_seg_cache_check(void) {
    const seg_thread_t *t = &hl_seg_tls;
    if (t->state != SEG_T_ARMED) return;
    for (unsigned c = 0; c < HL_SEG_CLASSES; c++)
        for (unsigned i = 0; i < SEG_NSIZES; i++) {
            size_t n = 0;
            for (void **b = (void **)t->head[c][i]; b; b = (void **)b[0]) {
                HL_CHECK(++n <= t->count[c][i]);
                HL_CHECK(sh_index_of(b) == c && sh_check_block(c, b));
                HL_CHECK(SH_HDR_SIZE(sh_header(b)) == (size_t)(i + 2) * 16);
                HL_CHECK((uint64_t)(uintptr_t)b[1] == hl_seg_cache_key);
            }
            HL_CHECK(n == t->count[c][i] && n <= hl_seg_cache_cap[i]);
        }
}

void hl_seg_cache_fork_child(void) {
    seg_thread_t *self = &hl_seg_tls;
    for (seg_thread_t *t = threads, *n; t; t = n) {
        n = t->next;
        if (t != self) {
            keep_counts(t);
            unlink_thread(t);
        }
    }
}
