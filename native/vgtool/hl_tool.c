/*
 * hl_tool.c: heaplab's Valgrind tool. Built twice (rules.mk):
 *
 *   heaplab          (HL_MEASURE=0) record: replaces malloc, as DHAT does, so
 *                    that every heap block is known, and streams allocation
 *                    events (with Valgrind's stack traces) and every load and
 *                    store of the program, timed in instructions.
 *   heaplab-measure  (HL_MEASURE=1) measure: leaves malloc alone, so that an
 *                    LD_PRELOADed allocator runs as it is, and streams every
 *                    load and store marked application or allocator.
 *
 * The tool stays simple: it writes raw records (heaplab_vg.h) into a buffer
 * and the buffer into --hl-out (a FIFO); `heaplab` attributes addresses to
 * objects, assigns ids, encodes and compresses. A Valgrind tool has no libc
 * and no zstd, and the second core does that work meanwhile.
 *
 * The hot path is inline IR, no helper call per access:
 *
 *   superblock ──▶ [first instrumented insn]  cur = buf_cur
 *                    if (cur + 8 * n_words > buf_end) flush()   (guarded dirty call)
 *                    cur = buf_cur; t = icount
 *                  [each load/store]          cur[off] = addr; cur[off+8] = (t + k) << 13 | size <<
 * 3 | w [each side exit, the end]  buf_cur = cur + off; icount = t + k
 *
 * so an access costs about six host instructions, and the buffer check one
 * compare per superblock. The mark (application, allocator, or not streamed)
 * of each instruction is decided when it is translated, from the object its
 * code lies in, so it costs nothing when it runs.
 *
 * Invariants: buf_cur never passes buf_end + the reserve of one superblock
 * (each superblock reserves 16 bytes per access before its first one);
 * icount counts every instrumented instruction executed, exactly (it is
 * brought up to date before every exit a superblock can take); records are
 * in execution order.
 */
#define HLVG_TOOL_SIDE 1
#include "heaplab_vg.h"

#include "pub_tool_basics.h"
#include "pub_tool_clientstate.h"
#include "pub_tool_clreq.h"
#include "pub_tool_debuginfo.h"
#include "pub_tool_hashtable.h"
#include "pub_tool_libcassert.h"
#include "pub_tool_libcbase.h"
#include "pub_tool_libcfile.h"
#include "pub_tool_libcprint.h"
#include "pub_tool_libcproc.h"
#include "pub_tool_machine.h"
#include "pub_tool_mallocfree.h"
#include "pub_tool_options.h"
#include "pub_tool_replacemalloc.h"
#include "pub_tool_stacktrace.h"
#include "pub_tool_threadstate.h"
#include "pub_tool_tooliface.h"
#include "pub_tool_transtab.h"
#include "pub_tool_vki.h"
#include "pub_tool_vkiscnums.h"

#ifndef HL_MEASURE
#error "build with -DHL_MEASURE=0 (record) or 1 (measure)"
#endif

/* Not in the pub_tool headers, but exported by the core: moves an fd out of
 * the client's reach (above its hard limit) and marks it close-on-exec, as
 * Valgrind does for its own log file. */
extern Int VG_(safe_fd)(Int oldfd);
/* Also core-only but exported: maps a file shared, in Valgrind's part of the
 * address space (the client never sees it). */
extern SysRes VG_(am_shared_mmap_file_float_valgrind)(SizeT length, UInt prot, Int fd,
                                                      Off64T offset);

/* ---------------------------------------------------------------- options */

static const HChar *clo_out = NULL;
static const HChar *clo_ring = NULL; /* record: a shared file of segments (see hl_flush) */
static const HChar *clo_ack = NULL;  /* ... and the FIFO heaplab acknowledges segments through */
static Int clo_stack_depth = 8;
static Bool clo_free_stacks = False;
static Bool clo_refs = True;
static const HChar *clo_alloc_lib = NULL; /* measure, whole program: the allocator's object */
static Bool clo_start = True;             /* measure: stream from the start (else: HLVG_ACTIVE) */

static Bool hl_process_cmd_line_option(const HChar *arg) {
    if VG_STR_CLO (arg, "--hl-out", clo_out) {
    } else if VG_STR_CLO (arg, "--hl-ring", clo_ring) {
    } else if VG_STR_CLO (arg, "--hl-ack", clo_ack) {
    } else if VG_BINT_CLO (arg, "--hl-stack-depth", clo_stack_depth, 0, 64) {
    } else if VG_BOOL_CLO (arg, "--hl-free-stacks", clo_free_stacks) {
    } else if VG_BOOL_CLO (arg, "--hl-refs", clo_refs) {
    } else if VG_STR_CLO (arg, "--hl-alloc-lib", clo_alloc_lib) {
    } else if VG_BOOL_CLO (arg, "--hl-start", clo_start) {
    } else
        return VG_(replacement_malloc_process_cmd_line_option)(arg);
    return True;
}

static void hl_print_usage(void) {
    VG_(printf)
    ("    --hl-out=PATH             where the raw stream goes (a FIFO heaplab reads) [required]\n"
     "    --hl-ring=FILE --hl-ack=FIFO  put the records in FILE's shared segments and send\n"
     "                              only segment tokens through --hl-out [no: all through it]\n"
     "    --hl-stack-depth=N        record: frames per allocation stack, 0..64 [8]\n"
     "    --hl-free-stacks=yes|no   record: a stack for frees too [no]\n"
     "    --hl-refs=yes|no          record: stream loads and stores [yes]\n"
     "    --hl-alloc-lib=SUFFIX     measure: the allocator's shared object (path suffix)\n"
     "    --hl-start=yes|no         measure: stream from the start, or from HLVG_ACTIVE(1) "
     "[yes]\n");
}

static void hl_print_debug_usage(void) {
    VG_(printf)("    (none)\n");
}

/* ---------------------------------------------------------------- output */

#define BUF_WORDS   (1u << 19) /* 4 MiB */
#define BUF_RESERVE (1u << 16) /* words beyond buf_end: the largest superblock's reserve */
static ULong hl_buf[BUF_WORDS + BUF_RESERVE];
static ULong *buf_start = hl_buf;           /* the buffer being filled */
static ULong *buf_cur = hl_buf;             /* read and written by generated code */
static ULong *buf_end = &hl_buf[BUF_WORDS]; /* read by generated code: flush past this */
static ULong icount[2]; /* instructions executed: [0] application, [1] allocator */
static Int out_fd = -1;
static Bool out_dead = False; /* the reader went away, or this is a fork child */
static ULong bytes_out;

