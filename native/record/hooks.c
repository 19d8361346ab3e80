/*
 * hooks.c: the interposed malloc API. Each call that is recorded becomes one
 * row in the calling thread's chunk (agent.h, hltrace_enc.h), written with a
 * few stores and published with one more; nothing is shared with other
 * threads unless the program is multithreaded, and then one exchange per
 * address orders the threads' rows (edges.c).
 *
 *   fast:  t_self's gate says a state, not nested, no stacks
 *          -> [real call] -> room in the chunk (below data_lim)?
 *          -> op byte, size, address code from the table, in one or two
 *             bytes each -> publish: the cursor t->data past the row (a
 *             release store; the writer reads the cursor, agent.h); with
 *             the gate's mt byte, the exchange and the edge first (inline
 *             in malloc and calloc, free_mt for free)
 *   gated: the gate says more -> one call out of line: nested (the agent
 *          itself, libunwind, a signal handler interrupting a hook: straight
 *          to the real function, counted as unrecorded), no state yet
 *          (t_self is NO_STATE: start the agent, make the state), stacks
 *   slow:  anything the fast rows leave out (a new chunk, a time stamp, a
 *          long field, a free the table does not know, a failed call) ->
 *          the general row writer (rec_alloc_row, rec_free_row).
 *
 * Cost of the fast path (x86-64, gcc -O2; callgrind, README.md "Cost"):
 * malloc ~50 instructions beyond the real call, free ~45 with its tail
 * call (one thread); in a multithreaded program an exchange and ~40 more
 * (~60 with an edge); a time stamp (rdtsc) once 256 bytes of rows have
 * passed, and after each writer pass.
 *
 * Order (docs/trace-format.md, "Order"): a free exchanges its address's slot
 * before the real free; an allocation after the real call returns; a realloc
 * of a non-NULL pointer is two steps, the release exchanged before the call,
 * the event after it. So a block is never handed out again before the step
 * that released it, and every edge names a step already taken.
 *
 * Signals: a handler that interrupts a hook and allocates must not write
 * into the row under way: `active` is set before a row's first byte and
 * cleared after its publication (with signal fences, which cost nothing),
 * and a call that finds it set passes through unrecorded.
 */
#include "agent.h"
#include "hl_unwind.h"

#include <dlfcn.h>
#include <errno.h>
#include <malloc.h>
#include <sched.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <unistd.h>

hl_real_t hl_real;

/* What t_self points to while a thread has no state: its gate says "inside
 * the agent", which sends every call to the gated path, where t_self ==
 * NO_STATE is told apart. Only the fields up to the gate are ever read. */
static const struct {
    uint8_t *data;
    void *data_lim;
    uint32_t gate;
} no_state = {NULL, NULL, HL_GATE_ACTIVE};
_Static_assert(offsetof(hl_thread_t, gate) == offsetof(__typeof__(no_state), gate),
               "NO_STATE's gate where a state has it");
#define NO_STATE ((hl_thread_t *)&no_state)

static __thread hl_thread_t *t_self __attribute__((tls_model("initial-exec"))) = NO_STATE;
static __thread int t_busy __attribute__((tls_model("initial-exec")));

static inline int has_state(void) {
    return t_self != NO_STATE;
}

/* Agent code runs: calls it makes pass through. A thread with a state also
 * counts it in `active`, which is what the hooks' fast path checks. */
void hl_busy_enter(void) {
    t_busy++;
    if (has_state()) __atomic_fetch_add(&t_self->active, 1, __ATOMIC_RELAXED);
}
void hl_busy_leave(void) {
    t_busy--;
    if (has_state() && hl_active(t_self)) __atomic_fetch_sub(&t_self->active, 1, __ATOMIC_RELAXED);
}
int hl_busy(void) {
    return t_busy || (has_state() && hl_active(t_self));
}
hl_thread_t *hl_thread_self(void) {
    return has_state() ? t_self : NULL;
}
void hl_set_self(hl_thread_t *t) {
    t_self = t ? t : NO_STATE;
}


/* ---------------------------------------------------------------- bootstrap */

/* Serves calls made before the real functions are known (dlsym calls
 * calloc). Blocks are never reused; each has its size 8 bytes before it. */
static _Alignas(64) uint8_t boot_buf[256 << 10];
static _Atomic size_t boot_used;

static void *boot_alloc(size_t size, size_t align) {
    if (align < 16) align = 16;
    size_t need = (size + 15) / 16 * 16 + align + 16;
    size_t at = atomic_fetch_add(&boot_used, need);
    if (at + need > sizeof boot_buf || size > sizeof boot_buf) return NULL;
    uintptr_t p = ((uintptr_t)(boot_buf + at) + 16 + align - 1) & ~(uintptr_t)(align - 1);
    memcpy((void *)(p - 8), &size, sizeof size);
    return (void *)p; /* zeroed: the buffer is static */
}

static inline int is_boot(const void *p) {
    return (uintptr_t)p - (uintptr_t)boot_buf < sizeof boot_buf;
}

static size_t boot_size(const void *p) {
    size_t s;
    memcpy(&s, (const uint8_t *)p - 8, sizeof s);
    return s;
}

static _Atomic int resolve_state; /* 0 not yet, 1 under way, 2 done */

/* The bootstrap blocks must be recognised once the real functions are
 * known: usable size from the buffer, free ignored, realloc moves them. */
