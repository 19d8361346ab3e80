/* STACK-3: frames A → HR, B → SL, C → not-HR (tests/seg_test.c hint). */
#include "tables.h"
static uint64_t keys[3];
static uint8_t classes[3];
const hl_seg_table_t hl_seg_table = {.version = HL_SEG_TABLE_VERSION,
                                     .predictor = HL_SEG_STACK,
                                     .depth = 3,
                                     .nsegments = 4,
                                     .n = 3,
                                     .keys = keys,
                                     .classes = classes,
                                     .name = "STACK",
                                     .about = "test table"};
static void __attribute__((constructor)) fill(void) {
    keys[0] = heaplab_site_hash(FR_A, 3), classes[0] = HL_SEG_HR;
    keys[1] = heaplab_site_hash(FR_B, 3), classes[1] = HL_SEG_SL;
    keys[2] = heaplab_site_hash(FR_C, 3), classes[2] = HL_SEG_NOTHR;
    sort_table(keys, classes, 3);
}
