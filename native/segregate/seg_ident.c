/*
 * seg_ident.c: which class an allocation belongs to, from its call site, in
 * a few instructions (seg.h draws the table; HALO, Savage and Jones, CGO
 * 2020, identifies allocation contexts cheaply the same way: most call sites
 * decide alone, and only the others look further up the stack).
 *
 *   hl_seg_identify(fp)                      fp: malloc's frame (fp[1]: the return
 *     │                                      address ra0 into the program)
 *     ├─ 1. ra[hash(ra0)] == ra0?  ──yes──▶ its decision: a class ───────────▶ done (level 0)
 *     │      (this thread's cache)                         or "walk" ──┐
 *     │   no: k0 = the frame key of ra0 (the module map), node(k0) in   │
 *     │       the table: LEAF(c) → c; WALK(n) → walk; none → "other"    │
 *     │       (PATH: ra0 a path point → its class, else walk and look   │
 *     │       for one); cached in ra[] with ra0's unwind rule           │
 *     ▼                                                                 ▼
 *     2. a prefix at a time (STACK, STACK+size, PATH), from the program's frame
 *        (fp[0] its rbp, fp + 2 its stack pointer):
 *          CFA = (rbp or sp) + the rule's offset, checked against the thread's
 *          stack; ra(L+1) = CFA[-1]; rbp reloaded where the rule saves it
 *          tag = mix(tag, ra(L+1));  pfx[tag]: the tree's node of the prefix
 *          ra0 .. ra(L+1): a class ─▶ done (level L+1), or "step on" with
 *          ra(L+1)'s rule (or, STACK+size's last frame: the size, through
 *          path[]); a slot that misses is filled from one frame key (the
 *          previous slot keeps the tree's hash so far) and hl_unwind's rule.
 *        The first step is inline in hl_seg_identify: a wrapper's callers
 *        decide with one stack read and one slot.
 *     3. the whole context at once (the tests' walking tables, HEAPLAB_SEG_DEBUG,
 *        a frame with no standard rule or out of bounds): `need` frames up
 *        with the rules in ra[] and rules[] (or hl_unwind's own walk, which
 *        finds the same frames); path[mix(ra0 .. ra_need)] keeps the class;
 *        else their frame keys down the tree (hl_seg_decide).
 *
 * Why a prefix slot is exact: the tree's node of a prefix depends on its
 * return addresses only (each one's key is fixed once its module is loaded),
 * and the tag is a 64-bit mix of them in order.
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
#include "hl_unwind.h"
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

/* PATH: the class of a frame key that is a path point, or -1. */
static int point_class(uint64_t key) {
    const hl_seg_table_t *t = &hl_seg_table;
    long j = key ? find_in(t->points, t->npoints, key) : -1;
    return j < 0 ? -1 : t->point_classes[j];
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
    if (v < 0) {
        if (t->predictor == HL_SEG_PATH) { /* the innermost path point: this frame, or above */
            int c = point_class(k0);
            if (c >= 0) return (uint32_t)c | (uint32_t)seg_counter(HL_SEG_UNKNOWN) << 24;
            if (depth > 1) return SEG_DEC_WALK | SEG_DEC_SCAN | SEG_DEC_UNKNOWN | (depth - 1) << 16;
        }
        return SEG_DEC_UNKNOWN | HL_SEG_OTHER | (uint32_t)HL_SEG_LEVELS << 24;
    }
    if (!HL_SEG_IS_WALK((unsigned)v)) return (uint32_t)v & 3u;
    return SEG_DEC_WALK | HL_SEG_WALK_NEED((unsigned)v) << 16;
}

/* ---- the identification ---- */

/* The slot of a return address in the thread's cache (a multiplicative hash
 * of its low bits: call sites are a few bytes apart at least). */
static inline unsigned ra_slot(uintptr_t ra) {
    return (uint32_t)ra * 0x9E3779B1u >> (32 - 7);
}
_Static_assert(SEG_RA_SLOTS == 1 << 7, "ra_slot's shift");

/* The tag of a walk in the path cache: its return addresses (and, for
 * STACK+size, the size). */
