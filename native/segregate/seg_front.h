/*
 * seg_front.h: the segmented allocator's lock-free front end for the zoo's
 * shim (native/alloc/shim.c compiled with -DHL_FRONT_H='"seg_front.h"' and
 * -fno-omit-frame-pointer, except SP's shim: below), over one fast core per
 * segment (fastcore.h).
 *
 *   malloc(n), calloc, realloc(NULL, n):
 *     s = the segment                   the predictor's identification: inline
 *                                       (seg_ident.h) in the shims built for one
 *                                       predictor (-DHL_SEG_INLINE_STACK: PATH,
 *                                       STACK; -DHL_SEG_INLINE_SP); else t->ident(fp,
 *                                       n, t), an indirect call through the thread's
 *                                       block (RANDOM, STACK+size, the tests' tables;
 *                                       no mode test, no hint test: a site hint swaps
 *                                       the pointer for one call); DEFAULT
 *                                       (-DHL_SEG_ONE): s = 0
 *     c = t->map[n]                     the class (n <= 1024)
 *     sf_take(core[s], c)               fastcore.h's fast path: pop head[c], or
 *                                       carve downward from carve[c] to floor[c]
 *     else hl_seg_front_more(n, s)      sf_malloc_slow, or the lock with s pending
 *   (malloc, realloc(NULL, n) and calloc's fallback, HL_FRONT_MALLOC_WHOLE in
 *   the SP and STACK/PATH shims: every miss ends in the function it calls,
 *   hl_seg_front_malloc_sp_miss/miss/other or hl_seg_front_malloc_more, and
 *   from there in the shim's locked path; SP's misses and every core's miss
 *   are tail calls, STACK/PATH's identification misses plain calls)
 *
 *   free(p):
 *     s = hl_seg_slot_seg[p >> 33]      the segment whose core owns p's slot
 *     push on core[s].head[(p - base) >> 27] if p is in this thread's slot of it
 *     else hl_seg_front_free_more(p)    another thread's block, or not a core's
 *
 * Both count what they serve in the core's sf_tls_t (mallocs, frees): every
 * object of native/segregate, fastcore.c's included, is compiled with
 * -DSF_COUNT=1 (rules.mk, heaplab-segregate's emit.rs), so that sf_take,
 * sf_free_own and fastcore.c's slow paths count every call (remote frees in
 * the core's remote_frees): the segments' objects for the report, and
 * heaplab_alloc_stats' totals, exact.
 *
 * The frame: the shim's entry points (SP's aside) keep a frame pointer, so that
 * __builtin_frame_address(0) there gives fp with fp[0] the program's rbp and
 * fp[1] the return address into the program (the identification starts at
 * the program's frame, never at the allocator's own).  SP's shim keeps none:
 * SP needs only fp + 2, the caller's stack pointer, which is the entry
 * point's canonical frame address (HL_SEG_FP).
 */
#ifndef HL_SEG_FRONT_H
#define HL_SEG_FRONT_H
#include "seg.h"
#include "seg_ident.h"
#include "seg_thread.h"

#include <string.h>

#if SF_COUNT != 1
#error "native/segregate is compiled with -DSF_COUNT=1 (fastcore.c too): the segments' counts are exact"
#endif

/* The segment of a new object, as its core state's offset in seg_tls_t
 * (s << SEG_CORE_SHIFT: the inline identifications keep it in their slots,
 * so that a hit needs no shift).  (STACK and PATH's inline build takes
 * hl_seg_identify_find in hl_seg_front_alloc instead.) */
static inline __attribute__((always_inline)) size_t hl_seg_front_segment(seg_tls_t *t,
                                                                        void *const *fp,
                                                                        size_t size) {
#if defined(HL_SEG_ONE)
    (void)t;
    (void)fp;
    (void)size;
    return 0;
#elif defined(HL_SEG_INLINE_SP)
    return hl_seg_identify_sp_core(fp, size, t);
#else
    return (size_t)t->ident(fp, size, t) << SEG_CORE_SHIFT;
#endif
}

/* The fast core state of this thread at offset `core` (segment
 * core >> SEG_CORE_SHIFT; a pointer, so that the compiler indexes the lists
 * from it rather than from %fs each time). */
static inline __attribute__((always_inline)) sf_tls_t *hl_seg_core_at(seg_tls_t *t, size_t core) {
    return (sf_tls_t *)((char *)t + core);
}

/* A block of n bytes from the fast core at offset `core` (segment s = core
 * >> SEG_CORE_SHIFT): this thread's list or slab of the size's class
 * (fastcore.h's sf_take: a pop, or a carve downward from the slab), else
 * hl_seg_front_more (sf_malloc_slow, or NULL: the locked path with s
 * pending).  calloc (zero): a carved block was never used and reads as zero
 * (sf_take's fresh); a popped one is cleared. */
static inline __attribute__((always_inline)) void *hl_seg_front_take(seg_tls_t *t, size_t core,
                                                                     size_t size, int zero) {
    if (HL_LIKELY(size <= SF_MAP_MAX)) {
        int fresh;
        void *b = sf_take(hl_seg_core_at(t, core), t->map[size], &fresh);
        if (HL_LIKELY(b != NULL)) return zero && !fresh ? memset(b, 0, size) : b;
    }
    unsigned s = (unsigned)(core >> SEG_CORE_SHIFT);
    return zero ? hl_seg_front_more_calloc(size, s) : hl_seg_front_more(size, s);
}

