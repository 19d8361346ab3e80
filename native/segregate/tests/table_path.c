/* PATH: call site 12 (A's second frame) → HR, 23 (B's third) → SL, found by
 * the scan of a context the tree does not know; one node: a context whose
 * return address is 5 is not-HR, whatever follows (tests/seg_test.c path). */
#include "tables.h"
static uint64_t keys[1], points[2];
static uint8_t values[1], pclasses[2];
const hl_seg_table_t hl_seg_table = {.version = HL_SEG_TABLE_VERSION,
                                     .predictor = HL_SEG_PATH,
                                     .depth = 8,
                                     .nsegments = 4,
                                     .n = 1,
                                     .keys = keys,
                                     .values = values,
                                     .npoints = 2,
                                     .points = points,
                                     .point_classes = pclasses,
                                     .name = "PATH",
                                     .about = "test table"};
static void __attribute__((constructor(101))) fill(void) {
    static const uint64_t five[1] = {5};
    keys[0] = prefix(five, 1), values[0] = HL_SEG_LEAF(HL_SEG_NOTHR);
    points[0] = 12, pclasses[0] = HL_SEG_HR;
    points[1] = 23, pclasses[1] = HL_SEG_SL;
    sort_table(points, pclasses, 2);
}