static inline uint64_t path_tag(const uintptr_t *ras, unsigned n, size_t size) {
    uint64_t tag = 0x9E3779B97F4A7C15ull * (n + 1);
    for (unsigned i = 0; i < n; i++)
        tag = (tag ^ ras[i]) * 0xff51afd7ed558ccdull;
    if (hl_seg_by_size) tag ^= size * 0xC2B2AE3D27D4EB4Full;
    return hl_seg_fmix(tag) | 1;
}

static inline seg_path_slot_t *path_slot(seg_thread_t *t, uint64_t tag) {
    return &t->path[(tag >> 20) & (SEG_PATH_SLOTS - 1)];
}

/* The walk's class from its frames' keys (the path cache missed). */
static unsigned __attribute__((noinline)) decide_walk(seg_thread_t *t, const uintptr_t *ras,
                                                      unsigned n, unsigned need, size_t size,
                                                      uint64_t tag, unsigned *counter_out) {
    t->path_misses++;
    uint64_t keys[HL_SEG_MAX_DEPTH];
    if (n > HL_SEG_MAX_DEPTH) n = HL_SEG_MAX_DEPTH;
    for (unsigned i = 0; i < n; i++)
        keys[i] = hl_seg_os_key(ras[i]);
    for (unsigned i = n; i < need + 1 && i < HL_SEG_MAX_DEPTH; i++)
        keys[i] = 0; /* (the stack ended: hl_seg_decide pads with 0 anyway) */
    unsigned level;
    unsigned c = hl_seg_decide(keys, n, size, 0, &level);
    unsigned counter = seg_counter(level);
    if (hl_seg_caching) { /* (a slot is never filled otherwise: lookups need not ask) */
        seg_path_slot_t *s = path_slot(t, tag);
        s->tag = tag;
        s->cls = c;
        s->counter = counter;
    }
    t->lv[counter]++;
    *counter_out = counter;
    if (hl_seg_debug) {
        t->last_n = n;
        t->last_cls = c;
        t->last_sp = 0;
        memcpy(t->last_keys, keys, (n < 16 ? n : 16) * sizeof keys[0]);
    }
    return c;
}

/* Walk `need` more frames from the program's (hl_unwind) and decide. */
static unsigned __attribute__((noinline)) walk_and_decide(seg_thread_t *t, void *const *fp,
                                                          size_t size, uint32_t dec) {
    if (t->busy) return HL_SEG_OTHER;
    t->busy = 1;
    unsigned need = SEG_DEC_NEED(dec);
    if (need > HL_SEG_MAX_DEPTH - 1) need = HL_SEG_MAX_DEPTH - 1;
    uintptr_t ras[HL_SEG_MAX_DEPTH];
    unsigned n = hl_seg_os_walk(ras, need + 1, (uintptr_t)fp[1], (uintptr_t)(fp + 2),
                                (uintptr_t)fp[0]);
    t->frames += n;
    uint64_t tag = path_tag(ras, n, size);
    seg_path_slot_t *s = path_slot(t, tag);
    unsigned c;
    if (s->tag == tag) {
        t->path_hits++;
        t->lv[s->counter]++;
        c = s->cls;
    } else {
        unsigned counter;
        c = decide_walk(t, ras, n, need, size, tag, &counter);
    }
    t->busy = 0;
    return c;
}

/* hl_unwind's rule of ra into (rule, cfa_off, rbp_off); rule 0 where it has
 * none of the standard form (the caller then walks with hl_unwind). */
static void fill_rule(seg_thread_t *t, uintptr_t ra, uint32_t *rule, int32_t *cfa_off,
                      int32_t *rbp_off) {
    *rule = 0;
    if (!t->stack_hi) t->stack_hi = hl_unwind_stack_top((uintptr_t)__builtin_frame_address(0));
    if (!t->stack_hi) return;
    hl_unwind_rule_t r;
    switch (hl_unwind_rule(ra, &r)) {
    case HL_UNWIND_RULE_LAST:
        *rule = SEG_RULE_VALID | SEG_RULE_LAST;
        return;
    case HL_UNWIND_RULE_STD:
        if (r.cfa_off <= 0 || r.cfa_off > INT32_MAX || r.rbp_off < INT32_MIN ||
            r.rbp_off > INT32_MAX)
            return;
        /* rbp saved below the return address (so that a walk that checked the
         * CFA needs only check the saved word against the frame's sp) */
        if (r.rbp_saved && r.rbp_off > -16) return;
        *cfa_off = (int32_t)r.cfa_off;
        *rbp_off = (int32_t)r.rbp_off;
        *rule = SEG_RULE_VALID | (r.cfa_rbp ? SEG_RULE_RBP : 0) |
                (r.rbp_saved ? SEG_RULE_RBP_SAVED : 0);
        return;
    default:
        return;
    }
}

