/* STACK-3+size: frames A with 24 bytes → HR, with 40 bytes → SL: A's three
 * prefixes walk, then the size decides (tests/seg_test.c size). */
#include "tables.h"
enum { N = 5 };
static uint64_t keys[N];
static uint8_t values[N];
const hl_seg_table_t hl_seg_table = {.version = HL_SEG_TABLE_VERSION,
                                     .predictor = HL_SEG_STACK_SIZE,
                                     .depth = 3,
                                     .nsegments = 4,
                                     .n = N,
                                     .keys = keys,
                                     .values = values,
                                     .name = "STACK+size",
                                     .about = "test table"};
static void __attribute__((constructor(101))) fill(void) {
    keys[0] = prefix(FR_A, 1), values[0] = HL_SEG_WALKS(2);
    keys[1] = prefix(FR_A, 2), values[1] = HL_SEG_WALKS(1);
    keys[2] = prefix(FR_A, 3), values[2] = HL_SEG_WALKS(0);
    keys[3] = hl_seg_size_key(prefix(FR_A, 3), 24), values[3] = HL_SEG_LEAF(HL_SEG_HR);
    keys[4] = hl_seg_size_key(prefix(FR_A, 3), 40), values[4] = HL_SEG_LEAF(HL_SEG_SL);
    sort_table(keys, values, N);
}
