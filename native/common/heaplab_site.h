/*
 * heaplab_site.h: the site-hint ABI, between a caller that knows where the
 * next allocation comes from (the replayer, or a real program) and an
 * allocator that wants to place objects by call site (paper 001: Seidl and
 * Zorn segregate heap objects by a prediction made from the allocation site).
 *
 *   caller                                          allocator library
 *   ------                                          -----------------
 *   site = { version, size, kind, frame keys ... }
 *   heaplab_site_hint(&site);  ──────────────────▶  exported, optional: found
 *   p = malloc(site.size);     ──────────────────▶  with dlsym or a weak reference
 *
 * The contract:
 *
 *   - An allocator library MAY export `void heaplab_site_hint(const
 *     heaplab_site_t *site)`.  A caller that knows the call site of its next
 *     allocation calls it just before that allocation, on the same thread.
 *     The struct and the keys it points to are valid only during the call:
 *     an allocator copies what it wants to keep.
 *   - The hint describes exactly one allocation: the calling thread's next
 *     call to the entry point named by `kind` (malloc, calloc, realloc,
 *     the memalign family), of `size` bytes.  An allocator that is called
 *     from several threads and wants to be sure of the pairing compares kind
 *     and size when the allocation arrives.
 *   - The struct is versioned and only ever grows at the end: read `version`
 *     and `struct_size` before any field past them.
 *   - In heaplab's own allocators the shim (native/alloc/shim.c) exports the
 *     function and hands the struct, under its lock, to hl_alloc_t.site_hint
 *     when the algorithm sets it (native/alloc/hl_alloc.h).
 *
 * Frame keys, stable across runs despite ASLR
 * -------------------------------------------
 *
 *   frame_key = fnv1a64(basename(module path)) ^ (offset * 0x9E3779B97F4A7C15)
 *
 * where `offset` is the return address minus the load bias of the module that
 * holds it (`dlpi_addr` of dl_iterate_phdr; the trace's MODULES `base`).  A
 * frame in no known module (trace module 0) uses the empty name and the
 * absolute address, which is not stable.  Keys are innermost first: key 0 is
 * the return address into the function that called the allocator.  A
 * predictor trained on one run (`heaplab segregate`) and an allocator running
 * in another compute the same keys: the replayer from the trace's (module,
 * offset) frames, a real program at run time from its return addresses
 * (heaplab_frame_key_runtime below shows how, outside this header).
 *
 * `heaplab_site_hash(keys, k)` folds the k innermost keys into one 64-bit
 * value: the "last k call sites" a depth-k predictor (001's STACK-3, or
 * SP = depth 1) looks up.  `site_key` in the struct is the hash of all the
 * frames the caller has.
 */
#ifndef HEAPLAB_SITE_H
#define HEAPLAB_SITE_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define HEAPLAB_SITE_VERSION 1

/* `kind`: the allocation entry point, with the codes of the trace format
 * (docs/trace-format.md, the op byte), so that a trace's kind passes as is. */
enum {
    HEAPLAB_SITE_MALLOC = 0,
    HEAPLAB_SITE_CALLOC = 1,
    HEAPLAB_SITE_REALLOC = 2,
    HEAPLAB_SITE_MEMALIGN = 3,
    HEAPLAB_SITE_POSIX_MEMALIGN = 4,
    HEAPLAB_SITE_ALIGNED_ALLOC = 5,
    HEAPLAB_SITE_VALLOC = 6,
    HEAPLAB_SITE_PVALLOC = 7,
};

typedef struct heaplab_site {
    uint32_t version;           /* HEAPLAB_SITE_VERSION */
    uint32_t struct_size;       /* sizeof(heaplab_site_t) as the caller filled it */
    uint32_t kind;              /* HEAPLAB_SITE_*: the entry point about to be called */
    uint32_t nframes;           /* number of frame_keys (0: no stack known) */
    uint64_t size;              /* bytes about to be requested (calloc: nmemb * size) */
    uint64_t align;             /* the memalign family's alignment; 0 otherwise */
    uint64_t stack_id;          /* the trace's stack id (0: none); valid within one trace only */
    uint64_t site_key;          /* heaplab_site_hash(frame_keys, nframes); 0 when nframes == 0 */
    const uint64_t *frame_keys; /* nframes keys, innermost first (see above) */
} heaplab_site_t;

/* The optional export, looked up by name ("heaplab_site_hint"). */
void heaplab_site_hint(const heaplab_site_t *site);
typedef void (*heaplab_site_hint_fn)(const heaplab_site_t *site);

/* FNV-1a, 64 bits, over n bytes. */
static inline uint64_t heaplab_fnv1a64(const void *p, size_t n) {
    const unsigned char *b = (const unsigned char *)p;
    uint64_t h = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < n; i++) {
        h ^= b[i];
        h *= 0x100000001b3ull;
    }
    return h;
}

/* The key of one frame: `path` is the module's path (only the part after
 * the last '/' counts, so /usr/bin/perl and ./perl agree), `len` its length,
 * `offset` the return address minus the module's load bias. */
static inline uint64_t heaplab_frame_key(const char *path, size_t len, uint64_t offset) {
    size_t start = 0;
    for (size_t i = 0; i < len; i++)
        if (path[i] == '/') start = i + 1;
    return heaplab_fnv1a64(path + start, len - start) ^ (offset * 0x9E3779B97F4A7C15ull);
}

/* The k innermost keys folded into one value: FNV-1a over whole 64-bit keys,
 * then a final mix so that nearby keys spread.  k = 0 gives 0. */
static inline uint64_t heaplab_site_hash(const uint64_t *keys, unsigned k) {
    if (k == 0) return 0;
    uint64_t h = 0xcbf29ce484222325ull;
    for (unsigned i = 0; i < k; i++) {
        h ^= keys[i];
        h *= 0x100000001b3ull;
    }
    h ^= h >> 33;
    h *= 0xff51afd7ed558ccdull;
    h ^= h >> 33;
    return h;
}

/*
 * A real program computes the same keys from its own return addresses, e.g.
 * (glibc, outside any allocator lock):
 *
 *   Dl_info info; struct link_map *lm;
 *   if (dladdr1(ret, &info, (void **)&lm, RTLD_DL_LINKMAP) && lm)
 *       key = heaplab_frame_key(info.dli_fname, strlen(info.dli_fname),
 *                               (uintptr_t)ret - lm->l_addr);
 *
 * (l_addr is the load bias; for the main program dli_fname may be "" or
 * argv[0]: use the path of /proc/self/exe, as the recorder does.)
 */

#ifdef __cplusplus
}
#endif
#endif /* HEAPLAB_SITE_H */
