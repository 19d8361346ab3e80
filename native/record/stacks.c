/*
 * stacks.c: call stacks to dense ids, where the stacks are taken.
 *
 *   producer: frames -> hash -> this thread's cache (HL_SCACHE_SLOTS pairs
 *             hash, id; hooks.c) -> on a miss, hl_stack_id: the shared table
 *             under stk_lock; a new stack gets the next id and its frames
 *             are kept for the writer
 *   writer:   hl_stacks_take copies the frames of ids it has not defined yet
 *             (under stk_lock) and defines them, in id order, outside it
 *
 *   table:   open addressing on the 64-bit hash, load <= 1/2
 *   frames:  one array; stack k's frames at at[k], n[k] of them
 *
 * Invariants: ids are dense from 1 and given in the order the writer
 * defines them, so an id in a row is the stack's id in the trace; a stack's
 * frames are stored before its id is returned, and a row is published
 * after, so the writer always finds the frames of ids it sees. Two stacks
 * with the same 64-bit hash share an id (as in version 1).
 */
#include "agent.h"

#include <string.h>

static pthread_mutex_t stk_lock = PTHREAD_MUTEX_INITIALIZER;
static uint64_t *tab; /* pairs: hash, id */
static size_t tab_cap;
static uint32_t count;
static uint64_t *frames;
static size_t frames_cap, frames_n;
static uint64_t *at; /* by id */
static uint32_t *nf;
static size_t ids_cap, nf_cap; /* nf grows to ids_cap */

static int grow(void **p, size_t *cap, size_t elem, size_t need) {
    if (need <= *cap) return 0;
    size_t n = *cap ? *cap : 1024;
    while (n < need)
        n *= 2;
    void *q = hl_os_grow(*p, *cap * elem, n * elem);
    if (!q) return -1;
    *p = q;
    *cap = n;
    return 0;
}

static uint32_t *slot_of(uint64_t h) {
    size_t i = (size_t)(h * 0x9E3779B97F4A7C15ull >> 20) & (tab_cap - 1);
    while (tab[2 * i] && tab[2 * i] != h)
        i = (i + 1) & (tab_cap - 1);
    return (uint32_t *)&tab[2 * i + 1];
}

static int rehash(void) {
    size_t cap = tab_cap ? tab_cap * 2 : 1 << 14;
    uint64_t *old = tab;
    size_t oc = tab_cap;
    uint64_t *n = hl_os_alloc(cap * 2 * sizeof *n);
    if (!n) return -1;
    tab = n;
    tab_cap = cap;
    for (size_t i = 0; i < oc; i++) {
        if (!old[2 * i]) continue;
        uint32_t *s = slot_of(old[2 * i]);
        ((uint64_t *)s)[-1] = old[2 * i];
        *s = (uint32_t)old[2 * i + 1];
    }
    hl_os_free(old, oc * 2 * sizeof *old);
    return 0;
}

uint32_t hl_stack_id(hl_thread_t *t, const uintptr_t *f, unsigned n, uint64_t h) {
    uint32_t id = 0;
    pthread_mutex_lock(&stk_lock);
    if ((count + 1) * 2 >= tab_cap && rehash()) goto out;
    uint32_t *s = slot_of(h);
    if (*s) {
        id = *s;
        goto out;
    }
    if (grow((void **)&frames, &frames_cap, sizeof *frames, frames_n + n) ||
        grow((void **)&at, &ids_cap, sizeof *at, (size_t)count + 2) ||
        grow((void **)&nf, &nf_cap, sizeof *nf, ids_cap))
        goto out;
    id = ++count;
    at[id] = frames_n;
    nf[id] = n;
    memcpy(frames + frames_n, f, n * sizeof *f);
    frames_n += n;
    ((uint64_t *)s)[-1] = h;
    *s = id;
out:
    pthread_mutex_unlock(&stk_lock);
    if (id) {
        uint64_t *c = &t->scache[(h & (HL_SCACHE_SLOTS - 1)) * 2];
        c[0] = h;
        c[1] = id;
    }
    return id;
}

uint32_t hl_stacks_count(void) {
    pthread_mutex_lock(&stk_lock);
    uint32_t n = count;
    pthread_mutex_unlock(&stk_lock);
    return n;
}

void hl_stacks_take(uint32_t *defined, void (*fn)(uint32_t id, const uint64_t *f, unsigned n)) {
    static uint64_t *copy;
    static size_t copy_cap;
    static uint32_t *cn;
    static size_t cn_cap;
    pthread_mutex_lock(&stk_lock);
    uint32_t from = *defined + 1, to = count;
    size_t nframes = to >= from ? frames_n - at[from] : 0;
    int ok = to >= from && !grow((void **)&copy, &copy_cap, sizeof *copy, nframes + 1) &&
             !grow((void **)&cn, &cn_cap, sizeof *cn, (size_t)(to - from) + 1);
    if (ok) {
        memcpy(copy, frames + at[from], nframes * sizeof *copy);
        for (uint32_t id = from; id <= to; id++)
            cn[id - from] = nf[id];
    }
    pthread_mutex_unlock(&stk_lock);
    if (!ok) return;
    size_t off = 0;
    for (uint32_t id = from; id <= to; id++) {
        fn(id, copy + off, cn[id - from]);
        off += cn[id - from];
    }
    *defined = to;
}

void hl_stacks_fork_prepare(void) {
    pthread_mutex_lock(&stk_lock);
}
void hl_stacks_fork_parent(void) {
    pthread_mutex_unlock(&stk_lock);
}
void hl_stacks_fork_child(void) {
    pthread_mutex_init(&stk_lock, NULL);
}
