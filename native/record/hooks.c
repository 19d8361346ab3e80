/*
 * hooks.c: the interposed malloc API, and the producer side of the rings.
 *
 * Every entry point has a fast path and a slow path:
 *
 *   fast:  t_self set, not nested, recording on
 *          -> real call -> [unwind] -> reserve ring space -> claim seq
 *          -> fill the 64-byte record -> publish (release store)
 *   slow:  nested call (t_busy: from the agent itself, libunwind, a signal
 *          handler interrupting a hook) -> straight to the real function,
 *          counted as unrecorded; before the real functions are known
 *          (dlsym may call calloc) -> the static bootstrap buffer; the first
 *          call of a thread -> start the agent, make the thread's state.
 *
 * Expected cost of the fast path without stacks: two TLS loads, one atomic
 * fetch_add on the shared sequence counter, one clock read and ~10 stores
 * into memory the thread owns: about 40-90 ns on top of the real call here
 * (the clock read is ~58 ns on this VM, an uncontended fetch_add ~14 ns).
 *
 * Order (docs/trace-format.md, "Order and threads"): a free claims its seq
 * before the real free; an allocation after the real call returns; a realloc
 * claims seq1 before and seq after, and the writer releases the old block at
 * seq1 and creates the new one at seq. So a block is never handed out again
 * before the event that released it, in the merged order.
 */
#include "agent.h"
#include "hl_unwind.h"

#include <dlfcn.h>
#include <errno.h>
#include <malloc.h>
#include <sched.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <unistd.h>

hl_real_t hl_real;

static __thread hl_thread_t *t_self __attribute__((tls_model("initial-exec")));
static __thread int t_busy __attribute__((tls_model("initial-exec")));

