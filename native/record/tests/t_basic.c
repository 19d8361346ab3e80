/* t_basic: every entry point of the malloc API, with its edge cases, in a
 * known order (see tprog.h for the expected-events notation). */
#include "tprog.h"

#include <errno.h>
#include <malloc.h>
#include <stdint.h>

int main(void) {
    void *begin = tp_mark_begin();

    char *a = malloc(24);
    int la = tp_label();
    tp_say("malloc 24 -> #%d\n", la);
    char *b = calloc(12, 8);
    int lb = tp_label();
    tp_say("calloc 96 -> #%d\n", lb);
    memset(a, 'x', 24);

    /* a realloc chain: grow, grow a lot (moves), shrink */
    a = realloc(a, 100);
    int la2 = tp_label();
    tp_say("realloc #%d 100 -> #%d\n", la, la2);
    a = realloc(a, 100000);
    int la3 = tp_label();
    tp_say("realloc #%d 100000 -> #%d\n", la2, la3);
    a = realloc(a, 10);
    int la4 = tp_label();
    tp_say("realloc #%d 10 -> #%d\n", la3, la4);
    if (a[0] != 'x') return 10;

    char *c = realloc(NULL, 8);
    int lc = tp_label();
    tp_say("realloc null 8 -> #%d\n", lc);

    /* reallocarray, and its overflow */
    c = reallocarray(c, 4, 16);
    int lc2 = tp_label();
    tp_say("realloc #%d 64 -> #%d\n", lc, lc2);
    errno = 0;
    void *ov = reallocarray(c, SIZE_MAX / 2, 4);
    if (ov || errno != ENOMEM) return 11;
    tp_say("realloc #%d 18446744073709551615 failed\n", lc2);

    /* failures */
    void *huge = malloc((size_t)1 << 50);
    if (huge) return 12;
    tp_say("malloc 1125899906842624 failed\n");
    void *cov = calloc(SIZE_MAX / 2, 3);
    if (cov) return 13;
    tp_say("calloc 18446744073709551615 failed\n");
    void *rhuge = realloc(b, (size_t)1 << 50);
    if (rhuge) return 14;
    tp_say("realloc #%d 1125899906842624 failed\n", lb);

    /* the memalign family */
    void *m1 = memalign(4096, 64);
    int l1 = tp_label();
    tp_say("memalign 64 4096 -> #%d\n", l1);
    void *m2 = aligned_alloc(32, 128);
    int l2 = tp_label();
    tp_say("aligned_alloc 128 32 -> #%d\n", l2);
    void *m3 = NULL;
    if (posix_memalign(&m3, 64, 40)) return 15;
    int l3 = tp_label();
    tp_say("posix_memalign 40 64 -> #%d\n", l3);
    void *m4 = NULL;
    if (posix_memalign(&m4, 3, 40) != EINVAL) return 16;
    tp_say("posix_memalign 40 3 failed\n");
    long page = sysconf(_SC_PAGESIZE);
    void *m5 = valloc(10);
    int l5 = tp_label();
    tp_say("valloc 10 %ld -> #%d\n", page, l5);
    void *m6 = pvalloc(5000);
    int l6 = tp_label();
    tp_say("pvalloc 5000 %ld -> #%d\n", page, l6);
    if (((uintptr_t)m1 & 4095) || ((uintptr_t)m2 & 31) || ((uintptr_t)m3 & 63) ||
        ((uintptr_t)m5 & (page - 1)))
        return 17;
    if (malloc_usable_size(m6) < 5000) return 18;

    /* free(NULL) is not recorded; realloc(p, 0) frees */
    free(NULL);
    void *z = realloc(m6, 0);
    if (z) return 19;
    tp_say("realloc_free #%d\n", l6);

    free(b);
    tp_say("free #%d\n", lb);
    free(a);
    tp_say("free #%d\n", la4);
    free(m1);
    tp_say("free #%d\n", l1);
    free(m2);
    tp_say("free #%d\n", l2);
    free(m3);
    tp_say("free #%d\n", l3);
    free(m5);
    tp_say("free #%d\n", l5);
    /* c was moved by reallocarray to lc2, which stays live */

    tp_mark_end(begin);
    tp_flush();
    return 0;
}
