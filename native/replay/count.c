/*
 * count.c: instructions per allocator call, counted exactly, without
 * callgrind. Two counters, each selected by a flag:
 *
 *   --count vgcount  under `valgrind --tool=heaplab-count`
 *                 (native/vgtool/hl_count.c): the replayer registers its code,
 *                 its rp_call_* wrappers (exec.c) and the allocator entry
 *                 points its lean loop calls directly; the tool counts every
 *                 guest instruction run inside each call, outside the
 *                 replayer's own code, which is callgrind's inclusive cost of
 *                 the wrapper's callees. The replay runs its usual loop (lean
 *                 in plain mode, general in touch mode), at about the speed of
 *                 Valgrind's `none` tool.
 *
 *   --count perf  natively, from the CPU's instruction counter (perf_event_open,
 *                 user mode only), read with rdpmc just before and just after
 *                 each call:
 *
 *                   pc_malloc(n):  a = rdpmc ─ call *real.malloc ─ b = rdpmc
 *                                  instr[malloc] += b - a;  calls[malloc] += 1
 *
 *                 b - a also holds a fixed number of the wrapper's own
 *                 instructions (the tail of the first read, the call, the head
 *                 of the second). Calibration measures it per wrapper, before
 *                 the replay, by calling each wrapper with its target swapped
 *                 for a one-instruction function (`ret`): overhead = the
 *                 smallest b - a over many calls, minus that one instruction.
 *                 The figures reported are instr - calls x overhead.
 *
 * Both report `counts` in the JSON: per wrapper, calls and instructions, and
 * the replay's instructions between the START / STOP brackets main.c puts
 * around each run of ops (callgrind honours the same brackets).
 */
#define _GNU_SOURCE
#include "rp.h"

#include <errno.h>

#include "../vgtool/heaplab_vg.h"

#include <linux/perf_event.h>
#include <malloc.h>
#include <stdlib.h>
#include <string.h>

static const char *const wrapper_name[RP_W_COUNT] = {
    [RP_W_MALLOC] = "rp_call_malloc",
    [RP_W_CALLOC] = "rp_call_calloc",
    [RP_W_MEMALIGN] = "rp_call_memalign",
    [RP_W_POSIX_MEMALIGN] = "rp_call_posix_memalign",
    [RP_W_ALIGNED_ALLOC] = "rp_call_aligned_alloc",
    [RP_W_VALLOC] = "rp_call_valloc",
    [RP_W_PVALLOC] = "rp_call_pvalloc",
    [RP_W_FREE] = "rp_call_free",
    [RP_W_REALLOC_FREE] = "rp_call_realloc_free",
    [RP_W_REALLOC] = "rp_call_realloc",
};

static int counter; /* RP_COUNT_* */

__attribute__((noreturn)) static void unavailable(const char *what, const char *why) {
    rp_buf_t b;
    rp_buf_init(&b, 4096);
    rp_puts(&b, "heaplab-replay: ");
    rp_puts(&b, what);
    rp_puts(&b, ": ");
    rp_puts(&b, why);
    rp_putc(&b, '\n');
    rp_flush(&b, 2);
    rp_exit(5);
}

/* ---------------------------------------------------------------- --count vgcount */

extern char __executable_start[], etext[];

/* Slot w + 1 counts wrapper w's calls, and those of the allocator's entry
 * point the lean loop calls directly for that kind. */
static void vg_init(void) {
    hlvg_entry_t e[RP_W_COUNT + 4];
    int n = 0;
    for (int w = 0; w < RP_W_COUNT; w++)
        e[n++] = (hlvg_entry_t){(uintptr_t)rp_api_wrappers.fn[w], (unsigned long long)w + 1};
    e[n++] = (hlvg_entry_t){(uintptr_t)malloc, RP_W_MALLOC + 1};
    e[n++] = (hlvg_entry_t){(uintptr_t)calloc, RP_W_CALLOC + 1};
    e[n++] = (hlvg_entry_t){(uintptr_t)realloc, RP_W_REALLOC + 1};
    e[n++] = (hlvg_entry_t){(uintptr_t)free, RP_W_FREE + 1};
    if (!HLVG_COUNT_INIT((uintptr_t)__executable_start, (uintptr_t)etext, (uintptr_t)e, n))
        unavailable("--count vgcount", "not running under valgrind --tool=heaplab-count (run it as "
                                  "VALGRIND_LIB=build/lib/valgrind valgrind --tool=heaplab-count "
                                  "heaplab-replay --count vgcount TRACE)");
}

