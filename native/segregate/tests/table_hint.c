/* STACK-3, a tree: A → HR, B → SL, C → not-HR from the return address alone;
 * D1 → HR, D2 → SL from the second frame; E1 → HR, E2 → SL from the third
 * (tests/seg_test.c hint). */
#include "tables.h"
enum { N = 10 };
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
                                     .about = "test table"};
static void __attribute__((constructor(101))) fill(void) {
    unsigned i = 0;
    keys[i] = prefix(FR_A, 1), values[i++] = HL_SEG_LEAF(HL_SEG_HR);
    keys[i] = prefix(FR_B, 1), values[i++] = HL_SEG_LEAF(HL_SEG_SL);
    keys[i] = prefix(FR_C, 1), values[i++] = HL_SEG_LEAF(HL_SEG_NOTHR);
    keys[i] = prefix(FR_D1, 1), values[i++] = HL_SEG_WALKS(1);
    keys[i] = prefix(FR_D1, 2), values[i++] = HL_SEG_LEAF(HL_SEG_HR);
    keys[i] = prefix(FR_D2, 2), values[i++] = HL_SEG_LEAF(HL_SEG_SL);
    keys[i] = prefix(FR_E1, 1), values[i++] = HL_SEG_WALKS(2);
    keys[i] = prefix(FR_E1, 2), values[i++] = HL_SEG_WALKS(1);
    keys[i] = prefix(FR_E1, 3), values[i++] = HL_SEG_LEAF(HL_SEG_HR);
    keys[i] = prefix(FR_E2, 3), values[i++] = HL_SEG_LEAF(HL_SEG_SL);
    sort_table(keys, values, N);
}
