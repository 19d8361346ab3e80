/*
 * agent.h: the recording agent's internal interface (native/record/README.md
 * explains the design). Every prototype the agent's files share is here.
 *
 *   hooks.c    the interposed malloc API: per call, one row into the calling
 *              thread's chunk (hltrace_enc.h), no lock, no shared counter
 *   threads.c  thread states: registration, indices, pthread_create (start
 *              edges, the multithreaded switch), exit and recycling
 *   chunks.c   the chunk pool: where rows are written, bounded in total,
 *              and the backpressure that makes a producer wait
 *   edges.c    the address table that orders events across threads
 *   stacks.c   stack ids: per-thread caches, one shared table, the frames
 *              the writer turns into STACKS definitions
 *   modules.c  return addresses to (module, offset), for the writer
 *   writer.c   the writer: copies published rows into blocks, rounds,
 *              clock calibration, END, fork and exec
 *   inherit.c  a fork child's INHERITED block, from its parent's trace
 *   agent.c    start-up, configuration, exit, exec wrappers, fatal signals
 *   os.c       the only file that asks the OS for memory and files
 *
 * A thread's stream (what one thread's chunks hold, in order):
 *
 *   chunk: [ header | rows: op byte + fields, one per event ...................... ]
 *            the published mark: t->data (the producer's cursor, stored with
 *              release after every row) while this is t's current chunk;
 *              pub, the final mark, once the producer has moved on
 *            next: the chunk the producer went on to (set after pub)
 *
 * Invariants: a thread writes only its own chunks; the writer reads a chunk
 * only below its published mark (hl_chunk_mark), and frees it only after
 * `next` is set and everything up to the final mark is copied; pub is
 * stored before next, and next before the cursor leaves the chunk, so a
 * cursor outside a chunk means that chunk is final; an event's row is
 * complete before the cursor passes it, and every edge names a step whose
 * thread had claimed it (by its exchange in edges.c) before the edge was
 * read.
 */
#ifndef HEAPLAB_RECORD_AGENT_H
#define HEAPLAB_RECORD_AGENT_H

#define _GNU_SOURCE
#include "hltrace.h"
#include "hltrace_enc.h"
#include "hl_unwind.h"

#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define HL_LIKELY(x)   __builtin_expect(!!(x), 1)
#define HL_UNLIKELY(x) __builtin_expect(!!(x), 0)
#define HL_EXPORT      __attribute__((visibility("default"))) /* an interposed libc function */

#define HL_RECORDER     "heaplab-record 0.2.0"
#define HL_MAX_DEPTH    128 /* most frames a stack may have in the agent */
#define HL_SCACHE_SLOTS 4096
#define HL_UMEMO_SLOTS  256 /* memos of walks per thread (stack_id in hooks.c) */
#define HL_CACHELINE    64

/* ---------------------------------------------------------------- configuration */

typedef struct hl_config {
    char out[4096];        /* HEAPLAB_RECORD_OUT, made absolute */
    unsigned stack_depth;  /* 0: stacks off */
    int free_stacks;       /* unwind on free too */
    int free_walk;         /* free_stacks && stack_depth: free's fast path tests one word */
    int zstd_level;        /* 0: store blocks uncompressed */
    uint32_t block_events; /* a round when a thread has ~this many rows (4 bytes each) */
    uint64_t flush_ns;     /* write a round at least this often */
    int follow_forks;      /* fork children write their own trace */
    size_t thread_cap;     /* most chunk bytes one thread may hold */
    size_t total_cap;      /* most chunk bytes all threads together may hold */
    int verbose;           /* one line on stderr per trace written */
    char options[512];     /* the above as key=value, for META */
} hl_config_t;

extern hl_config_t hl_cfg;

/* ---------------------------------------------------------------- chunks (chunks.c) */

#define HL_CHUNK_BYTES (64u << 10)
#define HL_CHUNK_HDR   64u
#define HL_CHUNK_DATA  (HL_CHUNK_BYTES - HL_CHUNK_HDR)

