/*
 * churn: an allocation-bound C program for benchmarks (not a test), in the
 * manner of cfrac: every operation allocates its result and frees its
 * operands, so most objects are small and die young, in LIFO order, and a
 * few live long. About 40-60 million malloc and free calls a second
 * natively (glibc) on one core of the reference VM.
 *
 *   churn [STEPS]        default 10000000 steps: ~50 M calls, ~1 s natively
 *
 * Each step builds a chain of 1..4 temporaries of 16..72 bytes (an
 * operation's operands and partial results), does a little arithmetic on
 * each (WORK rounds, what keeps the calls ~20 ns apart), then frees them
 * newest first; every 16th step also replaces one of 64 long-lived objects
 * of 32..536 bytes. Sizes, chain lengths and slots come from a xorshift
 * generator with a fixed seed, so every run makes the same calls in the
 * same order. The checksum it prints depends on that generator and the
 * arithmetic only, never on addresses: it is the same under any allocator
 * or recorder (bench/record-overhead.py checks it).
 *
 *   calls: malloc = frees = sum of chain lengths + STEPS/16 (+ 64 final frees
 *   balance the first 64 replacements, which free nothing)
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#define LONG_LIVED 64
#define WORK       24

typedef struct node {
    uint64_t v;
    struct node *prev;
} node_t;

int main(int argc, char **argv) {
    uint64_t steps = argc > 1 ? strtoull(argv[1], NULL, 10) : 10000000;
    static uint64_t *keep[LONG_LIVED];
    uint64_t x = 88172645463325252ull, sum = 0;
    for (uint64_t i = 0; i < steps; i++) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        unsigned n = 1 + (unsigned)(x & 3);
        node_t *top = NULL;
        uint64_t y = x;
        for (unsigned k = 0; k < n; k++) {
            size_t size = 16 + 8 * (size_t)(x >> (4 + 3 * k) & 7);
            node_t *o = malloc(size);
            if (!o) return 1;
            for (int w = 0; w < WORK; w++)
                y = y * 6364136223846793005ull + 1442695040888963407ull;
            o->v = y ^ (top ? top->v : 0);
            o->prev = top;
            top = o;
        }
        while (top) {
            node_t *prev = top->prev;
            sum += top->v >> 32;
            free(top);
            top = prev;
        }
        if ((i & 15) == 0) {
            unsigned s = (unsigned)(x >> 20) & (LONG_LIVED - 1);
            if (keep[s]) {
                sum ^= keep[s][0];
                free(keep[s]);
            }
            keep[s] = malloc(32 + 8 * (size_t)(x >> 26 & 63));
            if (!keep[s]) return 1;
            keep[s][0] = x;
        }
    }
    for (unsigned s = 0; s < LONG_LIVED; s++)
        if (keep[s]) {
            sum ^= keep[s][0];
            free(keep[s]);
        }
    printf("churn %llu steps, checksum %016llx\n", (unsigned long long)steps,
           (unsigned long long)sum);
    return 0;
}
