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
 * start of a block or the epilogue; nfree_log[k] counts the free blocks of
 * sizes in [2^k, 2^(k+1)) and bit k of `logmap` is set iff it is not 0; with
 * the index, a bit is set iff a free block starts at its position, and each
 * maximum is the largest size of the free blocks starting in its range;
 * every page-backed block is on the big list with a BIG tag.
 *
 * From the paper, as written: 4-byte header and footer holding the size with
 * the allocated flag in the least significant bit; an 8-byte prologue and a
 * 4-byte epilogue of size 0, both allocated; requests rounded up to a multiple
 * of 8 that is at least 16; next fit: find_fit walks the blocks from
 * `last_stop` by adding sizes, wraps at the epilogue, and takes the first free
 * block that is big enough, which is NOT divided (HEAPLAB_NEXTFIT_SPLIT=0, the
 * default; a positive value makes malloc split when the remainder would be
 * at least that many bytes; realloc never divides); `last_stop` records where find_fit stopped, and
 * is moved to the (merged) block of every free, which goes through coalesce, and to the block
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
 * gives back both ends.  Realloc's over-allocation is not applied when three
 * times the size would leave the heap for whole pages.
 *
 * The search index (HEAPLAB_NEXTFIT_INDEX=1, the default).  Walking the
 * implicit list costs a few instructions per block, allocated or free, and on
 * real programs the walk from last_stop to the next fit passes thousands of
 * blocks (perl and python3 ran 100 to 1000 times slower than with glibc).  So
 * find_fit asks an exact index of the free blocks for the same answer: the
 * first free block at or after last_stop (then from the first block) whose
 * size is at least the request.  The index does not change a single
 * placement; it is a bitmap with one bit per 16 bytes of heap, set where a
 * free block starts, and the largest free size under each 64-bit word, each
 * 64 words and each megabyte of heap, in an emulated-sbrk region of its own
 * (1.2% of the heap, counted in the footprint):
 *
 *   chunk c (1 MiB of heap = 65536 positions)
 *   +------------------+-------------------+----------------+-----+
 *   | bits[1024]       | word_max[1024]    | super_max[16]  | max |
 *   | bit = free start | max size per word | per 64 words   |     |
 *   +------------------+-------------------+----------------+-----+
 *
 * A search skips every range whose maximum is too small, then tests the set
 * bits of a word in address order.  nfree_log[] counts the free blocks per
 * power of two, so a search that must fail costs one test.
 * HEAPLAB_NEXTFIT_INDEX=0 walks the implicit list as the paper does, with
 * neither the index nor its memory, for the instruction counts of the paper's
 * design.
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
static uint32_t nfree_log[32]; /* free blocks by floor(log2(size)) */
static uint32_t logmap;        /* bit k: nfree_log[k] != 0 */
static nf_big_t big_head;      /* circular list of page-backed blocks */
static size_t split_min;       /* 0: never split (the paper) */
static size_t realloc_factor;
static size_t big_min; /* blocks above this size take whole pages */
static bool first_fit;

/* The search index (see the top): positions are (block - heap_lo) / 16. */
#define CHUNK_WORDS 1024 /* 64-bit words of bits per chunk: 1 MiB of heap */
#define SUPER_WORDS 64
#define NSUPER      (CHUNK_WORDS / SUPER_WORDS)
typedef struct nf_chunk {
    uint64_t bits[CHUNK_WORDS];
    uint32_t word_max[CHUNK_WORDS];
    uint32_t super_max[NSUPER];
    uint32_t max;
    uint32_t unused;
} nf_chunk_t;

static bool use_index;
static hl_heap_t *idx_heap;
static nf_chunk_t *chunks;
static size_t nchunks;

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
    use_index = hl_tunable("HEAPLAB_NEXTFIT_INDEX", 1) != 0;
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
    if (use_index) { /* after the default heap is in use, so it keeps its slot */
        idx_heap = hl_heap_new("nextfit index");
        if (!idx_heap) return -1;
        chunks = hl_heap_sbrk(idx_heap, 0);
        if (!chunks) return -1;
    }
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

static inline unsigned log2_of(size_t sz) {
    return 63u - (unsigned)__builtin_clzl(sz);
}
static inline size_t pos_of(char *b) {
    return (size_t)(b - heap_lo) >> 4;
}
static inline char *block_at(size_t pos) {
    return heap_lo + (pos << 4);
}

/* Make the index cover every position below `limit` (a future end). */
static bool index_cover(char *limit) {
    size_t want = (pos_of(limit) >> 16) + 1;
    if (!use_index || want <= nchunks) return true;
    if (!hl_heap_sbrk(idx_heap, (intptr_t)((want - nchunks) * sizeof(nf_chunk_t)))) return false;
    nchunks = want; /* fresh memory reads as zero: no bits, all maxima 0 */
    return true;
}