typedef struct hl_chunk hl_chunk_t;
struct hl_chunk {
    _Atomic uint64_t pub;      /* the end of its rows, once the producer has left it (an
                                  address in data; until then, the producer's cursor) */
    hl_chunk_t *_Atomic next;  /* set by the producer after its last pub */
    hl_chunk_t *free_next;     /* in the pool */
    uint8_t pad[HL_CHUNK_HDR - 24];
    uint8_t data[HL_CHUNK_DATA];
};
_Static_assert(sizeof(hl_chunk_t) == HL_CHUNK_BYTES, "a chunk is 64 KiB");

typedef struct hl_thread hl_thread_t;

/* A fresh chunk for t; waits (backpressure, timed into t->waited_ns) while
 * t or all threads hold their cap. NULL when recording stopped meanwhile. */
hl_chunk_t *hl_chunk_get(hl_thread_t *t);
void hl_chunk_put(hl_chunk_t *c); /* back to the pool (the writer, under hl_wlock) */
uint64_t hl_chunk_bytes(void);    /* chunk bytes now mapped */
void hl_chunks_fork_prepare(void);
void hl_chunks_fork_parent(void);
void hl_chunks_fork_child(void);

/* ---------------------------------------------------------------- thread states (threads.c) */

enum { TS_ACTIVE = 1, TS_EXITING = 2, TS_FREE = 3 };

/* The gate: one word the fast paths test (all bytes 0: one thread, no
 * stacks, not inside the agent), written only by the owning thread. */
#define HL_GATE_ACTIVE      0x00000001u /* byte 0: inside a hook or the agent */
#define HL_GATE_MT          0x00000100u /* byte 1: edges are recorded (hl_mt, as this thread saw it) */
#define HL_GATE_STACKS      0x00010000u /* byte 2: allocations take a stack */
#define HL_GATE_FREE_STACKS 0x01000000u /* byte 3: frees take a stack */
#define HL_GATE_ALLOC       (HL_GATE_ACTIVE | HL_GATE_MT | HL_GATE_STACKS)
#define HL_GATE_FREE        (HL_GATE_ACTIVE | HL_GATE_MT | HL_GATE_FREE_STACKS)

struct hl_thread {
    /* producer side: the owning thread only; the hot fields in one line */
    uint8_t *data;            /* where the next row goes, and the end of the rows published in
                                 the current chunk (stored with release after each row) */
    uint8_t *_Atomic data_lim; /* a row starting here or beyond takes the slow path: a new
                                  chunk, a time stamp (a writer pass sets it to NULL), or
                                  recording stopped (NULL too) */
    union {
        uint32_t gate; /* HL_GATE_*: the fast paths test it in one instruction */
        struct {
            uint8_t active; /* inside a hook or the agent (a count; other threads read it
                               atomically): nested calls pass through; the final drain
                               waits for it to fall to 0 */
            uint8_t mt, stacks, free_stacks;
        };
    };
    uint32_t index;           /* in the current trace */
    uint64_t steps;           /* steps recorded (a two-step realloc counts 2) */
    uint64_t slot_me;         /* (index + 1) << HL_SLOT_SHIFT, for edges.c */
    _Atomic uint64_t *slots;  /* hl_slots while the mt byte is set */
    hl_enc_t enc;             /* the row encoder's state (prev_addr, nalloc, nfree first) */
    uint8_t *chunk_lim;       /* where a row may no longer start in this chunk */
    hl_chunk_t *chunk;        /* the current chunk (NULL: none yet) */
    uint64_t twos;            /* two-step events recorded: rows = steps - twos */
    uint64_t *scache;         /* stack hash -> id, HL_SCACHE_SLOTS pairs */
    hl_unwind_memos_t umemo;  /* walks -> stack ids, HL_UMEMO_SLOTS (hl_unwind.h) */
    _Atomic uint64_t waited_ns; /* backpressure, summed into END */
    hl_chunk_t *_Atomic first; /* the thread's first chunk, for the writer */
    _Atomic uint32_t nchunks;  /* chunks held: producer adds, writer subtracts */
    pid_t tid;
    /* writer side (under hl_wlock) */
    _Alignas(HL_CACHELINE) hl_chunk_t *cchunk; /* being copied */
    uint32_t cdata;                            /* bytes of cchunk written */
    hl_chunk_t *snap;                          /* the round's end: this chunk ... */
    uint64_t snap_pub;                         /* ... at this mark */
    uint64_t bfirst; /* the next block's first byte in the thread's rows */
    _Atomic int state;
    hl_thread_t *_Atomic next; /* every state ever made, newest first */
    hl_thread_t *free_next;
    size_t map_bytes;
};

