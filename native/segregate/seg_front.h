/*
 * seg_front.h: the segmented allocator's front end for the zoo's shim
 * (native/alloc/shim.c compiled with -DHL_FRONT_H='"seg_front.h"').  It
 * serves nothing itself: before the shim takes its lock for a new object
 * (malloc, calloc, realloc of NULL), it predicts the object's segment from
 * the caller's stack (hl_seg_front, segregated.c), so that unwinding never
 * runs under the lock.  Every block then comes from the locked path.
 */
#ifndef HL_SEG_FRONT_H
#define HL_SEG_FRONT_H
#include "seg.h"

#define HL_FRONT_MALLOC(size) (hl_seg_front(size), (void *)0)
#define HL_FRONT_CALLOC(size) ((void)(size), (void *)0) /* calloc then goes to HL_FRONT_MALLOC */
#define HL_FRONT_FREE(p)      ((void)(p), 0)
#define HL_FRONT_SLOW()       ((void)0)
#define HL_FRONT_STATS(s)     ((void)(s))
#define HL_FRONT_FORK_CHILD() ((void)0)
#endif