/* The ring (--hl-ring): a file heaplab made and maps too, a header page then
 * `ring_segs` segments. The generated code writes straight into a segment;
 * hl_flush sends the segment's number and length through the FIFO (16 bytes
 * instead of the data) and takes the next segment, waiting for heaplab's
 * acknowledgement (8 bytes on the ack FIFO) when every segment is in flight.
 * heaplab acknowledges segments in the order they were sent.
 *
 *   header page: "HLRING\0\0", number of segments, bytes per segment
 */
static ULong *ring_base; /* segment 0 */
static UInt ring_segs, ring_next, ring_inflight;
static SizeT ring_seg_words;
static Int ack_fd = -1;

static void write_all(const void *p, SizeT n) {
    const UChar *b = p;
    while (n > 0 && !out_dead) {
        Int chunk = n > (1u << 30) ? (1 << 30) : (Int)n;
        Int w = VG_(write)(out_fd, b, chunk);
        if (w == -VKI_EINTR) continue;
        if (w <= 0) {
            VG_(umsg)
            ("heaplab: cannot write the stream to %s (error %d); recording stops\n", clo_out, -w);
            out_dead = True;
            return;
        }
        b += w;
        n -= (SizeT)w;
        bytes_out += (ULong)w;
    }
}

/* Fills the private buffer from now on (a fork child; the reader is gone). */
static void private_buffer(void) {
    buf_start = buf_cur = hl_buf;
    buf_end = &hl_buf[BUF_WORDS];
}

/* Called by generated code (guarded) and before control records. */
static void hl_flush(void) {
    SizeT n = (SizeT)((UChar *)buf_cur - (UChar *)buf_start);
    if (!ring_base) {
        if (n && !out_dead && out_fd >= 0) write_all(buf_start, n);
        buf_cur = buf_start;
        return;
    }
    if (out_dead) {
        private_buffer();
        return;
    }
    if (n) {
        ULong token[2] = {ring_next, n};
        write_all(token, sizeof token);
        ring_next = (ring_next + 1) % ring_segs;
        ring_inflight++;
    }
    while (ring_inflight >= ring_segs && !out_dead) {
        ULong ack;
        Int r = VG_(read)(ack_fd, &ack, sizeof ack);
        if (r == -VKI_EINTR) continue;
        if (r != (Int)sizeof ack) {
            VG_(umsg)("heaplab: the reader stopped acknowledging (%d); recording stops\n", r);
            out_dead = True;
            break;
        }
        ring_inflight--;
    }
    if (out_dead) {
        private_buffer();
        return;
    }
    buf_start = buf_cur = ring_base + (SizeT)ring_next * ring_seg_words;
    buf_end = buf_start + ring_seg_words - BUF_RESERVE;
}

static inline void room(UInt words) {
    if (buf_cur + words > buf_end) hl_flush();
}

/* Maps the ring heaplab made, and opens its acknowledgements. */
static void ring_open(void) {
    SysRes r = VG_(open)(clo_ring, VKI_O_RDWR, 0);
    if (sr_isError(r)) {
        VG_(umsg)("heaplab: cannot open the ring %s (error %lu)\n", clo_ring, sr_Err(r));
        VG_(exit)(1);
    }
    Int fd = (Int)sr_Res(r);
    ULong hdr[3];
    if (VG_(read)(fd, hdr, sizeof hdr) != (Int)sizeof hdr ||
        VG_(memcmp)(&hdr[0], "HLRING\0\0", 8) || hdr[1] < 2 || hdr[1] > 1024 || hdr[2] % 8 ||
        hdr[2] < 2 * (BUF_RESERVE * 8ull)) {
        VG_(umsg)("heaplab: %s is not a ring heaplab made\n", clo_ring);
        VG_(exit)(1);
    }
    ring_segs = (UInt)hdr[1];
    ring_seg_words = hdr[2] / 8;
    SizeT len = 4096 + (SizeT)ring_segs * hdr[2];
    SysRes m = VG_(am_shared_mmap_file_float_valgrind)(len, VKI_PROT_READ | VKI_PROT_WRITE, fd, 0);
    VG_(close)(fd);
    if (sr_isError(m)) {
        VG_(umsg)("heaplab: cannot map the ring %s (error %lu)\n", clo_ring, sr_Err(m));
        VG_(exit)(1);
    }
    ring_base = (ULong *)(sr_Res(m) + 4096);
    SysRes a = VG_(open)(clo_ack, VKI_O_RDONLY, 0);
    if (sr_isError(a)) {
        VG_(umsg)("heaplab: cannot open %s (error %lu)\n", clo_ack, sr_Err(a));
        VG_(exit)(1);
    }
    ack_fd = VG_(safe_fd)((Int)sr_Res(a));
    ring_next = 0;
    buf_start = buf_cur = ring_base;
    buf_end = buf_start + ring_seg_words - BUF_RESERVE;
}

/* A control record with n extra words; returns where the extras go. */
static ULong *control(UInt kind, ULong w0, UInt n) {
    room(2 + n);
    ULong *p = buf_cur;
    p[0] = HLVG_T_CTL << HLVG_TYPE_SHIFT | (ULong)kind | (ULong)n << 8;
    p[1] = w0;
    buf_cur = p + 2 + n;
    return p + 2;
}

static ULong wall_ns(vki_clockid_t clk) {
    struct vki_timespec ts;
    VG_(clock_gettime)(&ts, clk);
    return (ULong)ts.tv_sec * 1000000000ull + (ULong)ts.tv_nsec;
}

/* Event times (CLOCK_MONOTONIC, ns). Under Valgrind a clock read is a real
 * system call (no vDSO); one per malloc and free was a fifth of the tool's
 * time on an allocation-bound program. So with an invariant TSC (CPUID
 * 0x80000007 EDX bit 8, as the kernel's constant_tsc/nonstop_tsc) the clock
 * is read once per CAL_TICKS ticks and the times between are interpolated:
 *
 *   cal_ns ──── event_ns = cal_ns + (tsc - cal_tsc) * rate ──── next reading
 *   (rate: ns per tick, 32.32 fixed point, from two readings >= 2^20 ticks apart)
 *
 * A time never runs backwards (a reading below an interpolated time waits at
 * it). Without an invariant TSC, or until a rate is known, every event reads
 * the clock as before. The trace keeps microseconds, far above the error. */