/* The rule of a return address above the first frame, from this thread's
 * rule cache (filled from hl_unwind's table on a miss). */
static inline unsigned rule_slot(uintptr_t ra) {
    return (uint32_t)ra * 0x85EBCA77u >> (32 - 6);
}
_Static_assert(SEG_RULE_SLOTS == 1 << 6, "rule_slot's shift");

static __attribute__((noinline)) const seg_rule_slot_t *rule_miss(seg_thread_t *t,
                                                                 seg_rule_slot_t *r,
                                                                 uintptr_t ra) {
    uint8_t was = t->busy;
    t->busy = 1; /* (hl_unwind's miss reads .eh_frame: no allocation, but be safe) */
    r->ra = ra;
    fill_rule(t, ra, &r->rule, &r->cfa_off, &r->rbp_off);
    t->busy = was;
    return r;
}

static inline const seg_rule_slot_t *rule_of(seg_thread_t *t, uintptr_t ra) {
    seg_rule_slot_t *r = &t->rules[rule_slot(ra)];
    if (HL_LIKELY(r->ra == ra)) return r;
    return rule_miss(t, r, ra);
}

/* Up `need` frames from the program's with the rules cached per return
 * address (the first in its ra slot, the others in the rule cache): each
 * frame is a CFA computed from sp or rbp, checked against this thread's
 * stack, and one load.  The frames are those hl_unwind's walk finds (the same
 * rules, bounds and stop at a return address below 0x4000); a frame with no
 * standard rule, or out of bounds, hands over to that walk.  (The whole
 * context every time: the tests' tables that walk always, and HEAPLAB_SEG_DEBUG,
 * which keeps the frame keys; everything else walks a prefix at a time.) */
static unsigned __attribute__((noinline)) step_and_decide(seg_thread_t *t, const seg_ra_slot_t *e,
                                                          void *const *fp, size_t size) {
    unsigned need = SEG_DEC_NEED(e->dec);
    if (need > HL_SEG_MAX_DEPTH - 1) need = HL_SEG_MAX_DEPTH - 1;
    uintptr_t ras[HL_SEG_MAX_DEPTH];
    const uintptr_t lo = (uintptr_t)(fp + 2), hi = t->stack_hi;
    uintptr_t pc = e->ra, s = lo, bp = (uintptr_t)fp[0];
    uint32_t rule = e->rule;
    int32_t cfa_off = e->cfa_off, rbp_off = e->rbp_off;
    if (HL_UNLIKELY(lo >= hi || hi - lo > (uintptr_t)1 << 30)) /* not this thread's stack */
        return walk_and_decide(t, fp, size, e->dec);
    unsigned n = 0;
    for (;;) {
        ras[n++] = pc;
        if (n > need || (rule & SEG_RULE_LAST)) break;
        if (HL_UNLIKELY(!(rule & SEG_RULE_VALID))) return walk_and_decide(t, fp, size, e->dec);
        uintptr_t cfa = ((rule & SEG_RULE_RBP) ? bp : s) + (intptr_t)cfa_off;
        if (HL_UNLIKELY(cfa <= s || cfa > hi)) return walk_and_decide(t, fp, size, e->dec);
        if (rule & SEG_RULE_RBP_SAVED) {
            uintptr_t a = cfa + (intptr_t)rbp_off;
            if (HL_UNLIKELY(a < lo || a > hi - 8)) return walk_and_decide(t, fp, size, e->dec);
            bp = *(const uintptr_t *)a;
        }
        pc = ((const uintptr_t *)cfa)[-1];
        s = cfa;
        if (pc < 0x4000) break;
        const seg_rule_slot_t *r = rule_of(t, pc);
        rule = r->rule;
        cfa_off = r->cfa_off;
        rbp_off = r->rbp_off;
    }
    t->frames += n;
    uint64_t tag = path_tag(ras, n, size);
    seg_path_slot_t *ps = path_slot(t, tag);
    unsigned c, counter;
    if (HL_LIKELY(ps->tag == tag)) {
        t->path_hits++;
        counter = ps->counter;
        t->lv[counter]++;
        c = ps->cls;
    } else {
        if (t->busy) return HL_SEG_OTHER;
        t->busy = 1;
        c = decide_walk(t, ras, n, need, size, tag, &counter);
        t->busy = 0;
    }
    return c;
}

