/* STACK-3+size: frames A with 24 bytes → HR, with 40 bytes → SL. */
#include "tables.h"
static uint64_t keys[2];
static uint8_t classes[2];
const hl_seg_table_t hl_seg_table = {.version = HL_SEG_TABLE_VERSION,
                                     .predictor = HL_SEG_STACK_SIZE,
                                     .depth = 3,
                                     .nsegments = 4,
                                     .n = 2,
                                     .keys = keys,
                                     .classes = classes,
                                     .name = "STACK+size",
                                     .about = "test table"};
static void __attribute__((constructor)) fill(void) {
    keys[0] = hl_seg_size_key(heaplab_site_hash(FR_A, 3), 24), classes[0] = HL_SEG_HR;
    keys[1] = hl_seg_size_key(heaplab_site_hash(FR_A, 3), 40), classes[1] = HL_SEG_SL;
    sort_table(keys, classes, 2);
}
