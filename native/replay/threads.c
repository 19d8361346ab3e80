/*
 * threads.c: threaded replay (--threads recorded): each recorded thread's
 * events are replayed by a thread of their own, in that thread's order, and
 * the threads wait for one another only where the trace says they must.
 *
 *   decode (untimed, before the RSS baseline): the reader's merged order is
 *   split into one stream of ops per recorded thread, each mmap'd at its final
 *   size (pass 1 counted the events of every thread):
 *
 *     stream t:  | op | op | op |SIG x| op | op | ... | op |END|
 *                  24 bytes: w = size << 8 | byte, x = old id or alignment,
 *                  id = the object the op creates (ids are the merged order's)
 *
 *     byte = kind | FAILED | OLD_NULL | WAIT | PUB
 *       WAIT  the op releases an object another thread created: wait until
 *             ready[x] is set
 *       PUB   the op creates an object that another thread releases: set
 *             ready[id] once obj[id] holds its pointer (a release store)
 *     EDGE    (a reserved kind) the trace recorded that the next event came
 *             after step N of thread T: x = &T's `done`, id = the op of T's
 *             stream that holds step N; wait until T's `done` reaches it
 *     SIG x   a sentinel (byte RP_OP_END, x < threads): thread x started in
 *             the recording after this point of this stream; set started[x]
 *     END     a sentinel (byte RP_OP_END, x = RP_T_LAST): the stream's end
 *
 *   run: thread 0's stream on the main thread (the program's main thread),
 *   every other stream on a pthread created before the timed region.  All
 *   wait for one start flag; a stream whose thread was started by another
 *   waits for its SIG; then each runs its ops.  The clock stops when the last
 *   stream ends; the threads exit only after that, so that their exit-time
 *   frees (glibc's tcache, the TLS vector) fall outside the measurement.
 *
 * Invariants:
 *   - every wait is for an op earlier in the merged order (an object's
 *     creation comes before its release; a thread's first event comes after
 *     the ops that SIG follows), and the merged order is a total order, so the
 *     waits cannot form a cycle;
 *   - one flag per object (ready) and one per thread (started), each set once
 *     by one writer, and one `done` word per thread (the last op it ran),
 *     written only by its thread: no lock on the hot path; its one
 *     read-modify-write is the `lock or` after an op another thread may wait
 *     for, on a word in the thread's own cache line;
 *   - an EDGE op only ever names an op already decoded when its event was
 *     (the first op of T with at least N steps, else T's last so far);
 *   - a waiting thread spins with a CPU pause, then sleeps on a futex until
 *     the thread it waits for has run 256 ops past the one it needs (or
 *     waits itself, or ends): this machine may have fewer cores than the
 *     trace has threads, and a sleeping thread leaves its core to the others
 *     ("waiting" below; --wait spin: spin, then yield, never sleep).
 *
 * Plain mode runs rp_thread_lean (threaded code, a table of labels by op
 * byte); touch and check modes run every op through exec.c's general path
 * with its bookkeeping under exec.c's lock (not the allocator calls).  In
 * check mode every creation publishes, and a release whose object does not
 * exist yet is reported (exec.c's exists()): with --threads unordered, which
 * runs the streams one at a time, the last thread first, with no waits, that
 * is what a replay that broke the trace's order looks like.
 *
 * The replayer itself still never calls malloc: every table is mmap'd.
 * pthread_create may ask the allocator for the new thread's TLS vector
 * (glibc does, with calloc), before the peak and RSS baselines are taken.
 */
#include "rp.h"

#include <pthread.h>
#include <string.h>

#if __has_include(<valgrind/callgrind.h>)
#include <valgrind/callgrind.h>
#else
#define CALLGRIND_START_INSTRUMENTATION
#define CALLGRIND_STOP_INSTRUMENTATION
#endif

#define RP_T_WAIT 0x40u
#define RP_T_PUB  0x80u
#define RP_T_LAST UINT64_MAX
#define RP_T_EDGE 0x0eu /* a reserved kind (the reader never gives it): wait on a recorded edge */

static void publish(uint8_t *f) {
    __atomic_store_n(f, 1, __ATOMIC_RELEASE);
}

