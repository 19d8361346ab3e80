/*
 * nextfit.c: the teaching allocator of paper 004 (Yang and Lu, after Bryant and
 * O'Hallaron's "simple allocator"): an implicit free list with a 4-byte header
 * and a 4-byte footer per block, a prologue and an epilogue, next fit with a
 * roving `last_stop`, immediate coalescing and a four-case realloc that
 * over-allocates three times the new size when it has to move.
 *
 *   A block (b is 12 mod 16, so the payload b+4 is 16-aligned)
 *
 *        b        b+4                                         b+size-4  b+size
 *        +--------+--------------------------------------------+--------+
 *        |size|a  | payload (size - 8 bytes) ...                |size|a  | next block
 *        +--------+--------------------------------------------+--------+
 *         uint32                                                 uint32
 *   a = 1 allocated, 0 free.  size is a multiple of 16, at least 32, and below
 *   2^32 (it must fit the 4-byte tag).  A free block holds nothing else: the
 *   list is implicit, walked by adding sizes.
 *
 *   The heap (the default emulated sbrk region)
 *
 *   base base+4   base+8   base+12                               end  end+4 = brk
 *   +----+--------+--------+--------+--------+-- ... --+--------+------+
 *   |pad | 8|1    | 8|1    | block  | block  |         | block  | 0|1  |
 *   +----+--------+--------+--------+--------+-- ... --+--------+------+
 *         prologue (8 bytes)  heap_lo                           epilogue (4 bytes)
 *
 *   Requests whose block would not fit a 4-byte size field (or exceed
 *   HEAPLAB_NEXTFIT_MMAP) get whole pages from the platform instead, with a
 *   32-byte header just below the payload, and live on a doubly-linked list:
 *
 *   map                      p - 32                          p = map + off
 *   +---------- ... ---------+------+------+-------+------+------+------------
 *   | (gap, when memaligned) | next | prev | bytes | off  | BIG  | payload ...
 *   +---------- ... ---------+------+------+-------+------+------+------------
 *                                                   uint32 uint32: at p - 4, where a
 *                                                                  heap block has its tag
 *   free() tells the two apart by address: heap blocks lie in [heap_lo, end).
 *
 * Invariants: blocks tile [heap_lo, end) exactly; header == footer; the
 * prologue and epilogue tags are allocated; no two free blocks are adjacent
 * unless their sizes add up to more than a 4-byte tag holds; `last_stop` is the
 * start of a block or the epilogue; `max_free` is at least the size of every
 * free block; nfree_log[k] counts the free blocks of sizes in [2^k, 2^(k+1))
 * and bit k of `logmap` is set iff it is not 0; every page-backed block is on
 * the big list with a BIG tag.
 *
 * From the paper, as written: 4-byte header and footer holding the size with
 * the allocated flag in the least significant bit; an 8-byte prologue and a
 * 4-byte epilogue of size 0, both allocated; requests rounded up to a multiple
 * of 8 that is at least 16; next fit: find_fit walks the blocks from
 * `last_stop` by adding sizes, wraps at the epilogue, and takes the first free
 * block that is big enough, which is NOT divided (HEAPLAB_NEXTFIT_SPLIT=0, the
 * default; a positive value splits when the remainder would be at least that
 * many bytes); `last_stop` records where find_fit stopped, and is moved to the
 * (merged) block of every free, which goes through coalesce, and to the block
 * realloc returns when it grows in place, so it never points into the middle
 * of a block;
 * coalescing is immediate, with both neighbours, through the footers; realloc
 * tries, in turn, (1) a smaller size: keep the block, undivided; (2) the next
 * block is free and big enough: absorb it whole; (3) the previous block is
 * free and big enough: absorb it and memmove the payload down; (4) malloc
 * three times the new size (HEAPLAB_NEXTFIT_REALLOC), copy, free; the
 * first-fit setting the paper started from (HEAPLAB_NEXTFIT_FIRSTFIT=1: every
 * search starts at the first block).  When no block fits the heap grows by
 * exactly what the request lacks, merging with a free block at its end.
 *
 * Departures, all forced by 64-bit words and 16-byte alignment or by the full
 * malloc API: payloads are 16-aligned, so blocks are multiples of 16 and at
 * least 32 bytes (the paper's 8-aligned blocks were multiples of 8, at least
 * 24) and there are 4 bytes of padding before the prologue.  Sizes fit a
 * 4-byte tag only below 4 GiB, so larger requests take whole pages (above),
 * and two free neighbours whose sum would not fit stay apart.  memalign
 * (absent from the paper) carves an aligned block out of a bigger one and
 * gives back both ends.  A search whose failure is certain is skipped
 * (HEAPLAB_NEXTFIT_SKIP=1, the default): when no free block has a size of the
 * request's power of two or more, or the request exceeds `max_free`, an upper
 * bound on the largest free block that every fruitless walk makes exact.
 * This changes no placement decision (the walk would fail and the heap would
 * grow all the same); it only saves walking a heap that has no fit, which
 * otherwise makes every heap-growing malloc walk the whole heap.
 * HEAPLAB_NEXTFIT_SKIP=0 walks every time, as the paper does, for instruction
 * counts of the paper's design.  Realloc's
 * over-allocation is not applied when three times the size would leave the
 * heap for whole pages.
 */
