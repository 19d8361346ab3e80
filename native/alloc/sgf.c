/*
 * sgf.c: segregated fit (paper 003 §4 "Segregated Fit", the authors' own
 * "sgf"): eight doubly-linked free lists, one per 64-byte size range (the
 * ranges of sbt.c), LIFO, best fit within a list, splitting and coalescing.
 *
 *   Block layout (8-byte words; b is 8 mod 16 so that the payload is 16-aligned)
 *
 *         b                    b+8                                        b+size
 *         +--------------------+--------------------------------------------+
 *   used  | size |PINUSE|CINUSE| payload (size - 8 bytes) ................. |
 *         +--------------------+-----------+-----------+------- ... -------+------+
 *   free  | size |PINUSE=1| 0  | next free | prev free | (unused)          | size |
 *         +--------------------+-----------+-----------+------- ... -------+------+
 *                                                                           footer
 *
 *   CINUSE: this block is in use.  PINUSE: the block before it is in use.
 *   The heap around the blocks (pad word, epilogue) is btag.h's one-tag heap.
 *
 *   The eight lists, by block size (the whole block, header included), each
 *   circular through a sentinel, most recently freed first:
 *
 *     heads[0]  [0,64)     heads[2]  [128,192)   ...   heads[6]  [384,448)
 *     heads[1]  [64,128)   heads[3]  [192,256)   ...   heads[7]  [448,...)
 *
 *     heads[1] <-> [0x7008 | 96] <-> [0x2008 | 64] <-> [0x9008 | 112] <-> heads[1]
 *
 * Invariants: btag.h's (blocks tile the heap, no two free blocks touch, the
 * tags agree) with BT_MINBLOCK = 32, and
 *
 *   {blocks b : CINUSE(b) == 0} == union of the blocks on heads[0..7]
 *   b on heads[r]  =>  range(size(b)) == r,  range(s) = min(s / 64, 7)
 *   f->next->prev == f && f->prev->next == f      for every f on a list
 *
 * From the paper: the structure of sbt with the trees replaced by segregated
 * doubly-linked lists, and "LIFO Best Fit" as the placement policy of each
 * list; segregated fit as 003 §2.2.1 defines it: a request that its own list
 * cannot satisfy is served from a list of larger chunks, the chunk is split,
 * and freed chunks are coalesced.  So: freed and coalesced blocks go to the
 * front of their list; malloc takes the smallest block that fits on the
 * request's own list (the first met among equals, i.e. the most recently
 * freed; an exact fit ends the walk), else the smallest block of the first
 * non-empty list above.
 *
 * Ranges: as in sbt.c, the eighth list holds [448, infinity), which meets
 * "under 64 in the first, over 512 in the last, 64 bytes wide" together.
 *
 * Cost: best fit walks a whole list unless a block of the least size that
 * could fit turns up.  List 0 holds 32- and 48-byte blocks, so a 48-byte
 * request walks past every free 32-byte block: about 670 million steps in
 * the python3 test, 12 times glibc's time.  That is the policy's price (003
 * Table 2 shows sgf at 23 times bsd's total references on parser), kept as is.
 *
 * Departures: words are 8 bytes and payloads 16-aligned, so a free block
 * needs header, two links and footer: the smallest block is 32 bytes and
 * sizes are multiples of 16.  Boundary tags (dlmalloc's PINUSE bit, footers
 * in free blocks) find the neighbours in constant time.  A block is split
 * when the remainder can hold a free block (>= 32 bytes); the upper part is
 * handed out, so the remainder keeps its address and, while its range does
 * not change, its place in its list.  The heap grows by whole pages and only
 * by what a free block at its top lacks.  realloc shrinks in place, grows
 * into a free right neighbour, or at the top of the heap by extending it;
 * then the page-rounding surplus stays in the block, so that nothing lands
 * above it and its next growth is in place too.  Without that, small blocks
 * split off the surplus wall in a string grown a few KB at a time (perl's
 * s///g), which then moves every step, and the perl test's footprint grows
 * fourfold (179 MB against glibc's 48).
 */
#include "hl_alloc.h"

#include <stdbool.h>

/* The layers: btag.h's one-tag heap, the upper part of a split handed out,
 * a block at the top grown in place, keeping the surplus; the free set is
 * eight lists. */
#define BT_TAGS        1
#define BT_MINBLOCK    32 /* header, next, prev, footer */
#define BT_REALLOC_TOP BT_GROW_KEEP
#include "btag.h"

#define NLISTS 8  /* 003 §4 */
#define RANGE  64 /* bytes of block size per list */

typedef struct sg_free {
    size_t hdr; /* size | PINUSE | CINUSE */
    struct sg_free *next, *prev;
} sg_free_t;

static bt_heap_t heap;
static sg_free_t heads[NLISTS]; /* sentinels: heads[i].next is the most recently freed */

/* The list that holds free blocks of size sz. */
static inline unsigned range_of(size_t sz) {
    return sz >= (NLISTS - 1) * RANGE ? NLISTS - 1 : (unsigned)(sz / RANGE);
}

