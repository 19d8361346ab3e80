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
 *   CINUSE: this block is in use.  PINUSE: the block before it is in use.
 *   The heap around the blocks (pad word, epilogue) is btag.h's one-tag heap.
 *
 *   The eight trees, by block size (the whole block, header included):
 *
 *     tree[0]  [0,64)     tree[2]  [128,192)   tree[4]  [256,320)   tree[6]  [384,448)
 *     tree[1]  [64,128)   tree[3]  [192,256)   tree[5]  [320,384)   tree[7]  [448,...)
 *
 *   Each tree is a binary search tree on block addresses with lmax/rmax in
 *   every node (the largest sizes in its left and right subtrees, 0 when
 *   empty), balanced as a treap whose priorities are a fixed hash of the
 *   node's offset in the heap (see aobt.c).
 *
 * Invariants: btag.h's (blocks tile the heap, no two free blocks touch, the
 * tags agree) with BT_MINBLOCK = 48, aotreap.h's for each tree, and
 *
 *   {blocks b : CINUSE(b) == 0} == union of the nodes of tree[0..7]
 *   b in tree[r]  =>  range(size(b)) == r,  range(s) = min(s / 64, 7)
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

/* The layers: btag.h's one-tag heap, the upper part of a split handed out,
 * a block at the top grown in place, keeping the surplus; the free set is
 * eight of aotreap.h's treaps. */
#define BT_TAGS        1
#define BT_MINBLOCK    48 /* header, left, right, lmax, rmax, footer */
#define BT_REALLOC_TOP BT_GROW_KEEP
#include "btag.h"
static bt_heap_t heap;
#define AOT_BASE heap.lo /* priorities hash the offset in the heap */
#include "aotreap.h"

#define NTREES 8  /* 003 §4 */
#define RANGE  64 /* bytes of block size per tree */

static aot_node_t *tree[NTREES]; /* tree[i]: free blocks of size in [64i, 64i+64), the last open */

/* The tree that holds free blocks of size sz. */
static inline unsigned range_of(size_t sz) {
    return sz >= (NTREES - 1) * RANGE ? NTREES - 1 : (unsigned)(sz / RANGE);
}

/* ------------------------------------------------------------------------ */
/* The free set: eight trees (btag.h calls these)                            */
/* ------------------------------------------------------------------------ */

/* The segregation: which tree a free block is in follows from its size. */
static void fs_insert(bt_heap_t *h, char *b, size_t sz) {
    unsigned r = range_of(sz);
    tree[r] = t_insert(tree[r], (aot_node_t *)b);
}
static void fs_delete(bt_heap_t *h, char *b) {
    unsigned r = range_of(bsize(b));
    tree[r] = t_delete(tree[r], (aot_node_t *)b);
}
static void fs_replace(bt_heap_t *h, char *old, char *b, size_t sz) {
    fs_delete(h, old);
    fs_insert(h, b, sz);
}
/* b, in the tree for size `old`, now has size bsize(b): refresh the max
 * fields above it, or move it to the tree of its new range. */
static void resized(char *b, size_t old, size_t sz) {
    aot_node_t *x = (aot_node_t *)b;
    unsigned r = range_of(old), nr = range_of(sz);
    if (r == nr) {
        t_resized(tree[r], x);
        return;
    }
    tree[r] = t_delete(tree[r], x); /* goes by address; x's own size is not read */
    tree[nr] = t_insert(tree[nr], x);
}
static void fs_grew(bt_heap_t *h, char *b, size_t old, size_t sz) {
    resized(b, old, sz);
}
static void fs_shrank(bt_heap_t *h, char *b, size_t old) {
    resized(b, old, bsize(b));
}

/* The block to allocate `need` bytes from: first fit in the request's own
 * range, else the lowest-addressed block of the first non-empty range above
 * (every block there fits), else NULL.  Cost: a look at up to eight roots,
 * one descent of one small tree (three loads and compares per level); the
 * split adds one more to refresh the max fields. */
static char *fs_find(bt_heap_t *h, size_t need) {
    unsigned r = range_of(need);
    aot_node_t *x = t_first_fit(tree[r], need);
    while (!x && ++r < NTREES)
        x = t_first_fit(tree[r], need);
    return (char *)x;
}

/* ------------------------------------------------------------------------ */
/* The malloc interface                                                      */
/* ------------------------------------------------------------------------ */

static int sb_init(void) {
    bt_init(&heap, NULL, BT_MINBLOCK, BT_MINBLOCK, hl_page_size());
    return 0;
}
BT_ONE_HEAP(heap)
static void *sb_memalign(size_t align, size_t n) {
    return bt_memalign(&heap, align, n, bt_request(n));
}

/* ------------------------------------------------------------------------ */
/* The checker                                                               */
/* ------------------------------------------------------------------------ */

static size_t largest[NTREES]; /* the checker's: the largest free size per range */
static void note_free(const bt_heap_t *h, const char *b, size_t sz) {
    unsigned r = range_of(sz);
    largest[r] = sz > largest[r] ? sz : largest[r];
}

static void sb_check(void) {
    for (unsigned r = 0; r < NTREES; r++)
        largest[r] = 0;
    size_t nfree = bt_check_heap(&heap, note_free), seen = 0;
    for (unsigned r = 0; r < NTREES; r++) {
        if (!heap.hi) {
            HL_CHECK(tree[r] == NULL);
            continue;
        }
        size_t lo = r * RANGE, hi = r == NTREES - 1 ? SIZE_MAX : lo + RANGE - 1;
        lo = lo < BT_MINBLOCK ? BT_MINBLOCK : lo;
        HL_CHECK(t_check(tree[r], heap.lo - 1, heap.hi, UINT64_MAX, lo, hi, &seen, nfree) ==
                 largest[r]);
    }
    HL_CHECK(seen == nfree); /* every free block is in its tree */
}

const hl_alloc_t hl_alloc_sbt = {
    .info = {"sbt",
             "Segregated binary trees: eight address-ordered trees with subtree max sizes, one per "
             "64-byte size range, first fit, coalescing",
             "003 §4; 003 §2.2.1"},
    .init = sb_init,
    .malloc = bt_one_malloc,
    .free = bt_one_free,
    .usable_size = bt_one_usable_size,
    .realloc = bt_one_realloc,
    .memalign = sb_memalign,
    .check = sb_check,
};