/* ---------------------------------------------------------------- waiting
 *
 * A wait is for one thread, its source S, and for one op of S's, wop: the
 * op that creates the object (born[]), the op an edge names, the SIG that
 * starts the waiting thread.  (go, leave and the end wait for the main
 * thread or any worker, with wop = UINTPTR_MAX: see wake_scan.)  The waiter
 * checks its condition (a flag set, or S's `done` reaching the op), spins
 * RP_SPIN times with a CPU pause, then sleeps on a futex word of its own:
 *
 *   waiter W                                 source S, after an op another may wait for
 *   W.wflag/wword/wtarget/wop = the wait      (ready[id] = 1;)
 *   W.wake = 0; W.wsrc = S                    S.done = op             (release store)
 *   S.sleeper_gen += 1     (seq_cst RMW)      if (S.sleepers |= 0)    (seq_cst RMW: lock or)
 *   S.sleepers += 1        (seq_cst RMW)        if (S.sleeper_gen != S.seen_gen
 *   if (!condition) futex_wait(&W.wake, 0)            || op >= S.next_wake)  scan:
 *   W.wsrc = NULL; S.sleepers -= 1                  seen_gen = sleeper_gen; wake every W
 *   loop until the condition holds                  with wsrc == S, wlate <= op; next_wake =
 *                                                   the least wlate of the others
 *
 * Either S's RMW of sleepers sees W's increment, and then its load of
 * sleeper_gen sees W's registration and the scan sees W's record, or W's
 * check sees S's store: the two RMWs on sleepers are ordered one way or
 * the other, and each side's store comes before its RMW, so no wake-up is
 * lost.  Between registrations, sleepers only
 * leave, which can only raise the least wop: next_wake is never too high.
 * A wake-up that comes early or twice only makes W check again.  S does
 * this after every op another thread may wait for: an op that publishes
 * (PUB), which includes every op an EDGE names (decoding marks it), the
 * SIG and END sentinels.  On the lean path that is a locked or and a jump
 * per such op (two instructions); while someone sleeps on S, two compares more, and the scan
 * only when a registration came or a sleeper's op was reached.  S wakes W
 * RP_WAKE_LAG ops after wop (wlate), not at wop: a producer waking its
 * consumer at every item, on a machine with fewer cores than threads, makes
 * the two take turns item by item (the woken thread preempts, catches up,
 * sleeps again), where the program hands over a batch at a time.  S wakes
 * W at wop itself when S is about to wait (wait_spin) or ends.  With
 * --wait spin a wait never sleeps: it spins, then yields the CPU
 * (rp_relax), as the replayer did before the futex. */

#define RP_SPIN 100u
#ifndef RP_WAKE_LAG
#define RP_WAKE_LAG 256u /* ops a source runs past a sleeper's op before it wakes it */
#endif

static int wait_done_yet(const uint8_t *flag, const uintptr_t *word, uintptr_t target) {
    return flag ? __atomic_load_n(flag, __ATOMIC_ACQUIRE) != 0
                : __atomic_load_n(word, __ATOMIC_ACQUIRE) >= target;
}

/* Wakes the sleepers whose wait has ended.  src, having just run op (a
 * seq_cst store of its `done`): those asleep on src whose wop it reached.
 * src NULL, after a seq_cst store to go, leave or ended: every sleeper
 * whose condition holds. */
__attribute__((noinline, cold)) static void wake_scan(rp_tplan_t *pl, rp_thread_t *src,
                                                      uintptr_t op, int now) {
    uintptr_t next = UINTPTR_MAX;
    if (src) src->seen_gen = __atomic_load_n(&src->sleeper_gen, __ATOMIC_SEQ_CST);
    for (uint32_t t = 0; t < pl->n; t++) {
        rp_thread_t *w = &pl->th[t];
        rp_thread_t *ws = __atomic_load_n(&w->wsrc, __ATOMIC_SEQ_CST);
        if (!ws || (src && ws != src) || __atomic_load_n(&w->wake, __ATOMIC_RELAXED)) continue;
        if (src) {
            uintptr_t wop = __atomic_load_n(now ? &w->wop : &w->wlate, __ATOMIC_RELAXED);
            if (op < wop) {
                if (wop < next) next = wop;
                continue;
            }
        } else if (!wait_done_yet(__atomic_load_n(&w->wflag, __ATOMIC_RELAXED),
                                  __atomic_load_n(&w->wword, __ATOMIC_RELAXED),
                                  __atomic_load_n(&w->wtarget, __ATOMIC_RELAXED))) {
            continue;
        }
        __atomic_store_n(&w->wake, 1, __ATOMIC_RELEASE);
        rp_futex_wake(&w->wake, 1);
    }
    if (src) src->next_wake = next;
}

