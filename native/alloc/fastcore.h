/*
 * fastcore.h: the fast core of a synthesized allocator (crates/heaplab-synth,
 * paper 002's "fast allocator" made lock-free and per thread), a layer with
 * an instance (sf_core_t *) like btag.h, so that another allocator (a
 * segregated one, one core per segment) can own several.
 *
 * Where a block lies says what it is: no header, no tag.  Each thread that
 * allocates gets a slot, 8 GiB of address space aligned to 8 GiB, cut into
 * SF_NCLASS spans of 128 MiB, one per size class:
 *
 *   slot base (aligned to 2^SF_SLOT_SHIFT)
 *   |<- class 0 span ->|<- class 1 span ->| ...            |<- class 63 ->|
 *   +--+--+----+--------+----------+------+---- ... -------+--------------+
 *   |s0|s1| s2 |   s3   | reserved |      |                | never used   |
 *   +--+--+----+--------+----------+------+---- ... -------+--------------+
 *    slabs: blocks of the class's size, back to back, never straddling slabs
 *    (a few bytes at a slab's end may be unused); slabs are taken from the
 *    span's start upward, and an empty slab given back (reclaim) is taken
 *    again first
 *
 *   class(p) = (p - slot base) >> SF_CLASS_SHIFT    (p >> 27 & 63: slots are aligned)
 *
 * so free(p) is: p minus my slot's base, shift, one unsigned compare (which
 * also sends NULL, other threads' blocks and the general allocator's blocks
 * to the slow path), and a push on my list of that class.  malloc(n) for
 * n <= SF_MAP_MAX is: the class from a byte map indexed by n, a pop from my
 * list of that class, or a block carved from my current slab of the class.
 * No lock, no atomic, no header read on the owning thread's path.
 *
 * Slabs grow (the schedule): slab k of a class is slab[c] << min(k / SF_GROW_EVERY,
 * growth[c]) bytes, so a class a thread uses little costs one small slab,
 * and one it keeps refilling takes slabs twice as large every SF_GROW_EVERY
 * slabs, up to slab_max[c] (a slab taken is a lock and some 150
 * instructions, counted whole in the footprint from its first block):
 *
 *   slab[c] = S, SF_GROW_EVERY = 2, slab_max[c] = 4S:
 *   | S | S |  2S  |  2S  |    4S    |    4S    |    4S    | ...
 *     0   1    2      3       4          5          6        slab index k
 *
 * Where slab k lies follows from k (sf_slab_at, sf_slab_index: no table), so a
 * block's slab is arithmetic, for the checks and for reclaim.
 *
 * Carving goes downward: the uncarved blocks of my current slab of class c
 * lie in [floor[c], carve[c]), and the next one is carve[c] - bsize[c], taken
 * while it is >= floor[c] (one subtraction and one compare; an empty range
 * has carve 0 and floor SF_FLOOR_EMPTY, so the test fails for any bsize).
 *
 * Per thread (sf_tls_t, an initial-exec TLS variable of the instance's user,
 * so that its fields are one %fs-relative load away):
 *
 *   head[c]   my free list of class c (the first word of a free block links it)
 *   carve[c]  the end of the uncarved part of my current slab of class c ...
 *   floor[c]  ... and its start (the slab's first block)
 *   bsize[c]  the class's block size
 *   map[n]    the class of a request of n bytes (SF_NONE: not a fast class)
 *
 * A block freed by another thread (or by a thread that has no slot) goes to
 * the owning slot's lock-free stack of that class (bin.remote, a push with
 * compare-and-swap); the owner takes the whole stack with one exchange when
 * its list and its slab are empty, before it takes a new slab.
 *
 * Slot 0 is shared: threads without a slot of their own (more than
 * SF_MAX_SLOTS - 1 at once, starting, exiting) and the zoo's test modes
 * (HEAPLAB_PAD, HEAPLAB_GENERIC) use it under the shim's lock, through
 * sf_alloc_locked() and sf_free_locked(); it is made when first needed, so
 * a program that never needs it pays no page for its record.  A thread that
 * exits leaves its lists in its slot (bin.head, bin.carve, bin.floor); the
 * next thread that starts adopts the slot with them.
 *
 * Space: each slab counts in the footprint from when it is taken until it
 * is given back.  When a slot has taken 1/SF_RECLAIM_SHARE of its footprint
 * (at least SF_RECLAIM_MIN bytes) in new slabs since it last looked, it
 * walks its free lists in the instance's reclaim order (002 §2.2: decreasing
 * P_f(s)(1 - P_m(s)) s F(s)), unlinks the blocks of every slab that is
 * entirely free, gives those slabs' pages back to the OS (they read as zero
 * when taken again, so calloc skips the memset) and stops once it has
 * recovered twice what it took.  A list shorter than the blocks of the
 * class's first slab frees no slab and is walked no further, so that a heap
 * that only grows pays little for the walks.
 *
 * Invariants (between calls):
 *  - a block of class c of slot s lies in s's span of c, below bin[c].top,
 *    at the start of slab k plus j * block for j < blocks of slab k, in a
 *    slab not on bin[c].free_slabs;
 *  - bin[c].top is the start of slab bin[c].nslab (the slabs below it are
 *    in use, bin[c].used of them, or given back, bin[c].nfree);
 *  - a free block is on exactly one list: its owner's head[c] (the thread's,
 *    or bin[c].head while the slot has no owner or for slot 0) or bin[c].remote
 *    (or lost with a thread stopped half-way through a push in the child of
 *    a fork; lost blocks are never handed out twice);
 *  - a slot with an owner is touched, outside the lock, only by its owner,
 *    except for pushes on bin[c].remote; slab changes, reclaim, adoption and
 *    thread exit run under the shim's lock (so fork never sees them half done).
 *
 * Locking: the shim's lock (hl_front_enter / hl_front_leave, shim.c compiled
 * with HL_FRONT_H); the functions named *_locked expect it held.
 */
