/*
 * exec.c: the executors, which run a chunk of decoded ops against whatever
 * malloc the process has loaded.  Only these run inside the timed region.
 *
 * The lean loop (plain mode, no hints) is direct-threaded: each handler ends
 * by loading the next op and jumping through a 256-entry table indexed by
 * the op byte, so a malloc costs the harness a load, a shift, a call, a
 * store and the dispatch, and a free a load, a call and the dispatch (about
 * 8 instructions per event; bench/compare.sh measures it).  Op bytes other
 * than the plain kinds (FAILED, OLD_NULL, realloc_free, the memalign family)
 * go to `one`, the general path, one op at a time.
 *
 * The general loop serves touch, check and site-hint modes.  It calls the
 * allocator through one noinline function per entry point (rp_call_malloc,
 * rp_call_free, ...), so that callgrind's inclusive cost of each function's
 * callees is exactly the allocator's cost of that kind of call: heaplab
 * compare reads instructions per malloc and per free from there.
 *
 * Semantics of the replay (docs/replay.md says it for users):
 *   - malloc, calloc(1, n), realloc, memalign, posix_memalign, aligned_alloc,
 *     valloc and pvalloc are called as recorded, free as free, and
 *     realloc_free as realloc(p, 0); if that returns a block, it is freed.
 *     An entry point of the memalign family that the loaded malloc lacks is
 *     emulated with its memalign (rp_emulated; the report says which).
 *   - A FAILED allocation is replayed as the same call; if it succeeds now
 *     the block is freed at once (the program never had it).  A FAILED
 *     realloc is skipped: replaying it could move or shrink an object that
 *     the trace says stayed as it was.
 *   - A call that succeeded when recorded but returns NULL now leaves its
 *     object NULL (later frees of it are free(NULL)); it is counted.
 */
#define _GNU_SOURCE
#include "rp.h"

#include <malloc.h>
#include <stdlib.h>
#include <string.h>

volatile uint64_t rp_current_event;

#define NOINLINE __attribute__((noinline, noclone)) __attribute__((visibility("default")))
/* An empty asm after the call keeps it from becoming a tail jump, so that
 * callgrind sees rp_call_X call the allocator. */
#define AFTER_CALL() __asm__ volatile("" ::: "memory")

NOINLINE void *rp_call_malloc(size_t n) {
    void *p = malloc(n);
    AFTER_CALL();
    return p;
}
NOINLINE void *rp_call_calloc(size_t a, size_t n) {
    void *p = calloc(a, n);
    AFTER_CALL();
    return p;
}
NOINLINE void *rp_call_realloc(void *q, size_t n) {
    void *p = realloc(q, n);
    AFTER_CALL();
    return p;
}
NOINLINE void *rp_call_realloc_free(void *q) {
    void *p = realloc(q, 0);
    AFTER_CALL();
    return p;
}
/* The memalign family: each wrapper calls the allocator's own entry point,
 * or, where the allocator lacks it (rp_emulated, rp_resolve_entries below),
 * emulates it here with the allocator's memalign or aligned_alloc, so that
 * the counters still see one call of that kind, inclusive of what it costs
 * the allocator, and the block comes from the allocator's heap. */
unsigned rp_emulated;
static void *(*aligned_base)(size_t, size_t); /* memalign, or aligned_alloc */
static int base_rounds; /* aligned_base is aligned_alloc: sizes go up to a multiple */
static size_t page_size = 4096;
#define EMULATED(bit) __builtin_expect(!!(rp_emulated & (bit)), 0)