#define CAL_TICKS (1ull << 24) /* about 5 ms at 3 GHz */
#define CAL_SLOP (1ull << 15)  /* a clock reading slower than this (~10 us) is not a calibration */
static Bool tsc_ok;
static ULong cal_tsc, cal_ns, rate_32, last_event_ns;

#if defined(__x86_64__)
static ULong rdtsc(void) {
    UInt lo, hi;
    __asm__ __volatile__("rdtsc" : "=a"(lo), "=d"(hi));
    return (ULong)hi << 32 | lo;
}
static Bool tsc_invariant(void) {
    UInt a, b, c, d;
    __asm__ __volatile__("cpuid" : "=a"(a), "=b"(b), "=c"(c), "=d"(d) : "a"(0x80000000u), "c"(0));
    if (a < 0x80000007u) return False;
    __asm__ __volatile__("cpuid" : "=a"(a), "=b"(b), "=c"(c), "=d"(d) : "a"(0x80000007u), "c"(0));
    return (d >> 8) & 1;
}
#else
static ULong rdtsc(void) {
    return 0;
}
static Bool tsc_invariant(void) {
    return False;
}
#endif

static ULong event_ns(void) {
    ULong ns;
    if (!tsc_ok) {
        ns = wall_ns(VKI_CLOCK_MONOTONIC);
    } else {
        ULong t = rdtsc(), d = t - cal_tsc;
        if (rate_32 == 0 || d >= CAL_TICKS) {
            ns = wall_ns(VKI_CLOCK_MONOTONIC);
            ULong t2 = rdtsc();
            /* A reading the kernel delayed (the process preempted between
             * the TSC and the clock) pairs a late time with an early tick:
             * every time interpolated from it until the next reading would
             * be late by the delay. It stamps this event only (the time is
             * true when it was read); the next event reads again. */
            if (t2 - t <= CAL_SLOP) {
                t += (t2 - t) / 2; /* the tick when the clock was read, within CAL_SLOP / 2 */
                d = t - cal_tsc;
                if (cal_ns && d >= (1ull << 20) && d < (1ull << 40) && ns > cal_ns &&
                    ns - cal_ns < (1ull << 31))
                    rate_32 = ((ns - cal_ns) << 32) / d;
                cal_ns = ns;
                cal_tsc = t;
            }
        } else {
            ns = cal_ns + ((d * rate_32) >> 32); /* d < 2^24, rate_32 < 2^36 (16 ns a tick) */
        }
    }
    if (ns < last_event_ns) ns = last_event_ns;
    last_event_ns = ns;
    return ns;
}

/* ---------------------------------------------------------------- modules and marks */

enum { M_SKIP = 0, M_APP = 1, M_ALLOC = 2 };

typedef struct {
    Addr lo, hi; /* text */
    UInt id;     /* trace module id, 0 until a stack names it */
    UChar mark;  /* M_SKIP (Valgrind's preloads), M_APP, M_ALLOC */
    Bool is_libc;
    const DebugInfo *di;
} module_t;

#define MAX_MODULES 4096
static module_t modules[MAX_MODULES];
static UInt n_modules, next_module_id = 1;
static module_t *last_module;

static Bool ends_with(const HChar *s, const HChar *suffix) {
    SizeT a = VG_(strlen)(s), b = VG_(strlen)(suffix);
    return a >= b && VG_(strcmp)(s + a - b, suffix) == 0;
}

static const HChar *base_name(const HChar *path) {
    const HChar *s = VG_(strrchr)(path, '/');
    return s ? s + 1 : path;
}

/* The module whose text holds `a`, or NULL (code in no object: JIT). */
static module_t *module_of(Addr a) {
    if (last_module && a >= last_module->lo && a < last_module->hi) return last_module;
    for (UInt i = 0; i < n_modules; i++)
        if (a >= modules[i].lo && a < modules[i].hi) return last_module = &modules[i];
    DebugInfo *di = VG_(find_DebugInfo)(VG_(current_DiEpoch)(), a);
    if (!di) return NULL;
    Addr lo = VG_(DebugInfo_get_text_avma)(di);
    SizeT sz = VG_(DebugInfo_get_text_size)(di);
    if (a < lo || a >= lo + sz) return NULL;
    /* an object unloaded and another mapped over it: forget the stale entry */
    for (UInt i = 0; i < n_modules; i++)
        if (modules[i].lo < lo + sz && lo < modules[i].hi) modules[i].lo = modules[i].hi = 0;
    if (n_modules == MAX_MODULES) return NULL;
    module_t *m = &modules[n_modules++];
    const HChar *path = VG_(DebugInfo_get_filename)(di);
    const HChar *base = base_name(path);
    m->lo = lo;
    m->hi = lo + sz;
    m->id = 0;
    m->di = di;
    m->is_libc = VG_(strncmp)(base, "libc.so", 7) == 0 || VG_(strncmp)(base, "libc-", 5) == 0;
    if (VG_(strncmp)(base, "vgpreload_", 10) == 0)
        m->mark = M_SKIP;
    else if (HL_MEASURE && clo_alloc_lib && ends_with(path, clo_alloc_lib))
        m->mark = M_ALLOC;
    else
        m->mark = M_APP;
    return last_module = m;
}

/* Gives the module an id, sending its definition the first time. */
static UInt module_id(module_t *m) {
    if (m->id) return m->id;
    m->id = next_module_id++;
    const HChar *path = VG_(DebugInfo_get_filename)(m->di);
    SizeT len = VG_(strlen)(path);
    UInt words = (UInt)((len + 7) / 8);
    PtrdiffT bias = VG_(DebugInfo_get_text_bias)(m->di);
    ULong *x = control(HLVG_C_MODULE, m->id, 4 + words);
    x[0] = (ULong)bias;
    x[1] = m->lo;
    x[2] = m->hi - m->lo;
    x[3] = len;
    x[3 + words] = 0;
    VG_(memcpy)(&x[4], path, len);
    return m->id;
}