static void boot_selftest(void **probe) {
    int ok = probe[0] && probe[1] && is_boot(probe[0]) && is_boot(probe[1]) &&
             malloc_usable_size(probe[0]) == 32;
    t_busy++;
    free(probe[0]);
    char *moved = realloc(probe[1], 200);
    ok = ok && moved && !is_boot(moved) && moved[0] == 'b' && moved[39] == 'b';
    free(moved);
    t_busy--;
    hl_note("bootstrap buffer: ", ok ? "ok" : "FAILED", "");
}

void hl_hooks_resolve(void) {
    int s = 0;
    if (!atomic_compare_exchange_strong(&resolve_state, &s, 1)) {
        while (atomic_load(&resolve_state) != 2)
            sched_yield();
        return;
    }
    t_busy++; /* dlsym's own calls go to the bootstrap buffer */
#define R(name) *(void **)&hl_real.name = dlsym(RTLD_NEXT, #name)
    R(malloc);
    R(free);
    R(calloc);
    R(realloc);
    R(posix_memalign);
    R(aligned_alloc);
    R(memalign);
    R(valloc);
    R(pvalloc);
    R(malloc_usable_size);
    R(execve);
    R(execvpe);
    R(fexecve);
    R(_exit);
    R(_Exit);
    R(quick_exit);
    R(sigaction);
    R(signal);
    R(pthread_create);
    R(dlclose);
#undef R
    /* test only: two calls served from the bootstrap buffer, as dlsym makes
     * on older glibc; see boot_selftest */
    void *probe[2] = {NULL, NULL};
    if (getenv("HEAPLAB_RECORD_TEST_BOOT")) {
        probe[0] = calloc(4, 8);
        probe[1] = malloc(40);
        if (probe[1]) memset(probe[1], 'b', 40);
    }
    t_busy--;
    atomic_store(&resolve_state, 2);
    if (probe[0] || probe[1]) boot_selftest(probe);
}

static inline int resolved(void) {
    return atomic_load_explicit(&resolve_state, memory_order_acquire) == 2;
}

/* ---------------------------------------------------------------- rows */

#define STAMP_BYTES 256 /* a time stamp at least this often in a thread's rows */

/* The slow path of a row: a new chunk if this one is full, and in any case
 * a time stamp (this row is the chunk's first, or STAMP_BYTES after the
 * last stamp, or the first after a writer pass). Returns where the row's
 * fields go, after the op byte's place and the stamp (the caller sets
 * TIME); NULL when the event is not recorded (recording stopped). */
static __attribute__((noinline)) uint8_t *room_slow(hl_thread_t *t) {
    if (HL_UNLIKELY(atomic_load_explicit(&hl_off, memory_order_relaxed))) return NULL;
    hl_thread_sync_gate(t); /* the program may have gone multithreaded (hl_threads_poke) */
    uint8_t *d = t->data;
    if (!d || d >= t->chunk_lim) {
        hl_chunk_t *old = t->chunk, *c = hl_chunk_get(t);
        if (!c) return NULL;
        /* the old chunk's final mark, then the way to the next, then the
         * cursor: a writer that finds the cursor outside a chunk finds it
         * final (agent.h, hl_chunk_mark) */
        if (old) {
            atomic_store_explicit(&old->pub, (uintptr_t)d, memory_order_release);
            atomic_store_explicit(&old->next, c, memory_order_release);
        } else {
            atomic_store_explicit(&t->first, c, memory_order_release);
        }
        d = c->data;
        t->chunk_lim = c->data + HL_CHUNK_DATA - HL_ENC_MAX_ROW;
        t->chunk = c;
        __atomic_store_n(&t->data, d, __ATOMIC_RELEASE);
    }
    uint8_t *lim = d + STAMP_BYTES < t->chunk_lim ? d + STAMP_BYTES : t->chunk_lim;
    atomic_store_explicit(&t->data_lim, lim, memory_order_relaxed);
    return hl_enc_time(d + 1, &t->enc, hl_stamp());
}

/* Where the row's fields go (the op byte's place is the row's first byte,
 * at t->data): the cursor, or after a new chunk and a time stamp. */
#define ROOM(t, d, op)                                                                             \
    uint8_t *d = (t)->data;                                                                        \
    if (HL_LIKELY(d < atomic_load_explicit(&(t)->data_lim, memory_order_relaxed)))                \
        d++;                                                                                       \
    else if ((d = room_slow(t)))                                                                   \
        (op) |= HL_OP2_TIME;                                                                       \
    else                                                                                           \
        return

/* The event is complete: its op byte at the row's start, and the cursor
 * (the chunk's published mark) past it. */
static inline void publish(hl_thread_t *t, unsigned op, uint8_t *d) {
    *t->data = (uint8_t)op;
    __atomic_store_n(&t->data, d, __ATOMIC_RELEASE);
}

/* `active` around a row: set before its first byte, cleared after its
 * publication; the fences keep the compiler from moving the row's loads and
 * stores across them (a signal handler runs on this thread). */
static inline void row_begin(hl_thread_t *t) {
    hl_set_active(t, 1);
    atomic_signal_fence(memory_order_seq_cst);
}
static inline void row_end(hl_thread_t *t) {
    atomic_signal_fence(memory_order_seq_cst);
    hl_set_active(t, 0);
}

static __attribute__((noinline)) uint8_t *enc_u_long(uint8_t *d, uint64_t v) {
    return hl_enc_u(d, v);
}

