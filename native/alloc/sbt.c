/*
 * sbt.c: segregated binary trees (paper 003 §4 "Segregated Binary Tree",
 * after Rezaei and Cytron, MEDEA 2000): eight address-ordered binary trees of
 * free blocks, one per 64-byte size range, each node keeping the largest free
 * size in each of its subtrees (the trees of aobt.c, 003 §2.2.1).
 *
 *   Block layout (8-byte words; b is 8 mod 16 so that the payload is 16-aligned)
 *
 *         b                    b+8                                        b+size
 *         +--------------------+--------------------------------------------+
 *   used  | size |PINUSE|CINUSE| payload (size - 8 bytes) ................. |
 *         +--------------------+-------+-------+-------+-------+---- ... ---+------+
 *   free  | size |PINUSE=1| 0  | left  | right | lmax  | rmax  | (unused)   | size |
 *         +--------------------+-------+-------+-------+-------+---- ... ---+------+
 *                               \______ tree node (32 bytes) ______/          footer
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
 *   The eight trees, by block size (the whole block, header included):
 *
 *     tree[0]  [0,64)     tree[2]  [128,192)   tree[4]  [256,320)   tree[6]  [384,448)
 *     tree[1]  [64,128)   tree[3]  [192,256)   tree[5]  [320,384)   tree[7]  [448,...)
 *
 *   Each tree is a binary search tree on block addresses with lmax/rmax in
 *   every node (the largest sizes in its left and right subtrees, 0 when
 *   empty), balanced as a treap whose priorities are a fixed hash of the
 *   node's address (see aobt.c).
 *
 * Invariants: blocks tile [heap_lo, heap_hi) exactly; every size is a multiple
 * of 16 and at least 48; a block is a node of tree[range(size)] iff its
 * CINUSE bit is clear, and of no other tree; a free block's footer equals its
 * size; every PINUSE bit equals the CINUSE bit of the block before; no two
 * free blocks are adjacent; each tree is in address order in-order, in
 * priority heap order, and every lmax/rmax is the largest size below it.
 *
 * From the paper: eight trees, one per size range, ranges 64 bytes wide by
 * the block's size x ("if a chunk's size is x then 64 <= x < 128" for the
 * second tree), chunks under 64 bytes in the first tree; each tree an
 * address-ordered binary tree (003 §2.2.1) with the largest sizes of the
 * subtrees in every node; splitting and coalescing as in segregated fit:
 * a request is served from its own range's tree if a block there fits
 * (address-ordered first fit, one descent), else from the first non-empty
 * higher range, whose leftmost (lowest-addressed) block always fits; a split
 * remainder and a coalesced block go to the tree of their new size.
 *
 * Reading the ranges: eight 64-byte ranges from 0 already reach 512 and
 * leave no tree for chunks over 512, so "under 64 in the first tree, over
 * 512 in the last, ranges 64 bytes wide, the second [64,128)" are all met by
 * making the last range [448, infinity): it holds every chunk over 512, and
 * those from 448 up.
 *
 * Departures: words are 8 bytes and payloads 16-aligned, so a free block
 * needs header, four node words and footer: the smallest block is 48 bytes
 * (tree[0] holds only 48-byte blocks) and sizes are multiples of 16.
 * The paper's trees are not balanced; these are treaps.  Boundary tags
 * (dlmalloc's PINUSE bit, footers in free blocks) find a neighbour and its
 * tree in constant time.  A block is split when the remainder can hold a
 * free block (>= 48 bytes); the upper part is handed out, so the remainder
 * keeps its address.  The heap grows by whole pages and only by what a free
 * block at its top lacks.  realloc shrinks in place, grows into a free right
 * neighbour, or at the top of the heap by extending it; then the
 * page-rounding surplus stays in the block, so that nothing lands above it
 * and its next growth is in place too (a string grown a few KB at a time
 * then stays at the top instead of moving every step).
 */
#include "hl_alloc.h"

#include <stdbool.h>
#include <string.h>

#define W        8  /* one tag word */
#define MINBLOCK 48 /* header, left, right, lmax, rmax, footer */
#define CINUSE   ((size_t)1)
#define PINUSE   ((size_t)2)
#define FLAGS    ((size_t)15)
#define NTREES   8  /* 003 §4 */
#define RANGE    64 /* bytes of block size per tree */


