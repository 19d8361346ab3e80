/*
 * btag.h: the boundary-tag heap, the layer seven allocators are built on
 * (aobt.c, sbt.c, sgf.c, firstfit.c, gnugpp.c, cartesian.c and the segments
 * of native/segregate/segregated.c).  It owns one contiguous heap of blocks
 * that tile it, the tags that say each block's size and whether it is in
 * use, coalescing, growth, splitting, realloc in place, alignment and the
 * checkers' walk.  What an allocator is made of besides (its set of free
 * blocks and how a fit is found) stays in its own file, behind the fs_*
 * functions below.  As in Heap Layers, an allocator is a composition:
 *
 *     firstfit  = first fit over one list (rover)  +  two tags,  upper part handed out
 *     gnugpp    = first fit over log2 bins         +  two tags,  lower part handed out
 *     aobt, sbt = address-ordered treaps           +  one tag,   upper part handed out
 *     sgf       = LIFO best fit over eight lists   +  one tag,   upper part handed out
 *     cartesian = better fit over a Cartesian tree +  a length word (the tree finds neighbours)
 *     segregated, per segment = dlmalloc-style bins + one tag, lower part, a wilderness
 *
 * An instance is a bt_heap_t (an allocator may have several: one per
 * segment); every function takes it.  The variant is chosen at compile time,
 * before the file includes this header once:
 *
 *   BT_TAGS        1  one tag: a header word; a footer only in free blocks,
 *                     and a PINUSE bit saying whether the block before is in use
 *                  2  two tags: a header and a footer in every block (000 §2.1:
 *                     "two extra words of overhead")
 *                  0  a length word only: the free set finds a block's free
 *                     neighbours itself (fs_release)
 *   BT_MINBLOCK    the smallest block: header, the free set's node, footer
 *   BT_SPLIT_LOW   0: a split hands out the upper part and the rest keeps its
 *                     address (fs_shrank); 1: the lower part, and the rest is
 *                     a new free block in the old one's place (fs_replace)
 *   BT_TOP         1: the free block that ends at the epilogue (the
 *                     wilderness) is split down to 16 bytes, so that taking
 *                     from it never leaves a bigger block than asked
 *   BT_REALLOC_TOP 0: realloc never grows the heap; BT_GROW_KEEP: a block at
 *                     the top of the heap grows by extending the heap and
 *                     keeps the surplus of the growth; BT_GROW_TRIM: gives the
 *                     surplus back as a free block
 *   BT_MALLOC      the allocator's malloc(h, n) when it has its own (realloc
 *                  moves a block with it); bt_malloc by default
 *   BT_PLACE       where the heap starts, called at its first growth (default:
 *                  the break of its platform heap)
 *
 * The free set (the file defines these, static, anywhere; h is the instance):
 *
 *   void  fs_insert(h, b, sz)      free block b of sz bytes (tags written) joins the set
 *   void  fs_delete(h, b)          b leaves it (its header still has the size it joined with)
 *   void  fs_grew(h, b, old, sz)   b, in the set at size `old`, has sz > old bytes now, at
 *                                  the same address (it absorbed the block freed after it)
 *   void  fs_replace(h, old, b, sz)  b of sz bytes (tags written) takes the place of old,
 *                                  which leaves (old's header intact): b absorbed old, or
 *                                  (BT_SPLIT_LOW) b is what stays free of old after a split
 *   void  fs_shrank(h, b, old)     (!BT_SPLIT_LOW) b's upper part was handed out
 *   char *fs_find(h, need)         a free block of at least `need` bytes (header included),
 *                                  or NULL (only if the file uses bt_malloc)
 *   void  fs_taken(h, b)           (optional, #define BT_FS_TAKEN) b leaves the set to be
 *                                  handed out whole; fs_delete by default
 *   char *fs_release(h, b, sz)     (BT_TAGS 0 only) the sz bytes at b are free: merge them
 *                                  with free neighbours, put the result in the set, return it
 *
 * What the layer gives the file (its hl_alloc_t is mostly one-line calls):
 *
 *   bt_init(h, heap, split_min, grow_min, granule)   an instance; bt_start(h) starts it now
 *   BT_ONE_HEAP(heap)   malloc, free, usable_size and realloc of a file that is one instance
 *   bt_malloc(h, n)     fs_find, else bt_grow; then bt_take (the split)
 *   bt_free(h, p)       check the block (bt_block), then bt_give: coalesce (bt_release)
 *   bt_usable_size(h, p), bt_request(n), bt_usable(b)
 *   bt_realloc(h, p, n) bt_resize (in place) or bt_move (BT_MALLOC, copy, free)
 *   bt_memalign(h, align, n, from)  over-allocate (from + align + BT_MINBLOCK), then bt_align
 *   bt_align(h, p, align, need)   memalign's trimming after the file's over-allocation
 *   bt_extend(h, want)            raw growth (cartesian grows through it)
 *   bt_check_heap(h, each_free)   the heap walk of the file's checker
 *
 *   Block layouts (8-byte words; b is 8 mod 16 so that the payload is 16-aligned)
 *
 *   one tag   b                    b+8                                         b+size
 *             +--------------------+---------------------------------------------+
 *       used  | size |PINUSE|CINUSE| payload (size - 8 bytes) .................. |
 *             +--------------------+-----------------------------+----------+-----+
 *       free  | size |PINUSE=1| 0  | the free set's node         | (unused) |size |
 *             +--------------------+-----------------------------+----------+-----+
 *
 *   two tags  b                    b+8                                 b+size-8  b+size
 *             +--------------------+-----------------------------------+---------+
 *       used  | size | INUSE       | payload (size - 16 bytes) .......  |size|INUSE|
 *             +--------------------+-----------------------------------+---------+
 *       free  | size | 0           | the free set's node | (unused)    | size | 0 |
 *             +--------------------+-----------------------------------+---------+
 *
 *   length    b                    b+8                                         b+size
 *             +--------------------+---------------------------------------------+
 *       used  | size | INUSE       | payload (size - 8 bytes) .................. |
 *       free  | size | 0           | the free set's node | (unused) ............ |
 *             +--------------------+---------------------------------------------+
 *
 *   The heap (an emulated sbrk heap of the platform, or a part of one)
 *
 *   base   base+8                                               brk-8         brk
 *   +------+---------+---------+-- ... --+----------------------+-------------+
 *   | pad  | block   | block   |         | block                | epilogue    |
 *   +------+---------+---------+-- ... --+----------------------+-------------+
 *          lo                                                   hi: size 0, in use
 *
 *   The pad word reads as an in-use footer (two tags: the prologue), and the
 *   first block's PINUSE is set (one tag), so nothing below lo is ever taken
 *   for a free block; the epilogue stops every walk and coalescing upwards.
 *   The break moves in multiples of `granule` bytes counted from base, by at
 *   least `grow_min`, and only by what a free block at the top lacks.
 *
 * Invariants, as bt_check_heap asserts them (F: the free blocks, S: the set):
 *
 *   sum(size(b) for b in blocks) == hi - lo           blocks tile [lo, hi)
 *   b % 16 == 8, size(b) % 16 == 0                    payloads 16-aligned
 *   size(b) >= BT_MINBLOCK  (BT_TOP: or b is the top block, >= 16)
 *   free(b) => in_use(next(b))                        no two free blocks touch
 *   free(b) => footer(b) == size(b)                   (one tag)
 *   PINUSE(b) == in_use(prev(b))                      (one tag; the pad counts as in use)
 *   footer(b) == header(b)                            (two tags)
 *   |F| == |S|                                        (the file's checker, with the count
 *                                                      bt_check_heap returns)
 *   header(hi) == 0 | in use, footer(lo - 8) == in use (two tags)
 *
 * A split keeps the rest only when it is at least split_min bytes (and
 * BT_MINBLOCK); otherwise the whole block is handed out.  realloc shrinks in
 * place, grows into a free right neighbour, or (BT_REALLOC_TOP) at the top of
 * the heap by extending it; else the block moves.
 */
