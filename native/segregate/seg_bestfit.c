/*
 * seg_bestfit.c: each segment's best-fit heap (seg_heap.h), for the blocks
 * its fast core does not serve (over 32 KiB, the memalign family): vmalloc's
 * best fit, as dlmalloc does it, on the zoo's boundary-tag heap
 * (native/alloc/btag.h), one instance per segment.  Paper 001 §4.2 uses
 * vmalloc for its segments; its small blocks are now the fast core's
 * (segregated.c).
 *
 * The segment
 * -----------
 *
 *   segment i, its own emulated sbrk heap (hl_heap_new), so it stays contiguous:
 *
 *   heap base          first (≡ i × 64 KB mod 2 MB)                          brk
 *   |<-- skipped -->|[pad][block][block][free][block] ... [top .....][epilogue]|
 *                    grown 2 MB at a time (SEG_STEP), never given back
 *
 *   §4.2: "each segment started with two megabytes of space, and if that
 *   space was exhausted, the heaps were grown in two megabyte chunks", and
 *   "we offset each segment 64 kilobytes from the start of the previous
 *   heap", so that the first lines of the segments do not meet in caches
 *   larger than 64 KB.  The platform places each heap anywhere, so the first
 *   growth skips up to 2 MB of address space (never touched, never
 *   resident) to put segment i's first byte at i × 64 KB modulo 2 MB.
 *
 * Blocks
 * ------
 *
 *   btag.h's one-tag heap (a header word, a footer in free blocks, PINUSE),
 *   whose base is the segment's first byte and whose epilogue is its last
 *   word:
 *
 *     b ─▶ +----------------------+
 *          | size|PINUSE|CINUSE   |  (the word before b: the footer of a free block before)
 *   mem ─▶ +----------------------+  16-aligned
 *          | payload ...          |  free: fd, bk (the bin's list) ... footer
 *
 *   sizes are multiples of 16, at least 32; an in-use block costs 8 bytes.
 *   Bins: 62 exact bins for 32..1008 bytes, then four bins per power of two;
 *   a bitmap marks the bins that hold blocks.  The free block that ends at the
 *   epilogue is the top (the wilderness, BT_TOP) and is in no bin; it may be
 *   as small as 16 bytes.  A request takes the exact bin's first block, or the
 *   best fit of the first bin that has one, or the lower part of the top; a
 *   split hands out the lower part.  The top grows 2 MB at a time (SEG_STEP,
 *   btag.h's granule), by what it lacks.
 *
 * Invariants (sh_check): btag.h's (blocks tile the segment, no two free
 * blocks touch, the tags agree), and
 *
 *   top == NULL || (top + size(top) == epilogue && top is free)
 *   {free blocks} == union of bins + {top}
 *   b in bins[i]  =>  bin_of(size(b)) == i;   bit i of bitmap == (bins[i] != NULL)
 *   sum(size(b) for b in use) == bytes_live
 *   sh_bounds[i] == [first block, epilogue)
 */
#include "seg_heap.h"

#include <stdbool.h>
#include <string.h>

/* The layers, per segment: btag.h's one-tag heap with a wilderness (the top
 * block), the lower part of a split handed out, realloc never growing the
 * heap; the free set is the bins and the top; the heap starts where
 * seg_place puts it. */
#define BT_TAGS      1
#define BT_MINBLOCK  32
#define BT_SPLIT_LOW 1
#define BT_TOP       1
#define BT_PLACE     seg_place
#include "btag.h"

_Static_assert(SH_HDR_INUSE == CINUSE && SH_HDR_FLAGS == FLAGS, "seg_heap.h reads btag's header");

#define SEG_STEP   ((size_t)2 << 20)  /* growth: 2 MB (§4.2) */
#define SEG_OFFSET ((size_t)64 << 10) /* each segment 64 KB on from the one before (§4.2) */
#define NSMALL     62                 /* exact bins: 32 .. 1008 */
#define NBINS      (NSMALL + 4 * 31)
#define NWORDS     ((NBINS + 63) / 64)

typedef struct node { /* a free block in a bin */
    size_t hdr;
    struct node *fd, *bk;
} node_t;

typedef struct seg {
    bt_heap_t heap; /* the blocks; heap.heap is the segment's platform heap */
    unsigned index;
    char *top; /* the free block that ends at the epilogue, or NULL; in no bin */
    node_t *bins[NBINS];
    uint64_t bitmap[NWORDS];
    uint64_t bytes_live, bytes_peak;
} seg_t;

static seg_t segs[HL_SEG_CLASSES];
sh_bounds_t sh_bounds[HL_SEG_CLASSES];
unsigned sh_count;

static inline seg_t *seg_of(bt_heap_t *h) {
    return (seg_t *)((char *)h - offsetof(seg_t, heap));
}

