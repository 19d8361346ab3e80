/* Test tables whose keys are computed at load time from made-up frame keys
 * (tests/seg_test.c sends the same frames as site hints). */
#include "seg.h"
#include "heaplab_site.h"

static void sort_table(uint64_t *k, uint8_t *c, unsigned n) {
    for (unsigned i = 1; i < n; i++)
        for (unsigned j = i; j > 0 && k[j - 1] > k[j]; j--) {
            uint64_t t = k[j];
            k[j] = k[j - 1];
            k[j - 1] = t;
            uint8_t u = c[j];
            c[j] = c[j - 1];
            c[j - 1] = u;
        }
}

static const uint64_t FR_A[3] = {11, 12, 13}, FR_B[3] = {21, 22, 23}, FR_C[3] = {31, 32, 33};