#ifndef HL_BTAG_H
#define HL_BTAG_H

#include "hl_alloc.h"

#include <string.h>

#ifndef BT_TAGS
#error "btag.h: define BT_TAGS (1, 2 or 0) before including it"
#endif
#ifndef BT_MINBLOCK
#error "btag.h: define BT_MINBLOCK before including it"
#endif
#ifndef BT_SPLIT_LOW
#define BT_SPLIT_LOW 0
#endif
#ifndef BT_TOP
#define BT_TOP 0
#endif
#define BT_GROW_KEEP 1
#define BT_GROW_TRIM 2
#ifndef BT_REALLOC_TOP
#define BT_REALLOC_TOP 0
#endif

#define W ((size_t)8) /* one tag word */
#if BT_TAGS == 1
#define CINUSE ((size_t)1)
#define PINUSE ((size_t)2)
#define FLAGS  ((size_t)15)
#define BT_OVERHEAD W
#elif BT_TAGS == 2
#define INUSE       ((size_t)HL_HDR_INUSE)
#define FLAGS       ((size_t)HL_HDR_LOW_BITS)
#define BT_OVERHEAD (2 * W)
#else
#define INUSE       ((size_t)1)
#define FLAGS       ((size_t)15)
#define BT_OVERHEAD W
#endif
#if BT_TAGS == 1
#define BT_USED   CINUSE /* the in-use bit of a header */
#define BT_PFREE  PINUSE /* the PINUSE of a free block: its left neighbour is in use */
#else
#define BT_USED   INUSE
#define BT_PFREE  0
#endif