static inline unsigned bin_of(size_t s) {
    if (s < 1024) return (unsigned)(s >> 4) - 2;
    unsigned lg = 63u - (unsigned)__builtin_clzll(s);
    unsigned idx = NSMALL + (lg - 10) * 4 + (unsigned)((s >> (lg - 2)) & 3);
    return idx < NBINS ? idx : NBINS - 1;
}

static inline void bin_insert(seg_t *s, node_t *c, size_t size) {
    unsigned b = bin_of(size);
    c->bk = NULL;
    c->fd = s->bins[b];
    if (c->fd) c->fd->bk = c;
    s->bins[b] = c;
    s->bitmap[b >> 6] |= 1ull << (b & 63);
}

static inline void bin_remove(seg_t *s, node_t *c, size_t size) {
    unsigned b = bin_of(size);
    if (c->bk)
        c->bk->fd = c->fd;
    else
        s->bins[b] = c->fd;
    if (c->fd) c->fd->bk = c->bk;
    if (!s->bins[b]) s->bitmap[b >> 6] &= ~(1ull << (b & 63));
}

/* The first bin at or after b that holds a block, or NBINS. */
static inline unsigned bin_next(const seg_t *s, unsigned b) {
    for (unsigned w = b >> 6; w < NWORDS; w++) {
        uint64_t m = s->bitmap[w];
        if (w == b >> 6) m &= ~0ull << (b & 63);
        if (m) return w * 64 + (unsigned)__builtin_ctzll(m);
    }
    return NBINS;
}

/* ---- the free set: the bins and the top (btag.h calls these) ---- */

static void fs_insert(bt_heap_t *h, char *b, size_t sz) {
    seg_t *s = seg_of(h);
    if (b + sz == h->hi)
        s->top = b;
    else
        bin_insert(s, (node_t *)b, sz);
}
static void fs_delete(bt_heap_t *h, char *b) {
    seg_t *s = seg_of(h);
    if (b == s->top)
        s->top = NULL;
    else
        bin_remove(s, (node_t *)b, bsize(b));
}
static void fs_replace(bt_heap_t *h, char *old, char *b, size_t sz) {
    seg_t *s = seg_of(h);
    if (old == s->top) { /* what replaces the top ends at the epilogue too */
        s->top = b;
        return;
    }
    bin_remove(s, (node_t *)old, bsize(old));
    fs_insert(h, b, sz);
}
static void fs_grew(bt_heap_t *h, char *b, size_t old, size_t sz) {
    seg_t *s = seg_of(h);
    if (b == s->top) return;
    bin_remove(s, (node_t *)b, old);
    fs_insert(h, b, sz);
}
/* The exact bin's first block; else the best fit of the first bin that has
 * one (any block of an exact bin above fits); else the top if it is big
 * enough; else NULL (btag.h grows the top). */
static char *fs_find(bt_heap_t *h, size_t need) {
    seg_t *s = seg_of(h);
    unsigned b = bin_of(need);
    if (b < NSMALL && s->bins[b]) return (char *)s->bins[b];
    for (b = bin_next(s, b); b < NBINS; b = bin_next(s, b + 1)) {
        if (b < NSMALL) return (char *)s->bins[b];
        node_t *best = NULL;
        for (node_t *c = s->bins[b]; c; c = c->fd)
            if (bsize(c) >= need && (!best || bsize(c) < bsize(best))) {
                best = c;
                if (bsize(c) == need) break;
            }
        if (best) return (char *)best;
    }
    return s->top && bsize(s->top) >= need ? s->top : NULL;
}

/* Where segment i starts: its platform heap's base, moved up to the next
 * address that is i x 64 KB modulo 2 MB (see the drawing).  The skipped
 * bytes are never touched. */
static char *seg_place(bt_heap_t *h) {
    seg_t *s = seg_of(h);
    char *b = hl_heap_sbrk(h->heap, 0); /* reserves the region: its base */
    if (!b) return NULL;
    size_t want = (s->index * SEG_OFFSET) % SEG_STEP;
    size_t skip = (want - ((uintptr_t)b % SEG_STEP)) & (SEG_STEP - 1);
    if (skip && !hl_heap_sbrk(h->heap, (intptr_t)skip)) return NULL;
    return b + skip;
}

/* ---- the interface ---- */

static inline void note_live(seg_t *s, size_t add) {
    s->bytes_live += add;
    if (s->bytes_live > s->bytes_peak) s->bytes_peak = s->bytes_live;
}

/* The bounds the lock-free readers see, after anything that may grow. */
static inline void publish(seg_t *s) {
    __atomic_store_n(&sh_bounds[s->index].lo, (uintptr_t)s->heap.lo, __ATOMIC_RELAXED);
    __atomic_store_n(&sh_bounds[s->index].hi, (uintptr_t)s->heap.hi, __ATOMIC_RELEASE);
}

int sh_init(unsigned i, hl_heap_t *ph) {
    if (i >= HL_SEG_CLASSES || !ph) return -1;
    seg_t *s = &segs[i];
    memset(s, 0, sizeof *s);
    bt_init(&s->heap, ph, BT_MINBLOCK, BT_MINBLOCK, SEG_STEP);
    s->index = i;
    if (sh_count < i + 1) __atomic_store_n(&sh_count, i + 1, __ATOMIC_RELEASE);
    return 0;
}