/* glibc's malloc functions (measure mode, a whole program on glibc). */
static Bool is_glibc_malloc_fn(const HChar *fn) {
    static const HChar *const exact[] = {
        "malloc",         "free",
        "calloc",         "realloc",
        "memalign",       "posix_memalign",
        "aligned_alloc",  "valloc",
        "pvalloc",        "malloc_usable_size",
        "cfree",          "sysmalloc",
        "systrim",        "malloc_consolidate",
        "unlink_chunk",   "munmap_chunk",
        "mremap_chunk",   "_mid_memalign",
        "malloc_trim",    "mtrim",
        "new_heap",       "grow_heap",
        "shrink_heap",    "heap_trim",
        "alloc_perturb",  "free_perturb",
        "tcache_init",    "tcache_get",
        "tcache_put",     "tcache_thread_shutdown",
        "arena_get2",     "arena_get_retry",
        "get_free_list",  "reused_arena",
        "_int_new_arena", "ptmalloc_init",
    };
    static const HChar *const prefix[] = {
        "_int_",           "__libc_malloc", "__libc_free",    "__libc_calloc", "__libc_realloc",
        "__libc_memalign", "__libc_valloc", "__libc_pvalloc", "__malloc_",     "tcache_"};
    for (UInt i = 0; i < sizeof exact / sizeof exact[0]; i++)
        if (VG_(strcmp)(fn, exact[i]) == 0) return True;
    for (UInt i = 0; i < sizeof prefix / sizeof prefix[0]; i++)
        if (VG_(strncmp)(fn, prefix[i], VG_(strlen)(prefix[i])) == 0) return True;
    return False;
}

/* measure, replayer: the replayer's own code, never streamed */
static Addr skip_lo, skip_hi;
static Bool replayer_mode = False;
static Bool active = True; /* streaming now (measure: --hl-start, then HLVG_ACTIVE) */

/* The mark of the instruction at `a`, decided when it is translated. */
static UInt mark_of(Addr a) {
    if (replayer_mode && a >= skip_lo && a < skip_hi) return M_SKIP;
    module_t *m = module_of(a);
    if (m && m->mark == M_SKIP) return M_SKIP;
    if (!HL_MEASURE) return M_APP;
    if (replayer_mode) return M_ALLOC;
    if (m && m->mark == M_ALLOC) return M_ALLOC;
    if (m && m->is_libc) {
        const HChar *fn;
        if (VG_(get_fnname)(VG_(current_DiEpoch)(), a, &fn) && is_glibc_malloc_fn(fn))
            return M_ALLOC;
    }
    return M_APP;
}

/* ---------------------------------------------------------------- threads and stacks */

#define MAX_TIDS 1024
static Int tid_lwp[MAX_TIDS];
static UInt tid_index[MAX_TIDS];
static UInt n_threads;

static Bool tid_known[MAX_TIDS];

/* The trace's thread of Valgrind's thread `tid`: a new one when the kernel's
 * thread id differs from the one last seen in that slot. The kernel is asked
 * (a system call under Valgrind) only after Valgrind said a thread was made
 * or went (hl_thread_gone), not at every event. */
static UInt thread_index(ThreadId tid) {
    if (tid < MAX_TIDS && tid_known[tid]) return tid_index[tid];
    Int lwp = VG_(gettid)();
    if (tid < MAX_TIDS && tid_lwp[tid] == lwp && lwp != 0) {
        tid_known[tid] = True;
        return tid_index[tid];
    }
    UInt idx = n_threads++;
    if (tid < MAX_TIDS) {
        tid_lwp[tid] = lwp;
        tid_index[tid] = idx;
        tid_known[tid] = True;
    }
    ULong *x = control(HLVG_C_THREAD, idx, 1);
    x[0] = (ULong)lwp;
    return idx;
}

/* Valgrind reuses a ThreadId after its thread exits: the next event there
 * asks whose it is (the same thread may still run after its exit hook, as
 * the main thread's last frees in __libc_freeres). */
static void hl_thread_gone(ThreadId tid) {
    if (tid < MAX_TIDS) tid_known[tid] = False;
}
static void hl_thread_created(ThreadId parent, ThreadId child) {
    hl_thread_gone(child);
}

/* The main thread's first stack pointer (where argc is, as __libc_stack_end
 * says in the program), taken before it runs any code; 0 until then. */
static Addr main_first_sp;

static void hl_start_client_code(ThreadId tid, ULong blocks) {
    if (tid == 1 && !main_first_sp) main_first_sp = VG_(get_SP)(tid);
}

/* Frame words of the caller's stack (Valgrind's preloaded wrappers left
 * out), at most clo_stack_depth. Returns how many. *sp_depth gets the
 * caller's stack depth in bytes (paper 001's SP predictor): the main thread's
 * first stack pointer, rounded as _start aligns the stack ((sp0 + 8) & ~15),
 * minus the stack pointer of the caller's frame; 0 in other threads, with
 * stacks off, or when unknown. native/segregate/seg_os.c computes the same at
 * run time from __libc_stack_end. */
static UInt stack_of(ThreadId tid, ULong *frames, ULong *sp_depth) {
    *sp_depth = 0;
    if (clo_stack_depth == 0) return 0;
    Addr ips[64 + 8], sps[64 + 8];
    UInt n = VG_(get_StackTrace)(tid, ips, (UInt)clo_stack_depth + 2, sps, NULL, 0);
    UInt k = 0;
    /* ips[0] is the pc, inside the malloc wrapper; the others are calling
     * instructions (Valgrind gives return address - 1): store return addresses */
    for (UInt i = 1; i < n && k < (UInt)clo_stack_depth; i++) {
        module_t *m = module_of(ips[i]);
        if (k == 0 && m && m->mark == M_SKIP) continue; /* a wrapper calling a wrapper */
        if (k == 0 && tid == 1 && main_first_sp) {
            Addr top = (main_first_sp + 8) & ~(Addr)15;
            if (sps[i] < top) *sp_depth = top - sps[i];
        }
        Addr ra = ips[i] + 1;
        if (m)
            frames[k++] = (ULong)module_id(m) << 48 |
                          ((ra - (Addr)VG_(DebugInfo_get_text_bias)(m->di)) & 0xffffffffffffull);
        else
            frames[k++] = ra & 0xffffffffffffull;
    }
    return k;
}

/* ---------------------------------------------------------------- record: malloc replacement */

typedef struct block {
    struct block *next; /* VgHashNode layout */
    UWord key;          /* the address */
    SizeT size;         /* requested */
} block_t;

static VgHashTable *blocks;
static ULong unknown_frees;

