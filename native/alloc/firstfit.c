/*
 * firstfit.c: Knuth's first fit with a roving pointer and boundary tags
 * (paper 000 §2.1 "FIRSTFIT", after Knuth 2.5 Algorithms A and C and Mark
 * Moraes' implementation; paper 002 §4).
 *
 *   Block layout (8-byte words; b is 8 mod 16 so that the payload is 16-aligned)
 *
 *        b                b+8                                  b+size-8   b+size
 *        +----------------+-------------------------------------+----------+
 *   used | size | INUSE   | payload (size - 16 bytes) .........  | size|INUSE| next block
 *        +----------------+-------------------------------------+----------+
 *   free | size | 0       | next free | prev free | (unused)     | size | 0  |
 *        +----------------+-------------------------------------+----------+
 *
 *   The heap (one emulated sbrk region)
 *
 *   base    base+8                                              brk-8  brk
 *   +-------+---------+---------+-- ... --+---------------------+------+
 *   | 0|USE | block   | block   |         | block               | 0|USE|
 *   +-------+---------+---------+-- ... --+---------------------+------+
 *   prologue footer                                            epilogue header
 *
 *   The free list is one circular doubly-linked list through `head` (a
 *   sentinel), in no particular order; `rover` is where the next search starts.
 *
 * Invariants: blocks tile [base+8, brk-8) exactly; every size is a multiple
 * of 16 and at least 32; header == footer; no two free blocks are adjacent
 * (coalescing is immediate); a block is on the free list iff it is free;
 * rover is the sentinel or a block on the list.
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
#include <string.h>

#define W        8  /* one tag word */
#define OVERHEAD 16 /* header + footer */
#define MINBLOCK 32 /* header, two links, footer */
#define INUSE    ((size_t)1)

typedef struct ff_free {
    size_t hdr;
    struct ff_free *next, *prev;
} ff_free_t;

static ff_free_t head; /* sentinel: head.next is the first free block */
static ff_free_t *rover;
static char *heap_lo, *heap_hi; /* first block, epilogue */
static size_t split_min, grow_min;

static inline size_t tag_size(size_t t) {
    return t & ~(size_t)15;
}
static inline size_t *hdr(void *b) {
    return (size_t *)b;
}
static inline size_t *ftr(void *b, size_t sz) {
    return (size_t *)((char *)b + sz - W);
}
static inline void set_tags(void *b, size_t sz, size_t flags) {
    *hdr(b) = sz | flags;
    *ftr(b, sz) = sz | flags;
}
static inline char *payload_block(void *p) {
    return (char *)p - W;
}
static inline size_t request_block(size_t n) {
    size_t b = HL_ALIGN_UP(n + OVERHEAD, 16);
    return b < MINBLOCK ? MINBLOCK : b;
}

static inline void list_insert(ff_free_t *b) { /* at the head, as Knuth's Algorithm C */
    b->next = head.next;
    b->prev = &head;
    head.next->prev = b;
    head.next = b;
}

static inline void list_remove(ff_free_t *b) {
    if (rover == b) rover = b->next;
    b->prev->next = b->next;
    b->next->prev = b->prev;
}

/* b takes the place of old on the list (old is being merged into b). */
static inline void list_replace(ff_free_t *old, ff_free_t *b) {
    b->next = old->next;
    b->prev = old->prev;
    b->next->prev = b;
    b->prev->next = b;
    if (rover == old) rover = b;
}

static int ff_init(void) {
    split_min = hl_tunable("HEAPLAB_FIRSTFIT_SPLIT", 24);
    split_min = split_min < MINBLOCK ? MINBLOCK : HL_ALIGN_UP(split_min, 16);
    grow_min = HL_ALIGN_UP(hl_tunable("HEAPLAB_FIRSTFIT_GROW", 4096), 16);
    head.next = head.prev = &head;
    rover = &head;
    char *base = hl_sbrk(2 * W);
    if (!base) return -1;
    *(size_t *)base = INUSE;       /* prologue footer */
    *(size_t *)(base + W) = INUSE; /* epilogue header */
    heap_lo = heap_hi = base + W;
    return 0;
}

