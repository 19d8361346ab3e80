/*
 * seg_ident.c: which class an allocation belongs to, from its calling
 * context, in a few instructions (seg.h draws the table; HALO, Savage and
 * Jones, CGO 2020, identifies allocation contexts cheaply the same way: most
 * allocations repeat a context seen before, and only the first of each pays
 * for the walk).
 *
 *   hl_seg_identify(fp)        fp: malloc's frame (fp[1]: the return address ra0 into
 *     │                        the program; fp + 2: the program's stack pointer)
 *     ├─ 1. ctx[hash(ra0, fp)]: the context cache, keyed by the return address and
 *     │     the stack depth.  The slot holds the return addresses of the frames the
 *     │     decision looked at (ra1 .. raL: up to eight words, or a long slot's hash
 *     │     of up to twenty) and where they were on the stack (fp + off[i]): read
 *     │     those words; the same → the slot's class ─────────────────────────▶ done
 *     │     (L = 0: the return address decided alone: nothing to read)
 *     ▼
 *     2. a miss, or the same (ra0, fp) with other frames above: ra[ra0] (the return
 *        address's decision alone, from the table: a class, or "walk N frames" and
 *        its unwind rule); a walk steps frame to frame with the cached unwind rules
 *        (rules[]) from the program's frame, notes where each return address lies,
 *        and decides from the walked return addresses (path[], else their frame keys
 *        down the table's tree: hl_seg_decide); the context fills the ctx slot.
 *     3. the whole context the long way (hl_unwind's walk: a frame without a
 *        standard rule or out of bounds, the tests' walking tables, HEAPLAB_SEG_DEBUG).
 *
 * Why a context slot is exact.  The node of the table that decides depends
 * on ra0 .. raL only (a frame's key is fixed once its module is loaded).  The
 * slot was filled by a walk from the same ra0 at the same fp whose frames
 * 0 .. L-1 all had a CFA rule relative to the stack pointer (slots are not
 * filled otherwise): frame 0's CFA is fp + 16 + its offset, a constant of
 * ra0's rule, so the word at off[0] is this call's ra1; if it equals w[0],
 * frame 1 is the same code, its CFA is at the same distance again, so the
 * word at off[1] is this call's ra2; and so on.  Equal words are equal
 * return addresses, hence the same node.  (A stack that ended early is the
 * same: the outermost frame's rule says so, or the word read is the end
 * marker, which is verified like a return address.)  Reading the words is
 * safe whatever they hold: the same fp on the same thread's stack, so every
 * offset stays below the stack's top.  A long slot keeps a hash of its words
 * rather than the words: exact up to a 64-bit collision, as the overflow's
 * tags are (and two contexts that differ in one word never collide: each
 * step of the hash is a bijection of the word).
 *
 * The table lookup (hl_seg_decide) is shared with the replayer's site hints,
 * so that a replay and the real program place an allocation alike; and
 * crates/heaplab-segregate/src/tree.rs predicts with the same tree.
 *
 * Counters (per thread, summed by seg_front.c for the report): where each
 * allocation was decided (the return address alone, or after L more frames:
 * the slot's level, counted in the slot until it is replaced), how many had
 * no node ("other" by default), and the caches' misses.
 */
#include "hl_alloc.h"
#include "heaplab_site.h"
#include "hl_unwind.h"
#include "seg.h"
#include "seg_ident.h"
#include "seg_thread.h"

#include <string.h>

/* Empty caches (seg_ident.h): every lookup in them misses; nothing writes them. */
seg_ctx_t hl_seg_ctx_none[SEG_CTX_SLOTS];
seg_ra_slot_t hl_seg_ra_none[SEG_RA_SLOTS];

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
        return v < 0 || HL_SEG_IS_WALK((unsigned)v) ? HL_SEG_OTHER : (unsigned)v & 3u;
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
                if (c >= 0) return (unsigned)c & 3u; /* (as a node's: a class, never past the cores) */
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

/* The table's depth, at least 1. */
static inline unsigned table_depth(void) {
    unsigned depth = hl_seg_table.depth ? hl_seg_table.depth : 1;
    return depth > HL_SEG_MAX_DEPTH ? HL_SEG_MAX_DEPTH : depth;
}

/* The decision for a return address of key k0, alone. */
static uint32_t first_decision(uint64_t k0) {
    const hl_seg_table_t *t = &hl_seg_table;
    unsigned depth = table_depth();
    if (t->flags & HL_SEG_FLAG_WALK_ALWAYS) return SEG_DEC_WALK | (depth - 1) << 16;
    int v = node(hl_seg_fmix((FNV_BASIS ^ k0) * FNV_PRIME));
    if (v < 0) {
        if (t->predictor == HL_SEG_PATH) { /* the innermost path point: this frame, or above */
            int c = point_class(k0);
            if (c >= 0) return (uint32_t)c | (uint32_t)seg_counter(HL_SEG_UNKNOWN) << 24;
            if (depth > 1) return SEG_DEC_WALK | SEG_DEC_UNKNOWN | (depth - 1) << 16;
        }
        return SEG_DEC_UNKNOWN | HL_SEG_OTHER | (uint32_t)HL_SEG_LEVELS << 24;
    }
    if (!HL_SEG_IS_WALK((unsigned)v)) return (uint32_t)v & 3u;
    if (t->predictor == HL_SEG_STACK_SIZE && depth == 1) /* the size decides at once */
        return SEG_DEC_WALK;
    return SEG_DEC_WALK | HL_SEG_WALK_NEED((unsigned)v) << 16;
}

