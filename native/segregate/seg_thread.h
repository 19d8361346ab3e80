/*
 * seg_thread.h: what each thread of a program keeps for the segmented
 * allocator, in one block of initial-exec TLS (only its own thread writes
 * it, except the report, the checker and the fork child, which read other
 * threads' counters under the lock), and the fast core's layout that every
 * segment shares.
 *
 *   hl_seg_t (seg_tls_t), one %fs-relative base for every field:
 *   ┌──────────────────────────────────────────────────────────────────────────┐
 *   │ core[0]  segment 0's fast core state (fastcore.h sf_tls_t): lists,      │ fastcore
 *   │ core[1]  slabs, ...  each padded to 4 KiB, so that segment s's is       │
 *   │ core[2]  (s << SEG_CORE_SHIFT) bytes from core[0]                       │
 *   │ core[3]                                                                 │
 *   │ ident    this thread's identification (a function pointer: the          │ seg_front.c,
 *   │          predictor's, hl_seg_ident_start before the thread starts,      │ seg_ident.c
 *   │          hl_seg_ident_hinted for the one allocation after a site hint)  │
 *   │ map[n]   the class of a request of n bytes (0, a class that never has   │
 *   │          blocks, until the thread starts: every request misses)        │
 *   │ state, pend, pend_cls, hint   the class of the allocation on its way    │ segregated.c
 *   │          to the lock                                                    │
 *   │ counters; next: the registry of threads (under the lock)                │
 *   │ ctx, cx, ra, path, rules: pointers to the arrays of hl_seg_caches       │
 *   └──────────────────────────────────────────────────────────────────────────┘
 *   hl_seg_caches (seg_caches_t, zero until used):
 *     ctx[]    (return address, frame) → the frames that decide, their return    seg_ident.c
 *              addresses and where they lie, the class
 *     cx[]     the overflow: other contexts of a slot's (return address, frame)
 *     ra[]     return address → its decision alone, or "walk" and its rule
 *     path[]   the walked return addresses (and size) → class
 *     rules[]  return address → its unwind rule (walks)
 *
 * hl_seg_t is in .tdata (its function pointers start non-zero, the fast
 * cores' bases at SF_NO_BASE), so the library carries its image and each
 * new thread copies it; the caches are a separate block in .tbss.
 */
#ifndef HL_SEG_THREAD_H
#define HL_SEG_THREAD_H

#include "fastcore.h"
#include "seg.h"

#include <stdint.h>

/* ---- the fast core's layout, the same in every segment (segregated.c) ----
 *
 *   class 0          a class no request maps to (it never has blocks): the
 *                    map of a thread that has not started reads 0 everywhere
 *   classes 1 .. 32  16, 32, ... 512 bytes (a class for every 16 bytes)
 *   classes 33 .. 56 four per doubling: 640, 768, 896, 1024, 1280, ... 32768
 *   larger           the segment's best-fit heap (seg_heap.h), under the lock
 */
#define SEG_NCLASS     57
#define SEG_FAST_MAX   32768
#define SEG_CORE_SHIFT 12

typedef union seg_core_tls {
    sf_tls_t t;
    char pad[1 << SEG_CORE_SHIFT];
} seg_core_tls_t;
_Static_assert(sizeof(sf_tls_t) <= (1u << SEG_CORE_SHIFT), "sf_tls_t grew: raise SEG_CORE_SHIFT");

/* The instances, one per segment (segregated.c); DEFAULT uses [0] only. */
extern sf_core_t hl_seg_cores[HL_SEG_CLASSES];

/* Which segment's fast core a slot belongs to: hl_seg_slot_seg[p >> SF_SLOT_SHIFT]
 * is the segment's core state's offset in seg_tls_t (s << SEG_CORE_SHIFT),
 * with SEG_SLOT_CORE set: 0 for address space that is no core's (set when
 * a slot is first seen, before any of its blocks is handed out; never
 * cleared: slots are never given back). */
#define SEG_SLOT_TABLE (1u << (SF_ADDR_BITS - SF_SLOT_SHIFT))
#define SEG_SLOT_CORE  1u
extern uint16_t hl_seg_slot_seg[SEG_SLOT_TABLE];

