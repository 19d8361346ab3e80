/*
 * gnugpp.c: Doug Lea's segregated first fit of the early 1990s, the malloc of
 * the GNU G++ library (paper 000 §2.1 "GNU G++"; paper 002 §4 "FIRSTFIT",
 * which measured the same Lea implementation).
 *
 *   Block layout (btag.h's two tags; 8-byte words; b is 8 mod 16 so that the
 *   payload is 16-aligned)
 *
 *        b                b+8                                  b+size-8   b+size
 *        +----------------+-------------------------------------+----------+
 *   used | size | INUSE   | payload (size - 16 bytes) .........  | size|INUSE| next block
 *        +----------------+-------------------------------------+----------+
 *   free | size | 0       | next in bin | prev in bin | ...      | size | 0  |
 *        +----------------+-------------------------------------+----------+
 *
 *   The header's low four bits are HL_HDR_INUSE or 0, never anything else:
 *   quickfit.c and the synthesized runtime tag their own blocks with the
 *   values hl_alloc.h reserves for them (HL_TAG_*), which is how their free
 *   tells their blocks from these.
 *
 *   bins[i] (i = floor(log2(size))), each a circular doubly-linked list
 *   through a sentinel, newest first; `binmap` bit i is set iff bins[i] is not
 *   empty.  The heap is btag.h's, started at init on the default heap.
 *
 *     bins[5]  <-> [0x9008 | 48] <-> [0x2008 | 32] <-> bins[5]      binmap 0b...100000
 *
 * Invariants: btag.h's (blocks tile the heap, header == footer, no two free
 * blocks touch) with BT_MINBLOCK = 32, and
 *
 *   {blocks b : INUSE(b) == 0} == union of bins[0..63]
 *   b in bins[i]  =>  floor(log2(size(b))) == i
 *   (binmap >> i) & 1 == (bins[i] is not empty)
 *   header(b) & HL_HDR_LOW_BITS in {0, HL_HDR_INUSE}   for every block b
 *
 * From the papers: an array of free lists segregated by the logarithm of the
 * size, each doubly linked; the selected list is scanned for the first block
 * that is large enough, and larger bins are tried in turn; the block found is
 * split and the remainder goes back to its bin unless it would be under 16
 * bytes (002 §4; HEAPLAB_GNUGPP_SPLIT); boundary tags and coalescing on free
 * as in FIRSTFIT ("in other respects similar to FIRSTFIT", 000 §2.1).
 * Departures: 8-byte words and 16-byte alignment make the smallest block 32
 * bytes, so a remainder under 32 bytes is never split off either; the next
 * non-empty larger bin is found with a bitmap rather than a loop.
 *
 * realloc: shrink in place, grow into a free successor or, for the last block
 * of the heap, by moving the break; otherwise move (as firstfit.c).
 */
#include "hl_alloc.h"

#include <stdbool.h>

/* The layers: btag.h's two-tag heap, the lower part of a split handed out
 * (the rest goes back to its bin), a block at the top grown by moving the
 * break and trimmed back; the free set is 64 bins by log2 size. */
#define BT_TAGS        2
#define BT_MINBLOCK    32
#define BT_SPLIT_LOW   1
#define BT_REALLOC_TOP BT_GROW_TRIM
#include "btag.h"

#define NBINS 64

typedef struct gp_free {
    size_t hdr;
    struct gp_free *next, *prev;
} gp_free_t;

static bt_heap_t heap;
static gp_free_t bins[NBINS];
static uint64_t binmap;
static bool inited;

static inline unsigned bin_of(size_t sz) {
    return 63u - (unsigned)__builtin_clzl(sz);
}

static inline void bin_insert(gp_free_t *b, size_t sz) {
    unsigned i = bin_of(sz);
    gp_free_t *s = &bins[i];
    b->next = s->next;
    b->prev = s;
    s->next->prev = b;
    s->next = b;
    binmap |= (uint64_t)1 << i;
}

/* b leaves its bin, that of size `old`, or (old == 0) of the size in its header. */
static inline void bin_remove(gp_free_t *b, size_t old) {
    b->prev->next = b->next;
    b->next->prev = b->prev;
    if (b->next == b->prev) { /* the bin may now be empty: only the sentinel left */
        unsigned i = bin_of(old ? old : bsize(b));
        if (bins[i].next == &bins[i]) binmap &= ~((uint64_t)1 << i);
    }
}

