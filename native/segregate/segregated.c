/*
 * segregated.c: Seidl and Zorn's segmented allocator (paper 001 §4.2), with
 * the predictor that chooses the segment of every new object (§3.1), each
 * segment an instance of the synthesized allocators' fast core.
 *
 *   new object ──▶ segment s (the front end: seg_front.h, seg_ident.c; or a site hint)
 *                     │
 *                     ▼
 *   segment s  ═  fast core s (native/alloc/fastcore.h, one sf_core_t per segment):
 *                 requests of 1 .. 32 KiB, a class for every 16 bytes to 512 and
 *                 four per doubling above; per thread, an 8 GiB slot of 128 MiB
 *                 spans, one per class, carved in slabs; lock-free for the
 *                 owning thread
 *              +  best-fit heap s (seg_heap.h, seg_bestfit.c): larger requests and
 *                 the memalign family, under the lock: one contiguous heap grown
 *                 in 2 MB steps, its first byte at s × 64 KB modulo 2 MB
 *
 *   four segments (other, SL, HR, not-HR); DEFAULT has one, the same allocator
 *
 *   segment 0 (other)   slots ▒▒▒ 8 GiB each, apart    best fit ▓▓▓▓ from 0 KB mod 2 MB
 *   segment 1 (SL)      slots ▒▒▒                      best fit ▓▓ from 64 KB mod 2 MB
 *   segment 2 (HR)      slots ▒▒▒                      best fit ▓ from 128 KB mod 2 MB
 *   segment 3 (not-HR)  slots ▒▒▒                      best fit ▓▓ from 192 KB mod 2 MB
 *
 * What changed from §4.2's layout: a segment is no longer one contiguous
 * heap but its slots (one per thread that allocates in it, and the shared
 * slot 0) and its best-fit heap; within a slot each class has its own span.
 * What stays: no page holds blocks of two segments (segments never share a
 * slot, a span or a heap), each segment's objects of one size are packed
 * together in allocation order, and DEFAULT is one segment of the very same
 * allocator (same classes, slabs, code), so a difference between DEFAULT
 * and a predictor is the segregation's.  The 64 KB offsets apply to the
 * best-fit heaps; spans start at 128 MiB boundaries, in DEFAULT as in every
 * segment.
 *
 * This file is the composition under the shim's lock: the segment of a new
 * object, realloc within its segment, free to the core or heap that holds
 * the block, the site hint, the checker, the report, and the exports tools
 * find with dlsym.
 *
 * Prediction: a new object (malloc, calloc, memalign family, realloc of NULL)
 * goes to the segment of its predicted class; a realloc keeps its object in
 * the segment it is in (§5.1: a realloc resizes one object).  On the locked
 * path the class comes from, in order: the front end's identification
 * (pending in the thread's block); a site hint not yet spent (the memalign
 * family after a hint); else "other".  RANDOM draws the class from the
 * allocation's number; DEFAULT has one segment.
 */
#include "hl_internal.h"
#include "heaplab_site.h"
#include "hl_fmt.h"
#include "seg.h"
#include "seg_heap.h"
#include "seg_thread.h"

#include <stdbool.h>
#include <string.h>
#include <unistd.h>

static unsigned nsegs = 1;

/* Read without the lock by the front end (seg_thread.h). */
unsigned hl_seg_mode;
uint64_t hl_seg_allocations;
int hl_seg_debug;
int hl_seg_caching;
int hl_seg_by_size;
int hl_seg_front_on;

sf_core_t hl_seg_cores[HL_SEG_CLASSES];

/* Objects that took the locked path, per segment (the fast cores count
 * theirs); those a hint placed; those whose class nobody predicted (the
 * memalign family). */
static uint64_t objects[HL_SEG_CLASSES], hinted_locked[HL_SEG_CLASSES],
    unpredicted[HL_SEG_CLASSES];

/* ------------------------------------------------------------------------ */
/* The fast core's layout (seg_thread.h draws it)                            */
/* ------------------------------------------------------------------------ */

