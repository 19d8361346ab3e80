/*
 * bsd.c: Chris Kingsley's allocator of the 4.2BSD release (paper 000 §2.1
 * "BSD"; paper 002 §4 "BSD").
 *
 *   Block layout (b is 8 mod 16 so that the payload is 16-aligned)
 *
 *        b                      b+8                          b + 2^(i+4)
 *        +----------------------+-----------------------------+
 *   used | MAGIC | i | 0...     | payload (2^(i+4) - 8 bytes) | next block
 *        +----------------------+-----------------------------+
 *   free | next free block of class i (a pointer)  | ...      |
 *        +----------------------+-----------------------------+
 *
 *   An over-aligned block (memalign) is a normal block p holding, just below
 *   the aligned pointer q, a second header: ALIGNED | offset q - p.
 *
 *   The heap: every refill ("morecore") starts at a 1 KiB boundary + 8.  A
 *   class smaller than HEAPLAB_BSD_CHUNK (2 KiB, "take 2k unless the block is
 *   bigger than that") gets a chunk of that size carved into blocks of its
 *   class; a larger class gets exactly one block.
 *
 *   base   base+8 (1K boundary + 8)
 *   +------+-------------------------------+------------------+---- ...
 *   | pad  | 2 KiB of 64-byte blocks       | one 4 KiB block  |
 *   +------+-------------------------------+------------------+---- ...
 *
 * Invariants: class i holds blocks of exactly 2^(i+4) bytes, on nextf[i] when
 * free (LIFO, singly linked) and marked MAGIC/i when in use; blocks never
 * change class, split or coalesce; a free block's first byte is never MAGIC
 * (its low pointer byte is 8 mod 16), so a double free is always caught.
 *
 * From the papers: sizes rounded up to powers of two minus a constant (the
 * header), one free list per class, more storage taken from sbrk when a list
 * is empty, no coalescing; realloc keeps the block when the new size still
 * belongs to its class (4.2BSD's realloc).  Departures: the header is one
 * 8-byte word (4.2BSD's `union overhead` was one 4-byte VAX word) and the
 * smallest class is 16 bytes (payload 8), since payloads are 16-aligned;
 * 4.2BSD's smallest was 8 bytes (payload 4).
 */
#include "hl_alloc.h"

#include <string.h>

#define W        8
#define NBUCKETS 38    /* 2^(37+4) = 2^41 > HL_MAX_REQUEST + W */
#define MAGIC    0xefu /* 4.2BSD's magic byte */
#define ALIGNED  0xeau /* header of an interior, over-aligned pointer */

typedef union bsd_hdr {
    union bsd_hdr *next; /* when free */
    uint64_t word;       /* when in use: MAGIC | i << 8, or ALIGNED | offset << 8 */
} bsd_hdr_t;

static bsd_hdr_t *nextf[NBUCKETS];
static size_t carved[NBUCKETS], nfree[NBUCKETS]; /* for the checker */
static char *heap_lo, *heap_hi;
static size_t chunk;

static int bsd_init(void) {
    chunk = hl_tunable("HEAPLAB_BSD_CHUNK", 2048);
    if (!HL_IS_POW2(chunk) || chunk < 1024)
        hl_fatal("HEAPLAB_BSD_CHUNK=%zu: must be a power of two >= 1024", chunk);
    char *base = hl_sbrk(W); /* blocks start at 8 mod 16 */
    if (!base) return -1;
    heap_lo = heap_hi = base + W;
    return 0;
}

/* Refill class i from the heap (4.2BSD morecore). */
static int __attribute__((noinline)) morecore(unsigned i) {
    size_t sz = (size_t)1 << (i + 4);
    /* "Insure memory is allocated on a page boundary": 1 KiB + 8 here. */
    size_t mis = (uintptr_t)(heap_hi - W) & 1023;
    if (mis) {
        if (!hl_sbrk((intptr_t)(1024 - mis))) return -1;
        heap_hi += 1024 - mis;
    }
    size_t amt = sz < chunk ? chunk : sz;
    if (!hl_sbrk((intptr_t)amt)) return -1;
    char *op = heap_hi;
    heap_hi += amt;
    size_t nblks = amt / sz;
    carved[i] += nblks;
    nfree[i] += nblks;
    nextf[i] = (bsd_hdr_t *)op;
    while (--nblks > 0) {
        ((bsd_hdr_t *)op)->next = (bsd_hdr_t *)(op + sz);
        op += sz;
    }
    ((bsd_hdr_t *)op)->next = NULL;
    return 0;
}

/* Fast path: a loop over the classes (one shift and compare per class, as in
 * 4.2BSD), then a list pop: ~10 + 2 * log2(n) instructions. */