static inline uint8_t *enc_u(uint8_t *d, uint64_t v) {
    if (HL_LIKELY(v < 0x80)) {
        *d = (uint8_t)v;
        return d + 1;
    }
    if (HL_LIKELY(v < 0x4000)) {
        d[0] = (uint8_t)(v | 0x80);
        d[1] = (uint8_t)(v >> 7);
        return d + 2;
    }
    return enc_u_long(d, v);
}

/* v < 2^14: one byte or two. */
static inline uint8_t *enc_u14(uint8_t *d, uint64_t v) {
    if (HL_LIKELY(v < 0x80)) {
        *d = (uint8_t)v;
        return d + 1;
    }
    d[0] = (uint8_t)(v | 0x80);
    d[1] = (uint8_t)(v >> 7);
    return d + 2;
}

/* The address fields (hltrace_enc.h, which these match byte for byte):
 * code 1 or 2 when the thread's table knows the address, else a delta from
 * the previous address; one or two bytes inline. The callers set prev. */
static __attribute__((noinline)) uint8_t *enc_delta_long(uint8_t *d, uint64_t delta) {
    if (delta & 15) {
        *d++ = 4; /* code 3: a delta that is not a multiple of 16 */
        return hl_enc_u(d, hl_zz((int64_t)delta));
    }
    return hl_enc_u(d, (hl_zz((int64_t)delta >> 4) << 2) + 1);
}

/* One to three bytes inline (a delta within +-2^21 bytes: most of a heap's
 * neighbourhood), else out of line. */
static inline uint8_t *enc_delta(uint8_t *d, const hl_enc_t *e, uint64_t addr) {
    uint64_t delta = addr - e->prev_addr;
    uint64_t code = (hl_zz((int64_t)delta >> 4) << 2) + 1;
    if (HL_UNLIKELY((delta & 15) | (code >> 21))) return enc_delta_long(d, delta);
    if (HL_LIKELY(code < 0x4000)) return enc_u14(d, code);
    d[0] = (uint8_t)(code | 0x80);
    d[1] = (uint8_t)(code >> 7 | 0x80);
    d[2] = (uint8_t)(code >> 14);
    return d + 3;
}

/* A `new` address (not NULL). */
static inline uint8_t *enc_new(uint8_t *d, hl_enc_t *e, uint64_t addr) {
    hl_enc_slot_t *s = hl_enc_slot(e, addr);
    uint64_t c = hl_enc_code_release(e->nfree, s->n);
    if (s->key == ~addr && c < HL_ENC_CODE_LIM)
        d = enc_u14(d, c);
    else
        d = enc_delta(d, e, addr);
    e->prev_addr = addr;
    s->key = addr;
    s->n = e->nalloc++;
    return d;
}

/* A `gone` address. */
static inline uint8_t *enc_gone(uint8_t *d, hl_enc_t *e, uint64_t addr) {
    hl_enc_slot_t *s = hl_enc_slot(e, addr);
    uint64_t c = hl_enc_code_alloc(e->nalloc, s->n);
    if (s->key == addr && c < HL_ENC_CODE_LIM)
        d = enc_u14(d, c);
    else
        d = enc_delta(d, e, addr);
    e->prev_addr = addr;
    s->key = ~addr;
    s->n = e->nfree++;
    return d;
}

/* A realloc's `old` address: named like a gone one, released by nothing. */
static inline uint8_t *enc_old(uint8_t *d, hl_enc_t *e, uint64_t addr) {
    if (!addr) {
        *d = 0;
        return d + 1;
    }
    hl_enc_slot_t *s = hl_enc_slot(e, addr);
    uint64_t c = hl_enc_code_alloc(e->nalloc, s->n);
    if (s->key == addr && c < HL_ENC_CODE_LIM)
        d = enc_u14(d, c);
    else
        d = enc_delta(d, e, addr);
    e->prev_addr = addr;
    return d;
}

/* An edge to the step that last touched this address's slot, if it is
 * another thread's and this stream does not already imply it. */
static inline uint8_t *edge(hl_thread_t *t, uint8_t *d, unsigned *op, unsigned bit,
                            uint64_t prev) {
    if (!prev) return d;
    uint32_t src = (uint32_t)(prev >> HL_SLOT_SHIFT) - 1;
    uint64_t n = prev & HL_SLOT_STEPS;
    if (!hl_enc_edge_needed(&t->enc, t->index, src, n)) return d;
    *op |= bit;
    return hl_enc_edge(d, &t->enc, src, n);
}

static inline int multithreaded(void) {
    return atomic_load_explicit(&hl_mt, memory_order_acquire);
}

/* The edge of a step that takes or releases addr (multithreaded only): the
 * row's end after it; the caller sets EDGE when it moved. */
static __attribute__((noinline)) uint8_t *swap_edge(hl_thread_t *t, uint8_t *d, uint64_t addr,
                                                    uint64_t steps) {
    unsigned op = 0;
    return edge(t, d, &op, HL_OP2_EDGE, hl_edge_swap(hl_slots, addr, t->slot_me | steps));
}

#define SWAP_EDGE(t, d, op, addr, steps)                                                           \
    do {                                                                                           \
        uint8_t *e_ = swap_edge((t), (d), (addr), (steps));                                        \
        if (e_ != (d)) (op) |= HL_OP2_EDGE, (d) = e_;                                              \
    } while (0)

/* ---------------------------------------------------------------- stacks */

