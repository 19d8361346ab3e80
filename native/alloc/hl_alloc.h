/*
 * hl_alloc.h: the allocator interface of heaplab (native/alloc/).
 *
 * Every algorithm is one file, native/alloc/NAME.c, that fills one hl_alloc_t
 * with a handful of functions and exports it as `const hl_alloc_t hl_alloc_NAME`.
 * One shim (shim.c) turns it into the whole malloc API; one platform file
 * (platform.c) is the only code that talks to the OS.  An algorithm includes
 * this header and nothing of the OS beyond <string.h>/<stdint.h>/<stddef.h>.
 *
 *      program ──▶ shim.c ──(one lock; edge cases; errno; pad layer; checker)──▶ hl_alloc_NAME
 *                                                                                    │
 *                                                          platform.c ◀── hl_sbrk ───┘
 *
 * The contract, in short (native/alloc/README.md says it at length):
 *
 *   - The shim holds one global lock around every call into an hl_alloc_t, so
 *     an algorithm is single-threaded code and never locks.
 *   - The shim has already handled malloc(0), free(NULL), realloc(NULL, n),
 *     realloc(p, 0), calloc overflow and zeroing, errno, and every size above
 *     HL_MAX_REQUEST.  Sizes that reach an algorithm are 1 <= size <= HL_MAX_REQUEST.
 *   - Every pointer returned is aligned to HL_ALIGN (16, alignof(max_align_t))
 *     and has usable_size(p) >= the size asked for.
 *   - Memory comes only from the platform: hl_sbrk / hl_heap_sbrk (an emulated
 *     sbrk over a reserved mmap'd region) or hl_pages_alloc (whole pages).
 *
 * This header is stable: fields are only ever appended to hl_alloc_t and
 * heaplab_alloc_stats_t, so initialise them with designated initializers.
 */
#ifndef HL_ALLOC_H
#define HL_ALLOC_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

struct heaplab_site; /* native/common/heaplab_site.h */

/* ------------------------------------------------------------------------ */
/* Constants                                                                 */
/* ------------------------------------------------------------------------ */

/* Alignment of every pointer malloc returns: alignof(max_align_t) on x86-64. */
#define HL_ALIGN 16

/* The largest size the shim passes to an algorithm (1 TiB).  Anything larger
 * fails in the shim with ENOMEM, so algorithms may add headers and round up
 * (even to the next power of two) without overflowing a size_t. */
#define HL_MAX_REQUEST ((size_t)1 << 40)

/* The largest alignment the shim passes to hl_alloc_t.memalign (1 GiB). */
#define HL_MAX_ALIGN ((size_t)1 << 30)

/* Helpers every algorithm wants. */
#define HL_ALIGN_UP(x, a)   (((x) + ((a)-1)) & ~((size_t)(a)-1))
#define HL_ALIGN_DOWN(x, a) ((x) & ~((size_t)(a)-1))
#define HL_IS_POW2(x)       ((x) != 0 && (((x) & ((x)-1)) == 0))
#define HL_LIKELY(x)        __builtin_expect(!!(x), 1)
#define HL_UNLIKELY(x)      __builtin_expect(!!(x), 0)

/* ------------------------------------------------------------------------ */
/* Header bits: how a layered allocator tells its blocks from gnugpp's       */
/* ------------------------------------------------------------------------ */

/* gnugpp.c (btag.h's two-tag layout) keeps every block's size, a multiple of
 * 16, in the word just below the payload, with HL_HDR_INUSE or 0 in the low
 * four bits (HL_HDR_LOW_BITS).  An allocator layered over gnugpp, which
 * serves some requests itself and hands the rest to gnugpp (quickfit.c, and
 * the runtime of every synthesized allocator, crates/heaplab-synth/c/
 * runtime.c), writes into that same word under its own blocks a tag whose
 * low four bits are HL_TAG_FREE, HL_TAG_USED or HL_TAG_FILL, values gnugpp
 * never writes, so that free(p) can tell whose block p is from that one word:
 *
 *     payload - 8:  | size (multiple of 16)  | 0 or 1 |   gnugpp's block
 *                   | the layered allocator's| C,D,E  |   its own (free, used, filler)
 *                                              bits 0-3
 *
 * btag.h asserts that its two-tag header agrees; gnugpp's checker asserts
 * the low bits of every header. */