static inline void *emulate_aligned(size_t a, size_t n) {
    if (base_rounds && a) {
        size_t r = (n + a - 1) / a * a;
        if (r < n) return NULL; /* overflow: as the real call would fail */
        n = r;
    }
    return aligned_base(a, n);
}
NOINLINE void *rp_call_memalign(size_t a, size_t n) {
    void *p = EMULATED(RP_EMU_MEMALIGN) ? emulate_aligned(a, n) : memalign(a, n);
    AFTER_CALL();
    return p;
}
NOINLINE void *rp_call_posix_memalign(size_t a, size_t n) {
    void *p = NULL;
    if (EMULATED(RP_EMU_POSIX_MEMALIGN)) {
        /* posix_memalign's EINVAL: a power of two, a multiple of sizeof(void *) */
        if (a >= sizeof(void *) && !(a & (a - 1))) p = emulate_aligned(a, n);
    } else if (posix_memalign(&p, a, n) != 0) {
        p = NULL;
    }
    AFTER_CALL();
    return p;
}
NOINLINE void *rp_call_aligned_alloc(size_t a, size_t n) {
    void *p = EMULATED(RP_EMU_ALIGNED_ALLOC) ? emulate_aligned(a, n)
                                                             : aligned_alloc(a, n);
    AFTER_CALL();
    return p;
}
NOINLINE void *rp_call_valloc(size_t n) {
    void *p = EMULATED(RP_EMU_VALLOC) ? emulate_aligned(page_size, n) : valloc(n);
    AFTER_CALL();
    return p;
}
NOINLINE void *rp_call_pvalloc(size_t n) {
    void *p;
    if (EMULATED(RP_EMU_PVALLOC)) {
        /* glibc's pvalloc: the size rounded up to whole pages, at least one */
        size_t r = n ? (n + page_size - 1) & ~(page_size - 1) : page_size;
        p = r >= n ? emulate_aligned(page_size, r) : NULL;
    } else {
        p = pvalloc(n);
    }
    AFTER_CALL();
    return p;
}

static const struct {
    const char *name;
    unsigned bit;
} family[] = {
    {"memalign", RP_EMU_MEMALIGN},
    {"posix_memalign", RP_EMU_POSIX_MEMALIGN},
    {"aligned_alloc", RP_EMU_ALIGNED_ALLOC},
    {"valloc", RP_EMU_VALLOC},
    {"pvalloc", RP_EMU_PVALLOC},
};

int rp_resolve_entries(void) {
    page_size = rp_os_page_size();
    rp_emulated = 0;
    const void *m = rp_os_definer("malloc");
    if (!m) return 0;
    unsigned lack = 0;
    for (size_t i = 0; i < sizeof family / sizeof family[0]; i++)
        if (rp_os_definer(family[i].name) != m) lack |= family[i].bit;
    if (!lack) return 0;
    if (!(lack & RP_EMU_MEMALIGN)) {
        aligned_base = memalign; /* binds to the allocator's: it defines it */
        base_rounds = 0;
    } else if (!(lack & RP_EMU_ALIGNED_ALLOC)) {
        aligned_base = aligned_alloc;
        base_rounds = 1;
    } else {
        return -1; /* nothing of its own to emulate with */
    }
    rp_emulated = lack;
    return 0;
}

void rp_emulated_report(rp_buf_t *out, int *first) {
    rp_key(out, first, "emulated");
    rp_putc(out, '[');
    int n = 0;
    for (size_t i = 0; i < sizeof family / sizeof family[0]; i++) {
        if (!(rp_emulated & family[i].bit)) continue;
        if (n++) rp_putc(out, ',');
        rp_put_jstr(out, family[i].name);
    }
    rp_putc(out, ']');
}
NOINLINE void rp_call_free(void *p) {
    free(p);
    AFTER_CALL();
}

/* The calls every path makes: the wrappers above, or (--count perf) the
 * counting wrappers of count.c. */
