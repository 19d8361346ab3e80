/*
 * cartesian.c: Stephenson's "fast fits" better fit over a Cartesian tree of
 * free blocks (paper 002 §4 "CARTESIAN", the SunOS malloc; paper 003 §2.2.1).
 *
 *   Block layout (8-byte words; b is 8 mod 16 so that the payload is 16-aligned)
 *
 *         b              b+8                                         b+size
 *         +--------------+---------------------------------------------+
 *   used  | size | INUSE | payload (size - 8 bytes) .................. | next block
 *         +--------------+-------------+-------------+-----------------+
 *   free  | size | 0     | left        | right       | (unused) ...    |
 *         +--------------+-------------+-------------+-----------------+
 *                        \__ the tree node lives in the free block ___/
 *
 *   The heap around the blocks (pad word, epilogue) is btag.h's, in its
 *   length-word variant: no footer and no PINUSE, so the tree finds a
 *   block's free neighbours (fs_release below).
 *
 *   The free tree: every free block is one node, ordered two ways at once
 *   (a Cartesian tree, Vuillemin 1980):
 *
 *                        [0x9008 | 4096]          a. by address in order:
 *                       /               \            left < node < right
 *            [0x1008 | 512]           [0xc008 | 1024]
 *            /           \                 \      b. by size as a heap:
 *   [0x0408 | 64]    [0x4008 | 96]    [0xf008 | 32]  left <= node >= right
 *
 * Invariants: btag.h's (blocks tile the heap, no two free blocks touch) with
 * BT_MINBLOCK = 32, and, for the tree (ct_check):
 *
 *   {blocks b : INUSE(b) == 0} == {nodes of the tree}
 *   x in left(y)  =>  x + size(x) < y;  x in right(y)  =>  y + size(y) < x   (a)
 *   size(left(y)) <= size(y) >= size(right(y))                               (b)
 *   size(root) == max(size(b) : b free)
 *
 * From the papers and from the SunOS implementation they describe:
 *  - free blocks in a Cartesian tree, conditions (a) and (b) of 003 §2.2.1;
 *    every operation costs O(depth) (002 §4), and nothing balances the tree,
 *    so it can degenerate into a list (003 §2.2.1);
 *  - "better fit" allocation: if the root is too small the heap grows;
 *    otherwise descend from the root, at each node taking the smaller child
 *    that is still large enough (the left one on a tie), and stop where
 *    neither child is; that node is allocated;
 *  - the requested bytes come from the low end of the chosen block; the
 *    remainder keeps the node's place in the address order and is demoted
 *    (sifted down) to restore the size order;
 *  - one length word before every block handed out, no footer: free finds
 *    the address neighbours of a block by descending the tree towards its
 *    address (the in-order predecessor and successor both lie on that path),
 *    absorbs those that touch it, then inserts the result by root insertion at
 *    the first node smaller than it;
 *  - realloc shrinks in place and grows into a free right neighbour.
 *
 * Departures: words are 8 bytes and payloads 16-aligned, so a block is a
 * multiple of 16 bytes and the smallest is 32 (header, two links, rounded);
 * the SunOS code kept its tree nodes in a separate pool of headers, here the
 * node lives inside the free block; a block is split whenever the remainder
 * can hold a free block (>= 32 bytes); an INUSE bit in the length word lets
 * free and the checker catch a double free cheaply; the heap grows by whole
 * pages, by only what the topmost free block lacks (SunOS grew by the whole
 * request); realloc also grows a block at the top of the heap by extending
 * the heap, and keeps the page-rounding surplus in the block so that nothing
 * lands above it; a realloc that must move while no free block fits moves
 * to the new top of the heap whole, for the same reason.  Without these two,
 * a string grown a few KB at a time (perl's s///g) gets a fresh block per
 * step, each old one walled in by small blocks placed just above it, and the
 * footprint of the perl test grows sevenfold (328 MB against glibc's 48).
 * The tree is walked iteratively (it may be a list thousands of nodes deep).
 */
#include "hl_alloc.h"

#include <stdbool.h>

/* The layers: btag.h's heap in its length-word variant (the tree finds the
 * neighbours), a block at the top grown in place, keeping the surplus; the
 * free set is the Cartesian tree, and malloc is the tree's own descent. */
#define BT_TAGS        0
#define BT_MINBLOCK    32 /* length word, left, right; rounded to 16 */
#define BT_SPLIT_LOW   1
#define BT_REALLOC_TOP BT_GROW_KEEP
#define BT_MALLOC      ct_alloc
#include "btag.h"

typedef struct ct_node {
    size_t hdr; /* size | INUSE */
    struct ct_node *left, *right;
} ct_node_t;

static bt_heap_t heap;
static ct_node_t *root;

static inline size_t weight(const ct_node_t *x) {
    return x ? bsize(x) : 0;
}

/* ------------------------------------------------------------------------ */
/* The Cartesian tree: insert, delete, demote (each one descent)             */
/* ------------------------------------------------------------------------ */

