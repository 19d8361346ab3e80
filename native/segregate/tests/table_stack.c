/* A test table: STACK-3 over four segments with no entries, so that every
 * allocation pays the whole run-time lookup (unwinding, frame keys, search)
 * while all objects go to "other" (the zoo's suite runs real programs on it). */
#include "seg.h"
const hl_seg_table_t hl_seg_table = {
    .version = HL_SEG_TABLE_VERSION,
    .predictor = HL_SEG_STACK,
    .depth = 3,
    .nsegments = 4,
    .name = "STACK",
    .about = "test table: no entries",
};
