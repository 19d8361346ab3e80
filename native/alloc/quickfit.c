/*
 * quickfit.c: Weinstock and Wulf's quick fit (paper 000 §2.1 "QUICKFIT";
 * paper 002 §4 "QUICKFIT" and Table 3), over gnugpp.c for everything else.
 *
 *   A fast block (requests of 1..QUICKFIT_MAX bytes; class c = ceil(n / 4))
 *
 *        b                      b+8                          b + bsize(c)
 *        +----------------------+-----------------------------+
 *   used | c << 4 | 0xD         | payload (bsize(c) - 8)      |
 *        +----------------------+-----------------------------+
 *   free | c << 4 | 0xC         | next free block of class c  |
 *        +----------------------+-----------------------------+
 *
 *   bsize(c) = round_up(8 + 4c, 16): 16, 16, 32, 32, 32, 32, 48, 48 bytes.
 *   Any other block is gnugpp's: the tag word just below the payload names
 *   the owner by hl_alloc.h's header-bit convention (gnugpp's headers end in
 *   0 or 1; 0xC = HL_TAG_FREE and 0xD = HL_TAG_USED are quickfit's).
 *
 *   The fast blocks come from a bump area in quickfit's own heap, which takes
 *   HEAPLAB_QUICKFIT_CHUNK bytes at a time and is never given back:
 *
 *   base   base+8
 *   +------+------+------+------+------------+------+-- ... ---+-----------+
 *   | pad  | c=3  | c=1  | c=8  | c=3        | c=2  |          | unused    |
 *   +------+------+------+------+------------+------+-- ... ---+-----------+
 *                                                             bump       end
 *
 * Invariants: the bump area [base+8, bump) is tiled by fast blocks, each
 * tagged with its class; a fast block is on list[c] iff its tag says free;
 * fast blocks never split, coalesce or change class.
 *
 * From the papers: exact-size free lists indexed by the request size rounded
 * to a 4-byte word, for requests up to 32 bytes (eight lists, 002 §4 and
 * 000 §2.1); fed by the fast allocator, a bump allocator that never coalesces;
 * a boundary tag says which allocator owns a block; larger requests go to GNU
 * G++ (000 §2.1).  HEAPLAB_QUICKFIT_MAX=16 gives the four-list variant of
 * 002 Table 3.  Departure: payloads are 16-aligned, so physical blocks are
 * rounded to 16 bytes; the lists stay exact-size per 4-byte class (a 4-byte
 * and an 8-byte request never share a list), as the paper's had.
 */
#include "hl_alloc.h"

#include <string.h>

#define W        8
#define NCLASS   8 /* 4-byte classes up to 32 bytes */
#define TAG_FREE HL_TAG_FREE
#define TAG_USED HL_TAG_USED

extern const hl_alloc_t hl_alloc_gnugpp;

typedef struct qf_free {
    uint64_t tag;
    struct qf_free *next;
} qf_free_t;

static qf_free_t *list[NCLASS + 1];
static size_t nfree[NCLASS + 1];
static size_t qf_max; /* largest fast request: 4 * number of lists */
static size_t chunk;
static hl_heap_t *heap;
static char *area_lo, *bump, *end;

static inline size_t bsize(size_t c) {
    return HL_ALIGN_UP(W + 4 * c, 16);
}
static inline int is_fast(uint64_t tag) { /* a quickfit block, used or free */
    return HL_TAG_IS_BLOCK(tag);
}

static int qf_init(void) {
    qf_max = hl_tunable("HEAPLAB_QUICKFIT_MAX", 32);
    if (qf_max % 4 || qf_max > 4 * NCLASS)
        hl_fatal("HEAPLAB_QUICKFIT_MAX=%zu: must be a multiple of 4 up to 32", qf_max);
    chunk = HL_ALIGN_UP(hl_tunable("HEAPLAB_QUICKFIT_CHUNK", 4096), 16);
    if (chunk < 64) chunk = 64;
    if (hl_alloc_gnugpp.init() != 0) /* gnugpp keeps the default heap */
        return -1;
    heap = hl_heap_new("quickfit");
    if (!heap) return -1;
    char *base = hl_heap_sbrk(heap, W);
    if (!base) return -1;
    area_lo = bump = end = base + W;
    return 0;
}

