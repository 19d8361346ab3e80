/*
 * buddy.c: the binary buddy system (Knowlton; Knuth 2.5 Algorithms R and S),
 * as paper 003 §2.2.1 describes it, with buddies computed from offsets
 * relative to the start of its region, the lesson of paper 004 (whose authors
 * found that buddies computed from absolute addresses change from run to run,
 * because the OS hands out a different heap start each time).
 *
 *   A block of order k: 2^k bytes at an offset from `base` that is a multiple of 2^k
 *
 *        b = base + off      b+16                                       b + 2^k
 *        +--------+--------+------------------------------------------+
 *   used | tag    | -      | payload (2^k - 16 bytes) ...              |
 *        +--------+--------+--------+---------+-------------------------+
 *   free | tag|F  | -      | next   | prev    | (unused)                |
 *        +--------+--------+--------+---------+-------------------------+
 *   tag = BD_MAGIC | F (free) | k.  The buddy of the block at off is at off ^ 2^k.
 *
 *   A block from memalign whose payload p is not b+16 also carries, at p - 16:
 *
 *        b                        p - 16              p
 *        +--------+---- ... ------+---------+--------+-------------
 *        | tag    |               | ALIGNED | p - b  | payload ...
 *        +--------+---- ... ------+---------+--------+-------------
 *
 *   The region (the default emulated sbrk heap) grows at its top; an increment
 *   first pads the break up to a multiple of the new block's size with free
 *   blocks, each of the largest order its offset allows (so every block stays
 *   aligned to its size relative to base):
 *
 *   base                                     brk (before)  aligned      brk (after)
 *   |  blocks ...                            | 2^a | 2^b ... |   2^K      |
 *
 *   avail[k] is a circular doubly-linked list of the free blocks of order k
 *   (Knuth's AVAIL[k]); bit k of `availmap` is set iff it is not empty.
 *
 * Invariants: blocks tile [base, brk) exactly; a block of order k starts at an
 * offset that is a multiple of 2^k; a free block's buddy, if it lies inside
 * the region, is not a free block of the same order (they would have been
 * merged); a block is on avail[k] iff it is free and of order k.  Because
 * every block is aligned to its size, the buddy offset of a block always
 * starts some block (of the same or a smaller order), so its tag can be read.
 *
 * From the papers: sizes are powers of two; a request takes the smallest free
 * block at least as large, and a larger one is split into equal buddies until
 * one just fits (003 §2.2.1; Knuth R: the lower half is kept and split further,
 * each upper half goes to its free list); a freed block merges with its buddy
 * while the buddy is free and of the same size (003; Knuth S); buddies come
 * from offsets relative to the region, never from absolute addresses (004).
 * Departures: a 16-byte header keeps payloads 16-aligned (Knuth keeps TAG and
 * KVAL in one word), so the smallest block is 32 bytes and a block of order k
 * holds 2^k - 16 bytes; the heap grows on demand (HEAPLAB_BUDDY_GROW bytes at
 * least) instead of being one fixed pool of 2^m bytes.  Not in the papers but
 * natural for buddies: realloc shrinks a block by freeing its upper halves and
 * grows it in place by absorbing free right-hand buddies (or the fresh top of
 * the heap); memalign takes a block large enough to hold an aligned payload,
 * frees the upper halves it does not need, and records where the block starts.
 */
#include "hl_alloc.h"

#include <stdbool.h>
#include <string.h>

#define HDR        16
#define MINORDER   5 /* 32 bytes: header + 16 bytes */
#define NORDERS    48
#define BD_MAGIC   ((uint64_t)0xB0DDB0DDu << 32)
#define BD_FREE    ((uint64_t)0x100)
#define BD_ORDER   ((uint64_t)0xff)
#define BD_ALIGNED ((uint64_t)0xA116AEDDA116AEDDull)

typedef struct bd_free {
    uint64_t tag;
    uint64_t unused;
    struct bd_free *next, *prev;
} bd_free_t;

static char *base;     /* start of the region: offsets are relative to it */
static size_t brk_off; /* the region is [base, base + brk_off) */
static bd_free_t avail[NORDERS];
static uint64_t availmap;
static unsigned grow_order;

static inline size_t bsz(unsigned k) {
    return (size_t)1 << k;
}
static inline uint64_t *tag_at(size_t off) {
    return (uint64_t *)(base + off);
}
static inline uint64_t free_tag(unsigned k) {
    return BD_MAGIC | BD_FREE | k;
}
static inline uint64_t used_tag(unsigned k) {
    return BD_MAGIC | k;
}
static inline unsigned order_of(size_t bytes) { /* smallest k >= MINORDER with 2^k >= bytes */
    if (bytes <= bsz(MINORDER)) return MINORDER;
    return 64u - (unsigned)__builtin_clzl(bytes - 1);
}