/* Give the free block b (tags already written as free, not on the list) back,
 * merging it with free neighbours; returns the merged block. */
static ff_free_t *coalesce(char *b) {
    size_t sz = tag_size(*hdr(b));
    size_t prev_tag = *(size_t *)(b - W);
    char *next = b + sz;
    size_t next_tag = *hdr(next);
    bool prev_free = !(prev_tag & INUSE), next_free = !(next_tag & INUSE);
    if (prev_free) {
        char *pb = b - tag_size(prev_tag);
        sz += tag_size(prev_tag);
        if (next_free) {
            list_remove((ff_free_t *)next);
            sz += tag_size(next_tag);
        }
        set_tags(pb, sz, 0);
        return (ff_free_t *)pb;
    }
    if (next_free) {
        sz += tag_size(next_tag);
        set_tags(b, sz, 0);
        list_replace((ff_free_t *)next, (ff_free_t *)b);
        return (ff_free_t *)b;
    }
    list_insert((ff_free_t *)b);
    return (ff_free_t *)b;
}

/* Grow the heap so that a free block of at least `need` bytes ends at the
 * epilogue; returns it (on the list), or NULL. */
static ff_free_t *__attribute__((noinline)) grow(size_t need) {
    size_t last_tag = *(size_t *)(heap_hi - W);
    size_t have = (heap_hi > heap_lo && !(last_tag & INUSE)) ? tag_size(last_tag) : 0;
    size_t incr = need - have;
    if (incr < grow_min) incr = grow_min;
    if (incr > HL_MAX_REQUEST + MINBLOCK || !hl_sbrk((intptr_t)incr)) return NULL;
    char *b = heap_hi; /* the old epilogue becomes the new block's header */
    heap_hi += incr;
    *hdr(heap_hi) = INUSE;
    set_tags(b, incr, 0);
    return coalesce(b);
}

/* Allocate `need` bytes from free block b: the upper part if the remainder is
 * worth keeping (Algorithm A), else all of it. */
static inline void *take(ff_free_t *b, size_t need) {
    size_t sz = tag_size(b->hdr);
    if (sz - need >= split_min) {
        set_tags(b, sz - need, 0);
        rover = b;
        char *u = (char *)b + sz - need;
        set_tags(u, need, INUSE);
        return u + W;
    }
    rover = b->next;
    list_remove(b);
    set_tags(b, sz, INUSE);
    return (char *)b + W;
}

/* Fast path: walk the list once from the rover, ~6 instructions per block
 * examined; the first block that fits is taken. */
static void *ff_malloc(size_t n) {
    size_t need = request_block(n);
    ff_free_t *start = rover, *b = start;
    do {
        if (b != &head && tag_size(b->hdr) >= need) return take(b, need);
        b = b->next;
    } while (b != start);
    b = grow(need);
    return b ? take(b, need) : NULL;
}

static inline char *checked_block(void *p, const char *what) {
    char *b = payload_block(p);
    if (HL_UNLIKELY(b < heap_lo || b >= heap_hi || ((uintptr_t)p & 15) || !(*hdr(b) & INUSE) ||
                    tag_size(*hdr(b)) > (size_t)(heap_hi - b) ||
                    *ftr(b, tag_size(*hdr(b))) != *hdr(b)))
        hl_fatal("%s(%p): not a block in use (double free or corruption)", what, p);
    return b;
}

static void ff_free(void *p) {
    char *b = checked_block(p, "free");
    size_t sz = tag_size(*hdr(b));
    set_tags(b, sz, 0);
    coalesce(b);
}

static size_t ff_usable_size(void *p) {
    return tag_size(*hdr(checked_block(p, "malloc_usable_size"))) - OVERHEAD;
}

