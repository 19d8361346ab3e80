/*
 * unwind_check.h: one comparison of hl_unwind against libunwind from the
 * same point, shared by the oracle tests and the preload checker.
 *
 * uc_compare() walks the stack four ways from inside itself:
 *   hl_unwind_trace (ip, sp), hl_unwind_backtrace, unw_backtrace, and a
 *   libunwind cursor (UNW_REG_IP, UNW_REG_SP).
 * Frame 0 is uc_compare's own (each walk from its own call site), so frames
 * 1.. must be identical: same count, same addresses, same stack pointers.
 * When hl_unwind is built without libunwind and it met a frame it cannot
 * walk (its fallback counter moved), its result must be a prefix instead.
 */
#ifndef UNWIND_CHECK_H
#define UNWIND_CHECK_H

#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "hl_unwind.h"

#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#define UNW_LOCAL_ONLY
#include <libunwind.h>

#define UC_MAX 64

typedef struct uc_result {
    unsigned long walks, mismatches, frames, fallbacks, printed, memo_hits, memo_bad, memo_stale;
} uc_result_t;

/* The memo of walks (hl_unwind_backtrace_memo), checked against the same
 * libunwind walk: its value is a hash of frames 1.. of the walk it kept, so
 * a hit must give the hash of the frames libunwind finds now. Few slots, so
 * that walks from the same place with other stacks above meet often. */
#define UC_MEMO_SLOTS 16
#define UC_MEMO_MAX   8
static __thread hl_unwind_memo_t uc_memo_slots[UC_MEMO_SLOTS];
static __thread hl_unwind_memos_t uc_memos;

static uint64_t uc_hash(void *const *f, int from, int to) {
    uint64_t h = 1469598103934665603ull ^ (uint64_t)(to - from);
    for (int i = from; i < to; i++)
        h = (h ^ (uint64_t)(uintptr_t)f[i]) * 1099511628211ull;
    return h;
}

static void uc_say_frame(const char *what, int i, uintptr_t a, uintptr_t s) {
    char line[512];
    Dl_info di;
    const char *mod = "?", *fn = "?";
    uintptr_t base = 0;
    if (a && dladdr((void *)(a - 1), &di)) {
        mod = di.dli_fname ? di.dli_fname : "?";
        fn = di.dli_sname ? di.dli_sname : "?";
        base = (uintptr_t)di.dli_fbase;
    }
    int n = snprintf(line, sizeof line, "  %s[%d] ip=%#lx sp=%#lx %s+%#lx (%s)\n", what, i,
                     (unsigned long)a, (unsigned long)s, mod, (unsigned long)(a - base), fn);
    if (n > 0) {
        ssize_t w = write(2, line, (size_t)n < sizeof line ? (size_t)n : sizeof line - 1);
        (void)w;
    }
}

static __attribute__((noinline)) int uc_compare(int max, uc_result_t *res) {
    uintptr_t ip[UC_MAX], sp[UC_MAX], cip[UC_MAX], csp[UC_MAX];
    void *bip[UC_MAX], *bt[UC_MAX];
    if (max > UC_MAX) max = UC_MAX;
    hl_unwind_stats_t s0, s1;
    hl_unwind_get_stats(&s0);
    int n = hl_unwind_trace(ip, sp, max);
    int nb = hl_unwind_backtrace(bip, max);
    if (!uc_memos.slots) /* steady: every walk through the memo, however rarely it stands */
        uc_memos.slots = uc_memo_slots, uc_memos.mask = UC_MEMO_SLOTS - 1, uc_memos.steady = 1;
    void *mf[UC_MEMO_MAX];
    uint64_t mval = 0;
    int mm = max < UC_MEMO_MAX ? max : UC_MEMO_MAX;
    int mn = hl_unwind_backtrace_memo(mf, mm, &uc_memos, &mval);
    if (mn >= 0) {
        mval = uc_hash(mf, 1, mn);
        hl_unwind_memo_keep(&uc_memos, mval);
    }
    hl_unwind_get_stats(&s1);
    int m = unw_backtrace(bt, max);
    int nc = 0;
    unw_context_t uc;
    unw_cursor_t cur;
    if (!unw_getcontext(&uc) && !unw_init_local(&cur, &uc)) {
        for (;;) {
            unw_word_t a, s;
            if (unw_get_reg(&cur, UNW_REG_IP, &a) || unw_get_reg(&cur, UNW_REG_SP, &s)) break;
            cip[nc] = a;
            csp[nc] = s;
            if (++nc == max || unw_step(&cur) <= 0) break;
        }
    }
    int fell = s1.fallbacks != s0.fallbacks;
#ifdef HL_UNWIND_LIBUNWIND
    int prefix_ok = 0;
#else
    int prefix_ok = fell;
#endif
    int bad = 0;
    if (prefix_ok ? (n > m || nb > m) : (n != m || nb != m)) bad = 1;
    if (nc != m) bad = 1;
    for (int i = 1; !bad && i < n && i < m; i++)
        if (ip[i] != (uintptr_t)bt[i] || ip[i] != (uintptr_t)bip[i] || ip[i] != cip[i] ||
            sp[i] != csp[i])
            bad = 1;
    if (!fell) { /* the memo's frames (or the hash it kept) are libunwind's first mm */
        int want = m < mm ? m : mm;
        if (mn < 0) res->memo_hits++;
        if (mval != uc_hash(bt, 1, want)) {
            res->memo_bad++;
            bad = 1;
        }
    }
    res->walks++;
    res->frames += (unsigned long)n;
    res->fallbacks += (unsigned long)fell;
    if (bad) {
        res->mismatches++;
        if (res->printed++ < 3) {
            char head[160];
            int k = snprintf(head, sizeof head,
                             "unwind mismatch: hl_unwind_trace %d, hl_unwind_backtrace %d, "
                             "unw_backtrace %d, cursor %d frames (fallback %d, memo %d)\n",
                             n, nb, m, nc, fell, mn);
            ssize_t w = write(2, head, (size_t)k);
            (void)w;
            for (int i = 0; i < n; i++)
                uc_say_frame("hl    ", i, ip[i], sp[i]);
            for (int i = 0; i < nc; i++)
                uc_say_frame("cursor", i, cip[i], csp[i]);
            for (int i = 0; i < m; i++)
                uc_say_frame("unw_bt", i, (uintptr_t)bt[i], 0);
        }
    }
    __asm__ volatile("" ::: "memory"); /* no tail call: frame 0 stays ours */
    return bad;
}

#endif