#include "aotreap.h"
typedef aot_node_t sb_node_t;

static sb_node_t *tree[NTREES]; /* tree[i]: free blocks of size in [64i, 64i+64), the last open */
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
static inline size_t max3(size_t a, size_t b, size_t c) {
    size_t m = a > b ? a : b;
    return m > c ? m : c;
}

/* The tree that holds free blocks of size sz. */
static inline unsigned range_of(size_t sz) {
    return sz >= (NTREES - 1) * RANGE ? NTREES - 1 : (unsigned)(sz / RANGE);
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


/* The segregation: which tree a free block is in follows from its size. */
static inline void fb_insert(sb_node_t *x) {
    unsigned r = range_of(bsize(x));
    tree[r] = t_insert(tree[r], x);
}
static inline void fb_delete(sb_node_t *x) {
    unsigned r = range_of(bsize(x));
    tree[r] = t_delete(tree[r], x);
}
/* x, in the tree for size `old`, now has size bsize(x): refresh the max
 * fields above it, or move it to the tree of its new range. */
static void fb_resized(sb_node_t *x, size_t old) {
    unsigned r = range_of(old), nr = range_of(bsize(x));
    if (r == nr) {
        t_resized(tree[r], x);
        return;
    }
    tree[r] = t_delete(tree[r], x); /* goes by address; x's own size is not read */
    tree[nr] = t_insert(tree[nr], x);
}

/* ------------------------------------------------------------------------ */
/* Blocks: coalescing, growth, splitting                                     */
/* ------------------------------------------------------------------------ */

/* b (sz bytes, header with a correct PINUSE, no longer in use) goes back:
 * merged with a free neighbour on either side, then into the tree.  Returns
 * the free block that holds it. */
static char *release(char *b, size_t sz) {
    size_t h = *hdr(b);
    char *next = b + sz;
    size_t nh = *hdr(next);
    if (!(nh & CINUSE)) {
        fb_delete((sb_node_t *)next);
        sz += tag_size(nh);
    }
    if (!(h & PINUSE)) { /* the free block before grows in place: same node */
        char *pb = b - *(size_t *)(b - W);
        size_t old = bsize(pb);
        mark_free(pb, old + sz);
        fb_resized((sb_node_t *)pb, old);
        return pb;
    }
    mark_free(b, sz);
    fb_insert((sb_node_t *)b);
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
static sb_node_t *__attribute__((noinline)) grow(size_t need) {
    size_t have = 0;
    if (heap_hi && !(*hdr(heap_hi) & PINUSE))
        have = *(size_t *)(heap_hi - W); /* the footer of the free top block */
    size_t got;
    char *b = extend(need - have, &got);
    return b ? (sb_node_t *)release(b, got) : NULL;
}

/* Allocate `need` bytes from the free block x: its upper part if the rest can
 * stay a free block (x keeps its address and its node), else all of it. */
static void *take(sb_node_t *x, size_t need) {
    char *b = (char *)x;
    size_t sz = bsize(x), rest = sz - need;
    if (rest >= MINBLOCK) {
        mark_free(b, rest);
        fb_resized(x, sz);
        char *u = b + rest;
        mark_used(u, need, 0);
        return u + W;
    }
    fb_delete(x);
    mark_used(b, sz, PINUSE);
    return b + W;
}

/* ------------------------------------------------------------------------ */
/* The malloc interface                                                      */
/* ------------------------------------------------------------------------ */

static int sb_init(void) {
    page = hl_page_size();
    return 0;
}

/* The block to allocate `need` bytes from: first fit in the request's own
 * range, else the lowest-addressed block of the first non-empty range above
 * (every block there fits), else NULL. */
static sb_node_t *find(size_t need) {
    unsigned r = range_of(need);
    sb_node_t *x = t_first_fit(tree[r], need);
    while (!x && ++r < NTREES)
        x = t_first_fit(tree[r], need);
    return x;
}

/* Cost: a look at up to eight roots, one descent of one small tree (three
 * loads and compares per level), one more to refresh the max fields. */
static void *sb_malloc(size_t n) {
    size_t need = request_block(n);
    sb_node_t *x = find(need);
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

static void sb_free(void *p) {
    char *b = checked_block(p, "free");
    *hdr(b) &= ~CINUSE; /* a stale header left inside a merged block must not read as in use */
    release(b, bsize(b));
}

static size_t sb_usable_size(void *p) {
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

static void *sb_realloc(void *p, size_t n) {
    char *b = checked_block(p, "realloc");
    size_t sz = bsize(b), need = request_block(n), pin = *hdr(b) & PINUSE;
    if (need <= sz) {
        shrink(b, sz, need);
        return p;
    }
    char *next = b + sz;
    size_t nh = *hdr(next), nsz = (nh & CINUSE) ? 0 : tag_size(nh);
    if (nsz && sz + nsz >= need) { /* grow into the free right neighbour */
        fb_delete((sb_node_t *)next);
        sz += nsz;
        mark_used(b, sz, pin);
        shrink(b, sz, need);
        return p;
    }
    if (next + nsz == heap_hi) { /* at the top of the heap: extend it */
        size_t got;
        if (extend(need - sz - nsz, &got)) {
            if (nsz) fb_delete((sb_node_t *)next);
            sz += nsz + got;
            mark_used(b, sz, pin);
            /* no shrink: the page-rounding surplus stays in the block, so that
             * nothing can be put above it and its next growth is in place too */
            return p;
        }
    }
    void *q = sb_malloc(n);
    if (!q) return NULL;
    memcpy(q, p, sz - W);
    sb_free(p);
    return q;
}

/* Over-allocate, then give back the part below the aligned payload (a free
 * block of at least MINBLOCK) and the tail. */
static void *sb_memalign(size_t align, size_t n) {
    size_t need = request_block(n); /* the lead taken off below leaves at least this */
    char *p = sb_malloc(need + align + MINBLOCK);
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

static size_t check_free, check_seen;

/* Check the subtree t of tree[r], whose nodes must lie strictly between lo
 * and hi and have priorities no higher than `above`; returns its largest
 * size. */
static size_t check_tree(const sb_node_t *t, unsigned r, const char *lo, const char *hi,
                         uint64_t above) {
    if (!t) return 0;
    const char *b = (const char *)t;
    HL_CHECK(b >= heap_lo && b < heap_hi && ((uintptr_t)b & 15) == 8);
    HL_CHECK(++check_seen <= check_free);                 /* no cycles, no strays */
    HL_CHECK(b > lo && b < hi);                           /* address order */
    HL_CHECK(prio(t) <= above);                           /* priority heap order */
    HL_CHECK(!(t->hdr & CINUSE) && bsize(t) >= MINBLOCK); /* a free block */
    HL_CHECK(bsize(t) <= (size_t)(heap_hi - b));
    HL_CHECK(range_of(bsize(t)) == r); /* in the tree of its size range */
    size_t lm = check_tree(t->left, r, lo, b, prio(t));
    size_t rm = check_tree(t->right, r, b, hi, prio(t));
    HL_CHECK(t->lmax == lm && t->rmax == rm); /* the max fields */
    return max3(lm, bsize(t), rm);
}

static void sb_check(void) {
    if (!heap_hi) {
        for (unsigned r = 0; r < NTREES; r++)
            HL_CHECK(tree[r] == NULL);
        return;
    }
    size_t nfree = 0, largest[NTREES] = {0};
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
            unsigned r = range_of(sz);
            largest[r] = sz > largest[r] ? sz : largest[r];
        }
        prev_used = used;
        b += sz;
    }
    HL_CHECK(b == heap_hi);
    HL_CHECK(tag_size(*hdr(heap_hi)) == 0 && (*hdr(heap_hi) & CINUSE));
    HL_CHECK(!!(*hdr(heap_hi) & PINUSE) == prev_used);
    check_free = nfree;
    check_seen = 0;
    for (unsigned r = 0; r < NTREES; r++)
        HL_CHECK(check_tree(tree[r], r, heap_lo - 1, heap_hi, UINT64_MAX) == largest[r]);
    HL_CHECK(check_seen == nfree); /* every free block is in its tree */
}

const hl_alloc_t hl_alloc_sbt = {
    .info = {"sbt",
             "Segregated binary trees: eight address-ordered trees with subtree max sizes, one per "
             "64-byte size range, first fit, coalescing",
             "003 §4; 003 §2.2.1"},
    .init = sb_init,
    .malloc = sb_malloc,
    .free = sb_free,
    .usable_size = sb_usable_size,
    .realloc = sb_realloc,
    .memalign = sb_memalign,
    .check = sb_check,
};