/* ---- STACK and STACK+size: a walk a prefix at a time ----
 *
 * A walk from a return address that does not decide alone steps one frame
 * at a time; after each step the return addresses so far (ra0 .. raL, mixed
 * into a tag) index this thread's prefix cache, whose slot holds what the
 * tree says at that prefix: a class (done), or "step on" with raL's unwind
 * rule (so no other cache is read on the way), or, at STACK+size's last
 * frame, "the size decides" (the path cache, keyed by the prefix and the
 * size).  The tree's node of a prefix depends on its return addresses only
 * (each one's frame key is fixed once its module is loaded), so a slot whose
 * tag matches is exact, and a wrapper's allocation costs one step and one
 * slot: no frame key, no binary search, no verification of stack words.  A
 * slot is filled on a miss from the previous prefix's FNV state and one
 * frame key.  A frame with no standard rule, out of the thread's stack, or
 * the end of the stack hands over to walk_and_decide (hl_unwind's walk of
 * the whole context: the same class, the long way). */

#define PFX_MIX 0xff51afd7ed558ccdull

static inline unsigned pfx_index(uint64_t tag) {
    return (unsigned)(tag >> (64 - 10));
}
_Static_assert(SEG_PFX_SLOTS == 1 << 10, "pfx_index's shift");

/* The tag of ra0 alone: mixed, so that (a, b) and (b, a) differ and the
 * slot index (the product's top bits) depends on every bit of both (with a
 * rotation instead, return addresses of a program loaded low, as under
 * Valgrind, shared slots and evicted each other on every call). */
static inline uint64_t pfx_seed(uintptr_t ra) {
    return (uint64_t)ra * 0x9E3779B97F4A7C15ull;
}

/* The slot of the prefix `tag` (ra0 .. raL, raL = pc) filled from the tree,
 * given the previous prefix's slot (its FNV state; SEG_DEC_SCAN: PATH's scan
 * for a path point); NULL inside another identification. */
static __attribute__((noinline)) const seg_pfx_slot_t *pfx_miss(seg_thread_t *t, uint64_t tag,
                                                                const seg_ra_slot_t *prev,
                                                                uintptr_t pc, unsigned L) {
    if (t->busy) return NULL;
    t->busy = 1;
    t->pfx_misses++;
    const hl_seg_table_t *tb = &hl_seg_table;
    unsigned depth = tb->depth ? tb->depth : 1;
    if (depth > HL_SEG_MAX_DEPTH) depth = HL_SEG_MAX_DEPTH;
    uint32_t scan = prev->dec & SEG_DEC_SCAN;
    uint64_t key = hl_seg_os_key(pc);
    uint64_t fnv = (prev->fnv ^ key) * FNV_PRIME;
    seg_pfx_slot_t *p = &t->pfx[pfx_index(tag)];
    int v = scan ? -1 : node(hl_seg_fmix(fnv));
    uint32_t dec;
    p->rule = 0;
    if (v < 0 && tb->predictor == HL_SEG_PATH) {
        /* PATH, below a prefix training never saw: the innermost path point
         * decides (hl_seg_decide's scan, a frame at a time) */
        int c = point_class(key);
        if (c >= 0)
            dec = (uint32_t)c | (uint32_t)seg_counter(L | HL_SEG_UNKNOWN) << 24;
        else if (L + 1 >= depth)
            dec = HL_SEG_OTHER | (uint32_t)seg_counter(L | HL_SEG_UNKNOWN) << 24;
        else {
            dec = SEG_DEC_WALK | SEG_DEC_SCAN | (L & 0xffu) << 16;
            fill_rule(t, pc, &p->rule, &p->cfa_off, &p->rbp_off);
        }
    } else if (v < 0) /* a prefix training never saw: "other" */
        dec = HL_SEG_OTHER | (uint32_t)seg_counter(L | HL_SEG_UNKNOWN) << 24;
    else if (!HL_SEG_IS_WALK((unsigned)v))
        dec = ((uint32_t)v & 3u) | (uint32_t)seg_counter(L) << 24;
    else if (L + 1 >= depth) /* the last frame of a context */
        dec = tb->predictor == HL_SEG_STACK_SIZE
                  ? SEG_DEC_WALK | SEG_DEC_SIZE | (L & 0xffu) << 16
                  : HL_SEG_OTHER | (uint32_t)seg_counter(L) << 24;
    else {
        dec = SEG_DEC_WALK | (L & 0xffu) << 16;
        fill_rule(t, pc, &p->rule, &p->cfa_off, &p->rbp_off);
    }
    p->ra = tag;
    p->fnv = fnv;
    p->dec = dec;
    t->busy = 0;
    return p;
}