#include "hl_alloc.h"

#include <stdbool.h>
#include <string.h>

#define TAG      4  /* one tag: a uint32 */
#define OVERHEAD 8  /* header + footer */
#define MINBLOCK 32 /* a 16-byte payload rounded as the paper says, plus tags, 16-aligned */
#define ALLOC    1u
#define MAXBLOCK ((size_t)0xFFFFFFF0u) /* the largest multiple of 16 a uint32 tag holds */
#define BIGTAG   0xB16B10C2u /* at p - 4 of a page-backed block; bit 1 set: never a size */
#define BIGHDR   32

typedef struct nf_big {
    struct nf_big *next, *prev;
    size_t bytes;    /* of the mapping */
    uint32_t offset; /* p - map */
    uint32_t tag;    /* BIGTAG */
} nf_big_t;

static char *heap_lo;          /* the first block (== end when the heap is empty) */
static char *end;              /* the epilogue header */
static char *last_stop;        /* where the next search starts: a block, or end */
static size_t max_free;        /* >= every free block's size */
static uint32_t nfree_log[32]; /* free blocks by floor(log2(size)) */
static uint32_t logmap;        /* bit k: nfree_log[k] != 0 */
static bool skip;
static nf_big_t big_head; /* circular list of page-backed blocks */
static size_t split_min;  /* 0: never split (the paper) */
static size_t realloc_factor;
static size_t big_min; /* blocks above this size take whole pages */
static bool first_fit;

static inline uint32_t *hdr(char *b) {
    return (uint32_t *)b;
}
static inline size_t bsize(char *b) {
    return *hdr(b) & ~(uint32_t)15;
}
static inline bool is_alloc(char *b) {
    return *hdr(b) & ALLOC;
}
static inline uint32_t *ftr(char *b, size_t sz) {
    return (uint32_t *)(b + sz - TAG);
}
static inline void set_tags(char *b, size_t sz, uint32_t a) {
    *hdr(b) = (uint32_t)sz | a;
    *ftr(b, sz) = (uint32_t)sz | a;
}

/* The paper's rounding (a multiple of 8, at least 16), then tags and 16-alignment. */
static inline size_t block_size(size_t n) {
    size_t r = HL_ALIGN_UP(n < 16 ? 16 : n, 8);
    return HL_ALIGN_UP(r + OVERHEAD, 16);
}

static inline bool in_heap(void *p) {
    return (char *)p > heap_lo && (char *)p < end;
}

static int nf_init(void) {
    first_fit = hl_tunable("HEAPLAB_NEXTFIT_FIRSTFIT", 0) != 0;
    skip = hl_tunable("HEAPLAB_NEXTFIT_SKIP", 1) != 0;
    realloc_factor = hl_tunable("HEAPLAB_NEXTFIT_REALLOC", 3);
    if (realloc_factor < 1 || realloc_factor > 64)
        hl_fatal("HEAPLAB_NEXTFIT_REALLOC=%zu: expected a factor from 1 to 64", realloc_factor);
    split_min = hl_tunable("HEAPLAB_NEXTFIT_SPLIT", 0);
    if (split_min) split_min = split_min < MINBLOCK ? MINBLOCK : HL_ALIGN_UP(split_min, 16);
    big_min = hl_tunable("HEAPLAB_NEXTFIT_MMAP", MAXBLOCK);
    if (big_min > MAXBLOCK) big_min = MAXBLOCK;
    if (big_min < MINBLOCK) big_min = MINBLOCK;
    big_head.next = big_head.prev = &big_head;
    char *base = hl_sbrk(16);
    if (!base) return -1;
    *(uint32_t *)(base + 4) = 8 | ALLOC; /* prologue header */
    *(uint32_t *)(base + 8) = 8 | ALLOC; /* prologue footer */
    *(uint32_t *)(base + 12) = ALLOC;    /* epilogue: size 0, allocated */
    heap_lo = end = last_stop = base + 12;
    return 0;
}

