/*
 * usable.c: every byte malloc_usable_size promises is the caller's.  Blocks of
 * every size up to 600 bytes and some larger ones are filled to their usable
 * size, interleaved so that neighbours are live, then checked, then freed in
 * a scrambled order, with the allocator's checker run between phases.  A
 * usable size that reaches into a neighbour's header or payload shows up as a
 * changed pattern, a broken tag (a fatal error in free) or a checker failure.
 * Last, calloc of a just-freed dirty block of each size up to 1100 bytes
 * must read as zero (the inline clearing of a reused block), and a block
 * realloc'd through huge sizes keeps its bytes.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <malloc.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define N 4000

static void check_now(void) {
    int (*chk)(void) = (int (*)(void))dlsym(RTLD_DEFAULT, "heaplab_alloc_check");
    if (chk) chk();
}

int main(void) {
    static unsigned char *p[N];
    static size_t u[N];
    int bad = 0;
    for (int round = 0; round < 3; round++) {
        for (int i = 0; i < N; i++) {
            size_t n = i % 7 == 0 ? (size_t)(i * 37 % 20000) : (size_t)(i % 600);
            p[i] = round == 1 && i % 3 == 0 ? calloc(1, n) : malloc(n);
            if (!p[i]) return 2;
            u[i] = malloc_usable_size(p[i]);
            if (u[i] < n) {
                fprintf(stderr, "usable %zu < %zu\n", u[i], n);
                bad++;
            }
            memset(p[i], (unsigned char)i, u[i]);
        }
        check_now();
        for (int i = 0; i < N; i++)
            for (size_t k = 0; k < u[i]; k++)
                if (p[i][k] != (unsigned char)i) {
                    if (bad++ < 10) fprintf(stderr, "block %d (%zu usable) lost byte %zu\n", i, u[i], k);
                    break;
                }
        for (int i = 0; i < N; i++) free(p[(i * 7919) % N]);
        check_now();
    }
    /* calloc of a reused block, every size the fast core clears inline and
     * some it hands to memset: the block is dirtied to its usable size and
     * freed, and calloc of the same size (the same class: its list's head)
     * must read as zero for all it asked. */
    for (size_t n = 1; n <= 1100; n++) {
        unsigned char *d = malloc(n);
        if (!d) return 2;
        memset(d, 0xA5, malloc_usable_size(d));
        free(d);
        unsigned char *c = calloc(n, 1);
        if (!c) return 2;
        for (size_t k = 0; k < n; k++)
            if (c[k]) {
                if (bad++ < 10) fprintf(stderr, "calloc(%zu, 1): byte %zu is %u\n", n, k, c[k]);
                break;
            }
        free(c);
    }
    /* realloc through huge sizes (their own mappings, resized in place or
     * moved by the OS): the bytes kept must survive each step. */
    static const size_t steps[] = {100, 200000, 400000, 4000000, 1000000, 130000, 50000, 300000, 8000000};
    unsigned char *r = NULL;
    size_t had = 0;
    for (size_t k = 0; k < sizeof steps / sizeof steps[0]; k++) {
        size_t n = steps[k], keep = had < n ? had : n;
        r = realloc(r, n);
        if (!r) return 2;
        for (size_t i = 0; i < keep; i++)
            if (r[i] != (unsigned char)(i % 251)) {
                if (bad++ < 10) fprintf(stderr, "realloc to %zu: byte %zu lost\n", n, i);
                break;
            }
        for (size_t i = 0; i < n; i++)
            r[i] = (unsigned char)(i % 251);
        had = n;
    }
    free(r);
    printf("usable: %d problems\n", bad);
    return bad != 0;
}