#ifndef HL_FASTCORE_H
#define HL_FASTCORE_H

#include "hl_alloc.h"

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#define SF_NCLASS      64  /* class spans per slot */
#define SF_NONE        63  /* the class of "no fast class": never has blocks */
#define SF_CLASS_SHIFT 27  /* 128 MiB of address space per class per slot */
#define SF_SLOT_SHIFT  (SF_CLASS_SHIFT + 6) /* 8 GiB per slot, aligned to it */
#define SF_MAP_MAX     1024                 /* the per-thread byte map covers 0 .. 1024 */
#define SF_MAX_SLOTS   255
#define SF_NO_BASE     ((uintptr_t)1 << 63) /* a base no user pointer is within 8 GiB of */
#define SF_ADDR_BITS   47
#define SF_RECLAIM_MIN ((size_t)256 << 10)
#define SF_RECLAIM_SHARE 8 /* reclaim after taking footprint / 8 in new slabs */
#define SF_GROW_EVERY  8   /* slabs of one size before they double (the schedule) */
#define SF_FLOOR_EMPTY ((char *)UINTPTR_MAX) /* floor[c] of an empty carve range */

/* SF_COUNT (compile with -DSF_COUNT=1 everything that includes this file,
 * fastcore.c too: `heaplab synth --count-calls`): the statistics build, which
 * counts every call served without the lock, one add on each hot path.  The
 * default (0) counts none of them: malloc's pop and free's push carry no
 * counter, and sf_stats_locked adds only the mallocs of the slow paths, so
 * that heaplab_alloc_stats' mallocs and frees are lower bounds (the
 * instance's user exports heaplab_alloc_stats_lower_bounds to say so: the
 * zoo's random test then checks no totals). */
#ifndef SF_COUNT
#define SF_COUNT 0
#endif
#define SF_COUNTED(x) ((void)(SF_COUNT ? (x)++ : 0))

enum { SF_NEW = 0, SF_STARTING = 1, SF_ARMED = 2, SF_OFF = 3 };