/* The stack id of this call: return addresses of the caller of the
 * allocator entry point and above, skipping frames inside this library (the
 * entry point and this function), looked up by hash in this thread's cache,
 * else in the shared table (stacks.c). hl_unwind_backtrace returns what
 * unw_backtrace would (HEAPLAB_UNWIND=libunwind: it is unw_backtrace), from
 * rules cached per return address (README.md, "Call stacks"). Out of line,
 * so that the entry points without stacks keep a small frame. */
static uint32_t stack_id_of(hl_thread_t *t, void *const *buf, int n);

static inline __attribute__((always_inline)) uint32_t stack_id_here(hl_thread_t *t) {
    void *buf[HL_MAX_DEPTH + 8];
    uint64_t memo;
    int n = hl_unwind_backtrace_memo(buf, (int)hl_cfg.stack_depth + 2, &t->umemo, &memo);
    if (HL_LIKELY(n < 0)) return (uint32_t)memo; /* the same walk as a kept one */
    uint32_t id = stack_id_of(t, buf, n);
    if (id) hl_unwind_memo_keep(&t->umemo, id); /* (0: no frames, or no memory for the table) */
    return id;
}

/* Out of line: the walk starts one frame above its caller. */
static __attribute__((noinline)) uint32_t stack_id(hl_thread_t *t) {
    return stack_id_here(t);
}

/* The stack id of a walk's frames (buf[0..n)). */
static uint32_t stack_id_of(hl_thread_t *t, void *const *buf, int n) {
    uintptr_t f[HL_MAX_DEPTH];
    int i = 0;
    while (i < n && (uintptr_t)buf[i] - hl_self_lo < hl_self_len)
        i++;
    unsigned k = (unsigned)(n - i) < hl_cfg.stack_depth ? (unsigned)(n - i) : hl_cfg.stack_depth;
    if (!k) return 0;
    uint64_t h = 0x9E3779B97F4A7C15ull ^ k; /* the frames' hash, as they are copied */
    for (unsigned j = 0; j < k; j++) {
        uintptr_t a = (uintptr_t)buf[i + (int)j];
        f[j] = a;
        h ^= a;
        h *= 0xff51afd7ed558ccdull;
        h ^= h >> 32;
    }
    h = h ? h : 1;
    const uint64_t *slot = &t->scache[(h & (HL_SCACHE_SLOTS - 1)) * 2];
    if (HL_LIKELY(slot[0] == h)) return (uint32_t)slot[1];
    return hl_stack_id(t, f, k, h);
}

static inline uint32_t take_stack(hl_thread_t *t, int want) {
    if (HL_LIKELY(!want || !t->stacks)) return 0;
    return stack_id(t);
}

/* ---------------------------------------------------------------- events */

/* An allocation that has returned (p NULL: it failed), with its stack id:
 * the general row, for every case. */
static inline __attribute__((always_inline)) void rec_alloc_row(hl_thread_t *t, unsigned kind,
                                                                uintptr_t p, uint64_t size,
                                                                uint64_t align, uint32_t sid) {
    unsigned op = kind;
    ROOM(t, d, op);
    uint64_t steps = t->steps + 1; /* counted once published: END's rows */
    if (HL_UNLIKELY(multithreaded()) && p) SWAP_EDGE(t, d, op, p, steps);
    if (kind == HL_REALLOC) *d++ = 0; /* realloc(NULL, n): old is NULL */
    d = enc_u(d, size);
    if (kind >= HL_MEMALIGN) d = enc_u(d, align);
    if (p)
        d = enc_new(d, &t->enc, p);
    else
        *d++ = 0;
    if (sid) op |= HL_OP2_STACK, d = enc_u(d, sid);
    publish(t, op, d);
    t->steps = steps;
}

/* Everything the fast rows leave out: a new chunk or a time stamp, edges,
 * long fields, failed calls (errno is the real call's). */
static __attribute__((noinline)) void rec_alloc_slow(hl_thread_t *t, unsigned kind, uintptr_t p,
                                                     uint64_t size, uint64_t align, uint32_t sid) {
    int e = errno;
    rec_alloc_row(t, kind, p, size, align, sid);
    errno = e;
}

/* The fast row of an allocation (malloc, calloc): one thread, no stack,
 * room, p not NULL; ~25 instructions: the room check, the size, the
 * address code, the table, publish. The rest goes to rec_alloc_slow. */
static inline __attribute__((always_inline)) void rec_alloc_fast(hl_thread_t *t, unsigned kind,
                                                                 void *p, uint64_t size) {
    uint8_t *d = t->data;
    if (HL_UNLIKELY(d >= atomic_load_explicit(&t->data_lim, memory_order_relaxed) || !p)) {
        rec_alloc_slow(t, kind, (uintptr_t)p, size, 0, 0);
        return;
    }
    d[0] = (uint8_t)kind;
    uint8_t *f = enc_u(d + 1, size);
    f = enc_new(f, &t->enc, (uintptr_t)p);
    __atomic_store_n(&t->data, f, __ATOMIC_RELEASE);
    t->steps++; /* after the row is out: END counts published rows */
}

/* The edge field of a fast-path row in a multithreaded program: swap this
 * step into the address's slot; an edge when the step before is another
 * thread's and this stream does not imply it yet (hl_enc_edge, inline). */