/* Another thread's view of t->active, and t's own changes to it. */
static inline unsigned hl_active(hl_thread_t *t) {
    return __atomic_load_n(&t->active, __ATOMIC_ACQUIRE);
}
static inline void hl_set_active(hl_thread_t *t, unsigned v) {
    __atomic_store_n(&t->active, (uint8_t)v, __ATOMIC_RELAXED);
}

/* Where t's rows end in c, one of its chunks: the producer's cursor while c
 * is its current chunk; else c is final, and its mark is the one the
 * producer left in it before the cursor left (room_slow in hooks.c). */
static inline uint64_t hl_chunk_mark(hl_thread_t *t, hl_chunk_t *c) {
    uintptr_t d = (uintptr_t)__atomic_load_n(&t->data, __ATOMIC_ACQUIRE);
    if (d - (uintptr_t)c->data <= HL_CHUNK_DATA) return d;
    return atomic_load_explicit(&c->pub, memory_order_acquire);
}

/* What the writer needs to define a thread in THREADS (by index). */
typedef struct hl_tinfo {
    pid_t tid;
    char name[16];
    int has_start;
    uint32_t start_thread;
    uint64_t start_steps;
} hl_tinfo_t;

hl_thread_t *hl_thread_self(void);               /* NULL when the thread has none */
void hl_thread_sync_gate(hl_thread_t *t);        /* t's own thread: mt and stacks bytes anew */
hl_thread_t *hl_thread_create(int start_writer); /* makes (or recycles) this thread's state */
void hl_threads_init(void);
/* Under hl_wlock: copies the info of thread `index` (0 if it is not registered). */
int hl_thread_info(uint32_t index, hl_tinfo_t *out);
uint32_t hl_thread_count(void);         /* indices given out in this trace */
void hl_thread_recycle(hl_thread_t *t); /* the writer: t's thread is gone, its rows written */
void hl_threads_fork_prepare(void);
void hl_threads_fork_parent(void);
void hl_threads_fork_child(hl_thread_t *self); /* self becomes thread 0 of the child's trace */
extern hl_thread_t *_Atomic hl_threads; /* registry */
extern _Atomic int hl_mt;               /* a second thread may exist: edges are recorded */

/* ---------------------------------------------------------------- edges (edges.c) */

/* A slot of the address table: (thread index + 1) << HL_SLOT_SHIFT | steps. */
#define HL_SLOT_SHIFT 42
#define HL_SLOT_STEPS ((1ull << HL_SLOT_SHIFT) - 1)
#define HL_SLOTS (1u << 19)
extern _Atomic uint64_t *hl_slots; /* NULL until the program goes multithreaded */
int hl_edges_enable(void); /* maps the table; 0 or -1 */
void hl_edges_reset(void); /* a fork child starts single-threaded */

/* The step that last touched addr's slot in `slots` (hl_slots), and this
 * step in its place. The slot's byte offset is one shift and one mask of
 * the address: slot (addr >> 4) % HL_SLOTS, 8 bytes each. */