/* One thread's state for one instance.  SF_TLS_INIT until the thread
 * starts: every list and carve range empty, so the first call takes the
 * slow path.  The arrays the hot paths index come first, so that their
 * displacements are small. */
typedef struct sf_tls {
    void *head[SF_NCLASS];        /* first: the hot loads need no displacement */
    char *carve[SF_NCLASS];       /* the uncarved blocks of my slab: [floor, carve) */
    char *floor[SF_NCLASS];
    uintptr_t bsize[SF_NCLASS];
    uintptr_t base;               /* my slot's base; SF_NO_BASE without one */
    unsigned char map[SF_MAP_MAX + 1];
    unsigned long mallocs, frees; /* calls served here (heaplab_alloc_stats; SF_COUNT only) */
    unsigned long reallocs;       /* ... and reallocs of its blocks served without the lock */
    int state;
    struct sf_slot *slot;
    struct sf_core *core;
} sf_tls_t;

#define SF_TLS_INIT {.floor = {[0 ... SF_NCLASS - 1] = SF_FLOOR_EMPTY}, .base = SF_NO_BASE}

/* One class of one slot: shared, under the lock but for `remote`. */
typedef struct sf_bin {
    void *remote;      /* blocks freed by other threads: a lock-free stack */
    void *head;        /* the list while the slot has no owner (and slot 0's) */
    char *carve, *floor; /* the uncarved part of the current slab, likewise */
    char *top;         /* the start of slab `nslab`: no slab has used the span above */
    char *committed;   /* the end of the span's read-write part */
    uint32_t *free_slabs; /* slabs given back, by index: taken first */
    uint32_t nfree, room;
    uint32_t nslab;    /* slabs below top: in use (`used`) or given back (`nfree`) */
    uint32_t used;
    size_t bytes;      /* bytes of the slabs in use (counted in the footprint) */
} sf_bin_t;

typedef struct sf_slot {
    uintptr_t base;
    unsigned index;
    int owned;         /* 1 while a thread holds it (slot 0: never) */
    sf_tls_t *tls;     /* the owner's state (the child of a fork saves it) */
    size_t footprint;  /* bytes of slabs in use */
    size_t taken;      /* bytes of new slabs since the last reclaim */
    sf_bin_t bin[SF_NCLASS]; /* allocated up to bin[nclass - 1] only (fastcore.c slot_bytes) */
} sf_slot_t;

/* An instance.  The first group is the synthesized layout (constant); the
 * rest is state, zero until sf_init. */
typedef struct sf_core {
    const char *name;
    unsigned nclass;              /* classes 0 .. nclass-1 have blocks (nclass <= SF_NONE) */
    const uint32_t *block;        /* bytes of a block, per class (multiples of 16) */
    const uint32_t *slab;         /* bytes of a class's first slab (multiples of the page) */
    const uint32_t *slab_max;     /* bytes of its largest: slab << k, k < 16 (NULL: = slab) */
    const unsigned char *map;     /* class of each request of 0 .. SF_MAP_MAX bytes */
    const unsigned char *medium;  /* class of a request of n bytes, SF_MAP_MAX < n <= fast_max,
                                     at medium[(n + 15) >> 4] */
    size_t fast_max;
    const unsigned char *reclaim_order; /* the classes, first given back first */
    /* state */
    int inited, front_on;
    unsigned char growth[SF_NCLASS]; /* log2(slab_max / slab) */
    sf_slot_t *slots[SF_MAX_SLOTS + 1]; /* [0] the shared slot (NULL until needed) */
    unsigned nslots;
    unsigned char slot_of[1u << (SF_ADDR_BITS - SF_SLOT_SHIFT)]; /* p >> SF_SLOT_SHIFT -> index + 1 */
    unsigned long exited_mallocs, exited_frees, exited_reallocs, remote_frees, locked_mallocs,
        locked_frees;
    unsigned long reclaims, reclaim_walked, reclaimed_bytes, slabs_taken;
    uint32_t *scratch;            /* reclaim's per-slab counts */
    size_t scratch_bytes;
} sf_core_t;

