/*
 * hltrace_enc.h: the rows of a version-2 EVENTS stream (docs/trace-format.md,
 * "EVENTS, version 2"), encoded where they are made: in the recording agent's
 * malloc hooks, one thread each, and in the test tools. Header-only, no
 * state outside hl_enc_t, no calls: the agent inlines it into its hot path.
 *
 *   one event = op byte (ops column)            + row (data column)
 *               kind | STACK TIME EDGE EDGE2      [ticks] [edge2] [edge] fields [stack]
 *
 *   fields   malloc, calloc, valloc, pvalloc   size addr
 *            memalign, posix_memalign,
 *              aligned_alloc                   size align addr
 *            realloc                           old size addr
 *            free, realloc_free                addr
 *   addr     0: NULL; 1: then zigzag(a - prev); n >= 2: a = prev + (unzigzag(n - 2) << 4)
 *            (prev: the thread's last non-NULL address in any address field)
 *   edge     src thread, zigzag(steps - the last edge's steps from the same
 *            src in this stream, tracked in 64 slots by src % 64)
 *
 * Invariants the encoder keeps, which the decoders rely on: prev, last_tick
 * and the 64 edge slots change exactly as written here, in field order.
 */
#ifndef HLTRACE_ENC_H
#define HLTRACE_ENC_H

#include <stdint.h>

#define HL_ENC_EDGE_SLOTS 64
/* Most bytes one row can take: ticks, two edges, old, size, align, addr, stack. */
#define HL_ENC_MAX_ROW (10 + 2 * (5 + 10) + 4 * 11 + 5)

typedef struct hl_enc {
    uint64_t prev_addr;
    uint64_t last_tick;
    uint32_t lsrc[HL_ENC_EDGE_SLOTS]; /* source thread + 1; 0: none yet */
    uint64_t ln[HL_ENC_EDGE_SLOTS];
} hl_enc_t;

static inline uint8_t *hl_enc_u(uint8_t *p, uint64_t v) {
    while (v >= 0x80) {
        *p++ = (uint8_t)(v | 0x80);
        v >>= 7;
    }
    *p++ = (uint8_t)v;
    return p;
}

static inline uint64_t hl_zz(int64_t v) {
    return ((uint64_t)v << 1) ^ (uint64_t)(v >> 63);
}

static inline int64_t hl_unzz(uint64_t v) {
    return (int64_t)(v >> 1) ^ -(int64_t)(v & 1);
}

static inline uint8_t *hl_enc_addr(uint8_t *p, hl_enc_t *e, uint64_t addr) {
    if (!addr) {
        *p++ = 0;
        return p;
    }
    uint64_t d = addr - e->prev_addr;
    e->prev_addr = addr;
    if (__builtin_expect(d & 15, 0)) {
        *p++ = 1;
        return hl_enc_u(p, hl_zz((int64_t)d));
    }
    return hl_enc_u(p, hl_zz((int64_t)d >> 4) + 2);
}

static inline uint8_t *hl_enc_time(uint8_t *p, hl_enc_t *e, uint64_t tick) {
    p = hl_enc_u(p, tick - e->last_tick);
    e->last_tick = tick;
    return p;
}

/* Whether an edge to "after the first `steps` steps of thread `src`" adds
 * anything to what this stream already says: not to its own thread, nor one
 * that an earlier edge from the same source already implies. */
static inline int hl_enc_edge_needed(const hl_enc_t *e, uint32_t self, uint32_t src,
                                     uint64_t steps) {
    unsigned k = src % HL_ENC_EDGE_SLOTS;
    return src != self && !(e->lsrc[k] == src + 1 && e->ln[k] >= steps);
}

static inline uint8_t *hl_enc_edge(uint8_t *p, hl_enc_t *e, uint32_t src, uint64_t steps) {
    unsigned k = src % HL_ENC_EDGE_SLOTS;
    uint64_t base = e->lsrc[k] == src + 1 ? e->ln[k] : 0;
    p = hl_enc_u(p, src);
    p = hl_enc_u(p, hl_zz((int64_t)(steps - base)));
    e->lsrc[k] = src + 1;
    e->ln[k] = steps;
    return p;
}

/* A whole row, for tools (the agent writes its rows inline). `edge2` only
 * on a two-step event: realloc of a non-NULL pointer, and realloc_free. */
typedef struct hl_row {
    unsigned kind;
    int has_time, has_edge, has_edge2;
    uint64_t tick;
    uint32_t edge_thread, edge2_thread;
    uint64_t edge_steps, edge2_steps;
    uint64_t old;  /* realloc: the pointer passed */
    uint64_t size; /* allocations and realloc */
    uint64_t align;
    uint64_t addr; /* the result, or the pointer freed */
    uint32_t stack;
} hl_row_t;

/* Encodes r at p; returns the end of the row and sets *op. */
static inline uint8_t *hl_enc_row(uint8_t *p, hl_enc_t *e, const hl_row_t *r, uint8_t *op) {
    unsigned o = r->kind & 15;
    if (r->has_time) o |= 0x20, p = hl_enc_time(p, e, r->tick);
    if (r->has_edge2) o |= 0x80, p = hl_enc_edge(p, e, r->edge2_thread, r->edge2_steps);
    if (r->has_edge) o |= 0x40, p = hl_enc_edge(p, e, r->edge_thread, r->edge_steps);
    switch (r->kind) {
    case 2: /* realloc */
        p = hl_enc_addr(p, e, r->old);
        p = hl_enc_u(p, r->size);
        p = hl_enc_addr(p, e, r->addr);
        break;
    case 8: /* free */
    case 9: /* realloc_free */
        p = hl_enc_addr(p, e, r->addr);
        break;
    case 3:
    case 4:
    case 5: /* the memalign family that carries its alignment */
        p = hl_enc_u(p, r->size);
        p = hl_enc_u(p, r->align);
        p = hl_enc_addr(p, e, r->addr);
        break;
    case 6:
    case 7: /* valloc, pvalloc: the alignment is the page size */
        p = hl_enc_u(p, r->size);
        p = hl_enc_u(p, r->align);
        p = hl_enc_addr(p, e, r->addr);
        break;
    default: /* malloc, calloc */
        p = hl_enc_u(p, r->size);
        p = hl_enc_addr(p, e, r->addr);
        break;
    }
    if (r->stack) o |= 0x10, p = hl_enc_u(p, r->stack);
    *op = (uint8_t)o;
    return p;
}

/* One entry of an INHERITED block: a live object of the parent. */
static inline uint8_t *hl_enc_inherited(uint8_t *p, unsigned kind, uint64_t size, uint64_t align,
                                        uint64_t addr, uint32_t stack) {
    p = hl_enc_u(p, kind);
    p = hl_enc_u(p, size);
    if (kind >= 3 && kind <= 7) p = hl_enc_u(p, align);
    p = hl_enc_u(p, addr);
    return hl_enc_u(p, stack);
}

#endif
