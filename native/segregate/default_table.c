/*
 * default_table.c: DEFAULT's table (paper 001 §5.1: "an unsegmented
 * allocator implemented by using vmalloc and a single memory segment"):
 * the segmented allocator with one segment and no prediction.  This is the
 * table of build/lib/libheaplab-segregated.so; `heaplab segregate` emits the
 * others.
 */
#include "seg.h"

const hl_seg_table_t hl_seg_table = {
    .version = HL_SEG_TABLE_VERSION,
    .predictor = HL_SEG_DEFAULT,
    .depth = 0,
    .nsegments = 1,
    .n = 0,
    .name = "DEFAULT",
    .about = "one segment, no prediction",
};
