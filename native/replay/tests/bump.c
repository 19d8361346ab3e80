/* bump.c: the trivial bump allocator the harness-overhead figure and the
 * instruction-count test use (bumpcore.h). */
#define BUMP_HOOK_MALLOC(p, n) ((void)0)
#include "bumpcore.h"