static inline uint64_t hl_edge_swap(_Atomic uint64_t *slots, uint64_t addr, uint64_t me) {
    _Atomic uint64_t *s =
        (_Atomic uint64_t *)((char *)slots + ((addr >> 1) & ((uint64_t)(HL_SLOTS - 1) << 3)));
    return atomic_exchange_explicit(s, me, memory_order_acq_rel);
}

/* ---------------------------------------------------------------- stacks (stacks.c) */

/* The id of this stack (frames of length n, hash h) in the shared table,
 * through t's cache. 0 when the table cannot take it. */
uint32_t hl_stack_id(hl_thread_t *t, const uintptr_t *frames, unsigned n, uint64_t h);
/* The writer: stacks with ids in (*defined, count], raw frames, in id
 * order; fn is called outside the table's lock. */
void hl_stacks_take(uint32_t *defined, void (*fn)(uint32_t id, const uint64_t *f, unsigned n));
uint32_t hl_stacks_count(void);
void hl_stacks_fork_prepare(void);
void hl_stacks_fork_parent(void);
void hl_stacks_fork_child(void);

/* ---------------------------------------------------------------- modules (modules.c) */

/* (module id in the current trace, offset) of a return address; defines the
 * module in W on first use. Lock-free towards the loader (_dl_find_object). */
hl_frame_t hl_module_frame(hl_writer_t *w, uint64_t addr);
void hl_modules_new_trace(void); /* a new trace (fork child): no module defined */

/* ---------------------------------------------------------------- writer (writer.c) */

extern _Atomic int hl_off;              /* recording is off (not started, ended, disabled) */
extern _Atomic uint64_t hl_unrecorded;  /* calls passed through without a record */
extern _Atomic uint64_t hl_lost;        /* events that could not be recorded */
extern pthread_mutex_t hl_wlock;        /* the writer's state */
extern pid_t hl_pid;                    /* the process this agent state belongs to */
extern _Atomic int hl_writer_running;
extern _Atomic int hl_fatal_sig;         /* set by a fatal signal handler */
extern _Atomic int hl_fatal_done;        /* the writer wrote END for it */
extern _Atomic int hl_deferred_sig;      /* a fatal signal that arrived inside hl_writer_help */
extern uint64_t hl_self_lo, hl_self_len; /* this .so's text, skipped in stacks */

int hl_writer_init(void); /* at start-up: open the trace, write META */
void hl_writer_ensure_running(void);
int hl_writer_help(void);    /* a producer under backpressure drains; 1 if it did work */
int hl_writer_helping(void); /* this thread is inside hl_writer_help */
/* Under hl_wlock: writes every published row and END. reason HL_END_*; with
 * `close`, recording stops for good. Returns 0 if a trace was written to. */
int hl_finish_locked(int reason, uint64_t status, int close);
void hl_fork_prepare(void);
void hl_fork_parent(void);
void hl_fork_child(pid_t parent_pid);
void hl_exec_prepare(void); /* takes hl_wlock and writes END exec */
void hl_exec_failed(void);  /* releases it: recording goes on */
/* The writer's view of the trace file, for inherit.c. */
const char *hl_writer_path(void);

/* ---------------------------------------------------------------- inherit.c */

/* The child's INHERITED block: the live objects of the parent's trace as it
 * was at the fork (its first `len` bytes, read through `fd`). 0 or -1. */
int hl_inherit(hl_writer_t *w, int fd, uint64_t len, uint64_t time_ns);

/* ---------------------------------------------------------------- hooks.c */