/* The source's side, after an op another thread may wait for: src's `done`
 * now, then a locked or of 0 on sleepers (a full fence, so that done is
 * visible before sleepers is read; on x86 `lock or` and a jump on its flags),
 * then the scan if it may wake someone. */
__attribute__((noinline, cold)) static void wake_check(rp_thread_t *src, uintptr_t op) {
    if (__atomic_load_n(&src->sleeper_gen, __ATOMIC_SEQ_CST) != src->seen_gen ||
        op >= src->next_wake)
        wake_scan(src->plan, src, op, 0);
}

static inline void done_and_wake(rp_thread_t *src, const void *op) {
    __atomic_store_n(&src->done, (uintptr_t)op, __ATOMIC_RELEASE);
    if (__builtin_expect(__atomic_or_fetch(&src->sleepers, 0, __ATOMIC_SEQ_CST) != 0, 0))
        wake_check(src, (uintptr_t)op);
}

/* The waiting itself, apart from the callers' check so that the replayer's
 * own cost per event (the check) and the time spent waiting for another
 * thread (this function, as long as the scheduler makes it) are counted
 * apart.  me: the waiting thread; src: the one it waits for; wop: src's op
 * that ends the wait. */
__attribute__((noinline, cold)) static void wait_spin(rp_thread_t *me, rp_thread_t *src,
                                                      const uint8_t *flag, const uintptr_t *word,
                                                      uintptr_t target, uintptr_t wop) {
    /* about to wait: first wake those asleep on me whose op I have run */
    if (__atomic_load_n(&me->sleepers, __ATOMIC_SEQ_CST))
        wake_scan(me->plan, me, __atomic_load_n(&me->done, __ATOMIC_RELAXED), 1);
    for (unsigned n = 0; n < RP_SPIN; n++) {
        if (wait_done_yet(flag, word, target)) return;
        rp_relax(0);
    }
    if (me->plan->spin) {
        for (unsigned n = RP_SPIN; !wait_done_yet(flag, word, target); n++)
            rp_relax(n);
        return;
    }
    __atomic_store_n(&me->wflag, flag, __ATOMIC_RELAXED);
    __atomic_store_n(&me->wword, word, __ATOMIC_RELAXED);
    __atomic_store_n(&me->wtarget, target, __ATOMIC_RELAXED);
    __atomic_store_n(&me->wop, wop, __ATOMIC_RELAXED);
    uintptr_t lag = RP_WAKE_LAG * sizeof(rp_top_t);
    __atomic_store_n(&me->wlate, wop > UINTPTR_MAX - lag ? UINTPTR_MAX : wop + lag,
                     __ATOMIC_RELAXED);
    for (;;) {
        __atomic_store_n(&me->wake, 0, __ATOMIC_RELAXED);
        __atomic_store_n(&me->wsrc, src, __ATOMIC_RELEASE);
        __atomic_add_fetch(&src->sleeper_gen, 1, __ATOMIC_SEQ_CST);
        __atomic_add_fetch(&src->sleepers, 1, __ATOMIC_SEQ_CST);
        int ok = wait_done_yet(flag, word, target);
        if (!ok) {
            me->sleeps++;
            rp_futex_wait(&me->wake, 0);
        }
        __atomic_store_n(&me->wsrc, NULL, __ATOMIC_RELAXED);
        __atomic_sub_fetch(&src->sleepers, 1, __ATOMIC_SEQ_CST);
        if (ok || wait_done_yet(flag, word, target)) return;
    }
}

/* Waits until *f is set by src at its op wop; counts the waits that did
 * not find it set. */
