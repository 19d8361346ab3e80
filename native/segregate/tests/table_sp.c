/* A test table: SP over four segments with no nodes, so every object goes to
 * "other" while each allocation runs SP's run-time identification through
 * the SP shim (shim_sp.o: the lookup inline, no frame pointer, every miss a
 * tail call): the zoo's suite runs real programs through it.  That the depth
 * it reads is the caller's stack pointer, the Rust end-to-end test checks
 * (crates/heaplab-segregate/tests/end_to_end.rs: SP's decisions at run time
 * equal the predictions on the recording). */
#include "seg.h"
const hl_seg_table_t hl_seg_table = {
    .version = HL_SEG_TABLE_VERSION,
    .predictor = HL_SEG_SP,
    .nsegments = 4,
    .name = "SP",
    .about = "test table: no nodes, the SP shim's lookup on every allocation",
};