/* ---- the caches' slots (seg_ident.h has the context cache's and ra[]'s) ---- */

static inline unsigned ra_slot(uintptr_t ra) {
    return hl_seg_ra_slot(ra);
}

/* The tag of a walk in the path cache: its return addresses (and, for
 * STACK+size, the size). */
static inline uint64_t path_tag(const uintptr_t *ras, unsigned n, size_t size) {
    uint64_t tag = 0x9E3779B97F4A7C15ull * (n + 1);
    for (unsigned i = 0; i < n; i++)
        tag = (tag ^ ras[i]) * 0xff51afd7ed558ccdull;
    if (hl_seg_by_size) tag ^= size * 0xC2B2AE3D27D4EB4Full;
    return hl_seg_fmix(tag) | 1;
}

static inline seg_path_slot_t *path_slot(seg_tls_t *t, uint64_t tag) {
    return &t->path[(tag >> 20) & (SEG_PATH_SLOTS - 1)];
}

/* ---- deciding from walked return addresses ---- */

/* The walk's class from its frames' keys (the path cache missed). */
static unsigned __attribute__((noinline)) decide_walk(seg_tls_t *t, const uintptr_t *ras,
                                                      unsigned n, size_t size, uint64_t tag,
                                                      unsigned *counter_out) {
    t->cnt.path_misses++;
    uint64_t keys[HL_SEG_MAX_DEPTH];
    if (n > HL_SEG_MAX_DEPTH) n = HL_SEG_MAX_DEPTH;
    for (unsigned i = 0; i < n; i++)
        keys[i] = hl_seg_os_key(ras[i]);
    unsigned level;
    unsigned c = hl_seg_decide(keys, n, size, 0, &level);
    unsigned counter = seg_counter(level);
    if (hl_seg_caching) {
        seg_path_slot_t *s = path_slot(t, tag);
        s->tag = tag;
        s->cls = c;
        s->counter = counter;
    }
    *counter_out = counter;
    if (hl_seg_debug) {
        t->last_n = n;
        t->last_cls = c;
        t->last_sp = 0;
        memcpy(t->last_keys, keys, (n < 16 ? n : 16) * sizeof keys[0]);
    }
    return c;
}

/* The class of walked return addresses ras[0..n): the path cache, else the keys. */
static unsigned decide(seg_tls_t *t, const uintptr_t *ras, unsigned n, size_t size,
                       unsigned *counter) {
    uint64_t tag = path_tag(ras, n, size);
    seg_path_slot_t *ps = path_slot(t, tag);
    if (HL_LIKELY(ps->tag == tag)) {
        t->cnt.path_hits++;
        *counter = ps->counter;
        return ps->cls;
    }
    return decide_walk(t, ras, n, size, tag, counter);
}

/* Walk `need` more frames from the program's (hl_unwind) and decide. */
static unsigned __attribute__((noinline)) walk_and_decide(seg_tls_t *t, void *const *fp,
                                                          size_t size, unsigned need) {
    if (need > HL_SEG_MAX_DEPTH - 1) need = HL_SEG_MAX_DEPTH - 1;
    uintptr_t ras[HL_SEG_MAX_DEPTH];
    unsigned n = hl_seg_os_walk(ras, need + 1, (uintptr_t)fp[1], (uintptr_t)(fp + 2),
                                (uintptr_t)fp[0]);
    unsigned counter;
    unsigned c = decide(t, ras, n, size, &counter);
    t->lv[counter]++;
    return c;
}

/* ---- unwind rules ---- */

/* hl_unwind's rule of ra into (rule, cfa_off, rbp_off); rule 0 where it has
 * none of the standard form (the caller then walks with hl_unwind). */
