/*
 * check.c: what check mode knows about every object, to catch an allocator
 * that hands out overlapping blocks or damages a payload.
 *
 * Patterns.  Every payload is filled with its object's pattern:
 *
 *    offset   0   1   2   3   4   5   6   7   8   9  ...
 *    byte     P0  P1  P2  P3  P4  P5  P6  P7  P0  P1 ...    P = mix(id) | 0x0101010101010101
 *
 * so no byte of a pattern is zero (a zeroed payload never passes) and two
 * objects almost never share a pattern.  It is checked at free, at realloc
 * (the old payload, then the prefix the new block must have kept) and, for
 * the objects still live, at the end.
 *
 * Overlaps.  The live blocks sit in a treap keyed by address (priorities are
 * a hash of the object id; nodes are the object ids, children in two arrays
 * indexed by id).  Invariant: the blocks in the treap are pairwise disjoint,
 * [obj[id], obj[id] + max(size, 1)).  A new block is compared with its
 * predecessor and successor by address before it goes in; a block that
 * overlaps is reported and kept out, so the invariant holds after a fault.
 */
#include "rp.h"

#include <string.h>

static inline uint64_t mix(uint64_t x) {
    x += 0x9E3779B97F4A7C15ull;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    return x ^ (x >> 31);
}

static inline uint64_t pattern(uint64_t id) {
    return mix(id) | 0x0101010101010101ull;
}

uint8_t rp_pattern_byte(uint64_t id, uint64_t offset) {
    return (uint8_t)(pattern(id) >> ((offset & 7) * 8));
}

void rp_fill(void *p, uint64_t size, uint64_t id) {
    uint64_t w = pattern(id);
    char *b = p;
    uint64_t i = 0;
    for (; i + 8 <= size; i += 8)
        memcpy(b + i, &w, 8);
    for (; i < size; i++)
        b[i] = (char)(w >> ((i & 7) * 8));
}

uint64_t rp_verify(const void *p, uint64_t from, uint64_t size, uint64_t id) {
    uint64_t w = pattern(id);
    const unsigned char *b = p;
    uint64_t i = from;
    for (; i < size && (i & 7); i++)
        if (b[i] != (unsigned char)(w >> ((i & 7) * 8))) return i;
    for (; i + 8 <= size; i += 8) {
        uint64_t v;
        memcpy(&v, b + i, 8);
        if (v != w) break;
    }
    for (; i < size; i++)
        if (b[i] != (unsigned char)(w >> ((i & 7) * 8))) return i;
    return size;
}

void rp_check_init(rp_check_t *c, uint64_t ids, uint64_t max_report, rp_buf_t *msgs,
                   rp_buf_t *json) {
    uint64_t n = ids ? ids : 1;
    c->size = rp_map(n * sizeof *c->size);
    c->born = rp_map(n * sizeof *c->born);
    c->left = rp_map(n * sizeof *c->left);
    c->right = rp_map(n * sizeof *c->right);
    c->live = rp_map(n);
    c->root = RP_NIL;
    c->problems = 0;
    c->max_report = max_report;
    c->msgs = msgs;
    c->json = json;
}

void rp_problem(rp_check_t *c, const char *text) {
    c->problems++;
    if (c->problems > c->max_report) return;
    rp_puts(c->msgs, "heaplab-replay: check: ");
    rp_puts(c->msgs, text);
    rp_putc(c->msgs, '\n');
    if (c->json->len) rp_putc(c->json, ',');
    rp_put_jstr(c->json, text);
}

/* ---------------------------------------------------------------- the treap */

static inline uint64_t prio(uint32_t id) {
    return mix((uint64_t)id * 0x2545F4914F6CDD1Dull);
}
static inline uintptr_t key(void *const *obj, uint32_t id) {
    return (uintptr_t)obj[id];
}
static inline uintptr_t span(const rp_check_t *c, uint32_t id) {
    return c->size[id] ? c->size[id] : 1;
}

static uint32_t insert(rp_check_t *c, void *const *obj, uint32_t t, uint32_t id) {
    if (t == RP_NIL) {
        c->left[id] = c->right[id] = RP_NIL;
        return id;
    }
    if (key(obj, id) < key(obj, t)) {
        uint32_t l = c->left[t] = insert(c, obj, c->left[t], id);
        if (prio(l) > prio(t)) { /* rotate right */
            c->left[t] = c->right[l];
            c->right[l] = t;
            return l;
        }
    } else {
        uint32_t r = c->right[t] = insert(c, obj, c->right[t], id);
        if (prio(r) > prio(t)) { /* rotate left */
            c->right[t] = c->left[r];
            c->left[r] = t;
            return r;
        }
    }
    return t;
}

static uint32_t merge(rp_check_t *c, uint32_t a, uint32_t b) {
    if (a == RP_NIL) return b;
    if (b == RP_NIL) return a;
    if (prio(a) > prio(b)) {
        c->right[a] = merge(c, c->right[a], b);
        return a;
    }
    c->left[b] = merge(c, a, c->left[b]);
    return b;
}

static uint32_t remove_(rp_check_t *c, void *const *obj, uint32_t t, uint32_t id) {
    if (t == RP_NIL) return RP_NIL;
    if (t == id) return merge(c, c->left[t], c->right[t]);
    if (key(obj, id) < key(obj, t))
        c->left[t] = remove_(c, obj, c->left[t], id);
    else
        c->right[t] = remove_(c, obj, c->right[t], id);
    return t;
}

uint32_t rp_treap_insert(rp_check_t *c, void *const *obj, uint32_t id) {
    uintptr_t s = key(obj, id), e = s + span(c, id);
    /* The block with the greatest start <= s, and the one with the least start > s. */
    uint32_t pred = RP_NIL, succ = RP_NIL;
    for (uint32_t t = c->root; t != RP_NIL;) {
        if (key(obj, t) <= s) {
            pred = t;
            t = c->right[t];
        } else {
            succ = t;
            t = c->left[t];
        }
    }
    if (pred != RP_NIL && key(obj, pred) + span(c, pred) > s) return pred;
    if (succ != RP_NIL && key(obj, succ) < e) return succ;
    c->root = insert(c, obj, c->root, id);
    c->live[id] = 1;
    return RP_NIL;
}

void rp_treap_remove(rp_check_t *c, void *const *obj, uint32_t id) {
    if (c->live[id] == 1) c->root = remove_(c, obj, c->root, id);
    c->live[id] = 0;
}