/* ------------------------------------------------------------------------ */
/* Page-backed blocks (requests a 4-byte tag cannot describe)                */
/* ------------------------------------------------------------------------ */

static inline nf_big_t *big_of(void *p) {
    return (nf_big_t *)((char *)p - BIGHDR);
}

static void *__attribute__((noinline)) big_alloc(size_t align, size_t n) {
    size_t off = align > BIGHDR ? align : BIGHDR;
    size_t bytes = HL_ALIGN_UP(off + n, hl_page_size());
    char *map = hl_pages_alloc(bytes, align);
    if (!map) return NULL;
    char *p = map + off;
    nf_big_t *h = big_of(p);
    h->bytes = bytes;
    h->offset = (uint32_t)off;
    h->tag = BIGTAG;
    h->next = big_head.next;
    h->prev = &big_head;
    big_head.next->prev = h;
    big_head.next = h;
    return p;
}

static nf_big_t *checked_big(void *p, const char *what) {
    nf_big_t *h = big_of(p);
    if (((uintptr_t)p & 15) || h->tag != BIGTAG || h->next->prev != h || h->prev->next != h)
        hl_fatal("%s(%p): not a block of this heap (double free or corruption)", what, p);
    return h;
}

static void big_free(void *p) {
    nf_big_t *h = checked_big(p, "free");
    h->prev->next = h->next;
    h->next->prev = h->prev;
    h->tag = 0;
    hl_pages_free((char *)p - h->offset, h->bytes);
}

static inline size_t big_usable(nf_big_t *h) {
    return h->bytes - h->offset;
}

/* ------------------------------------------------------------------------ */
/* The implicit list                                                          */
/* ------------------------------------------------------------------------ */

/* Count a free block of size sz in (d = 1) or out (d = -1). */
static inline void count_free(size_t sz, int d) {
    unsigned k = 63u - (unsigned)__builtin_clzl(sz);
    nfree_log[k] += (uint32_t)d;
    if (nfree_log[k])
        logmap |= 1u << k;
    else
        logmap &= ~(1u << k);
}

/* Merge the free block b (tags written, not yet counted) with free neighbours.  last_stop
 * moves to the result (the paper: "we also update it when a block is
 * coalesced, as there is a good chance that the newly coalesced block is large
 * enough for the next malloc need"), which also keeps it off the inside of a
 * merged block.  As in the CS:APP allocator the paper builds on, coalesce runs
 * on every free, merging or not, so the rover always lands on the block just
 * freed: leaving it behind would make the next malloc walk the whole heap
 * round to reach the hole. */
static char *coalesce(char *b) {
    size_t sz = bsize(b);
    uint32_t ptag = *(uint32_t *)(b - TAG);
    char *next = b + sz;
    bool merged = false;
    if (!(ptag & ALLOC)) {
        size_t psz = ptag & ~(uint32_t)15;
        if (psz + sz <= MAXBLOCK) {
            count_free(psz, -1);
            b -= psz;
            sz += psz;
            merged = true;
        }
    }
    if (!is_alloc(next) && sz + bsize(next) <= MAXBLOCK) {
        count_free(bsize(next), -1);
        sz += bsize(next);
        merged = true;
    }
    if (merged) set_tags(b, sz, 0);
    count_free(sz, 1);
    last_stop = b;
    if (sz > max_free) max_free = sz;
    return b;
}

/* Walk from `from` to the epilogue, then from the first block back to `from`;
 * the first free block of at least `need` bytes wins.  ~5 instructions per
 * block passed.  NULL if none; then max_free becomes exact. */
static char *find_fit(size_t need) {
    if (skip && (need > max_free || !(logmap >> (63 - __builtin_clzl(need)))))
        return NULL; /* certain to fail: skip the walk */
    char *from = first_fit ? heap_lo : last_stop;
    size_t seen = 0;
    for (char *b = from; b < end; b += bsize(b)) {
        uint32_t t = *hdr(b);
        if (!(t & ALLOC)) {
            if (t >= need) return b;
            if (t > seen) seen = t;
        }
    }
    for (char *b = heap_lo; b < from; b += bsize(b)) {
        uint32_t t = *hdr(b);
        if (!(t & ALLOC)) {
            if (t >= need) return b;
            if (t > seen) seen = t;
        }
    }
    max_free = seen;
    return NULL;
}

