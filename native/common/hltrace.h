/*
 * hltrace.h: the heaplab trace format in C (docs/trace-format.md is the
 * specification; crates/heaplab-trace is the Rust implementation of the same
 * contract, tools/hltrace.py an independent Python one, and testdata/vectors/
 * keeps the three in step). Three files implement it, under different rules:
 *
 *   hltrace_core.c    names, CRC-32C, varints, the mmap allocator: shared
 *   hltrace_writer.c  the writer. It runs inside malloc hooks (the recording
 *                     agent): no malloc, no stdio, no locks of its own.
 *   hltrace_reader.c  the reader (replayer, hltrace-dump, the agent's fork
 *                     child): bounded memory from an hl_mem_t, snprintf for
 *                     its error text only.
 *   hltrace_enc.h     inline helpers that encode version-2 event rows, for
 *                     the agent's hot path and the test tools
 *
 *   file   = header(16) block*
 *   block  = "HLBK" kind codec flags stored_len raw_len number crc32c  payload
 *            |<-------------------- 24 bytes -------------------->|
 *   v1     = META (MODULES | STACKS | THREADS | EVENTS)* END
 *            one EVENTS stream in one causal order, dense object ids
 *   v2     = META [INHERITED] (MODULES | STACKS | THREADS | EVENTS)* END
 *            one EVENTS stream per thread (addresses, per-thread steps and
 *            cross-thread edges); the reader merges them into one causal
 *            order and assigns the dense object ids
 *
 * Neither side calls malloc. All memory comes from an hl_mem_t the caller
 * supplies (the recording agent passes an mmap arena, because it must never
 * allocate through the allocator it watches; hl_mem_mmap is a ready one), and
 * all I/O goes through a caller-supplied write or read function. zstd
 * contexts are created with ZSTD_create?Ctx_advanced over the same hl_mem_t.
 */