_Static_assert(BT_MINBLOCK % 16 == 0 && BT_MINBLOCK >= 2 * W + BT_OVERHEAD,
               "a block holds its tags and two links, in multiples of 16");

typedef struct bt_heap {
    char *lo, *hi;     /* first block, epilogue; NULL until the heap starts */
    hl_heap_t *heap;   /* the platform heap it grows; NULL: the default one (hl_sbrk) */
    size_t split_min;  /* a split keeps a rest of at least this (>= BT_MINBLOCK) */
    size_t grow_min;   /* the heap grows by at least this */
    size_t granule;    /* ... and to a multiple of this from its base */
    unsigned long grows; /* growths so far */
} bt_heap_t;

/* The layer's functions that a file may leave unused. */
#define BT_FN static __attribute__((unused))

/* No growth is larger (a larger one is a wrapped size; the platform would
 * refuse it anyway). */
#define BT_MAX_GROWTH (HL_MAX_REQUEST + 2 * HL_MAX_ALIGN)

/* The free set (see above), defined by the including file.  Declared
 * inline: they are small, and on the fast paths. */
static inline void fs_delete(bt_heap_t *h, char *b);
#if BT_TAGS
static inline void fs_insert(bt_heap_t *h, char *b, size_t sz);
static inline void fs_grew(bt_heap_t *h, char *b, size_t old, size_t sz);
static inline void fs_replace(bt_heap_t *h, char *old, char *b, size_t sz);
static inline char *fs_find(bt_heap_t *h, size_t need);
#else
static char *fs_release(bt_heap_t *h, char *b, size_t sz);
#endif
#if !BT_SPLIT_LOW
static inline void fs_shrank(bt_heap_t *h, char *b, size_t old);
#endif
#ifdef BT_FS_TAKEN
static inline void fs_taken(bt_heap_t *h, char *b);
#else
#define fs_taken fs_delete
#endif

/* ------------------------------------------------------------------------ */
/* Tags                                                                      */
/* ------------------------------------------------------------------------ */

static inline size_t tag_size(size_t t) {
    return t & ~FLAGS;
}
static inline size_t *hdr(const void *b) {
    return (size_t *)b;
}
static inline size_t bsize(const void *b) {
    return tag_size(*(const size_t *)b);
}
static inline size_t *ftr(const void *b, size_t sz) {
    return (size_t *)((char *)b + sz - W);
}
static inline int bt_free_tag(size_t t) {
    return !(t & BT_USED);
}
/* The block size for a request of n bytes. */
static inline size_t bt_request(size_t n) {
    size_t b = HL_ALIGN_UP(n + BT_OVERHEAD, 16);
    return b < BT_MINBLOCK ? BT_MINBLOCK : b;
}
/* The bytes the caller may use in block b. */
static inline size_t bt_usable(const char *b) {
    return bsize(b) - BT_OVERHEAD;
}

/* Tag writers.  mark_free(b, sz): b is free (one tag: its left neighbour is
 * in use, since no two free blocks touch, and the next block learns that b
 * is free).  mark_used(b, sz, pin): b is in use; pin is b's PINUSE (one tag;
 * the others ignore it).  A length word says nothing to its neighbours. */
