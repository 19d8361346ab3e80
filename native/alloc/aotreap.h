/*
 * aotreap.h: the address-ordered binary tree of free blocks with the largest
 * free size kept in every node (paper 003 §2.2.1), shared by aobt.c (one
 * tree) and sbt.c (eight, one per size range), with its checker.  Each
 * includes it once, after btag.h (whose bsize() reads a block's size from
 * its header word); the functions become the file's own statics.
 *
 *   A node is the first 40 bytes of a free block (see aobt.c's drawing):
 *
 *   b        b+8      b+16     b+24     b+32     b+40
 *   +--------+--------+--------+--------+--------+---- ...
 *   | hdr    | left   | right  | lmax   | rmax   |
 *   +--------+--------+--------+--------+--------+---- ...
 *
 * Invariants (t_check asserts them; l, r: a node's subtrees):
 *
 *   x in l(y)  =>  x + size(x) <= y;   x in r(y)  =>  y + size(y) <= x
 *                                                  (in-order is address order)
 *   prio(x) <= prio(parent(x))                     (a treap; prio is a fixed hash of
 *                                                   x - AOT_BASE, the offset in the
 *                                                   heap, so the shape depends only
 *                                                   on the set of free blocks, not on
 *                                                   where the heap was mapped: the
 *                                                   same tree, hence the same
 *                                                   instruction counts, under every
 *                                                   Valgrind tool and every ASLR)
 *   lmax(y) == max(size(x) for x in l(y)), 0 if l(y) is empty; rmax likewise
 *   smin <= size(x) <= smax                        (the range the caller gives)
 *   nodes == the caller's count of free blocks     (with *seen)
 */
#ifndef HL_AOTREAP_H
#define HL_AOTREAP_H

#include <stddef.h>
#include <stdint.h>

#include "hl_alloc.h"

#ifndef AOT_BASE
#error "define AOT_BASE (the heap's first block, as a char *) before including aotreap.h"
#endif

static inline size_t bsize(const void *b); /* btag.h's */

static inline size_t max3(size_t a, size_t b, size_t c) {
    size_t m = a > b ? a : b;
    return m > c ? m : c;
}

typedef struct aot_node {
    size_t hdr; /* size | flags: the allocator's header word */
    struct aot_node *left, *right;
    size_t lmax, rmax; /* largest size in the left / right subtree, 0 if empty */
} aot_node_t;

/* ------------------------------------------------------------------------ */
/* The treap (recursive: the expected depth is O(log n))                     */
/* ------------------------------------------------------------------------ */

/* splitmix64's finaliser (a bijection) of the node's offset from AOT_BASE:
 * a node exists only once the heap has started, so AOT_BASE is set. */
static inline uint64_t prio(const aot_node_t *x) {
    uint64_t z = (uint64_t)((const char *)x - (const char *)(AOT_BASE));
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}
static inline size_t tmax(const aot_node_t *t) {
    return t ? max3(t->lmax, bsize(t), t->rmax) : 0;
}
static inline void fix(aot_node_t *t) {
    t->lmax = tmax(t->left);
    t->rmax = tmax(t->right);
}

/* Split t into the nodes below `key` (*l) and above it (*r). */
static void t_split(aot_node_t *t, const aot_node_t *key, aot_node_t **l, aot_node_t **r) {
    if (!t) {
        *l = *r = NULL;
    } else if (t < key) {
        t_split(t->right, key, &t->right, r);
        fix(t);
        *l = t;
    } else {
        t_split(t->left, key, l, &t->left);
        fix(t);
        *r = t;
    }
}

/* Join a and b, every node of a lying below every node of b. */
static aot_node_t *t_merge(aot_node_t *a, aot_node_t *b) {
    if (!a) return b;
    if (!b) return a;
    if (prio(a) > prio(b)) {
        a->right = t_merge(a->right, b);
        fix(a);
        return a;
    }
    b->left = t_merge(a, b->left);
    fix(b);
    return b;
}

static aot_node_t *t_insert(aot_node_t *t, aot_node_t *x) {
    if (!t || prio(x) > prio(t)) {
        t_split(t, x, &x->left, &x->right);
        fix(x);
        return x;
    }
    if (x < t)
        t->left = t_insert(t->left, x);
    else
        t->right = t_insert(t->right, x);
    fix(t);
    return t;
}

static aot_node_t *t_delete(aot_node_t *t, aot_node_t *x) {
    HL_CHECK(t != NULL); /* x must be in the tree */
    if (t == x) return t_merge(t->left, t->right);
    if (x < t)
        t->left = t_delete(t->left, x);
    else
        t->right = t_delete(t->right, x);
    fix(t);
    return t;
}

/* x (in the tree) changed size: refresh lmax/rmax on the path down to it. */
static void t_resized(aot_node_t *t, aot_node_t *x) {
    HL_CHECK(t != NULL);
    if (t == x) return;
    if (x < t) {
        t_resized(t->left, x);
        t->lmax = tmax(t->left);
    } else {
        t_resized(t->right, x);
        t->rmax = tmax(t->right);
    }
}

/* Address-ordered first fit in one descent: the lowest-addressed free block
 * of at least `need` bytes, or NULL. */
static aot_node_t *t_first_fit(aot_node_t *t, size_t need) {
    if (tmax(t) < need) return NULL;
    for (;;) {
        if (t->lmax >= need)
            t = t->left;
        else if (bsize(t) >= need)
            return t;
        else
            t = t->right; /* rmax >= need */
    }
}

/* ------------------------------------------------------------------------ */
/* The checker                                                               */
/* ------------------------------------------------------------------------ */

/* Check the subtree t, whose nodes must be free blocks lying strictly
 * between lo and hi, with priorities no higher than `above` and sizes in
 * [smin, smax]; counts its nodes into *seen, which may not pass `most` (no
 * cycles, no strays).  Returns its largest size.  The top call passes the
 * heap's first block - 1 and its end, UINT64_MAX, *seen == 0. */
static size_t __attribute__((unused))
t_check(const aot_node_t *t, const char *lo, const char *hi, uint64_t above, size_t smin,
        size_t smax, size_t *seen, size_t most) {
    if (!t) return 0;
    const char *b = (const char *)t;
    HL_CHECK(((uintptr_t)b & 15) == 8);
    HL_CHECK(++*seen <= most);                         /* no cycles, no strays */
    HL_CHECK(b > lo && b < hi);                        /* address order */
    HL_CHECK(prio(t) <= above);                        /* priority heap order */
    HL_CHECK(!(t->hdr & 1));                           /* a free block (bit 0: in use) */
    HL_CHECK(bsize(t) >= smin && bsize(t) <= smax);    /* in the caller's range */
    HL_CHECK(bsize(t) <= (size_t)(hi - b));            /* ends before its successor */
    size_t lm = t_check(t->left, lo, b, prio(t), smin, smax, seen, most);
    size_t rm = t_check(t->right, b, hi, prio(t), smin, smax, seen, most);
    HL_CHECK(t->lmax == lm && t->rmax == rm); /* the max fields */
    return max3(lm, bsize(t), rm);
}

#endif /* HL_AOTREAP_H */
