/*
 * seg.h: what the segmented allocator (segregated.c), its identification of
 * calling contexts (seg_ident.c), its front end (seg_front.h, seg_front.c),
 * its operating-system side (seg_os.c) and an emitted predictor table share.
 * Paper 001 (Seidl and Zorn) §3 and §4.2.
 *
 *   program ──▶ shim.c malloc ──(HL_FRONT_MALLOC, no lock: seg_front.h)──┐
 *                                                                        ▼
 *     segment = t->ident(malloc's frame)           the calling context's class (seg_ident.c):
 *               │   1. this thread's context cache: (return address, stack depth) and
 *               │      the return addresses above it → class (most calls end here)
 *               │   2. the table's node for the return address: a class, or "ambiguous:
 *               │      walk N more frames" (from the program's frame, never the allocator's)
 *               │   3. the walked frames down the table's tree (a cache of walks first)
 *               ▼
 *     the segment's fast core (native/alloc/fastcore.h): this thread's list or slab of
 *               │ the size's class, no lock
 *               │ miss: sf_malloc_slow; else the lock, with the segment pending
 *               ▼
 *     (the lock) hl_alloc_segregated.malloc ─▶ the segment's core (slot 0) or best-fit heap
 *
 *             other │ SL │ HR │ not-HR    four fast cores and four best-fit heaps
 *
 *   replayer ──▶ heaplab_site_hint(site) ──▶ hl_alloc_segregated.site_hint: the
 *                same decision from the recorded frame keys (hl_seg_decide), for
 *                the next allocation.
 *
 * The table: a tree of call-site prefixes
 * ---------------------------------------
 *
 * `heaplab segregate` trains a predictor on contexts (the first `depth`
 * frame keys of each allocation, padded with 0 where a stack is shorter) and
 * emits it as a tree whose nodes are keyed by the hash of a prefix:
 *
 *   node(k0)           = LEAF(c)   every training context under k0 gets class c:
 *                                  the return address alone decides
 *                      | WALK(n)   they disagree: look at the next frames (at most
 *                                  n more are needed anywhere below)
 *   node(k0, k1)       = LEAF(c) | WALK(n)        key = heaplab_site_hash(k, 2)
 *   ...
 *   node(k0 .. kd-1)   = LEAF(c)                  (STACK+size: WALK(0), then
 *   node(size)         = LEAF(c)                   key = hl_seg_size_key(hash, size))
 *
 * A prefix with no node was never seen in training: its class is "other",
 * except for PATH, where the innermost path point among the frames that
 * follow decides (the table's `points`), as the paper's PATH does.  SP has
 * one node per stack depth (key hl_seg_sp_key), always a leaf.
 *
 * An emitted table (heaplab segregate) is one C file that defines
 * `const hl_seg_table_t hl_seg_table`; default_table.c is DEFAULT's (one
 * segment, no prediction).  crates/heaplab-segregate/src/tree.rs builds the
 * same tree and predicts with it, so that the study's figures describe what
 * the allocator does.
 */
#ifndef HL_SEG_H
#define HL_SEG_H

#include <stddef.h>
#include <stdint.h>

#define HL_SEG_TABLE_VERSION 2

/* Predictors (crates/heaplab-segregate, predictors::Kind::code). */
enum {
    HL_SEG_DEFAULT = 0,    /* one segment */
    HL_SEG_SP = 1,         /* stack depth in bytes → class */
    HL_SEG_PATH = 2,       /* innermost path point on the stack → class */
    HL_SEG_STACK = 3,      /* the last `depth` call sites → class */
    HL_SEG_STACK_SIZE = 4, /* those and the size → class */
    HL_SEG_RANDOM = 5,     /* a uniformly random segment (the control) */
};

/* Classes, which are also segment indices (classes::Class). */
enum { HL_SEG_OTHER = 0, HL_SEG_SL = 1, HL_SEG_HR = 2, HL_SEG_NOTHR = 3, HL_SEG_CLASSES = 4 };

/* A node's value: a leaf's class, or "walk": look at the next frame (at most
 * `n` more frames are needed below this node; 0 after the last frame of
 * STACK+size: the size decides). */
#define HL_SEG_WALK           0x80u
#define HL_SEG_LEAF(c)        ((uint8_t)(c))
#define HL_SEG_WALKS(n)       ((uint8_t)(HL_SEG_WALK | (n)))
#define HL_SEG_IS_WALK(v)     (((v)&HL_SEG_WALK) != 0)
#define HL_SEG_WALK_NEED(v)   ((unsigned)(v)&0x7fu)
#define HL_SEG_MAX_DEPTH      64

/* Table flags. */
#define HL_SEG_FLAG_WALK_ALWAYS 1u /* tests: every return address is ambiguous, so that every
                                      allocation walks `depth` frames and computes their keys */
#define HL_SEG_FLAG_NO_CACHE 2u    /* tests: no per-thread caches of decisions */

