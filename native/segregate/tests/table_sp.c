/* A test table: SP over four segments with no nodes, so every object goes to
 * "other" while each allocation runs SP's run-time identification through
 * the SP shim (shim_sp.o: the lookup inline, no frame pointer, every miss a
 * tail call): the zoo's suite runs real programs through it. */
#include "seg.h"
const hl_seg_table_t hl_seg_table = {
    .version = HL_SEG_TABLE_VERSION,
    .predictor = HL_SEG_SP,
    .nsegments = 4,
    .name = "SP",
    .about = "test table: no nodes, the SP shim's lookup on every allocation",
};