#if BT_TAGS == 1
static inline void mark_free(char *b, size_t sz) {
    *hdr(b) = sz | PINUSE;
    *ftr(b, sz) = sz;
    *hdr(b + sz) &= ~PINUSE;
}
static inline void mark_used(char *b, size_t sz, size_t pin) {
    *hdr(b) = sz | CINUSE | pin;
    *hdr(b + sz) |= PINUSE;
}
static inline size_t pin_of(const char *b) {
    return *hdr(b) & PINUSE;
}
#elif BT_TAGS == 2
static inline void mark_free(char *b, size_t sz) {
    *hdr(b) = sz;
    *ftr(b, sz) = sz;
}
static inline void mark_used(char *b, size_t sz, size_t pin) {
    *hdr(b) = sz | INUSE;
    *ftr(b, sz) = sz | INUSE;
}
static inline size_t pin_of(const char *b) {
    return 0;
}
#else
static inline void mark_free(char *b, size_t sz) {
    *hdr(b) = sz;
}
static inline void mark_used(char *b, size_t sz, size_t pin) {
    *hdr(b) = sz | INUSE;
}
static inline size_t pin_of(const char *b) {
    return 0;
}
#endif

/* The platform call behind every growth.  The default heap goes through
 * hl_sbrk, so that a build may redirect it (heaplab synth compiles gnugpp.c
 * with -Dhl_sbrk=NAME_gp_sbrk to see every growth of gnugpp's heap). */
static inline char *bt_sbrk(bt_heap_t *h, size_t incr) {
    return h->heap ? hl_heap_sbrk(h->heap, (intptr_t)incr) : hl_sbrk((intptr_t)incr);
}

/* ------------------------------------------------------------------------ */
/* The heap: start, growth                                                   */
/* ------------------------------------------------------------------------ */

/* An instance over the platform heap `heap` (NULL: the default one).  A
 * split keeps a rest of at least split_min bytes (raised to BT_MINBLOCK);
 * the heap grows by at least grow_min (a one-tag heap passes BT_MINBLOCK or
 * more), to a multiple of granule (a power of two) from its base. */
static inline void bt_init(bt_heap_t *h, hl_heap_t *heap, size_t split_min, size_t grow_min,
                           size_t granule) {
    h->lo = h->hi = NULL;
    h->heap = heap;
    h->split_min = split_min < BT_MINBLOCK ? BT_MINBLOCK : HL_ALIGN_UP(split_min, 16);
    h->grow_min = grow_min > BT_MAX_GROWTH ? BT_MAX_GROWTH : HL_ALIGN_UP(grow_min, 16);
    h->granule = granule < 16 ? 16 : granule;
    h->grows = 0;
}

/* Lay the heap out at base, whose first 2W bytes are obtained: the pad word
 * and an epilogue, no block yet. */
static inline void bt_begin(bt_heap_t *h, char *base) {
    *hdr(base) = BT_USED; /* the prologue: an in-use footer */
    h->lo = h->hi = base + W;
#if BT_TAGS == 1
    *hdr(h->hi) = CINUSE | PINUSE;
#else
    *hdr(h->hi) = INUSE;
#endif
}

/* Start the heap now (firstfit and gnugpp do, from their init, as the
 * classic allocators did); otherwise it starts at its first growth. */
static inline int bt_start(bt_heap_t *h) {
    char *base = bt_sbrk(h, 2 * W);
    if (!base) return -1;
    bt_begin(h, base);
    return 0;
}

#ifndef BT_PLACE
static inline char *bt_place(bt_heap_t *h) {
    return bt_sbrk(h, 0); /* reserves the platform heap at first use: its base */
}
#define BT_PLACE bt_place
#else
static char *BT_PLACE(bt_heap_t *h);
#endif

/* The new bytes [old hi, hi) become one block (the old epilogue is its
 * header); returns their number. */
static inline size_t bt_extended(bt_heap_t *h, size_t incr) {
#if BT_TAGS == 1
    char *b = h->hi;
    *hdr(b) = incr | CINUSE | (*hdr(b) & PINUSE); /* the old epilogue's PINUSE */
    h->hi += incr;
    *hdr(h->hi) = CINUSE | PINUSE; /* the new epilogue */
#else
    h->hi += incr;
    *hdr(h->hi) = INUSE;
#endif
    h->grows++;
    return incr;
}


/* The first growth starts the heap: where BT_PLACE says, the pad word, the
 * epilogue and the first bytes, in one platform call. */
