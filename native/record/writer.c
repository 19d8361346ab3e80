/*
 * writer.c: the threads' chunks into a trace (version 2, per-thread EVENTS
 * streams). It runs under hl_wlock: in the writer thread, in a producer
 * that waits for room (hl_writer_help), or in a thread that ends the trace
 * (exit, exec, a fatal signal, fork).
 *
 *   pass (every 50 us .. 1 ms):  every thread time-stamps its next row
 *      |                         look at every thread's published mark
 *      v
 *   round, when a thread has ~block_events rows waiting (4 bytes a row), or
 *   flush_ms passed, or the trace ends:
 *      THREADS  indices given out since the last round (threads.c)
 *      STACKS   ids given out since (stacks.c), frames -> (module, offset)
 *      EVENTS   per thread: the bytes of rows published since the last
 *               round, as they are (the producer encoded them), from all
 *               the chunks they lie in, one block (up to BLOCK_BYTES), all
 *               with this round's number and clock
 *      chunks the producer has left and that are copied go back to the pool
 *
 * The writer never decodes a row: its cost per event is a copy and zstd.
 * Invariants: a block's rows are everything its thread published between
 * two marks; rounds and each thread's first_event continue without gaps;
 * a definition goes out before the first block that can name it (a thread
 * or stack id reaches a row only after it was registered, and the round
 * reads the registrations after the marks).
 */
#include "agent.h"

#include <errno.h>
#include <sched.h>
#include <string.h>
#include <sys/file.h>
#include <sys/prctl.h>
#include <unistd.h>

/* ---------------------------------------------------------------- state */

_Atomic int hl_off;
_Atomic uint64_t hl_unrecorded;
_Atomic uint64_t hl_lost;
pthread_mutex_t hl_wlock = PTHREAD_MUTEX_INITIALIZER;
pid_t hl_pid;
_Atomic int hl_writer_running;
_Atomic int hl_fatal_sig;
_Atomic int hl_fatal_done;
_Atomic int hl_deferred_sig;

static hl_writer_t *W; /* NULL: no trace open (yet) */
static int W_fd = -1;
static hl_sink_t W_sink;
static char W_path[4200];
static int W_child;    /* a fork child: its trace opens on first need */
static int W_closed;   /* END written for good */
static int W_broken;   /* the trace could not be written */
static pid_t W_parent; /* META parent pid of a fork child */
static int P_fd = -1;  /* the parent's trace, for the INHERITED block */
static uint64_t P_len, P_time;
static uint64_t round_no;
static uint32_t threads_defined, stacks_defined;
static uint64_t last_flush_ns;
static uint64_t waited_done; /* waited_ns of threads recycled */
static uint64_t rows_done;   /* rows of threads recycled */
static hl_clock_t clk = {0, 0, 1ull << 32};
#ifndef HL_BUSY_SLEEP_NS
#define HL_BUSY_SLEEP_NS 200000
#endif
/* Bytes of rows in one round at most (a reader holds a round in memory: a
 * row is 2 bytes at least, so 1M events at most). */
#define ROUND_BYTES (2u << 20)
/* A round is due when a thread has this many bytes of rows waiting: about
 * block_events rows (a row is ~4 bytes without stacks). */
#define THREAD_BYTES ((uint64_t)hl_cfg.block_events * 4)

/* Recording stops: hooks see it in their slow path (hl_threads_poke sends
 * every thread there). */
static void stop(void) {
    atomic_store(&hl_off, 1);
    hl_threads_poke();
}

static void broken(const char *why) {
    if (W_broken) return;
    W_broken = 1;
    stop();
    hl_note("cannot write the trace: ", why, W_path);
}

const char *hl_writer_path(void) {
    return W_path;
}

/* ---------------------------------------------------------------- clock */

/* Ticks to CLOCK_MONOTONIC ns, for the blocks of a round: the line through
 * (hl_tsc0, hl_mono0) and the latest (rdtsc, CLOCK_MONOTONIC) pair, kept
 * relative to the latest pair so the slope's error grows only with the
 * distance from it. */