static uint32_t lay_block[SEG_NCLASS], lay_slab[SEG_NCLASS];
static unsigned char lay_map[SF_MAP_MAX + 1], lay_medium[(SEG_FAST_MAX >> 4) + 2];
static unsigned char lay_reclaim[SEG_NCLASS];

/* The slab of a class: eight blocks and at least 16 KiB below 2 KiB, two
 * blocks below 8 KiB, one above; the smallest multiple of the page from
 * there that wastes at most 1/16 of itself at its end (as heaplab synth's
 * rule for a class the profile knows nothing about). */
static uint32_t slab_of(uint32_t block) {
    size_t ps = hl_page_size();
    size_t least = block >= 8192 ? block : block >= 2048 ? 2 * (size_t)block : 8 * (size_t)block;
    if (block < 2048 && least < (16u << 10)) least = 16u << 10;
    size_t s = HL_ALIGN_UP(least, ps);
    while ((s % block) * 16 > s && s < 4 * least)
        s += ps;
    if ((s % block) * 16 > s) s = HL_ALIGN_UP(least, ps);
    return (uint32_t)s;
}

static void layout(void) {
    unsigned c = 0;
    lay_block[c++] = 16; /* class 0: no request maps to it */
    for (uint32_t b = 16; b <= 512; b += 16)
        lay_block[c++] = b;
    for (uint32_t base = 512; base < SEG_FAST_MAX; base *= 2)
        for (uint32_t k = 1; k <= 4; k++)
            lay_block[c++] = base + base * k / 4;
    if (c != SEG_NCLASS) hl_fatal("segregated: %u classes, expected %u", c, SEG_NCLASS);
    for (unsigned i = 0; i < SEG_NCLASS; i++)
        lay_slab[i] = slab_of(lay_block[i]);
    unsigned k = 1;
    for (size_t n = 0; n <= SF_MAP_MAX; n++) {
        while (lay_block[k] < (n ? n : 1))
            k++;
        lay_map[n] = (unsigned char)k;
    }
    for (size_t i = 0; i < sizeof lay_medium; i++) { /* medium[(n + 15) >> 4]: the 16-byte granule */
        size_t n = i << 4;
        while (k < SEG_NCLASS - 1 && lay_block[k] < n)
            k++;
        lay_medium[i] = n <= SEG_FAST_MAX ? (unsigned char)k : SF_NONE;
    }
    for (unsigned i = 0; i < SEG_NCLASS; i++) /* no profile: larger blocks first */
        lay_reclaim[i] = (unsigned char)(SEG_NCLASS - 1 - i);
}

static const char *core_names[HL_SEG_CLASSES] = {"segregated-other-core", "segregated-SL-core",
                                                 "segregated-HR-core", "segregated-nonHR-core"};

static int cores_init(int front_on) {
    layout();
    for (unsigned i = 0; i < nsegs; i++) {
        sf_core_t *c = &hl_seg_cores[i];
        c->name = nsegs == 1 ? "segregated-core" : core_names[i];
        c->nclass = SEG_NCLASS;
        c->block = lay_block;
        c->slab = lay_slab;
        c->map = lay_map;
        c->medium = lay_medium;
        c->fast_max = SEG_FAST_MAX;
        c->reclaim_order = lay_reclaim;
        if (sf_init_locked(c, front_on) != 0) return -1;
        /* (slot 0, the shared one, is made when first needed: seg_alloc enters it) */
    }
    return 0;
}

/* The segment whose fast core owns p, or -1. */
static inline int core_of(const void *p) {
    unsigned s = seg_of_slot(p);
    if (!s || s > nsegs || !sf_slot_of(&hl_seg_cores[s - 1], p)) return -1;
    return (int)s - 1;
}

/* ------------------------------------------------------------------------ */
/* Prediction                                                                */
/* ------------------------------------------------------------------------ */

