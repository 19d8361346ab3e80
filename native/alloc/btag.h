/*
 * btag.h: the boundary-tag heap that aobt.c, sbt.c and sgf.c share: block
 * tags, coalescing, growth, splitting and the malloc API over them. What the
 * three differ in, the set of free blocks and how a fit is found, stays in
 * each file behind five functions (the file defines them, anywhere):
 *
 *   static void  fs_insert(char *b);            free block b (tags written) joins the set
 *   static void  fs_delete(char *b);            b leaves it (its header still says the
 *                                               size it joined with)
 *   static void  fs_grew(char *b, size_t old);  b, in the set at size `old`, now has
 *                                               bsize(b) > old (merged with the block
 *                                               freed after it)
 *   static void  fs_shrank(char *b, size_t old);  the same, bsize(b) < old (its upper
 *                                               part was handed out; b keeps its address)
 *   static char *fs_find(size_t need);          a free block of at least `need` bytes
 *                                               (whole block, header included), or NULL
 *
 * and MINBLOCK, the smallest block that can hold its free-set node and a
 * footer (a multiple of 16). The file includes this once, before its own
 * free-set code, and calls bt_init() from its init.
 *
 *   Block layout (8-byte words; b is 8 mod 16 so that the payload is 16-aligned)
 *
 *         b                    b+8                                        b+size
 *         +--------------------+--------------------------------------------+
 *   used  | size |PINUSE|CINUSE| payload (size - 8 bytes) ................. |
 *         +--------------------+-------------------------------+-----------+------+
 *   free  | size |PINUSE=1| 0  | the free set's node (the file's) | (unused) | size |
 *         +--------------------+-------------------------------+-----------+------+
 *                                                                           footer
 *
 *   CINUSE: this block is in use.  PINUSE: the block before it is in use, so
 *   that a free block's footer (its size, in its last word) is read only
 *   when it exists.  An in-use block has no footer: its last word is payload.
 *
 *   The heap (one emulated sbrk region)
 *
 *   base   base+8                                           brk-8          brk
 *   +------+---------+---------+-- ... --+------------------+--------------+
 *   | pad  | block   | block   |         | block            | 0|P|CINUSE   |
 *   +------+---------+---------+-- ... --+------------------+--------------+
 *          heap_lo (PINUSE set: nothing before it is free)   heap_hi (epilogue)
 *
 * Invariants (the files' checkers walk them): blocks tile [heap_lo, heap_hi)
 * exactly; every size is a multiple of 16 and at least MINBLOCK; a block is in
 * the free set iff its CINUSE bit is clear; a free block's footer equals its
 * size; every PINUSE bit equals the CINUSE bit of the block before; no two
 * free blocks are adjacent.
 *
 * A block is split when the remainder can hold a free block (>= MINBLOCK);
 * the upper part is handed out, so the remainder keeps its address (as in
 * Knuth's Algorithm A).  The heap grows by whole pages and only by what a
 * free block at its top lacks.  realloc shrinks in place, grows into a free
 * right neighbour, or at the top of the heap by extending it; then the
 * page-rounding surplus stays in the block, so that nothing lands above it
 * and its next growth is in place too.
 */
#ifndef HL_BTAG_H
#define HL_BTAG_H

#include "hl_alloc.h"

#include <string.h>

#define W      8 /* one tag word */
#define CINUSE ((size_t)1)
#define PINUSE ((size_t)2)
#define FLAGS  ((size_t)15)

static void fs_insert(char *b);
static void fs_delete(char *b);
static void fs_grew(char *b, size_t old);
static void fs_shrank(char *b, size_t old);
static char *fs_find(size_t need);

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
/* Blocks: coalescing, growth, splitting                                     */
/* ------------------------------------------------------------------------ */

/* b (sz bytes, header with a correct PINUSE, no longer in use) goes back:
 * merged with a free neighbour on either side, then into the free set.
 * Returns the free block that holds it. */
