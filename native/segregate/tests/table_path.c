/* PATH: call site 12 (A's second frame) → HR, 23 (B's third) → SL. */
#include "tables.h"
static uint64_t keys[2];
static uint8_t classes[2];
const hl_seg_table_t hl_seg_table = {.version = HL_SEG_TABLE_VERSION,
                                     .predictor = HL_SEG_PATH,
                                     .depth = 8,
                                     .nsegments = 4,
                                     .n = 2,
                                     .keys = keys,
                                     .classes = classes,
                                     .name = "PATH",
                                     .about = "test table"};
static void __attribute__((constructor)) fill(void) {
    keys[0] = 12, classes[0] = HL_SEG_HR;
    keys[1] = 23, classes[1] = HL_SEG_SL;
    sort_table(keys, classes, 2);
}