/* The segment of a new object (under the lock). */
static inline unsigned choose(void) {
    seg_tls_t *t = &hl_seg_t;
    unsigned c = HL_SEG_OTHER;
    if (t->pend != SEG_PEND_NONE) {
        c = t->pend_cls;
        if (t->pend == SEG_PEND_HINT) {
            if (hl_seg_mode == SEG_MODE_RANDOM) /* RANDOM ignores hints */
                c = hl_seg_random(hl_seg_table.seed,
                                  __atomic_fetch_add(&hl_seg_allocations, 1, __ATOMIC_RELAXED));
            else if (c < nsegs)
                hinted_locked[c]++;
            if (t->ident_mode != hl_seg_ident_start) hl_seg_ident_home(t); /* spent here */
        }
    } else if (hl_seg_mode == SEG_MODE_RANDOM) {
        c = hl_seg_random(hl_seg_table.seed,
                          __atomic_fetch_add(&hl_seg_allocations, 1, __ATOMIC_RELAXED));
    } else if (c < nsegs) {
        unpredicted[c]++;
    }
    t->pend = SEG_PEND_NONE;
    if (c >= nsegs) c = HL_SEG_OTHER;
    objects[c]++;
    return c;
}

static void segregated_site_hint(const heaplab_site_t *site) {
    uint64_t sp = 0;
    /* The site hint has no stack pointer.  For SP, heaplab segregate replays a
     * copy of the test trace whose allocations carry, as their only frame, a
     * frame in no module at offset = the recorded depth: the key
     * heaplab_frame_key("", 0, depth) = fnv1a64("") ^ depth * φ, and φ is odd,
     * so depth = (key ^ fnv1a64("")) * φ⁻¹ mod 2^64. */
    if (hl_seg_table.predictor == HL_SEG_SP && site->nframes == 1) {
        uint64_t inv = 1;
        for (int i = 0; i < 6; i++) /* Newton's iteration doubles the good bits */
            inv *= 2 - 0x9E3779B97F4A7C15ull * inv;
        uint64_t d = (site->frame_keys[0] ^ 0xcbf29ce484222325ull) * inv;
        sp = d < ((uint64_t)1 << 32) ? d : 0; /* a real frame's key gives garbage: no depth */
    }
    seg_tls_t *t = &hl_seg_t;
    unsigned level;
    unsigned c = nsegs > 1 ? hl_seg_decide(site->frame_keys, site->nframes, site->size, sp, &level)
                           : HL_SEG_OTHER;
    t->pend_cls = t->hint_cls = (uint8_t)c;
    t->pend = SEG_PEND_HINT;
    /* the next new object's identification is this class, once (seg_front.c);
     * RANDOM draws its own */
    if (nsegs > 1 && hl_seg_mode != SEG_MODE_RANDOM && t->ident_mode != hl_seg_ident_start) {
        t->ident = hl_seg_ident_hinted;
        hl_seg_ident_away(t); /* (for the shims with the identification inline) */
    }
}

/* ------------------------------------------------------------------------ */
/* The hl_alloc_t                                                            */
/* ------------------------------------------------------------------------ */

static const char *seg_names[HL_SEG_CLASSES] = {"segregated-other", "segregated-SL",
                                                "segregated-HR", "segregated-nonHR"};