static char *release(char *b, size_t sz) {
    size_t h = *hdr(b);
    char *next = b + sz;
    size_t nh = *hdr(next);
    if (!(nh & CINUSE)) {
        fs_delete(next);
        sz += tag_size(nh);
    }
    if (!(h & PINUSE)) { /* the free block before grows in place */
        char *pb = b - *(size_t *)(b - W);
        size_t old = bsize(pb);
        mark_free(pb, old + sz);
        fs_grew(pb, old);
        return pb;
    }
    mark_free(b, sz);
    fs_insert(b);
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
static char *__attribute__((noinline)) grow(size_t need) {
    size_t have = 0;
    if (heap_hi && !(*hdr(heap_hi) & PINUSE))
        have = *(size_t *)(heap_hi - W); /* the footer of the free top block */
    size_t got;
    char *b = extend(need - have, &got);
    return b ? release(b, got) : NULL;
}

/* Allocate `need` bytes from the free block b: its upper part if the rest can
 * stay a free block (b keeps its address), else all of it. */
static void *take(char *b, size_t need) {
    size_t sz = bsize(b), rest = sz - need;
    if (rest >= MINBLOCK) {
        mark_free(b, rest);
        fs_shrank(b, sz);
        char *u = b + rest;
        mark_used(u, need, 0);
        return u + W;
    }
    fs_delete(b);
    mark_used(b, sz, PINUSE);
    return b + W;
}

/* ------------------------------------------------------------------------ */
/* The malloc interface                                                      */
/* ------------------------------------------------------------------------ */

static void bt_init(void) {
    page = hl_page_size();
}

static void *bt_malloc(size_t n) {
    size_t need = request_block(n);
    char *b = fs_find(need);
    if (HL_UNLIKELY(!b) && !(b = grow(need))) return NULL;
    return take(b, need);
}

static inline char *checked_block(void *p, const char *what) {
    char *b = (char *)p - W;
    if (HL_UNLIKELY(b < heap_lo || b >= heap_hi || ((uintptr_t)p & 15) || !(*hdr(b) & CINUSE) ||
                    bsize(b) < MINBLOCK || bsize(b) > (size_t)(heap_hi - b) ||
                    !(*hdr(b + bsize(b)) & PINUSE)))
        hl_fatal("%s(%p): not a block in use (double free or corruption)", what, p);
    return b;
}

static void bt_free(void *p) {
    char *b = checked_block(p, "free");
    *hdr(b) &= ~CINUSE; /* a stale header left inside a merged block must not read as in use */
    release(b, bsize(b));
}

static size_t bt_usable_size(void *p) {
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

static void *bt_realloc(void *p, size_t n) {
    char *b = checked_block(p, "realloc");
    size_t sz = bsize(b), need = request_block(n), pin = *hdr(b) & PINUSE;
    if (need <= sz) {
        shrink(b, sz, need);
        return p;
    }
    char *next = b + sz;
    size_t nh = *hdr(next), nsz = (nh & CINUSE) ? 0 : tag_size(nh);
    if (nsz && sz + nsz >= need) { /* grow into the free right neighbour */
        fs_delete(next);
        sz += nsz;
        mark_used(b, sz, pin);
        shrink(b, sz, need);
        return p;
    }
    if (next + nsz == heap_hi) { /* at the top of the heap: extend it */
        size_t got;
        if (extend(need - sz - nsz, &got)) {
            if (nsz) fs_delete(next);
            sz += nsz + got;
            mark_used(b, sz, pin);
            /* no shrink: the page-rounding surplus stays in the block, so that
             * nothing can be put above it and its next growth is in place too */
            return p;
        }
    }
    void *q = bt_malloc(n);
    if (!q) return NULL;
    memcpy(q, p, sz - W);
    bt_free(p);
    return q;
}

/* Over-allocate, then give back the part below the aligned payload (a free
 * block of at least MINBLOCK) and the tail. */
static void *bt_memalign(size_t align, size_t n) {
    size_t need = request_block(n); /* the lead taken off below leaves at least this */
    char *p = bt_malloc(need + align + MINBLOCK);
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

/* The checkers' walk over the heap: every block's tags against the
 * invariants above.  Calls each_free(b, size) for every free block, in
 * address order, and returns how many there are (0 before the first growth). */
static size_t bt_check_heap(void (*each_free)(const char *b, size_t sz)) {
    if (!heap_hi) return 0;
    size_t nfree = 0;
    int prev_used = 1;
    char *b = heap_lo;
    while (b < heap_hi) {
        size_t t = *hdr(b), sz = tag_size(t);
        HL_CHECK(((uintptr_t)b & 15) == 8);
        HL_CHECK(sz >= MINBLOCK && (t & (FLAGS & ~(CINUSE | PINUSE))) == 0);
        HL_CHECK(sz <= (size_t)(heap_hi - b));
        HL_CHECK(!!(t & PINUSE) == prev_used); /* PINUSE mirrors the block before */
        int used = (t & CINUSE) != 0;
        if (!used) {
            HL_CHECK(prev_used);         /* no two free blocks touch */
            HL_CHECK(*ftr(b, sz) == sz); /* footer == header size */
            nfree++;
            if (each_free) each_free(b, sz);
        }
        prev_used = used;
        b += sz;
    }
    HL_CHECK(b == heap_hi);
    HL_CHECK(tag_size(*hdr(heap_hi)) == 0 && (*hdr(heap_hi) & CINUSE));
    HL_CHECK(!!(*hdr(heap_hi) & PINUSE) == prev_used);
    return nfree;
}

#endif /* HL_BTAG_H */
