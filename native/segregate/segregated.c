/*
 * segregated.c: Seidl and Zorn's segmented allocator (paper 001 §4.2), with
 * the predictor that chooses the segment of every new object (§3.1).
 *
 * Segments
 * --------
 *
 *   segment i (class i: 0 other, 1 SL, 2 HR, 3 not-HR), each its own
 *   emulated sbrk heap (hl_heap_new), so each stays contiguous:
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
 *   DEFAULT is this allocator with one segment (the table says how many).
 *
 * Blocks (each segment is managed alike: vmalloc's best fit, as dlmalloc does it)
 * ------
 *
 *   Each segment is one instance of btag.h's heap (one tag: a header word,
 *   a footer in free blocks, PINUSE), whose base is the segment's first byte
 *   and whose epilogue is its last word:
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
 * Invariants (seg_check): btag.h's (blocks tile the segment, no two free
 * blocks touch, the tags agree), and
 *
 *   top == NULL || (top + size(top) == epilogue && top is free)
 *   {free blocks} == union of bins + {top}
 *   b in bins[i]  =>  bin_of(size(b)) == i;   bit i of bitmap == (bins[i] != NULL)
 *   sum(size(b) for b in use) == bytes_live
 *
 * Prediction
 * ----------
 *
 * A new object (malloc, calloc, memalign family, realloc of NULL) goes to the
 * segment of its predicted class; a realloc keeps its object in the segment
 * it is in (§5.1: a realloc resizes one object).  The class comes from, in
 * order: a site hint for this thread's next allocation (the replayer's,
 * heaplab_site_hint); a prediction made at run time from the caller's stack
 * just before the lock (hl_seg_front, from the shim's HL_FRONT_MALLOC); else
 * "other".  RANDOM draws the class from the allocation's number; DEFAULT has
 * one segment.
 */
#include "hl_alloc.h"
#include "heaplab_site.h"
#include "hl_fmt.h"
#include "seg.h"

#include <stdbool.h>
#include <string.h>

/* ------------------------------------------------------------------------ */
/* Segments: btag.h's heap, one instance each                                */
/* ------------------------------------------------------------------------ */

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
    /* counters for the report */
    uint64_t objects, hinted, runtime, bytes_live, bytes_peak;
} seg_t;

static seg_t segs[HL_SEG_CLASSES];
static unsigned nsegs = 1;
static uint64_t allocations; /* new objects, for RANDOM */