static int segregated_init(void) {
    const hl_seg_table_t *tb = &hl_seg_table;
    if (tb->version != HL_SEG_TABLE_VERSION) return -1;
    nsegs = tb->nsegments == 4 ? 4 : 1;
    for (unsigned i = 0; i < nsegs; i++) {
        hl_heap_t *ph =
            i == 0 && nsegs == 1 ? hl_heap_new("segregated") : hl_heap_new(seg_names[i]);
        if (!ph || sh_init(i, ph) != 0) return -1;
    }
    /* the zoo's test modes run every call under the lock, on the cores' slot 0:
     * the pad layer's and the shim's generic realloc and memalign's blocks do
     * not start where this allocator's do */
    hl_seg_front_on = !hl_tunable("HEAPLAB_PAD", 0) && !hl_tunable("HEAPLAB_GENERIC", 0);
    if (cores_init(hl_seg_front_on) != 0) return -1;
    hl_seg_debug = hl_tunable("HEAPLAB_SEG_DEBUG", 0) != 0;
    hl_seg_caching = !(tb->flags & HL_SEG_FLAG_NO_CACHE) && !hl_seg_debug;
    hl_seg_by_size = tb->predictor == HL_SEG_STACK_SIZE;
    unsigned mode = SEG_MODE_OTHER;
    if (nsegs == 1)
        mode = SEG_MODE_ONE;
    else if (tb->predictor == HL_SEG_RANDOM)
        mode = SEG_MODE_RANDOM;
    else if (tb->predictor == HL_SEG_SP)
        mode = SEG_MODE_SP;
    else if (tb->predictor == HL_SEG_STACK || tb->predictor == HL_SEG_STACK_SIZE ||
             tb->predictor == HL_SEG_PATH)
        mode = SEG_MODE_STACK;
    if (!hl_tunable("HEAPLAB_SEG_RUNTIME", 1) && (mode == SEG_MODE_STACK || mode == SEG_MODE_SP))
        mode = SEG_MODE_OTHER; /* no run-time identification: hints only */
    /* site hints still work in OTHER mode: they set the thread's identification */
    __atomic_store_n(&hl_seg_mode, mode, __ATOMIC_RELEASE);
    return 0;
}

/* A new block of n bytes in segment i: its fast core (slot 0, shared, under
 * the lock) where the size has a class, else its best-fit heap. */
static void *seg_alloc(unsigned i, size_t n) {
    unsigned c = sf_class_of(&hl_seg_cores[i], n);
    if (c < SEG_NCLASS) {
        int fresh;
        void *p = sf_alloc_locked(&hl_seg_cores[i], c, &fresh);
        if (p) {
            /* slot 0 is made by its first block: entered before the block leaves */
            uintptr_t base = hl_seg_cores[i].slots[0]->base;
            __atomic_store_n(&hl_seg_slot_seg[(base >> SF_SLOT_SHIFT) & (SEG_SLOT_TABLE - 1)],
                             (uint16_t)(i << SEG_CORE_SHIFT | SEG_SLOT_CORE), __ATOMIC_RELEASE);
            return p;
        }
    }
    return sh_malloc(i, n);
}

static void *segregated_malloc(size_t size) {
    return seg_alloc(choose(), size);
}

/* The best-fit heap of a block that is no core's, checked. */
static unsigned owner(void *p, const char *what) {
    unsigned i = sh_index_of(p);
    if (HL_UNLIKELY(i >= nsegs)) hl_fatal("%s of %p, which is in no segment", what, p);
    if (HL_UNLIKELY(!sh_check_block(i, p)))
        hl_fatal("%s of %p, which is not in use (a double free?)", what, p);
    return i;
}

static void segregated_free(void *p) {
    int i = core_of(p);
    if (i >= 0)
        sf_free_locked(&hl_seg_cores[i], p);
    else
        sh_free(owner(p, "free"), p);
}

static size_t segregated_usable_size(void *p) {
    int i = core_of(p);
    if (i >= 0) return sf_block_size(&hl_seg_cores[i], p, "malloc_usable_size");
    return sh_usable(p);
}

/* In place where it still fits (a core's block while the new size uses at
 * least half of it, or has its class), else moved within its segment. */
static void *segregated_realloc(void *p, size_t size) {
    seg_tls_t *t = &hl_seg_t;
    if (t->pend == SEG_PEND_HINT) { /* the object keeps its segment: a hint for it is spent */
        t->pend = SEG_PEND_NONE;
        if (t->ident_mode != hl_seg_ident_start) hl_seg_ident_home(t);
    }
    int c = core_of(p);
    unsigned i;
    size_t have;
    if (c >= 0) {
        i = (unsigned)c;
        have = sf_block_size(&hl_seg_cores[i], p, "realloc");
        if (size <= have &&
            (size >= have / 2 || sf_class_of(&hl_seg_cores[i], size) == sf_class_at(p)))
            return p;
    } else {
        i = owner(p, "realloc");
        if (sh_resize(i, p, size)) return p;
        have = sh_usable(p);
    }
    void *q = seg_alloc(i, size);
    if (!q) return NULL;
    memcpy(q, p, have < size ? have : size);
    if (c >= 0)
        sf_free_locked(&hl_seg_cores[i], p);
    else
        sh_free(i, p);
    return q;
}