static inline __attribute__((always_inline)) uint8_t *fast_edge(hl_thread_t *t, uint8_t *f,
                                                                unsigned *op, uint64_t addr) {
    uint64_t prev = hl_edge_swap(t->slots, addr, t->slot_me | (t->steps + 1));
    uint32_t src = (uint32_t)(prev >> HL_SLOT_SHIFT) - 1;
    if (!prev || src == t->index) return f;
    uint64_t n = prev & HL_SLOT_STEPS;
    hl_enc_t *e = &t->enc;
    unsigned k = src % HL_ENC_EDGE_SLOTS;
    uint64_t base = 0;
    if (e->lsrc[k] == src + 1) {
        if (e->ln[k] >= n) return f;
        base = e->ln[k];
    }
    e->lsrc[k] = src + 1;
    e->ln[k] = n;
    *op |= HL_OP2_EDGE;
    f = enc_u(f, src);
    return enc_u(f, hl_zz((int64_t)(n - base)));
}

/* An allocation's row on the gated path, with its stack id (0: none): room
 * without a stamp due; one thread, or several with the edge inline. */
static inline __attribute__((always_inline)) void rec_alloc_sid(hl_thread_t *t, unsigned kind,
                                                                void *p, uint64_t size,
                                                                uint64_t align, uint32_t sid) {
    uint8_t *d = t->data;
    if (HL_UNLIKELY(d >= atomic_load_explicit(&t->data_lim, memory_order_relaxed) || !p)) {
        rec_alloc_slow(t, kind, (uintptr_t)p, size, align, sid);
        return;
    }
    unsigned op = kind;
    uint8_t *f = d + 1;
    if (HL_UNLIKELY(t->mt)) f = fast_edge(t, f, &op, (uintptr_t)p);
    if (kind == HL_REALLOC) *f++ = 0; /* realloc(NULL, n): old is NULL */
    f = enc_u(f, size);
    if (kind >= HL_MEMALIGN) f = enc_u(f, align);
    f = enc_new(f, &t->enc, (uintptr_t)p);
    if (sid) op |= HL_OP2_STACK, f = enc_u(f, sid);
    *d = (uint8_t)op;
    __atomic_store_n(&t->data, f, __ATOMIC_RELEASE);
    t->steps++; /* after the row is out: END counts published rows */
}

/* The same with stacks on: the stack id first, then the same row (out of
 * line, so that the entry points keep few registers). `ra` is the entry
 * point's return address: the memo's slot by it too, so that calls from
 * many places (libc's strdup, fopen, ...) at one stack depth, and malloc
 * and calloc from one place, keep a memo each. */
static __attribute__((noinline)) void rec_alloc_stk(hl_thread_t *t, unsigned kind, void *p,
                                                    uint64_t size, uint64_t align, uintptr_t ra) {
    t->umemo.salt = ra ^ kind;
    rec_alloc_sid(t, kind, p, size, align, stack_id_here(t)); /* one frame fewer to walk */
}

/* An allocation's row from malloc_gated and calloc_gated: the walk starts
 * in them (one agent frame: the entry points tail-call them). */
static inline __attribute__((always_inline)) void rec_alloc_here(hl_thread_t *t, unsigned kind,
                                                                 void *p, uint64_t size,
                                                                 uintptr_t ra) {
    uint32_t sid = 0;
    if (HL_UNLIKELY(t->stacks)) {
        t->umemo.salt = ra ^ kind; /* (as in rec_alloc_stk) */
        sid = stack_id_here(t);
    }
    rec_alloc_sid(t, kind, p, size, 0, sid);
}

/* An allocation's row, any case (with `active` set). */
static inline __attribute__((always_inline)) void rec_alloc(hl_thread_t *t, unsigned kind, void *p,
                                                            uint64_t size, uint64_t align,
                                                            uintptr_t ra) {
    if (HL_UNLIKELY(t->stacks))
        rec_alloc_stk(t, kind, p, size, align, ra);
    else
        rec_alloc_sid(t, kind, p, size, align, 0);
}

/* A free that is about to happen: the general row. */
static inline __attribute__((always_inline)) void rec_free_row(hl_thread_t *t, uintptr_t p,
                                                               uint32_t sid) {
    unsigned op = HL_FREE;
    ROOM(t, d, op);
    uint64_t steps = t->steps + 1;
    if (HL_UNLIKELY(multithreaded())) SWAP_EDGE(t, d, op, p, steps);
    d = enc_gone(d, &t->enc, p);
    if (sid) op |= HL_OP2_STACK, d = enc_u(d, sid);
    publish(t, op, d);
    t->steps = steps;
}

static __attribute__((noinline)) void rec_free_slow(hl_thread_t *t, uintptr_t p, uintptr_t ra) {
    t->umemo.salt = ra ^ HL_FREE; /* (as in rec_alloc_stk) */
    rec_free_row(t, p, t->free_stacks ? stack_id(t) : 0);
}

/* A free on the gated path: multithreaded (the edge inline), or with stacks. */
static inline __attribute__((always_inline)) void rec_free(hl_thread_t *t, void *p, uintptr_t ra) {
    uint8_t *d = t->data;
    if (HL_UNLIKELY(d >= atomic_load_explicit(&t->data_lim, memory_order_relaxed) ||
                    t->free_stacks)) {
        rec_free_slow(t, (uintptr_t)p, ra);
        return;
    }
    unsigned op = HL_FREE;
    uint8_t *f = d + 1;
    if (HL_UNLIKELY(t->mt)) f = fast_edge(t, f, &op, (uintptr_t)p);
    f = enc_gone(f, &t->enc, (uintptr_t)p);
    *d = (uint8_t)op;
    __atomic_store_n(&t->data, f, __ATOMIC_RELEASE);
    t->steps++;
}