/* ------------------------------------------------------------------------ */
/* The free set: the bins (btag.h calls these)                               */
/* ------------------------------------------------------------------------ */

static void fs_insert(bt_heap_t *h, char *b, size_t sz) {
    bin_insert((gp_free_t *)b, sz);
}
static void fs_delete(bt_heap_t *h, char *b) {
    bin_remove((gp_free_t *)b, 0);
}
static void fs_replace(bt_heap_t *h, char *old, char *b, size_t sz) {
    bin_remove((gp_free_t *)old, 0);
    bin_insert((gp_free_t *)b, sz);
}
static void fs_grew(bt_heap_t *h, char *b, size_t old, size_t sz) {
    bin_remove((gp_free_t *)b, old);
    bin_insert((gp_free_t *)b, sz);
}
/* First fit in the request's own bin (~6 instructions per block looked at),
 * else the first block of the next non-empty bin (a bitmap scan, ~5
 * instructions). */
static char *fs_find(bt_heap_t *h, size_t need) {
    unsigned i = bin_of(need);
    gp_free_t *s = &bins[i];
    for (gp_free_t *b = s->next; b != s; b = b->next)
        if (bsize(b) >= need) return (char *)b;
    uint64_t above = i + 1 < NBINS ? binmap & (~(uint64_t)0 << (i + 1)) : 0;
    return above ? (char *)bins[__builtin_ctzl(above)].next : NULL;
}

/* ------------------------------------------------------------------------ */
/* The malloc interface                                                      */
/* ------------------------------------------------------------------------ */

/* GNUGPP_LAZY_START=1 (how heaplab synth compiles this file for a
 * synthesized allocator's general blocks): the heap starts at its first
 * growth (btag.h), not at init, so that a program whose blocks all come from
 * elsewhere pays no page for it; the tunables are still read at init. */
#ifndef GNUGPP_LAZY_START
#define GNUGPP_LAZY_START 0
#endif

static int gp_init(void) {
    if (inited) return 0;
    for (int i = 0; i < NBINS; i++)
        bins[i].next = bins[i].prev = &bins[i];
    bt_init(&heap, NULL, hl_tunable("HEAPLAB_GNUGPP_SPLIT", 16),
            hl_tunable("HEAPLAB_GNUGPP_GROW", 4096), 16);
    if (!GNUGPP_LAZY_START && bt_start(&heap) != 0) return -1;
    inited = true;
    return 0;
}
BT_ONE_HEAP(heap)
static void *gp_memalign(size_t align, size_t n) {
    return bt_memalign(&heap, align, n, n);
}

/* ------------------------------------------------------------------------ */
/* The checker                                                               */
/* ------------------------------------------------------------------------ */

static void gp_check(void) {
    size_t nfree = bt_check_heap(&heap, NULL), listed = 0;
    for (unsigned i = 0; i < NBINS; i++) {
        gp_free_t *s = &bins[i];
        HL_CHECK(((binmap >> i) & 1) == (s->next != s));
        for (gp_free_t *f = s->next; f != s; f = f->next) {
            HL_CHECK((char *)f >= heap.lo && (char *)f < heap.hi);
            HL_CHECK(!(f->hdr & INUSE));
            HL_CHECK(bin_of(bsize(f)) == i);
            HL_CHECK(f->next->prev == f && f->prev->next == f);
            HL_CHECK(++listed <= nfree);
        }
    }
    HL_CHECK(listed == nfree);
}

const hl_alloc_t hl_alloc_gnugpp = {
    .info = {"gnugpp",
             "Lea's segregated first fit (GNU G++): doubly-linked bins by log2 size, boundary "
             "tags, coalescing",
             "000 §2.1; 002 §4"},
    .init = gp_init,
    .malloc = bt_one_malloc,
    .free = bt_one_free,
    .usable_size = bt_one_usable_size,
    .realloc = bt_one_realloc,
    .memalign = gp_memalign,
    .check = gp_check,
};