/* STACK+size at the context's last frame: the size's node, through the
 * path cache (keyed by the prefix and the size). */
static __attribute__((noinline)) unsigned pfx_size(seg_thread_t *t, const seg_pfx_slot_t *p,
                                                   size_t size) {
    uint64_t tag = hl_seg_fmix(p->ra ^ (uint64_t)size * 0xC2B2AE3D27D4EB4Full) | 1;
    seg_path_slot_t *s = path_slot(t, tag);
    if (HL_LIKELY(s->tag == tag)) {
        t->path_hits++;
        t->lv[s->counter]++;
        return s->cls;
    }
    t->path_misses++;
    int v = node(hl_seg_size_key(hl_seg_fmix(p->fnv), size));
    unsigned c = v < 0 || HL_SEG_IS_WALK((unsigned)v) ? HL_SEG_OTHER : (unsigned)v & 3u;
    unsigned counter = seg_counter(SEG_DEC_NEED(p->dec) | (v < 0 ? HL_SEG_UNKNOWN : 0));
    s->tag = tag;
    s->cls = c;
    s->counter = counter;
    t->lv[counter]++;
    return c;
}

/* The whole context the long way (a frame with no standard rule, out of the
 * thread's stack, the stack's end). */
static __attribute__((noinline)) unsigned pfx_long_way(seg_thread_t *t, void *const *fp,
                                                       size_t size) {
    unsigned depth = hl_seg_table.depth ? hl_seg_table.depth : 1;
    if (depth > HL_SEG_MAX_DEPTH) depth = HL_SEG_MAX_DEPTH;
    return walk_and_decide(t, fp, size, SEG_DEC_WALK | (depth - 1) << 16);
}

static unsigned step_miss(seg_thread_t *t, const seg_ra_slot_t *from, void *const *fp,
                          size_t size, uintptr_t s, uintptr_t bp);

/* The walk on from the frame whose slot `from` says "walk on" with its rule
 * (ra[]'s slot of ra0, marked SEG_DEC_PFX, or pfx[]'s of ra0 .. raL, L in
 * its SEG_DEC_NEED bits), s the stack pointer after that frame's return and
 * bp its rbp: step, look the prefix up, until a slot decides.  Six
 * arguments and only tail calls out (a slot that misses goes to step_miss,
 * which fills it and comes back), so that it needs no stack frame. */
static __attribute__((noinline)) unsigned step_on(seg_thread_t *t, const seg_ra_slot_t *from,
                                                  void *const *fp, size_t size, uintptr_t s,
                                                  uintptr_t bp) {
    if (HL_UNLIKELY(t->stack_hi - (uintptr_t)(fp + 2) > (uintptr_t)1 << 30))
        return pfx_long_way(t, fp, size); /* not this thread's stack */
    uint64_t tag = (from->dec & SEG_DEC_PFX) ? pfx_seed(from->ra) : from->ra;
    for (;;) {
        uint32_t rule = from->rule;
        if (HL_UNLIKELY((rule & (SEG_RULE_VALID | SEG_RULE_LAST)) != SEG_RULE_VALID))
            return pfx_long_way(t, fp, size);
        uintptr_t cfa = ((rule & SEG_RULE_RBP) ? bp : s) + (intptr_t)from->cfa_off;
        if (HL_UNLIKELY(cfa <= s || cfa > t->stack_hi)) return pfx_long_way(t, fp, size);
        uintptr_t nbp = bp;
        if (rule & SEG_RULE_RBP_SAVED) {
            uintptr_t a = cfa + (intptr_t)from->rbp_off; /* <= cfa - 16 (fill_rule) */
            if (HL_UNLIKELY(a < s)) return pfx_long_way(t, fp, size);
            nbp = *(const uintptr_t *)a;
        }
        uintptr_t pc = ((const uintptr_t *)cfa)[-1];
        if (HL_UNLIKELY(pc < 0x4000)) return pfx_long_way(t, fp, size);
        uint64_t ntag = (tag ^ pc) * PFX_MIX;
        const seg_pfx_slot_t *p = &t->pfx[pfx_index(ntag)];
        if (HL_UNLIKELY(p->ra != ntag)) return step_miss(t, from, fp, size, s, bp);
        t->frames++;
        uint32_t d = p->dec;
        if (HL_LIKELY(!(d & SEG_DEC_WALK))) {
            t->lv[SEG_DEC_COUNTER(d)]++;
            return SEG_DEC_CLASS(d);
        }
        if (d & SEG_DEC_SIZE) return pfx_size(t, p, size);
        from = p;
        s = cfa;
        bp = nbp;
        tag = ntag;
    }
}

