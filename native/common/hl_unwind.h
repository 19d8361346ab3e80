/*
 * hl_unwind.h: a fast, cached x86-64 call-stack walker for the recording
 * agent and the segmented allocator (native/common/hl_unwind.c).
 *
 * It returns what libunwind returns (unw_backtrace's addresses, a cursor's
 * UNW_REG_SP), only faster: the CFA rule of each return address is read once
 * from the module's .eh_frame and kept in a lock-free table. Frames whose rule
 * does not fit the fast form hand the walk to libunwind when this file is
 * built with -DHL_UNWIND_LIBUNWIND (link -lunwind); otherwise the walk stops
 * there.
 *
 * Every symbol is hidden: the agent and an allocator preloaded together each
 * carry their own copy. Safe inside malloc hooks (no malloc, no locks), from
 * any thread, and from signal handlers.
 */
#ifndef HL_UNWIND_H
#define HL_UNWIND_H

#include <stdint.h>

#define HL_UNWIND_API __attribute__((visibility("hidden")))

#ifdef __cplusplus
extern "C" {
#endif

typedef enum hl_unwind_mode {
    HL_UNWIND_MODE_FAST = 0,      /* the cached walker (libunwind only for odd frames) */
    HL_UNWIND_MODE_LIBUNWIND = 1, /* every walk by libunwind (needs -DHL_UNWIND_LIBUNWIND) */
} hl_unwind_mode_t;

/* Return addresses, unw_backtrace's convention: buf[0] is the address this
 * call returns to, buf[1] the one its caller returns to, ...  Returns the
 * number of entries written (at most max). */
HL_UNWIND_API int hl_unwind_backtrace(void **buf, int max);

/* The same addresses in ip[], and in sp[] each frame's stack pointer: the
 * CFA of its callee (libunwind's UNW_REG_SP for that frame), so sp[0] is the
 * caller's stack pointer after this call returns. */
HL_UNWIND_API int hl_unwind_trace(uintptr_t *ip, uintptr_t *sp, int max);

/* The same walk from a frame the caller knows (a malloc wrapper that kept a
 * frame pointer knows its caller's): ra its return address, cfa its stack
 * pointer after the return, rbp its rbp at the call.  ip[0] = ra, ip[1] the
 * address its caller returns to, ...; sp (may be NULL) as above. */
HL_UNWIND_API int hl_unwind_from(uintptr_t *ip, uintptr_t *sp, int max, uintptr_t ra,
                                 uintptr_t cfa, uintptr_t rbp);

/* The rule of the frame a return address returns into, for a caller that
 * steps one frame itself (the segmented allocator's identification caches
 * it per call site): CFA = (rbp if cfa_rbp else the stack pointer after the
 * return) + cfa_off; the return address above it is at CFA - 8; the rbp of
 * the frame above is at CFA + rbp_off if rbp_saved, else unchanged.  Returns
 * HL_UNWIND_RULE_STD, HL_UNWIND_RULE_LAST (the outermost frame: nothing above)
 * or HL_UNWIND_RULE_ODD (a rule of another form: walk with the functions
 * above). */
enum { HL_UNWIND_RULE_STD = 0, HL_UNWIND_RULE_LAST = 1, HL_UNWIND_RULE_ODD = 2 };
typedef struct hl_unwind_rule {
    int cfa_rbp;
    int64_t cfa_off;
    int rbp_saved;
    int64_t rbp_off;
} hl_unwind_rule_t;
HL_UNWIND_API int hl_unwind_rule(uintptr_t ra, hl_unwind_rule_t *out);

/* The top of the stack that holds sp (0: unknown). */
HL_UNWIND_API uintptr_t hl_unwind_stack_top(uintptr_t sp);

/* A memo of walks, for a caller that turns a walk into a value of its own
 * (the recording agent: a stack id) and calls from the same places over and
 * over. A walk is a function of where it starts (return address, stack
 * pointer, rbp where a rule uses it before reloading it), the cached rules
 * and the stack words it reads; a memo keeps the start, every word read
 * with its value, and the caller's value. A later walk from the same start
 * whose words all still hold those values would find the same frames, so
 * the memo's value stands for them: a few loads and compares instead of a
 * rule lookup and bounds checks per frame. Exact, not a guess: any word that
 * differs, another max, or an hl_unwind_reset since, and
 * the walk is done again. Walks that leave the fast form (libunwind frames)
 * and walks that read more than HL_UNWIND_MEMO_READS words are not kept.
 *
 *   slots  2^k memos (k >= 1), two ways (i, i ^ 1) by (return address,
 *          stack pointer);
 *          owned by one thread: never share a table, and zero its slots
 *          before another thread takes it over (a memo does not keep the
 *          stack's bounds, which are the thread's)
 */
#define HL_UNWIND_MEMO_READS 20
typedef struct hl_unwind_memo {
    uintptr_t ra, cfa, rbp;     /* the walk's start */
    uint64_t value;             /* the caller's, from hl_unwind_memo_keep */
    uint32_t gen;               /* hl_unwind_reset's count when it was made */
    uint16_t max;               /* frames asked for */
    uint8_t use_rbp;            /* the walk used rbp as it was at the start */
    uint8_t nreads;             /* words read; 0: the slot is empty */
    uint8_t mru;                /* (even slots) the way of the pair to try first */
    uintptr_t addr[HL_UNWIND_MEMO_READS], val[HL_UNWIND_MEMO_READS];
} hl_unwind_memo_t;

typedef struct hl_unwind_memos {
    uintptr_t ra, cfa, rbp;    /* scratch: the entry stub's registers (keep first) */
    hl_unwind_memo_t *slots;   /* 2^k of them, zeroed */
    uintptr_t salt;            /* the caller's, mixed into the choice of slot only: what it
                                  knows of the call that tells walks from one start apart
                                  (the agent: which entry point); never trusted, as every
                                  memo is checked word by word */
    unsigned mask;             /* 2^k - 1 */
    hl_unwind_memo_t *pending; /* the walk just made, until kept */
    int32_t score;             /* memos that stood minus walks made, recently (-16..64) */
    uint32_t skip;             /* walks left to make without memos (score fell to -16) */
    int steady;                /* 1: never skip (tests that need every memo checked) */
    uint64_t hits, walks;      /* counters for tests and benchmarks: kept walks that stood, */
    uint64_t stale;            /* walks made, and of those, memos of the same start that a
                                  changed word turned down */
} hl_unwind_memos_t;

/* hl_unwind_backtrace through a memo: -1 with *value when a kept walk from
 * here stands (see above); else the walk's frames in buf, as
 * hl_unwind_backtrace returns them, and the caller may keep it with its
 * value by hl_unwind_memo_keep before its next walk on this table. With
 * HEAPLAB_UNWIND=libunwind every call walks. errno is left as it was. */
HL_UNWIND_API int hl_unwind_backtrace_memo(void **buf, int max, hl_unwind_memos_t *m,
                                           uint64_t *value);
HL_UNWIND_API void hl_unwind_memo_keep(hl_unwind_memos_t *m, uint64_t value);

/* Reads HEAPLAB_UNWIND (fast | libunwind; default fast). A bad value is
 * reported on stderr and the default used. Optional: the walkers start
 * themselves; call it early to get the report early. */
HL_UNWIND_API void hl_unwind_init(void);

/* 0, or -1 when the mode is not built in (libunwind without HL_UNWIND_LIBUNWIND). */
HL_UNWIND_API int hl_unwind_set_mode(hl_unwind_mode_t mode);
HL_UNWIND_API hl_unwind_mode_t hl_unwind_mode(void);
HL_UNWIND_API const char *hl_unwind_mode_name(void);

/* Forgets every cached rule and every memo (after dlclose, when a module
 * may have been replaced by another at the same address). */
HL_UNWIND_API void hl_unwind_reset(void);

/* Counters for tests and benchmarks (relaxed atomics, off the hot path). */
typedef struct hl_unwind_stats {
    uint64_t misses;    /* rules computed from .eh_frame */
    uint64_t fallbacks; /* walks handed to libunwind (or cut short without it) */
} hl_unwind_stats_t;
HL_UNWIND_API void hl_unwind_get_stats(hl_unwind_stats_t *out);

#ifdef __cplusplus
}
#endif

#endif