static size_t __attribute__((noinline, unused)) bt_extend_first(bt_heap_t *h, size_t want) {
    char *base = BT_PLACE(h);
    if (!base) return 0;
    size_t incr = want < h->grow_min ? h->grow_min : want;
    if (h->granule != 16) incr = HL_ALIGN_UP(2 * W + incr, h->granule) - 2 * W;
    if (incr > BT_MAX_GROWTH || !bt_sbrk(h, 2 * W + incr)) return 0;
    bt_begin(h, base);
    return bt_extended(h, incr);
}

/* Extend the heap by at least `want` bytes (at least grow_min, and to a
 * multiple of granule from its base); the new bytes are one block from the
 * old epilogue on (h->hi - the result), whose header (one tag) is written in
 * use with the right PINUSE.  Returns their number, 0 if the platform says
 * no. */
static inline size_t bt_extend_started(bt_heap_t *h, size_t want) {
    size_t incr = want < h->grow_min ? h->grow_min : want;
    if (h->granule != 16) { /* (sizes are multiples of 16 already) */
        size_t used = (size_t)(h->hi - h->lo) + 2 * W; /* pad, blocks, epilogue */
        incr = HL_ALIGN_UP(used + incr, h->granule) - used;
        if (incr > BT_MAX_GROWTH) return 0;
    }
    return bt_sbrk(h, incr) ? bt_extended(h, incr) : 0;
}
static inline size_t bt_extend(bt_heap_t *h, size_t want) {
    return HL_UNLIKELY(!h->hi) ? bt_extend_first(h, want) : bt_extend_started(h, want);
}

/* ------------------------------------------------------------------------ */
/* Coalescing                                                                */
/* ------------------------------------------------------------------------ */

#if BT_TAGS
/* b (sz bytes; one tag: its header has a correct PINUSE) is no longer in
 * use: merge it with a free neighbour on either side, then into the free
 * set.  Returns the free block that holds it. */
#if BT_TAGS == 1
#define BT_PREV_FREE(b) (!(*hdr(b) & PINUSE))
#define BT_PREV_SIZE(b) (*(size_t *)((b)-W))
#else
#define BT_PREV_FREE(b) (!(*(size_t *)((b)-W) & BT_USED))
#define BT_PREV_SIZE(b) tag_size(*(size_t *)((b)-W))
#endif

/* The free block pb of psz bytes absorbs the sz bytes after it. */
static inline char *bt_grow_prev(bt_heap_t *h, char *b, size_t sz) {
    size_t psz = BT_PREV_SIZE(b);
    char *pb = b - psz;
#if BT_TAGS == 2
    *hdr(b) = 0; /* a stale header inside a free block must not read as in use */
#endif
    mark_free(pb, psz + sz);
    fs_grew(h, pb, psz, psz + sz);
    return pb;
}

static inline __attribute__((always_inline)) char *bt_release_inline(bt_heap_t *h, char *b,
                                                                      size_t sz) {
    char *next = b + sz;
    size_t nh = *hdr(next);
    if (!(nh & BT_USED)) { /* the free block after is absorbed */
        if (BT_PREV_FREE(b)) { /* ... and both go into the free block before */
            fs_delete(h, next);
            return bt_grow_prev(h, b, sz + tag_size(nh));
        }
        sz += tag_size(nh);
        mark_free(b, sz);
        fs_replace(h, next, b, sz);
        return b;
    }
    if (BT_PREV_FREE(b)) return bt_grow_prev(h, b, sz); /* the free block before grows */
    mark_free(b, sz);
    fs_insert(h, b, sz);
    return b;
}
BT_FN char *bt_release(bt_heap_t *h, char *b, size_t sz) {
    return bt_release_inline(h, b, sz);
}
#else
#define bt_release        fs_release
#define bt_release_inline fs_release
#endif

/* ------------------------------------------------------------------------ */
/* Splitting                                                                 */
/* ------------------------------------------------------------------------ */

/* The least rest a split keeps of a free block b of sz bytes. */
static inline size_t split_min_of(const bt_heap_t *h, const char *b, size_t sz) {
    (void)b, (void)sz;
#if BT_TOP
    if (b + sz == h->hi) return 16; /* the wilderness: any rest stays */
#endif
    return h->split_min;
}

