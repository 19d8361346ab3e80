/*
 * testlib.h: what the allocator test programs share.  They are ordinary
 * programs linked against the C library; tests/run.sh runs each one under
 * LD_PRELOAD=libheaplab-NAME.so, and without a preload as the glibc control.
 * Compiled with -fno-builtin so that the compiler cannot fold away a malloc.
 */
#ifndef HL_TESTLIB_H
#define HL_TESTLIB_H

#define _GNU_SOURCE
#include "hl_alloc.h"

#include <dlfcn.h>
#include <errno.h>
#include <malloc.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *t_prog = "test";
static unsigned long t_checks, t_failures;

/* Record one expectation; print it when it fails (at most 50 lines). */
#define EXPECT(cond, ...)                                                                          \
    do {                                                                                           \
        t_checks++;                                                                                \
        if (!(cond)) {                                                                             \
            if (++t_failures <= 50) {                                                              \
                fprintf(stderr, "%s: FAIL %s:%d: %s: ", t_prog, __FILE__, __LINE__, #cond);        \
                fprintf(stderr, __VA_ARGS__);                                                      \
                fputc('\n', stderr);                                                               \
            }                                                                                      \
        }                                                                                          \
    } while (0)

static __attribute__((unused)) int t_finish(void) {
    printf("%s: %lu checks, %lu failures\n", t_prog, t_checks, t_failures);
    return t_failures ? 1 : 0;
}

/* xorshift64*: deterministic for a seed, no libc state. */
typedef struct t_rng {
    uint64_t s;
} t_rng_t;
static inline uint64_t t_next(t_rng_t *r) {
    r->s ^= r->s >> 12;
    r->s ^= r->s << 25;
    r->s ^= r->s >> 27;
    return r->s * 0x2545F4914F6CDD1Dull;
}
static inline uint64_t t_below(t_rng_t *r, uint64_t n) {
    return t_next(r) % n;
}

/* The pattern byte at offset i of a block whose pattern seed is s. */
static inline unsigned char t_pat(uint64_t s, size_t i) {
    uint64_t x = (s + i / 8) * 0x9E3779B97F4A7C15ull;
    return (unsigned char)(x >> (8 * (i % 8)));
}
static __attribute__((unused)) void t_fill(void *p, size_t n, uint64_t s) {
    unsigned char *c = p;
    for (size_t i = 0; i < n; i++)
        c[i] = t_pat(s, i);
}
/* Offset of the first byte that differs from the pattern, or -1. */
static __attribute__((unused)) long t_verify(const void *p, size_t n, uint64_t s) {
    const unsigned char *c = p;
    for (size_t i = 0; i < n; i++)
        if (c[i] != t_pat(s, i)) return (long)i;
    return -1;
}

/* heaplab's exports, NULL under glibc. */
static int (*t_check_fn)(void);
static int (*t_stats_fn)(heaplab_alloc_stats_t *, size_t);
static const hl_alloc_info_t *(*t_info_fn)(void);
static void t_lookup(void) {
    t_check_fn = (int (*)(void))dlsym(RTLD_DEFAULT, "heaplab_alloc_check");
    t_stats_fn =
        (int (*)(heaplab_alloc_stats_t *, size_t))dlsym(RTLD_DEFAULT, "heaplab_alloc_stats");
    t_info_fn = (const hl_alloc_info_t *(*)(void))dlsym(RTLD_DEFAULT, "heaplab_alloc_info");
}
static void t_check_heap(void) {
    if (t_check_fn) t_check_fn();
}

/* Live blocks for the overlap test. */
typedef struct t_span {
    uintptr_t lo, hi;
} t_span_t;
static __attribute__((unused)) int t_span_cmp(const void *a, const void *b) {
    const t_span_t *x = a, *y = b;
    return x->lo < y->lo ? -1 : x->lo > y->lo;
}
/* Sort n spans (qsort may call malloc; fine) and count overlapping pairs. */
static __attribute__((unused)) size_t t_overlaps(t_span_t *s, size_t n) {
    qsort(s, n, sizeof *s, t_span_cmp);
    size_t bad = 0;
    for (size_t i = 1; i < n; i++)
        if (s[i].lo < s[i - 1].hi) {
            if (++bad <= 5)
                fprintf(stderr, "%s: overlap: [%#lx,%#lx) and [%#lx,%#lx)\n", t_prog,
                        (unsigned long)s[i - 1].lo, (unsigned long)s[i - 1].hi,
                        (unsigned long)s[i].lo, (unsigned long)s[i].hi);
        }
    return bad;
}

#endif
