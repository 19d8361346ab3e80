/*
 * heaplab_vg.h: what heaplab's Valgrind tool (native/vgtool) shares with the
 * programs around it: the client requests a program under the tool may make,
 * and the raw stream the tool writes, which `heaplab` reads.
 *
 * Three tools are built here; two from native/vgtool/hl_tool.c:
 *
 *   --tool=heaplab          record: replaces malloc (as DHAT does) and streams
 *                           allocation events plus every load and store
 *   --tool=heaplab-measure  measure: leaves malloc alone (an LD_PRELOADed
 *                           allocator runs as it is) and streams the loads and
 *                           stores each marked application or allocator
 *
 * and one from hl_count.c:
 *
 *   --tool=heaplab-count    counts the instructions of each allocator call a
 *                           replay makes, and nothing else (no stream)
 *
 * The raw stream (--hl-out=PATH, usually a FIFO that heaplab reads) is a
 * sequence of 64-bit little-endian words; bits 61..63 of a record's first
 * word say what it is:
 *
 *   0 REF   one word: address (bits 0..47) | k << 48 (bits 48..55) | size
 *           code << 56 (bits 56..58: 1 << code bytes, 0..6) | WRITE << 59 |
 *           ALLOC << 60 (measure: made by the allocator's code).
 *           Its time (record mode) is the last TIME word plus k: the number
 *           of instructions executed before the accessing one.
 *   1 TIME  one word: bits 0..60 = instructions executed before the first
 *           instruction of the superblock run whose references follow
 *           (record mode; written before the first REF of each run).
 *   2 SREF  two words: a reference of any size: the first word as a REF
 *           (size code ignored), the second the size in bytes.
 *   3 CTL   2 + n words: kind (bits 0..7) | n << 8 (bits 8..39); then w0,
 *           the record's first argument; then n extra words.
 *
 * A superblock of Valgrind's translation emits its TIME word and its REFs
 * with straight-line stores into a buffer, so a reference costs one word.
 *
 * Control kinds (extra words in brackets):
 *   HELLO   w0 = HLVG_PROTOCOL  [mode (1 record, 2 measure), pid, ppid,
 *           stack depth, start time (ns since the epoch)]
 *   THREAD  w0 = thread index (dense from 0)  [kernel thread id]
 *   MODULE  w0 = module id (dense from 1)  [load bias, text start, text
 *           size, path length, path bytes padded to whole words]
 *   ALLOC   w0 = block returned (0: the call failed)  [op (hltrace kind
 *           0..9) | thread << 8 | nframes << 40, requested size, alignment,
 *           old block (realloc, realloc_free; 0: none), time (instructions),
 *           wall time (ns, CLOCK_MONOTONIC), nframes frame words, then the
 *           caller's stack depth in bytes (main thread: its first stack
 *           pointer rounded as _start aligns it, minus the caller's; 0 when
 *           unknown); a reader that knows only the frames ignores the rest]
 *   FREE    w0 = block freed  [thread << 8 | nframes << 40, time, wall time,
 *           nframes frame words]
 *   EXIT    w0 = exit status  [reason (1 exit, 2 exec: the program calls
 *           execve; more records follow if it fails), application
 *           instructions, allocator instructions, unknown frees]
 *   EVENT   w0 = event index (measure, from the replayer)  [block returned
 *           or 0, flags (bit 0: the event created an object), allocator
 *           instructions so far]
 *
 * A frame word is module << 48 | offset (module 0: no module, offset is the
 * address). Frames are return addresses, innermost first, with Valgrind's
 * own malloc wrappers left out: the trace format's (module, offset) frames.
 *
 * The records are in execution order (Valgrind runs one thread at a time).
 */
#ifndef HEAPLAB_VG_H
#define HEAPLAB_VG_H

#define HLVG_PROTOCOL 2

#define HLVG_T_REF      0ull
#define HLVG_T_TIME     1ull
#define HLVG_T_SREF     2ull
#define HLVG_T_CTL      3ull
#define HLVG_TYPE_SHIFT 61
#define HLVG_ADDR_MASK  ((1ull << 48) - 1)
#define HLVG_K_SHIFT    48
#define HLVG_K_MAX      255u
#define HLVG_SC_SHIFT   56
#define HLVG_WRITE      (1ull << 59)
#define HLVG_ALLOC      (1ull << 60)

enum {
    HLVG_C_HELLO = 1,
    HLVG_C_THREAD = 2,
    HLVG_C_MODULE = 3,
    HLVG_C_ALLOC = 4,
    HLVG_C_FREE = 5,
    HLVG_C_EXIT = 6,
    HLVG_C_EVENT = 7,
};