/* ------------------------------------------------------------------------ */
/* The lists                                                                 */
/* ------------------------------------------------------------------------ */

static inline void list_push(sg_free_t *x, size_t sz) { /* at the front: LIFO */
    sg_free_t *h = &heads[range_of(sz)];
    x->next = h->next;
    x->prev = h;
    h->next->prev = x;
    h->next = x;
}

static inline void list_remove(sg_free_t *x) {
    x->prev->next = x->next;
    x->next->prev = x->prev;
}

/* The smallest block of at least `need` bytes on list r (the first of equals,
 * the most recently freed), or NULL.  The walk ends early at a block of the
 * least size that could fit on this list: nothing can fit better. */
static sg_free_t *best_fit(unsigned r, size_t need) {
    sg_free_t *h = &heads[r], *best = NULL;
    size_t best_size = SIZE_MAX, least = r * RANGE > need ? r * RANGE : need;
    for (sg_free_t *f = h->next; f != h; f = f->next) {
        size_t s = bsize(f);
        if (s >= need && s < best_size) {
            best = f;
            best_size = s;
            if (s == least) break;
        }
    }
    return best;
}

/* ------------------------------------------------------------------------ */
/* The free set (btag.h calls these)                                         */
/* ------------------------------------------------------------------------ */

/* A freed or coalesced block goes to the front of its list. */
static void fs_insert(bt_heap_t *h, char *b, size_t sz) {
    list_push((sg_free_t *)b, sz);
}
static void fs_delete(bt_heap_t *h, char *b) {
    list_remove((sg_free_t *)b);
}
static void fs_replace(bt_heap_t *h, char *old, char *b, size_t sz) {
    list_remove((sg_free_t *)old);
    list_push((sg_free_t *)b, sz);
}
static void fs_grew(bt_heap_t *h, char *b, size_t old, size_t sz) {
    list_remove((sg_free_t *)b);
    list_push((sg_free_t *)b, sz);
}
/* A split keeps the remainder's place in its list unless its range changes. */
static void fs_shrank(bt_heap_t *h, char *b, size_t old) {
    size_t sz = bsize(b);
    if (range_of(sz) != range_of(old)) {
        list_remove((sg_free_t *)b);
        list_push((sg_free_t *)b, sz);
    }
}
/* Best fit on the request's own list, else on the first non-empty list
 * above (every block there fits).  Cost: a look at up to eight list heads
 * and a walk of one list, two loads and a compare per block (the whole list
 * unless an exact fit turns up). */
static char *fs_find(bt_heap_t *h, size_t need) {
    unsigned r = range_of(need);
    sg_free_t *x = best_fit(r, need);
    while (!x && ++r < NLISTS)
        x = best_fit(r, need);
    return (char *)x;
}

/* ------------------------------------------------------------------------ */
/* The malloc interface                                                      */
/* ------------------------------------------------------------------------ */

static int sg_init(void) {
    bt_init(&heap, NULL, BT_MINBLOCK, BT_MINBLOCK, hl_page_size());
    for (unsigned r = 0; r < NLISTS; r++)
        heads[r].next = heads[r].prev = &heads[r];
    return 0;
}
BT_ONE_HEAP(heap)
static void *sg_memalign(size_t align, size_t n) {
    return bt_memalign(&heap, align, n, bt_request(n));
}

/* ------------------------------------------------------------------------ */
/* The checker                                                               */
/* ------------------------------------------------------------------------ */

static inline bool in_heap(const void *x) {
    return (const char *)x >= heap.lo && (const char *)x < heap.hi && ((uintptr_t)x & 15) == 8;
}

static void sg_check(void) {
    size_t nfree = bt_check_heap(&heap, NULL);
    size_t listed = 0;
    for (unsigned r = 0; r < NLISTS; r++) {
        sg_free_t *h = &heads[r];
        HL_CHECK(h->next->prev == h && h->prev->next == h);
        for (sg_free_t *f = h->next; f != h; f = f->next) {
            HL_CHECK(in_heap(f) && (f->next == h || in_heap(f->next)));
            HL_CHECK(++listed <= nfree);       /* no cycles, no strays */
            HL_CHECK(!(f->hdr & CINUSE));      /* a free block ... */
            HL_CHECK(range_of(bsize(f)) == r); /* ... on the list of its range */
            HL_CHECK(f->next->prev == f && f->prev->next == f);
        }
    }
    HL_CHECK(listed == nfree); /* every free block is on a list */
}

const hl_alloc_t hl_alloc_sgf = {
    .info = {"sgf",
             "Segregated fit: eight doubly-linked free lists, one per 64-byte size range, LIFO "
             "best fit within a list, coalescing",
             "003 §4"},
    .init = sg_init,
    .malloc = bt_one_malloc,
    .free = bt_one_free,
    .usable_size = bt_one_usable_size,
    .realloc = bt_one_realloc,
    .memalign = sg_memalign,
    .check = sg_check,
};
