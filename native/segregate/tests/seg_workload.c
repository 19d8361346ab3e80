/*
 * seg-workload: a small program whose heap objects fall into paper 001's
 * classes by construction, for the end-to-end tests of heaplab segregate
 * (crates/heaplab-segregate/tests/end_to_end.rs): record it with
 * `heaplab record --refs`, train on it, emit the segmented allocator, run it
 * again on it.  Each kind of object comes from its own call path:
 *
 *   hot    64-byte objects, long-lived, read and written thousands of times
 *          (through the wrapper xmalloc)
 *   temp   32-byte objects, freed right after a few references (short-lived;
 *          malloc called directly: the return address alone tells them)
 *   cold   256-byte objects, long-lived, written once and never read (through
 *          xmalloc too: its return address is ambiguous, its callers decide)
 *   grown  one buffer grown by realloc (one object, §5.1)
 *
 * `seg-workload N` makes N rounds (default 20); it prints a checksum, so a
 * run under another allocator can be compared with glibc's.  Heap accesses go
 * through volatile pointers, so the counts do not depend on the optimizer.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define HOT  16
#define COLD 40

static volatile long sink;

__attribute__((noinline)) static void *xmalloc(size_t n) {
    void *p = malloc(n);
    if (!p) abort();
    __asm__ volatile("" ::: "memory");
    return p;
}
__attribute__((noinline)) static long *make_hot(void) {
    long *p = xmalloc(64);
    __asm__ volatile("" ::: "memory"); /* no tail call: make_hot keeps its frame */
    return p;
}
__attribute__((noinline)) static char *make_cold(void) {
    char *p = xmalloc(256);
    __asm__ volatile("" ::: "memory");
    return p;
}
__attribute__((noinline)) static long temp_work(int r) {
    volatile long *t = malloc(32);
    long s = 0;
    for (int i = 0; i < 4; i++)
        t[i] = r + i;
    for (int i = 0; i < 4; i++)
        s += t[i];
    free((void *)t);
    return s;
}

int main(int argc, char **argv) {
    int rounds = argc > 1 ? atoi(argv[1]) : 20;
    volatile long *hot[HOT];
    char *cold[COLD * 64];
    int ncold = 0;
    for (int i = 0; i < HOT; i++) {
        hot[i] = make_hot();
        for (int j = 0; j < 8; j++)
            hot[i][j] = j;
    }
    char *grown = NULL;
    size_t glen = 0;
    long sum = 0;
    for (int r = 0; r < rounds; r++) {
        for (int i = 0; i < HOT; i++)
            for (int k = 0; k < 40; k++) {
                hot[i][k & 7] += k;
                sum += hot[i][(k + 3) & 7];
            }
        for (int i = 0; i < 30; i++)
            sum += temp_work(r * 30 + i);
        for (int i = 0; i < COLD / 10 && ncold < COLD * 64; i++) {
            char *c = make_cold();
            ((volatile char *)c)[0] = (char)i;
            cold[ncold++] = c;
        }
        grown = realloc(grown, glen + 64);
        memset(grown + glen, r & 0xff, 64);
        glen += 64;
    }
    for (size_t i = 0; i < glen; i += 64)
        sum += ((volatile char *)grown)[i];
    for (int i = 0; i < HOT; i++)
        free((void *)hot[i]);
    free(grown);
    sink = ncold + (long)(cold[0] != NULL);
    printf("seg-workload: %d rounds, checksum %ld\n", rounds, sum);
    return 0;
}