/* realloc(old, size), with `fail` for a reallocarray overflow. */
static inline __attribute__((always_inline)) void *rec_realloc(hl_thread_t *t, void *old,
                                                               size_t size, int fail,
                                                               uintptr_t ra) {
    t->umemo.salt = ra ^ HL_REALLOC;
    uint32_t sid = take_stack(t, 1);
    if (!old) {
        void *p = fail ? (errno = ENOMEM, NULL) : hl_real.realloc(NULL, size);
        int e = errno;
        rec_alloc_row(t, HL_REALLOC, (uintptr_t)p, fail ? UINT64_MAX : size, 0, sid);
        errno = e;
        return p;
    }
    unsigned op = 0;
    uint8_t *d = t->data;
    if (HL_LIKELY(d < atomic_load_explicit(&t->data_lim, memory_order_relaxed)))
        d++;
    else if ((d = room_slow(t)))
        op = HL_OP2_TIME;
    else
        return fail ? (errno = ENOMEM, NULL) : hl_real.realloc(old, size);
    int mt = multithreaded();
    /* step 1, before the call: the old block may be handed out from here on */
    uint64_t s1 = t->steps + 1, prev1 = 0, prev2 = 0;
    if (HL_UNLIKELY(mt)) prev1 = hl_edge_swap(hl_slots, (uintptr_t)old, t->slot_me | s1);
    void *p = fail ? (errno = ENOMEM, NULL) : hl_real.realloc(old, size);
    int e = errno;
    /* step 2, after it: the event, and the new block */
    uint64_t s2 = s1 + 1;
    if (HL_UNLIKELY(mt) && p) prev2 = hl_edge_swap(hl_slots, (uintptr_t)p, t->slot_me | s2);
    unsigned kind = !p && size == 0 && !fail ? HL_REALLOC_FREE : HL_REALLOC;
    op |= kind;
    if (HL_UNLIKELY(mt)) {
        d = edge(t, d, &op, HL_OP2_EDGE2, prev1);
        d = edge(t, d, &op, HL_OP2_EDGE, prev2);
    }
    if (kind == HL_REALLOC) {
        d = enc_old(d, &t->enc, (uintptr_t)old);
        d = enc_u(d, fail ? UINT64_MAX : size);
        d = p ? enc_new(d, &t->enc, (uintptr_t)p) : (*d = 0, d + 1);
    } else {
        d = enc_gone(d, &t->enc, (uintptr_t)old);
    }
    if (sid) op |= HL_OP2_STACK, d = enc_u(d, sid);
    publish(t, op, d);
    t->steps = s2;
    t->twos++;
    errno = e;
    return p;
}

/* A failed allocation: errno must reach the caller as the real call set it. */
static __attribute__((noinline)) void *rec_failed(hl_thread_t *t, unsigned kind, uint64_t size) {
    int e = errno;
    rec_alloc(t, kind, NULL, size, 0, 0);
    row_end(t);
    errno = e;
    return NULL;
}

/* ---------------------------------------------------------------- the slow path's way in */

/* Resolves, starts the agent, makes this thread's state and marks it
 * active. Called with t_busy raised. NULL when this call is not recorded. */
static hl_thread_t *enter(void) {
    if (!resolved()) hl_hooks_resolve();
    if (!hl_agent_ready()) return NULL;
    if (!has_state()) hl_set_self(hl_thread_create(1));
    if (!has_state()) return NULL;
    row_begin(t_self);
    return t_self;
}

static inline void leave(hl_thread_t *t) {
    if (t) row_end(t);
}

/* Whether the slow path must pass the call through: inside the agent. */
static inline int nested(void) {
    return t_busy || (has_state() && hl_active(t_self));
}

static inline void count_unrecorded(void) {
    atomic_fetch_add_explicit(&hl_unrecorded, 1, memory_order_relaxed);
}

#define RET_ADDR() ((uintptr_t)__builtin_return_address(0))

/* ---------------------------------------------------------------- the malloc API */

static __attribute__((noinline, cold)) void *malloc_slow(size_t n);
static __attribute__((noinline, cold)) void free_slow(void *p);
static __attribute__((noinline, cold)) void *calloc_slow(size_t n, size_t size, int over,
                                                         uint64_t total);

/* malloc with the gate not 0: nested or no state yet (the slow path), or
 * multithreaded, or stacks. */
static __attribute__((noinline)) void *malloc_gated(hl_thread_t *t, size_t n, uintptr_t ra) {
    if (t->active) return malloc_slow(n);
    row_begin(t);
    void *p = hl_real.malloc(n);
    if (HL_UNLIKELY(!p)) return rec_failed(t, HL_MALLOC, n);
    rec_alloc_here(t, HL_MALLOC, p, n, ra);
    row_end(t);
    return p;
}

HL_EXPORT void *malloc(size_t n) {
    hl_thread_t *t = t_self;
    if (HL_UNLIKELY(t->gate & (HL_GATE_ACTIVE | HL_GATE_STACKS)))
        return malloc_gated(t, n, RET_ADDR());
    row_begin(t);
    void *p = hl_real.malloc(n);
    if (HL_UNLIKELY(t->mt))
        rec_alloc_sid(t, HL_MALLOC, p, n, 0, 0);
    else
        rec_alloc_fast(t, HL_MALLOC, p, n);
    row_end(t);
    return p;
}

