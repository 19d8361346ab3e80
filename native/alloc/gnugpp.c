/*
 * gnugpp.c: Doug Lea's segregated first fit of the early 1990s, the malloc of
 * the GNU G++ library (paper 000 §2.1 "GNU G++"; paper 002 §4 "FIRSTFIT",
 * which measured the same Lea implementation).
 *
 *   Block layout (8-byte words; b is 8 mod 16 so that the payload is 16-aligned)
 *
 *        b                b+8                                  b+size-8   b+size
 *        +----------------+-------------------------------------+----------+
 *   used | size | INUSE   | payload (size - 16 bytes) .........  | size|INUSE| next block
 *        +----------------+-------------------------------------+----------+
 *   free | size | 0       | next in bin | prev in bin | ...      | size | 0  |
 *        +----------------+-------------------------------------+----------+
 *
 *   bins[i] (i = floor(log2(size))), each a circular doubly-linked list
 *   through a sentinel, newest first; `binmap` bit i is set iff bins[i] is not
 *   empty.  The heap is the default emulated sbrk region, laid out as in
 *   firstfit.c: prologue footer, blocks, epilogue header.
 *
 * Invariants: blocks tile [base+8, brk-8); sizes are multiples of 16 and at
 * least 32; header == footer; no two free blocks are adjacent; every free
 * block is in the bin of its log2 size and nowhere else; binmap matches the
 * bins.  The low four bits of a header are 0 or 1 (quickfit.c relies on this
 * to tell its own tags apart).
 *
 * From the papers: an array of free lists segregated by the logarithm of the
 * size, each doubly linked; the selected list is scanned for the first block
 * that is large enough, and larger bins are tried in turn; the block found is
 * split and the remainder goes back to its bin unless it would be under 16
 * bytes (002 §4; HEAPLAB_GNUGPP_SPLIT); boundary tags and coalescing on free
 * as in FIRSTFIT ("in other respects similar to FIRSTFIT", 000 §2.1).
 * Departures: 8-byte words and 16-byte alignment make the smallest block 32
 * bytes, so a remainder under 32 bytes is never split off either; the next
 * non-empty larger bin is found with a bitmap rather than a loop.
 *
 * realloc: shrink in place, grow into a free successor or, for the last block
 * of the heap, by moving the break; otherwise move (as firstfit.c).
 */
#include "hl_alloc.h"

#include <stdbool.h>
#include <string.h>

#define W        8
#define OVERHEAD 16
#define MINBLOCK 32
#define INUSE    ((size_t)1)
#define NBINS    64

typedef struct gp_free {
    size_t hdr;
    struct gp_free *next, *prev;
} gp_free_t;

static gp_free_t bins[NBINS];
static uint64_t binmap;
static char *heap_lo, *heap_hi; /* first block, epilogue */
static size_t split_min, grow_min;
static bool inited;

static inline size_t tag_size(size_t t) {
    return t & ~(size_t)15;
}
static inline size_t *hdr(void *b) {
    return (size_t *)b;
}
static inline size_t *ftr(void *b, size_t sz) {
    return (size_t *)((char *)b + sz - W);
}
static inline void set_tags(void *b, size_t sz, size_t flags) {
    *hdr(b) = sz | flags;
    *ftr(b, sz) = sz | flags;
}
static inline size_t request_block(size_t n) {
    size_t b = HL_ALIGN_UP(n + OVERHEAD, 16);
    return b < MINBLOCK ? MINBLOCK : b;
}
static inline unsigned bin_of(size_t sz) {
    return 63u - (unsigned)__builtin_clzl(sz);
}

static inline void bin_insert(gp_free_t *b, size_t sz) {
    unsigned i = bin_of(sz);
    gp_free_t *s = &bins[i];
    b->next = s->next;
    b->prev = s;
    s->next->prev = b;
    s->next = b;
    binmap |= (uint64_t)1 << i;
}

static inline void bin_remove(gp_free_t *b) {
    b->prev->next = b->next;
    b->next->prev = b->prev;
    if (b->next == b->prev) { /* the bin may now be empty: only the sentinel left */
        unsigned i = bin_of(tag_size(b->hdr));
        if (bins[i].next == &bins[i]) binmap &= ~((uint64_t)1 << i);
    }
}

