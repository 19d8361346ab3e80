/*
 * hltrace_enc.h: the rows of a version-2 EVENTS stream (docs/trace-format.md,
 * "EVENTS, version 2"), encoded where they are made: in the recording agent's
 * malloc hooks, one thread each, and in the test tools. Header-only, no
 * state outside hl_enc_t, no calls: the agent inlines it into its hot path.
 *
 *   one event = one row:  op byte  [ticks] [edge2] [edge] fields [stack]
 *                         kind | STACK TIME EDGE EDGE2
 *
 *   fields   malloc, calloc, valloc, pvalloc   size new
 *            memalign, posix_memalign,
 *              aligned_alloc                   size align new
 *            realloc                           old size new
 *            free, realloc_free                gone
 *   address  varint c: 0 NULL; else v = c - 1, by v % 4:
 *              0  a = prev + (unzigzag(v / 4) << 4)
 *              1  a = the address of this thread's allocation v / 4 before its last
 *              2  a = the address of this thread's release v / 4 before its last
 *              3  (v / 4 = 0) a = prev + unzigzag(next varint)
 *            prev: the thread's last non-NULL address in any address field;
 *            "allocations": the non-NULL `new` addresses, in stream order;
 *            "releases": the `gone` addresses; the last HL_ENC_RING of each
 *            are what codes 1 and 2 may name
 *   edge     src thread, zigzag(steps - the last edge's steps from the same
 *            src in this stream, tracked in 64 slots by src % 64)
 *
 * Why codes 1 and 2: a free names its object by how many allocations ago
 * it was made (0, 1, 2 for the short-lived, LIFO objects most programs make,
 * as version 1's object refs did), and an allocation that reuses a block
 * names the free that released it (what tcache-like allocators hand back
 * first). The encoder finds both in a direct-mapped table of the thread's
 * last HL_ENC_RING addresses; it may always fall back to code 0 or 3.
 *
 * Invariants the encoder keeps, which the decoders rely on: prev, the
 * allocation and release counts, last_tick and the 64 edge slots change
 * exactly as written here, in field order.
 */
#ifndef HLTRACE_ENC_H
#define HLTRACE_ENC_H

#include <stdint.h>

#define HL_ENC_EDGE_SLOTS 64
#define HL_ENC_RING       4096 /* allocations and releases codes 1 and 2 may name */
/* Most bytes one row can take: op, ticks, two edges, old, size, align, addr, stack. */
#define HL_ENC_MAX_ROW (1 + 10 + 2 * (5 + 10) + 11 + 10 + 10 + 11 + 5)

/* A slot of the encoder's table: the last allocation or release whose
 * address maps here. key = the address of an allocation, ~address of a
 * release (no address a program gets from malloc equals the complement of
 * another), so one compare tells both the address and the role. */
typedef struct hl_enc_slot {
    uint64_t key;
    uint64_t n; /* the allocation (or release) count when it was encoded */
} hl_enc_slot_t;