static inline void push(size_t off, unsigned k) {
    bd_free_t *f = (bd_free_t *)(base + off), *s = &avail[k];
    f->tag = free_tag(k);
    f->next = s->next;
    f->prev = s;
    s->next->prev = f;
    s->next = f;
    availmap |= (uint64_t)1 << k;
}

static inline void unlink_free(bd_free_t *f, unsigned k) {
    f->prev->next = f->next;
    f->next->prev = f->prev;
    if (avail[k].next == &avail[k]) availmap &= ~((uint64_t)1 << k);
}

static int bd_init(void) {
    size_t g = hl_tunable("HEAPLAB_BUDDY_GROW", 4096);
    grow_order = order_of(g);
    if (grow_order > 30) hl_fatal("HEAPLAB_BUDDY_GROW=%zu: at most 1g", g);
    for (unsigned k = 0; k < NORDERS; k++)
        avail[k].next = avail[k].prev = &avail[k];
    base = hl_sbrk(0); /* reserves the region; takes no memory */
    if (!base) return -1;
    brk_off = 0;
    return 0;
}

/* Knuth's Algorithm S: give back the block of order k at off, merging it with
 * its buddy as long as the buddy is free and whole. */
static void release(size_t off, unsigned k) {
    while (k + 1 < NORDERS) {
        size_t bo = off ^ bsz(k);
        if (bo + bsz(k) > brk_off || *tag_at(bo) != free_tag(k)) break;
        unlink_free((bd_free_t *)(base + bo), k);
        off &= ~bsz(k);
        k++;
    }
    push(off, k);
}

/* Extend the region by a free block of order max(k, grow_order), after padding
 * the break up to that block's alignment with free blocks.  0 on failure. */
static int __attribute__((noinline)) grow(unsigned k) {
    unsigned K = k > grow_order ? k : grow_order;
    size_t off = brk_off, aligned = HL_ALIGN_UP(off, bsz(K));
    size_t total = aligned + bsz(K) - off;
    char *old = hl_sbrk((intptr_t)total);
    if (!old) return 0;
    HL_CHECK(old == base + brk_off); /* we are the only user of the default heap */
    brk_off += total;
    while (off < aligned) { /* the largest block each offset allows */
        unsigned j = (unsigned)__builtin_ctzl(off);
        release(off, j);
        off += bsz(j);
    }
    release(aligned, K);
    return 1;
}

/* Knuth's Algorithm R: the smallest free block of order >= k, split down to k.
 * Fast path: one bitmap scan, one unlink, one push per split. */
static char *alloc_order(unsigned k) {
    uint64_t m;
    while (!(m = availmap >> k << k))
        if (!grow(k)) return NULL;
    unsigned j = (unsigned)__builtin_ctzl(m);
    bd_free_t *f = avail[j].next;
    unlink_free(f, j);
    size_t off = (size_t)((char *)f - base);
    while (j > k) {
        j--;
        push(off + bsz(j), j); /* the upper half; its buddy (ours) is in use */
    }
    *tag_at(off) = used_tag(k);
    return (char *)f;
}

static void *bd_malloc(size_t n) {
    unsigned k = order_of(n + HDR);
    if (HL_UNLIKELY(k >= NORDERS)) return NULL;
    char *b = alloc_order(k);
    return b ? b + HDR : NULL;
}

/* The block holding payload p, its order, and p's offset in it. */
static char *find_block(void *p, unsigned *order, size_t *lead, const char *what) {
    char *q = p;
    if (HL_UNLIKELY(((uintptr_t)q & 15) || q < base + HDR || q >= base + brk_off)) goto bad;
    uint64_t *h = (uint64_t *)(q - HDR);
    size_t l = HDR;
    if (h[0] == BD_ALIGNED) {
        l = h[1];
        if (l < 2 * HDR || (l & 15) || l > (size_t)(q - base)) goto bad;
    }
    char *b = q - l;
    uint64_t t = *(uint64_t *)b;
    unsigned k = (unsigned)(t & BD_ORDER);
    if (HL_UNLIKELY((t & ~BD_ORDER) != BD_MAGIC || k < MINORDER || k >= NORDERS ||
                    ((size_t)(b - base) & (bsz(k) - 1)) || l >= bsz(k)))
        goto bad;
    *order = k;
    *lead = l;
    return b;
bad:
    hl_fatal("%s(%p): not a block in use (double free or corruption)", what, p);
}

static void bd_free(void *p) {
    unsigned k;
    size_t lead;
    char *b = find_block(p, &k, &lead, "free");
    release((size_t)(b - base), k);
}

static size_t bd_usable_size(void *p) {
    unsigned k;
    size_t lead;
    find_block(p, &k, &lead, "malloc_usable_size");
    return bsz(k) - lead;
}