static void fill_rule(seg_tls_t *t, uintptr_t ra, uint32_t *rule, int32_t *cfa_off,
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

static inline unsigned rule_slot(uintptr_t ra) {
    return (uint32_t)ra * 0x85EBCA77u >> (32 - 8);
}
_Static_assert(SEG_RULE_SLOTS == 1 << 8, "rule_slot's shift");

/* The rule of a return address above the first frame, from this thread's
 * rule cache (filled from hl_unwind's table on a miss). */
static inline const seg_rule_slot_t *rule_of(seg_tls_t *t, uintptr_t ra) {
    seg_rule_slot_t *r = &t->rules[rule_slot(ra)];
    if (HL_LIKELY(r->ra == ra)) return r;
    r->ra = ra;
    fill_rule(t, ra, &r->rule, &r->cfa_off, &r->rbp_off);
    return r;
}

/* ---- the walk that fills a context slot ---- */

/* A walk, and what pins its frames: every word it read whose value decided
 * where the next return address lies (the return addresses themselves, and
 * the saved rbp where a caller's CFA is relative to rbp), with its place
 * relative to fp. */
#define WALK_WORDS (2 * HL_SEG_MAX_DEPTH + 2)
typedef struct walk {
    uintptr_t ras[HL_SEG_MAX_DEPTH + 1];
    unsigned n;                 /* frames: ras[0 .. n) */
    intptr_t off[WALK_WORDS];   /* the words read, in order: at fp + off[i], value val[i] */
    uintptr_t val[WALK_WORDS];
    unsigned nv;
    unsigned nv_at[HL_SEG_MAX_DEPTH + 1]; /* how many of them pin ras[0 .. i] */
} walk_t;

/* Up `need` more frames from the program's with the rules cached per
 * return address (the first from its ra[] slot, the others from rules[]):
 * each frame is a CFA computed from sp or rbp, checked against this thread's
 * stack, and one load.  The frames are those hl_unwind's walk finds (the same
 * rules, bounds and stop at a return address below 0x4000, whose word is kept
 * too); 0 where a frame has no standard rule or falls out of bounds (the
 * caller takes hl_unwind's walk). */
static int walk_frames(seg_tls_t *t, const seg_ra_slot_t *e, void *const *fp, unsigned need,
                       walk_t *w) {
    if (need > HL_SEG_MAX_DEPTH - 1) need = HL_SEG_MAX_DEPTH - 1;
    const uintptr_t lo = (uintptr_t)(fp + 2), hi = t->stack_hi, f = (uintptr_t)fp;
    if (HL_UNLIKELY(lo >= hi || hi - lo > (uintptr_t)1 << 30)) return 0; /* not this thread's stack */
    uintptr_t pc = e->ra, s = lo, bp = (uintptr_t)fp[0];
    intptr_t bp_at = 0; /* where bp was read: fp[0], the program's rbp at the call */
    int bp_pinned = 0;
    uint32_t rule = e->rule;
    int32_t cfa_off = e->cfa_off, rbp_off = e->rbp_off;
    unsigned n = 0, nv = 0;
    w->nv_at[0] = 0;
    for (;;) {
        w->ras[n++] = pc;
        if (n > need || (rule & SEG_RULE_LAST)) break;
        if (HL_UNLIKELY(!(rule & SEG_RULE_VALID))) return 0;
        if ((rule & SEG_RULE_RBP) && !bp_pinned) { /* this CFA depends on bp's value */
            w->off[nv] = bp_at;
            w->val[nv++] = bp;
            bp_pinned = 1;
        }
        uintptr_t cfa = ((rule & SEG_RULE_RBP) ? bp : s) + (intptr_t)cfa_off;
        if (HL_UNLIKELY(cfa <= s || cfa > hi)) return 0;
        if (rule & SEG_RULE_RBP_SAVED) {
            uintptr_t a = cfa + (intptr_t)rbp_off;
            if (HL_UNLIKELY(a < lo || a > hi - 8)) return 0;
            bp = *(const uintptr_t *)a;
            bp_at = (intptr_t)(a - f);
            bp_pinned = 0;
        }
        pc = ((const uintptr_t *)cfa)[-1];
        w->off[nv] = (intptr_t)(cfa - 8 - f);
        w->val[nv++] = pc;
        w->nv_at[n] = nv;
        s = cfa;
        if (pc < 0x4000) break; /* the end marker: hl_unwind stops here too */
        const seg_rule_slot_t *r = rule_of(t, pc);
        rule = r->rule;
        cfa_off = r->cfa_off;
        rbp_off = r->rbp_off;
    }
    w->n = n;
    w->nv = nv;
    return 1;
}

/* ---- the context cache ---- */

/* Where slot e's word i lies (a slot of three words or more has its second offset
 * odd, so that the fast path, which compares two, never matches it). */
static inline intptr_t off_at(const seg_ctx_t *e, unsigned i) {
    return e->off[i] & ~1;
}

/* A long slot's hash of the words at its offsets on the stack at fp (a
 * chain like the overflow's tags: each step is a bijection of the word, so
 * contexts that differ in one word never hash alike). */
static inline uint64_t long_tag(const seg_ctx_t *e, void *const *fp) {
    const char *f = (const char *)fp;
    uint64_t h = 0x9E3779B97F4A7C15ull;
    for (unsigned i = 0; i < e->nl; i++)
        h = (h ^ *(const uintptr_t *)(f + e->lg.off[i])) * 0xff51afd7ed558ccdull;
    return h;
}

/* Is slot e a long slot whose words are this call's? */
static inline int long_verifies(const seg_ctx_t *e, void *const *fp) {
    return (e->flags & SEG_CTX_LONG) && long_tag(e, fp) == e->lg.tag;
}

/* A slot is replaced: the decisions it served count where it decided. */
static inline void retire(seg_tls_t *t, seg_ctx_t *e) {
    if (e->ra) t->lv[e->counter] += e->hits;
    e->hits = 0;
}

/* Fills slot e for the context of a walk decided at `counter`: the words
 * that pin frames 0 .. L (all the walk read where the decision looked past
 * the stack's end).  Returns 0 where it cannot keep it. */
static int ctx_fill(seg_tls_t *t, seg_ctx_t *e, void *const *fp, const walk_t *w,
                    unsigned cls, unsigned counter) {
    unsigned L = counter % HL_SEG_LEVELS;
    if (hl_seg_by_size) L = w->n - 1; /* the size decides after every frame walked */
    unsigned k = L < w->n ? w->nv_at[L] : w->nv; /* words to verify */
    int long_slot = k > SEG_CTX_WORDS && !hl_seg_by_size;
    if (k > (long_slot ? SEG_CTX_LONG_WORDS : SEG_CTX_WORDS - (hl_seg_by_size ? 1 : 0))) return 0;
    for (unsigned i = 0; i < k; i++)
        if (w->off[i] < INT16_MIN || w->off[i] > INT16_MAX) return 0;
    retire(t, e);
    e->ra = (uintptr_t)fp[1];
    e->fp = (uintptr_t)fp;
    if (long_slot) { /* seg_thread.h draws it */
        e->off[0] = e->off[1] = 8;
        e->lg.w0 = ~e->ra; /* (never equal: the fast path and the slot checks never take it) */
        e->lg.w1 = e->ra;
        for (unsigned i = 0; i < k; i++)
            e->lg.off[i] = (int16_t)w->off[i];
        e->nl = (uint8_t)k;
        e->lg.tag = long_tag(e, fp);
        e->n = 0;
        e->flags = SEG_CTX_LONG;
        t->cnt.longs++;
    } else {
        for (unsigned i = 0; i < (k > 2 ? k : 2); i++) { /* (words past n and 2 are never read) */
            e->off[i] = i < k ? (int16_t)w->off[i] : 8; /* fp[1] is ra0: always equal */
            e->w[i] = i < k ? w->val[i] : e->ra;
        }
        e->n = (uint8_t)k;
        e->flags = 0;
    }
    e->cls = (uint8_t)cls;
    e->core = (uint16_t)(cls << SEG_CORE_SHIFT);
    e->counter = (uint8_t)counter;
    e->salt = ++t->salt;
    if (hl_seg_by_size) { /* the size decides: never a plain hit (see hl_seg_identify) */
        e->cls = SEG_CTX_SIZE;
        e->w[k] = ~e->ra;
        e->off[k] = 8;
        e->n = (uint8_t)(k + 1);
    }
    if (e->n > 2) e->off[1] |= 1;
    return 1;
}

/* The ra[] slot of ra0: its decision alone, and its rule. */
static seg_ra_slot_t *ra_entry(seg_tls_t *t, uintptr_t ra) {
    seg_ra_slot_t *r = &t->ra[ra_slot(ra)];
    if (HL_LIKELY(r->ra == ra)) return r;
    t->cnt.ra_misses++;
    int ready = hl_seg_os_ready() > 0;
    uint64_t k0 = ready ? hl_seg_os_key(ra) : 0;
    uint32_t d = ready ? first_decision(k0)
                       : SEG_DEC_UNKNOWN | HL_SEG_OTHER | (uint32_t)HL_SEG_LEVELS << 24;
    r->rule = 0;
    if (d & SEG_DEC_WALK) fill_rule(t, ra, &r->rule, &r->cfa_off, &r->rbp_off);
    r->dec = d;
    r->hits = 0;
    r->ra = hl_seg_caching ? ra : 0;
    return r;
}

/* STACK+size: the tag of a context slot's frames (its verified words pin
 * them) and a size, in the path cache. */
static inline uint64_t size_tag(const seg_ctx_t *e, size_t size) {
    uint64_t tag = (e->ra ^ 0x5bd1e995ull) * 0xff51afd7ed558ccdull;
    for (unsigned i = 0; i < e->n; i++)
        tag = (tag ^ e->w[i] ^ (uint64_t)(uint16_t)e->off[i] << 48) * 0xff51afd7ed558ccdull;
    return hl_seg_fmix(tag ^ size * 0xC2B2AE3D27D4EB4Full) | 1;
}

/* ---- the overflow of the context cache ---- */

static inline unsigned cx_index(uint64_t tag) {
    return (unsigned)(tag >> (64 - 12));
}
_Static_assert(SEG_CX_SLOTS == 1 << 12, "cx_index's shift");

/* Slot e's words past the second against this call's at fp, from the last
 * down: their differences or'ed into *x and mixed into *tag, as the
 * overflow's tags mix them.  Unrolled (a slot keeps at most eight; a long
 * slot's n is 0), so that a deep slot's check and its tag are one pass. */
static inline __attribute__((always_inline)) void words_rest(const seg_ctx_t *e, const char *f,
                                                           uintptr_t *x, uint64_t *tag) {
    uintptr_t y = *x;
    uint64_t h = *tag;
#define SEG_WORD(i)                                                        \
    do {                                                                   \
        uintptr_t d = *(const uintptr_t *)(f + e->off[i]) ^ e->w[i];       \
        y |= d;                                                            \
        h = (h ^ d) * 0x9E3779B97F4A7C15ull;                               \
    } while (0)
    switch (e->n) {
    case 8: SEG_WORD(7); /* fallthrough */
    case 7: SEG_WORD(6); /* fallthrough */
    case 6: SEG_WORD(5); /* fallthrough */
    case 5: SEG_WORD(4); /* fallthrough */
    case 4: SEG_WORD(3); /* fallthrough */
    case 3: SEG_WORD(2); /* fallthrough */
    default: break;
    }
#undef SEG_WORD
    *x = y;
    *tag = h;
}
_Static_assert(SEG_CTX_WORDS == 8, "words_rest's cases");

/* The overflow's tag of this call's words at slot e's offsets, from how
 * they differ from e's own (x0, x1: the first two; the others are read here)
 * and e's salt: equal tags, equal words at the same offsets under the same
 * (ra, fp), hence the same context (up to a 64-bit hash collision). */
static inline uint64_t cx_tag2(const seg_ctx_t *e, uintptr_t x0, uintptr_t x1) {
    uint64_t tag = (x0 ^ e->salt) * 0xff51afd7ed558ccdull;
    return (tag ^ x1) * 0xc4ceb9fe1a85ec53ull;
}
static inline uint64_t cx_tag(const seg_ctx_t *e, void *const *fp, uintptr_t x0, uintptr_t x1) {
    uint64_t tag = cx_tag2(e, x0, x1);
    uintptr_t x = 0;
    words_rest(e, (const char *)fp, &x, &tag);
    return tag | 1;
}

/* The differences of this call's first two words from slot e's. */
static inline void ctx_diff(const seg_ctx_t *e, void *const *fp, uintptr_t *x0, uintptr_t *x1) {
    const char *f = (const char *)fp;
    *x0 = *(const uintptr_t *)(f + e->off[0]) ^ e->w[0];
    *x1 = *(const uintptr_t *)(f + (e->off[1] & ~1)) ^ e->w[1]; /* (odd: a slot of three words or more) */
}

/* Slot e's shape serves the walk's context in the overflow: the walk read
 * a word at each of e's offsets (the same places), and its decision needs
 * no word e does not verify.  (A context that needs fewer words than e's
 * is then keyed by more than it needs: exact still, only more entries.) */
static int same_offsets(const seg_ctx_t *e, const walk_t *w, unsigned counter) {
    unsigned L = counter % HL_SEG_LEVELS;
    unsigned k = L < w->n ? w->nv_at[L] : w->nv;
    if ((e->flags & SEG_CTX_LONG) || k > e->n || e->n > w->nv) return 0;
    for (unsigned i = 0; i < e->n; i++)
        if (w->off[i] != off_at(e, i)) return 0;
    return 1;
}

/* Does slot e hold (ra, fp), and are the words at its offsets its words? */
static inline int ctx_holds(const seg_ctx_t *e, uintptr_t ra, void *const *fp) {
    return e->ra == ra && e->fp == (uintptr_t)fp;
}
static inline int ctx_verifies(const seg_ctx_t *e, void *const *fp) {
    if (HL_UNLIKELY(e->flags & SEG_CTX_LONG)) return long_verifies(e, fp);
    const char *f = (const char *)fp;
    uintptr_t x = 0;
    for (unsigned i = 0; i < e->n; i++)
        x |= *(const uintptr_t *)(f + off_at(e, i)) ^ e->w[i];
    return x == 0;
}

/* The overflow's class for the words at slot e's offsets, or -1. */
static inline int cx_find(seg_tls_t *t, const seg_ctx_t *e, void *const *fp, uint64_t *tag) {
    uintptr_t x0, x1;
    ctx_diff(e, fp, &x0, &x1);
    *tag = cx_tag(e, fp, x0, x1);
    seg_cx_t *x = &t->cx[cx_index(*tag)];
    if (HL_LIKELY(x->tag != *tag)) return -1;
    t->lv[x->counter]++;
    t->cnt.cx_hits++;
    return x->cls;
}

static void cx_put(seg_tls_t *t, uint64_t tag, unsigned cls, unsigned counter) {
    seg_cx_t *x = &t->cx[cx_index(tag)];
    x->tag = tag;
    x->cls = (uint8_t)cls;
    x->counter = (uint8_t)counter;
}

/* Slot `to` now holds what `from` held (`from` is free for another context). */
static inline void ctx_move(seg_tls_t *t, seg_ctx_t *to, seg_ctx_t *from) {
    retire(t, to);
    *to = *from;
    from->ra = 0; /* (its hits went with it) */
    from->hits = 0;
}

/* The decision for a (ra, fp) no way's words pin: the return address
 * alone, or a walk.  e: the slot to fill (when it can keep the context;
 * hl_seg_caching); shape[0 .. nshapes): the set's slots of this (ra, fp),
 * cxt[] their overflow tags, where a context of the same shape goes instead. */
static unsigned decide_and_fill(seg_tls_t *t, seg_ctx_t *e, seg_ctx_t *const *shape,
                                const uint64_t *cxt, unsigned nshapes, void *const *fp,
                                size_t size) {
    uintptr_t ra = (uintptr_t)fp[1];
    unsigned c, counter;
    seg_ra_slot_t *r = ra_entry(t, ra);
    if (!(r->dec & SEG_DEC_WALK)) { /* the return address decides alone */
        c = SEG_DEC_CLASS(r->dec);
        counter = SEG_DEC_COUNTER(r->dec);
        t->lv[counter]++;
        if (hl_seg_caching) {
            retire(t, e);
            e->ra = ra;
            e->fp = (uintptr_t)fp;
            for (unsigned i = 0; i < 2; i++) { /* (the fast path's two; n = 0 reads no more) */
                e->off[i] = 8;
                e->w[i] = ra;
            }
            e->n = 0;
            e->flags = 0;
            e->cls = (uint8_t)c;
            e->core = (uint16_t)(c << SEG_CORE_SHIFT);
            e->counter = (uint8_t)counter;
            e->salt = ++t->salt;
        }
        return c;
    }
    t->cnt.walks++;
    walk_t w;
    if (!(r->rule & SEG_RULE_VALID) || !walk_frames(t, r, fp, SEG_DEC_NEED(r->dec), &w)) {
        t->cnt.uncached++;
        return walk_and_decide(t, fp, size, SEG_DEC_NEED(r->dec)); /* the long way */
    }
    c = decide(t, w.ras, w.n, size, &counter);
    t->lv[counter]++;
    for (unsigned i = 0; i < nshapes; i++)
        if (same_offsets(shape[i], &w, counter)) { /* another context of a shape the set has */
            cx_put(t, cxt[i], c, counter);
            return c;
        }
    if (!hl_seg_caching || !ctx_fill(t, e, fp, &w, c, counter)) {
        t->cnt.uncached++;
    } else if (hl_seg_by_size) { /* the size's class under the slot's frames */
        uint64_t stag = size_tag(e, size);
        seg_path_slot_t *ps = path_slot(t, stag);
        ps->tag = stag;
        ps->cls = c;
        ps->counter = counter;
    }
    return c;
}

/* STACK+size: slot e's frames are this call's; the size decides (the path
 * cache, keyed by the slot's words and the size), or -1. */
static int size_find(seg_tls_t *t, const seg_ctx_t *e, void *const *fp, size_t size) {
    const char *f = (const char *)fp;
    for (unsigned i = 0; i < e->n; i++)
        if (e->w[i] != ~e->ra && *(const uintptr_t *)(f + off_at(e, i)) != e->w[i]) return -1;
    uint64_t stag = size_tag(e, size);
    seg_path_slot_t *ps = path_slot(t, stag);
    if (HL_LIKELY(ps->tag != stag)) return -1;
    t->cnt.path_hits++;
    t->lv[ps->counter]++;
    return (int)ps->cls;
}

/* The way of slot e's set to fill with a new context: an empty one, else
 * the one that served the fewest decisions (never the first: it moves). */
static seg_ctx_t *victim(seg_ctx_t *e) {
    seg_ctx_t *v = e + 1;
    for (unsigned i = 1; i < SEG_CTX_WAYS; i++) {
        if (!e[i].ra) return &e[i];
        if (e[i].hits < v->hits) v = &e[i];
    }
    return v;
}

/* Everything but a hit in the first way: e is the set's first way, which
 * holds this (ra, fp) with other frames above (`other`), or another (ra, fp). */
static unsigned __attribute__((noinline)) ident_more(seg_tls_t *t, seg_ctx_t *e,
                                                     void *const *fp, size_t size, int other) {
    if (t->busy) return HL_SEG_OTHER; /* a malloc made while we walk (there should be none) */
    uintptr_t ra = (uintptr_t)fp[1];
    seg_ctx_t *shape[SEG_CTX_WAYS]; /* the set's slots of this (ra, fp) */
    uint64_t cxt[SEG_CTX_WAYS];
    unsigned n = 0;
    for (unsigned i = 0; i < SEG_CTX_WAYS; i++)
        if (ctx_holds(&e[i], ra, fp)) shape[n++] = &e[i];
    for (unsigned i = 0; i < n; i++) {
        int c = -1;
        if (hl_seg_by_size) /* the frames may be the same: then the size decides */
            c = size_find(t, shape[i], fp, size);
        else if (ctx_verifies(shape[i], fp)) {
            shape[i]->hits++;
            return shape[i]->cls;
        } else if (hl_seg_caching && !(shape[i]->flags & SEG_CTX_LONG))
            c = cx_find(t, shape[i], fp, &cxt[i]);
        if (c >= 0) return (unsigned)c;
    }
    if (hl_seg_by_size || !hl_seg_caching) n = 0; /* (no overflow) */
    t->busy = 1;
    if (n || other)
        t->cnt.ctx_others++;
    else
        t->cnt.ctx_misses++;
    seg_ctx_t *fill = e;
    if (n == 1 && shape[0] != e) { /* a second shape of a (ra, fp) the first way does not
                                      hold: it takes the first way (this (ra, fp) is the one
                                      in use), its new shape the way it leaves */
        fill = shape[0];
        ctx_move(t, e, fill);
        shape[0] = e;
    } else if (n > 1) { /* a new shape: in place of the least used other way of this (ra, fp) */
        fill = NULL;
        for (unsigned i = 0; i < n; i++)
            if (shape[i] != e && (!fill || shape[i]->hits < fill->hits)) fill = shape[i];
    } else if (other) { /* the first way's shape stays: another way */
        fill = victim(e);
    } else if (hl_seg_caching && e->ra) { /* a new (ra, fp): the first way's moves over */
        seg_ctx_t *v = victim(e);
        ctx_move(t, v, e);
    }
    unsigned c = decide_and_fill(t, fill, shape, cxt, n, fp, size);
    t->busy = 0;
    return c;
}

/* The overflow's class for the tag, or -1. */
static inline int cx_probe(seg_tls_t *t, uint64_t tag) {
    seg_cx_t *x = &t->cx[cx_index(tag)];
    if (HL_LIKELY(x->tag != tag)) return -1;
    t->lv[x->counter]++;
    t->cnt.cx_hits++;
    return x->cls;
}

/* Way b of e's set holds this (ra, fp): its words, or the overflow under its
 * shape; -1 if neither knows this call's context.  The way becomes the
 * first once it has served more. */
static inline int way_k(seg_tls_t *t, seg_ctx_t *e, seg_ctx_t *b, void *const *fp) {
    if (b->cls == SEG_CTX_SIZE) return -1;
    if (HL_UNLIKELY(b->flags & SEG_CTX_LONG)) {
        if (!long_verifies(b, fp)) return -1;
        b->hits++;
        return b->cls;
    }
    uintptr_t y0, y1;
    ctx_diff(b, fp, &y0, &y1);
    uintptr_t y = y0 | y1;
    uint64_t tag = cx_tag2(b, y0, y1);
    words_rest(b, (const char *)fp, &y, &tag); /* (a slot of three words or more: all of them) */
    if (!y) {
        unsigned c = b->cls;
        if (++b->hits > e->hits) { /* promote it: the fast path looks at the first way */
            seg_ctx_t tmp = *e;
            *e = *b;
            *b = tmp;
        }
        return (int)c;
    }
    return cx_probe(t, tag | 1);
}

/* The other ways of e's set that hold (ra, fp): one's class, or -1. */
static inline int other_ways(seg_tls_t *t, seg_ctx_t *e, uintptr_t ra, void *const *fp) {
    for (unsigned i = 1; i < SEG_CTX_WAYS; i++)
        if (e[i].ra == ra && e[i].fp == (uintptr_t)fp) {
            int c = way_k(t, e, &e[i], fp);
            if (c >= 0) return c;
        }
    return -1;
}

/* The thread's caches are not where its lookups look (seg_ident.h): it has
 * not started; a site hint or calloc's handoff is pending; or its predictor
 * keeps no caches. */
static unsigned __attribute__((noinline)) ident_redirected(void *const *fp, size_t size,
                                                           seg_tls_t *t) {
    if (t->state == SEG_T_NEW) hl_seg_thread_start(t);
    unsigned c = HL_SEG_OTHER;
    int pending = t->pend == SEG_PEND_HINT || t->pend == SEG_PEND_CALLOC;
    if (pending) {
        c = t->hint_cls < HL_SEG_CLASSES ? t->hint_cls : HL_SEG_OTHER;
        if (t->pend == SEG_PEND_HINT) t->hinted[c]++;
        t->pend = SEG_PEND_NONE;
    }
    hl_seg_ident_home(t);
    if (pending) return c;
    if (t->ctxp == t->ctx) return hl_seg_identify_fast(fp, size, t);
    if (t->spp == t->ra) return hl_seg_identify_sp_fast(fp, size, t);
    if (t->ident_mode == hl_seg_ident_start) return HL_SEG_OTHER; /* (a call during the start) */
    return t->ident_mode(fp, size, t); /* a walk every time, or no identification */
}

/* The first way holds another (ra, fp): the other ways, else the rest. */
unsigned __attribute__((noinline)) hl_seg_ident_miss(void *const *fp, size_t size, seg_tls_t *t,
                                                     seg_ctx_t *e) {
    if (HL_UNLIKELY(t->ctxp != t->ctx)) return ident_redirected(fp, size, t);
    int c = other_ways(t, e, (uintptr_t)fp[1], fp);
    if (c >= 0) return (unsigned)c;
    return ident_more(t, e, fp, size, 0);
}

/* ident_other without the overflow's hit: the other ways, then the rest
 * (ident_more). */
static unsigned __attribute__((noinline)) ident_other2(void *const *fp, size_t size, seg_tls_t *t,
                                                       seg_ctx_t *e) {
    if (HL_UNLIKELY(e->cls == SEG_CTX_SIZE)) return ident_more(t, e, fp, size, 1);
    if (long_verifies(e, fp)) { /* a long slot's hit (its n is 0: hl_seg_ident_other read no words) */
        e->hits++;
        return e->cls;
    }
    int k = other_ways(t, e, e->ra, fp);
    if (k >= 0) return (unsigned)k;
    return ident_more(t, e, fp, size, 1);
}

/* The overflow's class for a tag, else ident_other2. */
static inline unsigned other_probe(void *const *fp, size_t size, seg_tls_t *t, seg_ctx_t *e,
                                   uint64_t tag) {
    seg_cx_t *c = &t->cx[cx_index(tag | 1)];
    if (HL_LIKELY(c->tag == (tag | 1))) {
        t->lv[c->counter]++;
        return c->cls;
    }
    return ident_other2(fp, size, t, e);
}

/* hl_seg_ident_other for a slot of four words or more (jsonparse's deep
 * contexts): all its words, then the overflow, as cx_tag's. */
static unsigned __attribute__((noinline)) ident_other_deep(void *const *fp, size_t size,
                                                           seg_tls_t *t, seg_ctx_t *e,
                                                           uintptr_t x0, uintptr_t x1) {
    uintptr_t x = x0 | x1;
    uint64_t tag = cx_tag2(e, x0, x1);
    words_rest(e, (const char *)fp, &x, &tag);
    if (!x && e->cls != SEG_CTX_SIZE) {
        e->hits++;
        return e->cls;
    }
    return other_probe(fp, size, t, e, tag);
}

/* The first way holds this (ra, fp), and the two words the fast path
 * compared differ (y0, y1: the words read; or it is a slot of three words or more): all its words, the
 * overflow under the slot's shape, else ident_other2.  (Its own function,
 * so that this path saves no register: a slot of four words or more goes on
 * in ident_other_deep.)  The redirected lookups never come here: the empty
 * caches hold no (ra, fp). */
unsigned __attribute__((noinline)) hl_seg_ident_other(void *const *fp, size_t size, seg_tls_t *t,
                                                      seg_ctx_t *e, uintptr_t y0, uintptr_t y1) {
    /* (a STACK+size slot's tag matches nothing: no context of its goes to the overflow) */
    const char *f = (const char *)fp;
    uintptr_t x0 = y0 ^ e->w[0], x1 = y1 ^ e->w[1];
    if (HL_UNLIKELY(e->n > 2)) { /* a slot of three words: its hit before the overflow */
        /* (the fast path read its second word at the odd offset: again, aligned) */
        x1 = *(const uintptr_t *)(f + (e->off[1] & ~1)) ^ e->w[1];
        if (e->n > 3) return ident_other_deep(fp, size, t, e, x0, x1);
        uintptr_t x2 = *(const uintptr_t *)(f + e->off[2]) ^ e->w[2];
        if (!(x0 | x1 | x2) && e->cls != SEG_CTX_SIZE) {
            e->hits++;
            return e->cls;
        }
    }
    return other_probe(fp, size, t, e, cx_tag(e, fp, x0, x1));
}

/* The identification of PATH and STACK where the front end calls it (the
 * shim built for every predictor: t->ident), and of STACK+size. */
unsigned __attribute__((noinline)) hl_seg_identify(void *const *fp, size_t size, seg_tls_t *t) {
    (void)size;
    return hl_seg_identify_fast(fp, 0, t);
}

unsigned __attribute__((noinline)) hl_seg_identify_size(void *const *fp, size_t size,
                                                        seg_tls_t *t) {
    return hl_seg_identify_fast(fp, size, t);
}

/* The decisions the slots served since they were filled (seg_front.c). */
void hl_seg_ident_count(const seg_tls_t *t, uint64_t lv[2 * HL_SEG_LEVELS]) {
    if (!t->ctx) return; /* (a thread that never started) */
    for (unsigned i = 0; i < SEG_CTX_SLOTS; i++)
        if (t->ctx[i].ra) lv[t->ctx[i].counter] += t->ctx[i].hits;
    for (unsigned i = 0; i < SEG_RA_SLOTS; i++)
        if (t->ra[i].ra) lv[SEG_DEC_COUNTER(t->ra[i].dec)] += t->ra[i].hits;
}

/* ---- without the caches (HEAPLAB_SEG_DEBUG, the tests' tables) ---- */

/* Every allocation walks (hl_seg_identify's stand-in when nothing is kept). */
static unsigned __attribute__((noinline)) ident_uncached(void *const *fp, size_t size,
                                                         seg_tls_t *t) {
    if (t->busy) return HL_SEG_OTHER;
    t->busy = 1;
    uintptr_t ra = (uintptr_t)fp[1];
    int ready = hl_seg_os_ready() > 0;
    uint64_t k0 = ready ? hl_seg_os_key(ra) : 0;
    uint32_t d = ready ? first_decision(k0)
                       : SEG_DEC_UNKNOWN | HL_SEG_OTHER | (uint32_t)HL_SEG_LEVELS << 24;
    unsigned c;
    if (d & SEG_DEC_WALK) {
        c = walk_and_decide(t, fp, size, SEG_DEC_NEED(d));
    } else {
        c = SEG_DEC_CLASS(d);
        t->lv[SEG_DEC_COUNTER(d)]++;
        if (hl_seg_debug) { /* a walk of the whole context, for heaplab_seg_last */
            uintptr_t ras[HL_SEG_MAX_DEPTH];
            unsigned n = hl_seg_os_walk(ras, table_depth(), ra, (uintptr_t)(fp + 2),
                                        (uintptr_t)fp[0]);
            t->last_n = n < 16 ? n : 16;
            t->last_cls = c;
            t->last_sp = 0;
            for (unsigned i = 0; i < t->last_n; i++)
                t->last_keys[i] = hl_seg_os_key(ras[i]);
        }
    }
    t->busy = 0;
    return c;
}

/* The identification a thread uses for PATH, STACK and STACK+size. */
seg_ident_fn hl_seg_ident_of_stack(void) {
    return !hl_seg_caching ? ident_uncached : hl_seg_by_size ? hl_seg_identify_size : hl_seg_identify;
}

/* ---- SP ---- */

/* SP, a stack pointer not in the cache: its depth's node. */
static unsigned sp_decide(seg_tls_t *t, seg_ra_slot_t *e, uintptr_t sp) {
    t->cnt.ra_misses++;
    uint64_t depth = hl_seg_os_ready() > 0 ? hl_seg_os_sp_depth(sp) : 0;
    unsigned level;
    unsigned c = hl_seg_decide(NULL, 0, 0, depth, &level);
    unsigned counter = seg_counter(level);
    if (e) {
        if (e->ra) t->lv[SEG_DEC_COUNTER(e->dec)] += e->hits;
        e->ra = sp;
        e->dec = c | (uint32_t)counter << 24;
        e->core = c << SEG_CORE_SHIFT;
        e->hits = 0;
    }
    if (hl_seg_debug) {
        t->last_n = 0;
        t->last_cls = c;
        t->last_sp = depth;
    }
    t->lv[counter]++;
    return c;
}

unsigned __attribute__((noinline)) hl_seg_sp_miss(void *const *fp, size_t size, seg_tls_t *t,
                                                  seg_ra_slot_t *e) {
    if (HL_UNLIKELY(t->spp != t->ra)) return ident_redirected(fp, size, t);
    return sp_decide(t, e, (uintptr_t)(fp + 2));
}

/* SP where the front end calls it (t->ident), and without the cache. */
unsigned __attribute__((noinline)) hl_seg_identify_sp(void *const *fp, size_t size,
                                                      seg_tls_t *t) {
    return hl_seg_identify_sp_fast(fp, size, t);
}

static unsigned __attribute__((noinline)) ident_sp_uncached(void *const *fp, size_t size,
                                                            seg_tls_t *t) {
    (void)size;
    return sp_decide(t, NULL, (uintptr_t)(fp + 2));
}

seg_ident_fn hl_seg_ident_of_sp(void) {
    return hl_seg_caching ? hl_seg_identify_sp : ident_sp_uncached;
}

/* Where the thread's lookups look: its own caches where its predictor keeps
 * them (after its start), else the empty ones; and its identification. */
void hl_seg_ident_home(seg_tls_t *t) {
    t->ident = t->ident_mode;
    t->ctxp = t->caches_on && hl_seg_mode == SEG_MODE_STACK ? t->ctx : hl_seg_ctx_none;
    t->spp = t->caches_on && hl_seg_mode == SEG_MODE_SP ? t->ra : hl_seg_ra_none;
}

/* The next lookup misses (a site hint, calloc's handoff: seg_ident.h). */
void hl_seg_ident_away(seg_tls_t *t) {
    t->ctxp = hl_seg_ctx_none;
    t->spp = hl_seg_ra_none;
}