void hl_busy_enter(void) {
    t_busy++;
}
void hl_busy_leave(void) {
    t_busy--;
}
int hl_busy(void) {
    return t_busy;
}
hl_thread_t *hl_thread_self(void) {
    return t_self;
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
    return (const uint8_t *)p >= boot_buf && (const uint8_t *)p < boot_buf + sizeof boot_buf;
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

/* ---------------------------------------------------------------- rings */

/* Waits until the writer has consumed up to `need_head`. Returns 0, or -1
 * when recording stopped meanwhile (the record is dropped). */
static int ring_wait(hl_thread_t *t, uint64_t need_head) {
    for (;;) {
        t->head_seen = atomic_load_explicit(&t->head_pub, memory_order_acquire);
        if (t->head_seen >= need_head) return 0;
        if (atomic_load_explicit(&hl_off, memory_order_relaxed)) return -1;
        hl_writer_ensure_running();
        /* drain the rings ourselves rather than wait for the writer thread
         * to be scheduled, which on a busy machine can take milliseconds */
        if (!hl_writer_help()) sched_yield();
    }
}

/* Space for a record of `need` bytes (a multiple of 8), or NULL. */
static inline hl_rec_t *ring_reserve(hl_thread_t *t, size_t need) {
    uint64_t cap = t->mask + 1, off = t->tail & t->mask, contig = cap - off;
    uint64_t total = need + (contig < need ? contig : 0);
    if (HL_UNLIKELY(t->tail + total - t->head_seen > cap / 2)) {
        /* Half full: drain the rings here if the writer is not at it. On a
         * busy machine this beats waking the writer thread (a context
         * switch, and caches refilled, per wake-up); on an idle one the
         * writer thread usually gets there first. */
        t->head_seen = atomic_load_explicit(&t->head_pub, memory_order_acquire);
        if (t->tail + total - t->head_seen > cap / 2 && hl_writer_help())
            t->head_seen = atomic_load_explicit(&t->head_pub, memory_order_acquire);
        if (t->tail + total - t->head_seen > cap && ring_wait(t, t->tail + total - cap))
            return NULL;
    }
    if (contig < need) {
        uint64_t zero = 0; /* seq 0: padding to the end of the ring */
        memcpy(t->ring + off, &zero, sizeof zero);
        t->tail += contig;
        off = 0;
    }
    return (hl_rec_t *)(t->ring + off);
}

static inline void ring_publish(hl_thread_t *t, size_t need) {
    t->tail += need;
    /* ownership of a line a few records ahead: the writer read it one lap ago */
    __asm__ volatile("prefetchw %0" ::"m"(t->ring[(t->tail + 512) & t->mask]));
    atomic_store_explicit(&t->tail_pub, t->tail, memory_order_release);
    atomic_store_explicit(&t->pending, 0, memory_order_release);
}

/* Claims the next sequence number. `pending` tells the writer a claim is
 * under way (UINT64_MAX) and then which seq it got, so that a gap in the
 * merged order can be told apart from a seq that will never come. */
static inline uint64_t claim_seq(hl_thread_t *t) {
    atomic_store_explicit(&t->pending, UINT64_MAX, memory_order_relaxed);
    uint64_t s = atomic_fetch_add_explicit(&hl_seq, 1, memory_order_seq_cst);
    atomic_store_explicit(&t->pending, s, memory_order_relaxed);
    return s;
}

/* ---------------------------------------------------------------- stacks */

/* Return addresses of the caller of the allocator entry point and above,
 * skipping frames inside this library. hl_unwind_backtrace returns what
 * unw_backtrace would (HEAPLAB_UNWIND=libunwind: it is unw_backtrace), from
 * rules cached per return address (README.md, "Call stacks"). */
static inline __attribute__((always_inline)) unsigned unwind(uintptr_t *out) {
    void *buf[HL_MAX_DEPTH + 8];
    /* the recording is inlined into the entry point: one frame of ours */
    int want = (int)hl_cfg.stack_depth + 1;
    int e = errno;
    int n = hl_unwind_backtrace(buf, want);
    errno = e;
    int i = 0;
    while (i < n && (uintptr_t)buf[i] - hl_self_lo < hl_self_len)
        i++;
    unsigned k = 0;
    while (i < n && k < hl_cfg.stack_depth)
        out[k++] = (uintptr_t)buf[i++];
    return k;
}

static inline uint64_t hash_frames(const uintptr_t *f, unsigned n) {
    uint64_t h = 0x9E3779B97F4A7C15ull ^ n;
    for (unsigned i = 0; i < n; i++) {
        h ^= f[i];
        h *= 0xff51afd7ed558ccdull;
        h ^= h >> 32;
    }
    return h ? h : 1;
}

typedef struct stk {
    uint64_t hash;
    unsigned nf, nsend;
    uintptr_t f[HL_MAX_DEPTH];
} stk_t;

/* Unwinds, and decides whether the frames must travel with the record: only
 * the first time this thread meets the stack (a direct-mapped cache). */
static inline __attribute__((always_inline)) void take_stack(hl_thread_t *t, stk_t *s, int want) {
    s->hash = 0;
    s->nf = s->nsend = 0;
    if (!want || !hl_cfg.stack_depth) return;
    s->nf = unwind(s->f);
    if (!s->nf) return;
    s->hash = hash_frames(s->f, s->nf);
    uint64_t *slot = &t->hcache[s->hash & (HL_HCACHE_SLOTS - 1)];
    if (*slot != s->hash) {
        *slot = s->hash;
        s->nsend = s->nf;
    }
}

static inline uint64_t fill(hl_rec_t *r, const stk_t *s, unsigned op, uintptr_t addr, uintptr_t old,
                            uint64_t size, uint64_t align) {
    uint64_t now = hl_stamp();
    r->time = now;
    r->addr = addr;
    r->old = old;
    r->size = size;
    r->hash = s->hash;
    r->align = (uint32_t)align;
    r->op = (uint8_t)op;
    r->pad = 0;
    r->nframes = (uint16_t)s->nsend;
    if (s->nsend) memcpy(r + 1, s->f, s->nsend * sizeof(uintptr_t));
    return now;
}

/* The writer thread runs SCHED_IDLE: on a saturated machine it may not run
 * for a while. A producer then writes the overdue block itself, so that a
 * killed program's trace stays at most ~flush_ms behind. */
static inline void flush_if_due(uint64_t now) {
    if (HL_UNLIKELY(now > atomic_load_explicit(&hl_flush_due, memory_order_relaxed)))
        hl_writer_help();
}

/* An allocation that has returned. */
static inline __attribute__((always_inline)) void rec_alloc(hl_thread_t *t, unsigned kind, void *p,
                                                            uint64_t size, uint64_t align) {
    stk_t s;
    take_stack(t, &s, 1);
    size_t need = sizeof(hl_rec_t) + s.nsend * sizeof(uintptr_t);
    hl_rec_t *r = ring_reserve(t, need);
    if (!r) return;
    r->seq = r->seq1 = claim_seq(t);
    uint64_t now = fill(r, &s, kind, (uintptr_t)p, 0, size, align);
    ring_publish(t, need);
    flush_if_due(now);
}

/* A free that is about to happen. */
static inline __attribute__((always_inline)) void rec_free(hl_thread_t *t, void *p) {
    stk_t s;
    take_stack(t, &s, hl_cfg.free_stacks);
    size_t need = sizeof(hl_rec_t) + s.nsend * sizeof(uintptr_t);
    hl_rec_t *r = ring_reserve(t, need);
    if (!r) return;
    r->seq = r->seq1 = claim_seq(t);
    uint64_t now = fill(r, &s, HL_FREE, (uintptr_t)p, 0, 0, 0);
    ring_publish(t, need);
    flush_if_due(now);
}

/* realloc(old, size), with `fail` for a reallocarray overflow. */
static inline __attribute__((always_inline)) void *rec_realloc(hl_thread_t *t, void *old,
                                                               size_t size, int fail) {
    if (!old) {
        void *p = fail ? (errno = ENOMEM, NULL) : hl_real.realloc(NULL, size);
        int e = errno;
        rec_alloc(t, HL_REALLOC, p, fail ? UINT64_MAX : size, 0);
        errno = e;
        return p;
    }
    stk_t s;
    take_stack(t, &s, 1);
    size_t need = sizeof(hl_rec_t) + s.nsend * sizeof(uintptr_t);
    hl_rec_t *r = ring_reserve(t, need);
    if (!r) return fail ? (errno = ENOMEM, NULL) : hl_real.realloc(old, size);
    uint64_t s1 = claim_seq(t);
    void *p = fail ? (errno = ENOMEM, NULL) : hl_real.realloc(old, size);
    int e = errno;
    /* pending stays s1 until the record is out: the writer waits for it */
    uint64_t s2 = atomic_fetch_add_explicit(&hl_seq, 1, memory_order_seq_cst);
    r->seq = s2;
    r->seq1 = s1;
    uint64_t now =
        fill(r, &s, HL_REALLOC, (uintptr_t)p, (uintptr_t)old, fail ? UINT64_MAX : size, 0);
    ring_publish(t, need);
    flush_if_due(now);
    errno = e;
    return p;
}

/* A failed allocation: errno must reach the caller as the real call set it. */
static __attribute__((noinline)) void *rec_failed(hl_thread_t *t, unsigned kind, uint64_t size) {
    int e = errno;
    rec_alloc(t, kind, NULL, size, 0);
    t_busy = 0;
    errno = e;
    return NULL;
}

/* ---------------------------------------------------------------- thread states */

/* The slow path's way in: resolves, starts the agent, makes this thread's
 * state. Called with t_busy raised. NULL when this call is not recorded. */
static hl_thread_t *enter(void) {
    if (!resolved()) hl_hooks_resolve();
    if (!hl_agent_ready()) return NULL;
    if (!t_self) t_self = hl_thread_create(1);
    return t_self;
}

#define HOOK_PROLOGUE(slow_call)                                                                   \
    hl_thread_t *t = t_self;                                                                       \
    if (HL_UNLIKELY(!t || t_busy || atomic_load_explicit(&hl_off, memory_order_relaxed)))          \
        return slow_call;                                                                          \
    t_busy = 1

/* ---------------------------------------------------------------- the malloc API */

static void *malloc_slow(size_t n);
static void free_slow(void *p);

HL_EXPORT void *malloc(size_t n) {
    HOOK_PROLOGUE(malloc_slow(n));
    void *p = hl_real.malloc(n);
    if (HL_UNLIKELY(!p)) return rec_failed(t, HL_MALLOC, n);
    rec_alloc(t, HL_MALLOC, p, n, 0);
    t_busy = 0;
    return p;
}

static void *malloc_slow(size_t n) {
    if (t_busy) {
        atomic_fetch_add_explicit(&hl_unrecorded, 1, memory_order_relaxed);
        return resolved() ? hl_real.malloc(n) : boot_alloc(n, 16);
    }
    t_busy = 1;
    hl_thread_t *t = enter();
    void *p = hl_real.malloc(n);
    int e = errno;
    if (t) rec_alloc(t, HL_MALLOC, p, n, 0);
    t_busy = 0;
    errno = e;
    return p;
}

HL_EXPORT void free(void *p) {
    if (!p) return;
    if (HL_UNLIKELY(is_boot(p))) return;
    HOOK_PROLOGUE(free_slow(p));
    rec_free(t, p);
    hl_real.free(p);
    t_busy = 0;
}

static void free_slow(void *p) {
    if (t_busy) {
        atomic_fetch_add_explicit(&hl_unrecorded, 1, memory_order_relaxed);
        if (resolved()) hl_real.free(p);
        return;
    }
    t_busy = 1;
    hl_thread_t *t = enter();
    if (t) rec_free(t, p);
    hl_real.free(p);
    t_busy = 0;
}

HL_EXPORT void *calloc(size_t n, size_t size) {
    uint64_t total;
    int over = __builtin_mul_overflow((uint64_t)n, (uint64_t)size, &total);
    hl_thread_t *t = t_self;
    if (HL_UNLIKELY(!t || t_busy || atomic_load_explicit(&hl_off, memory_order_relaxed))) {
        if (t_busy) {
            atomic_fetch_add_explicit(&hl_unrecorded, 1, memory_order_relaxed);
            if (!resolved()) {
                if (over) return errno = ENOMEM, NULL;
                return boot_alloc(total, 16);
            }
            return hl_real.calloc(n, size);
        }
        t_busy = 1;
        t = enter();
        void *p = hl_real.calloc(n, size);
        int e = errno;
        if (t) rec_alloc(t, HL_CALLOC, p, over ? UINT64_MAX : total, 0);
        t_busy = 0;
        errno = e;
        return p;
    }
    t_busy = 1;
    void *p = hl_real.calloc(n, size);
    if (HL_UNLIKELY(!p)) return rec_failed(t, HL_CALLOC, over ? UINT64_MAX : total);
    rec_alloc(t, HL_CALLOC, p, over ? UINT64_MAX : total, 0);
    t_busy = 0;
    return p;
}

static inline __attribute__((always_inline)) void *realloc_any(void *old, size_t size, int fail) {
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
    if (HL_UNLIKELY(!t || t_busy || atomic_load_explicit(&hl_off, memory_order_relaxed))) {
        if (t_busy) {
            atomic_fetch_add_explicit(&hl_unrecorded, 1, memory_order_relaxed);
            if (fail) return errno = ENOMEM, NULL;
            if (!resolved()) {
                void *p = boot_alloc(size, 16);
                if (p && old) memcpy(p, old, boot_size(old) < size ? boot_size(old) : size);
                return p;
            }
            return hl_real.realloc(old, size);
        }
        t_busy = 1;
        t = enter();
        void *p;
        if (t)
            p = rec_realloc(t, old, size, fail);
        else
            p = fail ? (errno = ENOMEM, NULL) : hl_real.realloc(old, size);
        t_busy = 0;
        return p;
    }
    t_busy = 1;
    void *p = rec_realloc(t, old, size, fail);
    t_busy = 0;
    return p;
}

HL_EXPORT void *realloc(void *old, size_t size) {
    return realloc_any(old, size, 0);
}

HL_EXPORT void *reallocarray(void *old, size_t n, size_t size) {
    size_t total;
    int over = __builtin_mul_overflow(n, size, &total);
    return realloc_any(old, over ? SIZE_MAX : total, over);
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
                                                               size_t size) {
    static const unsigned kinds[4] = {HL_MEMALIGN, HL_ALIGNED_ALLOC, HL_VALLOC, HL_PVALLOC};
    static size_t page;
    if (k == AL_VALLOC || k == AL_PVALLOC) {
        if (!page) page = (size_t)sysconf(_SC_PAGESIZE);
        align = page;
    }
    hl_thread_t *t = t_self;
    if (HL_UNLIKELY(!t || t_busy || atomic_load_explicit(&hl_off, memory_order_relaxed))) {
        if (t_busy) {
            atomic_fetch_add_explicit(&hl_unrecorded, 1, memory_order_relaxed);
            return resolved() ? do_aligned(k, align, size) : boot_alloc(size, align);
        }
        t_busy = 1;
        t = enter();
    } else {
        t_busy = 1;
    }
    void *p = do_aligned(k, align, size);
    if (t) {
        int e = errno;
        rec_alloc(t, kinds[k], p, size, align);
        errno = e;
    }
    t_busy = 0;
    return p;
}

HL_EXPORT void *memalign(size_t align, size_t size) {
    return aligned_any(AL_MEMALIGN, align, size);
}
HL_EXPORT void *aligned_alloc(size_t align, size_t size) {
    return aligned_any(AL_ALIGNED, align, size);
}
HL_EXPORT void *valloc(size_t size) {
    return aligned_any(AL_VALLOC, 0, size);
}
HL_EXPORT void *pvalloc(size_t size) {
    return aligned_any(AL_PVALLOC, 0, size);
}

HL_EXPORT int posix_memalign(void **out, size_t align, size_t size) {
    hl_thread_t *t = t_self;
    if (HL_UNLIKELY(!t || t_busy || atomic_load_explicit(&hl_off, memory_order_relaxed))) {
        if (t_busy) {
            atomic_fetch_add_explicit(&hl_unrecorded, 1, memory_order_relaxed);
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
        t_busy = 1;
    }
    void *p = NULL;
    int rc = hl_real.posix_memalign(&p, align, size);
    if (rc == 0) *out = p;
    if (t) rec_alloc(t, HL_POSIX_MEMALIGN, rc == 0 ? p : NULL, size, align);
    t_busy = 0;
    return rc;
}

HL_EXPORT size_t malloc_usable_size(void *p) {
    if (!p) return 0;
    if (is_boot(p)) return boot_size(p);
    if (!resolved()) hl_hooks_resolve();
    return hl_real.malloc_usable_size(p);
}

/* ---------------------------------------------------------------- thread exit */

static pthread_key_t thread_key;
static pthread_mutex_t free_lock = PTHREAD_MUTEX_INITIALIZER;
static hl_thread_t *free_states;

/* Runs at thread exit (a pthread key destructor). The state stays this
 * thread's: frees made later in the exit path still go to its ring. The
 * writer recycles it once the thread is gone and the ring is drained. */
static void thread_exit(void *arg) {
    hl_thread_t *t = arg;
    atomic_store_explicit(&t->state, TS_EXITING, memory_order_release);
}

void hl_hooks_init(void) {
    pthread_key_create(&thread_key, thread_exit);
}

void hl_thread_recycle(hl_thread_t *t) {
    pthread_mutex_lock(&free_lock);
    atomic_store(&t->state, TS_FREE);
    t->free_next = free_states;
    free_states = t;
    pthread_mutex_unlock(&free_lock);
}

void hl_hooks_fork_prepare(void) {
    pthread_mutex_lock(&free_lock);
}
void hl_hooks_fork_parent(void) {
    pthread_mutex_unlock(&free_lock);
}
void hl_hooks_fork_child(void) {
    pthread_mutex_init(&free_lock, NULL);
}

hl_thread_t *hl_thread_create(int start_writer) {
    pthread_mutex_lock(&free_lock);
    hl_thread_t *t = free_states;
    if (t) free_states = t->free_next;
    pthread_mutex_unlock(&free_lock);
    if (!t) {
        size_t ring = hl_cfg.ring_bytes;
        size_t hdr = (sizeof(hl_thread_t) + 4095) / 4096 * 4096;
        size_t hc = HL_HCACHE_SLOTS * sizeof(uint64_t);
        uint8_t *m = hl_os_alloc(hdr + hc + ring);
        if (!m) return NULL;
        t = (hl_thread_t *)m;
        t->map_bytes = hdr + hc + ring;
        t->hcache = (uint64_t *)(m + hdr);
        t->ring = m + hdr + hc;
        t->mask = ring - 1;
        t->trace_index = -1;
        atomic_store(&t->state, TS_ACTIVE);
        /* publish in the registry (the writer walks it without a lock) */
        hl_thread_t *head = atomic_load(&hl_threads);
        do
            t->next = head;
        while (!atomic_compare_exchange_weak(&hl_threads, &head, t));
    } else {
        /* drained by the writer; positions carry on where they were */
        memset(t->hcache, 0, HL_HCACHE_SLOTS * sizeof(uint64_t));
        t->trace_index = -1;
        atomic_store(&t->state, TS_ACTIVE);
    }
    t->tid = hl_os_gettid();
    hl_os_thread_name(t->tid, t->name, sizeof t->name);
    pthread_setspecific(thread_key, t);
    if (start_writer) hl_writer_ensure_running();
    return t;
}

hl_thread_t *hl_thread_adopt(void) {
    if (!t_self) t_self = hl_thread_create(0);
    return t_self;
}
