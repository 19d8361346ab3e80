/*
 * hltrace_int.h: what hltrace_writer.c and hltrace_reader.c share besides
 * the public API: the block magic, growable buffers over an hl_mem_t, the
 * zstd allocator glue. Private to native/common.
 *
 *   buf_t   p[0 .. len) used, p[len .. cap) reserved; grows by doubling;
 *           callers reserve before put_u / put_raw (which check nothing)
 */
#ifndef HLTRACE_INT_H
#define HLTRACE_INT_H

#include "hltrace.h"

#include <string.h>

#define LIKELY(x)   __builtin_expect(!!(x), 1)
#define UNLIKELY(x) __builtin_expect(!!(x), 0)

extern const uint8_t hl_file_magic[8];
extern const uint8_t hl_block_magic[4];

/* zstd frees without a size: these keep it in a 16-byte prefix. The opaque
 * pointer is the hl_mem_t. */
void *hl_zstd_alloc(void *opaque, size_t size);
void hl_zstd_free(void *opaque, void *addr);

/* Per kind: bit 0 releases only, bit 1 carries an alignment. */
extern const uint8_t hl_kind_props[16];
#define K_RELEASE(k) (hl_kind_props[(k)&15] & 1)
#define K_ALIGN(k)   (hl_kind_props[(k)&15] & 2)

static inline size_t hl_vput(uint8_t *out, uint64_t v) {
    if (LIKELY(v < 0x80)) {
        out[0] = (uint8_t)v;
        return 1;
    }
    size_t n = 0;
    while (v >= 0x80) {
        out[n++] = (uint8_t)(v | 0x80);
        v >>= 7;
    }
    out[n++] = (uint8_t)v;
    return n;
}

typedef struct buf {
    uint8_t *p;
    size_t len, cap;
} buf_t;

static inline int buf_grow(const hl_mem_t *m, buf_t *b, size_t need) {
    size_t cap = b->cap ? b->cap * 2 : 4096;
    while (cap < need)
        cap *= 2;
    uint8_t *p = m->alloc(m->ctx, cap);
    if (!p) return -1;
    if (b->len) memcpy(p, b->p, b->len);
    if (b->p) m->release(m->ctx, b->p, b->cap);
    b->p = p;
    b->cap = cap;
    return 0;
}

static inline int buf_reserve(const hl_mem_t *m, buf_t *b, size_t extra) {
    if (LIKELY(b->len + extra <= b->cap)) return 0;
    return buf_grow(m, b, b->len + extra);
}

static inline void buf_free(const hl_mem_t *m, buf_t *b) {
    if (b->p) m->release(m->ctx, b->p, b->cap);
    b->p = NULL;
    b->len = b->cap = 0;
}

/* Callers reserve first. */
static inline void put_u(buf_t *b, uint64_t v) {
    b->len += hl_vput(b->p + b->len, v);
}

static inline void put_raw(buf_t *b, const void *p, size_t n) {
    if (n) memcpy(b->p + b->len, p, n);
    b->len += n;
}

#endif
