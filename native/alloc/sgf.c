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
 *   CINUSE: this block is in use.  PINUSE: the block before it is in use, so
 *   that a free block's footer is read only when it exists.
 *
 *   The heap (one emulated sbrk region)
 *
 *   base   base+8                                           brk-8          brk
 *   +------+---------+---------+-- ... --+------------------+--------------+
 *   | pad  | block   | block   |         | block            | 0|P|CINUSE   |
 *   +------+---------+---------+-- ... --+------------------+--------------+
 *          heap_lo (PINUSE set: nothing before it is free)   heap_hi (epilogue)
 *
 *   The eight lists, by block size (the whole block, header included), each
 *   circular through a sentinel, most recently freed first:
 *
 *     heads[0]  [0,64)     heads[2]  [128,192)   ...   heads[6]  [384,448)
 *     heads[1]  [64,128)   heads[3]  [192,256)   ...   heads[7]  [448,...)
 *
 *     heads[1] <-> [0x7008 | 96] <-> [0x2008 | 64] <-> [0x9008 | 112] <-> heads[1]
 *
 * Invariants: blocks tile [heap_lo, heap_hi) exactly; every size is a multiple
 * of 16 and at least 32; a block is on list range(size) iff its CINUSE bit is
 * clear, and on no other list; a free block's footer equals its size; every
 * PINUSE bit equals the CINUSE bit of the block before; no two free blocks
 * are adjacent; for every block f on a list, f->next->prev == f and
 * f->prev->next == f.
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
#include <string.h>

#define W        8  /* one tag word */
#define MINBLOCK 32 /* header, next, prev, footer */
#define CINUSE   ((size_t)1)
#define PINUSE   ((size_t)2)
#define FLAGS    ((size_t)15)
#define NLISTS   8  /* 003 §4 */
#define RANGE    64 /* bytes of block size per list */

typedef struct sg_free {
    size_t hdr; /* size | PINUSE | CINUSE */
    struct sg_free *next, *prev;
} sg_free_t;

static sg_free_t heads[NLISTS]; /* sentinels: heads[i].next is the most recently freed */
static char *heap_lo, *heap_hi; /* first block, epilogue; NULL before the first growth */
static size_t page;

static inline size_t tag_size(size_t t) {
    return t & ~FLAGS;
}
static inline size_t *hdr(void *b) {
    return (size_t *)b;
}
static inline size_t bsize(const void *b) {
    return tag_size(*(const size_t *)b);
}
static inline size_t *ftr(void *b, size_t sz) {
    return (size_t *)((char *)b + sz - W);
}
static inline size_t request_block(size_t n) {
    size_t b = HL_ALIGN_UP(n + W, 16);
    return b < MINBLOCK ? MINBLOCK : b;
}

/* The list that holds free blocks of size sz. */
static inline unsigned range_of(size_t sz) {
    return sz >= (NLISTS - 1) * RANGE ? NLISTS - 1 : (unsigned)(sz / RANGE);
}

/* Tag writers.  A free block's header always has PINUSE (its left neighbour
 * is in use: no two free blocks touch) and clears the PINUSE of the next. */
static inline void mark_free(char *b, size_t sz) {
    *hdr(b) = sz | PINUSE;
    *ftr(b, sz) = sz;
    *hdr(b + sz) &= ~PINUSE;
}
static inline void mark_used(char *b, size_t sz, size_t pinuse) {
    *hdr(b) = sz | CINUSE | pinuse;
    *hdr(b + sz) |= PINUSE;
}

/* ------------------------------------------------------------------------ */
/* The lists                                                                 */
/* ------------------------------------------------------------------------ */