/* Cut the block at b from order k down to order `keep`, freeing upper halves. */
static void shrink(char *b, unsigned k, unsigned keep) {
    size_t off = (size_t)(b - base);
    while (k > keep) {
        k--;
        push(off + bsz(k), k);
    }
    *tag_at(off) = used_tag(k);
}

/* Grow the block at b from order k to order `want` in place if every right
 * buddy on the way is free and whole, or lies past the break (then the heap
 * grows).  0 if it cannot. */
static int grow_in_place(char *b, unsigned k, unsigned want) {
    size_t off = (size_t)(b - base), top = 0;
    for (unsigned j = k; j < want; j++) {
        if (off & (bsz(j + 1) - 1)) return 0; /* we are the right buddy at this level */
        size_t rb = off + bsz(j);
        if (rb >= brk_off) {
            if (off & (bsz(want) - 1)) return 0;
            top = off + bsz(want);
            break;
        }
        if (*tag_at(rb) != free_tag(j)) return 0;
    }
    if (top) {
        char *old = hl_sbrk((intptr_t)(top - brk_off));
        if (!old) return 0;
        HL_CHECK(old == base + brk_off);
    }
    for (unsigned j = k; j < want; j++) {
        size_t rb = off + bsz(j);
        if (rb >= brk_off) break;
        unlink_free((bd_free_t *)(base + rb), j);
    }
    if (top) brk_off = top;
    *tag_at(off) = used_tag(want);
    return 1;
}

static void *bd_realloc(void *p, size_t n) {
    unsigned k;
    size_t lead;
    char *b = find_block(p, &k, &lead, "realloc");
    size_t usable = bsz(k) - lead;
    if (lead == HDR) {
        unsigned want = order_of(n + HDR);
        if (want <= k) {
            shrink(b, k, want);
            return p;
        }
        if (want < NORDERS && grow_in_place(b, k, want)) return p;
    } else if (n <= usable) {
        return p;
    }
    void *q = bd_malloc(n);
    if (!q) return NULL;
    memcpy(q, p, n < usable ? n : usable);
    bd_free(p);
    return q;
}

static void *bd_memalign(size_t align, size_t n) {
    unsigned k = order_of(n + align); /* any 2^k bytes hold an aligned payload within `align` */
    if (k >= NORDERS) return NULL;
    char *b = alloc_order(k);
    if (!b) return NULL;
    char *p = (char *)HL_ALIGN_UP((uintptr_t)b + HDR, align);
    size_t lead = (size_t)(p - b);
    unsigned keep = order_of(lead + n);
    if (keep < k) shrink(b, k, keep);
    if (lead != HDR) {
        uint64_t *h = (uint64_t *)(p - HDR);
        h[0] = BD_ALIGNED;
        h[1] = lead;
    }
    return p;
}

static void bd_check(void) {
    size_t count[NORDERS] = {0};
    HL_CHECK(base + brk_off == (char *)hl_heap_brk(hl_default_heap()));
    for (size_t off = 0; off < brk_off;) {
        uint64_t t = *tag_at(off);
        unsigned k = (unsigned)(t & BD_ORDER);
        HL_CHECK((t & ~(BD_ORDER | BD_FREE)) == BD_MAGIC);
        HL_CHECK(k >= MINORDER && k < NORDERS);
        HL_CHECK((off & (bsz(k) - 1)) == 0);
        HL_CHECK(off + bsz(k) <= brk_off);
        if (t & BD_FREE) {
            count[k]++;
            size_t bo = off ^ bsz(k);
            if (bo + bsz(k) <= brk_off) HL_CHECK(*tag_at(bo) != free_tag(k)); /* buddies merge */
        }
        off += bsz(k);
    }
    for (unsigned k = 0; k < NORDERS; k++) {
        size_t listed = 0;
        for (bd_free_t *f = avail[k].next; f != &avail[k]; f = f->next) {
            size_t off = (size_t)((char *)f - base);
            HL_CHECK((char *)f >= base && off < brk_off);
            HL_CHECK((off & (bsz(k) - 1)) == 0);
            HL_CHECK(f->tag == free_tag(k));
            HL_CHECK(f->next->prev == f && f->prev->next == f);
            HL_CHECK(++listed <= count[k]);
        }
        HL_CHECK(listed == count[k]);
        HL_CHECK(((availmap >> k) & 1) == (listed != 0));
    }
}

const hl_alloc_t hl_alloc_buddy = {
    .info = {"buddy",
             "Binary buddy system: power-of-two blocks split and merged with buddies found from "
             "offsets relative to the region",
             "003 §2.2.1; 004"},
    .init = bd_init,
    .malloc = bd_malloc,
    .free = bd_free,
    .usable_size = bd_usable_size,
    .realloc = bd_realloc,
    .memalign = bd_memalign,
    .check = bd_check,
};