static void calibrate(void) {
    if (!hl_tsc) {
        clk = (hl_clock_t){0, 0, 1ull << 32};
        return;
    }
    uint64_t t, m;
    hl_clock_pair(&t, &m);
    while (m - hl_mono0 < 1000000) /* a first slope needs ~1 ms of baseline */
        hl_clock_pair(&t, &m);
    if (t <= hl_tsc0) return;
    double per_tick = (double)(m - hl_mono0) / (double)(t - hl_tsc0);
    clk = (hl_clock_t){t, m, (uint64_t)(per_tick * 4294967296.0)};
}

/* ---------------------------------------------------------------- definitions */

static void define_stack(uint32_t id, const uint64_t *f, unsigned n) {
    hl_frame_t fr[HL_MAX_DEPTH];
    if (n > HL_MAX_DEPTH) n = HL_MAX_DEPTH;
    for (unsigned i = 0; i < n; i++)
        fr[i] = hl_module_frame(W, f[i]);
    int64_t got = hl_writer_stack(W, fr, n);
    if (got != (int64_t)id) broken(got < 0 ? hl_writer_error(W) : "stack ids out of step");
}

static void define_new(void) {
    uint32_t n = hl_thread_count();
    for (; threads_defined < n && !W_broken; threads_defined++) {
        hl_tinfo_t ti;
        if (!hl_thread_info(threads_defined, &ti)) break;
        char name[32];
        hl_os_thread_name(ti.tid, name, sizeof name); /* as it is now, if it still runs */
        if (!name[0]) memcpy(name, ti.name, sizeof ti.name);
        int64_t idx = hl_writer_thread_v2(W, (uint64_t)ti.tid, name, strnlen(name, 16),
                                          ti.has_start, ti.start_thread, ti.start_steps);
        if (idx != (int64_t)threads_defined)
            broken(idx < 0 ? hl_writer_error(W) : "thread indices out of step");
    }
    if (!W_broken) hl_stacks_take(&stacks_defined, define_stack);
}

/* ---------------------------------------------------------------- the trace file */

static int open_trace(void) {
    int claim = !W_child;
    int fd = hl_os_open_trace(hl_cfg.out, claim, W_path, sizeof W_path);
    if (fd < 0) {
        broken(strerror(errno));
        return -1;
    }
    hl_meta_t meta;
    hl_bytes_t argv[256];
    static char buf[16384];
    hl_agent_meta(&meta, argv, 256, buf, sizeof buf);
    if (W_child) {
        meta.has_parent_pid = 1;
        meta.parent_pid = (uint64_t)W_parent;
    }
    hl_writer_opts_t o = {hl_cfg.zstd_level, hl_cfg.block_events};
    hl_sink_init(&W_sink, fd, W_path);
    W = hl_writer_new_v2(&hl_os_mem, hl_os_write, &W_sink, &meta, &o);
    flock(W_sink.fd, LOCK_UN);
    if (!W) {
        close(W_sink.fd);
        broken(strerror(errno));
        return -1;
    }
    W_fd = W_sink.fd;
    round_no = 0;
    threads_defined = stacks_defined = 0;
    last_flush_ns = hl_now_ns();
    if (P_fd >= 0) {
        /* a fork child: every definition first, then the parent's live objects */
        define_new();
        if (!W_broken && hl_inherit(W, P_fd, P_len, P_time))
            hl_note("could not read the parent's trace: the child's trace starts without the "
                    "objects it inherited ",
                    W_path, "");
        close(P_fd);
        P_fd = -1;
    }
    return 0;
}

static int ensure_open(void) {
    if (W) return 1;
    if (W_closed || W_broken) return 0;
    return open_trace() == 0;
}

/* ---------------------------------------------------------------- rounds */