static void *segregated_memalign(size_t align, size_t size) {
    return sh_memalign(choose(), align, size);
}

static void segregated_check(void) {
    seg_tls_t *t = &hl_seg_t;
    for (unsigned i = 0; i < nsegs; i++) {
        sh_check(i);
        sf_check_locked(&hl_seg_cores[i], &t->core[i].t);
        /* no slot of the core is another segment's in the table (a slot just
         * made is entered before its first block leaves: seg_front.c) */
        for (unsigned k = 0; k < hl_seg_cores[i].nslots; k++) {
            if (!hl_seg_cores[i].slots[k]) continue; /* slot 0, not needed yet */
            unsigned s = seg_of_slot((void *)hl_seg_cores[i].slots[k]->base);
            HL_CHECK(s == i + 1 || (s == 0 && k > 0));
        }
    }
    /* the best-fit heaps do not overlap, nor lie in a core's slot */
    sh_info_t a, b;
    for (unsigned i = 0; i < nsegs; i++) {
        sh_get_info(i, &a);
        if (a.end) HL_CHECK(seg_of_slot((void *)a.first) == 0);
        for (unsigned j = i + 1; j < nsegs; j++) {
            sh_get_info(j, &b);
            if (a.end && b.end) HL_CHECK(a.end <= b.first || b.end <= a.first);
        }
    }
}

/* ------------------------------------------------------------------------ */
/* The report (seg_os.c writes it at exit when HEAPLAB_SEG_REPORT is set)    */
/* ------------------------------------------------------------------------ */

static void put_field(hl_str_t *o, const char *name, uint64_t v) {
    hl_str_c(o, ',');
    hl_str_c(o, '"');
    hl_str_puts(o, name);
    hl_str_puts(o, "\":");
    hl_str_u(o, v);
}

/* The bytes of slabs segment i's core holds (under the lock). */
static uint64_t core_bytes(unsigned i) {
    uint64_t n = 0;
    const sf_core_t *c = &hl_seg_cores[i];
    for (unsigned k = 0; k < c->nslots; k++)
        if (c->slots[k]) n += c->slots[k]->footprint; /* (slot 0: NULL until needed) */
    return n;
}

/* The address ranges of segment i: its best-fit heap, then each slot of its
 * core ([base, base + 8 GiB): every span a thread of it may carve). */
static void put_ranges(hl_str_t *o, unsigned i, const sh_info_t *s) {
    hl_str_puts(o, ",\"ranges\":[");
    int first = 1;
    if (s->end) {
        hl_str_puts(o, "[\"");
        hl_str_x(o, s->first);
        hl_str_puts(o, "\",\"");
        hl_str_x(o, s->end);
        hl_str_puts(o, "\"]");
        first = 0;
    }
    const sf_core_t *c = &hl_seg_cores[i];
    for (unsigned k = 0; k < c->nslots; k++) {
        if (!c->slots[k]) continue; /* slot 0, not needed yet */
        uintptr_t b = c->slots[k]->base;
        hl_str_puts(o, first ? "[\"" : ",[\"");
        hl_str_x(o, b);
        hl_str_puts(o, "\",\"");
        hl_str_x(o, b + ((uintptr_t)1 << SF_SLOT_SHIFT));
        hl_str_puts(o, "\"]");
        first = 0;
    }
    hl_str_c(o, ']');
}