static void event_alloc(ThreadId tid, UInt kind, Addr p, SizeT size, SizeT align, Addr old) {
    ULong frames[64], sp_depth;
    UInt nf = stack_of(tid, frames, &sp_depth);
    UInt th = thread_index(tid);
    ULong *x = control(HLVG_C_ALLOC, p, 7 + nf);
    x[0] = (ULong)kind | (ULong)th << 8 | (ULong)nf << 40;
    x[1] = size;
    x[2] = align;
    x[3] = old;
    x[4] = icount[0];
    x[5] = event_ns();
    for (UInt i = 0; i < nf; i++)
        x[6 + i] = frames[i];
    x[6 + nf] = sp_depth;
}

static void event_free(ThreadId tid, Addr p) {
    ULong frames[64], sp_depth;
    UInt nf = clo_free_stacks ? stack_of(tid, frames, &sp_depth) : 0;
    UInt th = thread_index(tid);
    ULong *x = control(HLVG_C_FREE, p, 3 + nf);
    x[0] = (ULong)th << 8 | (ULong)nf << 40;
    x[1] = icount[0];
    x[2] = event_ns();
    for (UInt i = 0; i < nf; i++)
        x[3 + i] = frames[i];
}

enum { K_MALLOC = 0, K_CALLOC = 1, K_REALLOC = 2, K_MEMALIGN = 3, K_FREE = 8, K_REALLOC_FREE = 9 };

static void *new_block(ThreadId tid, UInt kind, SizeT size, SizeT align, Bool zero) {
    if ((SSizeT)size < 0) {
        event_alloc(tid, kind, 0, size, kind == K_MEMALIGN ? align : 0, 0);
        return NULL;
    }
    void *p = VG_(cli_malloc)(align, size ? size : 1);
    if (p) {
        if (zero) VG_(memset)(p, 0, size);
        block_t *b = VG_(malloc)("hl.block", sizeof *b);
        b->key = (UWord)p;
        b->size = size;
        VG_(HT_add_node)(blocks, b);
    }
    event_alloc(tid, kind, (Addr)p, size, kind == K_MEMALIGN ? align : 0, 0);
    return p;
}

static void *hl_malloc(ThreadId tid, SizeT n) {
    return new_block(tid, K_MALLOC, n, VG_(clo_alignment), False);
}
static void *hl_new(ThreadId tid, SizeT n) {
    return new_block(tid, K_MALLOC, n, VG_(clo_alignment), False);
}
static void *hl_new_aligned(ThreadId tid, SizeT n, SizeT align) {
    return new_block(tid, K_MEMALIGN, n, align, False);
}
static void *hl_memalign(ThreadId tid, SizeT align, SizeT n) {
    return new_block(tid, K_MEMALIGN, n, align, False);
}
static void *hl_calloc(ThreadId tid, SizeT m, SizeT n) {
    if (n && m > (SizeT)-1 / n) {
        event_alloc(tid, K_CALLOC, 0, (SizeT)-1, 0, 0);
        return NULL;
    }
    return new_block(tid, K_CALLOC, m * n, VG_(clo_alignment), True);
}

static void hl_free(ThreadId tid, void *p) {
    if (!p) return;
    block_t *b = VG_(HT_remove)(blocks, (UWord)p);
    if (!b) {
        unknown_frees++; /* not ours: made before we started, or bogus */
        return;
    }
    event_free(tid, (Addr)p);
    VG_(free)(b);
    VG_(cli_free)(p);
}
static void hl_delete(ThreadId tid, void *p) {
    hl_free(tid, p);
}
static void hl_delete_aligned(ThreadId tid, void *p, SizeT align) {
    hl_free(tid, p);
}

static void *hl_realloc(ThreadId tid, void *old, SizeT n) {
    if (!old) {
        void *p = new_block(tid, K_REALLOC, n, VG_(clo_alignment), False);
        return p;
    }
    block_t *b = VG_(HT_lookup)(blocks, (UWord)old);
    if (!b) {
        unknown_frees++;
        return NULL;
    }
    if (n == 0) { /* as glibc: free and return NULL */
        VG_(HT_remove)(blocks, (UWord)old);
        event_alloc(tid, K_REALLOC_FREE, 0, 0, 0, (Addr)old);
        VG_(free)(b);
        VG_(cli_free)(old);
        return NULL;
    }
    void *p = (SSizeT)n < 0 ? NULL : VG_(cli_malloc)(VG_(clo_alignment), n);
    if (!p) {
        event_alloc(tid, K_REALLOC, 0, n, 0, (Addr)old);
        return NULL;
    }
    VG_(memcpy)(p, old, b->size < n ? b->size : n);
    VG_(HT_remove)(blocks, (UWord)old);
    b->key = (UWord)p;
    b->size = n;
    VG_(HT_add_node)(blocks, b);
    event_alloc(tid, K_REALLOC, (Addr)p, n, 0, (Addr)old);
    VG_(cli_free)(old);
    return p;
}

static SizeT hl_usable_size(ThreadId tid, void *p) {
    block_t *b = VG_(HT_lookup)(blocks, (UWord)p);
    if (!b) return 0;
    /* the trace's usable size: max(16, size rounded up to 16) */
    SizeT u = (b->size + 15) & ~(SizeT)15;
    if (u < 16) u = 16;
    SizeT real = VG_(cli_malloc_usable_size)(p);
    return u < real ? u : real;
}

/* ---------------------------------------------------------------- instrumentation */

#define mkU64(n)       IRExpr_Const(IRConst_U64(n))
#define mkexpr(t)      IRExpr_RdTmp(t)
#define binop(o, a, b) IRExpr_Binop((o), (a), (b))
#define assign(t, e)   IRStmt_WrTmp((t), (e))
#define HWORD(p)       mkIRExpr_HWord((HWord)(p))

/* One access of a guarded load or store, or of a guarded dirty helper,
 * appended by a (guarded) call as an SREF: rare on amd64. */
static VG_REGPARM(3) void hl_put_sref(Addr a, UWord bits, UWord size) {
    ULong *p = buf_cur;
    p[0] = (a & HLVG_ADDR_MASK) | bits;
    p[1] = size;
    buf_cur = p + 2;
}