static void *__attribute__((noinline)) refill(size_t c) {
    size_t sz = bsize(c);
    if (!hl_heap_sbrk(heap, (intptr_t)chunk)) /* contiguous with the area */
        return NULL;
    end += chunk;
    char *b = bump;
    bump += sz;
    *(uint64_t *)b = c << 4 | TAG_USED;
    return b + W;
}

/* Fast path: index, pop, tag: ~10 instructions.  Second: bump, ~8. */
static void *qf_malloc(size_t n) {
    if (n > qf_max) return hl_alloc_gnugpp.malloc(n);
    size_t c = (n + 3) >> 2;
    qf_free_t *f = list[c];
    if (HL_LIKELY(f)) {
        list[c] = f->next;
        nfree[c]--;
        f->tag = c << 4 | TAG_USED;
        return (char *)f + W;
    }
    size_t sz = bsize(c);
    if (HL_UNLIKELY(bump + sz > end)) return refill(c);
    char *b = bump;
    bump += sz;
    *(uint64_t *)b = c << 4 | TAG_USED;
    return b + W;
}

static inline uint64_t tag_of(void *p) {
    return *(uint64_t *)((char *)p - W);
}

static inline qf_free_t *fast_block(void *p, const char *what) {
    qf_free_t *f = (qf_free_t *)((char *)p - W);
    uint64_t c = f->tag >> 4;
    if (HL_UNLIKELY((char *)f < area_lo || (char *)f >= bump || (f->tag & HL_HDR_LOW_BITS) != TAG_USED ||
                    c == 0 || c > NCLASS))
        hl_fatal("%s(%p): not a quickfit block in use (double free or corruption)", what, p);
    return f;
}

static void qf_free(void *p) {
    if (!is_fast(tag_of(p))) {
        hl_alloc_gnugpp.free(p);
        return;
    }
    qf_free_t *f = fast_block(p, "free");
    size_t c = f->tag >> 4;
    f->tag = c << 4 | TAG_FREE;
    f->next = list[c];
    list[c] = f;
    nfree[c]++;
}

static size_t qf_usable_size(void *p) {
    if (!is_fast(tag_of(p))) return hl_alloc_gnugpp.usable_size(p);
    return bsize(fast_block(p, "malloc_usable_size")->tag >> 4) - W;
}

static void *qf_realloc(void *p, size_t n) {
    if (!is_fast(tag_of(p))) return hl_alloc_gnugpp.realloc(p, n);
    size_t c = fast_block(p, "realloc")->tag >> 4;
    if (n <= qf_max && (n + 3) >> 2 == c) /* same exact class */
        return p;
    void *q = qf_malloc(n);
    if (!q) return NULL;
    size_t old = bsize(c) - W;
    memcpy(q, p, n < old ? n : old);
    qf_free(p);
    return q;
}

static void *qf_memalign(size_t align, size_t n) {
    return hl_alloc_gnugpp.memalign(align, n);
}

static void qf_check(void) {
    hl_alloc_gnugpp.check();
    HL_CHECK(area_lo <= bump && bump <= end);
    HL_CHECK(end == (char *)hl_heap_brk(heap));
    size_t free_seen[NCLASS + 1] = {0};
    for (char *b = area_lo; b < bump;) {
        uint64_t t = *(uint64_t *)b, c = t >> 4;
        HL_CHECK(is_fast(t) && c >= 1 && c <= NCLASS);
        free_seen[c] += (t & HL_HDR_LOW_BITS) == TAG_FREE;
        b += bsize(c);
        HL_CHECK(b <= bump);
    }
    for (size_t c = 1; c <= NCLASS; c++) {
        size_t listed = 0;
        for (qf_free_t *f = list[c]; f; f = f->next) {
            HL_CHECK((char *)f >= area_lo && (char *)f < bump);
            HL_CHECK(f->tag == (c << 4 | TAG_FREE));
            HL_CHECK(++listed <= nfree[c]);
        }
        HL_CHECK(listed == nfree[c] && listed == free_seen[c]);
        HL_CHECK(c * 4 <= qf_max || listed == 0);
    }
}

const hl_alloc_t hl_alloc_quickfit = {
    .info = {"quickfit",
             "Weinstock and Wulf's quick fit: exact 4-byte-class lists up to 32 bytes over a bump "
             "area, rest to gnugpp",
             "000 §2.1; 002 §4"},
    .init = qf_init,
    .malloc = qf_malloc,
    .free = qf_free,
    .usable_size = qf_usable_size,
    .realloc = qf_realloc,
    .memalign = qf_memalign,
    .check = qf_check,
};