static inline unsigned seg_slot_entry(const void *p) {
    return hl_seg_slot_seg[((uintptr_t)p >> SF_SLOT_SHIFT) & (SEG_SLOT_TABLE - 1)];
}
/* The segment + 1 whose fast core owns p's slot, 0 if none. */
static inline unsigned seg_of_slot(const void *p) {
    unsigned v = seg_slot_entry(p);
    return v ? (v >> SEG_CORE_SHIFT) + 1 : 0;
}
/* The offset in seg_tls_t of the core state of p's segment (0 if none). */
static inline size_t seg_core_offset(const void *p) {
    return seg_slot_entry(p) & ~(size_t)SEG_SLOT_CORE;
}

/* ---- the identification's caches (seg_ident.c) ---- */

#define SEG_CTX_SLOTS  2048
#define SEG_CTX_WAYS   2
#define SEG_CTX_SET_SHIFT 8 /* log2 of a set's bytes */
#define SEG_CTX_WORDS  8
#define SEG_RA_SLOTS   512
#define SEG_PATH_SLOTS 2048
#define SEG_RULE_SLOTS 256

/* A context slot: an allocation made from return address `ra` with malloc's
 * frame pointer at `fp` (the caller's stack depth) whose frames 1 .. n had
 * the return addresses w[0 .. n) at fp + off[0 .. n): class `cls`.  The
 * offsets are the ones the walk found; a later allocation from the same
 * (ra, fp) reads the words there and, if they are the same, is the same
 * context (seg_ident.c says why).
 *
 * Eight words, so that a decision made 4-8 frames up (a recursive parser's:
 * jsonparse's PATH) is kept rather than walked again on every call.  The
 * slot is two cache lines; what the fast path reads and writes (ra, fp,
 * the offsets, core, hits, w[0] and w[1]) is in the first:
 *
 *   0   ra  8   fp  16  off[0..7]  32  n cls counter flags  36 core
 *   40  hits  48  w[0]  56  w[1]  | 64  w[2] .. w[7]  112  salt  116 nl  117 (pad)
 *
 * A long slot (flags SEG_CTX_LONG) keeps a context that needs more than
 * eight words and at most SEG_CTX_LONG_WORDS: PATH's scan for a path point
 * above a return address training never saw reads every frame up to the
 * table's depth (python's interpreter: 12).  It keeps the words' offsets
 * (lg.off) and a 64-bit hash of their values (lg.tag) in place of w[2..7];
 * w[0] is ~ra at off 8 (ra0's own word), so that the fast path never takes it,
 * and n is 0, so that no slot check reads its words (hl_seg_ident_other's
 * overflow probe, under a tag nothing writes, misses and sends it to
 * ident_other2, which hashes the words).  A long context never goes to the
 * overflow, so a (ra, fp) keeps two of them at most (the set's ways), and
 * STACK+size keeps none (its contexts of more than seven words are walked):
 *
 *   48  ~ra  56  ra  | 64  tag  72  lg.off[0..19]  112  salt */
#define SEG_CTX_LONG_WORDS 20
typedef struct seg_ctx {
    uintptr_t ra;                /* 0: empty */
    uintptr_t fp;
    int16_t off[SEG_CTX_WORDS];
    uint8_t n;                   /* frames verified (the decision's level) */
    uint8_t cls;                 /* the class, or SEG_CTX_SIZE (STACK+size: the size decides) */
    uint8_t counter;             /* where the decision was made (seg_counter) */
    uint8_t flags;               /* SEG_CTX_LONG */
    uint16_t core;               /* cls << SEG_CORE_SHIFT: its core state's offset (the fast path's answer) */
    uint64_t hits;               /* decisions served since it was filled */
    union {
        uintptr_t w[SEG_CTX_WORDS]; /* unused ones: ra, at off 8 (fp[1]), so that they always match */
        struct {                    /* a long slot's */
            uintptr_t w0, w1;       /* ~ra and ra, at off 8 */
            uint64_t tag;           /* the hash of the words at fp + off[0 .. nl) (seg_ident.c) */
            int16_t off[SEG_CTX_LONG_WORDS];
        } lg;
    };
    uint32_t salt;               /* this filling's number (the overflow's tags depend on it) */
    uint8_t nl;                  /* a long slot's words */
    uint8_t pad_[11];
} seg_ctx_t;
_Static_assert(sizeof(seg_ctx_t) == 128, "a context slot is two cache lines");
_Static_assert(__builtin_offsetof(seg_ctx_t, w) + 2 * sizeof(uintptr_t) <= 64,
               "the fast path's fields are in the slot's first line");
