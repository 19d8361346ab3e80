/*
 * aobt.c: an address-ordered binary tree of free blocks whose nodes keep the
 * largest free size in each subtree (paper 003 §2.2.1, after Rezaei and Kavi,
 * "A new implementation for memory management", 2000).
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
 *   The free tree: a binary search tree on block addresses.  lmax and rmax
 *   are the sizes of the largest free blocks in the left and right subtrees
 *   (0 when empty), as in 003 §2.2.1, so that a search can see from a node
 *   alone which way a fit lies:
 *
 *                      [0x5008 | 64  | lmax 512 | rmax 96]
 *                      /                                  \
 *     [0x1008 | 512 | 0 | 48]                  [0x9008 | 96 | 0 | 0]
 *                        \
 *                [0x2008 | 48 | 0 | 0]
 *
 *   Balance: a treap.  Each node's priority is a fixed hash of its address
 *   (a bijective 64-bit mix), kept in heap order (a parent's priority is at
 *   least its children's), which gives expected O(log n) depth with no
 *   priority field, no random state, and the same tree for the same heap
 *   in every run.
 *
 * Invariants: blocks tile [heap_lo, heap_hi) exactly; every size is a multiple
 * of 16 and at least 48; a block is a tree node iff its CINUSE bit is clear; a
 * free block's footer equals its size; every PINUSE bit equals the CINUSE bit
 * of the block before; no two free blocks are adjacent; the tree is in
 * address order in-order, in priority heap order, and every lmax/rmax is the
 * largest size in that subtree.
 *
 * From the paper: free blocks in a binary search tree keyed by address; each
 * node holds the largest sizes in its left and right subtrees, so that
 * allocation is address-ordered first fit found in one descent: go left when
 * lmax fits, else take the node if it fits, else go right; coalescing of
 * address neighbours on free (immediate, both sides).
 *
 * Departures and choices the paper leaves open: the paper's tree is not
 * balanced; this one is a treap (see above), so that a run of frees in
 * address order cannot turn it into a list.  Words are 8 bytes and payloads
 * 16-aligned, so a free block needs header, four node words and footer: the
 * smallest block is 48 bytes, and blocks are multiples of 16.  Boundary tags
 * (header in every block, footer in free ones, dlmalloc's PINUSE bit) find
 * the neighbours in constant time.  A block is split when the remainder can
 * hold a free block (>= 48 bytes); the upper part is handed out, so the
 * remainder keeps its address and its place in the tree (as in Knuth's
 * Algorithm A).  The heap grows by whole pages and only by what a free block
 * at its top lacks.  realloc shrinks in place, grows into a free right
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


#include "aotreap.h"
typedef aot_node_t ab_node_t;

static ab_node_t *root;
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
 * merged with a free neighbour on either side, then into the tree.  Returns
 * the free block that holds it. */
