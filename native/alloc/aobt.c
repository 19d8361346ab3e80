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
 *   CINUSE: this block is in use.  PINUSE: the block before it is in use.
 *   The heap around the blocks (pad word, epilogue) is btag.h's one-tag heap.
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
 *   Balance: a treap.  Each node's priority is a fixed hash of its offset
 *   from the heap's first block (a bijective 64-bit mix), kept in heap order
 *   (a parent's priority is at least its children's), which gives expected
 *   O(log n) depth with no priority field, no random state, and the same
 *   tree for the same calls in every run wherever the heap is mapped (the
 *   absolute address would give another shape, hence other instruction
 *   counts, under each Valgrind tool and each ASLR layout).
 *
 * Invariants: btag.h's (blocks tile the heap, no two free blocks touch, the
 * tags agree) with BT_MINBLOCK = 48, aotreap.h's for the one tree, and
 *
 *   {blocks b : CINUSE(b) == 0} == {nodes of the tree}
 *   max(size(b) : b free) == max(lmax(root), size(root), rmax(root))
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

/* The layers: btag.h's one-tag heap, the upper part of a split handed out,
 * a block at the top grown in place, keeping the surplus; the free set is
 * aotreap.h's treap. */
#define BT_TAGS        1
#define BT_MINBLOCK    48 /* header, left, right, lmax, rmax, footer */
#define BT_REALLOC_TOP BT_GROW_KEEP
#include "btag.h"
static bt_heap_t heap;
#define AOT_BASE heap.lo /* priorities hash the offset in the heap */
#include "aotreap.h"

static aot_node_t *root;

/* ------------------------------------------------------------------------ */
/* The free set: one tree (btag.h calls these)                               */
/* ------------------------------------------------------------------------ */

static void fs_insert(bt_heap_t *h, char *b, size_t sz) {
    root = t_insert(root, (aot_node_t *)b);
}
static void fs_delete(bt_heap_t *h, char *b) {
    root = t_delete(root, (aot_node_t *)b);
}
static void fs_replace(bt_heap_t *h, char *old, char *b, size_t sz) {
    fs_delete(h, old);
    fs_insert(h, b, sz);
}
/* the node stays where it is (its address is its key): refresh the max
 * fields above it */
static void fs_grew(bt_heap_t *h, char *b, size_t old, size_t sz) {
    t_resized(root, (aot_node_t *)b);
}
static void fs_shrank(bt_heap_t *h, char *b, size_t old) {
    t_resized(root, (aot_node_t *)b);
}
/* Cost: one descent (three loads and compares per level) to find the block;
 * the split adds one more to refresh the max fields above it. */
static char *fs_find(bt_heap_t *h, size_t need) {
    return (char *)t_first_fit(root, need);
}

/* ------------------------------------------------------------------------ */
/* The malloc interface                                                      */
/* ------------------------------------------------------------------------ */

static int ab_init(void) {
    bt_init(&heap, NULL, BT_MINBLOCK, BT_MINBLOCK, hl_page_size());
    return 0;
}
BT_ONE_HEAP(heap)
static void *ab_memalign(size_t align, size_t n) {
    return bt_memalign(&heap, align, n, bt_request(n));
}

/* ------------------------------------------------------------------------ */
/* The checker                                                               */
/* ------------------------------------------------------------------------ */

static size_t check_largest;
static void note_free(const bt_heap_t *h, const char *b, size_t sz) {
    check_largest = sz > check_largest ? sz : check_largest;
}

static void ab_check(void) {
    check_largest = 0;
    size_t nfree = bt_check_heap(&heap, note_free), seen = 0;
    if (!heap.hi) {
        HL_CHECK(root == NULL);
        return;
    }
    HL_CHECK(t_check(root, heap.lo - 1, heap.hi, UINT64_MAX, BT_MINBLOCK, SIZE_MAX, &seen,
                     nfree) == check_largest);
    HL_CHECK(seen == nfree); /* every free block is in the tree */
}

const hl_alloc_t hl_alloc_aobt = {
    .info = {"aobt",
             "Address-ordered binary tree (a treap) whose nodes keep the largest free size in "
             "each subtree: first fit in one descent, coalescing",
             "003 §2.2.1"},
    .init = ab_init,
    .malloc = bt_one_malloc,
    .free = bt_one_free,
    .usable_size = bt_one_usable_size,
    .realloc = bt_one_realloc,
    .memalign = ab_memalign,
    .check = ab_check,
};