void *sh_malloc(unsigned i, size_t n) {
    seg_t *s = &segs[i];
    char *hi = s->heap.hi;
    char *p = bt_malloc(&s->heap, n);
    if (HL_UNLIKELY(s->heap.hi != hi)) publish(s);
    if (p) note_live(s, bsize(p - W));
    return p;
}

void sh_free(unsigned i, void *p) {
    seg_t *s = &segs[i];
    char *b = (char *)p - W;
    size_t sz = bsize(b);
    s->bytes_live -= sz;
    bt_release(&s->heap, b, sz); /* (its header keeps CINUSE if it is merged away, as in dlmalloc) */
}

int sh_check_block(unsigned i, const void *p) {
    const seg_t *s = &segs[i];
    const char *b = (const char *)p - W;
    return s->heap.lo && b >= s->heap.lo && b < s->heap.hi && ((uintptr_t)p & 15) == 0 &&
           (*hdr(b) & CINUSE) && bsize(b) >= BT_MINBLOCK && bsize(b) <= (size_t)(s->heap.hi - b);
}

size_t sh_usable(const void *p) {
    return bt_usable((const char *)p - W);
}

/* In place (btag.h: shrink, or grow into the free block after, the top
 * included), else NULL. */
void *sh_resize(unsigned i, void *p, size_t n) {
    seg_t *s = &segs[i];
    char *b = (char *)p - W, *next = b + bsize(b);
    size_t have = bsize(b), binned = !(*hdr(next) & CINUSE) && next != s->top ? bsize(next) : 0;
    if (!bt_resize_block(&s->heap, b, n)) return NULL;
    size_t now = bsize(b);
    if (now > have && binned) {
        /* it grew into the free block after it: bytes_live counts that whole
         * block before the tail goes back, as it always has (so bytes_peak
         * may hold the moment between) */
        note_live(s, binned);
        s->bytes_live -= have + binned - now;
    } else {
        s->bytes_live -= have;
        note_live(s, now);
    }
    return p;
}

void *sh_memalign(unsigned i, size_t align, size_t n) {
    seg_t *s = &segs[i];
    char *p = sh_malloc(i, n + align + BT_MINBLOCK);
    if (!p) return NULL;
    size_t whole = bsize(p - W);
    char *q = bt_align(&s->heap, p, align, bt_request(n));
    s->bytes_live -= whole - bsize(q - W);
    return q;
}

void sh_get_info(unsigned i, sh_info_t *o) {
    const seg_t *s = &segs[i];
    o->first = s->heap.lo ? (uintptr_t)(s->heap.lo - W) : 0;
    o->end = s->heap.hi ? (uintptr_t)(s->heap.hi + W) : 0;
    o->grows = s->heap.grows;
    o->bytes_live = s->bytes_live;
    o->bytes_peak = s->bytes_peak;
}

/* ---- the checker ---- */

static size_t check_free_bytes;
static void note_free(const bt_heap_t *h, const char *b, size_t sz) {
    (void)h;
    (void)b;
    check_free_bytes += sz;
}

void sh_check(unsigned i) {
    seg_t *s = &segs[i];
    check_free_bytes = 0;
    size_t nfree = bt_check_heap(&s->heap, note_free);
    if (!s->heap.hi) {
        HL_CHECK(s->top == NULL && s->bytes_live == 0);
        return;
    }
    const char *lo = s->heap.lo, *hi = s->heap.hi;
    HL_CHECK(((uintptr_t)(lo - W) & 15) == 0);
    HL_CHECK(sh_bounds[i].lo == (uintptr_t)lo && sh_bounds[i].hi == (uintptr_t)hi);
    if (s->top)
        HL_CHECK(s->top >= lo && s->top < hi && !(*hdr(s->top) & CINUSE) &&
                 s->top + bsize(s->top) == hi);
    else
        HL_CHECK(*hdr(hi) & PINUSE); /* the block before the epilogue is in use */
    HL_CHECK((size_t)(hi - lo) - check_free_bytes == s->bytes_live);
    size_t binned = 0;
    for (unsigned b = 0; b < NBINS; b++) {
        HL_CHECK(!!(s->bitmap[b >> 6] & (1ull << (b & 63))) == (s->bins[b] != NULL));
        for (node_t *f = s->bins[b]; f; f = f->fd) {
            HL_CHECK((char *)f >= lo && (char *)f < hi && (char *)f != s->top);
            HL_CHECK(!(f->hdr & CINUSE) && bin_of(bsize(f)) == b);
            HL_CHECK(!f->fd || f->fd->bk == f);
            HL_CHECK(++binned <= nfree);
        }
    }
    HL_CHECK(binned + (s->top != NULL) == nfree); /* every free block: in a bin, or the top */
}