_Static_assert(__builtin_offsetof(seg_ctx_t, lg.off) + SEG_CTX_LONG_WORDS * sizeof(int16_t) <=
                   __builtin_offsetof(seg_ctx_t, salt),
               "a long slot's offsets fit in place of w[2..]");
_Static_assert((HL_SEG_CLASSES - 1) << SEG_CORE_SHIFT <= UINT16_MAX, "seg_ctx_t's core");
#define SEG_CTX_LONG 1u
#define SEG_CTX_SIZE 0x80u

/* The context cache's overflow (cx[]): other contexts of a (ra, fp) whose
 * slot holds one, where their frames lie at the same offsets (a function
 * that calls a wrapper from several call sites): keyed by a mix of the
 * slot's salt (a number given at each filling) and how the words read at its
 * offsets differ from its own. */
#define SEG_CX_SLOTS 4096
typedef struct seg_cx {
    uint64_t tag;     /* 0: empty */
    uint8_t cls;
    uint8_t counter;  /* (its decisions count in lv[] at once) */
    uint16_t pad_;
    uint32_t pad2_;
} seg_cx_t;
_Static_assert(sizeof(seg_cx_t) == 16, "an overflow slot is 16 bytes");

/* A slot of the return-address cache (ra[]): the decision of a return
 * address alone, and its unwind rule. */
typedef struct seg_ra_slot {
    uintptr_t ra;    /* the return address (SP: the stack pointer) (0: empty) */
    uint32_t dec;    /* SEG_DEC_*: a class and its counter, or walk on */
    union {
        uint32_t rule; /* SEG_RULE_*: how to step from ra's frame to its caller's */
        uint32_t core; /* SP: the class << SEG_CORE_SHIFT (the fast path's answer) */
    };
    int32_t cfa_off; /* the frame's CFA = (rbp if SEG_RULE_RBP, else sp) + cfa_off */
    int32_t rbp_off; /* the caller's rbp at CFA + rbp_off (SEG_RULE_RBP_SAVED) */
    uint64_t hits;   /* SP: decisions served since it was filled */
} seg_ra_slot_t;
_Static_assert(sizeof(seg_ra_slot_t) == 32, "a slot is half a cache line");

/* hl_unwind's rule of a return address above the program's first frame. */
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
    uint64_t tag;     /* the mix of the walked return addresses (and size) (0: empty) */
    uint32_t cls;     /* the class */
    uint32_t counter; /* where it was decided (seg_counter) */
} seg_path_slot_t;

/* A decision from the return address alone: a class and the counter it
 * counts in, or walk `need` more frames (SP never walks). */
#define SEG_DEC_WALK       0x100u
#define SEG_DEC_UNKNOWN    0x200u /* the return address has no node ("other", or PATH's scan) */
#define SEG_DEC_CLASS(d)   ((d)&3u)
#define SEG_DEC_NEED(d)    (((d) >> 16) & 0xffu)
#define SEG_DEC_COUNTER(d) ((d) >> 24) /* 0, or HL_SEG_LEVELS (no node) */

/* A counter of identifications: where decided (a level), + HL_SEG_LEVELS
 * when the last prefix looked at had no node. */
static inline unsigned seg_counter(unsigned level) {
    unsigned l = level & 0xffu;
    return (l < HL_SEG_LEVELS ? l : HL_SEG_LEVELS - 1) + (level & HL_SEG_UNKNOWN ? HL_SEG_LEVELS : 0);
}

struct seg_tls;
typedef unsigned (*seg_ident_fn)(void *const *fp, size_t size, struct seg_tls *t);

enum { SEG_T_NEW = 0, SEG_T_STARTING = 1, SEG_T_ARMED = 2, SEG_T_OFF = 3 };
enum {
    SEG_PEND_NONE = 0,
    SEG_PEND_HINT = 1,   /* a site hint for the next new object (hint_cls) */
    SEG_PEND_FRONT = 2,  /* the front end's segment for the locked path (pend_cls) */
    SEG_PEND_CALLOC = 3, /* calloc handed its miss to malloc's path: the same segment (hint_cls) */
};

