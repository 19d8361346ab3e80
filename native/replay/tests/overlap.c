/* overlap.c: a broken allocator for the replayer's check-mode test.  Every
 * 50th malloc hands out a block that starts 16 bytes into the block handed out
 * just before it, so two live blocks overlap (when the earlier one is still
 * live, which the test trace arranges). */
static char *last_block;
static unsigned long nth;
#define BUMP_HOOK_MALLOC(p, n)                                                                     \
    do {                                                                                           \
        if (++nth % 50 == 0 && last_block) return last_block + 16;                                 \
        last_block = (p);                                                                          \
    } while (0)
#include "bumpcore.h"