size_t hl_seg_report(char *b, size_t cap) {
    static const char *cls[HL_SEG_CLASSES] = {"other", "SL", "HR", "nonHR"};
    static hl_seg_counts_t cnt; /* (static: the report runs at exit, on any stack) */
    hl_str_t o = hl_str(b, cap);
    hl_front_enter(); /* (the other threads' counters still move: a report, not a check) */
    hl_seg_front_sum(&cnt);
    sh_info_t info[HL_SEG_CLASSES];
    uint64_t cbytes[HL_SEG_CLASSES];
    for (unsigned i = 0; i < nsegs; i++) {
        sh_get_info(i, &info[i]);
        cbytes[i] = core_bytes(i);
    }
    uint64_t objs[HL_SEG_CLASSES], hl[HL_SEG_CLASSES], unp[HL_SEG_CLASSES];
    memcpy(objs, objects, sizeof objs);
    memcpy(hl, hinted_locked, sizeof hl);
    memcpy(unp, unpredicted, sizeof unp);
    hl_str_puts(&o, "{\"predictor\":\"");
    hl_str_puts(&o, hl_seg_table.name ? hl_seg_table.name : "?");
    hl_str_puts(&o, "\"");
    put_field(&o, "entries", hl_seg_table.n);
    hl_str_puts(&o, ",\"segments\":[");
    uint64_t predicted = 0;
    for (unsigned i = 0; i < nsegs; i++) {
        const sh_info_t s = info[i];
        uint64_t n = objs[i] + cnt.objects[i], h = cnt.hinted[i] + hl[i];
        uint64_t rt =
            hl_seg_mode == SEG_MODE_STACK || hl_seg_mode == SEG_MODE_SP ? n - h - unp[i] : 0;
        if (i != HL_SEG_OTHER) predicted += rt;
        hl_str_puts(&o, i ? ",{\"class\":\"" : "{\"class\":\"");
        hl_str_puts(&o, nsegs == 1 ? "all" : cls[i]);
        hl_str_puts(&o, "\",\"first\":\"");
        hl_str_x(&o, s.first);
        hl_str_puts(&o, "\",\"end\":\"");
        hl_str_x(&o, s.end);
        hl_str_c(&o, '"');
        put_ranges(&o, i, &s);
        put_field(&o, "objects", n);
        put_field(&o, "hinted", h);
        put_field(&o, "runtime", rt);
        put_field(&o, "from_cache", cnt.objects[i]);
        put_field(&o, "bytes_live", s.bytes_live);
        put_field(&o, "bytes_peak", s.bytes_peak);
        put_field(&o, "core_bytes", cbytes[i]);
        put_field(&o, "grows", s.grows);
        hl_str_c(&o, '}');
    }
    hl_front_leave();
    hl_str_c(&o, ']');
    uint64_t h_all = 0;
    for (unsigned i = 0; i < HL_SEG_CLASSES; i++)
        h_all += cnt.hinted[i] + hl[i];
    const hl_seg_ident_stats_t *id = &cnt.id;
    put_field(&o, "hints", h_all);
    put_field(&o, "runtime_lookups", id->calls);
    put_field(&o, "runtime_predicted", predicted);
    put_field(&o, "runtime_frames", id->frames);
    hl_str_puts(&o, ",\"levels\":[");
    unsigned last = 0;
    for (unsigned l = 0; l < HL_SEG_LEVELS; l++)
        if (id->level[l]) last = l;
    for (unsigned l = 0; l <= last; l++) {
        if (l) hl_str_c(&o, ',');
        hl_str_u(&o, id->level[l]);
    }
    hl_str_c(&o, ']');
    put_field(&o, "unknown", id->unknown);
    put_field(&o, "ctx_misses", id->cache.ctx_misses);
    put_field(&o, "ctx_others", id->cache.ctx_others);
    put_field(&o, "cx_hits", id->cache.cx_hits);
    put_field(&o, "walks", id->cache.walks);
    put_field(&o, "uncached", id->cache.uncached);
    put_field(&o, "longs", id->cache.longs);
    put_field(&o, "ra_misses", id->cache.ra_misses);
    put_field(&o, "path_hits", id->cache.path_hits);
    put_field(&o, "path_misses", id->cache.path_misses);
    uint64_t fast = 0;
    for (unsigned i = 0; i < nsegs; i++)
        fast += cnt.objects[i];
    put_field(&o, "cache_mallocs", fast);
    put_field(&o, "cache_frees", cnt.frees);
    hl_str_puts(&o, "}\n");
    return o.len;
}