__attribute__((noinline)) static void wait_for(rp_thread_t *me, rp_thread_t *src, const uint8_t *f,
                                               uintptr_t wop) {
    if (__builtin_expect(__atomic_load_n(f, __ATOMIC_ACQUIRE), 1)) return;
    me->waits++;
    wait_spin(me, src, f, NULL, 0, wop);
}

/* Waits until the object x another thread creates is there (its ready flag). */
__attribute__((noinline)) static void wait_obj(rp_thread_t *me, uint64_t x) {
    rp_tplan_t *pl = me->plan;
    const rp_top_t *op = pl->born[x];
    uint32_t t = 0;
    while (t + 1 < pl->n && !(op >= pl->s[t].ops && op < pl->s[t].ops + pl->s[t].cap))
        t++;
    wait_for(me, &pl->th[t], &pl->ready[x], (uintptr_t)op);
}

/* Waits until another thread's `done` reaches `target` (a recorded edge). */
__attribute__((noinline)) static void wait_done(const uintptr_t *d, uintptr_t target,
                                                rp_thread_t *th) {
    th->waits++;
    th->edge_waits++;
    rp_thread_t *src = (rp_thread_t *)(void *)((char *)d - offsetof(rp_thread_t, done));
    wait_spin(th, src, NULL, d, target, target);
}

/* ---------------------------------------------------------------- decoding */

void rp_threads_begin(rp_tplan_t *pl, const uint64_t *events_of, const uint64_t *edges_of,
                      uint32_t nthreads, uint64_t ids, int mode) {
    memset(pl, 0, sizeof *pl);
    pl->n = nthreads ? nthreads : 1;
    pl->ids = ids;
    pl->mode = mode;
    pl->s = rp_map(pl->n * sizeof *pl->s);
    pl->th = rp_map(pl->n * sizeof *pl->th);
    for (uint32_t t = 0; t < pl->n; t++) {
        rp_tstream_t *s = &pl->s[t];
        s->events = t < nthreads ? events_of[t] : 0;
        /* its ops, an EDGE op per recorded edge, a SIG per thread it may start, END */
        s->cap = s->events + (t < nthreads ? edges_of[t] : 0) + pl->n + 1;
        s->ops = rp_map(s->cap * sizeof *s->ops);
        s->steps = rp_map(s->cap * 8);
        if (mode != RP_PLAIN) s->ev = rp_map(s->cap * 8);
        s->start_after = t ? 0 : UINT32_MAX; /* thread 0 was not started by anyone */
        for (unsigned k = 0; k < 64; k++)
            s->edge_src[k] = UINT32_MAX;
    }
    /* ids + 1: the last slot takes the results of ops that create no object */
    pl->ready = rp_map(ids + 1);
    pl->started = rp_map(pl->n);
    pl->born = rp_map((ids + 1) * sizeof *pl->born);
}

void rp_threads_thread(rp_tplan_t *pl, uint32_t thread, uint32_t started_by) {
    if (thread < pl->n && thread && started_by < thread) pl->s[thread].start_after = started_by;
}

