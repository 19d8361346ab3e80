/* corrupt.c: a broken allocator for the replayer's check-mode test.  Every
 * 50th malloc writes a zero byte 3 bytes into the block handed out just
 * before it, as an allocator that writes its metadata into a live neighbour
 * would. */
static char *last_block;
static unsigned long nth;
#define BUMP_HOOK_MALLOC(p, n)                                                                     \
    do {                                                                                           \
        if (++nth % 50 == 0 && last_block) last_block[3] = 0;                                      \
        last_block = (p);                                                                          \
    } while (0)
#include "bumpcore.h"