#if BT_TAGS
/* Allocate `need` bytes from the free block b (in the set): split it if
 * the rest can stay a free block, else hand all of it out. */
static inline __attribute__((always_inline)) void *bt_take(bt_heap_t *h, char *b, size_t need) {
    size_t sz = bsize(b), rest = sz - need;
    if (rest >= h->split_min || (BT_TOP && rest && rest >= split_min_of(h, b, sz))) {
#if BT_SPLIT_LOW
        char *r = b + need; /* the lower part is handed out, the rest takes b's place */
        size_t pin = pin_of(b);
#if BT_TAGS == 1
        *hdr(r) = rest | PINUSE; /* the block after r already knows it is free */
        *ftr(r, rest) = rest;
        fs_replace(h, b, r, rest);
        *hdr(b) = need | CINUSE | pin;
#else
        mark_free(r, rest);
        fs_replace(h, b, r, rest);
        mark_used(b, need, pin);
#endif
        return b + W;
#else
        char *u = b + rest; /* the upper part is handed out, the rest keeps its address */
#if BT_TAGS == 1
        *hdr(b) = rest | PINUSE;
        *ftr(b, rest) = rest;
        fs_shrank(h, b, sz);
        mark_used(u, need, 0);
#else
        mark_free(b, rest);
        fs_shrank(h, b, sz);
        mark_used(u, need, 0);
#endif
        return u + W;
#endif
    }
    fs_taken(h, b);
    mark_used(b, sz, BT_PFREE);
    return b + W;
}
#endif

/* Cut the in-use block b of sz bytes down to `keep` if the tail can stand
 * as a free block of at least `min` bytes; the tail is coalesced with what
 * follows. */
BT_FN void bt_shrink(bt_heap_t *h, char *b, size_t sz, size_t keep, size_t min) {
    HL_ASSERT(keep <= sz);
    if (sz - keep < min) return;
    char *t = b + keep;
#if BT_TAGS == 1
    *hdr(b) = keep | CINUSE | (*hdr(b) & PINUSE);
    *hdr(t) = (sz - keep) | PINUSE;
#else
    mark_used(b, keep, 0);
#endif
    bt_release(h, t, sz - keep);
}

/* ------------------------------------------------------------------------ */
/* The malloc interface                                                      */
/* ------------------------------------------------------------------------ */

/* The block of payload p, checked to be one in use of this heap. */
static inline char *bt_block(const bt_heap_t *h, void *p, const char *what) {
    char *b = (char *)p - W;
#if BT_TAGS == 1
    if (HL_UNLIKELY(b < h->lo || b >= h->hi || ((uintptr_t)p & 15) || !(*hdr(b) & CINUSE) ||
                    bsize(b) < BT_MINBLOCK || bsize(b) > (size_t)(h->hi - b) ||
                    !(*hdr(b + bsize(b)) & PINUSE)))
#elif BT_TAGS == 2
    if (HL_UNLIKELY(b < h->lo || b >= h->hi || ((uintptr_t)p & 15) ||
                    (*hdr(b) & FLAGS) != INUSE || bsize(b) > (size_t)(h->hi - b) ||
                    *ftr(b, bsize(b)) != *hdr(b)))
#else
    if (HL_UNLIKELY(b < h->lo || b >= h->hi || ((uintptr_t)p & 15) || !(*hdr(b) & INUSE) ||
                    bsize(b) < BT_MINBLOCK || bsize(b) > (size_t)(h->hi - b)))
#endif
        hl_fatal("%s(%p): not a block in use (double free or corruption)", what, p);
    return b;
}

/* No free block fits: grow the heap so that one does (by only what a free
 * block at its top lacks) and return it, in the set. */
#if BT_TAGS
BT_FN char *__attribute__((noinline)) bt_grow(bt_heap_t *h, size_t need) {
    size_t got;
    if (HL_UNLIKELY(!h->hi)) {
        got = bt_extend_first(h, need);
    } else {
#if BT_TAGS == 1
        size_t have = *hdr(h->hi) & PINUSE ? 0 : *(size_t *)(h->hi - W); /* the top block's footer */
#else
        size_t t = *(size_t *)(h->hi - W), have = t & INUSE ? 0 : tag_size(t);
#endif
        got = bt_extend_started(h, need - have);
    }
    return got ? bt_release(h, h->hi - got, got) : NULL;
}