const rp_api_t rp_api_wrappers = {
    .fn = {
        [RP_W_MALLOC] = (void (*)(void))rp_call_malloc,
        [RP_W_CALLOC] = (void (*)(void))rp_call_calloc,
        [RP_W_MEMALIGN] = (void (*)(void))rp_call_memalign,
        [RP_W_POSIX_MEMALIGN] = (void (*)(void))rp_call_posix_memalign,
        [RP_W_ALIGNED_ALLOC] = (void (*)(void))rp_call_aligned_alloc,
        [RP_W_VALLOC] = (void (*)(void))rp_call_valloc,
        [RP_W_PVALLOC] = (void (*)(void))rp_call_pvalloc,
        [RP_W_FREE] = (void (*)(void))rp_call_free,
        [RP_W_REALLOC_FREE] = (void (*)(void))rp_call_realloc_free,
        [RP_W_REALLOC] = (void (*)(void))rp_call_realloc,
    }};
static const rp_api_t *api = &rp_api_wrappers;

#define CALL(w, type) ((type)api->fn[w])
typedef void *(*f_size_t)(size_t);
typedef void *(*f_size2_t)(size_t, size_t);
typedef void *(*f_ptr_size_t)(void *, size_t);
typedef void *(*f_ptr_t)(void *);
typedef void (*f_free_t)(void *);

/* ---------------------------------------------------------------- problem reports */

static const char *kname(unsigned k) {
    const char *n = hl_kind_name(k);
    return n ? n : "?";
}

/* "event N (KIND of SIZE bytes, object ID)" or "event N (KIND of object ID)". */
static void event_head(rp_buf_t *b, rp_ctx_t *ctx, uint64_t ev, unsigned kind, uint64_t size,
                       uint64_t id, int with_size) {
    (void)ctx;
    rp_puts(b, "event ");
    rp_putu(b, ev);
    rp_puts(b, " (");
    rp_puts(b, kname(kind));
    if (with_size) {
        rp_puts(b, " of ");
        rp_putu(b, size);
        rp_puts(b, " bytes, object ");
    } else {
        rp_puts(b, " of object ");
    }
    rp_putu(b, id);
    rp_puts(b, "): ");
}

static void report(rp_ctx_t *ctx, rp_buf_t *b) {
    rp_putc(b, 0);
    rp_problem(ctx->check, b->p);
    b->len = 0;
}

static rp_buf_t *scratch(void) {
    static rp_buf_t b;
    if (!b.p) rp_buf_init(&b, 4096);
    b.len = 0;
    return &b;
}

/* Check that `id`'s payload still holds its pattern; `what` says when. */
static void verify_payload(rp_ctx_t *ctx, uint64_t ev, unsigned kind, uint64_t id) {
    rp_check_t *c = ctx->check;
    void *p = ctx->obj[id];
    if (!p) return;
    uint64_t size = c->size[id];
    uint64_t at = rp_verify(p, 0, size, id);
    if (at == size) return;
    rp_buf_t *b = scratch();
    if (ev == UINT64_MAX) {
        rp_puts(b, "end of trace: live object ");
        rp_putu(b, id);
        rp_puts(b, ": ");
    } else {
        event_head(b, ctx, ev, kind, 0, id, 0);
    }
    rp_puts(b, "payload byte ");
    rp_putu(b, at);
    rp_puts(b, " of ");
    rp_putu(b, size);
    rp_puts(b, " at ");
    rp_putx(b, (uintptr_t)p);
    rp_puts(b, " is ");
    rp_putx(b, ((const unsigned char *)p)[at]);
    rp_puts(b, ", expected ");
    rp_putx(b, rp_pattern_byte(id, at));
    rp_puts(b, " (written when the object was created at event ");
    rp_putu(b, c->born[id]);
    rp_puts(b, "): the allocator damaged a live block");
    report(ctx, b);
}

void rp_check_live_at_end(rp_ctx_t *ctx) {
    rp_check_t *c = ctx->check;
    for (uint64_t id = 0; id < ctx->nid; id++)
        if (c->live[id]) verify_payload(ctx, UINT64_MAX, 0, id);
}

/* ---------------------------------------------------------------- the general path */