/* ---- the hot paths: inline, for the entry points of the instance's user ---- */

/* The next block of class c carved from the thread's slab, or NULL.  The
 * compiler barrier keeps the store's address a displacement off the same
 * registers as the load's (else GCC spends an instruction computing it);
 * a class known when compiling (the header's inline malloc) needs none. */
static inline __attribute__((always_inline)) void *sf_carve(sf_tls_t *t, uintptr_t c) {
    uintptr_t x = (uintptr_t)t->carve[c] - t->bsize[c];
    if (HL_LIKELY(x >= (uintptr_t)t->floor[c])) {
        if (!__builtin_constant_p(c)) __asm__("" : "+r"(c));
        t->carve[c] = (char *)x;
        SF_COUNTED(t->mallocs);
        return (void *)x;
    }
    return NULL;
}

/* A block of class c from the thread's list or slab, or NULL.  *fresh = 1
 * when it was carved (never used: zero), else 0. */
static inline __attribute__((always_inline)) void *sf_take(sf_tls_t *t, uintptr_t c, int *fresh) {
    void **b = (void **)t->head[c];
    if (HL_LIKELY(b != NULL)) {
        t->head[c] = *b;
        SF_COUNTED(t->mallocs);
        *fresh = 0;
        return b;
    }
    *fresh = 1;
    return sf_carve(t, c);
}

/* malloc(n) for n <= SF_MAP_MAX without the lock, or NULL (take the slow path). */
static inline __attribute__((always_inline)) void *sf_malloc_small(sf_tls_t *t, size_t n) {
    int fresh;
    return sf_take(t, t->map[n], &fresh);
}

/* The whole of malloc: the class from the thread's map (n <= SF_MAP_MAX) or
 * from `medium` (the instance's medium table: n <= fast_max), a pop from its
 * list or a carve from its slab; anything else is slow(n) (a tail call).
 * Written out rather than through sf_take so that no hit tests its result
 * again: a pop is 10 instructions on x86-64 with the `ret`, a carve 13. */
static inline __attribute__((always_inline)) void *sf_malloc(sf_tls_t *t, size_t n,
                                                             const unsigned char *medium,
                                                             size_t fast_max,
                                                             void *(*slow)(size_t)) {
    uintptr_t c;
    if (HL_LIKELY(n <= SF_MAP_MAX))
        c = t->map[n];
    else if (n <= fast_max)
        c = medium[(n + 15) >> 4];
    else
        return slow(n);
    void **b = (void **)t->head[c];
    if (HL_LIKELY(b != NULL)) {
        t->head[c] = *b;
        SF_COUNTED(t->mallocs);
        return b;
    }
    uintptr_t x = (uintptr_t)t->carve[c] - t->bsize[c];
    if (HL_LIKELY(x >= (uintptr_t)t->floor[c])) {
        __asm__("" : "+r"(c)); /* as in sf_carve */
        t->carve[c] = (char *)x;
        SF_COUNTED(t->mallocs);
        return (void *)x;
    }
    return slow(n);
}

/* free(p) when p is a block of the thread's own slot: 1, else 0. */
static inline __attribute__((always_inline)) int sf_free_own(sf_tls_t *t, void *p) {
    uintptr_t c = ((uintptr_t)p - t->base) >> SF_CLASS_SHIFT;
    if (HL_LIKELY(c < SF_NCLASS)) {
        *(void **)p = t->head[c];
        t->head[c] = p;
        SF_COUNTED(t->frees);
        return 1;
    }
    return 0;
}

/* The whole of free: a push when p is a block of the thread's own slot,
 * else slow(p) (a tail call: NULL, other threads' blocks, other allocators'). */
static inline __attribute__((always_inline)) void sf_free(sf_tls_t *t, void *p, void (*slow)(void *)) {
    if (HL_LIKELY(sf_free_own(t, p))) return;
    slow(p);
}

/* The class of a request, or SF_NONE. */
static inline unsigned sf_class_of(const sf_core_t *core, size_t n) {
    if (n <= SF_MAP_MAX) return core->map[n];
    if (n <= core->fast_max) return core->medium[(n + 15) >> 4];
    return SF_NONE;
}