/* Grow the heap by what a block of `need` bytes lacks: all of it, or the
 * difference when the last block is free.  Returns the (free) block. */
static char *__attribute__((noinline)) extend(size_t need) {
    uint32_t ltag = *(uint32_t *)(end - TAG); /* the last block's footer (or the prologue's) */
    size_t have = 0;
    if (!(ltag & ALLOC) && (ltag & ~(uint32_t)15) < need) have = ltag & ~(uint32_t)15;
    size_t incr = need - have;
    if (!hl_sbrk((intptr_t)incr)) return NULL;
    if (have) count_free(have, -1);
    count_free(need, 1);
    char *b = end - have;
    end += incr;
    *hdr(end) = ALLOC; /* the new epilogue */
    set_tags(b, need, 0);
    return b;
}

/* Allocate free block b for a request of `need` bytes. */
static inline char *place(char *b, size_t need) {
    size_t sz = bsize(b);
    count_free(sz, -1);
    if (split_min && sz - need >= split_min) {
        set_tags(b + need, sz - need, 0); /* its right neighbour was b's: not mergeable */
        count_free(sz - need, 1);
        sz = need;
    }
    set_tags(b, sz, ALLOC);
    last_stop = b;
    return b;
}

static char *alloc_block(size_t need) {
    char *b = find_fit(need);
    if (HL_UNLIKELY(!b)) {
        b = extend(need);
        if (!b) return NULL;
    }
    return place(b, need);
}

static void *nf_malloc(size_t n) {
    size_t need = block_size(n);
    if (HL_UNLIKELY(need > big_min)) return big_alloc(0, n);
    char *b = alloc_block(need);
    return b ? b + TAG : NULL;
}

static inline char *checked_block(void *p, const char *what) {
    char *b = (char *)p - TAG;
    size_t sz = bsize(b);
    if (HL_UNLIKELY(((uintptr_t)p & 15) || !is_alloc(b) || sz < MINBLOCK ||
                    sz > (size_t)(end - b) || *ftr(b, sz) != *hdr(b)))
        hl_fatal("%s(%p): not a block in use (double free or corruption)", what, p);
    return b;
}

static void nf_free(void *p) {
    if (HL_UNLIKELY(!in_heap(p))) {
        big_free(p);
        return;
    }
    char *b = checked_block(p, "free");
    set_tags(b, bsize(b), 0);
    coalesce(b);
}

static size_t nf_usable_size(void *p) {
    if (HL_UNLIKELY(!in_heap(p))) return big_usable(checked_big(p, "malloc_usable_size"));
    return bsize(checked_block(p, "malloc_usable_size")) - OVERHEAD;
}

/* Cut an allocated block down to `keep` bytes when splitting is on and the
 * tail is worth a block of its own. */
static void trim(char *b, size_t keep) {
    size_t sz = bsize(b);
    if (!split_min || sz - keep < split_min) return;
    set_tags(b, keep, ALLOC);
    set_tags(b + keep, sz - keep, 0);
    coalesce(b + keep);
}

/* Case 4: move to a block three times the new size (or the size itself when
 * that is not to be had), copy, free. */
static void *realloc_move(void *p, size_t n, size_t old_usable) {
    void *q = NULL;
    size_t more = n * realloc_factor;
    if (realloc_factor > 1 && more <= HL_MAX_REQUEST && block_size(more) <= big_min)
        q = nf_malloc(more);
    if (!q) q = nf_malloc(n);
    if (!q) return NULL;
    memcpy(q, p, n < old_usable ? n : old_usable);
    nf_free(p);
    return q;
}

static void *nf_realloc(void *p, size_t n) {
    size_t need = block_size(n);
    if (HL_UNLIKELY(!in_heap(p))) {
        size_t u = big_usable(checked_big(p, "realloc"));
        if (n <= u && need > big_min) return p;
        return realloc_move(p, n, u);
    }
    char *b = checked_block(p, "realloc");
    size_t sz = bsize(b);
    if (need <= sz) { /* 1: smaller: keep the block (undivided unless splitting is on) */
        trim(b, need);
        return p;
    }
    if (need <= big_min) {
        char *next = b + sz;
        if (!is_alloc(next) && sz + bsize(next) >= need && sz + bsize(next) <= MAXBLOCK) {
            count_free(bsize(next), -1);
            set_tags(b, sz + bsize(next), ALLOC); /* 2: absorb the next block */
            last_stop = b;
            trim(b, need);
            return p;
        }
        uint32_t ptag = *(uint32_t *)(b - TAG);
        size_t psz = ptag & ~(uint32_t)15;
        if (!(ptag & ALLOC) && psz + sz >= need && psz + sz <= MAXBLOCK) {
            char *pb = b - psz; /* 3: absorb the previous block and move down */
            count_free(psz, -1);
            memmove(pb + TAG, p, sz - OVERHEAD);
            set_tags(pb, psz + sz, ALLOC);
            last_stop = pb;
            trim(pb, need);
            return pb + TAG;
        }
    }
    return realloc_move(p, n, sz - OVERHEAD); /* 4 */
}

