/*
 * seg_thread.h: what each thread of a program keeps for the segmented
 * allocator, in one block of initial-exec TLS (no lock ever guards it; only
 * its own thread writes it, except the report and the fork child, which
 * read or drop other threads' blocks under the lock):
 *
 *   hl_seg_tls
 *   ┌───────────────────────────────────────────────────────────────────────┐
 *   │ head[segment][size]  count[segment][size]   free blocks kept for reuse │ seg_cache.c
 *   │ ra[128]   return address → decision          (direct-mapped)           │ seg_ident.c
 *   │ pfx[1024] a walk's prefix (return addresses ra0..raL) → the tree's    │ seg_ident.c
 *   │           node there: a class, or "step on" with raL's unwind rule     │
 *   │ path[256] hash of the walked return addresses (and size) → class      │ seg_ident.c
 *   │ rules[64] return address → its unwind rule (the whole-context walk)   │ seg_ident.c
 *   │ pend, pend_cls   the class of the allocation on its way to the lock    │ segregated.c
 *   │ pops[c], pushes, hinted[c] ... counters; id: the identification's      │
 *   │ next      the registry of threads with caches (under the lock)         │
 *   └───────────────────────────────────────────────────────────────────────┘
 *
 * Cached blocks stay "in use" for the segment's allocator: a cache is a
 * LIFO list per (segment, block size), of at most cap(size) blocks, through
 * the payload's first word; the second holds hl_seg_cache_key while the
 * block is cached (so that a second free of it is caught, as glibc's tcache
 * does).
 */
#ifndef HL_SEG_THREAD_H
#define HL_SEG_THREAD_H

#include "seg.h"

#include <stdint.h>

#define SEG_NSIZES    64  /* cached block sizes: 32, 48, ... 1024 bytes (index size/16 - 2; 63 unused) */
#define SEG_MAX_BLOCK 1024
#define SEG_RA_SLOTS  128
#define SEG_PATH_SLOTS 256
#define SEG_RULE_SLOTS 64
#define SEG_PFX_SLOTS 1024

enum { SEG_T_NEW = 0, SEG_T_STARTING = 1, SEG_T_ARMED = 2, SEG_T_OFF = 3 };
enum { SEG_PEND_NONE = 0, SEG_PEND_HINT = 1, SEG_PEND_FRONT = 2 };

/* A slot of the return-address cache (ra[]) or of the prefix cache (pfx[]):
 * a decision, and the unwind rule of the frame to step from when it walks on. */
typedef struct seg_ra_slot {
    uintptr_t ra;    /* ra[]: the return address; pfx[]: the mix of ra0 .. raL (0: empty) */
    uint32_t dec;    /* SEG_DEC_*: a class and its counter, or walk on (SEG_DEC_WALK;
                        with SEG_DEC_SIZE in pfx[]: STACK+size's last frame, the size decides) */
    uint32_t rule;   /* SEG_RULE_*: how to step from the frame (ra0, or raL) to its caller's */
    int32_t cfa_off; /* the frame's CFA = (rbp if SEG_RULE_RBP, else sp) + cfa_off */
    int32_t rbp_off; /* the caller's rbp at CFA + rbp_off (SEG_RULE_RBP_SAVED) */
    uint64_t fnv;    /* the tree's prefix hash (heaplab_site_hash's FNV state) after the keys */
} seg_ra_slot_t;
typedef seg_ra_slot_t seg_pfx_slot_t;
_Static_assert(sizeof(seg_ra_slot_t) == 32, "a slot is half a cache line");

/* hl_unwind's rule of a return address above the program's first frame
 * (seg_ident.c steps with it): the same fields as seg_ra_slot_t's. */
typedef struct seg_rule_slot {
    uintptr_t ra;    /* the return address (0: empty) */
    uint32_t rule;   /* SEG_RULE_* (0: no rule: walk with hl_unwind) */
    int32_t cfa_off;
    int32_t rbp_off;
    uint32_t pad_;
} seg_rule_slot_t;


#define SEG_RULE_VALID     1u /* cfa_off, rbp_off hold hl_unwind's rule of ra */
#define SEG_RULE_RBP       2u
#define SEG_RULE_RBP_SAVED 4u
#define SEG_RULE_LAST      8u /* ra's frame is the outermost: nothing above */

typedef struct seg_path_slot {
    uint64_t tag;     /* the mix of the walked return addresses (0: empty) */
    uint32_t cls;     /* the class */
    uint32_t counter; /* where it was decided (seg_counter) */
} seg_path_slot_t;

/* A decision from the return address alone (seg_ident.c): a class and the
 * counter it counts in, or walk `need` more frames (SP never walks). */