static inline seg_t *seg_of(bt_heap_t *h) {
    return (seg_t *)((char *)h - offsetof(seg_t, heap));
}
/* The segment's first byte and its break (NULL before its first growth). */
static inline char *seg_first(const seg_t *s) {
    return s->heap.lo ? s->heap.lo - W : NULL;
}
static inline char *seg_end(const seg_t *s) {
    return s->heap.hi ? s->heap.hi + W : NULL;
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

static inline void note_live(seg_t *s, size_t add) {
    s->bytes_live += add;
    if (s->bytes_live > s->bytes_peak) s->bytes_peak = s->bytes_live;
}

static void *seg_malloc(seg_t *s, size_t n) {
    char *p = bt_malloc(&s->heap, n);
    if (p) note_live(s, bsize(p - W));
    return p;
}

static inline seg_t *owner(void *p) {
    char *b = (char *)p - W;
    for (unsigned i = 0; i < nsegs; i++)
        if (b >= segs[i].heap.lo && b < segs[i].heap.hi) return &segs[i];
    return NULL;
}

/* ------------------------------------------------------------------------ */
/* Prediction                                                                */
/* ------------------------------------------------------------------------ */

/* The calling thread's prediction for its next new object. */
typedef struct pending {
    uint8_t valid; /* 0 none, 1 from a site hint, 2 from the run-time stack */
    uint8_t cls;
    uint8_t busy; /* inside hl_seg_front: a nested malloc predicts nothing */
    uint64_t size;
} pending_t;
static _Thread_local pending_t pending;

/* Run-time cost and coverage, for the report. */
static uint64_t hints, hint_found, runtime_calls, runtime_found, runtime_frames;

static int find(uint64_t key) {
    const hl_seg_table_t *t = &hl_seg_table;
    size_t lo = 0, hi = t->n;
    while (lo < hi) {
        size_t mid = (lo + hi) >> 1;
        if (t->keys[mid] < key)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < t->n && t->keys[lo] == key ? t->classes[lo] : -1;
}

unsigned hl_seg_lookup(const uint64_t *keys, unsigned n, uint64_t size, uint64_t sp_depth) {
    const hl_seg_table_t *t = &hl_seg_table;
    int c = -1;
    switch (t->predictor) {
    case HL_SEG_STACK:
        if (n) c = find(heaplab_site_hash(keys, n < t->depth ? n : t->depth));
        break;
    case HL_SEG_STACK_SIZE:
        if (n)
            c = find(hl_seg_size_key(heaplab_site_hash(keys, n < t->depth ? n : t->depth), size));
        break;
    case HL_SEG_PATH:
        for (unsigned i = 0; i < n && c < 0; i++)
            c = find(keys[i]);
        break;
    case HL_SEG_SP:
        if (sp_depth) c = find(hl_seg_sp_key(sp_depth));
        break;
    default:
        break;
    }
    return c < 0 ? HL_SEG_OTHER : (unsigned)c;
}

/* The last run-time lookup of this thread, when HEAPLAB_SEG_DEBUG is set
 * (for the tests: heaplab_seg_last). */
static int debug_on;
static _Thread_local struct {
    unsigned n, cls;
    uint64_t sp;
    uint64_t keys[16];
} last;

/* Does the predictor look at the stack at all? */
static inline bool wants_stack(void) {
    unsigned p = hl_seg_table.predictor;
    return nsegs > 1 && p != HL_SEG_DEFAULT && p != HL_SEG_RANDOM;
}

static int runtime_on = 1;

void hl_seg_front(size_t size) {
    pending_t *pd = &pending;
    if (pd->valid == 1 || pd->busy || !runtime_on || !wants_stack()) return;
    pd->busy = 1;
    uint64_t keys[64], sp = 0;
    unsigned max = hl_seg_table.depth ? hl_seg_table.depth : 8;
    if (max > 64) max = 64;
    unsigned n = hl_seg_os_frames(keys, max, &sp);
    pd->cls = (uint8_t)hl_seg_lookup(keys, n, size, sp);
    pd->size = size;
    if (debug_on) {
        last.n = n;
        last.cls = pd->cls;
        last.sp = sp;
        memcpy(last.keys, keys, (n < 16 ? n : 16) * sizeof keys[0]);
    }
    pd->valid = 2;
    pd->busy = 0;
    /* counted without the lock: a thread's counts are its own, and the report
     * is read at exit (a lost increment under a race only blurs the report) */
    __atomic_fetch_add(&runtime_calls, 1, __ATOMIC_RELAXED);
    __atomic_fetch_add(&runtime_frames, n, __ATOMIC_RELAXED);
    if (pd->cls != HL_SEG_OTHER) __atomic_fetch_add(&runtime_found, 1, __ATOMIC_RELAXED);
}

/* The segment of a new object (under the lock). */
static inline unsigned choose(bool *hinted, bool *runtime) {
    pending_t *pd = &pending;
    unsigned c = HL_SEG_OTHER;
    *hinted = pd->valid == 1;
    *runtime = pd->valid == 2;
    if (nsegs == 1) {
        c = 0;
    } else if (hl_seg_table.predictor == HL_SEG_RANDOM) {
        c = hl_seg_random(hl_seg_table.seed, allocations);
    } else if (pd->valid) {
        c = pd->cls;
    }
    pd->valid = 0;
    allocations++;
    return c < nsegs ? c : HL_SEG_OTHER;
}

/* The depth d from the key of the frame (no module, offset d):
 * key = fnv1a64("") ^ d * φ, and φ is odd, so d = (key ^ fnv1a64("")) * φ⁻¹ mod 2^64. */
static uint64_t seg_sp_of_key(uint64_t key) {
    uint64_t inv = 1;
    for (int i = 0; i < 6; i++) /* Newton's iteration doubles the good bits */
        inv *= 2 - 0x9E3779B97F4A7C15ull * inv;
    uint64_t d = (key ^ 0xcbf29ce484222325ull) * inv;
    return d < ((uint64_t)1 << 32) ? d : 0; /* a real frame's key gives garbage: no depth */
}

static void segregated_site_hint(const heaplab_site_t *site) {
    uint64_t sp = 0;
    /* The site hint has no stack pointer.  For SP, heaplab segregate replays a
     * copy of the test trace whose allocations carry, as their only frame, a
     * frame in no module at offset = the recorded depth (seg_sp_of_key): the
     * key heaplab_frame_key("", 0, depth) is turned back into the depth. */
    if (hl_seg_table.predictor == HL_SEG_SP && site->nframes == 1)
        sp = seg_sp_of_key(site->frame_keys[0]);
    pending_t *pd = &pending;
    pd->cls = wants_stack()
                  ? (uint8_t)hl_seg_lookup(site->frame_keys, site->nframes, site->size, sp)
                  : HL_SEG_OTHER;
    pd->size = site->size;
    pd->valid = 1;
    hints++;
    if (pd->cls != HL_SEG_OTHER) hint_found++;
}

/* ------------------------------------------------------------------------ */
/* The hl_alloc_t                                                            */
/* ------------------------------------------------------------------------ */

static const char *seg_names[HL_SEG_CLASSES] = {"segregated-other", "segregated-SL",
                                                "segregated-HR", "segregated-nonHR"};

static int segregated_init(void) {
    if (hl_seg_table.version != HL_SEG_TABLE_VERSION) return -1;
    nsegs = hl_seg_table.nsegments == 4 ? 4 : 1;
    for (unsigned i = 0; i < nsegs; i++) {
        hl_heap_t *ph =
            i == 0 && nsegs == 1 ? hl_heap_new("segregated") : hl_heap_new(seg_names[i]);
        if (!ph) return -1;
        bt_init(&segs[i].heap, ph, BT_MINBLOCK, BT_MINBLOCK, SEG_STEP);
        segs[i].index = i;
    }
    runtime_on = hl_tunable("HEAPLAB_SEG_RUNTIME", 1) != 0;
    debug_on = hl_tunable("HEAPLAB_SEG_DEBUG", 0) != 0;
    return 0;
}

static void *segregated_malloc(size_t size) {
    bool h, r;
#ifdef HL_SEG_NO_FRONT
    hl_seg_front(size); /* a shim without the front-end hook: predict under the lock */
#endif
    unsigned i = choose(&h, &r);
    void *p = seg_malloc(&segs[i], size);
    if (p) {
        segs[i].objects++;
        segs[i].hinted += h;
        segs[i].runtime += r;
    }
    return p;
}

static void segregated_free(void *p) {
    seg_t *s = owner(p);
    if (HL_UNLIKELY(!s)) hl_fatal("free of %p, which is in no segment", p);
    char *b = (char *)p - W;
    if (HL_UNLIKELY(!(*hdr(b) & CINUSE)))
        hl_fatal("free of %p, which is not in use (a double free?)", p);
    size_t sz = bsize(b);
    s->bytes_live -= sz;
    bt_release(&s->heap, b, sz); /* (its header keeps CINUSE if it is merged away, as in dlmalloc) */
}

static size_t segregated_usable_size(void *p) {
    return bt_usable((char *)p - W);
}

/* In place (btag.h: shrink, or grow into the free block after, the top
 * included), else moved within its segment. */
static void *segregated_realloc(void *p, size_t size) {
    seg_t *s = owner(p);
    if (HL_UNLIKELY(!s)) hl_fatal("realloc of %p, which is in no segment", p);
    pending.valid = 0; /* the object keeps its segment: a hint for it is spent */
    char *b = (char *)p - W, *next = b + bsize(b);
    size_t have = bsize(b), binned = !(*hdr(next) & CINUSE) && next != s->top ? bsize(next) : 0;
    if (bt_resize_block(&s->heap, b, size)) { /* owner() has checked p */
        size_t now = bsize(b);
        if (now > have && binned) {
            /* it grew into the free block after it: bytes_live counts that
             * whole block before the tail goes back, as it always has (so
             * bytes_peak may hold the moment between) */
            note_live(s, binned);
            s->bytes_live -= have + binned - now;
        } else {
            s->bytes_live -= have;
            note_live(s, now);
        }
        return p;
    }
    void *q = seg_malloc(s, size);
    if (!q) return NULL;
    memcpy(q, p, have - W);
    s->bytes_live -= have;
    bt_release(&s->heap, b, have);
    return q;
}

static void *segregated_memalign(size_t align, size_t size) {
    bool h, r;
    unsigned i = choose(&h, &r);
    seg_t *s = &segs[i];
    char *p = seg_malloc(s, size + align + BT_MINBLOCK);
    if (!p) return NULL;
    s->objects++;
    s->hinted += h;
    s->runtime += r;
    size_t whole = bsize(p - W);
    char *q = bt_align(&s->heap, p, align, bt_request(size));
    s->bytes_live -= whole - bsize(q - W);
    return q;
}

/* ------------------------------------------------------------------------ */
/* The checker                                                               */
/* ------------------------------------------------------------------------ */

static size_t check_free_bytes;
static void note_free(const bt_heap_t *h, const char *b, size_t sz) {
    check_free_bytes += sz;
}

static void seg_check_one(seg_t *s) {
    check_free_bytes = 0;
    size_t nfree = bt_check_heap(&s->heap, note_free);
    if (!s->heap.hi) {
        HL_CHECK(s->top == NULL && s->bytes_live == 0);
        return;
    }
    const char *lo = s->heap.lo, *hi = s->heap.hi;
    HL_CHECK(((uintptr_t)seg_first(s) & 15) == 0);
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

static void segregated_check(void) {
    for (unsigned i = 0; i < nsegs; i++)
        seg_check_one(&segs[i]);
    /* segments do not overlap */
    for (unsigned i = 0; i < nsegs; i++)
        for (unsigned j = i + 1; j < nsegs; j++)
            if (segs[i].heap.hi && segs[j].heap.hi)
                HL_CHECK(seg_end(&segs[i]) <= seg_first(&segs[j]) ||
                         seg_end(&segs[j]) <= seg_first(&segs[i]));
}

/* ------------------------------------------------------------------------ */
/* The report (seg_os.c writes it at exit when HEAPLAB_SEG_REPORT is set)    */
/* ------------------------------------------------------------------------ */

size_t hl_seg_report(char *b, size_t cap) {
    static const char *cls[HL_SEG_CLASSES] = {"other", "SL", "HR", "nonHR"};
    hl_str_t o = hl_str(b, cap);
    hl_str_puts(&o, "{\"predictor\":\"");
    hl_str_puts(&o, hl_seg_table.name ? hl_seg_table.name : "?");
    hl_str_puts(&o, "\",\"entries\":");
    hl_str_u(&o, hl_seg_table.n);
    hl_str_puts(&o, ",\"segments\":[");
    for (unsigned i = 0; i < nsegs; i++) {
        seg_t *s = &segs[i];
        hl_str_puts(&o, i ? ",{\"class\":\"" : "{\"class\":\"");
        hl_str_puts(&o, nsegs == 1 ? "all" : cls[i]);
        hl_str_puts(&o, "\",\"first\":\"");
        hl_str_x(&o, (uintptr_t)seg_first(s));
        hl_str_puts(&o, "\",\"end\":\"");
        hl_str_x(&o, (uintptr_t)seg_end(s));
        hl_str_puts(&o, "\",\"objects\":");
        hl_str_u(&o, s->objects);
        hl_str_puts(&o, ",\"hinted\":");
        hl_str_u(&o, s->hinted);
        hl_str_puts(&o, ",\"runtime\":");
        hl_str_u(&o, s->runtime);
        hl_str_puts(&o, ",\"bytes_live\":");
        hl_str_u(&o, s->bytes_live);
        hl_str_puts(&o, ",\"bytes_peak\":");
        hl_str_u(&o, s->bytes_peak);
        hl_str_puts(&o, ",\"grows\":");
        hl_str_u(&o, s->heap.grows);
        hl_str_c(&o, '}');
    }
    hl_str_puts(&o, "],\"hints\":");
    hl_str_u(&o, hints);
    hl_str_puts(&o, ",\"hints_predicted\":");
    hl_str_u(&o, hint_found);
    hl_str_puts(&o, ",\"runtime_lookups\":");
    hl_str_u(&o, runtime_calls);
    hl_str_puts(&o, ",\"runtime_predicted\":");
    hl_str_u(&o, runtime_found);
    hl_str_puts(&o, ",\"runtime_frames\":");
    hl_str_u(&o, runtime_frames);
    hl_str_puts(&o, "}\n");
    return o.len;
}

/* ------------------------------------------------------------------------ */
/* Exports for tests and tools (found with dlsym; absent elsewhere)          */
/* ------------------------------------------------------------------------ */

#define SEG_EXPORT __attribute__((visibility("default")))

/* The segments: first byte and break of each; returns how many there are. */
SEG_EXPORT unsigned heaplab_seg_segments(uintptr_t *first, uintptr_t *end, uint64_t *grows,
                                         unsigned max) {
    for (unsigned i = 0; i < nsegs && i < max; i++) {
        first[i] = (uintptr_t)seg_first(&segs[i]);
        end[i] = (uintptr_t)seg_end(&segs[i]);
        grows[i] = segs[i].heap.grows;
    }
    return nsegs;
}

/* The segment (class) holding p, or -1. */
SEG_EXPORT int heaplab_seg_class_of(const void *p) {
    for (unsigned i = 0; i < nsegs; i++)
        if (segs[i].heap.hi && (const char *)p >= seg_first(&segs[i]) &&
            (const char *)p < seg_end(&segs[i]))
            return (int)i;
    return -1;
}

/* This thread's last run-time lookup (HEAPLAB_SEG_DEBUG=1): its keys, its
 * class and its stack depth; returns the number of keys (-1: debug off). */
SEG_EXPORT int heaplab_seg_last(uint64_t *keys, unsigned max, unsigned *cls, uint64_t *sp_depth) {
    if (!debug_on) return -1;
    for (unsigned i = 0; i < last.n && i < max && i < 16; i++)
        keys[i] = last.keys[i];
    *cls = last.cls;
    *sp_depth = last.sp;
    return (int)last.n;
}

/* The predictor table: its name and entries. */
SEG_EXPORT const char *heaplab_seg_predictor(uint64_t *entries) {
    *entries = hl_seg_table.n;
    return hl_seg_table.name;
}

const hl_alloc_t hl_alloc_segregated = {
    .info = {"segregated",
             "Seidl and Zorn's segmented allocator: best fit in up to four contiguous segments "
             "grown in 2 MB steps "
             "and 64 KB apart, the segment chosen by a trained predictor",
             "001 §3, §4.2"},
    .init = segregated_init,
    .malloc = segregated_malloc,
    .free = segregated_free,
    .usable_size = segregated_usable_size,
    .realloc = segregated_realloc,
    .memalign = segregated_memalign,
    .check = segregated_check,
    .site_hint = segregated_site_hint,
};
