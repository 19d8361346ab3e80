/*
 * firstfit.c: Knuth's first fit with a roving pointer and boundary tags
 * (paper 000 §2.1 "FIRSTFIT", after Knuth 2.5 Algorithms A and C and Mark
 * Moraes' implementation; paper 002 §4).
 *
 *   Block layout (btag.h's two tags; 8-byte words; b is 8 mod 16 so that the
 *   payload is 16-aligned)
 *
 *        b                b+8                                  b+size-8   b+size
 *        +----------------+-------------------------------------+----------+
 *   used | size | INUSE   | payload (size - 16 bytes) .........  | size|INUSE| next block
 *        +----------------+-------------------------------------+----------+
 *   free | size | 0       | next free | prev free | (unused)     | size | 0  |
 *        +----------------+-------------------------------------+----------+
 *
 *   The heap is btag.h's, started at init: a prologue footer (in use), the
 *   blocks, an epilogue header (size 0, in use).  The free list is one
 *   circular doubly-linked list through `head` (a sentinel), in no
 *   particular order; `rover` is where the next search starts:
 *
 *     head <-> [0x7008 | 96] <-> [0x1008 | 4032] <-> [0x3008 | 32] <-> head
 *                                 ^ rover
 *
 * Invariants: btag.h's (blocks tile the heap, header == footer, no two free
 * blocks touch: coalescing is immediate) with BT_MINBLOCK = 32, and
 *
 *   {blocks b : INUSE(b) == 0} == {blocks on the list}
 *   f->next->prev == f && f->prev->next == f      for every f on the list
 *   rover == &head || rover is on the list
 *
 * From the paper: two tag words per allocated block, one at each end ("two
 * extra words of overhead"); first fit over a single doubly-linked list; a
 * roving pointer; no split when the remainder would be under 24 bytes
 * (HEAPLAB_FIRSTFIT_SPLIT); coalescing in constant time on free.  As in
 * Knuth's Algorithm A the upper part of a split block is allocated, so the
 * remainder stays in place on the list.  Departure: words are 8 bytes and
 * payloads 16-aligned, so the smallest block is 32 bytes and a remainder is
 * kept only if it is also at least 32 bytes (the paper's 24-byte threshold
 * then never decides alone; it does if set higher).
 *
 * realloc (the paper says nothing of it) shrinks in place, grows into a free
 * successor, grows the last block of the heap by moving the break (as sbrk
 * allocators did: without it a buffer grown step by step at the top of the
 * heap leaves a trail of holes; perl's peak footprint was 3.6x larger), and
 * otherwise moves the block.
 */
#include "hl_alloc.h"

#include <stdbool.h>

/* The layers: btag.h's two-tag heap, the upper part of a split handed out
 * (Knuth's Algorithm A), a block at the top grown by moving the break and
 * trimmed back; the free set is one list with a rover. */
#define BT_TAGS        2
#define BT_MINBLOCK    32 /* header, two links, footer */
#define BT_REALLOC_TOP BT_GROW_TRIM
#define BT_FS_TAKEN
#include "btag.h"

typedef struct ff_free {
    size_t hdr;
    struct ff_free *next, *prev;
} ff_free_t;

static bt_heap_t heap;
static ff_free_t head; /* sentinel: head.next is the first free block */
static ff_free_t *rover;

/* ------------------------------------------------------------------------ */
/* The free set: one list and the rover (btag.h calls these)                 */
/* ------------------------------------------------------------------------ */

static void fs_insert(bt_heap_t *h, char *b, size_t sz) { /* at the head, as Knuth's Algorithm C */
    ff_free_t *x = (ff_free_t *)b;
    x->next = head.next;
    x->prev = &head;
    head.next->prev = x;
    head.next = x;
}
static void fs_delete(bt_heap_t *h, char *b) {
    ff_free_t *x = (ff_free_t *)b;
    if (rover == x) rover = x->next;
    x->prev->next = x->next;
    x->next->prev = x->prev;
}
/* b takes the place of old on the list (b absorbed old). */
static void fs_replace(bt_heap_t *h, char *old, char *b, size_t sz) {
    ff_free_t *o = (ff_free_t *)old, *x = (ff_free_t *)b;
    x->next = o->next;
    x->prev = o->prev;
    x->next->prev = x;
    x->prev->next = x;
    if (rover == o) rover = x;
}
static void fs_grew(bt_heap_t *h, char *b, size_t old, size_t sz) { /* it keeps its place */
}
/* The next search starts at the block the last one split ... */
static void fs_shrank(bt_heap_t *h, char *b, size_t old) {
    rover = (ff_free_t *)b;
}
/* ... or just after the block it took whole. */
static void fs_taken(bt_heap_t *h, char *b) {
    rover = ((ff_free_t *)b)->next;
    fs_delete(h, b);
}
/* Walk the list once from the rover, ~6 instructions per block examined;
 * the first block that fits is taken. */
static char *fs_find(bt_heap_t *h, size_t need) {
    ff_free_t *start = rover, *b = start;
    do {
        if (b != &head && bsize(b) >= need) return (char *)b;
        b = b->next;
    } while (b != start);
    return NULL;
}

/* ------------------------------------------------------------------------ */
/* The malloc interface                                                      */
/* ------------------------------------------------------------------------ */

static int ff_init(void) {
    head.next = head.prev = &head;
    rover = &head;
    bt_init(&heap, NULL, hl_tunable("HEAPLAB_FIRSTFIT_SPLIT", 24),
            hl_tunable("HEAPLAB_FIRSTFIT_GROW", 4096), 16);
    return bt_start(&heap);
}
BT_ONE_HEAP(heap)
static void *ff_memalign(size_t align, size_t n) {
    return bt_memalign(&heap, align, n, n);
}

/* ------------------------------------------------------------------------ */
/* The checker                                                               */
/* ------------------------------------------------------------------------ */

static void ff_check(void) {
    size_t nfree = bt_check_heap(&heap, NULL), listed = 0;
    bool rover_seen = rover == &head;
    for (ff_free_t *f = head.next; f != &head; f = f->next) {
        HL_CHECK((char *)f >= heap.lo && (char *)f < heap.hi);
        HL_CHECK(!(f->hdr & INUSE));
        HL_CHECK(f->next->prev == f && f->prev->next == f);
        rover_seen |= f == rover;
        HL_CHECK(++listed <= nfree);
    }
    HL_CHECK(listed == nfree);
    HL_CHECK(rover_seen);
}

const hl_alloc_t hl_alloc_firstfit = {
    .info = {"firstfit",
             "Knuth's first fit: one doubly-linked free list, roving pointer, boundary tags, "
             "coalescing on free",
             "000 §2.1; 002 §4"},
    .init = ff_init,
    .malloc = bt_one_malloc,
    .free = bt_one_free,
    .usable_size = bt_one_usable_size,
    .realloc = bt_one_realloc,
    .memalign = ff_memalign,
    .check = ff_check,
};