void rp_threads_event(rp_tplan_t *pl, const hl_event_t *e, uint64_t index) {
    uint32_t t = e->thread < pl->n ? e->thread : 0;
    rp_tstream_t *s = &pl->s[t];
    if (s->len == 0 && t) {
        /* its first event: it starts where its creator's stream is now */
        uint32_t c = s->start_after < pl->n ? s->start_after : 0;
        rp_tstream_t *cs = &pl->s[c];
        if (cs->len && cs->len < cs->cap) {
            cs->ops[cs->len].op.w = RP_OP_END;
            cs->ops[cs->len].op.x = t;
            cs->ops[cs->len].id = pl->ids;
            cs->steps[cs->len] = cs->steps[cs->len - 1];
            s->start_sig = &cs->ops[cs->len];
            cs->len++;
            s->waits_start = 1;
        }
    }
    /* The recorded edges: wait until the op that holds step N of thread T has
     * run.  Only ops already decoded (earlier in the merged order) are waited
     * for, so that no wait can close a cycle. */
    const rp_top_t *covered = NULL; /* the creation op the ready flag waits for */
    uint32_t covered_t = UINT32_MAX;
    if ((hl_kind_is_release(e->kind) || (e->kind == HL_REALLOC && e->has_old)) &&
        e->old < pl->ids && pl->born[e->old]) {
        covered = pl->born[e->old];
        covered_t = e->old_thread;
    }
    for (unsigned k = 0; k < e->n_after && !pl->edges_off; k++) {
        uint32_t src = e->after[k].thread;
        if (src >= pl->n || src == t) continue;
        rp_tstream_t *ss = &pl->s[src];
        if (!ss->len) continue;
        /* the first op of src with at least N steps, else its last op */
        uint64_t lo = 0, hi = ss->len - 1, n = e->after[k].steps;
        while (lo < hi) {
            uint64_t mid = (lo + hi) / 2;
            if (ss->steps[mid] >= n)
                hi = mid;
            else
                lo = mid + 1;
        }
        const rp_top_t *target = &ss->ops[lo];
        if (src == covered_t && target <= covered) continue; /* the ready flag covers it */
        unsigned slot = src % 64;
        if (s->edge_src[slot] == src && s->edge_op[slot] >= target) continue; /* waited already */
        s->edge_src[slot] = src;
        s->edge_op[slot] = target;
        if (s->len >= s->cap) break;
        /* the op waited for wakes its sleepers (a sentinel always does) */
        if (rp_op_byte(&target->op) != RP_OP_END) ((rp_top_t *)target)->op.w |= RP_T_PUB;
        rp_top_t *o = &s->ops[s->len];
        o->op.w = RP_T_EDGE;
        o->op.x = (uintptr_t)&pl->th[src].done;
        o->id = (uintptr_t)target;
        s->steps[s->len] = s->len ? s->steps[s->len - 1] : 0;
        if (s->ev) s->ev[s->len] = index;
        s->len++;
        pl->edges++;
    }
    if (s->len >= s->cap) return; /* cannot happen: pass 1 counted them */
    rp_top_t *o = &s->ops[s->len];
    /* steps: a realloc of a non-NULL pointer and a realloc_free are two */
    s->twostep += e->kind == HL_REALLOC_FREE || (e->kind == HL_REALLOC && e->has_old);
    s->steps[s->len] = e->thread_seq + 1 + s->twostep;
    uint8_t b = e->kind;
    uint64_t x = 0;
    if (e->failed) b |= HL_OP_FAILED;
    int releases = hl_kind_is_release(e->kind) || (e->kind == HL_REALLOC && e->has_old);
    if (releases)
        x = e->old;
    else if (e->kind == HL_REALLOC)
        b |= HL_OP_OLD_NULL;
    else if (hl_kind_has_align(e->kind))
        x = e->align;
    if (releases && x < pl->ids) {
        rp_top_t *maker = pl->born[x];
        /* Another stream made it: wait for it, and have its maker publish. */
        if (maker && (e->old_thread != t || pl->mode == RP_CHECK)) {
            maker->op.w |= RP_T_PUB;
            if (e->old_thread != t) b |= RP_T_WAIT;
        }
    }
    uint64_t size = e->size > RP_SIZE_MAX ? RP_SIZE_MAX : e->size;
    if (hl_kind_is_release(e->kind)) size = 0;
    o->op.w = size << 8 | b;
    o->op.x = x;
    o->id = e->has_id && e->id < pl->ids ? e->id : pl->ids;
    if (e->has_id && e->id < pl->ids) {
        pl->born[e->id] = o;
        if (pl->mode == RP_CHECK) o->op.w |= RP_T_PUB;
    }
    if (s->ev) s->ev[s->len] = index;
    s->len++;
}

void rp_threads_end(rp_tplan_t *pl) {
    pl->active = 0;
    for (uint32_t t = 0; t < pl->n; t++) {
        rp_tstream_t *s = &pl->s[t];
        s->ops[s->len].op.w = RP_OP_END;
        s->ops[s->len].op.x = RP_T_LAST;
        s->ops[s->len].id = pl->ids;
        if (s->events) pl->active++;
    }
    for (uint32_t t = 0; t < pl->n; t++) {
        rp_unmap(pl->s[t].steps, pl->s[t].cap * 8);
        pl->s[t].steps = NULL;
    }
}

/* ---------------------------------------------------------------- the loops */