static int gp_init(void) {
    if (inited) return 0;
    split_min = hl_tunable("HEAPLAB_GNUGPP_SPLIT", 16);
    split_min = split_min < MINBLOCK ? MINBLOCK : HL_ALIGN_UP(split_min, 16);
    grow_min = HL_ALIGN_UP(hl_tunable("HEAPLAB_GNUGPP_GROW", 4096), 16);
    for (int i = 0; i < NBINS; i++)
        bins[i].next = bins[i].prev = &bins[i];
    char *base = hl_sbrk(2 * W);
    if (!base) return -1;
    *(size_t *)base = INUSE;       /* prologue footer */
    *(size_t *)(base + W) = INUSE; /* epilogue header */
    heap_lo = heap_hi = base + W;
    inited = true;
    return 0;
}

/* b has free tags and is on no bin: merge with free neighbours, bin it. */
static gp_free_t *coalesce(char *b) {
    size_t sz = tag_size(*hdr(b));
    size_t prev_tag = *(size_t *)(b - W);
    char *next = b + sz;
    size_t next_tag = *hdr(next);
    if (!(prev_tag & INUSE)) {
        b -= tag_size(prev_tag);
        bin_remove((gp_free_t *)b);
        sz += tag_size(prev_tag);
    }
    if (!(next_tag & INUSE)) {
        bin_remove((gp_free_t *)next);
        sz += tag_size(next_tag);
    }
    set_tags(b, sz, 0);
    bin_insert((gp_free_t *)b, sz);
    return (gp_free_t *)b;
}

static gp_free_t *__attribute__((noinline)) grow(size_t need) {
    size_t last_tag = *(size_t *)(heap_hi - W);
    size_t have = !(last_tag & INUSE) ? tag_size(last_tag) : 0;
    size_t incr = need - have;
    if (incr < grow_min) incr = grow_min;
    if (!hl_sbrk((intptr_t)incr)) return NULL;
    char *b = heap_hi;
    heap_hi += incr;
    *hdr(heap_hi) = INUSE;
    set_tags(b, incr, 0);
    return coalesce(b);
}

/* Allocate the lower `need` bytes of free block b (on its bin); the
 * remainder goes back to its bin if it is at least split_min. */
static inline void *take(gp_free_t *b, size_t need) {
    size_t sz = tag_size(b->hdr);
    bin_remove(b);
    if (sz - need >= split_min) {
        char *r = (char *)b + need;
        set_tags(r, sz - need, 0);
        bin_insert((gp_free_t *)r, sz - need);
        sz = need;
    }
    set_tags(b, sz, INUSE);
    return (char *)b + W;
}

/* Fast path: first fit in the request's own bin (~6 instructions per block
 * looked at), else the first block of the next non-empty bin (a bitmap scan,
 * ~5 instructions), else grow the heap. */
static void *gp_malloc(size_t n) {
    size_t need = request_block(n);
    unsigned i = bin_of(need);
    gp_free_t *s = &bins[i];
    for (gp_free_t *b = s->next; b != s; b = b->next)
        if (tag_size(b->hdr) >= need) return take(b, need);
    uint64_t above = i + 1 < NBINS ? binmap & (~(uint64_t)0 << (i + 1)) : 0;
    if (above) return take(bins[__builtin_ctzl(above)].next, need);
    gp_free_t *b = grow(need);
    return b ? take(b, need) : NULL;
}

static inline char *checked_block(void *p, const char *what) {
    char *b = (char *)p - W;
    if (HL_UNLIKELY(b < heap_lo || b >= heap_hi || ((uintptr_t)p & 15) || (*hdr(b) & 15) != INUSE ||
                    tag_size(*hdr(b)) > (size_t)(heap_hi - b) ||
                    *ftr(b, tag_size(*hdr(b))) != *hdr(b)))
        hl_fatal("%s(%p): not a block in use (double free or corruption)", what, p);
    return b;
}

static void gp_free(void *p) {
    char *b = checked_block(p, "free");
    set_tags(b, tag_size(*hdr(b)), 0);
    coalesce(b);
}

static size_t gp_usable_size(void *p) {
    return tag_size(*hdr(checked_block(p, "malloc_usable_size"))) - OVERHEAD;
}