static inline __attribute__((always_inline)) void *bt_malloc(bt_heap_t *h, size_t n) {
    size_t need = bt_request(n);
    char *b = fs_find(h, need);
    if (HL_LIKELY(b)) return bt_take(h, b, need); /* two calls: each inlined where it is */
    b = bt_grow(h, need);
    return b ? bt_take(h, b, need) : NULL;
}
#endif

/* Give back the in-use block b. */
static inline void bt_give(bt_heap_t *h, char *b) {
#if BT_TAGS == 1
    *hdr(b) &= ~CINUSE; /* a stale header left inside a merged block must not read as in use */
    bt_release_inline(h, b, bsize(b));
#elif BT_TAGS == 2
    bt_release_inline(h, b, bsize(b)); /* it writes the tags */
#else
    size_t sz = bsize(b);
    *hdr(b) = sz; /* a stale header left inside a merged block must not read as in use */
    bt_release(h, b, sz);
#endif
}

static inline void bt_free(bt_heap_t *h, void *p) {
    bt_give(h, bt_block(h, p, "free"));
}

static inline size_t bt_usable_size(const bt_heap_t *h, void *p) {
    return bt_usable(bt_block(h, p, "malloc_usable_size"));
}

/* realloc in place: shrink, grow into a free right neighbour, or
 * (BT_REALLOC_TOP) at the top of the heap by extending it.  Returns p, or
 * NULL when the block must move.  bt_resize_block takes the block, checked
 * by the caller. */
static inline void *bt_resize_block(bt_heap_t *h, char *b, size_t n) {
    void *p = b + W;
    size_t sz = bsize(b), need = bt_request(n), pin = pin_of(b);
    if (need <= sz) {
        bt_shrink(h, b, sz, need, h->split_min);
        return p;
    }
    char *next = b + sz;
    size_t nh = *hdr(next), nsz = bt_free_tag(nh) ? tag_size(nh) : 0;
    if (nsz && sz + nsz >= need) { /* grow into the free right neighbour */
        fs_delete(h, next);
        mark_used(b, sz + nsz, pin);
        bt_shrink(h, b, sz + nsz, need, split_min_of(h, next, nsz));
        return p;
    }
#if BT_REALLOC_TOP
    if (next + nsz == h->hi) { /* at the top of the heap: extend it */
        size_t got = bt_extend(h, need - sz - nsz);
        if (got) {
            if (nsz) fs_delete(h, next);
            sz += nsz + got;
            mark_used(b, sz, pin);
            /* BT_GROW_KEEP: the surplus of the growth stays in the block, so
             * that nothing can be put above it and its next growth is in place
             * too (a string grown a few KB at a time stays at the top) */
            if (BT_REALLOC_TOP == BT_GROW_TRIM) bt_shrink(h, b, sz, need, h->split_min);
            return p;
        }
    }
#endif
    return NULL;
}
BT_FN void *bt_resize(bt_heap_t *h, void *p, size_t n) {
    return bt_resize_block(h, bt_block(h, p, "realloc"), n);
}

#ifndef BT_MALLOC
#define BT_MALLOC bt_malloc
#else
static void *BT_MALLOC(bt_heap_t *h, size_t n);
#endif

/* Move the block of p (checked by bt_resize, which said it must move) to a
 * new one of n bytes; NULL (p intact) if there is none. */
BT_FN void *bt_move(bt_heap_t *h, void *p, size_t n) {
    size_t keep = bt_usable((char *)p - W);
    void *q = BT_MALLOC(h, n);
    if (!q) return NULL;
    memcpy(q, p, keep < n ? keep : n);
    bt_free(h, p);
    return q;
}

static inline void *bt_realloc(bt_heap_t *h, void *p, size_t n) {
    return bt_resize(h, p, n) ? p : bt_move(h, p, n);
}

/* The malloc interface of an allocator that is one instance, `heap` (a
 * static bt_heap_t of the file), for its hl_alloc_t: bt_one_malloc,
 * bt_one_free, bt_one_usable_size, bt_one_realloc.  (memalign is the file's:
 * how much it over-allocates is its own.) */
