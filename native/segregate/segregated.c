/*
 * segregated.c: Seidl and Zorn's segmented allocator (paper 001 §4.2), with
 * the predictor that chooses the segment of every new object (§3.1).
 *
 *   new object ──▶ class c (the front end: seg_front.h, seg_ident.c; or a site hint)
 *                     │
 *                     ▼
 *   segment c  ═  instance c of the per-segment allocator (seg_heap.h; today
 *                 seg_bestfit.c: best fit on btag.h's heap), four of them
 *                 (other, SL, HR, not-HR), each contiguous, grown in 2 MB steps,
 *                 64 KB apart; DEFAULT has one
 *                     ▲
 *   a thread's cache of free blocks per (segment, size) (seg_cache.c), which
 *   the front end serves without the lock
 *
 * This file is the composition under the shim's lock: the segment of a new
 * object, realloc within its segment, free to the segment that holds the
 * block, the site hint, the checker, the report, and the exports tools find
 * with dlsym.
 *
 * Prediction: a new object (malloc, calloc, memalign family, realloc of NULL)
 * goes to the segment of its predicted class; a realloc keeps its object in
 * the segment it is in (§5.1: a realloc resizes one object).  The class
 * comes from, in order: a site hint for this thread's next allocation (the
 * replayer's, heaplab_site_hint); the front end's identification of the call
 * site, made before the lock (pending in the thread's block); else "other"
 * (the memalign family, which has no front end).  RANDOM draws the class from
 * the allocation's number; DEFAULT has one segment.
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
size_t hl_seg_cache_cap[SEG_NSIZES];
uint64_t hl_seg_cache_key;
int hl_seg_debug;
int hl_seg_caching;
int hl_seg_by_size;
int hl_seg_prefix;

/* Objects that took the locked path, per segment (the caches count theirs);
 * and those whose class nobody predicted (the memalign family). */
static uint64_t objects[HL_SEG_CLASSES], hinted_locked[HL_SEG_CLASSES],
    unpredicted[HL_SEG_CLASSES];

/* ------------------------------------------------------------------------ */
/* Prediction                                                                */
/* ------------------------------------------------------------------------ */