/* Bytes of rows t has published beyond what was written. */
static uint64_t waiting(hl_thread_t *t) {
    hl_chunk_t *c = t->cchunk ? t->cchunk : atomic_load_explicit(&t->first, memory_order_acquire);
    uint64_t n = 0;
    while (c) {
        uint64_t pub = hl_chunk_mark(t, c) - (uintptr_t)c->data;
        n += pub - (c == t->cchunk ? t->cdata : 0);
        c = atomic_load_explicit(&c->next, memory_order_acquire);
    }
    return n;
}

/* Where t's rows end now: its last chunk and that chunk's mark. Every
 * chunk before it is final (its `next` is set). */
static void snapshot(hl_thread_t *t) {
    if (!t->cchunk) {
        t->cchunk = atomic_load_explicit(&t->first, memory_order_acquire);
        t->cdata = 0;
    }
    hl_chunk_t *c = t->cchunk, *n;
    while (c && (n = atomic_load_explicit(&c->next, memory_order_acquire)))
        c = n;
    t->snap = c;
    t->snap_pub = c ? hl_chunk_mark(t, c) : 0;
}

/* Rows in one EVENTS block at most (a block takes a thread's rows from
 * several chunks: zstd does better on bigger frames, in size and in
 * instructions a byte; README.md "Cost"), and chunks in one block at most. */
#define BLOCK_BYTES (512u << 10)
#define BLOCK_SEGS  16

/* The chunks of a block that are written to their final mark, given back
 * as soon as the writer has copied their rows (before zstd runs: the
 * producer can take them again meanwhile). */
typedef struct give_back {
    hl_thread_t *t;
    hl_chunk_t *upto; /* every chunk from t->cchunk up to this one, not it */
} give_back_t;

static void give_back(void *arg) {
    give_back_t *g = arg;
    hl_thread_t *t = g->t;
    while (t->cchunk != g->upto) {
        hl_chunk_t *next = atomic_load_explicit(&t->cchunk->next, memory_order_acquire);
        atomic_fetch_sub_explicit(&t->nchunks, 1, memory_order_relaxed);
        hl_chunk_put(t->cchunk);
        t->cchunk = next;
    }
}

/* Writes t's rows up to its snapshot, as few blocks as BLOCK_BYTES allows,
 * about `budget` bytes at most (whole chunks); gives back the chunks t has
 * left behind. Returns the bytes written. */
static uint64_t write_thread(hl_thread_t *t, uint64_t budget) {
    uint64_t done = 0;
    while (t->cchunk && done < budget && !W_broken) {
        hl_bytes_t seg[BLOCK_SEGS];
        size_t n = 0, len = 0;
        hl_chunk_t *c = t->cchunk;
        uint32_t from = t->cdata, pub;
        for (;;) {
            int last = c == t->snap;
            /* a chunk before the snapshot's is final: next was set after its final mark */
            pub = (uint32_t)((last ? t->snap_pub
                                   : atomic_load_explicit(&c->pub, memory_order_acquire)) -
                             (uintptr_t)c->data);
            if (pub > from) {
                seg[n].ptr = c->data + from;
                seg[n++].len = pub - from;
                len += pub - from;
            }
            if (last || n == BLOCK_SEGS || len >= BLOCK_BYTES || done + len >= budget) break;
            c = atomic_load_explicit(&c->next, memory_order_acquire);
            from = 0;
        }
        give_back_t g = {t, c};
        if (len) {
            if (hl_writer_events_v2_segs(W, t->index, round_no, t->bfirst, &clk, seg, n, give_back,
                                         &g)) {
                broken(hl_writer_error(W));
                break;
            }
            t->bfirst += len;
            done += len;
        }
        give_back(&g); /* (done already, unless the block was empty) */
        t->cdata = pub;
        if (c == t->snap) break;
        /* (else a limit ended the block inside the snapshot: c is final, and
         * the next block starts at its end; len > 0, so this moves on) */
    }
    return done;
}

/* A round: where every thread's rows end, then the definitions they may
 * name (registered before those rows were published), then the rows. */