typedef struct {
    IRSB *sb;
    Bool started; /* the superblock's prologue (buffer check, loads) is out */
    IRTemp cur;   /* buf_cur at the last reload */
    UInt off;     /* bytes written after cur since */
    IRTemp ic[2]; /* icount[part] at the prologue */
    ULong k[2];   /* instructions counted since the prologue, per part */
    ULong k_insn; /* application instructions before the current one */
    ULong base_k; /* k_insn of the last TIME word */
    UInt mark;    /* of the current instruction */
    UInt reserve; /* words the superblock may stream */
} ins_t;

static IRTemp new_temp(ins_t *s) {
    return newIRTemp(s->sb->tyenv, Ity_I64);
}

static void add(ins_t *s, IRStmt *st) {
    addStmtToIRSB(s->sb, st);
}

static IRTemp load64(ins_t *s, void *p) {
    IRTemp t = new_temp(s);
    add(s, assign(t, IRExpr_Load(Iend_LE, Ity_I64, HWORD(p))));
    return t;
}

/* cur + off, the address of the next word. */
static IRExpr *slot(ins_t *s) {
    if (!s->off) return mkexpr(s->cur);
    IRTemp a = new_temp(s);
    add(s, assign(a, binop(Iop_Add64, mkexpr(s->cur), mkU64(s->off))));
    return mkexpr(a);
}

/* Record mode: a TIME word for the instruction k_insn of the superblock. */
static void time_word(ins_t *s) {
    if (HL_MEASURE) return;
    IRTemp t = new_temp(s), w = new_temp(s);
    add(s, assign(t, binop(Iop_Add64, mkexpr(s->ic[0]), mkU64(s->k_insn))));
    add(s, assign(w, binop(Iop_Or64, mkexpr(t), mkU64(HLVG_T_TIME << HLVG_TYPE_SHIFT))));
    IRExpr *at = slot(s);
    add(s, IRStmt_Store(Iend_LE, at, mkexpr(w)));
    s->off += 8;
    s->base_k = s->k_insn;
}

/* The prologue: reserve room for the superblock's words, then load the
 * buffer pointer and the counters into temps. */
static void prologue(ins_t *s) {
    if (s->started) return;
    s->started = True;
    if (s->reserve) {
        IRTemp c0 = load64(s, &buf_cur);
        IRTemp need = new_temp(s);
        add(s, assign(need, binop(Iop_Add64, mkexpr(c0), mkU64(8ull * s->reserve))));
        IRTemp g = newIRTemp(s->sb->tyenv, Ity_I1);
        IRTemp end = load64(s, &buf_end);
        add(s, assign(g, binop(Iop_CmpLT64U, mkexpr(end), mkexpr(need))));
        IRDirty *d =
            unsafeIRDirty_0_N(0, "hl_flush", VG_(fnptr_to_fnentry)(&hl_flush), mkIRExprVec_0());
        d->guard = mkexpr(g);
        d->mFx = Ifx_Modify;
        d->mAddr = HWORD(&buf_cur);
        d->mSize = 8;
        add(s, IRStmt_Dirty(d));
    }
    s->cur = load64(s, &buf_cur);
    s->off = 0;
    s->ic[0] = load64(s, &icount[0]);
    s->ic[1] = HL_MEASURE ? load64(s, &icount[1]) : IRTemp_INVALID;
    s->k[0] = s->k[1] = 0;
    s->k_insn = 0;
    if (s->reserve) time_word(s);
}

/* Brings buf_cur and the counters in memory up to date. */
static void sync(ins_t *s) {
    if (!s->started) return;
    if (s->off) {
        IRTemp t = new_temp(s);
        add(s, assign(t, binop(Iop_Add64, mkexpr(s->cur), mkU64(s->off))));
        add(s, IRStmt_Store(Iend_LE, HWORD(&buf_cur), mkexpr(t)));
    }
    for (int p = 0; p < 1 + HL_MEASURE; p++) {
        if (!s->k[p]) continue;
        IRTemp t = new_temp(s);
        add(s, assign(t, binop(Iop_Add64, mkexpr(s->ic[p]), mkU64(s->k[p]))));
        add(s, IRStmt_Store(Iend_LE, HWORD(&icount[p]), mkexpr(t)));
    }
}

/* After a helper moved buf_cur: reload it. */
static void reload(ins_t *s) {
    s->cur = load64(s, &buf_cur);
    s->off = 0;
}

/* The constant bits of a REF or SREF's first word: type, k, size code, flags. */
static ULong ref_bits(ins_t *s, Bool write, Int size, ULong type) {
    if (!HL_MEASURE && s->k_insn - s->base_k > HLVG_K_MAX) time_word(s);
    ULong k = HL_MEASURE ? 0 : s->k_insn - s->base_k;
    ULong sc = 0;
    while (sc < 6 && (1 << sc) < size)
        sc++;
    return type << HLVG_TYPE_SHIFT | k << HLVG_K_SHIFT | sc << HLVG_SC_SHIFT |
           (write ? HLVG_WRITE : 0) | (s->mark == M_ALLOC ? HLVG_ALLOC : 0);
}

/* An access of the current instruction, streamed inline: one word (a REF),
 * or two (an SREF) when its size is not a power of two up to 64. */
static void access(ins_t *s, IRExpr *addr, Int size, Bool write) {
    if (s->mark == M_SKIP) return;
    Bool plain = size >= 1 && size <= 64 && (size & (size - 1)) == 0;
    ULong bits = ref_bits(s, write, size, plain ? HLVG_T_REF : HLVG_T_SREF);
    IRTemp m = new_temp(s), w = new_temp(s);
    add(s, assign(m, binop(Iop_And64, addr, mkU64(HLVG_ADDR_MASK))));
    add(s, assign(w, binop(Iop_Or64, mkexpr(m), mkU64(bits))));
    IRExpr *at = slot(s);
    add(s, IRStmt_Store(Iend_LE, at, mkexpr(w)));
    s->off += 8;
    if (!plain) {
        IRExpr *at2 = slot(s);
        add(s, IRStmt_Store(Iend_LE, at2, mkU64(size < 1 ? 1 : (ULong)size)));
        s->off += 8;
    }
}