#define SEG_DEC_WALK        0x100u
#define SEG_DEC_UNKNOWN     0x200u /* the return address has no node ("other", or PATH's scan) */
#define SEG_DEC_SIZE        0x400u /* (a prefix, STACK+size) its last frame: the size decides
                                      (then SEG_DEC_NEED holds the prefix's level) */
#define SEG_DEC_PFX         0x800u /* (a return address) walk a prefix at a time (seg_ident.c) */
#define SEG_DEC_SCAN        0x1000u /* PATH: below a prefix with no node: look for a path point */
#define SEG_DEC_CLASS(d)    ((d)&3u)
#define SEG_DEC_NEED(d)     (((d) >> 16) & 0xffu)
#define SEG_DEC_COUNTER(d)  ((d) >> 24) /* 0, or HL_SEG_LEVELS (no node) */

/* A counter of identifications: where decided (a level), + HL_SEG_LEVELS
 * when the last prefix looked at had no node. */
static inline unsigned seg_counter(unsigned level) {
    unsigned l = level & 0xffu;
    return (l < HL_SEG_LEVELS ? l : HL_SEG_LEVELS - 1) + (level & HL_SEG_UNKNOWN ? HL_SEG_LEVELS : 0);
}

typedef struct seg_thread {
    void *head[HL_SEG_CLASSES][SEG_NSIZES];
    uint8_t count[HL_SEG_CLASSES][SEG_NSIZES];
    uint8_t state; /* SEG_T_* */
    uint8_t pend;  /* SEG_PEND_* */
    uint8_t pend_cls;
    uint8_t busy; /* inside the identification: a nested malloc predicts nothing */
    uintptr_t stack_hi; /* the top of this thread's stack (0: not known yet) */
    seg_ra_slot_t ra[SEG_RA_SLOTS];
    seg_path_slot_t path[SEG_PATH_SLOTS];
    seg_rule_slot_t rules[SEG_RULE_SLOTS];
    seg_pfx_slot_t pfx[SEG_PFX_SLOTS];
    /* counters */
    uint64_t pops[HL_SEG_CLASSES]; /* new objects served from the caches, per segment */
    uint64_t pushes;               /* frees kept in the caches */
    uint64_t hinted[HL_SEG_CLASSES];
    /* the identification's counters (seg_ident.c) */
    uint64_t lv[2 * HL_SEG_LEVELS]; /* per seg_counter */
    uint64_t ra_misses, path_hits, path_misses, frames, pfx_misses;
    /* the last walk, for heaplab_seg_last (HEAPLAB_SEG_DEBUG=1) */
    unsigned last_n, last_cls;
    uint64_t last_sp;
    uint64_t last_keys[16];
    struct seg_thread *next;
} seg_thread_t;

extern __thread seg_thread_t hl_seg_tls __attribute__((tls_model("initial-exec")));

/* ---- set at initialisation (segregated.c), read without the lock ---- */

enum {
    SEG_MODE_UNREADY = 0, /* before the allocator initialised: no prediction */
    SEG_MODE_ONE = 1,     /* one segment (DEFAULT) */
    SEG_MODE_STACK = 2,   /* SP, PATH, STACK, STACK+size: identify the call site */
    SEG_MODE_RANDOM = 3,  /* RANDOM */
    SEG_MODE_OTHER = 4,   /* four segments and no predictor: everything to "other" */
    SEG_MODE_SP = 5,      /* SP: the stack depth decides */
};
extern unsigned hl_seg_mode;
extern uint64_t hl_seg_allocations; /* new objects (RANDOM's count), atomic */
extern size_t hl_seg_cache_cap[SEG_NSIZES]; /* blocks a list keeps; 0: no caching */
extern uint64_t hl_seg_cache_key;           /* in a cached block's second word */
extern int hl_seg_debug;                    /* HEAPLAB_SEG_DEBUG */
extern int hl_seg_caching;                  /* per-thread decisions are kept (not in tests) */
extern int hl_seg_by_size;                  /* STACK+size: a walk's class depends on the size */
extern int hl_seg_prefix;                   /* STACK, STACK+size: walks step a prefix at a time */

/* ---- seg_cache.c ---- */

/* A thread's first call: arrange for its caches to go back when it exits,
 * and arm them (outside the lock; may allocate). */
void hl_seg_thread_start(void);
/* A cached block freed again: a fatal error if it is on this thread's lists. */
int hl_seg_cache_refree(void *p);
/* Counters of every thread with caches, those that exited included (under the lock). */
void hl_seg_cache_sum(uint64_t pops[HL_SEG_CLASSES], uint64_t *pushes,
                      uint64_t hinted[HL_SEG_CLASSES], hl_seg_ident_stats_t *id);
/* The calling thread's caches against the segments (the checker, under the lock). */
void hl_seg_cache_check(void);
/* Under the lock, in the child of a fork: the other threads are gone. */
void hl_seg_cache_fork_child(void);
/* The shim's statistics: calls the caches served. */
struct heaplab_alloc_stats;
void hl_seg_cache_stats(struct heaplab_alloc_stats *s);

static inline unsigned seg_size_index(size_t block) {
    return (unsigned)(block >> 4) - 2;
}

#endif