/* ------------------------------------------------------------------------ */
/* Exports for tests and tools (found with dlsym; absent elsewhere)          */
/* ------------------------------------------------------------------------ */

#define SEG_EXPORT __attribute__((visibility("default")))

/* The segments' best-fit heaps: first byte and break of each; returns how
 * many segments there are. */
SEG_EXPORT unsigned heaplab_seg_segments(uintptr_t *first, uintptr_t *end, uint64_t *grows,
                                         unsigned max) {
    for (unsigned i = 0; i < nsegs && i < max; i++) {
        sh_info_t s;
        sh_get_info(i, &s);
        first[i] = s.first;
        end[i] = s.end;
        grows[i] = s.grows;
    }
    return nsegs;
}

/* Segment i's fast core: the bases of its slots (each 2^SF_SLOT_SHIFT bytes;
 * the shared slot 0 only once it is made); returns how many slots it has (at
 * most max written). */
SEG_EXPORT unsigned heaplab_seg_slots(unsigned i, uintptr_t *base, unsigned max) {
    if (i >= nsegs) return 0;
    hl_front_enter();
    const sf_core_t *c = &hl_seg_cores[i];
    unsigned n = 0;
    for (unsigned k = 0; k < c->nslots; k++) {
        if (!c->slots[k]) continue;
        if (n < max) base[n] = c->slots[k]->base;
        n++;
    }
    hl_front_leave();
    return n;
}

/* The segment (class) holding p, or -1. */
SEG_EXPORT int heaplab_seg_class_of(const void *p) {
    int c = core_of(p);
    if (c >= 0) return c;
    for (unsigned i = 0; i < nsegs; i++) {
        sh_info_t s;
        sh_get_info(i, &s);
        if (s.end && (uintptr_t)p >= s.first && (uintptr_t)p < s.end) return (int)i;
    }
    return -1;
}

/* This thread's last walk (HEAPLAB_SEG_DEBUG=1): its keys, its class and its
 * stack depth; returns the number of keys (-1: debug off). */
SEG_EXPORT int heaplab_seg_last(uint64_t *keys, unsigned max, unsigned *cls, uint64_t *sp_depth) {
    if (!hl_seg_debug) return -1;
    const seg_tls_t *t = &hl_seg_t;
    for (unsigned i = 0; i < t->last_n && i < max && i < 16; i++)
        keys[i] = t->last_keys[i];
    *cls = t->last_cls;
    *sp_depth = t->last_sp;
    return (int)t->last_n;
}

/* Where this process's identifications were decided: level[L] (the return
 * address and L more frames), unknown; returns the identifications. */
SEG_EXPORT uint64_t heaplab_seg_levels(uint64_t *level, unsigned max, uint64_t *unknown) {
    static hl_seg_counts_t c;
    hl_front_enter();
    hl_seg_front_sum(&c);
    hl_front_leave();
    for (unsigned l = 0; l < max && l < HL_SEG_LEVELS; l++)
        level[l] = c.id.level[l];
    *unknown = c.id.unknown;
    return c.id.calls;
}

/* The predictor table: its name and entries. */
SEG_EXPORT const char *heaplab_seg_predictor(uint64_t *entries) {
    *entries = hl_seg_table.n;
    return hl_seg_table.name;
}

/* Every object of the library, fastcore.c's included, is built with
 * -DSF_COUNT=1 (seg_front.h checks it), so that the fast cores count every
 * call they serve: the statistics' totals are exact, not the lower bounds of
 * a fast core built without SF_COUNT (no heaplab_alloc_stats_lower_bounds). */

const hl_alloc_t hl_alloc_segregated = {
    .info = {"segregated",
             "Seidl and Zorn's segmented allocator: up to four segments, each a fast core "
             "(a class per size, per-thread slabs) and a best-fit heap for large blocks, "
             "the segment chosen by a trained predictor",
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