static void deliver_hint(rp_ctx_t *ctx, uint64_t i, unsigned kind, uint64_t size, uint64_t align) {
    const rp_sites_t *s = ctx->sites;
    uint32_t stack = ctx->op_stack ? ctx->op_stack[i] : 0;
    heaplab_site_t site = {
        .version = HEAPLAB_SITE_VERSION,
        .struct_size = sizeof(heaplab_site_t),
        .kind = kind,
        .size = size,
        .align = align,
        .stack_id = stack,
    };
    if (stack && stack <= s->nstacks) {
        site.nframes = s->nframes[stack];
        site.frame_keys = s->keys + s->first[stack];
        site.site_key = s->site_key[stack];
    }
    heaplab_site_hint(&site);
    ctx->st.hints++;
}

/* The alignment a block must have: the one asked for, or for plain
 * allocations the largest power of two <= size, at most 16 (a block of n
 * bytes must suit any object of n bytes; jemalloc and tcmalloc give 8-byte
 * blocks 8-byte alignment). */
static uint64_t need_align(unsigned kind, uint64_t size, uint64_t align) {
    if (kind == HL_VALLOC || kind == HL_PVALLOC) return 4096;
    if (hl_kind_has_align(kind) && align) return align;
    uint64_t a = 16;
    while (a > 1 && a > size)
        a >>= 1;
    return a;
}

/* Threaded replay (threads.c) in touch and check mode: the bookkeeping of
 * created() and released() (live bytes, the treap, problem reports) is shared
 * by the replay threads and runs under this lock; the allocator calls do not.
 * Plain mode never takes it. */
static int book_mutex;

static void book_enter(rp_ctx_t *ctx) {
    if (!ctx->locked) return;
    for (unsigned spins = 0; __atomic_exchange_n(&book_mutex, 1, __ATOMIC_ACQUIRE); spins++)
        rp_relax(spins);
}

static void book_leave(rp_ctx_t *ctx) {
    if (ctx->locked) __atomic_store_n(&book_mutex, 0, __ATOMIC_RELEASE);
}

/* Check mode, threaded: object `id` must exist (its creation has run, on
 * whatever thread) before it is released.  0, reported, when it does not. */
static int exists(rp_ctx_t *ctx, uint64_t ev, unsigned kind, uint64_t id) {
    if (ctx->mode != RP_CHECK || !ctx->ready || __atomic_load_n(&ctx->ready[id], __ATOMIC_ACQUIRE))
        return 1;
    book_enter(ctx);
    rp_buf_t *b = scratch();
    event_head(b, ctx, ev, kind, 0, id, 0);
    rp_puts(b, "the object does not exist yet: its creation (on another replay thread) has not run; "
               "the replay broke the trace's order");
    report(ctx, b);
    book_leave(ctx);
    return 0;
}

/* The object `nid` was created at p (size bytes; the first `kept` bytes came
 * from a realloc's old block). */