static void *malloc_slow(size_t n) {
    if (nested()) {
        count_unrecorded();
        return resolved() ? hl_real.malloc(n) : boot_alloc(n, 16);
    }
    t_busy = 1;
    hl_thread_t *t = enter();
    void *p = hl_real.malloc(n);
    int e = errno;
    if (t) rec_alloc(t, HL_MALLOC, p, n, 0, 0);
    leave(t);
    t_busy = 0;
    errno = e;
    return p;
}

/* A free whose row needs room or a time stamp (with `active` set); a
 * bootstrap block is not recorded. */
static __attribute__((noinline)) void free_miss(hl_thread_t *t, void *p) {
    if (HL_UNLIKELY(is_boot(p))) {
        row_end(t);
        return;
    }
    rec_free_row(t, (uintptr_t)p, 0);
    row_end(t);
    hl_real.free(p);
}

/* free with the gate not 0. */
static __attribute__((noinline)) void free_gated(hl_thread_t *t, void *p, uintptr_t ra) {
    if (HL_UNLIKELY(is_boot(p))) return;
    if (t->active) {
        free_slow(p);
        return;
    }
    row_begin(t);
    rec_free(t, p, ra);
    row_end(t);
    hl_real.free(p);
}

/* A multithreaded program's free: the row with its edge (rec_free). */
static __attribute__((noinline)) void free_mt(hl_thread_t *t, void *p) {
    if (HL_UNLIKELY(is_boot(p))) {
        row_end(t);
        return;
    }
    rec_free(t, p, 0);
    row_end(t);
    hl_real.free(p);
}

/* The row goes out before the real free (which is a tail call): the
 * address may be handed out again from then on. */
HL_EXPORT void free(void *p) {
    if (HL_UNLIKELY(!p)) return;
    hl_thread_t *t = t_self;
    if (HL_UNLIKELY(t->gate & (HL_GATE_ACTIVE | HL_GATE_FREE_STACKS)))
        return free_gated(t, p, RET_ADDR());
    row_begin(t);
    if (HL_UNLIKELY(t->mt)) {
        free_mt(t, p);
        return;
    }
    hl_enc_t *e = &t->enc;
    uint8_t *d = t->data;
    if (HL_UNLIKELY(d >= atomic_load_explicit(&t->data_lim, memory_order_relaxed)))
        return free_miss(t, p);
    hl_enc_slot_t *s = hl_enc_slot(e, (uintptr_t)p);
    uint64_t c = hl_enc_code_alloc(e->nalloc, s->n); /* "the allocation k ago" */
    uint8_t *f;
    if (HL_LIKELY(s->key == (uintptr_t)p && c < HL_ENC_CODE_LIM)) {
        f = enc_u14(d + 1, c);
    } else {
        /* (a recorded allocation has the address: the bootstrap buffer's
         * blocks, never recorded, come here) */
        if (HL_UNLIKELY(is_boot(p))) {
            row_end(t);
            return;
        }
        f = enc_delta(d + 1, e, (uintptr_t)p);
    }
    d[0] = HL_FREE;
    e->prev_addr = (uintptr_t)p;
    s->key = ~(uintptr_t)p;
    s->n = e->nfree++;
    __atomic_store_n(&t->data, f, __ATOMIC_RELEASE);
    t->steps++;
    row_end(t);
    hl_real.free(p);
}

static void free_slow(void *p) {
    if (nested()) {
        count_unrecorded();
        if (resolved()) hl_real.free(p);
        return;
    }
    t_busy = 1;
    hl_thread_t *t = enter();
    if (t) rec_free(t, p, 0);
    hl_real.free(p);
    leave(t);
    t_busy = 0;
}

static void *calloc_slow(size_t n, size_t size, int over, uint64_t total) {
    if (nested()) {
        count_unrecorded();
        if (!resolved()) {
            if (over) return errno = ENOMEM, NULL;
            return boot_alloc(total, 16);
        }
        return hl_real.calloc(n, size);
    }
    t_busy = 1;
    hl_thread_t *t = enter();
    void *p = hl_real.calloc(n, size);
    int e = errno;
    if (t) rec_alloc(t, HL_CALLOC, p, over ? UINT64_MAX : total, 0, 0);
    leave(t);
    t_busy = 0;
    errno = e;
    return p;
}

static __attribute__((noinline)) void *calloc_gated(hl_thread_t *t, size_t n, size_t size,
                                                    uintptr_t ra) {
    uint64_t total;
    int over = __builtin_mul_overflow((uint64_t)n, (uint64_t)size, &total);
    if (t->active) return calloc_slow(n, size, over, total);
    row_begin(t);
    void *p = hl_real.calloc(n, size);
    if (HL_UNLIKELY(!p)) return rec_failed(t, HL_CALLOC, over ? UINT64_MAX : total);
    rec_alloc_here(t, HL_CALLOC, p, over ? UINT64_MAX : total, ra);
    row_end(t);
    return p;
}

HL_EXPORT void *calloc(size_t n, size_t size) {
    hl_thread_t *t = t_self;
    if (HL_UNLIKELY(t->gate & (HL_GATE_ACTIVE | HL_GATE_STACKS)))
        return calloc_gated(t, n, size, RET_ADDR());
    row_begin(t);
    void *p = hl_real.calloc(n, size);
    uint64_t total;
    int over = __builtin_mul_overflow((uint64_t)n, (uint64_t)size, &total);
    if (HL_UNLIKELY(t->mt))
        rec_alloc_sid(t, HL_CALLOC, p, over ? UINT64_MAX : total, 0, 0);
    else
        rec_alloc_fast(t, HL_CALLOC, p, over ? UINT64_MAX : total);
    row_end(t);
    return p;
}