#define HL_HDR_LOW_BITS      0xFu /* the bits of a header word that are not size */
#define HL_HDR_INUSE         0x1u /* gnugpp: the block is in use */
#define HL_TAG_FREE          0xCu /* a layered allocator's block, free */
#define HL_TAG_USED          0xDu /* ... in use */
#define HL_TAG_FILL          0xEu /* ... not a block: filler up to the end of an extent */
#define HL_TAG_IS_OWN(t)     (((unsigned)(t) & 0xCu) == 0xCu)   /* C, D, E or F: not gnugpp's */
#define HL_TAG_IS_BLOCK(t)   (((unsigned)(t) & 0xEu) == HL_TAG_FREE) /* C or D */

/* ------------------------------------------------------------------------ */
/* The interface an algorithm implements                                     */
/* ------------------------------------------------------------------------ */

/* What `heaplab allocators` shows; must match the line in registry.txt
 * (the test suite checks that it does). */
typedef struct hl_alloc_info {
    const char *name;        /* "firstfit": the NAME in NAME.c and libheaplab-NAME.so */
    const char *description; /* one line, no trailing period */
    const char *reference;   /* paper and section, e.g. "000 §2.1; 002 §4" */
} hl_alloc_info_t;

typedef struct hl_alloc {
    hl_alloc_info_t info;

    /* Called once, under the lock, before any other function: read tunables
     * (hl_tunable), take a heap (hl_heap_new) if you want one of your own.
     * Return 0, or -1 if the allocator cannot work (the process then aborts
     * with a message).  Do not allocate memory here unless you must. */
    int (*init)(void);

    /* REQUIRED.  1 <= size <= HL_MAX_REQUEST.  Return a block aligned to
     * HL_ALIGN with usable_size >= size, or NULL when the platform has no more
     * memory (the shim sets errno = ENOMEM; you need not). */
    void *(*malloc)(size_t size);

    /* REQUIRED.  ptr is non-NULL and was returned by this allocator's malloc,
     * realloc or memalign and not yet freed. */
    void (*free)(void *ptr);

    /* REQUIRED.  The bytes the caller may use at ptr (>= the size requested).
     * ptr is a live block of this allocator. */
    size_t (*usable_size)(void *ptr);

    /* OPTIONAL (NULL: the shim keeps ptr when size <= usable_size(ptr) and
     * size >= usable_size(ptr)/2, else mallocs, copies and frees).
     * ptr is a live block, 1 <= size <= HL_MAX_REQUEST.  Return a block with
     * the first min(size, usable_size(ptr)) bytes of ptr's payload, aligned
     * to HL_ALIGN; on failure return NULL and leave ptr untouched. */
    void *(*realloc)(void *ptr, size_t size);

    /* OPTIONAL (NULL: the shim over-allocates through malloc and keeps the
     * aligned pointers in a side table, which costs a hash probe in every
     * free while any such block is live; implement it natively if you can).
     * align is a power of two with HL_ALIGN < align <= HL_MAX_ALIGN;
     * 1 <= size <= HL_MAX_REQUEST.  The result goes back through free,
     * usable_size and realloc like any other block. */
    void *(*memalign)(size_t align, size_t size);

    /* EXPECTED (may be NULL only while an algorithm is being written).
     * Walk every structure and assert every invariant with HL_CHECK; it is
     * called under the lock, between operations, when HEAPLAB_CHECK is set
     * and whenever a test calls heaplab_alloc_check(). */
    void (*check)(void);

    /* OPTIONAL: the call site of the calling thread's next allocation
     * (paper 001's segregation by site).  A caller that knows it (the
     * replayer, a predictor) calls the exported heaplab_site_hint(site) just
     * before that allocation; the shim hands `site` over under the lock.  The
     * struct and what it points to live only during the call: copy what you
     * keep.  The ABI (frame keys, kind, size) is native/common/heaplab_site.h.
     * Under the pad layer, site->size is the caller's size, without the pad. */
    void (*site_hint)(const struct heaplab_site *site);
} hl_alloc_t;