/* The slot p lies in, or NULL: p is not a block of this core. */
static inline sf_slot_t *sf_slot_of(const sf_core_t *core, const void *p) {
    uintptr_t hi = (uintptr_t)p >> SF_SLOT_SHIFT;
    if (hi >= sizeof core->slot_of) return NULL;
    unsigned i = __atomic_load_n(&core->slot_of[hi], __ATOMIC_ACQUIRE);
    return i ? core->slots[i - 1] : NULL;
}

static inline unsigned sf_class_at(const void *p) {
    return (unsigned)((uintptr_t)p >> SF_CLASS_SHIFT) & (SF_NCLASS - 1);
}

/* Slab k of class c (the schedule above): its offset in the span and its bytes. */
static inline size_t sf_slab_at(const sf_core_t *core, unsigned c, size_t k, size_t *bytes) {
    size_t base = core->slab[c], m = SF_GROW_EVERY, q = k / m, j = core->growth[c];
    if (q <= j) {
        *bytes = base << q;
        return base * ((m << q) - m + ((k % m) << q));
    }
    *bytes = base << j;
    return base * ((m << (j + 1)) - m + ((k - m * (j + 1)) << j));
}

/* The index of the slab at byte `off` of class c's span. */
static inline size_t sf_slab_index(const sf_core_t *core, unsigned c, size_t off) {
    size_t u = (uint32_t)off / core->slab[c], m = SF_GROW_EVERY, j = core->growth[c]; /* off < 2^27 */
    size_t grown = (m << (j + 1)) - m; /* units of slab[c] before the first largest slab */
    if (u < m) return u;
    if (u >= grown) return m * (j + 1) + ((u - grown) >> j);
    size_t q = (size_t)(63 - __builtin_clzll((unsigned long long)(u / m + 1)));
    return q * m + ((u - ((m << q) - m)) >> q);
}

/* ---- the rest (fastcore.c) ---- */

/* Once, under the lock: front_on = 0 runs every call under the lock (the
 * zoo's test modes).  0 (slot 0 is made when first needed). */
int sf_init_locked(sf_core_t *core, int front_on);

/* The slow path of malloc(n) (and calloc: *fresh as for sf_take), not under
 * the lock: starts the thread, serves medium sizes, takes the blocks other
 * threads freed, takes a new slab.  NULL: the caller takes the locked path
 * (no slot, not a fast class, the span is full). */
void *sf_malloc_slow(sf_core_t *core, sf_tls_t *t, size_t n, int *fresh);

/* The slow path of free(p), not under the lock: 1 if done (NULL, another
 * slot's block: pushed on its remote stack), 0: not a block of this core, or
 * the front is off (the caller takes the locked path). */
int sf_free_slow(sf_core_t *core, sf_tls_t *t, void *p);

/* Under the lock: a block of class c from slot 0, or NULL (its span is
 * full); and free of any block of this core (slot 0's: its list; another
 * slot's: that slot's remote stack). */
void *sf_alloc_locked(sf_core_t *core, unsigned c, int *fresh);
void sf_free_locked(sf_core_t *core, void *p);

/* The block size of p, a block of this core (checked: a fatal error names
 * `what` otherwise). */
size_t sf_block_size(const sf_core_t *core, void *p, const char *what);

/* Under the lock: add the calls served without it to *s; the child of a
 * fork; the checker. */
void sf_stats_locked(sf_core_t *core, heaplab_alloc_stats_t *s);
void sf_fork_child_locked(sf_core_t *core, sf_tls_t *self);
void sf_check_locked(sf_core_t *core, sf_tls_t *self);

/* Under the lock: where the footprint is, a line per slot and per class
 * with blocks, handed to `line` (HEAPLAB_SYNTH_REPORT in a synthesized one). */
void sf_report_locked(sf_core_t *core, sf_tls_t *self, void (*line)(const char *, size_t));

#endif /* HL_FASTCORE_H */
