/*
 * seg_heap.h: each segment's best-fit heap, behind a small interface: the
 * blocks its fast core does not serve (requests over 32 KiB, and the
 * memalign family), under the lock.  It is seg_bestfit.c: vmalloc's best
 * fit over dlmalloc-style bins on the zoo's boundary-tag heap
 * (native/alloc/btag.h), one instance per segment; the small blocks are the
 * segment's fast core's (segregated.c, native/alloc/fastcore.h).
 *
 *   segment i:  sh_bounds[i].lo                                  sh_bounds[i].hi
 *               |[block][block][free][block] ....... [top ........]|
 *                 ▲ every block handed out has one header word just below its
 *                   payload: its size in bytes (a multiple of 16) | flags
 *                   (bit 0: in use); SH_HDR_SIZE / SH_HDR_INUSE read it
 *
 * Contract:
 *   - instance i (0 .. HL_SEG_CLASSES-1) is one contiguous heap whose first
 *     byte lies at i x 64 KB modulo 2 MB and which grows 2 MB at a time
 *     (paper 001 §4.2); it never shrinks, so a pointer once inside
 *     [lo, hi) stays inside;
 *   - a request of n bytes takes a block of SH_BLOCK(n) bytes or more;
 *   - every function but the inline readers runs under the shim's lock; the
 *     readers (sh_index_of, the header of a block the caller owns) run
 *     without it.
 */
#ifndef HL_SEG_HEAP_H
#define HL_SEG_HEAP_H

#include "hl_alloc.h"
#include "seg.h"

#define SH_HDR_INUSE ((size_t)1)
#define SH_HDR_FLAGS ((size_t)15)

/* The block bytes a request of n bytes takes (header included). */
static inline size_t SH_BLOCK(size_t n) {
    size_t b = (n + 8 + 15) & ~(size_t)15;
    return b < 32 ? 32 : b;
}
/* The header word of a block from its payload. */
static inline size_t sh_header(const void *p) {
    return ((const size_t *)p)[-1];
}
static inline size_t SH_HDR_SIZE(size_t h) {
    return h & ~SH_HDR_FLAGS;
}

/* Each instance's bounds, for lock-free reads: lo is set once (at the first
 * growth), hi only grows. */
typedef struct sh_bounds {
    uintptr_t lo, hi;
} sh_bounds_t;
extern sh_bounds_t sh_bounds[HL_SEG_CLASSES];
extern unsigned sh_count; /* instances in use */

/* The instance holding p, or HL_SEG_CLASSES. */
static inline unsigned sh_index_of(const void *p) {
    uintptr_t a = (uintptr_t)p;
    for (unsigned i = 0; i < sh_count; i++) {
        uintptr_t lo = __atomic_load_n(&sh_bounds[i].lo, __ATOMIC_RELAXED);
        if (a - lo < __atomic_load_n(&sh_bounds[i].hi, __ATOMIC_RELAXED) - lo) return i;
    }
    return HL_SEG_CLASSES;
}

/* ---- under the lock ---- */

/* Instance i over the platform heap ph (nothing is reserved before its
 * first growth).  Returns 0, or -1. */
int sh_init(unsigned i, hl_heap_t *ph);
void *sh_malloc(unsigned i, size_t n);
/* p's block is in use in instance i (checked with sh_check_block). */
void sh_free(unsigned i, void *p);
/* p's block grown or shrunk in place to serve n bytes: p, or NULL (it must move). */
void *sh_resize(unsigned i, void *p, size_t n);
void *sh_memalign(unsigned i, size_t align, size_t n);
size_t sh_usable(const void *p);
/* 1 if p is the payload of a block in use in instance i. */
int sh_check_block(unsigned i, const void *p);
/* The instance's invariants (the checker). */
void sh_check(unsigned i);

typedef struct sh_info {
    uintptr_t first, end; /* the segment's first byte and its break (0 before it grew) */
    uint64_t grows;
    uint64_t bytes_live, bytes_peak; /* bytes of blocks in use (cached ones included) */
} sh_info_t;
void sh_get_info(unsigned i, sh_info_t *out);

#endif
