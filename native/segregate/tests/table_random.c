/* A test table: RANDOM over four segments (tests/run.sh runs the zoo's suite on it). */
#include "seg.h"
const hl_seg_table_t hl_seg_table = {
    .version = HL_SEG_TABLE_VERSION,
    .predictor = HL_SEG_RANDOM,
    .nsegments = 4,
    .seed = 7,
    .name = "RANDOM",
    .about = "test table: a random segment per object",
};