/* An access that happens only if `guard` (NULL: always), through a call. */
static void access_call(ins_t *s, IRExpr *addr, Int size, Bool write, IRExpr *guard) {
    if (s->mark == M_SKIP) return;
    ULong bits = ref_bits(s, write, size, HLVG_T_SREF);
    sync(s);
    IRDirty *d = unsafeIRDirty_0_N(
        3, "hl_put_sref", VG_(fnptr_to_fnentry)(&hl_put_sref),
        mkIRExprVec_3(addr, mkIRExpr_HWord(bits), mkIRExpr_HWord(size < 1 ? 1 : (UWord)size)));
    if (guard) d->guard = guard;
    d->mFx = Ifx_Modify;
    d->mAddr = HWORD(&buf_cur);
    d->mSize = 8;
    add(s, IRStmt_Dirty(d));
    reload(s);
}

/* Accesses of one statement (0 if none), for the reserve. */
static UInt accesses_of(const IRStmt *st) {
    switch (st->tag) {
    case Ist_WrTmp:
        return st->Ist.WrTmp.data->tag == Iex_Load;
    case Ist_Store:
    case Ist_StoreG:
    case Ist_LoadG:
    case Ist_LLSC:
        return 1;
    case Ist_CAS:
        return 2;
    case Ist_Dirty: {
        const IRDirty *d = st->Ist.Dirty.details;
        if (d->mFx == Ifx_None) return 0;
        return d->mFx == Ifx_Modify ? 2 : 1;
    }
    default:
        return 0;
    }
}

static IRSB *hl_instrument(VgCallbackClosure *closure, IRSB *sbIn, const VexGuestLayout *layout,
                           const VexGuestExtents *vge, const VexArchInfo *archinfo_host,
                           IRType gWordTy, IRType hWordTy) {
    if (out_dead || !active) return sbIn;
    if (gWordTy != Ity_I64 || hWordTy != Ity_I64) VG_(tool_panic)("heaplab: 64-bit platforms only");

    /* pre-pass: does anything get instrumented, and how many accesses */
    UInt reserve = 0, mark = M_SKIP;
    Bool any = False;
    for (Int i = 0; i < sbIn->stmts_used; i++) {
        const IRStmt *st = sbIn->stmts[i];
        if (!st) continue;
        if (st->tag == Ist_IMark) {
            mark = mark_of((Addr)st->Ist.IMark.addr);
            any |= mark != M_SKIP;
        } else if (mark != M_SKIP && clo_refs) {
            reserve += accesses_of(st);
        }
    }
    if (!any) return sbIn;
    /* words: 2 per access (an SREF at most), a TIME word, and a TIME word per
     * 256 instructions (never, with Valgrind's superblocks of at most 100) */
    if (reserve) reserve = 2 * reserve + 1 + (UInt)(sbIn->stmts_used / 256) + 1;
    if (reserve > BUF_RESERVE / 2) VG_(tool_panic)("heaplab: a superblock with too many accesses");

    ins_t s;
    VG_(memset)(&s, 0, sizeof s);
    s.sb = deepCopyIRSBExceptStmts(sbIn);
    s.reserve = reserve;
    s.mark = M_SKIP;

    Int i = 0;
    while (i < sbIn->stmts_used && sbIn->stmts[i]->tag != Ist_IMark) {
        add(&s, sbIn->stmts[i]);
        i++;
    }
    for (; i < sbIn->stmts_used; i++) {
        IRStmt *st = sbIn->stmts[i];
        if (!st || st->tag == Ist_NoOp) continue;
        switch (st->tag) {
        case Ist_IMark:
            s.mark = mark_of((Addr)st->Ist.IMark.addr);
            if (s.mark != M_SKIP) {
                prologue(&s);
                UInt part = s.mark == M_ALLOC;
                s.k_insn = s.k[0];
                s.k[HL_MEASURE ? part : 0]++;
            }
            break;
        case Ist_Exit:
            sync(&s);
            break;
        case Ist_WrTmp:
            if (clo_refs && st->Ist.WrTmp.data->tag == Iex_Load) {
                const IRExpr *e = st->Ist.WrTmp.data;
                access(&s, e->Iex.Load.addr, sizeofIRType(e->Iex.Load.ty), False);
            }
            break;
        case Ist_Store:
            if (clo_refs)
                access(&s, st->Ist.Store.addr,
                       sizeofIRType(typeOfIRExpr(sbIn->tyenv, st->Ist.Store.data)), True);
            break;
        case Ist_StoreG:
            if (clo_refs) {
                IRStoreG *sg = st->Ist.StoreG.details;
                access_call(&s, sg->addr, sizeofIRType(typeOfIRExpr(sbIn->tyenv, sg->data)), True,
                            sg->guard);
            }
            break;
        case Ist_LoadG:
            if (clo_refs) {
                IRLoadG *lg = st->Ist.LoadG.details;
                IRType ty = Ity_INVALID, tyw = Ity_INVALID;
                typeOfIRLoadGOp(lg->cvt, &tyw, &ty);
                access_call(&s, lg->addr, sizeofIRType(ty), False, lg->guard);
            }
            break;
        case Ist_CAS:
            if (clo_refs) {
                IRCAS *cas = st->Ist.CAS.details;
                Int sz = sizeofIRType(typeOfIRExpr(sbIn->tyenv, cas->dataLo));
                if (cas->dataHi) sz *= 2;
                access(&s, cas->addr, sz, False);
                access(&s, cas->addr, sz, True);
            }
            break;
        case Ist_LLSC:
            if (clo_refs) {
                if (st->Ist.LLSC.storedata == NULL)
                    access(&s, st->Ist.LLSC.addr,
                           sizeofIRType(typeOfIRTemp(sbIn->tyenv, st->Ist.LLSC.result)), False);
                else
                    access(&s, st->Ist.LLSC.addr,
                           sizeofIRType(typeOfIRExpr(sbIn->tyenv, st->Ist.LLSC.storedata)), True);
            }
            break;
        case Ist_Dirty:
            if (clo_refs) {
                IRDirty *d = st->Ist.Dirty.details;
                if (d->mFx != Ifx_None) {
                    Bool guarded = d->guard &&
                                   !(d->guard->tag == Iex_Const && d->guard->Iex.Const.con->Ico.U1);
                    if (d->mFx == Ifx_Read || d->mFx == Ifx_Modify) {
                        if (guarded)
                            access_call(&s, d->mAddr, d->mSize, False, d->guard);
                        else
                            access(&s, d->mAddr, d->mSize, False);
                    }
                    if (d->mFx == Ifx_Write || d->mFx == Ifx_Modify) {
                        if (guarded)
                            access_call(&s, d->mAddr, d->mSize, True, d->guard);
                        else
                            access(&s, d->mAddr, d->mSize, True);
                    }
                }
            }
            break;
        default:
            break;
        }
        add(&s, st);
    }
    sync(&s);
    return s.sb;
}

