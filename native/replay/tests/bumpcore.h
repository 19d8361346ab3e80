/*
 * bumpcore.h: the malloc API over a bump pointer, for the replayer's test
 * allocators (bump.c, overlap.c, corrupt.c, sitelog.c).  Not an allocator
 * anyone should use: free never gives memory back.
 *
 *   heap (.bss, 1 GiB of address space, touched only as used)
 *   | size | pad |  payload ...  | size | pad |  payload ... |    cur ->
 *   |<- 16 bytes ->|              |<- 16 bytes ->|
 *
 * Every block is 16-aligned with its requested size in the 8 bytes before
 * the payload.  cur moves by an atomic add (malloc) or a compare-and-swap
 * (the memalign family), so threads never share bytes.  malloc's fast path is straight-line code ending in the first
 * `ret` of the function; the replayer's tests count its instructions with
 * objdump and expect callgrind to report exactly that many per malloc.
 *
 * A file that includes this defines BUMP_HOOK_MALLOC(p, n) (after a block is
 * carved; may be empty) before including it, and BUMP_PREFIXED to get the
 * functions as static bump_malloc, bump_free, ... (to wrap them, as log.c).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#define BUMP_HEAP (UINT64_C(1) << 30)
static char heap[BUMP_HEAP] __attribute__((aligned(4096)));
static char *cur = heap;

#define EXPORT __attribute__((visibility("default")))
#ifdef BUMP_PREFIXED
#define BUMP(name) bump_##name
#define BUMP_DECL  static __attribute__((unused))
#else
#define BUMP(name) name
#define BUMP_DECL  EXPORT
#endif

__attribute__((noinline, cold)) static void *bump_oom(void) {
    errno = ENOMEM;
    return NULL;
}

BUMP_DECL void *BUMP(malloc)(size_t n) {
    size_t step = (n + 31) & ~(size_t)15;
    if (__builtin_expect(n > BUMP_HEAP, 0)) return bump_oom();
    /* One atomic add, so that threads (the threaded replay runs the recorded
     * threads at once) never carve the same bytes; past the end, cur stays
     * past it and every later call fails. */
    char *p = __atomic_fetch_add(&cur, step, __ATOMIC_RELAXED);
    if (__builtin_expect(step > (size_t)(heap + BUMP_HEAP - p) || p > heap + BUMP_HEAP, 0))
        return bump_oom();
    *(size_t *)p = n;
    BUMP_HOOK_MALLOC(p + 16, n);
    return p + 16;
}

BUMP_DECL void BUMP(free)(void *p) {
    (void)p;
}

BUMP_DECL size_t BUMP(malloc_usable_size)(void *p) {
    return p ? *(size_t *)((char *)p - 16) : 0;
}

BUMP_DECL void *BUMP(calloc)(size_t a, size_t b) {
    size_t n;
    if (__builtin_mul_overflow(a, b, &n)) return bump_oom();
    return BUMP(malloc)(n); /* fresh bump memory is zero: it is never reused */
}

BUMP_DECL void *BUMP(realloc)(void *p, size_t n) {
    if (!p) return BUMP(malloc)(n);
    if (n == 0) {
        BUMP(free)(p);
        return NULL;
    }
    void *q = BUMP(malloc)(n);
    if (q) {
        size_t old = BUMP(malloc_usable_size)(p);
        memcpy(q, p, old < n ? old : n);
    }
    return q;
}

BUMP_DECL void *BUMP(memalign)(size_t align, size_t n) {
    if (align < 16) align = 16;
    if (n > BUMP_HEAP || align > BUMP_HEAP) return bump_oom();
    size_t step = (n + 31) & ~(size_t)15;
    /* Pad the bump pointer so that the payload lands on the alignment: the
     * pad and the block taken in one compare-and-swap (threads, as malloc). */
    char *old = __atomic_load_n(&cur, __ATOMIC_RELAXED);
    uintptr_t payload;
    do {
        if (old > heap + BUMP_HEAP) return bump_oom();
        payload = ((uintptr_t)old + 16 + align - 1) & ~(uintptr_t)(align - 1);
        if (payload - 16 + step > (uintptr_t)(heap + BUMP_HEAP)) return bump_oom();
    } while (!__atomic_compare_exchange_n(&cur, &old, (char *)payload - 16 + step, 1,
                                          __ATOMIC_RELAXED, __ATOMIC_RELAXED));
    char *p = (char *)payload - 16;
    *(size_t *)p = n;
    BUMP_HOOK_MALLOC(p + 16, n);
    return p + 16;
}

BUMP_DECL int BUMP(posix_memalign)(void **out, size_t align, size_t n) {
    if (align == 0 || (align & (align - 1)) || align % sizeof(void *)) return EINVAL;
    void *p = BUMP(memalign)(align, n);
    if (!p) return ENOMEM;
    *out = p;
    return 0;
}

BUMP_DECL void *BUMP(aligned_alloc)(size_t align, size_t n) {
    return BUMP(memalign)(align, n);
}
BUMP_DECL void *BUMP(valloc)(size_t n) {
    return BUMP(memalign)(4096, n);
}
BUMP_DECL void *BUMP(pvalloc)(size_t n) {
    return BUMP(memalign)(4096, (n + 4095) & ~(size_t)4095);
}