static void write_round(void) {
    if (!ensure_open() || W_broken) return;
    round_no++;
    for (hl_thread_t *t = atomic_load(&hl_threads); t; t = t->next)
        if (atomic_load_explicit(&t->state, memory_order_acquire) != TS_FREE) snapshot(t);
    calibrate();
    define_new();
    uint64_t budget = ROUND_BYTES;
    for (hl_thread_t *t = atomic_load(&hl_threads); t && !W_broken; t = t->next) {
        if (atomic_load_explicit(&t->state, memory_order_acquire) == TS_FREE) continue;
        if (!t->snap) continue;
        for (;;) {
            uint64_t n = write_thread(t, budget);
            budget = n < budget ? budget - n : 0;
            if (budget || W_broken) break;
            /* more than a round can hold: the rest goes into the next ones */
            round_no++;
            budget = ROUND_BYTES;
        }
    }
    last_flush_ns = hl_now_ns();
}

/* States of threads that have exited go back to the free list once their
 * rows are written and the thread is really gone. */
static void recycle(void) {
    for (hl_thread_t *t = atomic_load(&hl_threads); t; t = t->next) {
        if (atomic_load_explicit(&t->state, memory_order_acquire) != TS_EXITING) continue;
        if (hl_os_thread_alive(t->tid) || hl_active(t)) continue;
        if (waiting(t)) continue;
        /* the thread is gone: nothing more will be published */
        hl_chunk_t *c = t->cchunk ? t->cchunk : atomic_load(&t->first);
        while (c) {
            hl_chunk_t *n = atomic_load(&c->next);
            hl_chunk_put(c);
            c = n;
        }
        waited_done += atomic_load(&t->waited_ns);
        rows_done += t->steps - t->twos;
        t->cchunk = NULL;
        t->cdata = 0;
        t->bfirst = 0;
        atomic_store(&t->nchunks, 0);
        atomic_store(&t->first, NULL);
        hl_thread_recycle(t);
    }
}

/* One look at the threads: a round when one is due. Returns the events
 * written. */
static uint64_t pass(int force) {
    uint64_t total = 0, most = 0;
    /* every thread's next row takes a time stamp (a race with the thread
     * moving its own limit can lose this; it then stamps within 256 bytes) */
    hl_threads_poke();
    for (hl_thread_t *t = atomic_load(&hl_threads); t; t = t->next) {
        if (atomic_load_explicit(&t->state, memory_order_acquire) == TS_FREE) continue;
        uint64_t n = waiting(t);
        total += n;
        if (n > most) most = n;
    }
    if (!total) return 0;
    uint64_t now = hl_now_ns();
    if (!force && most < THREAD_BYTES && total < ROUND_BYTES &&
        now - last_flush_ns < hl_cfg.flush_ns)
        return 0;
    write_round();
    return total;
}

/* Every row published so far (each pass writes everything up to where the
 * threads were when it looked; threads that go on allocating are followed
 * a few times, not forever). */
static void drain_all(void) {
    for (int i = 0; i < 16 && pass(1) && !W_broken; i++) {
    }
}

/* ---------------------------------------------------------------- the writer thread */

static void *writer_main(void *arg) {
    (void)arg;
    hl_busy_enter(); /* nothing this thread does is recorded */
    prctl(PR_SET_NAME, "heaplab-writer", 0, 0, 0);
    uint64_t idle_ns = 0;
    for (;;) {
        pthread_mutex_lock(&hl_wlock);
        if (W_closed || W_broken || hl_pid != getpid()) {
            pthread_mutex_unlock(&hl_wlock);
            break;
        }
        int sig = atomic_load(&hl_fatal_sig);
        if (sig) {
            hl_finish_locked(HL_END_SIGNAL, (uint64_t)sig, 1);
            atomic_store(&hl_fatal_done, 1);
            pthread_mutex_unlock(&hl_wlock);
            break;
        }
        uint64_t n = pass(0);
        recycle();
        pthread_mutex_unlock(&hl_wlock);
        /* A writer that polls chunks it has caught up with pulls the
         * producers' cache lines across cores at every event: let rows pile
         * up between passes (a thread's chunks hold 128K rows by default) */
        idle_ns = n ? HL_BUSY_SLEEP_NS
                    : (idle_ns ? (idle_ns * 2 > 1000000 ? 1000000 : idle_ns * 2) : 50000);
        hl_os_sleep_ns(idle_ns);
    }
    atomic_store(&hl_writer_running, 0);
    return NULL;
}