static void created(rp_ctx_t *ctx, uint64_t ev, unsigned kind, void *p, uint64_t size,
                    uint64_t align, uint64_t kept) {
    rp_stats_t *S = ctx->book ? ctx->book : &ctx->st;
    uint64_t id = ctx->nid++;
    ctx->obj[id] = p;
    if (!p) { /* plain mode counts these after each chunk, lean loop included */
        if (ctx->mode != RP_PLAIN) S->unexpected_null++;
        if (ctx->mode == RP_CHECK) {
            rp_buf_t *b = scratch();
            event_head(b, ctx, ev, kind, size, id, 1);
            rp_puts(b, "returned NULL, but the call succeeded when the trace was recorded");
            report(ctx, b);
        }
        return;
    }
    if (ctx->mode == RP_PLAIN) return;
    ctx->size[id] = size;
    S->live_bytes += size;
    if (ctx->mode == RP_TOUCH) {
        uint64_t u = malloc_usable_size(p);
        ctx->usable[id] = u;
        S->live_usable += u;
        if (S->live_usable > S->peak_live_usable)
            S->peak_live_usable = S->live_usable;
        if (S->live_bytes > S->peak_live_bytes) {
            S->peak_live_bytes = S->live_bytes;
            S->usable_at_peak = S->live_usable;
        }
        if (size > kept) memset((char *)p + kept, 0xa5, size - kept);
        return;
    }
    /* check mode */
    if (S->live_bytes > S->peak_live_bytes) S->peak_live_bytes = S->live_bytes;
    rp_check_t *c = ctx->check;
    c->born[id] = ev;
    uint64_t need = need_align(kind, size, align);
    if ((uintptr_t)p & (need - 1)) {
        S->misaligned++;
        rp_buf_t *b = scratch();
        event_head(b, ctx, ev, kind, size, id, 1);
        rp_puts(b, "block ");
        rp_putx(b, (uintptr_t)p);
        rp_puts(b, " is not aligned to ");
        rp_putu(b, need);
        rp_puts(b, " bytes");
        report(ctx, b);
    }
    if (kind == HL_CALLOC) {
        const unsigned char *q = p;
        for (uint64_t i = 0; i < size; i++)
            if (q[i]) {
                rp_buf_t *b = scratch();
                event_head(b, ctx, ev, kind, size, id, 1);
                rp_puts(b, "calloc's block ");
                rp_putx(b, (uintptr_t)p);
                rp_puts(b, " is not zeroed: byte ");
                rp_putu(b, i);
                rp_puts(b, " is ");
                rp_putx(b, q[i]);
                report(ctx, b);
                break;
            }
    }
    if (id >= RP_NIL) {
        c->live[id] = 2;
    } else {
        uint32_t other = rp_treap_insert(c, ctx->obj, (uint32_t)id);
        if (other != RP_NIL) {
            c->live[id] = 2;
            rp_buf_t *b = scratch();
            event_head(b, ctx, ev, kind, size, id, 1);
            rp_puts(b, "block [");
            rp_putx(b, (uintptr_t)p);
            rp_puts(b, ", +");
            rp_putu(b, size);
            rp_puts(b, ") overlaps live object ");
            rp_putu(b, other);
            rp_puts(b, " [");
            rp_putx(b, (uintptr_t)ctx->obj[other]);
            rp_puts(b, ", +");
            rp_putu(b, c->size[other]);
            rp_puts(b, ") created at event ");
            rp_putu(b, c->born[other]);
            report(ctx, b);
        }
    }
    /* The whole block, the prefix a realloc kept (verified already) included. */
    rp_fill(p, size, id);
}

/* Object `id` is released (free, realloc_free, or the old side of realloc). */
static void released(rp_ctx_t *ctx, uint64_t ev, unsigned kind, uint64_t id) {
    if (ctx->mode == RP_PLAIN) return;
    rp_stats_t *S = ctx->book ? ctx->book : &ctx->st;
    if (!ctx->obj[id]) return; /* its allocation returned NULL: already counted */
    S->live_bytes -= ctx->size[id];
    if (ctx->mode == RP_TOUCH) {
        S->live_usable -= ctx->usable[id];
        return;
    }
    verify_payload(ctx, ev, kind, id);
    rp_treap_remove(ctx->check, ctx->obj, id);
}

static void *call_alloc(unsigned kind, uint64_t size, uint64_t align) {
    switch (kind) {
    case HL_MALLOC:
        return CALL(RP_W_MALLOC, f_size_t)(size);
    case HL_CALLOC:
        return CALL(RP_W_CALLOC, f_size2_t)(1, size);
    case HL_MEMALIGN:
        return CALL(RP_W_MEMALIGN, f_size2_t)(align, size);
    case HL_POSIX_MEMALIGN:
        return CALL(RP_W_POSIX_MEMALIGN, f_size2_t)(align, size);
    case HL_ALIGNED_ALLOC:
        return CALL(RP_W_ALIGNED_ALLOC, f_size2_t)(align, size);
    case HL_VALLOC:
        return CALL(RP_W_VALLOC, f_size_t)(size);
    case HL_PVALLOC:
        return CALL(RP_W_PVALLOC, f_size_t)(size);
    default:
        return NULL;
    }
}

