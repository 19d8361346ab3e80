/*
 * seg_ident.c: which class an allocation belongs to, from its call site, in
 * a few instructions (seg.h draws the table; HALO, Savage and Jones, CGO
 * 2020, identifies allocation contexts cheaply the same way: most call sites
 * decide alone, and only the others look further up the stack).
 *
 *   hl_seg_identify(fp)                      fp: malloc's frame (fp[1]: the return
 *     │                                      address into the program)
 *     ├─ 1. ra[hash(ra)] == ra?  ──yes──▶ its decision: a class ─────────────▶ done (level 0)
 *     │      (this thread's cache)                         or WALK(need) ──┐
 *     │   no: k0 = the frame key of ra (the module map), node(k0) in the   │
 *     │       table: LEAF(c) → c; WALK(n) → walk n; none → "other" (PATH:  │
 *     │       walk every frame and look for a path point); cached in ra[]  │
 *     ▼                                                                    ▼
 *     2. walk `need` frames from the program's frame (fp[0] its rbp, fp+2 its
 *        stack pointer): ra0 .. ra_need (seg_os.c, hl_unwind's cached rules)
 *     3. path[mix(ra0 .. ra_need)]: the class decided for that walk before?  ──yes──▶ done
 *        no: their frame keys down the tree (hl_seg_decide) ─▶ class, cached in path[]
 *
 * The table lookup (hl_seg_decide) is shared with the replayer's site hints,
 * so that a replay and the real program place an allocation alike; and
 * crates/heaplab-segregate/src/tree.rs predicts with the same tree.
 *
 * Counters (per thread, summed by seg_cache.c for the report): where each
 * allocation was decided (the return address alone, or after L more frames),
 * how many had no node ("other" by default), and the caches' hits.
 */
#include "hl_alloc.h"
#include "heaplab_site.h"
#include "seg.h"
#include "seg_thread.h"

#include <string.h>

/* ---- the table ---- */