static __thread int t_helping __attribute__((tls_model("initial-exec")));

int hl_writer_helping(void) {
    return t_helping;
}

int hl_writer_help(void) {
    if (W_closed || W_broken || pthread_mutex_trylock(&hl_wlock)) return 0;
    t_helping = 1;
    uint64_t n = 0;
    if (!W_closed && !W_broken) n = pass(1);
    pthread_mutex_unlock(&hl_wlock);
    t_helping = 0;
    int sig = atomic_exchange(&hl_deferred_sig, 0);
    if (sig) raise(sig); /* taken by the fatal handler now */
    return n > 0;
}

void hl_writer_ensure_running(void) {
    if (atomic_load_explicit(&hl_writer_running, memory_order_relaxed) || W_closed || W_broken)
        return;
    if (!hl_agent_ctor_done()) return; /* until then, full chunks are written by their producers */
    int expected = 0;
    if (!atomic_compare_exchange_strong(&hl_writer_running, &expected, 1)) return;
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    pthread_attr_t a;
    pthread_attr_init(&a);
    pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED);
    pthread_attr_setstacksize(&a, 1 << 20);
    pthread_t tid;
    hl_busy_enter();
    if (hl_real.pthread_create(&tid, &a, writer_main, NULL)) atomic_store(&hl_writer_running, 0);
    hl_busy_leave();
    pthread_attr_destroy(&a);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
}

/* ---------------------------------------------------------------- ends, fork, exec */

int hl_writer_init(void) {
    return open_trace();
}

/* Threads still inside a hook. */
static uint64_t inflight(void) {
    uint64_t n = 0;
    for (hl_thread_t *t = atomic_load(&hl_threads); t; t = t->next)
        if (atomic_load_explicit(&t->state, memory_order_acquire) != TS_FREE &&
            hl_active(t) &&
            t != hl_thread_self())
            n++;
    return n;
}

int hl_finish_locked(int reason, uint64_t status, int close_for_good) {
    if (W_closed) return -1;
    int empty = 1;
    for (hl_thread_t *t = atomic_load(&hl_threads); t && empty; t = t->next)
        if (atomic_load(&t->state) != TS_FREE && waiting(t)) empty = 0;
    if (!W && (W_broken || (W_child && reason == HL_END_EXEC && empty))) {
        /* a fork child that recorded nothing before exec leaves no trace */
        if (close_for_good) W_closed = 1, stop();
        return -1;
    }
    /* stop new events, then wait (a little) for the ones under way: a row
     * published after END would be lost, and an edge to it would dangle */
    if (close_for_good) stop();
    uint64_t deadline = hl_now_ns() + (reason == HL_END_SIGNAL ? 300000000ull : 1000000000ull);
    uint64_t busy = 0;
    for (;;) {
        drain_all();
        busy = inflight();
        if (!close_for_good || !busy || hl_now_ns() >= deadline) break;
        hl_os_sleep_ns(50000);
    }
    drain_all();
    int rc = -1;
    if (ensure_open() && !W_broken) {
        /* the rows written: every thread's count (they are all written now;
         * a thread still inside a hook adds its row to neither) */
        uint64_t waited = waited_done, rows = rows_done;
        for (hl_thread_t *t = atomic_load(&hl_threads); t; t = t->next)
            if (atomic_load(&t->state) != TS_FREE) {
                waited += atomic_load(&t->waited_ns);
                rows += t->steps - t->twos;
            }
        hl_end_t e = {.reason = (uint64_t)reason,
                      .events = rows,
                      .status = status,
                      .end_ns = hl_os_realtime_ns(),
                      .unrecorded = atomic_load(&hl_unrecorded),
                      .lost = atomic_load(&hl_lost),
                      .waited_ns = waited,
                      .inflight = busy};
        if (hl_writer_end(W, &e))
            broken(hl_writer_error(W));
        else
            rc = 0;
        last_flush_ns = hl_now_ns();
        if (e.lost) {
            char n[24];
            hl_fmt_u64(n, e.lost);
            hl_note("LOST ", n, " events: this trace is incomplete");
        }
        if (hl_cfg.verbose && rc == 0) {
            char ev[24], by[24];
            hl_fmt_u64(ev, hl_writer_events(W));
            hl_fmt_u64(by, hl_writer_bytes(W));
            hl_note("wrote ", W_path, reason == HL_END_EXEC ? " (before exec)" : "");
            hl_note("  events ", ev, "");
            hl_note("  bytes ", by, "");
        }
    }
    if (close_for_good) {
        W_closed = 1;
        stop();
    }
    return rc;
}