static inline __attribute__((always_inline)) void *hl_seg_front_alloc(size_t size,
                                                                      void *const *fp, int zero) {
    seg_tls_t *t = &hl_seg_t;
#if defined(HL_SEG_INLINE_STACK)
    /* the identification's fast path (seg_ident.h), its misses out of line
     * with the allocation after them, so that a hit keeps no register */
    seg_ctx_t *e;
    uintptr_t y0, y1;
    int c = hl_seg_identify_find(fp, t, &e, &y0, &y1);
    if (HL_UNLIKELY(c < 0))
        return c == -1 ? hl_seg_front_alloc_miss(size, fp, e, zero)
                       : hl_seg_front_alloc_other(size, fp, e, zero, y0, y1);
    size_t core = (size_t)c;
#else
    size_t core = hl_seg_front_segment(t, fp, size);
#endif
    return hl_seg_front_take(t, core, size, zero);
}

static inline __attribute__((always_inline)) void *hl_seg_front_malloc(size_t size,
                                                                       void *const *fp) {
    return hl_seg_front_alloc(size, fp, 0);
}

#if defined(HL_SEG_INLINE_SP) || defined(HL_SEG_INLINE_STACK)
/* malloc whole (the shim's HL_FRONT_MALLOC_WHOLE): the identification's hit
 * and the core's pop or carve inline; every miss a call into seg_front.c
 * that finishes the allocation and ends, if the cores cannot serve, in the
 * shim's locked path.  No call returns here with work left, so the hit path
 * saves no register.  The core's miss and SP's identification miss are tail
 * calls (SP's shim, compiled without a frame pointer, keeps no frame);
 * STACK/PATH's identification misses are plain calls (below). */
static inline __attribute__((always_inline)) void *hl_seg_front_malloc_whole(size_t size,
                                                                             void *const *fp) {
    seg_tls_t *t = &hl_seg_t;
#if defined(HL_SEG_INLINE_STACK)
    seg_ctx_t *e;
    uintptr_t y0, y1;
    int c = hl_seg_identify_find(fp, t, &e, &y0, &y1);
    if (HL_UNLIKELY(c < 0)) {
        /* A call, not a tail call: the misses walk the program's frames from
         * fp, this entry point's frame, which a tail call would hand over to
         * the callee's saves.  Nothing is live after it, so the hit path
         * still saves no register. */
        void *p = c == -1 ? hl_seg_front_malloc_miss(size, fp, e)
                            : hl_seg_front_malloc_other(size, fp, e, y0, y1);
        __asm__("" : "+r"(p));
        return p;
    }
    size_t core = (size_t)c;
#elif defined(HL_SEG_INLINE_SP)
    seg_ra_slot_t *e = hl_seg_sp_lookup(fp, t);
    if (HL_UNLIKELY(!hl_seg_sp_is_hit(e, fp))) return hl_seg_front_malloc_sp_miss(size, fp, e);
    size_t core = hl_seg_sp_hit(e);
#endif
    if (HL_LIKELY(size <= SF_MAP_MAX)) {
        int fresh;
        void *b = sf_take(hl_seg_core_at(t, core), t->map[size], &fresh);
        if (HL_LIKELY(b != NULL)) return b;
    }
    return hl_seg_front_malloc_more(size, core);
}
#endif

/* calloc: a carved block was never used (zero); a popped one is cleared
 * (hl_seg_front_take). */
static inline __attribute__((always_inline)) void *hl_seg_front_calloc(size_t size,
                                                                       void *const *fp) {
    return hl_seg_front_alloc(size, fp, 1);
}

static inline __attribute__((always_inline)) int hl_seg_front_free(void *p) {
    seg_tls_t *t = &hl_seg_t;
#ifdef HL_SEG_ONE
    sf_tls_t *c = &t->core[0].t;
#else
    /* the segment of p's slot, as the offset of its core state (0 for what is
     * no core's: then segment 0's, whose slots do not hold it either) */
    sf_tls_t *c = (sf_tls_t *)((char *)t + seg_core_offset(p));
#endif
    if (HL_LIKELY(sf_free_own(c, p))) return 1;
    return hl_seg_front_free_more(p);
}

/* The entry point's frame: fp[1] is the return address into the program.
 * SP reads only the caller's stack pointer, fp + 2, which is the entry
 * point's canonical frame address: its shim is compiled without a frame
 * pointer (rules.mk) and takes fp from that, so that malloc's hit path
 * pushes nothing.  STACK and PATH read the program's frames from fp (fp[0]
 * is the program's rbp): their entry points keep a frame pointer. */
#if defined(HL_SEG_INLINE_SP)
#define HL_SEG_FP() ((void *const *)__builtin_dwarf_cfa() - 2)
#else
#define HL_SEG_FP() ((void *const *)__builtin_frame_address(0))
#endif
#define HL_FRONT_MALLOC(size)       hl_seg_front_malloc((size), HL_SEG_FP())
#if defined(HL_SEG_INLINE_SP) || defined(HL_SEG_INLINE_STACK)
/* (DEFAULT's malloc is shrink-wrapped as it is: its hit keeps no frame; the
 * generic shim's identification is a call, which saves registers anyway) */
#define HL_FRONT_MALLOC_WHOLE(size) hl_seg_front_malloc_whole((size), HL_SEG_FP())
#endif
/* calloc(n, m) that overflows never comes here (the shim fails it first);
 * NULL from this: the locked path (the shim's calloc clears it) */
#define HL_FRONT_CALLOC(size)       hl_seg_front_calloc((size), HL_SEG_FP())
#define HL_FRONT_FREE(p)      hl_seg_front_free(p)
#define HL_FRONT_SLOW()       ((void)0)
#define HL_FRONT_STATS(s)     hl_seg_front_stats(s)
#define HL_FRONT_FORK_CHILD() hl_seg_front_fork_child()
#endif
