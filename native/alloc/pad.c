/*
 * pad.c: the pad layer.  Every object gets `pad` extra bytes at its end:
 *
 *   | algorithm's header | payload the program may use | pad bytes | algorithm's trailer |
 *                        ^ p (unchanged)               ^ p + usable_size(p)
 *
 * It emulates the cache pollution of boundary tags without changing the
 * algorithm underneath (paper 000 §4.3, Table 6: GNU LOCAL with eight more
 * bytes per object).  Selected with HEAPLAB_PAD=N (or the allocator name
 * NAME+padN on the command line).  Invariant: the program never sees the pad
 * bytes, since usable_size reports them as unusable.
 */
#include "hl_internal.h"

static const hl_alloc_t *inner;
static size_t pad;

/* Sizes can exceed HL_MAX_REQUEST by at most `pad`; refuse those, so that the
 * algorithm's contract holds. */
static void *pad_malloc(size_t size) {
    return size + pad > HL_MAX_REQUEST ? NULL : inner->malloc(size + pad);
}
static void pad_free(void *p) {
    inner->free(p);
}
static size_t pad_usable_size(void *p) {
    return inner->usable_size(p) - pad;
}
static void *pad_realloc(void *p, size_t size) {
    return size + pad > HL_MAX_REQUEST ? NULL : inner->realloc(p, size + pad);
}
static void *pad_memalign(size_t align, size_t size) {
    return size + pad > HL_MAX_REQUEST ? NULL : inner->memalign(align, size + pad);
}
static void pad_check(void) {
    inner->check();
}
static void pad_site_hint(const struct heaplab_site *site) {
    inner->site_hint(site);
}

static hl_alloc_t layer;

const hl_alloc_t *hl_pad_layer(const hl_alloc_t *a, size_t n) {
    inner = a;
    pad = n;
    layer = (hl_alloc_t){
        .info = a->info,
        .init = NULL, /* the shim has already initialised `a` */
        .malloc = pad_malloc,
        .free = pad_free,
        .usable_size = pad_usable_size,
        .realloc = a->realloc ? pad_realloc : NULL,
        .memalign = a->memalign ? pad_memalign : NULL,
        .check = a->check ? pad_check : NULL,
        .site_hint = a->site_hint ? pad_site_hint : NULL,
    };
    return &layer;
}