/* Plain mode: runs ops up to a sentinel; returns it.  The common ops are
 * handled here; everything else (failed calls, the memalign family,
 * realloc(NULL, n), realloc_free) goes through exec.c's general path.
 * Each label has a tail of its own (no shared jumps: -fno-crossjumping in
 * rules.mk keeps gcc from merging them back). */
static const rp_top_t *rp_thread_lean(const rp_top_t *op, rp_thread_t *th) {
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Woverride-init"
    static const void *const T[256] = {
        [0 ... 255] = &&rare,
        [HL_MALLOC] = &&l_malloc,
        [HL_MALLOC | RP_T_PUB] = &&l_malloc_pub,
        [HL_CALLOC] = &&l_calloc,
        [HL_CALLOC | RP_T_PUB] = &&l_calloc_pub,
        [HL_FREE] = &&l_free,
        [HL_FREE | RP_T_WAIT] = &&l_free_wait,
        [HL_FREE | RP_T_PUB] = &&l_free_pub,
        [HL_FREE | RP_T_WAIT | RP_T_PUB] = &&l_free_wait_pub,
        [HL_REALLOC] = &&l_realloc,
        [HL_REALLOC | RP_T_PUB] = &&l_realloc_pub,
        [HL_REALLOC | RP_T_WAIT] = &&l_realloc_wait,
        [HL_REALLOC | RP_T_WAIT | RP_T_PUB] = &&l_realloc_wait_pub,
        [RP_T_EDGE] = &&l_edge,
        [RP_T_EDGE | RP_T_PUB] = &&l_edge_pub,
        [RP_OP_END] = &&l_end,
    };
#pragma GCC diagnostic pop
    void **const obj = th->ctx.obj;
    uint8_t *const ready = th->plan->ready;
    const rp_calls_t *const calls = th->calls;
    uint64_t w = op->op.w, id, x;
    void *p;
    uintptr_t *const done = &th->done;
/* the op is done: say so (a release store, a plain mov on x86), then the next */
#define NEXT()                                                                                     \
    do {                                                                                           \
        __atomic_store_n(done, (uintptr_t)op, __ATOMIC_RELEASE);                                   \
        w = (++op)->op.w;                                                                          \
        goto *T[(uint8_t)w];                                                                       \
    } while (0)
/* the same after an op another thread may wait for: wake its sleepers */
#define NEXT_WAKE()                                                                                \
    do {                                                                                           \
        done_and_wake(th, op);                                                                     \
        w = (++op)->op.w;                                                                          \
        goto *T[(uint8_t)w];                                                                       \
    } while (0)
/* the object's pointer, then its flag: a release store, a plain mov on x86 */
#define PUT_PUB()                                                                                  \
    do {                                                                                           \
        id = op->id;                                                                               \
        obj[id] = p;                                                                               \
        publish(&ready[id]);                                                                       \
    } while (0)
#define WAIT()                                                                                     \
    do {                                                                                           \
        x = op->op.x;                                                                              \
        if (__builtin_expect(!__atomic_load_n(&ready[x], __ATOMIC_ACQUIRE), 0)) wait_obj(th, x);   \
    } while (0)
    goto *T[(uint8_t)w];
l_malloc:
    p = calls->malloc(w >> 8);
    obj[op->id] = p; /* the id read after the call: nothing to keep across it */
    NEXT();
l_malloc_pub:
    p = calls->malloc(w >> 8);
    PUT_PUB();
    NEXT_WAKE();
l_calloc:
    p = calls->calloc(1, w >> 8);
    obj[op->id] = p;
    NEXT();
l_calloc_pub:
    p = calls->calloc(1, w >> 8);
    PUT_PUB();
    NEXT_WAKE();
l_free:
    calls->free(obj[op->op.x]);
    NEXT();
l_free_wait:
    WAIT();
    calls->free(obj[x]);
    NEXT();
l_free_pub:
    calls->free(obj[op->op.x]);
    NEXT_WAKE();
l_free_wait_pub:
    WAIT();
    calls->free(obj[x]);
    NEXT_WAKE();
l_realloc:
    p = calls->realloc(obj[op->op.x], w >> 8);
    obj[op->id] = p;
    NEXT();
l_realloc_wait:
    WAIT();
    p = calls->realloc(obj[x], w >> 8);
    obj[op->id] = p;
    NEXT();
l_realloc_pub:
    p = calls->realloc(obj[op->op.x], w >> 8);
    PUT_PUB();
    NEXT_WAKE();
l_realloc_wait_pub:
    WAIT();
    p = calls->realloc(obj[x], w >> 8);
    PUT_PUB();
    NEXT_WAKE();
l_edge:
    if (__builtin_expect(__atomic_load_n((uintptr_t *)op->op.x, __ATOMIC_ACQUIRE) < op->id, 0))
        wait_done((const uintptr_t *)op->op.x, op->id, th);
    NEXT();
l_edge_pub:
    if (__builtin_expect(__atomic_load_n((uintptr_t *)op->op.x, __ATOMIC_ACQUIRE) < op->id, 0))
        wait_done((const uintptr_t *)op->op.x, op->id, th);
    NEXT_WAKE();
rare:
    if (w & RP_T_WAIT) wait_obj(th, op->op.x);
    th->ctx.nid = op->id;
    rp_exec_one(&th->ctx, &op->op);
    if (w & RP_T_PUB) {
        publish(&ready[op->id]);
        NEXT_WAKE();
    }
    NEXT();
l_end:
#undef NEXT
#undef NEXT_WAKE
#undef PUT_PUB
#undef WAIT
    return op;
}