/* Put free block x of `size` bytes into the tree: descend by address while
 * the nodes are at least as large, then insert x there as the root of the
 * remaining subtree, splitting that subtree by x's address into x's left
 * (lower addresses) and right (higher) subtrees. */
static void ct_insert(ct_node_t *x, size_t size) {
    x->hdr = size;
    ct_node_t **link = &root, *t = root;
    while (weight(t) >= size) {
        link = x < t ? &t->left : &t->right;
        t = *link;
    }
    *link = x;
    ct_node_t **lhook = &x->left, **rhook = &x->right;
    while (t) {
        if (t < x) { /* t and its left subtree lie below x */
            *lhook = t;
            lhook = &t->right;
            t = t->right;
        } else {
            *rhook = t;
            rhook = &t->left;
            t = t->left;
        }
    }
    *lhook = *rhook = NULL;
}

/* Remove the node *link: merge its two subtrees along their inner edges,
 * the larger node going up at every step. */
static void ct_delete(ct_node_t **link) {
    ct_node_t *l = (*link)->left, *r = (*link)->right;
    while (l || r) {
        if (weight(l) >= weight(r)) {
            *link = l;
            link = &l->right;
            l = l->right;
        } else {
            *link = r;
            link = &r->left;
            r = r->left;
        }
    }
    *link = NULL;
}

/* The node *link has become smaller: move it down until both children are
 * no larger than it, promoting the larger child each time. */
static void ct_demote(ct_node_t **link) {
    ct_node_t *x = *link, *l = x->left, *r = x->right;
    size_t w = bsize(x);
    while (weight(l) > w || weight(r) > w) {
        if (weight(l) >= weight(r)) {
            *link = l;
            link = &l->right;
            l = l->right;
        } else {
            *link = r;
            link = &r->left;
            r = r->left;
        }
    }
    *link = x;
    x->left = l;
    x->right = r;
}

/* The link that holds free block x (which must be in the tree). */
static ct_node_t **ct_find(ct_node_t *x) {
    ct_node_t **link = &root;
    while (*link != x) {
        HL_CHECK(*link != NULL);
        link = x < *link ? &(*link)->left : &(*link)->right;
    }
    return link;
}

/* ------------------------------------------------------------------------ */
/* Free: coalesce on the way down, then insert (btag.h calls these)          */
/* ------------------------------------------------------------------------ */

/* Give the `size` bytes at b back to the tree, merged with whatever free
 * blocks touch it; returns the free block that holds them. */
static char *release(char *b, size_t size) {
    ct_node_t **link = &root, *t;
    while ((t = *link) != NULL) {
        char *tb = (char *)t;
        if (b < tb) {
            if (b + size == tb) { /* absorb the right neighbour */
                size += bsize(t);
                ct_delete(link);
            } else if (HL_UNLIKELY(b + size > tb)) {
                hl_fatal("free(%p): block overlaps free block %p (corruption)", b + W, tb + W);
            } else {
                link = &t->left;
            }
        } else {
            char *tend = tb + bsize(t);
            if (tend == b) { /* absorb the left neighbour */
                b = tb;
                size += bsize(t);
                ct_delete(link);
            } else if (HL_UNLIKELY(tend > b)) {
                hl_fatal("free(%p): block is already free (double free)", b + W);
            } else {
                link = &t->right;
            }
        }
    }
    ct_insert((ct_node_t *)b, size);
    return b;
}
static char *fs_release(bt_heap_t *h, char *b, size_t sz) {
    return release(b, sz);
}

/* b leaves the tree (realloc grows into it). */
static void fs_delete(bt_heap_t *h, char *b) {
    ct_delete(ct_find((ct_node_t *)b));
}

/* ------------------------------------------------------------------------ */
/* Heap growth                                                               */
/* ------------------------------------------------------------------------ */

/* Grow the heap so that a free block of at least `need` bytes ends at the
 * epilogue, by only what the topmost free block (the rightmost node) lacks;
 * returns that block (in the tree), or NULL. */
static char *__attribute__((noinline)) morecore(size_t need) {
    size_t have = 0;
    ct_node_t *t = root;
    while (t && t->right)
        t = t->right;
    if (t && (char *)t + bsize(t) == heap.hi) have = bsize(t);
    size_t got = bt_extend(&heap, need - have);
    return got ? fs_release(&heap, heap.hi - got, got) : NULL;
}

/* ------------------------------------------------------------------------ */
/* The malloc interface                                                      */
/* ------------------------------------------------------------------------ */

static int ct_init(void) {
    bt_init(&heap, NULL, BT_MINBLOCK, BT_MINBLOCK, hl_page_size());
    return 0;
}

/* Cost: one descent of the tree, two loads and two compares per level, then a
 * demote or a delete (another partial descent). */
