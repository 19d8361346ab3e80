/* Test tables whose node keys are computed at load time from made-up frame
 * keys (tests/seg_test.c sends the same frames as site hints).  A node's key
 * is the hash of a prefix of a context (seg.h): heaplab_site_hash(frames, L). */
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

/* The key of the prefix of length L of frames f. */
static inline uint64_t prefix(const uint64_t *f, unsigned L) {
    return heaplab_site_hash(f, L);
}

static const uint64_t FR_A[3] = {11, 12, 13}, FR_B[3] = {21, 22, 23}, FR_C[3] = {31, 32, 33};
/* Contexts that share their return address: D1, D2 differ at the second
 * frame; E1, E2 at the third. */
static const uint64_t FR_D1[3] = {41, 42, 43}, FR_D2[3] = {41, 52, 53};
static const uint64_t FR_E1[3] = {61, 62, 63}, FR_E2[3] = {61, 62, 73};