/* Touch and check modes, and plain mode with --general. */
static const rp_top_t *rp_thread_general(const rp_top_t *op, rp_thread_t *th) {
    uint8_t *const ready = th->plan->ready;
    const uint64_t *ev = th->stream->ev;
    const rp_top_t *first = th->stream->ops;
    for (; rp_op_byte(&op->op) != RP_OP_END; op++) {
        uint64_t w = op->op.w;
        if (((uint8_t)w & ~RP_T_PUB) == RP_T_EDGE) {
            if (!th->plan->unordered &&
                __atomic_load_n((uintptr_t *)op->op.x, __ATOMIC_ACQUIRE) < op->id)
                wait_done((const uintptr_t *)op->op.x, op->id, th);
        } else {
            if ((w & RP_T_WAIT) && !th->plan->unordered) wait_obj(th, op->op.x);
            th->ctx.nid = op->id;
            th->ctx.event = ev ? ev[op - first] : 0;
            rp_op_t o = {w & ~(uint64_t)(RP_T_WAIT | RP_T_PUB), op->op.x};
            rp_exec_one(&th->ctx, &o);
            if (w & RP_T_PUB) publish(&ready[op->id]);
        }
        if (w & RP_T_PUB)
            done_and_wake(th, op);
        else
            __atomic_store_n(&th->done, (uintptr_t)op, __ATOMIC_RELEASE);
    }
    return op;
}

/* One stream, start to END: the SIG sentinels on the way start others. */
static void run_stream(rp_thread_t *th) {
    rp_tplan_t *pl = th->plan;
    if (th->stream->waits_start && !pl->unordered) {
        uint32_t c = th->stream->start_after < pl->n ? th->stream->start_after : 0;
        wait_for(th, &pl->th[c], &pl->started[th->index], (uintptr_t)th->stream->start_sig);
    }
    const rp_top_t *op = th->stream->ops;
    for (;;) {
        op = th->general ? rp_thread_general(op, th) : rp_thread_lean(op, th);
        if (op->op.x == RP_T_LAST) break;
        if (op->op.x < pl->n) publish(&pl->started[op->op.x]);
        done_and_wake(th, op); /* a sentinel may be an EDGE's target too */
        op++;
    }
    done_and_wake(th, (const void *)UINTPTR_MAX); /* every op of it has run */
}

static void *worker(void *arg) {
    rp_thread_t *th = arg;
    rp_tplan_t *pl = th->plan;
    wait_for(th, &pl->th[0], &pl->go, UINTPTR_MAX);
    th->waits = 0;
    th->sleeps = 0;
    if (!pl->unordered) {
        run_stream(th);
    }
    __atomic_add_fetch(&pl->ended, 1, __ATOMIC_SEQ_CST);
    wake_scan(pl, NULL, 0, 1); /* the main thread may sleep on the count */
    /* Stay until the clock has stopped: exiting frees (tcache, TLS) would count. */
    uint64_t waits = th->waits, sleeps = th->sleeps;
    wait_for(th, &pl->th[0], &pl->leave, UINTPTR_MAX);
    th->waits = waits;
    th->sleeps = sleeps;
    return NULL;
}