/* ---------------------------------------------------------------- --count perf */

static volatile struct perf_event_mmap_page *pc;

/* The counter now: the kernel's offset plus the hardware counter, read
 * under the page's sequence lock (the kernel's documented protocol). */
static inline __attribute__((always_inline)) uint64_t pmc(void) {
    uint32_t seq, idx;
    uint64_t count;
    do {
        seq = pc->lock;
        __asm__ volatile("" ::: "memory");
        idx = pc->index;
        count = (uint64_t)pc->offset;
        if (idx) {
            uint32_t lo, hi;
            __asm__ volatile("rdpmc" : "=a"(lo), "=d"(hi) : "c"(idx - 1));
            int64_t v = (int64_t)((uint64_t)hi << 32 | lo);
            unsigned sh = 64 - pc->pmc_width;
            v = (int64_t)((uint64_t)v << sh) >> sh;
            count += (uint64_t)v;
        }
        __asm__ volatile("" ::: "memory");
    } while (pc->lock != seq);
    return count;
}

/* What the perf wrappers call: the allocator's entry points, or during
 * calibration the one-instruction stub. Not const: calibration swaps it. */
typedef struct real {
    void *(*malloc)(size_t);
    void *(*calloc)(size_t, size_t);
    void *(*memalign)(size_t, size_t);
    int (*posix_memalign)(void **, size_t, size_t);
    void *(*aligned_alloc)(size_t, size_t);
    void *(*valloc)(size_t);
    void *(*pvalloc)(size_t);
    void (*free)(void *);
    void *(*realloc)(void *, size_t);
} real_t;
real_t rp_pc_real;
void rp_pc_stub(void); /* `ret`, below */
__asm__(".text\n.globl rp_pc_stub\n.type rp_pc_stub,@function\nrp_pc_stub:\n\tret\n"
        ".size rp_pc_stub,.-rp_pc_stub\n");

static uint64_t pc_instr[RP_W_COUNT], pc_calls[RP_W_COUNT], pc_overhead[RP_W_COUNT];
static uint64_t pc_total, pc_t0;
static int pc_open;

#define PC_NOINLINE __attribute__((noinline, noclone))
#define PC_END(w, a)                                                                               \
    do {                                                                                           \
        uint64_t b_ = pmc();                                                                       \
        pc_instr[w] += b_ - (a);                                                                   \
        pc_calls[w]++;                                                                             \
    } while (0)

PC_NOINLINE static void *pc_malloc(size_t n) {
    uint64_t a = pmc();
    void *p = rp_pc_real.malloc(n);
    PC_END(RP_W_MALLOC, a);
    return p;
}
PC_NOINLINE static void *pc_calloc(size_t m, size_t n) {
    uint64_t a = pmc();
    void *p = rp_pc_real.calloc(m, n);
    PC_END(RP_W_CALLOC, a);
    return p;
}
PC_NOINLINE static void *pc_memalign(size_t al, size_t n) {
    uint64_t a = pmc();
    void *p = rp_pc_real.memalign(al, n);
    PC_END(RP_W_MEMALIGN, a);
    return p;
}
PC_NOINLINE static void *pc_posix_memalign(size_t al, size_t n) {
    void *p = NULL;
    uint64_t a = pmc();
    int r = rp_pc_real.posix_memalign(&p, al, n);
    PC_END(RP_W_POSIX_MEMALIGN, a);
    return r == 0 ? p : NULL;
}
PC_NOINLINE static void *pc_aligned_alloc(size_t al, size_t n) {
    uint64_t a = pmc();
    void *p = rp_pc_real.aligned_alloc(al, n);
    PC_END(RP_W_ALIGNED_ALLOC, a);
    return p;
}
PC_NOINLINE static void *pc_valloc(size_t n) {
    uint64_t a = pmc();
    void *p = rp_pc_real.valloc(n);
    PC_END(RP_W_VALLOC, a);
    return p;
}
PC_NOINLINE static void *pc_pvalloc(size_t n) {
    uint64_t a = pmc();
    void *p = rp_pc_real.pvalloc(n);
    PC_END(RP_W_PVALLOC, a);
    return p;
}
PC_NOINLINE static void pc_free(void *q) {
    uint64_t a = pmc();
    rp_pc_real.free(q);
    PC_END(RP_W_FREE, a);
}
PC_NOINLINE static void *pc_realloc_free(void *q) {
    uint64_t a = pmc();
    void *p = rp_pc_real.realloc(q, 0);
    PC_END(RP_W_REALLOC_FREE, a);
    return p;
}
PC_NOINLINE static void *pc_realloc(void *q, size_t n) {
    uint64_t a = pmc();
    void *p = rp_pc_real.realloc(q, n);
    PC_END(RP_W_REALLOC, a);
    return p;
}