#ifndef HLTRACE_H
#define HLTRACE_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#ifdef __cplusplus
extern "C" {
#endif

#define HL_FILE_HEADER_LEN  16
#define HL_BLOCK_HEADER_LEN 24
#define HL_MAX_BLOCK_LEN    (64u << 20)
#define HL_MAX_BLOCK_EVENTS (1u << 20)
#define HL_MAX_FRAMES       256
#define HL_VERSION_MIN      1
#define HL_VERSION_MAX      2

/* Stream kinds (block header byte 4). */
enum {
    HL_STREAM_META = 0x01,
    HL_STREAM_MODULES = 0x02,
    HL_STREAM_STACKS = 0x03,
    HL_STREAM_THREADS = 0x04,
    HL_STREAM_EVENTS = 0x05,
    HL_STREAM_END = 0x06,
    HL_STREAM_INHERITED = 0x07, /* v2: a fork child's live objects at its start */
    HL_STREAM_REFS = 0x10,      /* data references (Rust side), always skippable */
    HL_STREAM_SP = 0x11,        /* stack depths (Rust side), always skippable */
};
#define HL_BLOCK_SKIPPABLE  1u
#define HL_BLOCK_FLAGS_KNOWN HL_BLOCK_SKIPPABLE /* any other bit is a format error */

/* Event kinds (the low 4 bits of the op byte, both versions). */
typedef enum hl_kind {
    HL_MALLOC = 0,
    HL_CALLOC = 1,
    HL_REALLOC = 2,
    HL_MEMALIGN = 3,
    HL_POSIX_MEMALIGN = 4,
    HL_ALIGNED_ALLOC = 5,
    HL_VALLOC = 6,
    HL_PVALLOC = 7,
    HL_FREE = 8,
    HL_REALLOC_FREE = 9,
    HL_KIND_COUNT = 10,
} hl_kind_t;

#define HL_OP_KIND_MASK 0x0fu
/* v1 op bits */
#define HL_OP_FAILED    0x10u
#define HL_OP_OLD_NULL  0x20u
#define HL_OP_HAS_STACK 0x40u
#define HL_OP_INHERITED 0x80u
/* v2 op bits (hltrace_enc.h encodes the fields they announce) */
#define HL_OP2_STACK 0x10u /* a stack id follows the kind's fields */
#define HL_OP2_TIME  0x20u /* a time stamp: ticks since the thread's previous one */
#define HL_OP2_EDGE  0x40u /* an edge for the event's last step */
#define HL_OP2_EDGE2 0x80u /* an edge for the first (release) step of a two-step realloc */

/* END reasons. */
enum { HL_END_EXIT = 1, HL_END_EXEC = 2, HL_END_SIGNAL = 3, HL_END_CLOSED = 4 };

const char *hl_kind_name(unsigned kind);   /* "malloc" ... "realloc_free"; NULL if reserved */
int hl_kind_is_release(unsigned kind);     /* free, realloc_free */
int hl_kind_has_align(unsigned kind);      /* the memalign family */
const char *hl_stream_name(unsigned kind); /* "META", ..., "unknown" */

/* ---------------------------------------------------------------- memory */

/* Where the writer and the reader get memory. alloc returns NULL on failure;
 * release gets back the size that was asked for. */
typedef struct hl_mem {
    void *(*alloc)(void *ctx, size_t size);
    void (*release)(void *ctx, void *p, size_t size);
    void *ctx;
} hl_mem_t;

/* Every allocation is its own mmap (rounded up to pages). */
extern const hl_mem_t hl_mem_mmap;

/* ---------------------------------------------------------------- codec helpers */

uint32_t hl_crc32c(uint32_t crc, const void *buf, size_t len); /* crc=0 to start */
size_t hl_varint_put(uint8_t *out, uint64_t v);                /* returns 1..10 bytes */
/* Reads a varint at *p (< end). Returns 0 on success, -1 if it runs out of
 * bytes, -2 if it is longer than 10 bytes or 64 bits. */
int hl_varint_get(const uint8_t **p, const uint8_t *end, uint64_t *v);

/* ---------------------------------------------------------------- model */

typedef struct hl_bytes {
    const uint8_t *ptr; /* NULL: absent */
    size_t len;
} hl_bytes_t;

typedef struct hl_meta {
    unsigned version; /* reader: the file's format version */
    uint64_t pid;
    int has_ppid;
    uint64_t ppid;
    const hl_bytes_t *argv;
    size_t argc;
    uint64_t start_ns;
    uint64_t pointer_size;
    uint64_t endian; /* 0 little, 1 big */
    uint64_t time_unit_ns;
    uint64_t stack_depth;
    hl_bytes_t recorder, executable, options, clock; /* absent or empty: not written */
    int has_parent_pid;
    uint64_t parent_pid;
} hl_meta_t;

typedef struct hl_frame {
    uint32_t module; /* 0: in no known module, offset is absolute */
    uint64_t offset;
} hl_frame_t;

/* A recorded cross-thread edge (v2): the event (or its release step) came
 * after the first `steps` steps of thread `thread`. */
typedef struct hl_dep {
    uint32_t thread;
    uint64_t steps;
} hl_dep_t;

/* One event. The v1 writer reads kind, thread, time, size, align, old/has_old,
 * stack, failed and inherited; the reader fills everything. */
typedef struct hl_event {
    uint64_t index;    /* reader: position in the merged order */
    uint8_t kind;      /* hl_kind_t */
    uint8_t failed;    /* the call returned NULL: no id */
    uint8_t inherited; /* existed before the trace began (fork child) */
    uint8_t has_id;    /* reader: the event created object `id` */
    uint8_t has_old;   /* releases or reallocates `old`; 0 on realloc = realloc(NULL, n) */
    uint8_t n_after;   /* reader, v2: recorded edges in after[] (0..2) */
    uint32_t thread;
    uint32_t stack; /* 0: none */
    uint64_t time;  /* absolute, in time units (v2: nanoseconds) */
    uint64_t size;  /* requested size; reader, for a release: the released object's size */
    uint64_t align; /* memalign family, else 0 */
    uint64_t id;
    uint64_t old;
    uint64_t old_size;   /* reader: size of `old` */
    uint64_t thread_seq; /* reader: index of the event in its thread's own stream */
    uint32_t old_thread; /* reader, with has_old: the thread whose event created `old` */
    uint64_t old_seq;    /* ... and that event's thread_seq (a per-object dependency) */
    hl_dep_t after[2];   /* reader, v2: the recorded edges, release step's first */
} hl_event_t;

typedef struct hl_end {
    uint64_t reason, status, end_ns, events, objects, unrecorded, unknown_frees;
    /* v2 */
    uint64_t lost;      /* events the agent could not record (0 unless it said so loudly) */
    uint64_t waited_ns; /* time the program's threads waited for ring space, summed */
    uint64_t inflight;  /* threads still inside a hook when END was written */
} hl_end_t;

const char *hl_end_reason_name(uint64_t reason); /* "exit", ...; NULL if unnamed */

/* ---------------------------------------------------------------- writer */

/* Writes all of buf or fails: returns 0, or -1 with errno set. */
typedef int (*hl_write_fn)(void *ctx, const void *buf, size_t len);
int hl_fd_write(void *fd_as_ptr, const void *buf, size_t len); /* ctx = (void *)(intptr_t)fd */

typedef struct hl_writer_opts {
    int zstd_level;        /* 0: store everything as is; else compress MODULES,
                              STACKS, THREADS and EVENTS blocks that shrink */
    uint32_t block_events; /* v1: events per block, 1 ..= 2^20 (0: 65536) */
} hl_writer_opts_t;

typedef struct hl_writer hl_writer_t;

/* Writes the file header (version 1) and META. NULL on failure (errno set;
 * EINVAL for bad options or meta). */
hl_writer_t *hl_writer_new(const hl_mem_t *mem, hl_write_fn write, void *wctx,
                           const hl_meta_t *meta, const hl_writer_opts_t *opts);
/* The same for version 2 (per-thread event streams; see hl_writer_events_v2). */
hl_writer_t *hl_writer_new_v2(const hl_mem_t *mem, hl_write_fn write, void *wctx,
                              const hl_meta_t *meta, const hl_writer_opts_t *opts);
/* Definitions wait in memory and go out, one block per kind in the order
 * modules, stacks, threads, just before the next EVENTS (or INHERITED)
 * block. Each returns the new id (modules and stacks from 1, threads from
 * 0), or -1. */
int64_t hl_writer_module(hl_writer_t *w, uint64_t base, uint64_t size, const void *path,
                         size_t path_len, const void *build_id, size_t build_id_len);
int64_t hl_writer_stack(hl_writer_t *w, const hl_frame_t *frames,
                        unsigned n); /* no deduplication */
int64_t hl_writer_thread(hl_writer_t *w, uint64_t tid, const void *name, size_t name_len);
/* v2: a thread that started after the first `start_steps` steps of thread
 * `start_thread` (has_start 0: its start is not known). */
int64_t hl_writer_thread_v2(hl_writer_t *w, uint64_t tid, const void *name, size_t name_len,
                            int has_start, uint32_t start_thread, uint64_t start_steps);
/* Appends one event (v1). `old` must name a live object: the caller tracks
 * liveness (the writer only checks old < next id). On success *new_id (if
 * not NULL) is the id created, or UINT64_MAX when none. Returns 0 or -1. */
int hl_writer_event(hl_writer_t *w, const hl_event_t *ev, uint64_t *new_id);
/* Appends n events (v1), as n calls of hl_writer_event would, but faster. */
int hl_writer_append(hl_writer_t *w, const hl_event_t *evs, size_t n);

/* v2: converts a thread's time stamps (ticks) to CLOCK_MONOTONIC ns:
 * ns = ns_ref + (tick - tsc_ref) * mult / 2^32 (signed, floored). */
typedef struct hl_clock {
    uint64_t tsc_ref, ns_ref, mult;
} hl_clock_t;
/* v2: one EVENTS block of one thread: `len` bytes of rows that
 * hltrace_enc.h encoded, continuing that thread's stream at its byte
 * `first_byte`, in merge round `round` (never below the last block's).
 * Pending definitions go out first. Returns 0 or -1. */
int hl_writer_events_v2(hl_writer_t *w, uint32_t thread, uint64_t round, uint64_t first_byte,
                        const hl_clock_t *clock, const uint8_t *rows, size_t len);
/* The same with the rows in `n` pieces, one after another in the stream
 * (the recording agent's chunks), written as one block. `copied` (if not
 * NULL) is called with `arg` once the rows are copied, before the block is
 * compressed and written: the caller may reuse their memory from then on. */
int hl_writer_events_v2_segs(hl_writer_t *w, uint32_t thread, uint64_t round, uint64_t first_byte,
                             const hl_clock_t *clock, const hl_bytes_t *segs, size_t n,
                             void (*copied)(void *arg), void *arg);
/* v2: the INHERITED block: `n` entries encoded by hl_enc_inherited, all at
 * `time_ns`. Once, before the first EVENTS block. */
int hl_writer_inherited(hl_writer_t *w, uint64_t time_ns, uint64_t n, const uint8_t *entries,
                        size_t len);
/* Writes the pending definitions and (v1) the events block being built. */
int hl_writer_flush(hl_writer_t *w);
/* Flushes, then writes END; v1 fills in events and objects; v2 writes the
 * caller's `events` (the rows it wrote), lost, waited_ns and inflight, and
 * fills in the bytes of rows. After reason exec the writer may go on. */
int hl_writer_end(hl_writer_t *w, const hl_end_t *end);
/* Flushes, then writes a block of another stream, stored as is. */
int hl_writer_raw_block(hl_writer_t *w, uint8_t kind, uint16_t flags, const void *payload,
                        size_t len);
uint64_t hl_writer_events(const hl_writer_t *w);   /* v1: events appended; v2: bytes of rows */
uint64_t hl_writer_next_id(const hl_writer_t *w);  /* v1: the next object id */
uint64_t hl_writer_buffered(const hl_writer_t *w); /* v1: events not yet written to the file */
uint64_t hl_writer_bytes(const hl_writer_t *w);    /* bytes written so far */
uint32_t hl_writer_threads(const hl_writer_t *w);  /* threads defined */
uint32_t hl_writer_stacks(const hl_writer_t *w);   /* stacks defined */
const char *hl_writer_error(const hl_writer_t *w); /* why the last call failed */
void hl_writer_free(hl_writer_t *w);               /* releases memory; writes nothing */

/* ---------------------------------------------------------------- reader */

/* Reads up to len bytes: returns the count (0 at end of file) or -1. */
typedef ssize_t (*hl_read_fn)(void *ctx, void *buf, size_t len);
ssize_t hl_fd_read(void *fd_as_ptr, void *buf, size_t len);

typedef enum hl_problem {
    HL_OK = 0,
    HL_E_IO,
    HL_E_NOT_A_TRACE,
    HL_E_VERSION,
    HL_E_TRUNCATED,
    HL_E_BAD_BLOCK_MAGIC,
    HL_E_ABSURD_LENGTH,
    HL_E_CHECKSUM,
    HL_E_UNKNOWN_STREAM,
    HL_E_MALFORMED,
    HL_E_CUT_SHORT,
    HL_E_NOMEM,
} hl_problem_t;

/* A reader error: which file, at which byte (the start of the block, or the
 * file-header field, at fault), what is wrong, and how many events were read
 * from good blocks before it. */
typedef struct hl_error {
    hl_problem_t problem;
    uint64_t offset;
    uint64_t events;
    const char *file;
    char msg[400]; /* the problem in words, e.g. "checksum mismatch in EVENTS block ..." */
} hl_error_t;

/* "FILE: byte OFFSET: PROBLEM (N events read before this point)". Returns
 * what snprintf returns. */
int hl_error_format(const hl_error_t *e, char *buf, size_t size);
/* True when every complete block was good and only the tail is missing. */
int hl_error_is_cut_short(const hl_error_t *e);

typedef enum hl_item_kind {
    HL_ITEM_MODULE = 1,
    HL_ITEM_STACK,
    HL_ITEM_THREAD,
    HL_ITEM_EVENT,
    HL_ITEM_END,
    HL_ITEM_SKIPPED, /* a block of an unknown stream marked SKIPPABLE */
} hl_item_kind_t;

/* One thing read from a trace: definitions in file order, events in the
 * merged order. Pointers inside stay valid until the next hl_reader_next. */
typedef struct hl_item {
    hl_item_kind_t kind;
    union {
        struct {
            uint32_t id;
            uint64_t base, size;
            hl_bytes_t path, build_id;
        } module;
        struct {
            uint32_t id;
            uint32_t nframes;
            const hl_frame_t *frames;
        } stack;
        struct {
            uint32_t index;
            uint64_t tid;
            hl_bytes_t name;
            int has_start; /* v2: started after the first start_steps steps of start_thread */
            uint32_t start_thread;
            uint64_t start_steps;
        } thread;
        hl_event_t event;
        hl_end_t end;
        struct {
            uint8_t kind;
            uint32_t bytes;
        } skipped;
    } u;
} hl_item_t;

typedef struct hl_reader hl_reader_t;

/* Reads the file header and META. On failure returns NULL and fills *err
 * (file = name). */
hl_reader_t *hl_reader_new(const hl_mem_t *mem, hl_read_fn read, void *rctx, const char *name,
                           hl_error_t *err);
const hl_meta_t *hl_reader_meta(const hl_reader_t *r);
/* 1: *it holds the next item; 0: clean end after an END block; -1: error
 * (hl_reader_error). A trace without END gives -1 with HL_E_CUT_SHORT after
 * its last item. */
int hl_reader_next(hl_reader_t *r, hl_item_t *it);
const hl_error_t *hl_reader_error(const hl_reader_t *r);
uint64_t hl_reader_events(const hl_reader_t *r);       /* events handed out so far */
uint64_t hl_reader_live_objects(const hl_reader_t *r); /* objects live now */
uint64_t hl_reader_position(const hl_reader_t *r);     /* offset of the next unread block */
uint64_t hl_reader_unknown_frees(const hl_reader_t *r); /* v2: frees of addresses never seen */
/* The live objects (v2: with their addresses), oldest first: the agent's
 * fork child turns them into its INHERITED block. Returns how many were
 * passed to fn, or -1 when out of memory. */
typedef struct hl_live {
    uint64_t addr, id, size, align;
    uint32_t stack;
    uint8_t kind;
} hl_live_t;
int64_t hl_reader_live_each(hl_reader_t *r, void (*fn)(void *ctx, const hl_live_t *o), void *ctx);
void hl_reader_free(hl_reader_t *r);

#ifdef __cplusplus
}
#endif
#endif
