/*
 * aotreap.h: the address-ordered binary tree of free blocks with the largest
 * free size kept in every node (paper 003 §2.2.1), shared by aobt.c (one
 * tree) and sbt.c (eight, one per size range). Each includes it once and
 * defines `bsize(const void *)` (a block's size from its header word) and
 * `max3` somewhere in the file; the functions become the file's own statics.
 *
 *   A node is the first 40 bytes of a free block (see aobt.c's drawing):
 *
 *   b        b+8      b+16     b+24     b+32     b+40
 *   +--------+--------+--------+--------+--------+---- ...
 *   | hdr    | left   | right  | lmax   | rmax   |
 *   +--------+--------+--------+--------+--------+---- ...
 *
 * Invariants: in-order is address order (a node's address is its key); the
 * tree is a treap whose priorities are a fixed hash of the node's address, so
 * its shape depends only on the set of free blocks; lmax/rmax are the largest
 * block sizes in the left and right subtrees, 0 when empty.
 */
#ifndef HL_AOTREAP_H
#define HL_AOTREAP_H

#include <stddef.h>
#include <stdint.h>

/* the including allocator's, defined further down */
static inline size_t bsize(const void *b);
static inline size_t max3(size_t a, size_t b, size_t c);

typedef struct aot_node {
    size_t hdr; /* size | flags: the allocator's header word */
    struct aot_node *left, *right;
    size_t lmax, rmax; /* largest size in the left / right subtree, 0 if empty */
} aot_node_t;

/* ------------------------------------------------------------------------ */
/* The treap (recursive: the expected depth is O(log n))                     */
/* ------------------------------------------------------------------------ */

static inline uint64_t prio(const aot_node_t *x) { /* splitmix64's finaliser: a bijection */
    uint64_t z = (uintptr_t)x;
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

#endif /* HL_AOTREAP_H */
