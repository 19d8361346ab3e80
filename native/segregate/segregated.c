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
 *   heap base          first chunk (≡ i × 64 KB mod 2 MB)                    brk
 *   |<-- skipped -->|[chunk][chunk][free][chunk] ... [top chunk ...........]|
 *                    grown 2 MB at a time (SEG_STEP), never given back
 *
 *   §4.2: "each segment started with two megabytes of space, and if that
 *   space was exhausted, the heaps were grown in two megabyte chunks", and
 *   "we offset each segment 64 kilobytes from the start of the previous
 *   heap", so that the first lines of the segments do not meet in caches
 *   larger than 64 KB.  The platform places each heap anywhere, so the first
 *   growth skips up to 2 MB of address space (never touched, never
 *   resident) to put segment i's first chunk at i × 64 KB modulo 2 MB.
 *   DEFAULT is this allocator with one segment (the table says how many).
 *
 * Chunks (each segment is managed alike: vmalloc's best fit, as dlmalloc does it)
 * ------
 *
 *     chunk ─▶ +----------------------+
 *              | prev_foot            |  size of the previous chunk, valid only when it is free
 *              | head: size|PINUSE|CINUSE
 *     mem   ─▶ +----------------------+  16-aligned
 *              | payload ...          |  free: fd, bk (the bin's list)
 *              |                      |
 *     next  ─▶ | (next's prev_foot)   |  the last 8 payload bytes of an in-use chunk
 *
 *   sizes are multiples of 16, at least 32; an in-use chunk costs 8 bytes.
 *   Bins: 62 exact bins for 32..1008 bytes, then four bins per power of two;
 *   a bitmap marks the bins that hold chunks.  A request takes the exact bin's
 *   first chunk, or the best fit of the first bin that has one, or the top.
 *
 * Invariants (checked by seg_check): chunks tile [first, top) exactly; no two
 * free chunks touch (frees coalesce at once) and none touches the top; a
 * chunk's PINUSE equals whether the one before it is in use; every free chunk
 * is in the bin of its size and every bin's bit is set iff it holds a chunk;
 * the top chunk is followed by the segment's break, and at least 16 bytes
 * long (room for its header).
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
#include "seg.h"

#include <stdbool.h>
#include <string.h>

/* ------------------------------------------------------------------------ */
/* Chunks                                                                    */
/* ------------------------------------------------------------------------ */

typedef struct chunk {
    size_t prev_foot;
    size_t head;
    struct chunk *fd, *bk; /* free chunks only */
} chunk_t;

#define PINUSE     ((size_t)1)
#define CINUSE     ((size_t)2)
#define FLAGS      ((size_t)7)
#define MIN_CHUNK  ((size_t)32)
#define TOP_MIN    ((size_t)16)
#define SEG_STEP   ((size_t)2 << 20)  /* growth: 2 MB (§4.2) */
#define SEG_OFFSET ((size_t)64 << 10) /* each segment 64 KB on from the one before (§4.2) */
#define NSMALL     62                 /* exact bins: 32 .. 1008 */
#define NBINS      (NSMALL + 4 * 31)
#define NWORDS     ((NBINS + 63) / 64)

static inline size_t csize(const chunk_t *c) {
    return c->head & ~FLAGS;
}
static inline chunk_t *at(void *p, size_t off) {
    return (chunk_t *)((char *)p + off);
}
static inline chunk_t *next_chunk(chunk_t *c) {
    return at(c, csize(c));
}
static inline void *mem(chunk_t *c) {
    return (char *)c + 16;
}
static inline chunk_t *chunk_of(void *p) {
    return (chunk_t *)((char *)p - 16);
}
static inline size_t request(size_t n) {
    size_t s = HL_ALIGN_UP(n + 8, 16);
    return s < MIN_CHUNK ? MIN_CHUNK : s;
}

static inline unsigned bin_of(size_t s) {
    if (s < 1024) return (unsigned)(s >> 4) - 2;
    unsigned lg = 63u - (unsigned)__builtin_clzll(s);
    unsigned idx = NSMALL + (lg - 10) * 4 + (unsigned)((s >> (lg - 2)) & 3);
    return idx < NBINS ? idx : NBINS - 1;
}

/* ------------------------------------------------------------------------ */
/* Segments                                                                  */
/* ------------------------------------------------------------------------ */

typedef struct seg {
    hl_heap_t *heap;
    char *first; /* first chunk; NULL before the first growth */
    char *end;   /* the break */
    chunk_t *top;
    size_t top_size;
    chunk_t *bins[NBINS];
    uint64_t bitmap[NWORDS];
    /* counters for the report */
    uint64_t objects, hinted, runtime, bytes_live, bytes_peak, grows;
} seg_t;

static seg_t segs[HL_SEG_CLASSES];
static unsigned nsegs = 1;
static uint64_t allocations; /* new objects, for RANDOM */

static inline void bin_insert(seg_t *s, chunk_t *c) {
    unsigned b = bin_of(csize(c));
    c->bk = NULL;
    c->fd = s->bins[b];
    if (c->fd) c->fd->bk = c;
    s->bins[b] = c;
    s->bitmap[b >> 6] |= 1ull << (b & 63);
}

static inline void bin_remove(seg_t *s, chunk_t *c) {
    unsigned b = bin_of(csize(c));
    if (c->bk)
        c->bk->fd = c->fd;
    else
        s->bins[b] = c->fd;
    if (c->fd) c->fd->bk = c->bk;
    if (!s->bins[b]) s->bitmap[b >> 6] &= ~(1ull << (b & 63));
}

/* The first bin at or after b that holds a chunk, or NBINS. */
static inline unsigned bin_next(const seg_t *s, unsigned b) {
    for (unsigned w = b >> 6; w < NWORDS; w++) {
        uint64_t m = s->bitmap[w];
        if (w == b >> 6) m &= ~0ull << (b & 63);
        if (m) return w * 64 + (unsigned)__builtin_ctzll(m);
    }
    return NBINS;
}

/* Grows the segment so that its top holds at least `need` bytes plus its
 * header.  The first growth places the first chunk (see the drawing). */
static bool seg_grow(seg_t *s, unsigned index, size_t need) {
    bool first = !s->first;
    if (first) {
        char *b = hl_heap_sbrk(s->heap, 0); /* reserves the region: its base */
        if (!b) return false;
        size_t want = (index * SEG_OFFSET) % SEG_STEP;
        size_t skip = (want - ((uintptr_t)b % SEG_STEP)) & (SEG_STEP - 1);
        if (skip && !hl_heap_sbrk(s->heap, (intptr_t)skip)) return false;
        s->first = s->end = b + skip;
        s->top = (chunk_t *)s->first;
        s->top_size = 0;
    }
    if (s->top_size >= need + TOP_MIN) return true;
    size_t grow = HL_ALIGN_UP(need + TOP_MIN - s->top_size, SEG_STEP);
    char *old = hl_heap_sbrk(s->heap, (intptr_t)grow);
    if (!old) return false;
    HL_CHECK(old == s->end);
    s->end += grow;
    s->top_size += grow;
    s->top->head = s->top_size | (first ? PINUSE : (s->top->head & PINUSE));
    s->grows++;
    return true;
}

/* Marks c (free, not binned) in use with size cs, splitting off the rest. */
static void *take(seg_t *s, chunk_t *c, size_t cs) {
    size_t size = csize(c), pin = c->head & PINUSE;
    if (size - cs >= MIN_CHUNK) {
        chunk_t *r = at(c, cs);
        r->head = (size - cs) | PINUSE;
        next_chunk(r)->prev_foot = size - cs;
        bin_insert(s, r);
        c->head = cs | pin | CINUSE;
    } else {
        c->head = size | pin | CINUSE;
        next_chunk(c)->head |= PINUSE;
    }
    s->bytes_live += csize(c);
    if (s->bytes_live > s->bytes_peak) s->bytes_peak = s->bytes_live;
    return mem(c);
}

static void *seg_malloc(seg_t *s, unsigned index, size_t n) {
    size_t cs = request(n);
    unsigned b = bin_of(cs);
    if (b < NSMALL && s->bins[b]) { /* the exact bin: any chunk fits */
        chunk_t *c = s->bins[b];
        bin_remove(s, c);
        return take(s, c, cs);
    }
    for (b = bin_next(s, b); b < NBINS; b = bin_next(s, b + 1)) {
        if (b < NSMALL) { /* one size per exact bin, larger than asked: take the first */
            chunk_t *c = s->bins[b];
            bin_remove(s, c);
            return take(s, c, cs);
        }
        chunk_t *best = NULL;
        for (chunk_t *c = s->bins[b]; c; c = c->fd)
            if (csize(c) >= cs && (!best || csize(c) < csize(best))) {
                best = c;
                if (csize(c) == cs) break;
            }
        if (best) {
            bin_remove(s, best);
            return take(s, best, cs);
        }
    }
    if (s->top_size < cs + TOP_MIN && !seg_grow(s, index, cs)) return NULL;
    chunk_t *c = s->top;
    size_t pin = c->head & PINUSE;
    s->top = at(c, cs);
    s->top_size -= cs;
    s->top->head = s->top_size | PINUSE;
    c->head = cs | pin | CINUSE;
    s->bytes_live += cs;
    if (s->bytes_live > s->bytes_peak) s->bytes_peak = s->bytes_live;
    return mem(c);
}

/* Frees an in-use chunk: coalesces with free neighbours and the top. */
static void seg_free_chunk(seg_t *s, chunk_t *c) {
    size_t size = csize(c);
    s->bytes_live -= size;
    if (!(c->head & PINUSE)) {
        chunk_t *p = at(c, -(ptrdiff_t)c->prev_foot);
        bin_remove(s, p);
        size += csize(p);
        c = p;
    }
    chunk_t *n = at(c, size);
    if (n == s->top) {
        s->top = c;
        s->top_size += size;
        c->head = s->top_size | (c->head & PINUSE);
        return;
    }
    if (!(n->head & CINUSE)) {
        bin_remove(s, n);
        size += csize(n);
        n = at(c, size);
    }
    c->head = size | (c->head & PINUSE);
    n->prev_foot = size;
    n->head &= ~PINUSE;
    bin_insert(s, c);
}

/* Gives back the part of in-use chunk c beyond cs bytes, when it is a chunk. */
static void trim(seg_t *s, chunk_t *c, size_t cs) {
    size_t size = csize(c);
    if (size - cs < MIN_CHUNK) return;
    chunk_t *r = at(c, cs);
    c->head = cs | (c->head & PINUSE) | CINUSE;
    r->head = (size - cs) | PINUSE | CINUSE;
    seg_free_chunk(s, r);
}

static inline seg_t *owner(void *p) {
    for (unsigned i = 0; i < nsegs; i++)
        if ((char *)p >= segs[i].first && (char *)p < segs[i].end) return &segs[i];
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
        segs[i].heap = i == 0 && nsegs == 1 ? hl_heap_new("segregated") : hl_heap_new(seg_names[i]);
        if (!segs[i].heap) return -1;
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
    void *p = seg_malloc(&segs[i], i, size);
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
    chunk_t *c = chunk_of(p);
    if (HL_UNLIKELY(!(c->head & CINUSE)))
        hl_fatal("free of %p, which is not in use (a double free?)", p);
    seg_free_chunk(s, c);
}

static size_t segregated_usable_size(void *p) {
    return csize(chunk_of(p)) - 8;
}

static void *segregated_realloc(void *p, size_t size) {
    seg_t *s = owner(p);
    if (HL_UNLIKELY(!s)) hl_fatal("realloc of %p, which is in no segment", p);
    pending.valid = 0; /* the object keeps its segment: a hint for it is spent */
    chunk_t *c = chunk_of(p);
    size_t cs = request(size), have = csize(c);
    if (cs <= have) {
        trim(s, c, cs);
        return p;
    }
    chunk_t *n = next_chunk(c);
    if (n == s->top && have + s->top_size >= cs + TOP_MIN) {
        s->top_size -= cs - have;
        s->top = at(c, cs);
        s->top->head = s->top_size | PINUSE;
        c->head = cs | (c->head & PINUSE) | CINUSE;
        s->bytes_live += cs - have;
        if (s->bytes_live > s->bytes_peak) s->bytes_peak = s->bytes_live;
        return p;
    }
    if (n != s->top && !(n->head & CINUSE) && have + csize(n) >= cs) {
        bin_remove(s, n);
        size_t total = have + csize(n);
        c->head = total | (c->head & PINUSE) | CINUSE;
        next_chunk(c)->head |= PINUSE;
        s->bytes_live += csize(n);
        if (s->bytes_live > s->bytes_peak) s->bytes_peak = s->bytes_live;
        trim(s, c, cs);
        return p;
    }
    unsigned i = (unsigned)(s - segs);
    void *q = seg_malloc(s, i, size);
    if (!q) return NULL;
    memcpy(q, p, have - 8);
    seg_free_chunk(s, c);
    return q;
}

static void *segregated_memalign(size_t align, size_t size) {
    bool h, r;
    unsigned i = choose(&h, &r);
    seg_t *s = &segs[i];
    char *p = seg_malloc(s, i, size + align + MIN_CHUNK);
    if (!p) return NULL;
    s->objects++;
    s->hinted += h;
    s->runtime += r;
    chunk_t *c = chunk_of(p);
    char *a = (char *)HL_ALIGN_UP((uintptr_t)p, align);
    if (a != p) {
        while ((size_t)(a - p) < MIN_CHUNK)
            a += align;
        /* the leading part becomes a chunk of its own and is freed */
        size_t lead = (size_t)(a - p), total = csize(c);
        chunk_t *nc = chunk_of(a);
        nc->head = (total - lead) | CINUSE; /* its predecessor (the lead) is in use until freed */
        c->head = lead | (c->head & PINUSE) | CINUSE;
        next_chunk(nc)->head |= PINUSE;
        nc->head |= PINUSE;
        seg_free_chunk(s, c);
        c = nc;
    }
    trim(s, c, request(size));
    return mem(c);
}

/* ------------------------------------------------------------------------ */
/* The checker                                                               */
/* ------------------------------------------------------------------------ */

static void seg_check_one(seg_t *s) {
    if (!s->first) return;
    HL_CHECK(((uintptr_t)s->first & 15) == 0);
    HL_CHECK(s->top_size >= TOP_MIN);
    HL_CHECK((char *)s->top + s->top_size == s->end);
    HL_CHECK(csize(s->top) == s->top_size);
    size_t nfree = 0, live = 0;
    bool prev_inuse = true;
    chunk_t *c = (chunk_t *)s->first;
    while (c != s->top) {
        HL_CHECK((char *)c < s->end);
        size_t size = csize(c);
        HL_CHECK(size >= MIN_CHUNK && (size & 15) == 0);
        HL_CHECK(!!(c->head & PINUSE) == prev_inuse);
        bool inuse = c->head & CINUSE;
        if (!inuse) {
            HL_CHECK(prev_inuse); /* coalesced */
            HL_CHECK(next_chunk(c)->prev_foot == size);
            HL_CHECK(next_chunk(c) != s->top); /* merged into the top */
            nfree++;
        } else {
            live += size;
        }
        prev_inuse = inuse;
        c = next_chunk(c);
    }
    HL_CHECK(!!(s->top->head & PINUSE) == prev_inuse);
    HL_CHECK(prev_inuse);
    HL_CHECK(live == s->bytes_live);
    size_t binned = 0;
    for (unsigned b = 0; b < NBINS; b++) {
        HL_CHECK(!!(s->bitmap[b >> 6] & (1ull << (b & 63))) == (s->bins[b] != NULL));
        for (chunk_t *f = s->bins[b]; f; f = f->fd) {
            HL_CHECK(!(f->head & CINUSE) && bin_of(csize(f)) == b);
            HL_CHECK(!f->fd || f->fd->bk == f);
            HL_CHECK((char *)f >= s->first && (char *)f < (char *)s->top);
            binned++;
        }
    }
    HL_CHECK(binned == nfree);
}

static void segregated_check(void) {
    for (unsigned i = 0; i < nsegs; i++)
        seg_check_one(&segs[i]);
    /* segments do not overlap */
    for (unsigned i = 0; i < nsegs; i++)
        for (unsigned j = i + 1; j < nsegs; j++)
            if (segs[i].first && segs[j].first)
                HL_CHECK(segs[i].end <= segs[j].first || segs[j].end <= segs[i].first);
}

/* ------------------------------------------------------------------------ */
/* The report (seg_os.c writes it at exit when HEAPLAB_SEG_REPORT is set)    */
/* ------------------------------------------------------------------------ */

static size_t put(char *b, size_t cap, size_t at_, const char *s) {
    size_t n = strlen(s);
    if (at_ + n < cap) memcpy(b + at_, s, n);
    return at_ + n;
}

static size_t put_u(char *b, size_t cap, size_t at_, uint64_t v) {
    char t[24];
    int i = 23;
    t[i] = 0;
    do {
        t[--i] = (char)('0' + v % 10);
        v /= 10;
    } while (v);
    return put(b, cap, at_, t + i);
}

static size_t put_x(char *b, size_t cap, size_t at_, uint64_t v) {
    char t[24];
    int i = 23;
    t[i] = 0;
    do {
        t[--i] = "0123456789abcdef"[v & 15];
        v >>= 4;
    } while (v);
    t[--i] = 'x';
    t[--i] = '0';
    return put(b, cap, at_, t + i);
}

size_t hl_seg_report(char *b, size_t cap) {
    static const char *cls[HL_SEG_CLASSES] = {"other", "SL", "HR", "nonHR"};
    size_t n = 0;
    n = put(b, cap, n, "{\"predictor\":\"");
    n = put(b, cap, n, hl_seg_table.name ? hl_seg_table.name : "?");
    n = put(b, cap, n, "\",\"entries\":");
    n = put_u(b, cap, n, hl_seg_table.n);
    n = put(b, cap, n, ",\"segments\":[");
    for (unsigned i = 0; i < nsegs; i++) {
        seg_t *s = &segs[i];
        n = put(b, cap, n, i ? ",{\"class\":\"" : "{\"class\":\"");
        n = put(b, cap, n, nsegs == 1 ? "all" : cls[i]);
        n = put(b, cap, n, "\",\"first\":\"");
        n = put_x(b, cap, n, (uintptr_t)s->first);
        n = put(b, cap, n, "\",\"end\":\"");
        n = put_x(b, cap, n, (uintptr_t)s->end);
        n = put(b, cap, n, "\",\"objects\":");
        n = put_u(b, cap, n, s->objects);
        n = put(b, cap, n, ",\"hinted\":");
        n = put_u(b, cap, n, s->hinted);
        n = put(b, cap, n, ",\"runtime\":");
        n = put_u(b, cap, n, s->runtime);
        n = put(b, cap, n, ",\"bytes_live\":");
        n = put_u(b, cap, n, s->bytes_live);
        n = put(b, cap, n, ",\"bytes_peak\":");
        n = put_u(b, cap, n, s->bytes_peak);
        n = put(b, cap, n, ",\"grows\":");
        n = put_u(b, cap, n, s->grows);
        n = put(b, cap, n, "}");
    }
    n = put(b, cap, n, "],\"hints\":");
    n = put_u(b, cap, n, hints);
    n = put(b, cap, n, ",\"hints_predicted\":");
    n = put_u(b, cap, n, hint_found);
    n = put(b, cap, n, ",\"runtime_lookups\":");
    n = put_u(b, cap, n, runtime_calls);
    n = put(b, cap, n, ",\"runtime_predicted\":");
    n = put_u(b, cap, n, runtime_found);
    n = put(b, cap, n, ",\"runtime_frames\":");
    n = put_u(b, cap, n, runtime_frames);
    n = put(b, cap, n, "}\n");
    return n;
}

/* ------------------------------------------------------------------------ */
/* Exports for tests and tools (found with dlsym; absent elsewhere)          */
/* ------------------------------------------------------------------------ */

#define SEG_EXPORT __attribute__((visibility("default")))

/* The segments: first chunk and break of each; returns how many there are. */
SEG_EXPORT unsigned heaplab_seg_segments(uintptr_t *first, uintptr_t *end, uint64_t *grows,
                                         unsigned max) {
    for (unsigned i = 0; i < nsegs && i < max; i++) {
        first[i] = (uintptr_t)segs[i].first;
        end[i] = (uintptr_t)segs[i].end;
        grows[i] = segs[i].grows;
    }
    return nsegs;
}

/* The segment (class) holding p, or -1. */
SEG_EXPORT int heaplab_seg_class_of(const void *p) {
    for (unsigned i = 0; i < nsegs; i++)
        if ((const char *)p >= segs[i].first && (const char *)p < segs[i].end) return (int)i;
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