/* step_on's slot missed: the same step again, the slot filled, and on. */
static __attribute__((noinline)) unsigned step_miss(seg_thread_t *t, const seg_ra_slot_t *from,
                                                    void *const *fp, size_t size, uintptr_t s,
                                                    uintptr_t bp) {
    unsigned L = (from->dec & SEG_DEC_PFX) ? 0 : SEG_DEC_NEED(from->dec);
    uint64_t tag = L ? from->ra : pfx_seed(from->ra);
    uintptr_t cfa = ((from->rule & SEG_RULE_RBP) ? bp : s) + (intptr_t)from->cfa_off;
    uintptr_t pc = ((const uintptr_t *)cfa)[-1]; /* (step_on checked the bounds) */
    if (!pfx_miss(t, (tag ^ pc) * PFX_MIX, from, pc, L + 1)) return HL_SEG_OTHER;
    return step_on(t, from, fp, size, s, bp);
}

/* The return address is not in the cache: its decision from the table. */
static unsigned first_miss(seg_thread_t *t, void *const *fp, size_t size, seg_ra_slot_t *e) {
    if (t->busy) return HL_SEG_OTHER;
    t->busy = 1;
    uintptr_t ra = (uintptr_t)fp[1];
    t->ra_misses++;
    int ready = hl_seg_os_ready() > 0;
    uint64_t k0 = ready ? hl_seg_os_key(ra) : 0;
    uint32_t d = ready ? first_decision(k0)
                       : SEG_DEC_UNKNOWN | HL_SEG_OTHER | (uint32_t)HL_SEG_LEVELS << 24;
    seg_ra_slot_t tmp, *slot = hl_seg_caching ? e : &tmp;
    slot->ra = ra;
    slot->rule = 0;
    slot->fnv = (FNV_BASIS ^ k0) * FNV_PRIME;
    if (d & SEG_DEC_WALK) fill_rule(t, ra, &slot->rule, &slot->cfa_off, &slot->rbp_off);
    /* a walk a prefix at a time where it can: a standard rule and a frame to step to */
    if (hl_seg_prefix && (d & SEG_DEC_WALK) && SEG_DEC_NEED(d) > 0 &&
        (slot->rule & (SEG_RULE_VALID | SEG_RULE_LAST)) == SEG_RULE_VALID)
        d |= SEG_DEC_PFX;
    slot->dec = d;
    t->busy = 0;
    if (d & SEG_DEC_PFX)
        return step_on(t, slot, fp, size, (uintptr_t)(fp + 2), (uintptr_t)fp[0]);
    if (d & SEG_DEC_WALK) {
        if (slot->rule & SEG_RULE_VALID) return step_and_decide(t, slot, fp, size);
        return walk_and_decide(t, fp, size, d);
    }
    t->lv[SEG_DEC_COUNTER(d)]++;
    return SEG_DEC_CLASS(d);
}

/* The return address walks further, or is not in the cache. */
static unsigned __attribute__((noinline)) identify_more(seg_thread_t *t, void *const *fp,
                                                        size_t size, seg_ra_slot_t *e) {
    if (e->ra == (uintptr_t)fp[1]) {
        if (HL_LIKELY(e->rule & SEG_RULE_VALID)) return step_and_decide(t, e, fp, size);
        return walk_and_decide(t, fp, size, e->dec);
    }
    return first_miss(t, fp, size, e);
}

