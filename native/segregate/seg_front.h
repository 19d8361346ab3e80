/*
 * seg_front.h: the segmented allocator's front end for the zoo's shim
 * (native/alloc/shim.c compiled with -DHL_FRONT_H='"seg_front.h"' and
 * -fno-omit-frame-pointer).  Outside the lock, for every new object
 * (malloc, calloc, realloc of NULL):
 *
 *   class  = the site hint's (replay), else hl_seg_identify(malloc's frame)
 *            (seg_ident.c), else RANDOM's draw, else 0 (one segment)
 *   block  = this thread's cached free block of (class, SH_BLOCK(size)), if any
 *
 * and for every free of a small block in use: keep it in this thread's cache
 * of (its segment, its size), while the list is shorter than its cap.  A miss
 * of either goes to the shim's locked path (hl_alloc_segregated), which takes
 * the class from the thread's pending prediction.
 *
 * DEFAULT's libraries use a shim compiled with -DHL_SEG_ONE: the same front
 * end without the identification's branches (a table with one segment
 * works with either).
 *
 * The frame: the shim's entry points keep a frame pointer, so that
 * __builtin_frame_address(0) there gives fp with fp[0] the program's rbp and
 * fp[1] the return address into the program (the walk starts at the
 * program's frame, never at the allocator's own).
 */
#ifndef HL_SEG_FRONT_H
#define HL_SEG_FRONT_H
#include "seg.h"
#include "seg_heap.h"
#include "seg_thread.h"

/* A block of this thread's cache for class c, or NULL with the class left
 * pending for the locked path (no prediction pending before). */
static inline __attribute__((always_inline)) void *hl_seg_cache_pop(seg_thread_t *t, unsigned c,
                                                                    size_t size) {
    if (HL_LIKELY(size <= SEG_MAX_BLOCK - 8)) {
        unsigned i = seg_size_index(SH_BLOCK(size));
        void **b = (void **)t->head[c][i];
        if (HL_LIKELY(b != NULL)) {
            t->head[c][i] = b[0];
            t->count[c][i]--;
            b[1] = NULL;
            t->pops[c]++;
            return b;
        }
    }
    t->pend = SEG_PEND_FRONT;
    t->pend_cls = (uint8_t)c;
    return NULL;
}

/* Everything but an armed thread with nothing pending and a predictor that
 * identifies (or one segment): the class, then the cache (seg_cache.c). */
void *hl_seg_front_malloc4(size_t size, void *const *fp);

static inline __attribute__((always_inline)) void *hl_seg_front_malloc(size_t size,
                                                                       void *const *fp) {
    seg_thread_t *t = &hl_seg_tls;
#ifdef HL_SEG_ONE
    /* DEFAULT's shim (one segment, no prediction): nothing to identify */
    if (HL_LIKELY(t->state == SEG_T_ARMED) && HL_LIKELY(t->pend == SEG_PEND_NONE) &&
        HL_LIKELY(hl_seg_mode == SEG_MODE_ONE))
        return hl_seg_cache_pop(t, 0, size);
    return hl_seg_front_malloc4(size, fp);
#endif
    unsigned mode = hl_seg_mode;
    if (HL_LIKELY(t->state == SEG_T_ARMED) && HL_LIKELY(t->pend == SEG_PEND_NONE)) {
        unsigned c = 0;
        if (mode != SEG_MODE_ONE) {
            if (HL_LIKELY(mode == SEG_MODE_STACK))
                c = hl_seg_identify(fp, size);
            else if (mode == SEG_MODE_SP)
                c = hl_seg_identify_sp(fp);
            else
                return hl_seg_front_malloc4(size, fp);
        }
        return hl_seg_cache_pop(t, c, size);
    }
    return hl_seg_front_malloc4(size, fp);
}

static inline __attribute__((always_inline)) int hl_seg_front_free(void *p) {
    seg_thread_t *t = &hl_seg_tls;
    if (HL_UNLIKELY(t->state != SEG_T_ARMED)) return 0;
    unsigned c = sh_index_of(p);
    if (HL_UNLIKELY(c >= HL_SEG_CLASSES)) return 0;
    size_t h = sh_header(p), sz = SH_HDR_SIZE(h);
    if (HL_UNLIKELY(!(h & SH_HDR_INUSE)) || sz > SEG_MAX_BLOCK) return 0;
    unsigned i = seg_size_index(sz);
    if (t->count[c][i] >= hl_seg_cache_cap[i]) return 0;
    void **b = (void **)p;
    if (HL_UNLIKELY((uint64_t)(uintptr_t)b[1] == hl_seg_cache_key)) hl_seg_cache_refree(p);
    b[0] = t->head[c][i];
    b[1] = (void *)(uintptr_t)hl_seg_cache_key;
    t->head[c][i] = b;
    t->count[c][i]++;
    t->pushes++;
    return 1;
}

#define HL_FRONT_MALLOC(size)                                                                      \
    hl_seg_front_malloc((size), (void *const *)__builtin_frame_address(0))
#define HL_FRONT_CALLOC(size) ((void)(size), (void *)0) /* calloc then goes to HL_FRONT_MALLOC */
#define HL_FRONT_FREE(p)      hl_seg_front_free(p)
#define HL_FRONT_SLOW()       ((void)0)
#define HL_FRONT_STATS(s)     hl_seg_cache_stats(s)
#define HL_FRONT_FORK_CHILD() hl_seg_cache_fork_child()
#endif
