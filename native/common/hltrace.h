/*
 * hltrace.h: the heaplab trace format v1 in C: a streaming writer and a
 * streaming reader, CRC-32C and varints. docs/trace-format.md is the
 * specification; crates/heaplab-trace is the Rust implementation of the same
 * contract, and testdata/vectors/ keeps the two in step.
 *
 *   file   = header(16) block*
 *   block  = "HLBK" kind codec flags stored_len raw_len number crc32c  payload
 *            |<-------------------- 24 bytes -------------------->|
 *   stream = META (MODULES | STACKS | THREADS | EVENTS)* END
 *
 * Neither side calls malloc. All memory comes from an hl_mem_t the caller
 * supplies (the recording agent passes an mmap arena, because it must never
 * allocate through the allocator it watches; hl_mem_mmap is a ready one), and
 * all I/O goes through a caller-supplied write or read function. zstd
 * contexts are created with ZSTD_create?Ctx_advanced over the same hl_mem_t.
 *
 * Invariants the writer keeps: ids (modules from 1, stacks from 1, threads
 * from 0, objects from 0) are dense and each definition reaches the file
 * before the first EVENTS block that uses it; event time never decreases.
 * The reader keeps only the counts of definitions and the live objects
 * (id -> size), so its memory is bounded by the live objects plus one block.
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

/* Stream kinds (block header byte 4). */
enum {
    HL_STREAM_META = 0x01,
    HL_STREAM_MODULES = 0x02,
    HL_STREAM_STACKS = 0x03,
    HL_STREAM_THREADS = 0x04,
    HL_STREAM_EVENTS = 0x05,
    HL_STREAM_END = 0x06,
    HL_STREAM_REFS = 0x10, /* reserved for a later version */
};
#define HL_BLOCK_SKIPPABLE 1u

/* Event kinds (the low 4 bits of the op byte). */
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
#define HL_OP_FAILED    0x10u
#define HL_OP_OLD_NULL  0x20u
#define HL_OP_HAS_STACK 0x40u
#define HL_OP_INHERITED 0x80u

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

/* One event. The writer reads kind, thread, time, size, align, old/has_old,
 * stack, failed and inherited; the reader fills everything. */
typedef struct hl_event {
    uint64_t index;    /* reader: position in the trace */
    uint8_t kind;      /* hl_kind_t */
    uint8_t failed;    /* the call returned NULL: no id */
    uint8_t inherited; /* existed before the trace began (fork child) */
    uint8_t has_id;    /* reader: the event created object `id` */
    uint8_t has_old;   /* releases or reallocates `old`; 0 on realloc = realloc(NULL, n) */
    uint32_t thread;
    uint32_t stack; /* 0: none */
    uint64_t time;  /* absolute, in time units */
    uint64_t size;  /* requested size; reader, for a release: the released object's size */
    uint64_t align; /* memalign family, else 0 */
    uint64_t id;
    uint64_t old;
    uint64_t old_size; /* reader: size of `old` */
} hl_event_t;

typedef struct hl_end {
    uint64_t reason, status, end_ns, events, objects, unrecorded, unknown_frees;
} hl_end_t;

const char *hl_end_reason_name(uint64_t reason); /* "exit", ...; NULL if unnamed */

/* ---------------------------------------------------------------- writer */

/* Writes all of buf or fails: returns 0, or -1 with errno set. */
typedef int (*hl_write_fn)(void *ctx, const void *buf, size_t len);
int hl_fd_write(void *fd_as_ptr, const void *buf, size_t len); /* ctx = (void *)(intptr_t)fd */

typedef struct hl_writer_opts {
    int zstd_level;        /* 0: store everything as is; else compress MODULES,
                              STACKS, THREADS and EVENTS blocks that shrink */
    uint32_t block_events; /* events per block, 1 ..= 2^20 (0: 65536) */
} hl_writer_opts_t;

typedef struct hl_writer hl_writer_t;

/* Writes the file header and META. NULL on failure (errno set; EINVAL for
 * bad options or meta). */
hl_writer_t *hl_writer_new(const hl_mem_t *mem, hl_write_fn write, void *wctx,
                           const hl_meta_t *meta, const hl_writer_opts_t *opts);
/* Definitions wait in memory and go out, one block per kind in the order
 * modules, stacks, threads, just before the next EVENTS block. Each returns
 * the new id (modules and stacks from 1, threads from 0), or -1. */
int64_t hl_writer_module(hl_writer_t *w, uint64_t base, uint64_t size, const void *path,
                         size_t path_len, const void *build_id, size_t build_id_len);
int64_t hl_writer_stack(hl_writer_t *w, const hl_frame_t *frames,
                        unsigned n); /* no deduplication */
int64_t hl_writer_thread(hl_writer_t *w, uint64_t tid, const void *name, size_t name_len);
/* Appends one event. `old` must name a live object: the caller tracks
 * liveness (the writer only checks old < next id). On success *new_id (if
 * not NULL) is the id created, or UINT64_MAX when none. Returns 0 or -1. */
int hl_writer_event(hl_writer_t *w, const hl_event_t *ev, uint64_t *new_id);
/* Appends n events, as n calls of hl_writer_event would (the ids they
 * create are hl_writer_next_id() before the call, onwards), but faster: the
 * column cursors stay in registers. On an error, the events before the bad
 * one are in. Returns 0 or -1. */
int hl_writer_append(hl_writer_t *w, const hl_event_t *evs, size_t n);
/* Writes the pending definitions and the events block being built. */
int hl_writer_flush(hl_writer_t *w);
/* Flushes, then writes END; events and objects are filled in. After reason
 * exec the writer may go on (a failed exec). */
int hl_writer_end(hl_writer_t *w, const hl_end_t *end);
/* Flushes, then writes a block of another stream, stored as is. */
int hl_writer_raw_block(hl_writer_t *w, uint8_t kind, uint16_t flags, const void *payload,
                        size_t len);
uint64_t hl_writer_events(const hl_writer_t *w);   /* events appended so far */
uint64_t hl_writer_next_id(const hl_writer_t *w);  /* the next object id */
uint64_t hl_writer_buffered(const hl_writer_t *w); /* events not yet written to the file */
uint64_t hl_writer_bytes(const hl_writer_t *w);    /* bytes written so far */
uint32_t hl_writer_threads(const hl_writer_t *w);  /* threads defined */
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

/* One thing read from a trace, in file order. Pointers inside stay valid
 * until the next call to hl_reader_next. */
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
void hl_reader_free(hl_reader_t *r);

#ifdef __cplusplus
}
#endif
#endif
