/*
 * unwind_oracle.c: hl_unwind against libunwind from the same points, frame
 * for frame (tests/unwind_check.h). Built -O2 -fomit-frame-pointer, so the
 * walk meets rsp-based frames, rbp-based ones (alloca), large frames, frames
 * that save rbp as a plain callee-saved register, tail calls, a signal frame
 * (a handler that walks), and threads.
 *
 *   unwind-oracle [ITERATIONS]     exit 0: every walk equal; 1: a mismatch
 */
#include "unwind_check.h"

#include <alloca.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>

static __thread uc_result_t res;
static __thread unsigned long rng;
static volatile int sink;

static unsigned next(void) {
    rng = rng * 6364136223846793005ul + 1442695040888963407ul;
    return (unsigned)(rng >> 33);
}

static int f1(int d);
static int f2(int d);
static int f3(int d);

static __attribute__((noinline)) int leaf(int d) {
    uc_compare(next() % 5 == 0 ? 1 + (int)(next() % 8) : UC_MAX, &res);
    return d + 1;
}

/* rsp-based, keeps several values live across calls (saves rbx, rbp, r12..) */
static __attribute__((noinline)) int f1(int d) {
    if (d <= 0) return leaf(d);
    int a = (int)next(), b = (int)next(), c = (int)next(), e = (int)next(), f = (int)next(),
        g = (int)next();
    int r = (next() % 3 == 0 ? f2(d - 1) : f3(d - 1));
    return r + a * b + c * e + f * g + a * g;
}

/* alloca: the CFA is rbp-based even without frame pointers */
static __attribute__((noinline)) int f2(int d) {
    size_t n = 16 + next() % 512;
    volatile char *p = alloca(n);
    p[0] = (char)d;
    p[n - 1] = 1;
    if (d <= 0) return leaf(d) + p[0];
    return (next() % 2 ? f1(d - 1) : f3(d - 1)) + p[n - 1];
}

/* a large frame: a big rsp offset */
static __attribute__((noinline)) int f3(int d) {
    volatile char big[9000];
    big[0] = (char)d;
    big[8999] = 2;
    if (d <= 0) return leaf(d) + big[0];
    int r = next() % 2 ? f1(d - 1) : f2(d - 1);
    return r + big[8999];
}

static void on_signal(int sig) {
    (void)sig;
    f1(3);
}

/* Two walks from one place through a memo: the second stands, unless
 * hl_unwind_reset came between (what the agent's dlclose does). Returns the
 * memos that stood. */
static __attribute__((noinline)) int memo_twice(int reset) {
    static hl_unwind_memo_t slots[4];
    hl_unwind_memos_t m = {0};
    m.slots = slots;
    m.mask = 3;
    m.steady = 1;
    memset(slots, 0, sizeof slots);
    int hits = 0;
    for (int k = 0; k < 2; k++) {
        void *b[8];
        uint64_t v;
        if (k && reset) hl_unwind_reset();
        if (hl_unwind_backtrace_memo(b, 8, &m, &v) < 0)
            hits++;
        else
            hl_unwind_memo_keep(&m, 1);
    }
    return hits;
}

static int run(int iters) {
    for (int i = 0; i < iters; i++) {
        int d = (int)(next() % 12);
        sink = next() % 3 == 0 ? f1(d) : next() % 2 ? f2(d) : f3(d);
        if (i % 997 == 0) hl_unwind_reset(); /* rules come back from .eh_frame */
    }
    raise(SIGUSR1); /* a walk through a signal frame */
    return 0;
}

static void *thread_main(void *arg) {
    rng = (unsigned long)(uintptr_t)arg;
    run((int)(intptr_t)arg);
    uc_result_t *out = malloc(sizeof *out);
    res.memo_stale = uc_memos.stale;
    *out = res;
    return out;
}

int main(int argc, char **argv) {
    int iters = argc > 1 ? atoi(argv[1]) : 3000;
    signal(SIGUSR1, on_signal);
    rng = 42;
    hl_unwind_init(); /* (a walk before the mode is known keeps no memo) */
    int kept = memo_twice(0), reset = memo_twice(1);
    if (kept != 1 || reset != 0) {
        printf("unwind-oracle: a memo stood %d of 1 times from one place, %d of 0 after a reset\n",
               kept, reset);
        return 1;
    }
    unsigned long walks = 0, bad = 0, frames = 0, falls = 0, hits = 0, mbad = 0, stale = 0;
    for (int mode = 0; mode < 2; mode++) {
#ifdef HL_UNWIND_LIBUNWIND
        if (hl_unwind_set_mode(mode ? HL_UNWIND_MODE_LIBUNWIND : HL_UNWIND_MODE_FAST)) return 2;
#else
        if (mode) break;
#endif
        pthread_t t[4];
        for (int i = 0; i < 4; i++)
            pthread_create(&t[i], NULL, thread_main, (void *)(intptr_t)(iters + i));
        run(iters);
        for (int i = 0; i < 4; i++) {
            uc_result_t *r;
            pthread_join(t[i], (void **)&r);
            walks += r->walks;
            bad += r->mismatches;
            frames += r->frames;
            falls += r->fallbacks;
            hits += r->memo_hits;
            stale += r->memo_stale;
            mbad += r->memo_bad;
            free(r);
        }
    }
    walks += res.walks;
    bad += res.mismatches;
    frames += res.frames;
    falls += res.fallbacks;
    hits += res.memo_hits;
    stale += uc_memos.stale;
    mbad += res.memo_bad;
    hl_unwind_stats_t st;
    hl_unwind_get_stats(&st);
    printf("unwind-oracle: %lu walks, %lu frames, %lu with a fallback, %lu rule misses, %lu "
           "mismatches; memo: %lu hits, %lu turned down (a word changed), %lu wrong\n",
           walks, frames, falls, (unsigned long)st.misses, bad, hits, stale, mbad);
    /* the memo must both stand and be turned down, and never be wrong */
    return bad || mbad || !walks || !hits || !stale ? 1 : 0;
}