void rp_threads_prepare(rp_tplan_t *pl, const rp_ctx_t *proto, int general, int unordered,
                        const rp_calls_t *calls, rp_stats_t *book) {
    pl->unordered = unordered;
    pl->tids = rp_map(pl->n * sizeof(pthread_t));
    for (uint32_t t = 0; t < pl->n; t++) {
        rp_thread_t *th = &pl->th[t];
        th->plan = pl;
        th->index = t;
        th->stream = &pl->s[t];
        th->ctx = *proto;
        memset(&th->ctx.st, 0, sizeof th->ctx.st);
        th->ctx.book = proto->mode == RP_PLAIN ? NULL : book;
        th->ctx.locked = proto->mode != RP_PLAIN;
        th->ctx.ready = proto->mode == RP_CHECK ? pl->ready : NULL;
        th->general = general || unordered;
        th->calls = calls;
    }
    /* The other streams' threads, made now: before the baselines. */
    pthread_t *tids = pl->tids;
    for (uint32_t t = 1; t < pl->n; t++) {
        if (!pl->s[t].events) continue;
        if (pthread_create(&tids[t], NULL, worker, &pl->th[t]) != 0) {
            rp_buf_t b;
            rp_buf_init(&b, 256);
            rp_puts(&b, "heaplab-replay: cannot create a replay thread (");
            rp_putu(&b, pl->active);
            rp_puts(&b, " needed); try --threads serial\n");
            rp_flush(&b, 2);
            rp_exit(1);
        }
        pl->made++;
    }
}

uint64_t rp_threads_run(rp_tplan_t *pl) {
    uint32_t made = pl->made;
    rp_thread_t *main_th = &pl->th[0];
    CALLGRIND_START_INSTRUMENTATION;
    uint64_t t0 = rp_now_ns();
    __atomic_store_n(&pl->go, 1, __ATOMIC_SEQ_CST);
    wake_scan(pl, NULL, 0, 1);
    if (pl->unordered) {
        /* One stream at a time, the last thread first, no waits: every
         * cross-thread dependency broken, deterministically. */
        for (uint32_t t = pl->n; t-- > 0;)
            if (pl->s[t].events || t == 0) run_stream(&pl->th[t]);
    } else {
        run_stream(main_th);
    }
    if (__atomic_load_n(&pl->ended, __ATOMIC_ACQUIRE) < made)
        wait_spin(main_th, main_th, NULL, &pl->ended, made, UINTPTR_MAX);
    uint64_t ns = rp_now_ns() - t0;
    CALLGRIND_STOP_INSTRUMENTATION;
    return ns;
}

void rp_threads_finish(rp_tplan_t *pl, rp_ctx_t *ctx) {
    __atomic_store_n(&pl->leave, 1, __ATOMIC_SEQ_CST);
    wake_scan(pl, NULL, 0, 1);
    pthread_t *tids = pl->tids;
    for (uint32_t t = 1; t < pl->n; t++)
        if (pl->s[t].events) pthread_join(tids[t], NULL);
    for (uint32_t t = 0; t < pl->n; t++) {
        const rp_stats_t *s = &pl->th[t].ctx.st;
        ctx->st.failed_replayed += s->failed_replayed;
        ctx->st.failed_now_succeed += s->failed_now_succeed;
        ctx->st.failed_realloc_skip += s->failed_realloc_skip;
        ctx->st.realloc0_block += s->realloc0_block;
        ctx->st.hints += s->hints;
        if (ctx->mode == RP_PLAIN) ctx->st.unexpected_null += s->unexpected_null;
        pl->waits += pl->th[t].waits;
        pl->edge_waits += pl->th[t].edge_waits;
        pl->sleeps += pl->th[t].sleeps;
    }
    if (ctx->mode == RP_PLAIN) /* the lean loop does not count them as it goes */
        for (uint64_t id = 0; id < pl->ids; id++)
            ctx->st.unexpected_null += ctx->obj[id] == NULL;
    ctx->nid = pl->ids;
}