/* ---------------------------------------------------------------- client requests (measure) */

static void discard_all(void) {
    VG_(discard_translations_safely)((Addr)0x1000, ~(SizeT)0xfff, "heaplab");
}

static Bool hl_client_request(ThreadId tid, UWord *arg, UWord *ret) {
    if (!VG_IS_TOOL_USERREQ('H', 'L', arg[0])) return False;
    switch (arg[0]) {
    case HLVG_REQ_REPLAYER:
        if (!HL_MEASURE) return False;
        skip_lo = arg[1];
        skip_hi = arg[2];
        replayer_mode = True;
        active = False;
        discard_all();
        *ret = 1;
        return True;
    case HLVG_REQ_ACTIVE:
        if (!HL_MEASURE) return False;
        if (active != (arg[1] != 0)) {
            active = arg[1] != 0;
            discard_all();
        }
        *ret = 1;
        return True;
    case HLVG_REQ_EVENT: {
        if (!HL_MEASURE) return False;
        ULong *x = control(HLVG_C_EVENT, arg[1], 3);
        x[0] = arg[2];
        x[1] = arg[3] ? 1 : 0;
        x[2] = icount[1];
        *ret = 1;
        return True;
    }
    default:
        return False;
    }
}

/* ---------------------------------------------------------------- start, exec, fork, end */

static void hl_pre_syscall(ThreadId tid, UInt sysno, UWord *args, UInt nargs) {
    if (sysno == __NR_execve || sysno == __NR_execveat) {
        /* the new image replaces us without a fini: say so, and flush */
        ULong *x = control(HLVG_C_EXIT, 0, 4);
        x[0] = HLVG_EXIT_EXEC;
        x[1] = icount[0];
        x[2] = icount[1];
        x[3] = unknown_frees;
        hl_flush();
    }
}

static void hl_post_syscall(ThreadId tid, UInt sysno, UWord *args, UInt nargs, SysRes res) {}

static void hl_atfork_child(ThreadId tid) {
    /* the child is not recorded: its records would interleave with the parent's */
    out_dead = True;
    if (out_fd >= 0) VG_(close)(out_fd);
    out_fd = -1;
    if (ack_fd >= 0) VG_(close)(ack_fd);
    ack_fd = -1;
    private_buffer(); /* the ring is shared with the parent: never write there */
}

static void hl_post_clo_init(void) {
    if (!clo_out) {
        VG_(umsg)
        ("heaplab: --hl-out=PATH is required (heaplab record --refs and heaplab locality pass "
         "it)\n");
        VG_(exit)(1);
    }
    SysRes r = VG_(open)(clo_out, VKI_O_WRONLY, 0);
    if (sr_isError(r)) {
        VG_(umsg)("heaplab: cannot open %s for writing (error %lu%s)\n", clo_out, sr_Err(r),
                  sr_Err(r) == VKI_ENOENT
                      ? ": no such file; --hl-out names a FIFO or file that exists, as heaplab "
                        "record --refs makes it"
                      : "");
        VG_(exit)(1);
    }
    out_fd = VG_(safe_fd)((Int)sr_Res(r));
    if (clo_ring) {
        if (!clo_ack) {
            VG_(umsg)("heaplab: --hl-ring needs --hl-ack\n");
            VG_(exit)(1);
        }
        ring_open();
    }
    active = !HL_MEASURE || clo_start;
    if (!HL_MEASURE) blocks = VG_(HT_construct)("hl.blocks");
    ULong *x = control(HLVG_C_HELLO, HLVG_PROTOCOL, 5);
    x[0] = HL_MEASURE ? HLVG_MODE_MEASURE : HLVG_MODE_RECORD;
    x[1] = (ULong)VG_(getpid)();
    x[2] = (ULong)VG_(getppid)();
    x[3] = HL_MEASURE ? 0 : (ULong)clo_stack_depth;
    x[4] = wall_ns(VKI_CLOCK_REALTIME);
    tsc_ok = tsc_invariant();
    VG_(atfork)(NULL, NULL, hl_atfork_child);
}

static void hl_fini(Int exitcode) {
    if (out_dead) return;
    ULong *x = control(HLVG_C_EXIT, (ULong)(Long)exitcode, 4);
    x[0] = HLVG_EXIT_EXIT;
    x[1] = icount[0];
    x[2] = icount[1];
    x[3] = unknown_frees;
    hl_flush();
    VG_(close)(out_fd);
    out_fd = -1;
    if (ack_fd >= 0) VG_(close)(ack_fd);
}

static void hl_pre_clo_init(void) {
    VG_(details_name)(HL_MEASURE ? "heaplab-measure" : "heaplab");
    VG_(details_version)("0.1.0");
    VG_(details_description)
    (HL_MEASURE ? "the references of a program and its allocator, marked"
                : "heap objects and every load and store, for heaplab");
    VG_(details_copyright_author)("heaplab contributors; GNU GPL'd, as Valgrind");
    VG_(details_bug_reports_to)("the heaplab repository");
    VG_(details_avg_translation_sizeB)(600);

    VG_(basic_tool_funcs)(hl_post_clo_init, hl_instrument, hl_fini);
    VG_(needs_command_line_options)
    (hl_process_cmd_line_option, hl_print_usage, hl_print_debug_usage);
    VG_(needs_client_requests)(hl_client_request);
    VG_(needs_syscall_wrapper)(hl_pre_syscall, hl_post_syscall);
    if (!HL_MEASURE) {
        VG_(track_start_client_code)(hl_start_client_code);
        VG_(track_pre_thread_ll_create)(hl_thread_created);
        VG_(track_pre_thread_ll_exit)(hl_thread_gone);
        VG_(needs_libc_freeres)();
        VG_(needs_cxx_freeres)();
        VG_(needs_malloc_replacement)
        (hl_malloc, hl_new, hl_new_aligned, hl_new, hl_new_aligned, hl_memalign, hl_calloc, hl_free,
         hl_delete, hl_delete_aligned, hl_delete, hl_delete_aligned, hl_realloc, hl_usable_size, 0);
    }
}

VG_DETERMINE_INTERFACE_VERSION(hl_pre_clo_init)