/* One op of any kind; i is its index in the chunk. */
static void one(rp_ctx_t *ctx, const rp_op_t *op, uint64_t i) {
    uint8_t b = rp_op_byte(op);
    unsigned kind = b & HL_OP_KIND_MASK;
    uint64_t size = rp_op_size(op), ev = ctx->event + i;
    rp_current_event = ev;
    switch (kind) {
    case HL_FREE:
        if (!exists(ctx, ev, kind, op->x)) return;
        book_enter(ctx);
        released(ctx, ev, kind, op->x);
        book_leave(ctx);
        CALL(RP_W_FREE, f_free_t)(ctx->obj[op->x]);
        return;
    case HL_REALLOC_FREE: {
        if (!exists(ctx, ev, kind, op->x)) return;
        book_enter(ctx);
        released(ctx, ev, kind, op->x);
        book_leave(ctx);
        void *q = CALL(RP_W_REALLOC_FREE, f_ptr_t)(ctx->obj[op->x]);
        if (q) {
            ctx->st.realloc0_block++;
            CALL(RP_W_FREE, f_free_t)(q);
        }
        return;
    }
    case HL_REALLOC: {
        if (b & HL_OP_FAILED) {
            ctx->st.failed_realloc_skip++;
            return;
        }
        int has_old = !(b & HL_OP_OLD_NULL);
        if (has_old && !exists(ctx, ev, kind, op->x)) return;
        void *p = has_old ? ctx->obj[op->x] : NULL;
        book_enter(ctx);
        uint64_t old_size = has_old && ctx->mode != RP_PLAIN && p ? ctx->size[op->x] : 0;
        if (has_old) released(ctx, ev, kind, op->x);
        book_leave(ctx);
        if (ctx->hints) deliver_hint(ctx, i, kind, size, 0);
        void *q = CALL(RP_W_REALLOC, f_ptr_size_t)(p, size);
        uint64_t kept = old_size < size ? old_size : size;
        book_enter(ctx);
        if (q && kept && ctx->mode == RP_CHECK) {
            uint64_t at = rp_verify(q, 0, kept, op->x);
            if (at < kept) {
                rp_buf_t *m = scratch();
                event_head(m, ctx, ev, kind, size, ctx->nid, 1);
                rp_puts(m, "realloc of object ");
                rp_putu(m, op->x);
                rp_puts(m, " lost its payload: byte ");
                rp_putu(m, at);
                rp_puts(m, " of the ");
                rp_putu(m, kept);
                rp_puts(m, " bytes it must keep is ");
                rp_putx(m, ((unsigned char *)q)[at]);
                rp_puts(m, ", expected ");
                rp_putx(m, rp_pattern_byte(op->x, at));
                report(ctx, m);
            }
        }
        if (!q && size == 0 && has_old) { /* realloc(p, 0) freed p, as glibc's does */
            ctx->obj[ctx->nid++] = NULL;
            book_leave(ctx);
            return;
        }
        created(ctx, ev, kind, q, size, 0, kept);
        book_leave(ctx);
        return;
    }
    default: {
        if (kind > HL_PVALLOC) return; /* cannot happen: the reader rejects reserved kinds */
        uint64_t align = hl_kind_has_align(kind) ? op->x : 0;
        if (ctx->hints && !(b & HL_OP_FAILED)) deliver_hint(ctx, i, kind, size, align);
        void *p = call_alloc(kind, size, align);
        if (b & HL_OP_FAILED) {
            ctx->st.failed_replayed++;
            if (p) {
                ctx->st.failed_now_succeed++;
                CALL(RP_W_FREE, f_free_t)(p);
            }
            return;
        }
        book_enter(ctx);
        created(ctx, ev, kind, p, size, align, 0);
        book_leave(ctx);
        return;
    }
    }
}

