/*
 * seg.h: what the segmented allocator (segregated.c), its operating-system
 * side (seg_os.c) and an emitted predictor table share.  Paper 001 (Seidl and
 * Zorn) §3 and §4.2.
 *
 *   program ──▶ shim.c ──(HL_FRONT_MALLOC: outside the lock)──▶ hl_seg_front()
 *                 │                                               │ unwind, frame keys,
 *                 │                                               │ look the table up
 *                 │                                               ▼
 *                 │                                    thread's pending prediction
 *                 ▼                                               │
 *            (the lock) ──▶ hl_alloc_segregated.malloc ◀──────────┘
 *                              │ segment = predicted class
 *                              ▼
 *             other │ SL │ HR │ not-HR    four heaps, each contiguous, grown in 2 MB steps
 *
 *   replayer ──▶ heaplab_site_hint(site) ──▶ hl_alloc_segregated.site_hint: the
 *                same lookup from the recorded frame keys, then the allocation.
 *
 * An emitted table (heaplab segregate) is one C file that defines
 * `const hl_seg_table_t hl_seg_table`; default_table.c is DEFAULT's (one
 * segment, no prediction).
 */
#ifndef HL_SEG_H
#define HL_SEG_H

#include <stddef.h>
#include <stdint.h>

#define HL_SEG_TABLE_VERSION 1

/* Predictors (crates/heaplab-segregate, predictors::Kind::code). */
enum {
    HL_SEG_DEFAULT = 0,    /* one segment */
    HL_SEG_SP = 1,         /* stack depth in bytes → class */
    HL_SEG_PATH = 2,       /* innermost path point on the stack → class */
    HL_SEG_STACK = 3,      /* hash of the last `depth` call sites → class */
    HL_SEG_STACK_SIZE = 4, /* that hash and the size → class */
    HL_SEG_RANDOM = 5,     /* a uniformly random segment (the control) */
};

/* Classes, which are also segment indices (classes::Class). */
enum { HL_SEG_OTHER = 0, HL_SEG_SL = 1, HL_SEG_HR = 2, HL_SEG_NOTHR = 3, HL_SEG_CLASSES = 4 };

typedef struct hl_seg_table {
    uint32_t version;   /* HL_SEG_TABLE_VERSION */
    uint32_t predictor; /* HL_SEG_* */
    uint32_t depth; /* STACK, STACK+size: call sites hashed; PATH, SP: frames unwound at run time */
    uint32_t nsegments;     /* 1 (DEFAULT) or 4 */
    uint64_t seed;          /* RANDOM */
    uint64_t n;             /* entries */
    const uint64_t *keys;   /* n keys, ascending */
    const uint8_t *classes; /* the class of each key */
    const char *name;       /* "STACK", "PATH", ... */
    const char *about;      /* where it came from: traces, thresholds */
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

/* ---- segregated.c, for seg_os.c and seg_front.h ---- */

/* The class for an allocation whose innermost frame keys are keys[0..n), of
 * `size` bytes, made with the stack `sp_depth` bytes deep (0: unknown). */
unsigned hl_seg_lookup(const uint64_t *keys, unsigned n, uint64_t size, uint64_t sp_depth);

/* Outside the lock, just before an allocation of `size` bytes (HL_FRONT_MALLOC):
 * predicts at run time from the caller's stack unless a site hint came first. */
void hl_seg_front(size_t size);

/* Formats the report line (JSON) into buf (at most cap - 1 bytes and a NUL);
 * returns its whole length, >= cap when it did not fit. */
size_t hl_seg_report(char *buf, size_t cap);

/* ---- seg_os.c: the only file of this room that talks to the OS ---- */

/* Up to `max` frame keys of the caller of the allocator (innermost first),
 * skipping this library's frames; *sp_depth gets the caller's stack depth
 * in bytes below the thread's first stack pointer (0 if unknown). */
unsigned hl_seg_os_frames(uint64_t *keys, unsigned max, uint64_t *sp_depth);

/* The key cache for run-time lookups: whether the OS side is usable. */
int hl_seg_os_ready(void);

#endif