/* Cut block b (in use, size sz) down to `keep` bytes if the tail is worth a
 * free block; the tail is coalesced with what follows. */
static void trim(char *b, size_t sz, size_t keep) {
    if (sz - keep < split_min) return;
    set_tags(b, keep, INUSE);
    char *t = b + keep;
    set_tags(t, sz - keep, 0);
    coalesce(t);
}

static void *ff_realloc(void *p, size_t n) {
    char *b = checked_block(p, "realloc");
    size_t sz = tag_size(*hdr(b)), need = request_block(n);
    if (need <= sz) { /* shrink in place */
        trim(b, sz, need);
        return p;
    }
    char *next = b + sz;
    size_t next_tag = *hdr(next);
    if (!(next_tag & INUSE) && sz + tag_size(next_tag) >= need) { /* grow into the next block */
        list_remove((ff_free_t *)next);
        sz += tag_size(next_tag);
        set_tags(b, sz, INUSE);
        trim(b, sz, need);
        return p;
    }
    char *after = !(next_tag & INUSE) ? next + tag_size(next_tag) : next;
    if (after == heap_hi) { /* the last block: grow the heap under it */
        size_t have = sz + (after != next ? tag_size(next_tag) : 0);
        size_t incr = need - have < grow_min ? grow_min : need - have;
        if (hl_sbrk((intptr_t)incr)) {
            if (after != next) list_remove((ff_free_t *)next);
            heap_hi += incr;
            *hdr(heap_hi) = INUSE;
            set_tags(b, have + incr, INUSE);
            trim(b, have + incr, need);
            return p;
        }
    }
    void *q = ff_malloc(n);
    if (!q) return NULL;
    memcpy(q, p, tag_size(*hdr(b)) - OVERHEAD);
    ff_free(p);
    return q;
}

/* Over-allocate, then give back the part below the aligned payload (as a free
 * block of at least MINBLOCK) and the tail. */
static void *ff_memalign(size_t align, size_t n) {
    char *p = ff_malloc(n + align + MINBLOCK);
    if (!p) return NULL;
    char *q = (char *)HL_ALIGN_UP((uintptr_t)p, align);
    if (q != p && (size_t)(q - p) < MINBLOCK) q += align;
    char *b = payload_block(p), *qb = payload_block(q);
    size_t sz = tag_size(*hdr(b));
    if (q != p) {
        size_t lead = (size_t)(q - p);
        set_tags(qb, sz - lead, INUSE);
        set_tags(b, lead, 0);
        coalesce(b);
        sz -= lead;
    }
    trim(qb, sz, request_block(n));
    return q;
}

static void ff_check(void) {
    HL_CHECK(*(size_t *)(heap_lo - W) == INUSE);
    HL_CHECK(*hdr(heap_hi) == INUSE);
    size_t nfree = 0;
    bool prev_free = false;
    for (char *b = heap_lo; b < heap_hi;) {
        size_t t = *hdr(b), sz = tag_size(t);
        HL_CHECK(((uintptr_t)b & 15) == 8);
        HL_CHECK(sz >= MINBLOCK && (t & 14) == 0);
        HL_CHECK(b + sz <= heap_hi);
        HL_CHECK(*ftr(b, sz) == t);
        bool is_free = !(t & INUSE);
        HL_CHECK(!(is_free && prev_free)); /* coalescing is immediate */
        nfree += is_free;
        prev_free = is_free;
        b += sz;
    }
    size_t listed = 0;
    bool rover_seen = rover == &head;
    for (ff_free_t *f = head.next; f != &head; f = f->next) {
        HL_CHECK((char *)f >= heap_lo && (char *)f < heap_hi);
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
    .malloc = ff_malloc,
    .free = ff_free,
    .usable_size = ff_usable_size,
    .realloc = ff_realloc,
    .memalign = ff_memalign,
    .check = ff_check,
};
