/*
 * unwind_bench.c: what one walk costs, hl_unwind against libunwind, in the
 * same invocation (a benchmark, not a test). The walks start DEPTH frames
 * deep in a -O2 program without frame pointers and ask for FRAMES addresses,
 * as the agent does (8 frames + its own).
 *
 *   unwind-bench [WALKS [DEPTH [FRAMES [WHICH]]]]    WHICH: both (default), fast, libunwind, trace
 *
 * Instructions per walk: run one walker under callgrind, e.g.
 *   valgrind --tool=callgrind build/bin/unwind-bench 100000 12 9 fast
 * and divide hl_unwind_walk_'s inclusive count by WALKS.
 */
#include "hl_unwind.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#define UNW_LOCAL_ONLY
#include <libunwind.h>

static long walks;
static int frames;
static const char *which;
static volatile long sink;

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static __attribute__((noinline)) void leaf(void) {
    void *buf[128];
    uintptr_t ip[128], sp[128];
    int lu = !strcmp(which, "libunwind") || !strcmp(which, "both");
    int fast = !strcmp(which, "fast") || !strcmp(which, "both");
    int trace = !strcmp(which, "trace");
    if (fast) {
        double t0 = now();
        for (long i = 0; i < walks; i++)
            sink += hl_unwind_backtrace(buf, frames);
        double t = now() - t0;
        printf("hl_unwind_backtrace: %.1f ns per walk of %d frames\n", t / walks * 1e9, frames);
    }
    if (trace) {
        double t0 = now();
        for (long i = 0; i < walks; i++)
            sink += hl_unwind_trace(ip, sp, frames);
        double t = now() - t0;
        printf("hl_unwind_trace: %.1f ns per walk of %d frames\n", t / walks * 1e9, frames);
    }
    if (lu) {
        double t0 = now();
        for (long i = 0; i < walks; i++)
            sink += unw_backtrace(buf, frames);
        double t = now() - t0;
        printf("unw_backtrace:       %.1f ns per walk of %d frames\n", t / walks * 1e9, frames);
    }
}

static __attribute__((noinline)) void down(int d) {
    volatile char pad[24 + 8 * (d % 5)];
    pad[0] = 0;
    if (d <= 0)
        leaf();
    else
        down(d - 1);
    sink += pad[0];
}

int main(int argc, char **argv) {
    walks = argc > 1 ? atol(argv[1]) : 1000000;
    int depth = argc > 2 ? atoi(argv[2]) : 12;
    frames = argc > 3 ? atoi(argv[3]) : 9;
    which = argc > 4 ? argv[4] : "both";
    if (frames > 128) frames = 128;
    unw_set_caching_policy(unw_local_addr_space, UNW_CACHE_PER_THREAD);
    down(depth);
    return 0;
}