static void *bsd_malloc(size_t n) {
    size_t amt = 16 - W; /* payload of class 0 */
    unsigned i = 0;
    while (n > amt) {
        amt = (amt + W) * 2 - W;
        i++;
    }
    bsd_hdr_t *op = nextf[i];
    if (HL_UNLIKELY(!op)) {
        if (morecore(i) < 0) return NULL;
        op = nextf[i];
    }
    nextf[i] = op->next;
    nfree[i]--;
    op->word = MAGIC | (uint64_t)i << 8;
    return (char *)op + W;
}

static inline bsd_hdr_t *header(void *p, const char *what) {
    bsd_hdr_t *op = (bsd_hdr_t *)((char *)p - W);
    if (HL_UNLIKELY((char *)op < heap_lo || (char *)op >= heap_hi || ((uintptr_t)p & 15)))
        hl_fatal("%s(%p): not a block of this heap", what, p);
    return op;
}

/* The block a pointer belongs to: itself, or the block under an over-aligned
 * pointer.  Returns the real block's header; *off gets q - p. */
static inline bsd_hdr_t *block_of(void *p, size_t *off, const char *what) {
    bsd_hdr_t *op = header(p, what);
    *off = 0;
    if (HL_UNLIKELY((op->word & 0xff) == ALIGNED)) {
        *off = (size_t)(op->word >> 8);
        op = header((char *)p - *off, what);
    }
    if (HL_UNLIKELY((op->word & 0xff) != MAGIC || (op->word >> 8) >= NBUCKETS))
        hl_fatal("%s(%p): not a block in use (double free or corruption)", what, p);
    return op;
}

static void bsd_free(void *p) {
    size_t off;
    bsd_hdr_t *op = block_of(p, &off, "free");
    unsigned i = (unsigned)(op->word >> 8);
    op->next = nextf[i];
    nextf[i] = op;
    nfree[i]++;
}

static size_t bsd_usable_size(void *p) {
    size_t off;
    bsd_hdr_t *op = block_of(p, &off, "malloc_usable_size");
    return ((size_t)1 << ((op->word >> 8) + 4)) - W - off;
}

/* 4.2BSD realloc: keep the block if the new size is still in its class, that
 * is, no larger than its payload and larger than the next smaller payload. */
static void *bsd_realloc(void *p, size_t n) {
    size_t off;
    bsd_hdr_t *op = block_of(p, &off, "realloc");
    unsigned i = (unsigned)(op->word >> 8);
    size_t onb = ((size_t)1 << (i + 4)) - W - off;
    size_t lower = i ? ((size_t)1 << (i + 3)) - W : 0;
    if (!off && n <= onb && n > lower) return p;
    void *q = bsd_malloc(n);
    if (!q) return NULL;
    memcpy(q, p, n < onb ? n : onb);
    bsd_free(p);
    return q;
}

static void *bsd_memalign(size_t align, size_t n) {
    char *p = bsd_malloc(n + align);
    if (!p) return NULL;
    char *q = (char *)HL_ALIGN_UP((uintptr_t)p, align);
    if (q != p) /* q - p >= 16, so the second header lies inside p's payload */
        ((bsd_hdr_t *)(q - W))->word = ALIGNED | (uint64_t)(q - p) << 8;
    return q;
}

static void bsd_check(void) {
    HL_CHECK(heap_lo <= heap_hi);
    size_t total = 0;
    for (unsigned i = 0; i < NBUCKETS; i++) {
        size_t sz = (size_t)1 << (i + 4), gran = sz < 1024 ? sz : 1024, listed = 0;
        for (bsd_hdr_t *op = nextf[i]; op; op = op->next) {
            char *b = (char *)op;
            HL_CHECK(b >= heap_lo && b + sz <= heap_hi);
            HL_CHECK((size_t)(b - heap_lo) % gran == 0);
            HL_CHECK((op->word & 0xff) != MAGIC);
            HL_CHECK(++listed <= nfree[i]);
        }
        HL_CHECK(listed == nfree[i]);
        HL_CHECK(nfree[i] <= carved[i]);
        total += carved[i] * sz;
    }
    HL_CHECK(total <= (size_t)(heap_hi - heap_lo));
}

const hl_alloc_t hl_alloc_bsd = {
    .info = {"bsd",
             "Kingsley's 4.2BSD allocator: power-of-two classes minus an 8-byte header, never "
             "coalesces",
             "000 §2.1; 002 §4"},
    .init = bsd_init,
    .malloc = bsd_malloc,
    .free = bsd_free,
    .usable_size = bsd_usable_size,
    .realloc = bsd_realloc,
    .memalign = bsd_memalign,
    .check = bsd_check,
};