enum { HLVG_MODE_RECORD = 1, HLVG_MODE_MEASURE = 2 };
enum { HLVG_EXIT_EXIT = 1, HLVG_EXIT_EXEC = 2 };

/* Client requests: VG_USERREQ_TOOL_BASE('H','L') + n. */
#define HLVG_REQ_BASE (((unsigned int)'H' & 0xff) << 24 | ((unsigned int)'L' & 0xff) << 16)
enum {
    /* measure: "I am heaplab's replayer; my own code is [a1, a2)". From then
     * on the tool streams nothing until HLVG_ACTIVE(1), and marks every
     * access of code outside [a1, a2) as the allocator's (in a replay, only
     * the allocator runs besides the replayer). Returns 1. */
    HLVG_REQ_REPLAYER = HLVG_REQ_BASE + 1,
    /* measure: a1 = 1 streams references, 0 stops (the replayer turns it on
     * around each run of allocator calls). Returns 1. */
    HLVG_REQ_ACTIVE = HLVG_REQ_BASE + 2,
    /* measure: event a1 just ran; a2 = the block it returned (0: none),
     * a3 = 1 if it created an object. Returns 1. */
    HLVG_REQ_EVENT = HLVG_REQ_BASE + 3,
    /* count (--tool=heaplab-count, hl_count.c): "I am heaplab's replayer;
     * my own code is [a1, a2); a3 points to a4 entries (hlvg_entry_t), the
     * functions through which I call the allocator: my wrappers
     * (rp_call_malloc, ..., inside [a1, a2)) and the allocator's own entry
     * points I call directly (malloc, ..., outside it)". Each names the slot
     * (1 ..) that counts its calls. Returns 1. */
    HLVG_REQ_COUNT_INIT = HLVG_REQ_BASE + 4,
    /* count: copy the counts (hlvg_counts_t) to a1, a2 bytes at most.
     * Returns the bytes written. */
    HLVG_REQ_COUNT_READ = HLVG_REQ_BASE + 5,
};

/* What heaplab-count counted, between callgrind's START_INSTRUMENTATION and
 * STOP_INSTRUMENTATION requests (which the replayer makes around each run of
 * ops, for callgrind and this tool alike). Slot 0 holds the instructions of
 * code outside the replayer run outside any counted call (libc's memset in
 * touch mode, the clock); slot s those run inside calls through the entries
 * of slot s, from the entry until the replayer's code runs again, the
 * replayer's own instructions excepted: what callgrind reports as the
 * inclusive cost of a wrapper's callees. */
#define HLVG_COUNT_VERSION 1
#define HLVG_COUNT_SLOTS   16
#define HLVG_COUNT_ENTRIES 32
typedef struct hlvg_entry {
    unsigned long long addr; /* the function's first instruction */
    unsigned long long slot; /* 1 .. HLVG_COUNT_SLOTS - 1 */
} hlvg_entry_t;
typedef struct hlvg_counts {
    unsigned long long version;  /* HLVG_COUNT_VERSION */
    unsigned long long slots;    /* slots in use: 1 + entries */
    unsigned long long replayer; /* instructions of the replayer's own code */
    unsigned long long instr[HLVG_COUNT_SLOTS];
    unsigned long long calls[HLVG_COUNT_SLOTS];
} hlvg_counts_t;

#ifndef HLVG_TOOL_SIDE
/* For programs: the requests, each 0 when not running under the tool. */
#include <valgrind/valgrind.h>
#define HLVG_REPLAYER(lo, hi)                                                                      \
    ((int)VALGRIND_DO_CLIENT_REQUEST_EXPR(0, HLVG_REQ_REPLAYER, (lo), (hi), 0, 0, 0))
#define HLVG_ACTIVE(on) ((int)VALGRIND_DO_CLIENT_REQUEST_EXPR(0, HLVG_REQ_ACTIVE, (on), 0, 0, 0, 0))
#define HLVG_EVENT(index, block, created)                                                          \
    VALGRIND_DO_CLIENT_REQUEST_STMT(HLVG_REQ_EVENT, (index), (block), (created), 0, 0)
#define HLVG_COUNT_INIT(lo, hi, entries, n)                                                        \
    ((int)VALGRIND_DO_CLIENT_REQUEST_EXPR(0, HLVG_REQ_COUNT_INIT, (lo), (hi), (entries), (n), 0))
#define HLVG_COUNT_READ(buf, len)                                                                  \
    ((int)VALGRIND_DO_CLIENT_REQUEST_EXPR(0, HLVG_REQ_COUNT_READ, (buf), (len), 0, 0, 0))
#endif

#endif