/* ------------------------------------------------------------------------ */
/* The platform layer (platform.c): the only way to get memory               */
/* ------------------------------------------------------------------------ */

/* An emulated sbrk heap: a contiguous region of address space reserved with
 * mmap at first use, committed as its break grows.  The default heap backs
 * hl_sbrk; a layered allocator (quickfit over gnugpp) takes its own with
 * hl_heap_new so that each one's region stays contiguous.  At most
 * HL_MAX_HEAPS heaps per process, the default heap included (it always holds
 * slot 0, so hl_heap_new gives at most HL_MAX_HEAPS - 1 more); each reserves
 * HEAPLAB_HEAP_RESERVE bytes. */
typedef struct hl_heap hl_heap_t;
#define HL_MAX_HEAPS 8

/* A new heap, named for messages.  NULL when none is left. */
hl_heap_t *hl_heap_new(const char *name);

/* Move the break of heap h by incr bytes (negative gives memory back) and
 * return the OLD break, or NULL when the region is exhausted or the OS
 * refuses (real sbrk returns (void *)-1; this returns NULL).  The first break
 * of a heap is page aligned; new memory reads as zero.  Successive growths
 * are contiguous: the old break returned is always the previous new break. */
void *hl_heap_sbrk(hl_heap_t *h, intptr_t incr);
void *hl_heap_base(hl_heap_t *h); /* first byte of the region */
void *hl_heap_brk(hl_heap_t *h);  /* the current break */

/* The same on the default heap. */
void *hl_sbrk(intptr_t incr);
hl_heap_t *hl_default_heap(void);

/* Whole pages straight from the OS (mmap), zero-filled: bytes is rounded up
 * to the page size, align is a power of two (<= page size means page
 * aligned).  NULL on failure.  hl_pages_free takes the same bytes back. */
void *hl_pages_alloc(size_t bytes, size_t align);
void hl_pages_free(void *p, size_t bytes);

/* A page-aligned hl_pages_alloc mapping of old_bytes resized to new_bytes
 * (both rounded up to the page), moved if it must be (mremap): its contents
 * are kept and nothing is copied; the bytes past old_bytes read as zero.
 * Returns where it is now, or NULL (the mapping is as it was). */
void *hl_pages_resize(void *p, size_t old_bytes, size_t new_bytes);

/* The OS page size (4096 on x86-64 Linux). */
size_t hl_page_size(void);

/* Address space for an allocator that places blocks by their address
 * (fastcore.h): `bytes` reserved without access, aligned to `align` (a power
 * of two, at least the page size); NULL when the OS refuses.  Reserving
 * costs no footprint.  hl_commit makes a page-aligned part read-write (0 or
 * -1); hl_decommit gives its pages back to the OS (they stay read-write and
 * read as zero when touched again); the allocator itself says how many bytes
 * of its reservations are in use with hl_footprint_add (negative: given
 * back), which counts them with the mapped bytes of the footprint. */
void *hl_reserve(size_t bytes, size_t align);
int hl_commit(void *p, size_t bytes);
void hl_decommit(void *p, size_t bytes);
void hl_footprint_add(intptr_t bytes);

/* A tunable: the environment variable `name` parsed as a size (decimal or
 * 0x hex, optional suffix k/K, m/M, g/G for powers of 1024), or `dflt` when
 * unset or empty.  A malformed value aborts with a message naming it.
 * Every tunable must be listed in the table in native/alloc/README.md. */
size_t hl_tunable(const char *name, size_t dflt);

/* ------------------------------------------------------------------------ */
/* Checker and errors                                                        */
/* ------------------------------------------------------------------------ */

/* Print "heaplab[NAME]: <message>" to stderr and abort.  fmt understands
 * %s %c %d %u %ld %lu %zu %zd %zx %lx %x %p and %%, nothing else. */
__attribute__((noreturn, format(printf, 1, 2))) void hl_fatal(const char *fmt, ...);

/* The failure path of HL_CHECK. */
__attribute__((noreturn)) void hl_check_failed(const char *file, int line, const char *cond);