static __attribute__((noinline)) void *realloc_slow(void *old, size_t size, int fail) {
    if (nested()) {
        count_unrecorded();
        if (fail) return errno = ENOMEM, NULL;
        if (!resolved()) {
            void *p = boot_alloc(size, 16);
            if (p && old) memcpy(p, old, boot_size(old) < size ? boot_size(old) : size);
            return p;
        }
        return hl_real.realloc(old, size);
    }
    t_busy = 1;
    hl_thread_t *t = enter();
    void *p;
    if (t)
        p = rec_realloc(t, old, size, fail, 0);
    else
        p = fail ? (errno = ENOMEM, NULL) : hl_real.realloc(old, size);
    leave(t);
    t_busy = 0;
    return p;
}

static inline __attribute__((always_inline)) void *realloc_any(void *old, size_t size, int fail,
                                                               uintptr_t ra) {
    if (HL_UNLIKELY(old && is_boot(old))) {
        /* a bootstrap block moves to the real heap (or stays in the buffer) */
        if (fail) return errno = ENOMEM, NULL;
        void *p = malloc(size);
        if (p) {
            size_t o = boot_size(old);
            memcpy(p, old, o < size ? o : size);
        }
        return p;
    }
    hl_thread_t *t = t_self;
    if (HL_UNLIKELY(t->active)) return realloc_slow(old, size, fail);
    row_begin(t);
    void *p = rec_realloc(t, old, size, fail, ra);
    row_end(t);
    return p;
}

HL_EXPORT void *realloc(void *old, size_t size) {
    return realloc_any(old, size, 0, RET_ADDR());
}

HL_EXPORT void *reallocarray(void *old, size_t n, size_t size) {
    size_t total;
    int over = __builtin_mul_overflow(n, size, &total);
    return realloc_any(old, over ? SIZE_MAX : total, over, RET_ADDR());
}

/* The memalign family: kind, the call, and the alignment to record. */
typedef enum { AL_MEMALIGN, AL_ALIGNED, AL_VALLOC, AL_PVALLOC } al_kind_t;

static void *do_aligned(al_kind_t k, size_t align, size_t size) {
    switch (k) {
    case AL_MEMALIGN:
        return hl_real.memalign(align, size);
    case AL_ALIGNED:
        return hl_real.aligned_alloc(align, size);
    case AL_VALLOC:
        return hl_real.valloc(size);
    default:
        return hl_real.pvalloc(size);
    }
}

static inline __attribute__((always_inline)) void *aligned_any(al_kind_t k, size_t align,
                                                               size_t size, uintptr_t ra) {
    static const unsigned kinds[4] = {HL_MEMALIGN, HL_ALIGNED_ALLOC, HL_VALLOC, HL_PVALLOC};
    static size_t page;
    if (k == AL_VALLOC || k == AL_PVALLOC) {
        if (!page) page = (size_t)sysconf(_SC_PAGESIZE);
        align = page;
    }
    hl_thread_t *t = t_self;
    int slow = t->active; /* nested, or no state yet */
    if (HL_UNLIKELY(slow)) {
        if (nested()) {
            count_unrecorded();
            return resolved() ? do_aligned(k, align, size) : boot_alloc(size, align);
        }
        t_busy = 1;
        t = enter();
    } else {
        row_begin(t);
    }
    void *p = do_aligned(k, align, size);
    if (t) {
        int e = errno;
        rec_alloc(t, kinds[k], p, size, align, ra);
        errno = e;
    }
    leave(t);
    if (slow) t_busy = 0;
    return p;
}

HL_EXPORT void *memalign(size_t align, size_t size) {
    return aligned_any(AL_MEMALIGN, align, size, RET_ADDR());
}
HL_EXPORT void *aligned_alloc(size_t align, size_t size) {
    return aligned_any(AL_ALIGNED, align, size, RET_ADDR());
}
HL_EXPORT void *valloc(size_t size) {
    return aligned_any(AL_VALLOC, 0, size, RET_ADDR());
}
HL_EXPORT void *pvalloc(size_t size) {
    return aligned_any(AL_PVALLOC, 0, size, RET_ADDR());
}

HL_EXPORT int posix_memalign(void **out, size_t align, size_t size) {
    hl_thread_t *t = t_self;
    int slow = t->active; /* nested, or no state yet */
    if (HL_UNLIKELY(slow)) {
        if (nested()) {
            count_unrecorded();
            if (!resolved()) {
                void *p = boot_alloc(size, align);
                if (!p) return ENOMEM;
                *out = p;
                return 0;
            }
            return hl_real.posix_memalign(out, align, size);
        }
        t_busy = 1;
        t = enter();
    } else {
        row_begin(t);
    }
    void *p = NULL;
    int rc = hl_real.posix_memalign(&p, align, size);
    if (rc == 0) *out = p;
    if (t) rec_alloc(t, HL_POSIX_MEMALIGN, rc == 0 ? p : NULL, size, align, RET_ADDR());
    leave(t);
    if (slow) t_busy = 0;
    return rc;
}

HL_EXPORT size_t malloc_usable_size(void *p) {
    if (!p) return 0;
    if (is_boot(p)) return boot_size(p);
    if (!resolved()) hl_hooks_resolve();
    return hl_real.malloc_usable_size(p);
}