static char *release(char *b, size_t sz) {
    size_t h = *hdr(b);
    char *next = b + sz;
    size_t nh = *hdr(next);
    if (!(nh & CINUSE)) {
        root = t_delete(root, (ab_node_t *)next);
        sz += tag_size(nh);
    }
    if (!(h & PINUSE)) { /* the free block before grows in place: same node */
        char *pb = b - *(size_t *)(b - W);
        sz += bsize(pb);
        mark_free(pb, sz);
        t_resized(root, (ab_node_t *)pb);
        return pb;
    }
    mark_free(b, sz);
    root = t_insert(root, (ab_node_t *)b);
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
static ab_node_t *__attribute__((noinline)) grow(size_t need) {
    size_t have = 0;
    if (heap_hi && !(*hdr(heap_hi) & PINUSE))
        have = *(size_t *)(heap_hi - W); /* the footer of the free top block */
    size_t got;
    char *b = extend(need - have, &got);
    return b ? (ab_node_t *)release(b, got) : NULL;
}

/* Allocate `need` bytes from the free block x: its upper part if the rest can
 * stay a free block (x keeps its address and its node), else all of it. */
static void *take(ab_node_t *x, size_t need) {
    char *b = (char *)x;
    size_t sz = bsize(x), rest = sz - need;
    if (rest >= MINBLOCK) {
        mark_free(b, rest);
        t_resized(root, x);
        char *u = b + rest;
        mark_used(u, need, 0);
        return u + W;
    }
    root = t_delete(root, x);
    mark_used(b, sz, PINUSE);
    return b + W;
}

/* ------------------------------------------------------------------------ */
/* The malloc interface                                                      */
/* ------------------------------------------------------------------------ */

static int ab_init(void) {
    page = hl_page_size();
    return 0;
}

/* Cost: one descent (three loads and compares per level) to find the block,
 * one more to refresh the max fields above it. */
static void *ab_malloc(size_t n) {
    size_t need = request_block(n);
    ab_node_t *x = t_first_fit(root, need);
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

static void ab_free(void *p) {
    char *b = checked_block(p, "free");
    *hdr(b) &= ~CINUSE; /* a stale header left inside a merged block must not read as in use */
    release(b, bsize(b));
}

static size_t ab_usable_size(void *p) {
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

static void *ab_realloc(void *p, size_t n) {
    char *b = checked_block(p, "realloc");
    size_t sz = bsize(b), need = request_block(n), pin = *hdr(b) & PINUSE;
    if (need <= sz) {
        shrink(b, sz, need);
        return p;
    }
    char *next = b + sz;
    size_t nh = *hdr(next), nsz = (nh & CINUSE) ? 0 : tag_size(nh);
    if (nsz && sz + nsz >= need) { /* grow into the free right neighbour */
        root = t_delete(root, (ab_node_t *)next);
        sz += nsz;
        mark_used(b, sz, pin);
        shrink(b, sz, need);
        return p;
    }
    if (next + nsz == heap_hi) { /* at the top of the heap: extend it */
        size_t got;
        if (extend(need - sz - nsz, &got)) {
            if (nsz) root = t_delete(root, (ab_node_t *)next);
            sz += nsz + got;
            mark_used(b, sz, pin);
            /* no shrink: the page-rounding surplus stays in the block, so that
             * nothing can be put above it and its next growth is in place too */
            return p;
        }
    }
    void *q = ab_malloc(n);
    if (!q) return NULL;
    memcpy(q, p, sz - W);
    ab_free(p);
    return q;
}

/* Over-allocate, then give back the part below the aligned payload (a free
 * block of at least MINBLOCK) and the tail. */
static void *ab_memalign(size_t align, size_t n) {
    size_t need = request_block(n); /* the lead taken off below leaves at least this */
    char *p = ab_malloc(need + align + MINBLOCK);
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

/* Check the subtree t, whose nodes must lie strictly between lo and hi and
 * have priorities no higher than `above`; returns its largest size. */
static size_t check_tree(const ab_node_t *t, const char *lo, const char *hi, uint64_t above) {
    if (!t) return 0;
    const char *b = (const char *)t;
    HL_CHECK(b >= heap_lo && b < heap_hi && ((uintptr_t)b & 15) == 8);
    HL_CHECK(++check_seen <= check_free);                 /* no cycles, no strays */
    HL_CHECK(b > lo && b < hi);                           /* address order */
    HL_CHECK(prio(t) <= above);                           /* priority heap order */
    HL_CHECK(!(t->hdr & CINUSE) && bsize(t) >= MINBLOCK); /* a free block */
    HL_CHECK(bsize(t) <= (size_t)(heap_hi - b));
    size_t lm = check_tree(t->left, lo, b, prio(t));
    size_t rm = check_tree(t->right, b, hi, prio(t));
    HL_CHECK(t->lmax == lm && t->rmax == rm); /* the max fields */
    return max3(lm, bsize(t), rm);
}

static void ab_check(void) {
    if (!heap_hi) {
        HL_CHECK(root == NULL);
        return;
    }
    size_t nfree = 0, largest = 0;
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
            largest = sz > largest ? sz : largest;
        }
        prev_used = used;
        b += sz;
    }
    HL_CHECK(b == heap_hi);
    HL_CHECK(tag_size(*hdr(heap_hi)) == 0 && (*hdr(heap_hi) & CINUSE));
    HL_CHECK(!!(*hdr(heap_hi) & PINUSE) == prev_used);
    check_free = nfree;
    check_seen = 0;
    HL_CHECK(check_tree(root, heap_lo - 1, heap_hi, UINT64_MAX) == largest);
    HL_CHECK(check_seen == nfree); /* every free block is in the tree */
}

const hl_alloc_t hl_alloc_aobt = {
    .info = {"aobt",
             "Address-ordered binary tree (a treap) whose nodes keep the largest free size in "
             "each subtree: first fit in one descent, coalescing",
             "003 §2.2.1"},
    .init = ab_init,
    .malloc = ab_malloc,
    .free = ab_free,
    .usable_size = ab_usable_size,
    .realloc = ab_realloc,
    .memalign = ab_memalign,
    .check = ab_check,
};
