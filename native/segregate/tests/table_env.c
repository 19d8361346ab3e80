/* A test table filled at load time from HEAPLAB_SEGTEST_NODES
 * ("KEY=VALUE,..." in hex: node keys and values, at most 64), STACK-3 over
 * four segments: tests/seg_test.c levels learns the keys of its own call
 * sites from a first run, then runs again with the tree it built from them. */
#include "tables.h"

#include <stdlib.h>

enum { N = 64 };
static uint64_t keys[N];
static uint8_t values[N];
const hl_seg_table_t hl_seg_table = {.version = HL_SEG_TABLE_VERSION,
                                     .predictor = HL_SEG_STACK,
                                     .depth = 3,
                                     .nsegments = 4,
                                     .n = N,
                                     .keys = keys,
                                     .values = values,
                                     .name = "STACK",
                                     .about = "test table from HEAPLAB_SEGTEST_NODES"};

static uint64_t hex(const char **p) {
    uint64_t v = 0;
    for (;; (*p)++) {
        char c = **p;
        unsigned d = c >= '0' && c <= '9'   ? (unsigned)(c - '0')
                     : c >= 'a' && c <= 'f' ? (unsigned)(c - 'a' + 10)
                                            : 16u;
        if (d == 16) return v;
        v = v << 4 | d;
    }
}

static void __attribute__((constructor(101))) fill(void) {
    unsigned n = 0;
    const char *s = getenv("HEAPLAB_SEGTEST_NODES");
    while (s && *s && n < N) {
        uint64_t k = hex(&s);
        if (*s++ != '=') break;
        uint64_t v = hex(&s);
        keys[n] = k;
        values[n++] = (uint8_t)v;
        if (*s == ',') s++;
    }
    for (unsigned i = n; i < N; i++) /* padding: sorts last, matches no prefix */
        keys[i] = UINT64_MAX;
    sort_table(keys, values, N);
}
