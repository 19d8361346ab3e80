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

#define MINBLOCK 48 /* header, left, right, lmax, rmax, footer */

#include "btag.h"

static inline size_t max3(size_t a, size_t b, size_t c) {
    size_t m = a > b ? a : b;
    return m > c ? m : c;
}

#include "aotreap.h"
typedef aot_node_t ab_node_t;

static ab_node_t *root;

/* ------------------------------------------------------------------------ */
/* The free set: one tree (btag.h calls these)                               */
/* ------------------------------------------------------------------------ */

static void fs_insert(char *b) {
    root = t_insert(root, (ab_node_t *)b);
}
static void fs_delete(char *b) {
    root = t_delete(root, (ab_node_t *)b);
}
/* the node stays where it is (its address is its key): refresh the max
 * fields above it */
static void fs_grew(char *b, size_t old) {
    t_resized(root, (ab_node_t *)b);
}
static void fs_shrank(char *b, size_t old) {
    t_resized(root, (ab_node_t *)b);
}
/* Cost: one descent (three loads and compares per level) to find the block;
 * take() adds one more to refresh the max fields above it. */
static char *fs_find(size_t need) {
    return (char *)t_first_fit(root, need);
}

static int ab_init(void) {
    bt_init();
    return 0;
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

static size_t check_largest;
static void note_free(const char *b, size_t sz) {
    check_largest = sz > check_largest ? sz : check_largest;
}

static void ab_check(void) {
    if (!heap_hi) {
        HL_CHECK(root == NULL);
        return;
    }
    check_largest = 0;
    size_t nfree = bt_check_heap(note_free), largest = check_largest;
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
    .malloc = bt_malloc,
    .free = bt_free,
    .usable_size = bt_usable_size,
    .realloc = bt_realloc,
    .memalign = bt_memalign,
    .check = ab_check,
};
