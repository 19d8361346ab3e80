/* A test table: STACK-3 over four segments with no nodes, that walks three
 * frames and computes their keys on every allocation (no caches), while all
 * objects go to "other": the zoo's suite runs real programs through the
 * whole run-time identification on it. */
#include "seg.h"
const hl_seg_table_t hl_seg_table = {
    .version = HL_SEG_TABLE_VERSION,
    .predictor = HL_SEG_STACK,
    .depth = 3,
    .nsegments = 4,
    .flags = HL_SEG_FLAG_WALK_ALWAYS | HL_SEG_FLAG_NO_CACHE,
    .name = "STACK",
    .about = "test table: no nodes, a walk on every allocation",
};
