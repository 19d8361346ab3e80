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

#define MINBLOCK 48 /* header, left, right, lmax, rmax, footer */
#define NTREES   8  /* 003 §4 */
#define RANGE    64 /* bytes of block size per tree */

#include "btag.h"

static inline size_t max3(size_t a, size_t b, size_t c) {
    size_t m = a > b ? a : b;
    return m > c ? m : c;
}

#include "aotreap.h"
typedef aot_node_t sb_node_t;

static sb_node_t *tree[NTREES]; /* tree[i]: free blocks of size in [64i, 64i+64), the last open */

/* The tree that holds free blocks of size sz. */
static inline unsigned range_of(size_t sz) {
    return sz >= (NTREES - 1) * RANGE ? NTREES - 1 : (unsigned)(sz / RANGE);
}

/* ------------------------------------------------------------------------ */
/* The free set: eight trees (btag.h calls these)                            */
/* ------------------------------------------------------------------------ */

/* The segregation: which tree a free block is in follows from its size. */
static void fs_insert(char *b) {
    unsigned r = range_of(bsize(b));
    tree[r] = t_insert(tree[r], (sb_node_t *)b);
}
static void fs_delete(char *b) {
    unsigned r = range_of(bsize(b));
    tree[r] = t_delete(tree[r], (sb_node_t *)b);
}
/* b, in the tree for size `old`, now has size bsize(b): refresh the max
 * fields above it, or move it to the tree of its new range. */
static void resized(char *b, size_t old) {
    sb_node_t *x = (sb_node_t *)b;
    unsigned r = range_of(old), nr = range_of(bsize(x));
    if (r == nr) {
        t_resized(tree[r], x);
        return;
    }
    tree[r] = t_delete(tree[r], x); /* goes by address; x's own size is not read */
    tree[nr] = t_insert(tree[nr], x);
}
static void fs_grew(char *b, size_t old) {
    resized(b, old);
}
static void fs_shrank(char *b, size_t old) {
    resized(b, old);
}

/* The block to allocate `need` bytes from: first fit in the request's own
 * range, else the lowest-addressed block of the first non-empty range above
 * (every block there fits), else NULL.  Cost: a look at up to eight roots,
 * one descent of one small tree (three loads and compares per level); take()
 * adds one more to refresh the max fields. */
static char *fs_find(size_t need) {
    unsigned r = range_of(need);
    sb_node_t *x = t_first_fit(tree[r], need);
    while (!x && ++r < NTREES)
        x = t_first_fit(tree[r], need);
    return (char *)x;
}

static int sb_init(void) {
    bt_init();
    return 0;
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

static size_t largest[NTREES]; /* the checker's: the largest free size per range */
static void note_free(const char *b, size_t sz) {
    unsigned r = range_of(sz);
    largest[r] = sz > largest[r] ? sz : largest[r];
}

static void sb_check(void) {
    if (!heap_hi) {
        for (unsigned r = 0; r < NTREES; r++)
            HL_CHECK(tree[r] == NULL);
        return;
    }
    for (unsigned r = 0; r < NTREES; r++)
        largest[r] = 0;
    size_t nfree = bt_check_heap(note_free);
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
    .malloc = bt_malloc,
    .free = bt_free,
    .usable_size = bt_usable_size,
    .realloc = bt_realloc,
    .memalign = bt_memalign,
    .check = sb_check,
};