/* The largest free size starting in word w of chunk c, from its bits. */
static uint32_t word_max_of(nf_chunk_t *c, size_t ci, size_t w) {
    uint32_t m = 0;
    size_t pos0 = (ci << 16) + (w << 6);
    for (uint64_t bits = c->bits[w]; bits; bits &= bits - 1) {
        uint32_t sz = (uint32_t)bsize(block_at(pos0 + (size_t)__builtin_ctzll(bits)));
        if (sz > m) m = sz;
    }
    return m;
}

/* A free block enters (its tags written) or leaves (its tags still intact)
 * the counts and the index.  Leaving costs a recount of one word, and of one
 * super-range and one chunk only when it held their largest block. */
static inline void free_in(char *b) {
    size_t sz = bsize(b);
    unsigned k = log2_of(sz);
    nfree_log[k]++;
    logmap |= 1u << k;
    if (!use_index) return;
    size_t pos = pos_of(b), w = (pos >> 6) & (CHUNK_WORDS - 1), s = w / SUPER_WORDS;
    nf_chunk_t *c = &chunks[pos >> 16];
    c->bits[w] |= (uint64_t)1 << (pos & 63);
    if (sz > c->word_max[w]) {
        c->word_max[w] = (uint32_t)sz;
        if (sz > c->super_max[s]) {
            c->super_max[s] = (uint32_t)sz;
            if (sz > c->max) c->max = (uint32_t)sz;
        }
    }
}

static inline void free_out(char *b) {
    size_t sz = bsize(b);
    unsigned k = log2_of(sz);
    if (!--nfree_log[k]) logmap &= ~(1u << k);
    if (!use_index) return;
    size_t pos = pos_of(b), ci = pos >> 16, w = (pos >> 6) & (CHUNK_WORDS - 1), s = w / SUPER_WORDS;
    nf_chunk_t *c = &chunks[ci];
    c->bits[w] &= ~((uint64_t)1 << (pos & 63));
    if (c->word_max[w] != sz) return;
    c->word_max[w] = word_max_of(c, ci, w);
    if (c->super_max[s] != sz) return;
    uint32_t m = 0;
    for (size_t i = s * SUPER_WORDS; i < (s + 1) * SUPER_WORDS; i++)
        if (c->word_max[i] > m) m = c->word_max[i];
    c->super_max[s] = m;
    if (c->max != sz) return;
    m = 0;
    for (size_t i = 0; i < NSUPER; i++)
        if (c->super_max[i] > m) m = c->super_max[i];
    c->max = m;
}

/* The first free block of at least `need` bytes starting at a position in
 * [from, to), through the index: ranges whose maximum is too small are
 * skipped whole, then the set bits of a word are tried in address order. */
static char *index_find(size_t from, size_t to, size_t need) {
    size_t p = from;
    while (p < to) {
        nf_chunk_t *c = &chunks[p >> 16];
        if (c->max < need) {
            p = ((p >> 16) + 1) << 16;
            continue;
        }
        size_t w = (p >> 6) & (CHUNK_WORDS - 1);
        if (c->super_max[w / SUPER_WORDS] < need) {
            p = ((p >> 12) + 1) << 12;
            continue;
        }
        if (c->word_max[w] >= need) {
            for (uint64_t bits = c->bits[w] & (~(uint64_t)0 << (p & 63)); bits; bits &= bits - 1) {
                size_t q = (p & ~(size_t)63) + (size_t)__builtin_ctzll(bits);
                if (q >= to) return NULL;
                char *b = block_at(q);
                if (bsize(b) >= need) return b;
            }
        }
        p = ((p >> 6) + 1) << 6;
    }
    return NULL;
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
            free_out(b - psz);
            b -= psz;
            sz += psz;
            merged = true;
        }
    }
    if (!is_alloc(next) && sz + bsize(next) <= MAXBLOCK) {
        free_out(next);
        sz += bsize(next);
        merged = true;
    }
    if (merged) set_tags(b, sz, 0);
    free_in(b);
    last_stop = b;
    return b;
}

/* Next fit: the first free block of at least `need` bytes met walking from
 * last_stop to the epilogue, then from the first block back to last_stop
 * (from the first block only, in the first-fit setting).  With the index the
 * same block is found without the walk; without it, as in the paper, ~5
 * instructions per block passed. */
static char *find_fit(size_t need) {
    char *from = first_fit ? heap_lo : last_stop;
    if (use_index) {
        if (!(logmap >> log2_of(need))) return NULL; /* every free block is smaller */
        char *b = index_find(pos_of(from), pos_of(end), need);
        return b ? b : index_find(0, pos_of(from), need);
    }
    for (char *b = from; b < end; b += bsize(b))
        if (*hdr(b) >= need && !is_alloc(b)) return b;
    for (char *b = heap_lo; b < from; b += bsize(b))
        if (*hdr(b) >= need && !is_alloc(b)) return b;
    return NULL;
}