static void *ct_malloc(size_t n) {
    size_t need = bt_request(n);
    if (weight(root) < need && !morecore(need)) return NULL; /* the root is the largest */
    ct_node_t **link = &root, *x = root;
    for (;;) {
        size_t lw = weight(x->left), rw = weight(x->right);
        if (lw < need && rw < need) break; /* neither child fits: x is the better fit */
        if ((lw <= rw && lw >= need) || rw < need) {
            link = &x->left;
            x = x->left;
        } else {
            link = &x->right;
            x = x->right;
        }
    }
    size_t size = bsize(x);
    if (size - need >= BT_MINBLOCK) { /* the remainder keeps x's place, then sinks */
        ct_node_t *rest = (ct_node_t *)((char *)x + need);
        rest->hdr = size - need;
        rest->left = x->left;
        rest->right = x->right;
        *link = rest;
        ct_demote(link);
        size = need;
    } else {
        ct_delete(link);
    }
    *hdr(x) = size | INUSE;
    return (char *)x + W;
}

static void *ct_alloc(bt_heap_t *h, size_t n) { /* btag.h's BT_MALLOC */
    return ct_malloc(n);
}
static void ct_free(void *p) {
    bt_free(&heap, p);
}
static size_t ct_usable_size(void *p) {
    return bt_usable_size(&heap, p);
}

/* In place if it can be (btag.h); else, when no free block fits, to the top
 * of the heap, whole (the surplus under a page stays in it, as when a block
 * at the top grows in place); else to a block found as malloc finds one. */
static void *ct_realloc(void *p, size_t n) {
    if (bt_resize(&heap, p, n)) return p;
    size_t need = bt_request(n);
    if (weight(root) < need) {
        char *t = morecore(need);
        if (!t) return NULL;
        ct_delete(ct_find((ct_node_t *)t));
        *hdr(t) = bsize(t) | INUSE;
        memcpy(t + W, p, bt_usable((char *)p - W));
        bt_free(&heap, p);
        return t + W;
    }
    return bt_move(&heap, p, n);
}

static void *ct_memalign(size_t align, size_t n) {
    return bt_memalign(&heap, align, n, bt_request(n));
}

/* ------------------------------------------------------------------------ */
/* The checker                                                               */
/* ------------------------------------------------------------------------ */

/* Is x a plausible node pointer (checked before every dereference)? */
static inline bool in_heap(const ct_node_t *x) {
    return (const char *)x >= heap.lo && (const char *)x < heap.hi && ((uintptr_t)x & 15) == 8;
}

static size_t free_bytes, largest;
static void note_free(const bt_heap_t *h, const char *b, size_t sz) {
    free_bytes += sz;
    largest = sz > largest ? sz : largest;
}

/* Walk the heap (btag.h), then the tree in order with a Morris traversal:
 * no stack and no recursion, because the tree may be a list thousands of
 * nodes deep.  The traversal threads the right link of each left subtree's
 * last node back to its in-order successor and removes the thread on the
 * second arrival, so the tree is intact when it returns.  A node arrived at
 * by a real right link (not by a thread) is checked against the node it
 * came from; left links are never threaded. */
static void ct_check(void) {
    free_bytes = largest = 0;
    size_t nfree = bt_check_heap(&heap, note_free);
    if (!heap.hi) {
        HL_CHECK(root == NULL);
        return;
    }
    HL_CHECK(weight(root) == largest); /* the size order puts the largest at the root */

    size_t seen = 0, seen_bytes = 0;
    char *last = NULL;
    ct_node_t *x = root, *from = NULL;
    while (x) {
        HL_CHECK(in_heap(x));
        if (x->left) {
            ct_node_t *pred = x->left;
            size_t steps = 0;
            HL_CHECK(in_heap(pred));
            while (pred->right && pred->right != x) {
                pred = pred->right;
                HL_CHECK(in_heap(pred) && ++steps <= nfree);
            }
            if (!pred->right) { /* first arrival at x, by a real link */
                HL_CHECK(from == NULL || bsize(x) <= bsize(from)); /* (b), right child */
                from = NULL;
                pred->right = x; /* thread */
                x = x->left;
                continue;
            }
            pred->right = NULL; /* second arrival, by the thread: remove it */
        } else {
            HL_CHECK(from == NULL || bsize(x) <= bsize(from)); /* (b), right child */
        }
        /* visit x: its left subtree is done */
        char *xb = (char *)x;
        HL_CHECK(!(x->hdr & INUSE) && bsize(x) >= BT_MINBLOCK);
        HL_CHECK(bsize(x) <= (size_t)(heap.hi - xb));
        HL_CHECK(last == NULL || last + bsize(last) < xb); /* (a) address order, not touching */
        HL_CHECK(weight(x->left) <= bsize(x));             /* (b), left child */
        last = xb;
        seen_bytes += bsize(x);
        HL_CHECK(++seen <= nfree);
        from = x;
        x = x->right;
    }
    HL_CHECK(seen == nfree && seen_bytes == free_bytes);
}

const hl_alloc_t hl_alloc_cartesian = {
    .info = {"cartesian",
             "Stephenson's fast fits: better fit over a Cartesian tree of free blocks ordered by "
             "address and size, coalescing",
             "002 §4; 003 §2.2.1"},
    .init = ct_init,
    .malloc = ct_malloc,
    .free = ct_free,
    .usable_size = ct_usable_size,
    .realloc = ct_realloc,
    .memalign = ct_memalign,
    .check = ct_check,
};
