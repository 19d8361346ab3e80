/*
 * agent.h: the recording agent's internal interface (native/record/README.md
 * explains the design). Three parts share it:
 *
 *   hooks.c   the interposed malloc API and the per-thread producer side:
 *             per call, one record into the calling thread's ring
 *   writer.c  the background writer: merges the rings by sequence number,
 *             maps addresses to object ids and stacks to stack ids, writes
 *             blocks with native/common/hltrace.c
 *   agent.c   start-up, configuration, fork, exec, exit and fatal signals
 *   os.c      the only file that asks the OS for memory and files
 *
 * A record in a ring (64 bytes, then `nframes` return addresses):
 *
 *   +--------+--------+--------+--------+--------+--------+--------+-----+--+---+
 *   | seq    | seq1   | time   | addr   | old    | size   | hash   |align|op|nfr|
 *   +--------+--------+--------+--------+--------+--------+--------+-----+--+---+
 *   seq    the global order of the event (for realloc: taken after the call)
 *   seq1   realloc only: taken before the call, where the old block is released
 *   seq == 0 marks padding to the end of the ring.
 *
 * Invariant: in each ring, records are in increasing seq order, and every
 * seq below a thread's `pending` that belongs to that thread is published.
 */
#ifndef HEAPLAB_RECORD_AGENT_H
#define HEAPLAB_RECORD_AGENT_H

#define _GNU_SOURCE
#include "hltrace.h"

#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define HL_LIKELY(x)   __builtin_expect(!!(x), 1)
#define HL_UNLIKELY(x) __builtin_expect(!!(x), 0)
#define HL_EXPORT      __attribute__((visibility("default"))) /* an interposed libc function */

#define HL_RECORDER     "heaplab-record 0.1.0"
#define HL_MAX_DEPTH    128 /* most frames a stack may have in the agent */
#define HL_HCACHE_SLOTS 4096
#define HL_CACHELINE    64

/* ---------------------------------------------------------------- configuration */

typedef struct hl_config {
    char out[4096];        /* HEAPLAB_RECORD_OUT, made absolute */
    unsigned stack_depth;  /* 0: stacks off */
    int free_stacks;       /* unwind on free too */
    uint64_t time_unit_ns; /* ns per unit of the time column */
    int zstd_level;        /* 0: store blocks uncompressed */
    uint32_t block_events; /* events per EVENTS block */
    uint64_t flush_ns;     /* write a block at least this often */
    int follow_forks;      /* fork children write their own trace */
    size_t ring_bytes;     /* per-thread ring */
    int verbose;           /* one line on stderr per trace written */
    char options[512];     /* the above as key=value, for META */
} hl_config_t;

extern hl_config_t hl_cfg;

/* ---------------------------------------------------------------- records and rings */

typedef struct hl_rec {
    uint64_t seq, seq1, time, addr, old, size, hash;
    uint32_t align;
    uint8_t op; /* hl_kind_t */
    uint8_t pad;
    uint16_t nframes;
} hl_rec_t;

_Static_assert(sizeof(hl_rec_t) == 64, "a record is one cache line");

enum { TS_ACTIVE = 1, TS_EXITING = 2, TS_FREE = 3 };

typedef struct hl_thread hl_thread_t;
struct hl_thread {
    /* producer side (the owning thread) */
    uint8_t *ring;
    uint64_t mask; /* ring size - 1; the size is a power of two */
    uint64_t tail; /* bytes written */
    uint64_t head_seen;
    uint64_t *hcache; /* stack hashes this thread has sent frames for */
    pid_t tid;
    char name[16];
    _Alignas(HL_CACHELINE) _Atomic uint64_t tail_pub; /* bytes published */
    _Atomic uint64_t pending;                         /* seq claimed, not yet published; 0: none */
    _Alignas(HL_CACHELINE) _Atomic uint64_t head_pub; /* bytes the writer consumed */
    /* writer side */
    uint64_t chead;
    uint64_t ctail_w;    /* tail_pub as last read */
    uint64_t pf;         /* prefetch cursor, a few records ahead of chead */
    int32_t trace_index; /* thread index in the current trace, -1: not defined yet */
    uint8_t phase2;      /* the head record is a realloc whose release half is done */
    uint8_t stash_known;
    uint64_t stash_id; /* the object that release half ended */
    _Atomic int state;
    hl_thread_t *_Atomic next; /* every state ever made, newest first */
    hl_thread_t *free_next;
    size_t map_bytes;
};