/* HL_CHECK(cond): always compiled in; use it in your check() function and on
 * cold paths (e.g. a bad magic in free).  HL_ASSERT(cond): compiled in only
 * when HL_DEBUG >= 1 (make -C native EXTRA_CFLAGS=-DHL_DEBUG=1); use it on
 * fast paths, where it must cost nothing in a normal build. */
#define HL_CHECK(cond) (HL_LIKELY(cond) ? (void)0 : hl_check_failed(__FILE__, __LINE__, #cond))
#ifndef HL_DEBUG
#define HL_DEBUG 0
#endif
#define HL_ASSERT(cond)                                                                            \
    do {                                                                                           \
        if (HL_DEBUG) HL_CHECK(cond);                                                              \
    } while (0)

/* ------------------------------------------------------------------------ */
/* What every libheaplab-NAME.so exports besides the malloc API              */
/* (look these up with dlsym(RTLD_DEFAULT, ...); absent under glibc)          */
/* ------------------------------------------------------------------------ */

#define HEAPLAB_STATS_VERSION 1

/* Footprint and operation counters.  Footprint is memory obtained from the
 * OS: for each heap its break rounded up to a page, plus every live
 * hl_pages_alloc mapping (the shim's own side tables included).  Peaks are
 * high-water marks since the process started (or since the last reset). */
typedef struct heaplab_alloc_stats {
    uint32_t version;              /* HEAPLAB_STATS_VERSION */
    uint32_t size;                 /* sizeof(heaplab_alloc_stats_t) as filled */
    const char *name;              /* the allocator's name, e.g. "firstfit" */
    size_t pad;                    /* HEAPLAB_PAD in force (0: no pad layer) */
    uint64_t footprint_bytes;      /* heap + mapped, now */
    uint64_t footprint_peak_bytes; /* high-water mark of footprint_bytes */
    uint64_t heap_bytes;           /* sum over heaps of the page-rounded break */
    uint64_t heap_peak_bytes;      /* high-water mark of heap_bytes */
    uint64_t mapped_bytes;         /* live hl_pages_alloc bytes, now */
    uint64_t mapped_peak_bytes;    /* high-water mark of mapped_bytes */
    uint64_t os_calls;             /* mmap + mprotect + munmap + madvise calls */
    uint64_t mallocs;              /* calls that reached the allocator's malloc */
    uint64_t frees;                /* calls that reached its free */
    uint64_t reallocs;             /* realloc calls with ptr != NULL, size != 0 */
    uint64_t memaligns;            /* aligned allocations with align > HL_ALIGN */
    uint64_t checks;               /* checker runs */
    uint64_t failures;             /* calls that returned NULL with ENOMEM */
    /* the shim's one lock (the zoo's algorithms are single-threaded code
     * behind it): takes that found it held, futex sleeps among them, and
     * the time they waited; 0 in a one-thread program */
    uint64_t lock_contended;
    uint64_t lock_sleeps;
    uint64_t lock_wait_ns;
} heaplab_alloc_stats_t;

/* An allocator whose fast path counts no calls (a synthesized one built
 * without --count-calls) exports `const int heaplab_alloc_stats_lower_bounds
 * = 1`: its mallocs and frees are then lower bounds (the calls of its slow
 * paths), not totals. */

/* Fill *out with up to `size` bytes of the current statistics (pass
 * sizeof(*out)); returns 0.  Signature for dlsym:
 *     int (*)(heaplab_alloc_stats_t *out, size_t size) */
int heaplab_alloc_stats(heaplab_alloc_stats_t *out, size_t size);

/* Reset the peaks to the current values (e.g. after a replayer's setup). */
void heaplab_alloc_stats_reset_peak(void);

/* Run the allocator's checker now, under the lock: returns 1 if it ran (it
 * aborts on a broken invariant), 0 if the allocator has no checker. */
int heaplab_alloc_check(void);

/* The allocator's info record. */
const hl_alloc_info_t *heaplab_alloc_info(void);

#ifdef __cplusplus
}
#endif
#endif /* HL_ALLOC_H */