static const rp_api_t pc_api = {
    .fn = {
        [RP_W_MALLOC] = (void (*)(void))pc_malloc,
        [RP_W_CALLOC] = (void (*)(void))pc_calloc,
        [RP_W_MEMALIGN] = (void (*)(void))pc_memalign,
        [RP_W_POSIX_MEMALIGN] = (void (*)(void))pc_posix_memalign,
        [RP_W_ALIGNED_ALLOC] = (void (*)(void))pc_aligned_alloc,
        [RP_W_VALLOC] = (void (*)(void))pc_valloc,
        [RP_W_PVALLOC] = (void (*)(void))pc_pvalloc,
        [RP_W_FREE] = (void (*)(void))pc_free,
        [RP_W_REALLOC_FREE] = (void (*)(void))pc_realloc_free,
        [RP_W_REALLOC] = (void (*)(void))pc_realloc,
    }};

/* Calls every wrapper `rounds` times against the stub; keeps the smallest
 * b - a of each, less the stub's one instruction. */
static void calibrate(void) {
    real_t saved = rp_pc_real;
    void (*stub)(void) = rp_pc_stub;
    rp_pc_real = (real_t){
        (void *(*)(size_t))stub,         (void *(*)(size_t, size_t))stub,
        (void *(*)(size_t, size_t))stub, (int (*)(void **, size_t, size_t))stub,
        (void *(*)(size_t, size_t))stub, (void *(*)(size_t))stub,
        (void *(*)(size_t))stub,         (void (*)(void *))stub,
        (void *(*)(void *, size_t))stub,
    };
    for (int w = 0; w < RP_W_COUNT; w++)
        pc_overhead[w] = UINT64_MAX;
    for (int round = 0; round < 1000; round++) {
        for (int w = 0; w < RP_W_COUNT; w++) {
            uint64_t before = pc_instr[w];
            switch (w) {
            case RP_W_MALLOC: pc_malloc(16); break;
            case RP_W_CALLOC: pc_calloc(1, 16); break;
            case RP_W_MEMALIGN: pc_memalign(64, 16); break;
            case RP_W_POSIX_MEMALIGN: pc_posix_memalign(64, 16); break;
            case RP_W_ALIGNED_ALLOC: pc_aligned_alloc(64, 64); break;
            case RP_W_VALLOC: pc_valloc(16); break;
            case RP_W_PVALLOC: pc_pvalloc(16); break;
            case RP_W_FREE: pc_free(NULL); break;
            case RP_W_REALLOC_FREE: pc_realloc_free(NULL); break;
            default: pc_realloc(NULL, 16); break;
            }
            uint64_t d = pc_instr[w] - before;
            if (d < pc_overhead[w]) pc_overhead[w] = d;
        }
    }
    for (int w = 0; w < RP_W_COUNT; w++) {
        pc_overhead[w] = pc_overhead[w] ? pc_overhead[w] - 1 : 0; /* the stub's `ret` */
        pc_instr[w] = pc_calls[w] = 0;
    }
    rp_pc_real = saved;
}

/* posix_memalign's signature over exec.c's emulating wrapper */
static int emulated_posix_memalign(void **p, size_t a, size_t n) {
    *p = ((void *(*)(size_t, size_t))rp_api_wrappers.fn[RP_W_POSIX_MEMALIGN])(a, n);
    return *p ? 0 : ENOMEM;
}