/* Binary search: the index of key in keys[0..n), or -1. */
static inline long find_in(const uint64_t *keys, uint64_t n, uint64_t key) {
    uint64_t lo = 0, hi = n;
    while (lo < hi) {
        uint64_t mid = (lo + hi) >> 1;
        if (keys[mid] < key)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < n && keys[lo] == key ? (long)lo : -1;
}

/* A node's value, or -1. */
static inline int node(uint64_t key) {
    const hl_seg_table_t *t = &hl_seg_table;
    long i = find_in(t->keys, t->n, key);
    return i < 0 ? -1 : t->values[i];
}

/* PATH: the class of the innermost path point among keys[from..n), or
 * -1; *at gets its index. */
static int path_point(const uint64_t *keys, unsigned from, unsigned n, unsigned *at) {
    const hl_seg_table_t *t = &hl_seg_table;
    for (unsigned i = from; i < n; i++) {
        if (!keys[i]) continue;
        long j = find_in(t->points, t->npoints, keys[i]);
        if (j >= 0) {
            *at = i;
            return t->point_classes[j];
        }
    }
    return -1;
}

#define FNV_BASIS 0xcbf29ce484222325ull
#define FNV_PRIME 0x100000001b3ull

unsigned hl_seg_decide(const uint64_t *keys, unsigned n, uint64_t size, uint64_t sp_depth,
                       unsigned *level) {
    const hl_seg_table_t *t = &hl_seg_table;
    *level = 0;
    switch (t->predictor) {
    case HL_SEG_SP: {
        int v = sp_depth ? node(hl_seg_sp_key(sp_depth)) : -1;
        if (v < 0) *level = HL_SEG_UNKNOWN;
        return v < 0 || HL_SEG_IS_WALK((unsigned)v) ? HL_SEG_OTHER : (unsigned)v;
    }
    case HL_SEG_STACK:
    case HL_SEG_STACK_SIZE:
    case HL_SEG_PATH:
        break;
    default:
        return HL_SEG_OTHER;
    }
    unsigned depth = t->depth ? t->depth : 1;
    if (depth > HL_SEG_MAX_DEPTH) depth = HL_SEG_MAX_DEPTH;
    uint64_t h = FNV_BASIS; /* heaplab_site_hash of the prefix, built a key at a time */
    for (unsigned L = 1; L <= depth; L++) {
        h = (h ^ (L - 1 < n ? keys[L - 1] : 0)) * FNV_PRIME;
        uint64_t key = hl_seg_fmix(h);
        int v = node(key);
        if (v < 0) { /* a prefix training never saw */
            *level = (L - 1) | HL_SEG_UNKNOWN;
            if (t->predictor == HL_SEG_PATH) {
                /* the innermost path point among the frames from here on (those
                 * before are on a prefix that has a node: none is a path point) */
                unsigned at = 0, m = n < depth ? n : depth;
                int c = path_point(keys, L - 1, m, &at);
                *level = (c >= 0 ? at : (m ? m - 1 : 0)) | HL_SEG_UNKNOWN;
                if (c >= 0) return (unsigned)c;
            }
            return HL_SEG_OTHER;
        }
        if (!HL_SEG_IS_WALK((unsigned)v)) {
            *level = L - 1;
            return (unsigned)v & 3u;
        }
        if (L == depth) { /* STACK+size: the size decides */
            *level = L - 1;
            if (t->predictor != HL_SEG_STACK_SIZE) return HL_SEG_OTHER;
            int s = node(hl_seg_size_key(key, size));
            if (s < 0) *level |= HL_SEG_UNKNOWN;
            return s < 0 || HL_SEG_IS_WALK((unsigned)s) ? HL_SEG_OTHER : (unsigned)s & 3u;
        }
    }
    return HL_SEG_OTHER;
}

/* The decision for a return address of key k0, alone. */
static uint32_t first_decision(uint64_t k0) {
    const hl_seg_table_t *t = &hl_seg_table;
    unsigned depth = t->depth ? t->depth : 1;
    if (depth > HL_SEG_MAX_DEPTH) depth = HL_SEG_MAX_DEPTH;
    if (t->flags & HL_SEG_FLAG_WALK_ALWAYS) return SEG_DEC_WALK | (depth - 1) << 16;
    int v = node(hl_seg_fmix((FNV_BASIS ^ k0) * FNV_PRIME));
    if (v < 0)
        return t->predictor == HL_SEG_PATH && depth > 1
                   ? SEG_DEC_WALK | SEG_DEC_UNKNOWN | (depth - 1) << 16 /* look for a path point */
                   : SEG_DEC_UNKNOWN | HL_SEG_OTHER;
    if (!HL_SEG_IS_WALK((unsigned)v)) return (uint32_t)v & 3u;
    return SEG_DEC_WALK | HL_SEG_WALK_NEED((unsigned)v) << 16;
}

/* ---- the identification ---- */

static inline unsigned ra_slot(uintptr_t ra) {
    return (unsigned)((ra ^ (ra >> 7) ^ (ra >> 15)) & (SEG_RA_SLOTS - 1));
}

static inline void count_level(seg_thread_t *t, unsigned level) {
    if (level & HL_SEG_UNKNOWN) t->id.unknown++;
    level &= 0xffu;
    t->id.level[level < HL_SEG_LEVELS ? level : HL_SEG_LEVELS - 1]++;
}

/* Step 2 and 3: walk `need` more frames and decide from them. */
static unsigned __attribute__((noinline)) walk_and_decide(seg_thread_t *t, void *const *fp,
                                                          size_t size, uint32_t dec) {
    if (t->busy) return HL_SEG_OTHER;
    t->busy = 1;
    unsigned need = SEG_DEC_NEED(dec);
    if (need > HL_SEG_MAX_DEPTH - 1) need = HL_SEG_MAX_DEPTH - 1;
    uintptr_t ras[HL_SEG_MAX_DEPTH];
    unsigned n = hl_seg_os_walk(ras, need + 1, (uintptr_t)fp[1], (uintptr_t)(fp + 2),
                                (uintptr_t)fp[0]);
    t->id.frames += n;
    /* the walk's own cache: the class of these return addresses (and size) */
    uint64_t tag = 0x9E3779B97F4A7C15ull * (n + 1);
    for (unsigned i = 0; i < n; i++)
        tag = (tag ^ ras[i]) * 0xff51afd7ed558ccdull;
    if (hl_seg_table.predictor == HL_SEG_STACK_SIZE) tag ^= size * 0xC2B2AE3D27D4EB4Full;
    tag = hl_seg_fmix(tag) | 1;
    seg_path_slot_t *s = &t->path[(tag >> 20) & (SEG_PATH_SLOTS - 1)];
    int cache = !(hl_seg_table.flags & HL_SEG_FLAG_NO_CACHE) && !hl_seg_debug;
    if (cache && s->tag == tag) {
        t->id.path_hits++;
        count_level(t, s->level);
        t->busy = 0;
        return s->cls;
    }
    t->id.path_misses++;
    uint64_t keys[HL_SEG_MAX_DEPTH];
    if (n > HL_SEG_MAX_DEPTH) n = HL_SEG_MAX_DEPTH;
    for (unsigned i = 0; i < n; i++)
        keys[i] = hl_seg_os_key(ras[i]);
    for (unsigned i = n; i < need + 1 && i < HL_SEG_MAX_DEPTH; i++)
        keys[i] = 0; /* (the stack ended: hl_seg_decide pads with 0 anyway) */
    unsigned level;
    unsigned c = hl_seg_decide(keys, n, size, 0, &level);
    if (cache) {
        s->tag = tag;
        s->cls = c;
        s->level = level;
    }
    count_level(t, level);
    if (hl_seg_debug) {
        t->last_n = n;
        t->last_cls = c;
        t->last_sp = 0;
        memcpy(t->last_keys, keys, (n < 16 ? n : 16) * sizeof keys[0]);
    }
    t->busy = 0;
    return c;
}

/* Step 1's miss: the return address's decision from the table. */
static unsigned __attribute__((noinline)) first_miss(seg_thread_t *t, void *const *fp,
                                                     size_t size, seg_ra_slot_t *e) {
    if (t->busy) return HL_SEG_OTHER;
    t->busy = 1;
    uintptr_t ra = (uintptr_t)fp[1];
    t->id.ra_misses++;
    uint32_t d = hl_seg_os_ready() > 0 ? first_decision(hl_seg_os_key(ra))
                                       : SEG_DEC_UNKNOWN | HL_SEG_OTHER;
    if (!(hl_seg_table.flags & HL_SEG_FLAG_NO_CACHE)) {
        e->ra = ra;
        e->dec = d;
    }
    t->busy = 0;
    if (d & SEG_DEC_WALK) return walk_and_decide(t, fp, size, d);
    if (d & SEG_DEC_UNKNOWN) t->id.unknown++;
    t->id.level[0]++;
    return SEG_DEC_CLASS(d);
}

unsigned __attribute__((noinline)) hl_seg_identify(void *const *fp, size_t size) {
    seg_thread_t *t = &hl_seg_tls;
    uintptr_t ra = (uintptr_t)fp[1];
    seg_ra_slot_t *e = &t->ra[ra_slot(ra)];
    if (HL_LIKELY(e->ra == ra)) {
        uint32_t d = e->dec;
        if (HL_LIKELY(!(d & SEG_DEC_WALK))) {
            t->id.level[0]++;
            if (HL_UNLIKELY(d & SEG_DEC_UNKNOWN)) t->id.unknown++;
            return SEG_DEC_CLASS(d);
        }
        return walk_and_decide(t, fp, size, d);
    }
    return first_miss(t, fp, size, e);
}

/* SP: the depth of the caller's stack pointer decides (main thread only). */
unsigned __attribute__((noinline)) hl_seg_identify_sp(void *const *fp) {
    seg_thread_t *t = &hl_seg_tls;
    uintptr_t sp = (uintptr_t)(fp + 2);
    seg_ra_slot_t *e = &t->ra[ra_slot(sp >> 4)];
    if (HL_LIKELY(e->ra == sp)) {
        t->id.level[0]++;
        if (HL_UNLIKELY(e->dec & SEG_DEC_UNKNOWN)) t->id.unknown++;
        return SEG_DEC_CLASS(e->dec);
    }
    t->id.ra_misses++;
    uint64_t depth = hl_seg_os_ready() > 0 ? hl_seg_os_sp_depth(sp) : 0;
    unsigned level;
    unsigned c = hl_seg_decide(NULL, 0, 0, depth, &level);
    if (!(hl_seg_table.flags & HL_SEG_FLAG_NO_CACHE) && !hl_seg_debug) {
        e->ra = sp;
        e->dec = c | (level & HL_SEG_UNKNOWN ? SEG_DEC_UNKNOWN : 0);
    }
    if (hl_seg_debug) {
        t->last_n = 0;
        t->last_cls = c;
        t->last_sp = depth;
    }
    count_level(t, level);
    return c;
}