void rp_exec_one(rp_ctx_t *ctx, const rp_op_t *op) {
    one(ctx, op, 0);
}

void rp_exec_general(const rp_op_t *op, rp_ctx_t *ctx) {
    for (uint64_t i = 0; rp_op_byte(op) != RP_OP_END; i++, op++)
        one(ctx, op, i);
}

/* An op the lean loop does not handle inline: through `one`, the general
 * path.  Returns the new slot pointer (obj + next id). */
__attribute__((noinline, visibility("hidden"))) void **rp_lean_rare(const rp_op_t *op, void **slot,
                                                                    rp_ctx_t *ctx) {
    ctx->nid = (uint64_t)(slot - ctx->obj);
    one(ctx, op, (uint64_t)(op - ctx->chunk));
    return ctx->obj + ctx->nid;
}

/* The lean loop's four entry points: the allocator's own, or through the
 * rp_call_* functions (--per-call), one noinline function per kind, which
 * callgrind reports one by one. */
static const rp_calls_t direct = {malloc, calloc, realloc, free};
static rp_calls_t wrapped = {rp_call_malloc, rp_call_calloc, rp_call_realloc, rp_call_free};

const rp_calls_t *rp_lean_calls(int per_call) {
    return per_call ? &wrapped : &direct;
}

void rp_use_api(const rp_api_t *a) {
    api = a;
    wrapped.malloc = CALL(RP_W_MALLOC, f_size_t);
    wrapped.calloc = CALL(RP_W_CALLOC, f_size2_t);
    wrapped.realloc = CALL(RP_W_REALLOC, f_ptr_size_t);
    wrapped.free = CALL(RP_W_FREE, f_free_t);
}

#if defined(__x86_64__)
/* lean_x86_64.S: the same loop as below, by hand (9 instructions per malloc
 * and 7 per free, where gcc's code for the C spends 12 and 9). */
void **rp_lean_x86_64(const rp_op_t *op, void **obj, void **slot, rp_ctx_t *ctx,
                      const rp_calls_t *calls);

uint64_t rp_exec_lean(const rp_op_t *op, rp_ctx_t *ctx) {
    ctx->chunk = op;
    const rp_calls_t *calls = ctx->per_call ? &wrapped : &direct;
    return (uint64_t)(rp_lean_x86_64(op, ctx->obj, ctx->obj + ctx->nid, ctx, calls) - ctx->obj);
}
#else
uint64_t rp_exec_lean(const rp_op_t *op, rp_ctx_t *ctx) {
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Woverride-init"
    static const void *const T[256] = {
        [0 ... 255] = &&rare,       [HL_MALLOC] = &&l_malloc, [HL_CALLOC] = &&l_calloc,
        [HL_REALLOC] = &&l_realloc, [HL_FREE] = &&l_free,     [RP_OP_END] = &&done,
    };
#pragma GCC diagnostic pop
    void **const obj = ctx->obj;
    void **slot = obj + ctx->nid; /* where the next new object's pointer goes */
    const rp_calls_t *calls = ctx->per_call ? &wrapped : &direct;
    uint64_t w = op->w;
    ctx->chunk = op;
#define NEXT()                                                                                     \
    do {                                                                                           \
        w = (++op)->w;                                                                             \
        goto *T[(uint8_t)w];                                                                       \
    } while (0)
    goto *T[(uint8_t)w];
l_malloc:
    *slot++ = calls->malloc(w >> 8);
    NEXT();
l_free:
    calls->free(obj[op->x]);
    NEXT();
l_calloc:
    *slot++ = calls->calloc(1, w >> 8);
    NEXT();
l_realloc:
    *slot++ = calls->realloc(obj[op->x], w >> 8);
    NEXT();
rare:
    slot = rp_lean_rare(op, slot, ctx);
    NEXT();
done:
#undef NEXT
    return (uint64_t)(slot - obj);
}
#endif