static void trim(char *b, size_t sz, size_t keep) {
    if (sz - keep < split_min) return;
    set_tags(b, keep, INUSE);
    char *t = b + keep;
    set_tags(t, sz - keep, 0);
    coalesce(t);
}

static void *gp_realloc(void *p, size_t n) {
    char *b = checked_block(p, "realloc");
    size_t sz = tag_size(*hdr(b)), need = request_block(n);
    if (need <= sz) {
        trim(b, sz, need);
        return p;
    }
    char *next = b + sz;
    size_t next_tag = *hdr(next);
    if (!(next_tag & INUSE) && sz + tag_size(next_tag) >= need) {
        bin_remove((gp_free_t *)next);
        sz += tag_size(next_tag);
        set_tags(b, sz, INUSE);
        trim(b, sz, need);
        return p;
    }
    char *after = !(next_tag & INUSE) ? next + tag_size(next_tag) : next;
    if (after == heap_hi) { /* the last block: grow the heap under it */
        size_t have = sz + (after != next ? tag_size(next_tag) : 0);
        size_t incr = need - have < grow_min ? grow_min : need - have;
        if (hl_sbrk((intptr_t)incr)) {
            if (after != next) bin_remove((gp_free_t *)next);
            heap_hi += incr;
            *hdr(heap_hi) = INUSE;
            set_tags(b, have + incr, INUSE);
            trim(b, have + incr, need);
            return p;
        }
    }
    void *q = gp_malloc(n);
    if (!q) return NULL;
    memcpy(q, p, tag_size(*hdr(b)) - OVERHEAD);
    gp_free(p);
    return q;
}

static void *gp_memalign(size_t align, size_t n) {
    char *p = gp_malloc(n + align + MINBLOCK);
    if (!p) return NULL;
    char *q = (char *)HL_ALIGN_UP((uintptr_t)p, align);
    if (q != p && (size_t)(q - p) < MINBLOCK) q += align;
    char *b = p - W, *qb = q - W;
    size_t sz = tag_size(*hdr(b));
    if (q != p) {
        size_t lead = (size_t)(q - p);
        set_tags(qb, sz - lead, INUSE);
        set_tags(b, lead, 0);
        coalesce(b);
        sz -= lead;
    }
    trim(qb, sz, request_block(n));
    return q;
}

static void gp_check(void) {
    HL_CHECK(*(size_t *)(heap_lo - W) == INUSE);
    HL_CHECK(*hdr(heap_hi) == INUSE);
    size_t nfree = 0;
    bool prev_free = false;
    for (char *b = heap_lo; b < heap_hi;) {
        size_t t = *hdr(b), sz = tag_size(t);
        HL_CHECK(((uintptr_t)b & 15) == 8);
        HL_CHECK(sz >= MINBLOCK && (t & 15) <= INUSE);
        HL_CHECK(b + sz <= heap_hi);
        HL_CHECK(*ftr(b, sz) == t);
        bool is_free = !(t & INUSE);
        HL_CHECK(!(is_free && prev_free));
        nfree += is_free;
        prev_free = is_free;
        b += sz;
    }
    size_t listed = 0;
    for (unsigned i = 0; i < NBINS; i++) {
        gp_free_t *s = &bins[i];
        HL_CHECK(((binmap >> i) & 1) == (s->next != s));
        for (gp_free_t *f = s->next; f != s; f = f->next) {
            HL_CHECK((char *)f >= heap_lo && (char *)f < heap_hi);
            HL_CHECK(!(f->hdr & INUSE));
            HL_CHECK(bin_of(tag_size(f->hdr)) == i);
            HL_CHECK(f->next->prev == f && f->prev->next == f);
            HL_CHECK(++listed <= nfree);
        }
    }
    HL_CHECK(listed == nfree);
}

const hl_alloc_t hl_alloc_gnugpp = {
    .info = {"gnugpp",
             "Lea's segregated first fit (GNU G++): doubly-linked bins by log2 size, boundary "
             "tags, coalescing",
             "000 §2.1; 002 §4"},
    .init = gp_init,
    .malloc = gp_malloc,
    .free = gp_free,
    .usable_size = gp_usable_size,
    .realloc = gp_realloc,
    .memalign = gp_memalign,
    .check = gp_check,
};
