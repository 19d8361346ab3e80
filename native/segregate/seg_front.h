/*
 * seg_front.h: the segmented allocator's lock-free front end for the zoo's
 * shim (native/alloc/shim.c compiled with -DHL_FRONT_H='"seg_front.h"' and
 * -fno-omit-frame-pointer), over one fast core per segment (fastcore.h).
 *
 *   malloc(n), calloc, realloc(NULL, n):
 *     s = t->ident(fp, n, t)            the segment: the predictor's identification
 *                                       (seg_ident.c), an indirect call through the
 *                                       thread's block (no mode test, no hint test:
 *                                       a site hint swaps the pointer for one call);
 *                                       DEFAULT (-DHL_SEG_ONE): s = 0, no call
 *     c = t->map[n]                     the class (n <= 1024)
 *     pop core[s].head[c], or carve core[s].bump[c]      fastcore.h's fast path
 *     else hl_seg_front_more(n, s)      sf_malloc_slow, or the lock with s pending
 *
 *   free(p):
 *     s = hl_seg_slot_seg[p >> 33] - 1  the segment whose core owns p's slot
 *     push on core[s].head[(p - base) >> 27] if p is in this thread's slot of it
 *     else hl_seg_front_free_more(p)    another thread's block, or not a core's
 *
 * Both count what they serve in the core's sf_tls_t (mallocs, frees): the
 * segments' objects for the report, and heaplab_alloc_stats' totals.
 *
 * The frame: the shim's entry points keep a frame pointer, so that
 * __builtin_frame_address(0) there gives fp with fp[0] the program's rbp and
 * fp[1] the return address into the program (the identification starts at
 * the program's frame, never at the allocator's own).
 */
#ifndef HL_SEG_FRONT_H
#define HL_SEG_FRONT_H
#include "seg.h"
#include "seg_thread.h"

#include <string.h>

static inline __attribute__((always_inline)) unsigned hl_seg_front_segment(seg_tls_t *t,
                                                                          void *const *fp,
                                                                          size_t size) {
#ifdef HL_SEG_ONE
    (void)t;
    (void)fp;
    (void)size;
    return 0;
#else
    return t->ident(fp, size, t);
#endif
}

static inline __attribute__((always_inline)) void *hl_seg_front_malloc(size_t size,
                                                                       void *const *fp) {
    seg_tls_t *t = &hl_seg_t;
    unsigned s = hl_seg_front_segment(t, fp, size);
    if (HL_LIKELY(size <= SF_MAP_MAX)) {
        sf_tls_t *c = &t->core[s].t;
        unsigned k = t->map[size];
        void **b = (void **)c->head[k];
        if (HL_LIKELY(b != NULL)) {
            c->head[k] = *b;
            c->mallocs++;
            return b;
        }
        char *x = c->bump[k];
        if (HL_LIKELY(x < c->end[k])) {
            c->bump[k] = x + c->bsize[k];
            c->mallocs++;
            return x;
        }
    }
    return hl_seg_front_more(size, s);
}

/* calloc: a carved block was never used (zero); a popped one is cleared. */
static inline __attribute__((always_inline)) void *hl_seg_front_calloc(size_t size,
                                                                       void *const *fp) {
    seg_tls_t *t = &hl_seg_t;
    unsigned s = hl_seg_front_segment(t, fp, size);
    if (HL_LIKELY(size <= SF_MAP_MAX)) {
        sf_tls_t *c = &t->core[s].t;
        unsigned k = t->map[size];
        void **b = (void **)c->head[k];
        if (HL_LIKELY(b != NULL)) {
            c->head[k] = *b;
            c->mallocs++;
            return memset(b, 0, size);
        }
        char *x = c->bump[k];
        if (HL_LIKELY(x < c->end[k])) {
            c->bump[k] = x + c->bsize[k];
            c->mallocs++;
            return x;
        }
    }
    return hl_seg_front_more_calloc(size, s);
}

static inline __attribute__((always_inline)) int hl_seg_front_free(void *p) {
    seg_tls_t *t = &hl_seg_t;
#ifdef HL_SEG_ONE
    sf_tls_t *c = &t->core[0].t;
#else
    sf_tls_t *c = &t->core[(seg_of_slot(p) - 1) & (HL_SEG_CLASSES - 1)].t;
#endif
    uintptr_t k = ((uintptr_t)p - c->base) >> SF_CLASS_SHIFT;
    if (HL_LIKELY(k < SF_NCLASS)) {
        *(void **)p = c->head[k];
        c->head[k] = p;
        c->frees++;
        return 1;
    }
    return hl_seg_front_free_more(p);
}

#define HL_FRONT_MALLOC(size)                                                                      \
    hl_seg_front_malloc((size), (void *const *)__builtin_frame_address(0))
/* calloc(n, m) that overflows never comes here (the shim fails it first);
 * NULL from this: the locked path (the shim's calloc clears it) */
#define HL_FRONT_CALLOC(size)                                                                      \
    hl_seg_front_calloc((size), (void *const *)__builtin_frame_address(0))
#define HL_FRONT_FREE(p)      hl_seg_front_free(p)
#define HL_FRONT_SLOW()       ((void)0)
#define HL_FRONT_STATS(s)     hl_seg_front_stats(s)
#define HL_FRONT_FORK_CHILD() hl_seg_front_fork_child()
#endif