#define BT_ONE_HEAP(heap)                                                                          \
    static void *bt_one_malloc(size_t n) {                                                         \
        return bt_malloc(&(heap), n);                                                              \
    }                                                                                              \
    static void bt_one_free(void *p) {                                                             \
        bt_free(&(heap), p);                                                                       \
    }                                                                                              \
    static size_t bt_one_usable_size(void *p) {                                                    \
        return bt_usable_size(&(heap), p);                                                         \
    }                                                                                              \
    static void *bt_one_realloc(void *p, size_t n) {                                               \
        return bt_realloc(&(heap), p, n);                                                          \
    }

/* memalign's second half: p is a fresh block, over-allocated by at least
 * align + BT_MINBLOCK; give back the part below the first payload aligned to
 * `align` (a free block of at least BT_MINBLOCK) and the tail beyond `need`.
 * How much to over-allocate is the allocator's own (its memalign calls its
 * malloc, then this). */
BT_FN void *bt_align(bt_heap_t *h, char *p, size_t align, size_t need) {
    char *q = (char *)HL_ALIGN_UP((uintptr_t)p, align);
    if (q != p)
        while ((size_t)(q - p) < BT_MINBLOCK)
            q += align;
    char *b = p - W, *qb = q - W;
    size_t sz = bsize(b);
    if (q != p) {
        size_t lead = (size_t)(q - p);
#if BT_TAGS == 1
        *hdr(qb) = (sz - lead) | CINUSE; /* PINUSE clear: the lead becomes free */
        *hdr(b) = lead | (*hdr(b) & PINUSE);
#else
        mark_used(qb, sz - lead, 0);
#endif
        bt_release(h, b, lead);
        sz -= lead;
    }
    bt_shrink(h, qb, sz, need, h->split_min);
    return q;
}

/* memalign: malloc `from` + align + BT_MINBLOCK bytes, then bt_align.  How
 * much to over-allocate from is the allocator's own choice: n (firstfit and
 * gnugpp, as their originals did) or bt_request(n) (the others). */
BT_FN void *bt_memalign(bt_heap_t *h, size_t align, size_t n, size_t from) {
    char *p = BT_MALLOC(h, from + align + BT_MINBLOCK);
    return p ? bt_align(h, p, align, bt_request(n)) : NULL;
}

/* ------------------------------------------------------------------------ */
/* The checkers' walk                                                        */
/* ------------------------------------------------------------------------ */

/* Walk the heap in address order and assert the invariants above; call
 * each_free(h, b, size) for every free block, and return how many there are
 * (0 before the heap starts). */
BT_FN size_t bt_check_heap(const bt_heap_t *h,
                            void (*each_free)(const bt_heap_t *h, const char *b, size_t sz)) {
    if (!h->hi) {
        HL_CHECK(h->lo == NULL);
        return 0;
    }
    HL_CHECK(*hdr(h->lo - W) & BT_USED); /* the prologue */
    size_t nfree = 0;
    int prev_used = 1;
    const char *b = h->lo;
    while (b < h->hi) {
        size_t t = *hdr(b), sz = tag_size(t);
        int used = !bt_free_tag(t);
        HL_CHECK(((uintptr_t)b & 15) == 8);
        HL_CHECK(sz <= (size_t)(h->hi - b));
        HL_CHECK(sz >= BT_MINBLOCK || (BT_TOP && !used && sz >= 16 && b + sz == h->hi));
#if BT_TAGS == 1
        HL_CHECK((t & FLAGS & ~(CINUSE | PINUSE)) == 0);
        HL_CHECK(!!(t & PINUSE) == prev_used); /* PINUSE mirrors the block before */
        if (!used) HL_CHECK(*ftr(b, sz) == sz);
#elif BT_TAGS == 2
        HL_CHECK((t & FLAGS & ~INUSE) == 0);
        HL_CHECK(*ftr(b, sz) == t);
#else
        HL_CHECK((t & FLAGS & ~INUSE) == 0);
#endif
        if (!used) {
            HL_CHECK(prev_used); /* no two free blocks touch */
            nfree++;
            if (each_free) each_free(h, b, sz);
        }
        prev_used = used;
        b += sz;
    }
    HL_CHECK(b == h->hi);
    size_t e = *hdr(h->hi);
    HL_CHECK(tag_size(e) == 0 && (e & BT_USED));
#if BT_TAGS == 1
    HL_CHECK(!!(e & PINUSE) == prev_used);
#endif
    return nfree;
}

#endif /* HL_BTAG_H */