/* The segment of a new object (under the lock). */
static inline unsigned choose(void) {
    seg_thread_t *t = &hl_seg_tls;
    unsigned c = HL_SEG_OTHER;
    if (t->pend != SEG_PEND_NONE) {
        c = t->pend_cls;
        if (t->pend == SEG_PEND_HINT && hl_seg_mode == SEG_MODE_RANDOM) /* RANDOM ignores hints */
            c = hl_seg_random(hl_seg_table.seed,
                              __atomic_fetch_add(&hl_seg_allocations, 1, __ATOMIC_RELAXED));
        if (c < nsegs && t->pend == SEG_PEND_HINT) hinted_locked[c]++;
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
    seg_thread_t *t = &hl_seg_tls;
    unsigned level;
    t->pend_cls = nsegs > 1 ? (uint8_t)hl_seg_decide(site->frame_keys, site->nframes, site->size,
                                                      sp, &level)
                            : HL_SEG_OTHER;
    t->pend = SEG_PEND_HINT;
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
    hl_seg_debug = hl_tunable("HEAPLAB_SEG_DEBUG", 0) != 0;
    hl_seg_caching = !(tb->flags & HL_SEG_FLAG_NO_CACHE) && !hl_seg_debug;
    hl_seg_by_size = tb->predictor == HL_SEG_STACK_SIZE;
    /* the prefix cache (seg_ident.c); not for the tests' tables that walk every time */
    hl_seg_prefix = hl_seg_caching && !(tb->flags & HL_SEG_FLAG_WALK_ALWAYS) &&
                    (tb->predictor == HL_SEG_STACK || tb->predictor == HL_SEG_STACK_SIZE ||
                     tb->predictor == HL_SEG_PATH);
    /* The caches: at most HEAPLAB_SEG_CACHE bytes per list (4096 by default),
     * 2 to 32 blocks; none under the pad layer or the shim's generic realloc
     * and memalign, whose blocks do not start with this allocator's header. */
    size_t budget = hl_tunable("HEAPLAB_SEG_CACHE", 4096);
    if (hl_tunable("HEAPLAB_PAD", 0) || hl_tunable("HEAPLAB_GENERIC", 0)) budget = 0;
    for (unsigned i = 0; i < SEG_NSIZES; i++) {
        size_t n = budget / ((i + 2) * 16);
        hl_seg_cache_cap[i] = budget == 0 ? 0 : n < 2 ? 2 : n > 32 ? 32 : n;
    }
    hl_seg_cache_key = hl_seg_fmix((uint64_t)(uintptr_t)&nsegs ^ (uint64_t)getpid() << 32) | 1;
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
    /* site hints still work in OTHER mode: they set the thread's pending class */
    __atomic_store_n(&hl_seg_mode, mode, __ATOMIC_RELEASE);
    return 0;
}

static void *segregated_malloc(size_t size) {
    unsigned i = choose();
    return sh_malloc(i, size);
}

static unsigned owner(void *p, const char *what) {
    unsigned i = sh_index_of(p);
    if (HL_UNLIKELY(i >= nsegs)) hl_fatal("%s of %p, which is in no segment", what, p);
    if (HL_UNLIKELY(!sh_check_block(i, p)))
        hl_fatal("%s of %p, which is not in use (a double free?)", what, p);
    return i;
}

static void segregated_free(void *p) {
    sh_free(owner(p, "free"), p);
}

static size_t segregated_usable_size(void *p) {
    return sh_usable(p);
}

/* In place, else moved within its segment. */
static void *segregated_realloc(void *p, size_t size) {
    unsigned i = owner(p, "realloc");
    hl_seg_tls.pend = SEG_PEND_NONE; /* the object keeps its segment: a hint for it is spent */
    if (sh_resize(i, p, size)) return p;
    size_t have = sh_usable(p);
    void *q = sh_malloc(i, size);
    if (!q) return NULL;
    memcpy(q, p, have < size ? have : size);
    sh_free(i, p);
    return q;
}

static void *segregated_memalign(size_t align, size_t size) {
    return sh_memalign(choose(), align, size);
}

static void segregated_check(void) {
    for (unsigned i = 0; i < nsegs; i++)
        sh_check(i);
    /* segments do not overlap */
    sh_info_t a, b;
    for (unsigned i = 0; i < nsegs; i++)
        for (unsigned j = i + 1; j < nsegs; j++) {
            sh_get_info(i, &a);
            sh_get_info(j, &b);
            if (a.end && b.end) HL_CHECK(a.end <= b.first || b.end <= a.first);
        }
    hl_seg_cache_check();
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

size_t hl_seg_report(char *b, size_t cap) {
    static const char *cls[HL_SEG_CLASSES] = {"other", "SL", "HR", "nonHR"};
    uint64_t pops[HL_SEG_CLASSES], pushes, hinted[HL_SEG_CLASSES];
    hl_seg_ident_stats_t id;
    hl_front_enter(); /* (the other threads' counters still move: a report, not a check) */
    hl_seg_cache_sum(pops, &pushes, hinted, &id);
    sh_info_t info[HL_SEG_CLASSES];
    for (unsigned i = 0; i < nsegs; i++)
        sh_get_info(i, &info[i]);
    uint64_t objs[HL_SEG_CLASSES], hl[HL_SEG_CLASSES], unp[HL_SEG_CLASSES];
    memcpy(objs, objects, sizeof objs);
    memcpy(hl, hinted_locked, sizeof hl);
    memcpy(unp, unpredicted, sizeof unp);
    hl_front_leave();
    hl_str_t o = hl_str(b, cap);
    hl_str_puts(&o, "{\"predictor\":\"");
    hl_str_puts(&o, hl_seg_table.name ? hl_seg_table.name : "?");
    hl_str_puts(&o, "\"");
    put_field(&o, "entries", hl_seg_table.n);
    hl_str_puts(&o, ",\"segments\":[");
    uint64_t predicted = 0;
    for (unsigned i = 0; i < nsegs; i++) {
        const sh_info_t s = info[i];
        uint64_t n = objs[i] + pops[i], h = hinted[i] + hl[i];
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
        put_field(&o, "objects", n);
        put_field(&o, "hinted", h);
        put_field(&o, "runtime", rt);
        put_field(&o, "from_cache", pops[i]);
        put_field(&o, "bytes_live", s.bytes_live);
        put_field(&o, "bytes_peak", s.bytes_peak);
        put_field(&o, "grows", s.grows);
        hl_str_c(&o, '}');
    }
    hl_str_c(&o, ']');
    uint64_t h_all = 0;
    for (unsigned i = 0; i < HL_SEG_CLASSES; i++)
        h_all += hinted[i] + hl[i];
    put_field(&o, "hints", h_all);
    put_field(&o, "runtime_lookups", id.calls);
    put_field(&o, "runtime_predicted", predicted);
    put_field(&o, "runtime_frames", id.frames);
    hl_str_puts(&o, ",\"levels\":[");
    unsigned last = 0;
    for (unsigned l = 0; l < HL_SEG_LEVELS; l++)
        if (id.level[l]) last = l;
    for (unsigned l = 0; l <= last; l++) {
        if (l) hl_str_c(&o, ',');
        hl_str_u(&o, id.level[l]);
    }
    hl_str_c(&o, ']');
    put_field(&o, "unknown", id.unknown);
    put_field(&o, "ra_misses", id.ra_misses);
    put_field(&o, "path_hits", id.path_hits);
    put_field(&o, "path_misses", id.path_misses);
    put_field(&o, "cache_mallocs", pops[0] + pops[1] + pops[2] + pops[3]);
    put_field(&o, "cache_frees", pushes);
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
        sh_info_t s;
        sh_get_info(i, &s);
        first[i] = s.first;
        end[i] = s.end;
        grows[i] = s.grows;
    }
    return nsegs;
}

/* The segment (class) holding p, or -1. */
SEG_EXPORT int heaplab_seg_class_of(const void *p) {
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
    const seg_thread_t *t = &hl_seg_tls;
    for (unsigned i = 0; i < t->last_n && i < max && i < 16; i++)
        keys[i] = t->last_keys[i];
    *cls = t->last_cls;
    *sp_depth = t->last_sp;
    return (int)t->last_n;
}

/* Where this process's identifications were decided: level[L] (the return
 * address and L more frames), unknown; returns the identifications. */
SEG_EXPORT uint64_t heaplab_seg_levels(uint64_t *level, unsigned max, uint64_t *unknown) {
    uint64_t pops[HL_SEG_CLASSES], pushes, hinted[HL_SEG_CLASSES];
    hl_seg_ident_stats_t id;
    hl_front_enter();
    hl_seg_cache_sum(pops, &pushes, hinted, &id);
    hl_front_leave();
    for (unsigned l = 0; l < max && l < HL_SEG_LEVELS; l++)
        level[l] = id.level[l];
    *unknown = id.unknown;
    return id.calls;
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