typedef struct hl_seg_table {
    uint32_t version;   /* HL_SEG_TABLE_VERSION */
    uint32_t predictor; /* HL_SEG_* */
    uint32_t depth;     /* frames in a context (STACK: k; PATH: the frames recorded) */
    uint32_t nsegments; /* 1 (DEFAULT) or 4 */
    uint64_t seed;      /* RANDOM */
    uint64_t n;         /* nodes */
    const uint64_t *keys;  /* n prefix keys, ascending */
    const uint8_t *values; /* each node's value: HL_SEG_LEAF(c) or HL_SEG_WALKS(n) */
    uint64_t npoints;      /* PATH: path points, ascending, with their classes */
    const uint64_t *points;
    const uint8_t *point_classes;
    uint32_t flags; /* HL_SEG_FLAG_* */
    uint32_t root_walks; /* nodes at the first level that are WALK (for the report) */
    const char *name;  /* "STACK", "PATH", ... */
    const char *about; /* where it came from: traces, thresholds */
} hl_seg_table_t;

extern const hl_seg_table_t hl_seg_table;

/* ---- the mixing functions, identical to crates/heaplab-segregate/src/keys.rs ---- */

static inline uint64_t hl_seg_fmix(uint64_t h) {
    h ^= h >> 33;
    h *= 0xff51afd7ed558ccdull;
    h ^= h >> 33;
    return h;
}
static inline uint64_t hl_seg_size_key(uint64_t site, uint64_t size) {
    return hl_seg_fmix(site ^ (size * 0xC2B2AE3D27D4EB4Full) ^ 0x5bd1e995ull);
}
static inline uint64_t hl_seg_sp_key(uint64_t depth) {
    return hl_seg_fmix((depth >> 4) ^ 0x5350535053505350ull);
}
/* RANDOM's class of the n-th allocation (predictors::random_class): the
 * splitmix64 finalizer of a point on a Weyl sequence. */
static inline unsigned hl_seg_random(uint64_t seed, uint64_t n) {
    uint64_t z = seed * 0x9E3779B97F4A7C15ull + (n + 1) * 0xD1B54A32D192ED03ull;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z ^= z >> 31;
    return (unsigned)(z >> 62);
}

/* ---- seg_ident.c ---- */

/* Where a decision was made, for the report: level L = the return address
 * and L more frames were looked at (0: the return address alone), with
 * HL_SEG_UNKNOWN or'ed in where the last prefix looked at had no node. */
enum { HL_SEG_LEVELS = 16 };
#define HL_SEG_UNKNOWN 0x100u

/* The class of an allocation whose innermost frame keys are keys[0..n) (all
 * that is known: shorter than the table's depth means the stack ended), of
 * `size` bytes, made with the stack `sp_depth` bytes deep (0: unknown).
 * *level gets the frames looked at beyond the first, | HL_SEG_UNKNOWN (as above). */
unsigned hl_seg_decide(const uint64_t *keys, unsigned n, uint64_t size, uint64_t sp_depth,
                       unsigned *level);

/* The run-time identification (hl_seg_identify, hl_seg_identify_sp) is
 * declared in seg_thread.h: it takes the thread's block. */

/* The identification's cache counters: each thread's (seg_thread.h, counted
 * as it identifies), those of the threads gone, and their sum in the report. */
typedef struct hl_seg_cache_counts {
    uint64_t ctx_misses;            /* (return address, frame) not in the context cache */
    uint64_t ctx_others;            /* ... in it, with other frames above */
    uint64_t cx_hits;               /* ... of which the overflow knew the context */
    uint64_t walks;                 /* stack walks (the misses that needed more frames) */
    uint64_t uncached;              /* decisions the context cache cannot keep */
    uint64_t longs;                 /* long slots filled (contexts of more than eight words) */
    uint64_t ra_misses;             /* the return-address cache's misses */
    uint64_t path_hits, path_misses; /* the cache of walked paths */
} hl_seg_cache_counts_t;

/* The identification's counters, summed over the threads (seg_front.c). */
typedef struct hl_seg_ident_stats {
    uint64_t calls;                 /* identifications */
    uint64_t level[HL_SEG_LEVELS];  /* decided after looking at the return address + L frames */
    uint64_t unknown;               /* ... of which the prefix had no node ("other") */
    hl_seg_cache_counts_t cache;
    uint64_t frames;                /* frames looked at beyond the first: sum of L x level[L] */
} hl_seg_ident_stats_t;

/* ---- segregated.c ---- */

/* Formats the report line (JSON) into buf (at most cap - 1 bytes and a NUL);
 * returns its whole length, >= cap when it did not fit.  Takes the lock. */
size_t hl_seg_report(char *buf, size_t cap);

/* ---- seg_os.c: the only file of this room that talks to the OS ---- */

/* The return addresses of the program's frames, innermost first, from the
 * frame whose return address is ra, stack pointer after the return cfa, and
 * rbp at the call rbp: ras[0] = ra, ras[1] its caller's, ...  Returns how many
 * (at most max; fewer where the stack ends). */
unsigned hl_seg_os_walk(uintptr_t *ras, unsigned max, uintptr_t ra, uintptr_t cfa,
                        uintptr_t rbp);

/* The frame key of a return address (heaplab_site.h), through the map of the
 * loaded modules. */
uint64_t hl_seg_os_key(uintptr_t ra);

/* The stack depth of a stack pointer: bytes below the main thread's first
 * stack pointer, as the recorder measures it (0: another thread, unknown). */
uint64_t hl_seg_os_sp_depth(uintptr_t sp);

/* The module map and the walker are ready (built at first use). */
int hl_seg_os_ready(void);

#endif