/* The fast path: the return address is in this thread's cache and decides
 * alone (a dozen instructions, no stack frame). */
unsigned __attribute__((noinline)) hl_seg_identify(void *const *fp, size_t size) {
    seg_thread_t *t = &hl_seg_tls;
    __asm__("" : "+r"(t)); /* one base register for every field (gcc reloads %fs:0 otherwise) */
    uintptr_t ra = (uintptr_t)fp[1];
    seg_ra_slot_t *e = &t->ra[ra_slot(ra)];
    uint32_t d = e->dec;
    if (HL_LIKELY(e->ra == ra)) {
        if (HL_LIKELY(!(d & SEG_DEC_WALK))) {
            t->lv[SEG_DEC_COUNTER(d)]++;
            return SEG_DEC_CLASS(d);
        }
        if (HL_LIKELY(d & SEG_DEC_PFX)) {
            /* the first step, inline: a wrapper's caller decides here; a walk
             * that goes further starts again in step_on (the registers a
             * continuation would keep cost a wrapper's every call more) */
            const uintptr_t lo = (uintptr_t)(fp + 2);
            uintptr_t cfa = ((e->rule & SEG_RULE_RBP) ? (uintptr_t)fp[0] : lo) + e->cfa_off;
            if (HL_LIKELY(cfa > lo) && HL_LIKELY(cfa <= t->stack_hi)) {
                uint64_t tag = (pfx_seed(ra) ^ ((const uintptr_t *)cfa)[-1]) * PFX_MIX;
                const seg_pfx_slot_t *p = &t->pfx[pfx_index(tag)];
                uint32_t d1 = p->dec;
                if (HL_LIKELY(p->ra == tag)) {
                    if (HL_LIKELY(!(d1 & SEG_DEC_WALK))) {
                        t->frames++;
                        t->lv[SEG_DEC_COUNTER(d1)]++;
                        return SEG_DEC_CLASS(d1);
                    }
                    /* on from ra1 (its slot has the tag, the level and the rule) */
                    if (!(d1 & SEG_DEC_SIZE)) {
                        t->frames++; /* (the step to ra1; step_on counts its own) */
                        if (!(e->rule & SEG_RULE_RBP_SAVED))
                            return step_on(t, p, fp, size, cfa, (uintptr_t)fp[0]);
                        uintptr_t a = cfa + (intptr_t)e->rbp_off; /* ra0's frame saved rbp */
                        if (a >= lo) /* (and a <= cfa - 16: fill_rule) */
                            return step_on(t, p, fp, size, cfa, *(const uintptr_t *)a);
                        t->frames--;
                    }
                }
            }
            return step_on(t, e, fp, size, lo, (uintptr_t)fp[0]);
        }
    }
    return identify_more(t, fp, size, e);
}

/* SP, a stack pointer not in the cache: its depth's node. */
static __attribute__((noinline)) unsigned sp_miss(seg_thread_t *t, seg_ra_slot_t *e,
                                                  uintptr_t sp) {
    t->ra_misses++;
    uint64_t depth = hl_seg_os_ready() > 0 ? hl_seg_os_sp_depth(sp) : 0;
    unsigned level;
    unsigned c = hl_seg_decide(NULL, 0, 0, depth, &level);
    if (hl_seg_caching) {
        e->ra = sp;
        e->dec = c | (uint32_t)seg_counter(level) << 24;
        e->rule = 0;
    }
    if (hl_seg_debug) {
        t->last_n = 0;
        t->last_cls = c;
        t->last_sp = depth;
    }
    t->lv[seg_counter(level)]++;
    return c;
}

/* SP: the depth of the caller's stack pointer decides (main thread only);
 * the cache is keyed by the stack pointer.  A hit is a leaf function. */
unsigned __attribute__((noinline)) hl_seg_identify_sp(void *const *fp) {
    seg_thread_t *t = &hl_seg_tls;
    __asm__("" : "+r"(t)); /* (as in hl_seg_identify) */
    uintptr_t sp = (uintptr_t)(fp + 2);
    seg_ra_slot_t *e = &t->ra[ra_slot(sp >> 4)];
    uint32_t d = e->dec;
    if (HL_LIKELY(e->ra == sp)) {
        t->lv[SEG_DEC_COUNTER(d)]++;
        return SEG_DEC_CLASS(d);
    }
    return sp_miss(t, e, sp);
}