typedef struct seg_tls {
    seg_core_tls_t core[HL_SEG_CLASSES]; /* first: segment s's at s << SEG_CORE_SHIFT */
    seg_ident_fn ident;                  /* called for every new object (four segments) */
    seg_ident_fn ident_mode;             /* the predictor's (what ident returns to after a hint) */
    struct seg_ctx *ctxp;                /* the context cache (ctx), or hl_seg_ctx_none */
    struct seg_ra_slot *spp;             /* SP's cache (ra), or hl_seg_ra_none (seg_ident.h) */
    unsigned char map[SF_MAP_MAX + 1];
    uint8_t state;    /* SEG_T_* */
    uint8_t pend;     /* SEG_PEND_*: the locked path's class is pend_cls */
    uint8_t pend_cls;
    uint8_t hint_cls; /* the class of the hinted allocation */
    uint8_t busy;     /* inside the identification: a nested malloc predicts nothing */
    uint8_t caches_on; /* ctxp and spp may point at the thread's caches (after its start) */
    uint32_t salt;    /* the last context slot's salt */
    uintptr_t stack_hi; /* the top of this thread's stack (0: not known yet) */
    /* counters */
    uint64_t hinted[HL_SEG_CLASSES]; /* new objects placed by a site hint, per segment */
    uint64_t lv[2 * HL_SEG_LEVELS];  /* identifications per seg_counter (ctx hits: in the slots) */
    hl_seg_cache_counts_t cnt;       /* the caches' hits and misses (seg_ident.c) */
    /* the last walk, for heaplab_seg_last (HEAPLAB_SEG_DEBUG=1) */
    unsigned last_n, last_cls;
    uint64_t last_sp;
    uint64_t last_keys[16];
    struct seg_tls *next;
    /* the caches: the thread's seg_caches_t (set when it starts; NULL before) */
    seg_ctx_t *ctx;
    seg_cx_t *cx;
    seg_ra_slot_t *ra;
    seg_path_slot_t *path;
    seg_rule_slot_t *rules;
} seg_tls_t;

/* The identification's caches, zero until used: a block of their own
 * (.tbss), so that the library's initialised block (.tdata, which each new
 * thread copies) is only the fast cores' state and the fields above. */
typedef struct seg_caches {
    seg_ctx_t ctx[SEG_CTX_SLOTS];
    seg_cx_t cx[SEG_CX_SLOTS];
    seg_ra_slot_t ra[SEG_RA_SLOTS];
    seg_path_slot_t path[SEG_PATH_SLOTS];
    seg_rule_slot_t rules[SEG_RULE_SLOTS];
} seg_caches_t;

extern __thread seg_tls_t hl_seg_t __attribute__((tls_model("initial-exec")));
extern __thread seg_caches_t hl_seg_caches __attribute__((tls_model("initial-exec")));

/* Empty caches nothing writes (seg_ident.h): where t->ctxp and t->spp point
 * while every lookup must miss. */
extern seg_ctx_t hl_seg_ctx_none[SEG_CTX_SLOTS];
extern seg_ra_slot_t hl_seg_ra_none[SEG_RA_SLOTS];

/* ---- set at initialisation (segregated.c), read without the lock ---- */

enum {
    SEG_MODE_UNREADY = 0, /* before the allocator initialised: no prediction */
    SEG_MODE_ONE = 1,     /* one segment (DEFAULT) */
    SEG_MODE_STACK = 2,   /* PATH, STACK, STACK+size: identify the call site */
    SEG_MODE_RANDOM = 3,  /* RANDOM */
    SEG_MODE_OTHER = 4,   /* four segments and no predictor: everything to "other" */
    SEG_MODE_SP = 5,      /* SP: the stack depth decides */
};
extern unsigned hl_seg_mode;
extern uint64_t hl_seg_allocations; /* new objects (RANDOM's count), atomic */
extern int hl_seg_debug;            /* HEAPLAB_SEG_DEBUG */
extern int hl_seg_caching;          /* per-thread decisions are kept (not in tests) */
extern int hl_seg_by_size;          /* STACK+size: a walk's class depends on the size */
extern int hl_seg_front_on;         /* the fast cores serve without the lock (not under the
                                       zoo's test modes HEAPLAB_PAD, HEAPLAB_GENERIC) */