/* Grow the heap by what a block of `need` bytes lacks: all of it, or the
 * difference when the last block is free.  Returns the (free) block. */
static char *__attribute__((noinline)) extend(size_t need) {
    uint32_t ltag = *(uint32_t *)(end - TAG); /* the last block's footer (or the prologue's) */
    size_t have = 0;
    if (!(ltag & ALLOC) && (ltag & ~(uint32_t)15) < need) have = ltag & ~(uint32_t)15;
    size_t incr = need - have;
    if (!index_cover(end + incr) || !hl_sbrk((intptr_t)incr)) return NULL;
    char *b = end - have;
    if (have) free_out(b);
    end += incr;
    *hdr(end) = ALLOC; /* the new epilogue */
    set_tags(b, need, 0);
    free_in(b);
    return b;
}

/* Allocate free block b for a request of `need` bytes. */
static inline char *place(char *b, size_t need) {
    size_t sz = bsize(b);
    free_out(b);
    if (split_min && sz - need >= split_min) {
        set_tags(b + need, sz - need, 0); /* its right neighbour was b's: not mergeable */
        free_in(b + need);
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
    /* Whatever room a block has is kept: "any extra space that so happen to be
     * there is not divided" (004), even with HEAPLAB_NEXTFIT_SPLIT, which is
     * malloc's placement only; dividing would throw away case 4's surplus. */
    if (need <= sz) return p; /* 1: smaller: keep the block */
    if (need <= big_min) {
        char *next = b + sz;
        if (!is_alloc(next) && sz + bsize(next) >= need && sz + bsize(next) <= MAXBLOCK) {
            size_t nsz = bsize(next);
            free_out(next);
            set_tags(b, sz + nsz, ALLOC); /* 2: absorb the next block */
            last_stop = b;
            return p;
        }
        uint32_t ptag = *(uint32_t *)(b - TAG);
        size_t psz = ptag & ~(uint32_t)15;
        if (!(ptag & ALLOC) && psz + sz >= need && psz + sz <= MAXBLOCK) {
            char *pb = b - psz; /* 3: absorb the previous block and move down */
            free_out(pb);
            memmove(pb + TAG, p, sz - OVERHEAD);
            set_tags(pb, psz + sz, ALLOC);
            last_stop = pb;
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
    size_t nfree = 0;
    for (char *b = heap_lo; b < end; b += bsize(b)) {
        size_t sz = bsize(b);
        HL_CHECK(((uintptr_t)b & 15) == 12);
        HL_CHECK(sz >= MINBLOCK && sz <= MAXBLOCK && (*hdr(b) & 14) == 0);
        HL_CHECK(sz <= (size_t)(end - b));
        HL_CHECK(*ftr(b, sz) == *hdr(b));
        if (!is_alloc(b)) {
            counted[log2_of(sz)]++;
            nfree++;
            if (use_index) {
                size_t pos = pos_of(b);
                HL_CHECK((pos >> 16) < nchunks);
                HL_CHECK(chunks[pos >> 16].bits[(pos >> 6) & (CHUNK_WORDS - 1)] >> (pos & 63) & 1);
            }
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
    if (use_index) { /* exactly the free blocks' starts, and exact maxima */
        HL_CHECK(pos_of(end) <= nchunks << 16);
        HL_CHECK((char *)chunks + nchunks * sizeof(nf_chunk_t) == (char *)hl_heap_brk(idx_heap));
        size_t bits = 0;
        for (size_t ci = 0; ci < nchunks; ci++) {
            nf_chunk_t *c = &chunks[ci];
            uint32_t cmax = 0;
            for (size_t s = 0; s < NSUPER; s++) {
                uint32_t smax = 0;
                for (size_t w = s * SUPER_WORDS; w < (s + 1) * SUPER_WORDS; w++) {
                    bits += (size_t)__builtin_popcountll(c->bits[w]);
                    for (uint64_t m = c->bits[w]; m; m &= m - 1) {
                        char *b = block_at((ci << 16) + (w << 6) + (size_t)__builtin_ctzll(m));
                        HL_CHECK(b < end && !is_alloc(b));
                    }
                    HL_CHECK(c->word_max[w] == word_max_of(c, ci, w));
                    if (c->word_max[w] > smax) smax = c->word_max[w];
                }
                HL_CHECK(c->super_max[s] == smax);
                if (smax > cmax) cmax = smax;
            }
            HL_CHECK(c->max == cmax);
        }
        HL_CHECK(bits == nfree);
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