/* Allocate room for an aligned block plus one spare block, then give back the
 * part below the aligned payload (at least MINBLOCK) and the tail. */
static void *nf_memalign(size_t align, size_t n) {
    size_t need = block_size(n);
    if (need + align + MINBLOCK > big_min) return big_alloc(align, n);
    char *b = alloc_block(need + align + MINBLOCK);
    if (!b) return NULL;
    char *p = b + TAG;
    char *q = (char *)HL_ALIGN_UP((uintptr_t)p, align);
    if (q != p && (size_t)(q - p) < MINBLOCK) q += align;
    char *qb = q - TAG;
    size_t sz = bsize(b);
    if (q != p) {
        size_t lead = (size_t)(q - p);
        set_tags(qb, sz - lead, ALLOC);
        set_tags(b, lead, 0);
        coalesce(b);
        sz -= lead;
    }
    if (sz - need >= MINBLOCK) { /* memalign's own surplus: always given back */
        set_tags(qb, need, ALLOC);
        set_tags(qb + need, sz - need, 0);
        coalesce(qb + need);
    }
    return q;
}

static void nf_check(void) {
    char *base = heap_lo - 12;
    HL_CHECK(((uintptr_t)base & 15) == 0);
    HL_CHECK(*(uint32_t *)(base + 4) == (8 | ALLOC) && *(uint32_t *)(base + 8) == (8 | ALLOC));
    HL_CHECK(*hdr(end) == ALLOC);
    HL_CHECK(end + TAG == (char *)hl_heap_brk(hl_default_heap()));
    bool last_stop_ok = last_stop == end;
    size_t prev_free = 0;
    uint32_t counted[32] = {0};
    for (char *b = heap_lo; b < end; b += bsize(b)) {
        size_t sz = bsize(b);
        HL_CHECK(((uintptr_t)b & 15) == 12);
        HL_CHECK(sz >= MINBLOCK && sz <= MAXBLOCK && (*hdr(b) & 14) == 0);
        HL_CHECK(sz <= (size_t)(end - b));
        HL_CHECK(*ftr(b, sz) == *hdr(b));
        if (!is_alloc(b)) {
            HL_CHECK(sz <= max_free);
            counted[63 - __builtin_clzl(sz)]++;
            HL_CHECK(prev_free == 0 || prev_free + sz > MAXBLOCK); /* coalescing is immediate */
            prev_free = sz;
        } else {
            prev_free = 0;
        }
        last_stop_ok |= b == last_stop;
    }
    HL_CHECK(last_stop_ok);
    for (unsigned k = 0; k < 32; k++) {
        HL_CHECK(counted[k] == nfree_log[k]);
        HL_CHECK(((logmap >> k) & 1) == (nfree_log[k] != 0));
    }
    for (nf_big_t *h = big_head.next; h != &big_head; h = h->next) {
        char *p = (char *)h + BIGHDR;
        HL_CHECK(h->tag == BIGTAG);
        HL_CHECK(h->next->prev == h && h->prev->next == h);
        HL_CHECK(!in_heap(p) && ((uintptr_t)p & 15) == 0);
        HL_CHECK(h->offset >= BIGHDR && h->bytes > h->offset);
        HL_CHECK((((uintptr_t)p - h->offset) & (hl_page_size() - 1)) == 0);
        HL_CHECK(h->bytes % hl_page_size() == 0);
    }
}

const hl_alloc_t hl_alloc_nextfit = {
    .info = {"nextfit",
             "Implicit list with 4-byte header and footer, next fit from a roving last_stop, "
             "immediate coalescing, four-case realloc",
             "004"},
    .init = nf_init,
    .malloc = nf_malloc,
    .free = nf_free,
    .usable_size = nf_usable_size,
    .realloc = nf_realloc,
    .memalign = nf_memalign,
    .check = nf_check,
};