/* ---------------------------------------------------------------- shared state */

extern _Atomic uint64_t hl_seq;         /* next sequence number; starts at 1 */
extern hl_thread_t *_Atomic hl_threads; /* registry */
extern _Atomic int hl_off;              /* recording is off (not started, ended, disabled) */
extern _Atomic uint64_t hl_unrecorded;  /* calls passed through without a record */
extern pthread_mutex_t hl_wlock;        /* the writer's state */
extern pid_t hl_pid;                    /* the process this agent state belongs to */
extern _Atomic int hl_writer_running;
extern _Atomic int hl_fatal_sig;         /* set by a fatal signal handler */
extern _Atomic int hl_fatal_done;        /* the writer wrote END for it */
extern uint64_t hl_self_lo, hl_self_len; /* this .so's text, skipped in stacks */

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
} hl_real_t;
extern hl_real_t hl_real;

/* ---------------------------------------------------------------- hooks.c */

void hl_hooks_resolve(void);                     /* dlsym(RTLD_NEXT) every real function */
hl_thread_t *hl_thread_self(void);               /* NULL when the thread has none */
hl_thread_t *hl_thread_create(int start_writer); /* makes (or recycles) this thread's state */
hl_thread_t *hl_thread_adopt(void);              /* makes one for the calling thread, sets t_self */
void hl_busy_enter(void);                        /* agent code runs: nested calls pass through */
void hl_busy_leave(void);
int hl_busy(void);

/* ---------------------------------------------------------------- writer.c */

int hl_writer_init(void); /* at start-up, with the trace file open */
void hl_writer_ensure_running(void);
int hl_writer_help(void);    /* a producer with a full ring drains; 1 if it did work */
int hl_writer_helping(void); /* this thread is inside hl_writer_help */
extern _Atomic uint64_t
    hl_flush_due;                   /* stamp after which a producer flushes if the writer has not */
extern _Atomic int hl_deferred_sig; /* a fatal signal that arrived inside hl_writer_help */
/* Under hl_wlock: drains every ring and writes END. reason HL_END_*; with
 * `close`, recording stops for good. Returns 0 if a trace was written to. */
int hl_finish_locked(int reason, uint64_t status, int close);
void hl_fork_prepare(void);
void hl_fork_parent(void);
void hl_fork_child(pid_t parent_pid);
void hl_exec_prepare(void); /* takes hl_wlock and writes END exec */
void hl_exec_failed(void);  /* releases it: recording goes on */

/* ---------------------------------------------------------------- agent.c */

int hl_agent_ready(void);       /* initialises on first use; 1 when recording */
void hl_agent_exit(int status); /* _exit/_Exit/quick_exit: END then exit */
void hl_note(const char *a, const char *b, const char *c); /* a line on stderr */
uint64_t hl_now_ns(void);                                  /* CLOCK_MONOTONIC */

/* Event time stamps: the TSC where it runs at a constant rate and is the
 * kernel's clocksource (the writer converts ticks to CLOCK_MONOTONIC ns by
 * calibration against it), else CLOCK_MONOTONIC. rdtsc costs ~25 ns here,
 * clock_gettime ~58 ns. */
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
extern const hl_mem_t hl_os_mem;                             /* for hltrace.c */
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
void hl_os_thread_name(pid_t tid, char *name, size_t size);
void hl_os_sleep_ns(uint64_t ns);
int hl_os_thread_alive(pid_t tid);
size_t hl_fmt_u64(char *out, uint64_t v);

#endif