typedef struct hl_enc {
    uint64_t prev_addr;
    uint64_t nalloc, nfree; /* allocations and releases encoded */
    uint64_t last_tick;
    uint32_t lsrc[HL_ENC_EDGE_SLOTS]; /* source thread + 1; 0: none yet */
    uint64_t ln[HL_ENC_EDGE_SLOTS];
    hl_enc_slot_t tab[HL_ENC_RING]; /* by (address >> 4) % HL_ENC_RING (hl_enc_slot) */
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

/* Code 0, or 3 when the delta is not a multiple of 16. */
static inline uint8_t *hl_enc_delta(uint8_t *p, hl_enc_t *e, uint64_t addr) {
    uint64_t d = addr - e->prev_addr;
    e->prev_addr = addr;
    if (__builtin_expect(d & 15, 0)) {
        *p++ = 4; /* v = 3 */
        return hl_enc_u(p, hl_zz((int64_t)d));
    }
    return hl_enc_u(p, (hl_zz((int64_t)d >> 4) << 2) + 1);
}

/* tab[(addr >> 4) % HL_ENC_RING], as one mask of the address (a slot is 16 bytes). */
static inline hl_enc_slot_t *hl_enc_slot(hl_enc_t *e, uint64_t addr) {
    _Static_assert(sizeof(hl_enc_slot_t) == 16, "a slot is 16 bytes");
    return (hl_enc_slot_t *)((char *)e->tab + (addr & ((HL_ENC_RING - 1) << 4)));
}

/* The code (c, as written) naming the release or allocation `n` when the
 * count is now `count`: 4 * age + 3 (releases) or + 2 (allocations), age =
 * count - 1 - n. Below 2^14 exactly when age < HL_ENC_RING, so one compare
 * checks both the ring's reach and that the varint has at most two bytes. */
static inline uint64_t hl_enc_code_release(uint64_t count, uint64_t n) {
    return 4 * (count - n) - 1;
}
static inline uint64_t hl_enc_code_alloc(uint64_t count, uint64_t n) {
    return 4 * (count - n) - 2;
}
#define HL_ENC_CODE_LIM 0x4000u

/* A `new` address: the result of an allocation (NULL: it failed). */
static inline uint8_t *hl_enc_new(uint8_t *p, hl_enc_t *e, uint64_t addr) {
    if (!addr) {
        *p++ = 0;
        return p;
    }
    hl_enc_slot_t *s = hl_enc_slot(e, addr);
    uint64_t c = hl_enc_code_release(e->nfree, s->n);
    if (s->key == ~addr && c < HL_ENC_CODE_LIM) {
        e->prev_addr = addr;
        p = hl_enc_u(p, c);
    } else {
        p = hl_enc_delta(p, e, addr);
    }
    s->key = addr;
    s->n = e->nalloc++;
    return p;
}

/* A `gone` address: what a free or realloc_free releases. */
static inline uint8_t *hl_enc_gone(uint8_t *p, hl_enc_t *e, uint64_t addr) {
    hl_enc_slot_t *s = hl_enc_slot(e, addr);
    uint64_t c = hl_enc_code_alloc(e->nalloc, s->n);
    if (s->key == addr && c < HL_ENC_CODE_LIM) {
        e->prev_addr = addr;
        p = hl_enc_u(p, c);
    } else {
        p = hl_enc_delta(p, e, addr);
    }
    s->key = ~addr;
    s->n = e->nfree++;
    return p;
}

/* A realloc's `old` address: named like a gone one, released by nothing
 * (the realloc's `new` says where the object is now). NULL: realloc(NULL, n). */
static inline uint8_t *hl_enc_old(uint8_t *p, hl_enc_t *e, uint64_t addr) {
    if (!addr) {
        *p++ = 0;
        return p;
    }
    hl_enc_slot_t *s = hl_enc_slot(e, addr);
    uint64_t c = hl_enc_code_alloc(e->nalloc, s->n);
    if (s->key == addr && c < HL_ENC_CODE_LIM) {
        e->prev_addr = addr;
        return hl_enc_u(p, c);
    }
    return hl_enc_delta(p, e, addr);
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

/* Encodes r at p, op byte first; returns the end of the row. */
static inline uint8_t *hl_enc_row(uint8_t *p, hl_enc_t *e, const hl_row_t *r) {
    uint8_t *op = p++;
    unsigned o = r->kind & 15;
    if (r->has_time) o |= 0x20, p = hl_enc_time(p, e, r->tick);
    if (r->has_edge2) o |= 0x80, p = hl_enc_edge(p, e, r->edge2_thread, r->edge2_steps);
    if (r->has_edge) o |= 0x40, p = hl_enc_edge(p, e, r->edge_thread, r->edge_steps);
    switch (r->kind) {
    case 2: /* realloc */
        p = hl_enc_old(p, e, r->old);
        p = hl_enc_u(p, r->size);
        p = hl_enc_new(p, e, r->addr);
        break;
    case 8: /* free */
    case 9: /* realloc_free */
        p = hl_enc_gone(p, e, r->addr);
        break;
    case 3:
    case 4:
    case 5:
    case 6:
    case 7: /* the memalign family carries its alignment (valloc, pvalloc: the page size) */
        p = hl_enc_u(p, r->size);
        p = hl_enc_u(p, r->align);
        p = hl_enc_new(p, e, r->addr);
        break;
    default: /* malloc, calloc */
        p = hl_enc_u(p, r->size);
        p = hl_enc_new(p, e, r->addr);
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