void hl_fork_prepare(void) {
    pthread_mutex_lock(&hl_wlock);
    /* everything before the fork goes to the file: the child reads it back */
    if (!W_closed && !W_broken) pass(1);
    hl_threads_fork_prepare();
    hl_stacks_fork_prepare();
    hl_chunks_fork_prepare();
}

void hl_fork_parent(void) {
    hl_chunks_fork_parent();
    hl_stacks_fork_parent();
    hl_threads_fork_parent();
    pthread_mutex_unlock(&hl_wlock);
}

/* In the child, before fork returns. Other threads do not exist here: their
 * states are recycled. The child's trace opens on first need and starts
 * with the objects live in the parent's trace at the fork (inherit.c). */
void hl_fork_child(pid_t parent) {
    pthread_mutex_init(&hl_wlock, NULL);
    hl_chunks_fork_child();
    hl_stacks_fork_child();
    hl_pid = getpid();
    atomic_store(&hl_writer_running, 0);
    if (!hl_cfg.follow_forks || W_closed || W_broken) {
        W_closed = 1;
        stop();
        return;
    }
    hl_thread_t *self = hl_thread_self();
    hl_threads_fork_child(self); /* its locks first: recycling takes them */
    for (hl_thread_t *t = atomic_load(&hl_threads); t; t = t->next) {
        if (atomic_load(&t->state) == TS_FREE) continue;
        /* rows published before the fork are the parent's */
        hl_chunk_t *c = t->cchunk ? t->cchunk : atomic_load(&t->first);
        while (c && c != (t == self ? t->chunk : NULL)) {
            hl_chunk_t *n = atomic_load(&c->next);
            hl_chunk_put(c);
            c = n;
        }
        t->cchunk = c;
        t->bfirst = 0;
        t->cdata = c ? (uint32_t)(hl_chunk_mark(t, c) - (uintptr_t)c->data) : 0;
        atomic_store(&t->nchunks, c ? 1 : 0);
        hl_set_active(t, 0);
        atomic_store(&t->first, c);
        if (t != self) {
            atomic_store(&t->first, NULL);
            t->cchunk = NULL;
            hl_thread_recycle(t);
        }
    }
    hl_edges_reset();
    if (self) hl_thread_sync_gate(self); /* one thread again */
    hl_modules_new_trace();
    waited_done = rows_done = 0;
    /* the parent's trace as it was at the fork, for the INHERITED block */
    P_fd = W_fd >= 0 ? hl_os_reopen_read(W_fd) : -1;
    P_len = P_fd >= 0 ? hl_writer_bytes(W) : 0;
    P_time = hl_now_ns();
    if (W) hl_writer_free(W);
    W = NULL;
    if (W_fd >= 0) hl_sink_close(&W_sink);
    W_fd = -1;
    W_child = 1;
    W_parent = parent;
    atomic_store(&hl_unrecorded, 0);
    atomic_store(&hl_lost, 0);
    hl_writer_ensure_running();
}

void hl_exec_prepare(void) {
    pthread_mutex_lock(&hl_wlock);
    hl_finish_locked(HL_END_EXEC, 0, 0);
}

void hl_exec_failed(void) {
    pthread_mutex_unlock(&hl_wlock);
}