/* real functions (hooks.c resolves them) */
typedef struct hl_real {
    void *(*malloc)(size_t);
    void (*free)(void *);
    void *(*calloc)(size_t, size_t);
    void *(*realloc)(void *, size_t);
    int (*posix_memalign)(void **, size_t, size_t);
    void *(*aligned_alloc)(size_t, size_t);
    void *(*memalign)(size_t, size_t);
    void *(*valloc)(size_t);
    void *(*pvalloc)(size_t);
    size_t (*malloc_usable_size)(void *);
    int (*execve)(const char *, char *const[], char *const[]);
    int (*execvpe)(const char *, char *const[], char *const[]);
    int (*fexecve)(int, char *const[], char *const[]);
    void (*_exit)(int) __attribute__((noreturn));
    void (*_Exit)(int) __attribute__((noreturn));
    void (*quick_exit)(int) __attribute__((noreturn));
    int (*sigaction)(int, const struct sigaction *, struct sigaction *);
    sighandler_t (*signal)(int, sighandler_t);
    int (*pthread_create)(pthread_t *, const pthread_attr_t *, void *(*)(void *), void *);
    int (*dlclose)(void *);
} hl_real_t;
extern hl_real_t hl_real;

void hl_hooks_resolve(void); /* dlsym(RTLD_NEXT) every real function */
void hl_busy_enter(void);    /* agent code runs: nested calls pass through */
void hl_busy_leave(void);
int hl_busy(void);
void hl_set_self(hl_thread_t *t); /* this thread's state (threads.c) */
/* Every thread's next row goes to the slow path: with `stamp`, to take a
 * time stamp; when recording stopped, to find it off. */
void hl_threads_poke(void);

/* ---------------------------------------------------------------- agent.c */

int hl_agent_ready(void);       /* initialises on first use; 1 when recording */
int hl_agent_ctor_done(void);
void hl_agent_exit(int status); /* _exit/_Exit/quick_exit: END then exit */
void hl_agent_meta(hl_meta_t *m, hl_bytes_t *argv, size_t max_argv, char *buf, size_t bufsize);
const char *hl_agent_exe(void);
void hl_note(const char *a, const char *b, const char *c); /* a line on stderr */
uint64_t hl_now_ns(void);                                  /* CLOCK_MONOTONIC */
void hl_clock_pair(uint64_t *tsc, uint64_t *ns);           /* a tight (TSC, CLOCK_MONOTONIC) pair */

/* Event time stamps: the TSC where it runs at a constant rate and is the
 * kernel's clocksource (the writer converts ticks to CLOCK_MONOTONIC ns by
 * calibration against it, in each block's clock), else CLOCK_MONOTONIC ns. */
extern int hl_tsc;
extern uint64_t hl_tsc0, hl_mono0;
static inline uint64_t hl_stamp(void) {
    return hl_tsc ? __builtin_ia32_rdtsc() : hl_now_ns();
}

/* ---------------------------------------------------------------- os.c */

void *hl_os_alloc(size_t size); /* zeroed pages; NULL on failure */
void *hl_os_alloc_populated(size_t size);
void hl_os_free(void *p, size_t size);
void *hl_os_grow(void *p, size_t old_size, size_t new_size); /* keeps the contents */
void hl_os_discard(void *p, size_t size);                    /* zero pages, give back the memory */
extern const hl_mem_t hl_os_mem;                             /* for hltrace */
pid_t hl_os_gettid(void);
uint64_t hl_os_realtime_ns(void);
size_t hl_os_read_file(const char *path, char *buf,
                       size_t size); /* whole file, truncated to size */
size_t hl_os_readlink(const char *path, char *buf, size_t size);
int hl_os_open_trace(const char *out, int claim_root, char *path_out, size_t path_size);
typedef struct hl_sink {
    int fd;
    uint64_t dev, ino;
    const char *path;
} hl_sink_t;
void hl_sink_init(hl_sink_t *s, int fd, const char *path);
void hl_sink_close(hl_sink_t *s);
int hl_os_write(void *sink, const void *buf, size_t len); /* an hl_write_fn over an hl_sink_t */
int hl_os_reopen_read(int fd);                            /* the same file, for reading; or -1 */
uint64_t hl_os_file_size(int fd);
void hl_os_thread_name(pid_t tid, char *name, size_t size);
void hl_os_sleep_ns(uint64_t ns);
int hl_os_thread_alive(pid_t tid);
size_t hl_fmt_u64(char *out, uint64_t v);

#endif