static inline void list_push(sg_free_t *x) { /* at the front: LIFO */
    sg_free_t *h = &heads[range_of(bsize(x))];
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

/* The block to allocate `need` bytes from: best fit on the request's own
 * list, else on the first non-empty list above (every block there fits). */
static sg_free_t *find(size_t need) {
    unsigned r = range_of(need);
    sg_free_t *x = best_fit(r, need);
    while (!x && ++r < NLISTS)
        x = best_fit(r, need);
    return x;
}

/* ------------------------------------------------------------------------ */
/* Blocks: coalescing, growth, splitting                                     */
/* ------------------------------------------------------------------------ */

/* b (sz bytes, header with a correct PINUSE, no longer in use) goes back:
 * merged with a free neighbour on either side, then to the front of its
 * list.  Returns the free block that holds it. */
static char *release(char *b, size_t sz) {
    size_t h = *hdr(b);
    char *next = b + sz;
    size_t nh = *hdr(next);
    if (!(nh & CINUSE)) {
        list_remove((sg_free_t *)next);
        sz += tag_size(nh);
    }
    if (!(h & PINUSE)) {
        char *pb = b - *(size_t *)(b - W);
        list_remove((sg_free_t *)pb);
        sz += bsize(pb);
        b = pb;
    }
    mark_free(b, sz);
    list_push((sg_free_t *)b);
    return b;
}

/* Extend the heap by at least `want` bytes, keeping the break page aligned;
 * returns the new bytes as a block (from the old epilogue on) of *got bytes
 * whose header is written in use with the right PINUSE.  NULL if the
 * platform says no. */
static char *extend(size_t want, size_t *got) {
    if (!heap_hi) {
        char *base = hl_sbrk(2 * W);
        if (!base) return NULL;
        heap_lo = heap_hi = base + W;
        *hdr(heap_hi) = CINUSE | PINUSE;
    }
    uintptr_t brk = (uintptr_t)heap_hi + W;
    if (want < MINBLOCK) want = MINBLOCK;
    size_t incr = HL_ALIGN_UP(brk + want, page) - brk;
    if (!hl_sbrk((intptr_t)incr)) return NULL;
    char *b = heap_hi;
    heap_hi += incr;
    *hdr(heap_hi) = CINUSE | PINUSE;              /* new epilogue */
    *hdr(b) = incr | CINUSE | (*hdr(b) & PINUSE); /* the old epilogue's PINUSE */
    *got = incr;
    return b;
}

/* No free block fits: grow the heap so that one does (by only what a free
 * block at the top lacks) and return it. */
static sg_free_t *__attribute__((noinline)) grow(size_t need) {
    size_t have = 0;
    if (heap_hi && !(*hdr(heap_hi) & PINUSE))
        have = *(size_t *)(heap_hi - W); /* the footer of the free top block */
    size_t got;
    char *b = extend(need - have, &got);
    return b ? (sg_free_t *)release(b, got) : NULL;
}

/* Allocate `need` bytes from the free block x: its upper part if the rest can
 * stay a free block (x keeps its address, and its place in its list unless
 * its range changes), else all of it. */
static void *take(sg_free_t *x, size_t need) {
    char *b = (char *)x;
    size_t sz = bsize(x), rest = sz - need;
    if (rest >= MINBLOCK) {
        mark_free(b, rest);
        if (range_of(rest) != range_of(sz)) {
            list_remove(x);
            list_push(x);
        }
        char *u = b + rest;
        mark_used(u, need, 0);
        return u + W;
    }
    list_remove(x);
    mark_used(b, sz, PINUSE);
    return b + W;
}

/* ------------------------------------------------------------------------ */
/* The malloc interface                                                      */
/* ------------------------------------------------------------------------ */

static int sg_init(void) {
    page = hl_page_size();
    for (unsigned r = 0; r < NLISTS; r++)
        heads[r].next = heads[r].prev = &heads[r];
    return 0;
}

/* Cost: a look at up to eight list heads and a walk of one list, two loads
 * and a compare per block (the whole list unless an exact fit turns up). */
static void *sg_malloc(size_t n) {
    size_t need = request_block(n);
    sg_free_t *x = find(need);
    if (HL_UNLIKELY(!x) && !(x = grow(need))) return NULL;
    return take(x, need);
}

static inline char *checked_block(void *p, const char *what) {
    char *b = (char *)p - W;
    if (HL_UNLIKELY(b < heap_lo || b >= heap_hi || ((uintptr_t)p & 15) || !(*hdr(b) & CINUSE) ||
                    bsize(b) < MINBLOCK || bsize(b) > (size_t)(heap_hi - b) ||
                    !(*hdr(b + bsize(b)) & PINUSE)))
        hl_fatal("%s(%p): not a block in use (double free or corruption)", what, p);
    return b;
}

static void sg_free(void *p) {
    char *b = checked_block(p, "free");
    *hdr(b) &= ~CINUSE; /* a stale header left inside a merged block must not read as in use */
    release(b, bsize(b));
}

static size_t sg_usable_size(void *p) {
    return bsize(checked_block(p, "malloc_usable_size")) - W;
}

/* Cut the in-use block b of sz bytes down to `keep` if the tail can stand as
 * a free block; the tail is coalesced with what follows. */
static void shrink(char *b, size_t sz, size_t keep) {
    HL_ASSERT(keep <= sz);
    if (sz - keep < MINBLOCK) return;
    *hdr(b) = keep | CINUSE | (*hdr(b) & PINUSE);
    char *t = b + keep;
    *hdr(t) = (sz - keep) | PINUSE;
    release(t, sz - keep);
}

static void *sg_realloc(void *p, size_t n) {
    char *b = checked_block(p, "realloc");
    size_t sz = bsize(b), need = request_block(n), pin = *hdr(b) & PINUSE;
    if (need <= sz) {
        shrink(b, sz, need);
        return p;
    }
    char *next = b + sz;
    size_t nh = *hdr(next), nsz = (nh & CINUSE) ? 0 : tag_size(nh);
    if (nsz && sz + nsz >= need) { /* grow into the free right neighbour */
        list_remove((sg_free_t *)next);
        sz += nsz;
        mark_used(b, sz, pin);
        shrink(b, sz, need);
        return p;
    }
    if (next + nsz == heap_hi) { /* at the top of the heap: extend it */
        size_t got;
        if (extend(need - sz - nsz, &got)) {
            if (nsz) list_remove((sg_free_t *)next);
            sz += nsz + got;
            mark_used(b, sz, pin);
            /* no shrink: the page-rounding surplus stays in the block, so that
             * nothing can be put above it and its next growth is in place too */
            return p;
        }
    }
    void *q = sg_malloc(n);
    if (!q) return NULL;
    memcpy(q, p, sz - W);
    sg_free(p);
    return q;
}

/* Over-allocate, then give back the part below the aligned payload (a free
 * block of at least MINBLOCK) and the tail. */
static void *sg_memalign(size_t align, size_t n) {
    size_t need = request_block(n); /* the lead taken off below leaves at least this */
    char *p = sg_malloc(need + align + MINBLOCK);
    if (!p) return NULL;
    char *q = (char *)HL_ALIGN_UP((uintptr_t)p, align);
    if (q != p && (size_t)(q - p) < MINBLOCK) q += align;
    char *b = p - W, *qb = q - W;
    size_t sz = bsize(b);
    if (q != p) {
        size_t lead = (size_t)(q - p);
        *hdr(qb) = (sz - lead) | CINUSE; /* PINUSE clear: the lead becomes free */
        *hdr(b) = lead | (*hdr(b) & PINUSE);
        release(b, lead);
        sz -= lead;
    }
    shrink(qb, sz, need);
    return q;
}

/* ------------------------------------------------------------------------ */
/* The checker                                                               */
/* ------------------------------------------------------------------------ */

static inline bool in_heap(const void *x) {
    return (const char *)x >= heap_lo && (const char *)x < heap_hi && ((uintptr_t)x & 15) == 8;
}

static void sg_check(void) {
    size_t nfree = 0;
    if (heap_hi) {
        bool prev_used = true;
        char *b = heap_lo;
        while (b < heap_hi) {
            size_t t = *hdr(b), sz = tag_size(t);
            HL_CHECK(((uintptr_t)b & 15) == 8);
            HL_CHECK(sz >= MINBLOCK && (t & (FLAGS & ~(CINUSE | PINUSE))) == 0);
            HL_CHECK(sz <= (size_t)(heap_hi - b));
            HL_CHECK(!!(t & PINUSE) == prev_used); /* PINUSE mirrors the block before */
            bool used = t & CINUSE;
            if (!used) {
                HL_CHECK(prev_used);         /* no two free blocks touch */
                HL_CHECK(*ftr(b, sz) == sz); /* footer == header size */
                nfree++;
            }
            prev_used = used;
            b += sz;
        }
        HL_CHECK(b == heap_hi);
        HL_CHECK(tag_size(*hdr(heap_hi)) == 0 && (*hdr(heap_hi) & CINUSE));
        HL_CHECK(!!(*hdr(heap_hi) & PINUSE) == prev_used);
    }
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
    .malloc = sg_malloc,
    .free = sg_free,
    .usable_size = sg_usable_size,
    .realloc = sg_realloc,
    .memalign = sg_memalign,
    .check = sg_check,
};
