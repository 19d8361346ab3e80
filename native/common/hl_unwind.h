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

/* Reads HEAPLAB_UNWIND (fast | libunwind; default fast). A bad value is
 * reported on stderr and the default used. Optional: the walkers start
 * themselves; call it early to get the report early. */
HL_UNWIND_API void hl_unwind_init(void);

/* 0, or -1 when the mode is not built in (libunwind without HL_UNWIND_LIBUNWIND). */
HL_UNWIND_API int hl_unwind_set_mode(hl_unwind_mode_t mode);
HL_UNWIND_API hl_unwind_mode_t hl_unwind_mode(void);
HL_UNWIND_API const char *hl_unwind_mode_name(void);

/* Forgets every cached rule (after dlclose, when a module may have been
 * replaced by another at the same address). */
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
