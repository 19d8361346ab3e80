/*
 * heaplab_vg.h: what heaplab's Valgrind tool (native/vgtool) shares with the
 * programs around it: the client requests a program under the tool may make,
 * and the raw stream the tool writes, which `heaplab` reads.
 *
 * Two tools are built from native/vgtool/hl_tool.c:
 *
 *   --tool=heaplab          record: replaces malloc (as DHAT does) and streams
 *                           allocation events plus every load and store
 *   --tool=heaplab-measure  measure: leaves malloc alone (an LD_PRELOADed
 *                           allocator runs as it is) and streams the loads and
 *                           stores each marked application or allocator
 *
 * The raw stream (--hl-out=PATH, usually a FIFO that heaplab reads) is a
 * sequence of records made of 64-bit little-endian words. Every record is
 * at least two words; the second word says what it is:
 *
 *   reference  (w1 bit 2 = 0), 2 words:
 *     w0 = address
 *     w1 = WRITE (bit 0) | ALLOC (bit 1, measure: made by the allocator)
 *          | size << 3 (bits 3..12, 1..1023; larger accesses are clamped)
 *          | time << 13 (bits 13..63: instructions before the accessing one;
 *            record mode only, 0 in measure mode)
 *
 *   control    (w1 bit 2 = 1), 2 + n words:
 *     w0 = first argument
 *     w1 = 4 | kind << 3 (bits 3..10) | n << 16 (bits 16..47: extra words)
 *     then n extra words, as listed per kind below.
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
 *           wall time (ns, CLOCK_MONOTONIC), nframes frame words]
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

#define HLVG_PROTOCOL 1

#define HLVG_REF_WRITE  1u
#define HLVG_REF_ALLOC  2u
#define HLVG_CONTROL    4u
#define HLVG_SIZE_SHIFT 3
#define HLVG_SIZE_MAX   1023u
#define HLVG_TIME_SHIFT 13

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
};

#ifndef HLVG_TOOL_SIDE
/* For programs: the requests, each 0 when not running under the tool. */
#include <valgrind/valgrind.h>
#define HLVG_REPLAYER(lo, hi)                                                                      \
    ((int)VALGRIND_DO_CLIENT_REQUEST_EXPR(0, HLVG_REQ_REPLAYER, (lo), (hi), 0, 0, 0))
#define HLVG_ACTIVE(on) ((int)VALGRIND_DO_CLIENT_REQUEST_EXPR(0, HLVG_REQ_ACTIVE, (on), 0, 0, 0, 0))
#define HLVG_EVENT(index, block, created)                                                          \
    VALGRIND_DO_CLIENT_REQUEST_STMT(HLVG_REQ_EVENT, (index), (block), (created), 0, 0)
#endif

#endif