static void perf_init(void) {
    char why[512];
    void *page = rp_perf_open(why, sizeof why);
    if (!page)
        unavailable("--count perf",
                    why[0] ? why : "no hardware instruction counter here (use --count vgcount)");
    pc = page;
    rp_pc_real = (real_t){malloc,  calloc, memalign, posix_memalign, aligned_alloc,
                          valloc,  pvalloc, free,    realloc};
    /* the entry points the allocator lacks: exec.c's emulating wrappers */
    const rp_api_t *w = &rp_api_wrappers;
    typedef void *(*f2_t)(size_t, size_t);
    typedef void *(*f1_t)(size_t);
    if (rp_emulated & RP_EMU_MEMALIGN) rp_pc_real.memalign = (f2_t)w->fn[RP_W_MEMALIGN];
    if (rp_emulated & RP_EMU_POSIX_MEMALIGN) rp_pc_real.posix_memalign = emulated_posix_memalign;
    if (rp_emulated & RP_EMU_ALIGNED_ALLOC)
        rp_pc_real.aligned_alloc = (f2_t)w->fn[RP_W_ALIGNED_ALLOC];
    if (rp_emulated & RP_EMU_VALLOC) rp_pc_real.valloc = (f1_t)w->fn[RP_W_VALLOC];
    if (rp_emulated & RP_EMU_PVALLOC) rp_pc_real.pvalloc = (f1_t)w->fn[RP_W_PVALLOC];
    calibrate();
    rp_use_api(&pc_api);
}

/* ---------------------------------------------------------------- the interface */

void rp_count_init(int c) {
    counter = c;
    if (c == RP_COUNT_VG)
        vg_init();
    else if (c == RP_COUNT_PERF)
        perf_init();
}

void rp_count_start(void) {
    if (counter != RP_COUNT_PERF || pc_open) return;
    pc_open = 1;
    pc_t0 = pmc();
}

void rp_count_stop(void) {
    if (counter != RP_COUNT_PERF || !pc_open) return;
    pc_total += pmc() - pc_t0;
    pc_open = 0;
}

static void put_entry(rp_buf_t *out, int *first, int w, uint64_t calls, uint64_t instr) {
    if (!*first) rp_putc(out, ',');
    *first = 0;
    rp_puts(out, "{\"entry\":");
    rp_put_jstr(out, wrapper_name[w]);
    rp_puts(out, ",\"calls\":");
    rp_putu(out, calls);
    rp_puts(out, ",\"instructions\":");
    rp_putu(out, instr);
    rp_putc(out, '}');
}

void rp_count_report(rp_buf_t *out, int *first) {
    rp_key(out, first, "counts");
    if (counter == RP_COUNT_NONE) {
        rp_puts(out, "null");
        return;
    }
    int g = 1, e = 1;
    rp_putc(out, '{');
    rp_key(out, &g, "counter");
    if (counter == RP_COUNT_VG) {
        hlvg_counts_t c;
        memset(&c, 0, sizeof c);
        int got = HLVG_COUNT_READ((uintptr_t)&c, sizeof c);
        if (got != (int)sizeof c || c.version != HLVG_COUNT_VERSION)
            unavailable("--count vgcount", "the tool did not return its counts (a different "
                                      "heaplab-count version?)");
        uint64_t total = c.replayer;
        for (int i = 0; i < HLVG_COUNT_SLOTS; i++)
            total += c.instr[i];
        rp_put_jstr(out, "vgcount");
        rp_key(out, &g, "replay_instructions");
        rp_putu(out, total);
        rp_key(out, &g, "outside_calls");
        rp_putu(out, c.instr[0]);
        rp_key(out, &g, "entries");
        rp_putc(out, '[');
        for (int w = 0; w < RP_W_COUNT; w++)
            put_entry(out, &e, w, c.calls[w + 1], c.instr[w + 1]);
        rp_putc(out, ']');
    } else {
        rp_put_jstr(out, "perf");
        rp_key(out, &g, "replay_instructions");
        rp_putu(out, pc_total);
        rp_key(out, &g, "outside_calls");
        rp_puts(out, "null");
        rp_key(out, &g, "entries");
        rp_putc(out, '[');
        for (int w = 0; w < RP_W_COUNT; w++) {
            uint64_t fixed = pc_calls[w] * pc_overhead[w];
            put_entry(out, &e, w, pc_calls[w], pc_instr[w] > fixed ? pc_instr[w] - fixed : 0);
        }
        rp_putc(out, ']');
        rp_key(out, &g, "overhead_per_call");
        rp_putc(out, '[');
        for (int w = 0; w < RP_W_COUNT; w++) {
            if (w) rp_putc(out, ',');
            rp_putu(out, pc_overhead[w]);
        }
        rp_putc(out, ']');
    }
    rp_putc(out, '}');
}
