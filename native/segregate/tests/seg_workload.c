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
 *   deep   hot and cold objects again, through the same four functions
 *          (deep4 .. deep1, then xmalloc), told apart only by the function
 *          that called deep4: a decision five frames up, which a context
 *          slot keeps as five words, both at the same (return address,
 *          depth), so that the run-time lookups must compare every word
 *   unseen in runs of more than 20 rounds (the tests train on 20), every
 *          other short-lived deep hot object and deep cold one comes through
 *          a chain (deep1, then u1 .. u6, which calls malloc) whose return
 *          addresses training never saw: PATH scans for the innermost path
 *          point (main's call of make_deep_hot or make_deep_cold, eleven
 *          frames up), which a context slot keeps as eleven words, a long
 *          slot (seg_thread.h); the two alternate at one (return address,
 *          depth) with different classes
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
/* Without frame pointers (the build keeps them): each frame then costs a slot
 * one word, its return address, not two. */
#define DEEP __attribute__((noinline, optimize("omit-frame-pointer")))
#define DEEP_STEP(name, callee)                                                     \
    DEEP static void *name(size_t n) {                                             \
        void *p = callee(n);                                                       \
        __asm__ volatile("" ::: "memory"); /* no tail call: each keeps its frame */ \
        return p;                                                                  \
    }
static volatile int unseen; /* deep1 goes through u1 .. u6 (the unseen objects) */
DEEP static void *u6(size_t n) {
    void *p = malloc(n);
    if (!p) abort();
    __asm__ volatile("" ::: "memory");
    return p;
}
DEEP_STEP(u5, u6)
DEEP_STEP(u4, u5)
DEEP_STEP(u3, u4)
DEEP_STEP(u2, u3)
DEEP_STEP(u1, u2)
DEEP static void *deep1(size_t n) {
    void *p = unseen ? u1(n) : xmalloc(n);
    __asm__ volatile("" ::: "memory");
    return p;
}
DEEP_STEP(deep2, deep1)
DEEP_STEP(deep3, deep2)
DEEP_STEP(deep4, deep3)
DEEP static long *make_deep_hot(void) {
    long *p = deep4(64);
    __asm__ volatile("" ::: "memory");
    return p;
}
DEEP static char *make_deep_cold(void) {
    char *p = deep4(80); /* (not make_deep_hot's size: -fipa-icf would fold the two) */
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
    volatile long *hot[HOT], *dhot[HOT];
    char *dcold[COLD * 64];
    int ndcold = 0;
    char *cold[COLD * 64];
    int ncold = 0;
    for (int i = 0; i < HOT; i++) {
        hot[i] = make_hot();
        for (int j = 0; j < 8; j++)
            hot[i][j] = j;
        dhot[i] = make_deep_hot();
        for (int j = 0; j < 8; j++)
            dhot[i][j] = j;
    }
    char *grown = NULL;
    size_t glen = 0;
    long sum = 0;
    for (int r = 0; r < rounds; r++) {
        for (int i = 0; i < HOT; i++)
            for (int k = 0; k < 40; k++) {
                hot[i][k & 7] += k;
                sum += hot[i][(k + 3) & 7];
                dhot[i][k & 7] += k;
                sum += dhot[i][(k + 5) & 7];
            }
        for (int i = 0; i < 30; i++)
            sum += temp_work(r * 30 + i);
        for (int i = 0; i < COLD / 10 && ncold < COLD * 64; i++) {
            char *c = make_cold();
            ((volatile char *)c)[0] = (char)i;
            cold[ncold++] = c;
            unseen = rounds > 20 && (i & 1); /* (the tests train on 20 rounds) */
            char *d = make_deep_cold(); /* (alternating with the hot ones' (ra, depth)) */
            ((volatile char *)d)[0] = (char)i;
            dcold[ndcold++] = d;
            long *h = make_deep_hot(); /* short-lived: freed at once */
            h[0] = i;
            sum += ((volatile long *)h)[0];
            free(h);
            unseen = 0;
        }
        grown = realloc(grown, glen + 64);
        memset(grown + glen, r & 0xff, 64);
        glen += 64;
    }
    for (size_t i = 0; i < glen; i += 64)
        sum += ((volatile char *)grown)[i];
    for (int i = 0; i < HOT; i++) {
        free((void *)hot[i]);
        free((void *)dhot[i]);
    }
    free(grown);
    sink = ncold + ndcold + (long)(cold[0] != NULL) + (long)(dcold[0] != NULL);
    printf("seg-workload: %d rounds, checksum %ld\n", rounds, sum);
    return 0;
}
