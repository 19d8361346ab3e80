/*
 * bignum: a cfrac-like allocation pattern for benchmarks (not a test).
 * cfrac factors numbers with a small bignum library whose every operation
 * allocates its result and frees its operands; this does the same with
 * heap-allocated decimal-base bignums: Fibonacci numbers, their products and
 * remainders by small numbers, so most objects are small and short-lived.
 *
 *   bignum N           (N around 2000-6000: a second natively)
 *   bignum N PERIOD    start again from 0 and 1 every PERIOD steps, so the
 *                      numbers stay small and the run stays allocation-bound
 *                      however long it is: 80 events per step (bignum 840000
 *                      1000 makes a 67 M-event trace, for bench/compare.py)
 *
 * Built with a synthesized allocator's header (bench/synth-inline.py):
 *
 *   cc -O2 -DSYNTH_H='"NAME.h"' -DSYNTH_NAME=NAME -IDIR -Inative/alloc \
 *      -Inative/common bench/progs/bignum.c DIR/libNAME.a -lpthread
 *
 * the node's malloc, whose size is known when compiling, and every free
 * compile to NAME_malloc / NAME_free, the header's inline fast path (the
 * limbs' calloc stays the library's calloc, linked in from the archive).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef SYNTH_H
#include SYNTH_H
#define SYN_CAT2(a, b) a##b
#define SYN_CAT(a, b)  SYN_CAT2(a, b)
#define big_malloc     SYN_CAT(SYNTH_NAME, _malloc)
#define big_release    SYN_CAT(SYNTH_NAME, _free)
#else
#define big_malloc  malloc
#define big_release free
#endif

/* -DBIG_NOINLINE: big_new and big_free stay functions, so that the rest of
 * the program compiles the same with or without SYNTH_H and the two forms'
 * instruction counts differ by the allocator alone (bench/synth-inline.py). */
#ifdef BIG_NOINLINE
#define BIG_FN static __attribute__((noinline))
#else
#define BIG_FN static
#endif

typedef struct {
    int n;      /* limbs in use */
    uint32_t *d; /* base 1e9, least significant first */
} big_t;

#define BASE 1000000000u

BIG_FN big_t *big_new(int n) {
    big_t *b = big_malloc(sizeof *b);
    b->n = n;
    b->d = calloc((size_t)(n ? n : 1), sizeof(uint32_t));
    return b;
}
BIG_FN void big_free(big_t *b) {
    big_release(b->d);
    big_release(b);
}
static big_t *big_small(uint32_t v) {
    big_t *b = big_new(1);
    b->d[0] = v;
    return b;
}
static void trim(big_t *b) {
    while (b->n > 1 && b->d[b->n - 1] == 0)
        b->n--;
}
static big_t *big_add(const big_t *a, const big_t *b) {
    int n = (a->n > b->n ? a->n : b->n) + 1;
    big_t *r = big_new(n);
    uint64_t c = 0;
    for (int i = 0; i < n; i++) {
        uint64_t s = c + (i < a->n ? a->d[i] : 0) + (i < b->n ? b->d[i] : 0);
        r->d[i] = (uint32_t)(s % BASE);
        c = s / BASE;
    }
    trim(r);
    return r;
}
static big_t *big_mul_small(const big_t *a, uint32_t m) {
    big_t *r = big_new(a->n + 1);
    uint64_t c = 0;
    for (int i = 0; i < a->n; i++) {
        uint64_t p = (uint64_t)a->d[i] * m + c;
        r->d[i] = (uint32_t)(p % BASE);
        c = p / BASE;
    }
    r->d[a->n] = (uint32_t)c;
    trim(r);
    return r;
}
static uint32_t big_mod_small(const big_t *a, uint32_t m) {
    uint64_t r = 0;
    for (int i = a->n - 1; i >= 0; i--)
        r = (r * BASE + a->d[i]) % m;
    return (uint32_t)r;
}

int main(int argc, char **argv) {
    int n = argc > 1 ? atoi(argv[1]) : 3000;
    int period = argc > 2 ? atoi(argv[2]) : 0;
    big_t *a = big_small(0), *b = big_small(1);
    uint64_t check = 0;
    for (int i = 0; i < n; i++) {
        if (period > 0 && i > 0 && i % period == 0) {
            big_free(a);
            big_free(b);
            a = big_small(0);
            b = big_small(1);
        }
        big_t *c = big_add(a, b);
        big_free(a);
        a = b;
        b = c;
        /* a few short-lived products and remainders per step, as cfrac's trial divisions */
        for (uint32_t p = 3; p < 40; p += 2) {
            big_t *t = big_mul_small(c, p);
            check += big_mod_small(t, 1000003u + p);
            big_free(t);
        }
    }
    printf("%u limbs, check %llu\n", b->n, (unsigned long long)check);
    big_free(a);
    big_free(b);
    return 0;
}