/* ---- seg_ident.c: the predictors' identification functions ---- */

unsigned hl_seg_identify(void *const *fp, size_t size, seg_tls_t *t);      /* PATH, STACK */
unsigned hl_seg_identify_size(void *const *fp, size_t size, seg_tls_t *t); /* STACK+size */
unsigned hl_seg_identify_sp(void *const *fp, size_t size, seg_tls_t *t); /* SP */
/* hl_seg_identify, or (HEAPLAB_SEG_DEBUG, a table without caches) a walk every time. */
seg_ident_fn hl_seg_ident_of_stack(void);
/* hl_seg_identify_sp, or (no caches) the depth's node every time. */
seg_ident_fn hl_seg_ident_of_sp(void);
/* Point the thread's lookups at its own caches (where its predictor keeps
 * them) and its identification at the predictor's; or make the next lookup
 * miss (seg_ident.h: a site hint, calloc's handoff). */
void hl_seg_ident_home(seg_tls_t *t);
void hl_seg_ident_away(seg_tls_t *t);
/* The slots still in the context cache hold decisions not yet counted in
 * lv[]: add them (under the lock, for the report). */
void hl_seg_ident_count(const seg_tls_t *t, uint64_t lv[2 * HL_SEG_LEVELS]);

/* ---- seg_front.c ---- */

/* A thread's first identification: start it, then identify. */
unsigned hl_seg_ident_start(void *const *fp, size_t size, seg_tls_t *t);
/* After a site hint: its class, once. */
unsigned hl_seg_ident_hinted(void *const *fp, size_t size, seg_tls_t *t);
/* The thread's first call: its exit hook, its map and identification, the
 * registry (outside the lock; may allocate).  Leaves t->state ARMED or OFF. */
void hl_seg_thread_start(seg_tls_t *t);
/* What the inline paths of seg_front.h leave to a call: a new slab, the
 * thread's start, medium sizes, another thread's block; NULL: the locked
 * path, with segment s pending. */
void *hl_seg_front_more(size_t size, unsigned s);
void *hl_seg_front_more_calloc(size_t size, unsigned s);
/* The inline identification's misses (seg_front.h, HL_SEG_INLINE_STACK):
 * the segment (hl_seg_ident_miss, hl_seg_ident_other), then the block. */
struct seg_ctx;
void *hl_seg_front_alloc_miss(size_t size, void *const *fp, struct seg_ctx *e, int zero);
void *hl_seg_front_alloc_other(size_t size, void *const *fp, struct seg_ctx *e, int zero,
                               uintptr_t y0, uintptr_t y1);
/* malloc's misses (seg_front.h's hl_seg_front_malloc_whole), each finishing
 * the allocation: each ends in the shim's locked path when the fast cores
 * cannot serve. */
void *hl_seg_front_malloc_more(size_t size, size_t core);
void *hl_seg_front_malloc_miss(size_t size, void *const *fp, struct seg_ctx *e);
void *hl_seg_front_malloc_other(size_t size, void *const *fp, struct seg_ctx *e, uintptr_t y0,
                                uintptr_t y1);
struct seg_ra_slot;
void *hl_seg_front_malloc_sp_miss(size_t size, void *const *fp, struct seg_ra_slot *e);
int hl_seg_front_free_more(void *p);
/* Counters of every thread, those that exited included (under the lock). */
typedef struct hl_seg_counts {
    uint64_t objects[HL_SEG_CLASSES]; /* new objects served without the lock, per segment */
    uint64_t frees;                   /* frees served without the lock */
    uint64_t hinted[HL_SEG_CLASSES];
    hl_seg_ident_stats_t id;
} hl_seg_counts_t;
void hl_seg_front_sum(hl_seg_counts_t *c);
struct heaplab_alloc_stats;
void hl_seg_front_stats(struct heaplab_alloc_stats *s);
void hl_seg_front_fork_child(void);

#endif
