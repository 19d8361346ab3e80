/*
 * hl_count.c: heaplab's counting tool (--tool=heaplab-count). It counts the
 * guest instructions of each allocator call a replay makes, exactly, and
 * nothing else: no stream, no cache or call-graph simulation. It runs about
 * as fast as Valgrind's `none` tool, where callgrind, which keeps a shadow
 * call stack and a cost centre per function, runs ten times slower.
 *
 * The replayer (`heaplab-replay --count vgcount`, native/replay/count.c)
 * tells it, with one client request (HLVG_COUNT_INIT), where its own code is
 * and the entries through which it calls the allocator, each with the slot
 * that counts it: its wrappers (rp_call_malloc, rp_call_free, ...; heaplab
 * compare reads callgrind's inclusive cost of their callees the same way),
 * and the allocator's own malloc, calloc, realloc and free, which its lean
 * loop calls directly. Every instruction is then classed when it is
 * translated, by its address:
 *
 *   class     where                                   at run time
 *   ENTRY s   the first instruction of a wrapper      cur = s, calls[s] += 1
 *   WRAP      the rest of a wrapper's code            replayer += 1
 *   OTHER     the rest of the replayer's code         cur = 0, replayer += 1
 *   DENTRY s  the first instruction of an entry       if cur == 0: cur = s,
 *             outside the replayer (malloc ...)         calls[s] += 1;
 *                                                     then as ALLOC
 *   ALLOC     everything else (the allocator, libc,   instr[cur] += 1
 *             the dynamic linker, the vDSO)
 *
 * so that every instruction run from an entry until the replayer's loop runs
 * again, outside the replayer's code, is the cost of that call: the
 * allocator and whatever it calls, inclusive, as callgrind counts an arc. (A
 * DENTRY reached inside a call, calloc calling malloc, is part of that
 * call.) The allocator's instructions all go to one counter, alloc_total,
 * and are shared out only when `cur` changes (once or twice per call, in
 * the replayer's code): the instructions since the last change belong to
 * the slot that was current. Within a superblock the counts are summed when
 * it is translated and added in memory only before each exit, before a
 * change of `cur`, and at its end, so a superblock of the allocator pays one
 * constant-address add per exit:
 *
 *   superblock  ─▶ [ALLOC ALLOC ALLOC] [OTHER] [ENTRY 3] [ALLOC ALLOC] exit
 *   adds        ─▶  alloc_total += 3   instr[cur] += alloc_total - mark,
 *                                      mark = alloc_total, cur = 0
 *                                               the same, then cur = 3,
 *                                               calls[3] += 1
 *                                      replayer += 2, alloc_total += 2 (at the exit)
 *
 * Invariants: every instruction executed after HLVG_COUNT_INIT is counted
 * exactly once, in `replayer` or in alloc_total, before control can leave
 * its superblock; alloc_total - mark are the instructions of slot `cur` not
 * yet in instr[cur]; `cur` is 0 whenever the replayer's loop runs (its OTHER
 * instructions reset it), and s from an entry of slot s until the loop runs
 * again (a wrapper's own code after its call is WRAP, which leaves it).
 *
 * The counts reported are those between callgrind's START_INSTRUMENTATION
 * and STOP_INSTRUMENTATION requests, which the replayer makes around each
 * run of ops for callgrind anyway: this tool honours them too, so that the
 * decoding of the trace is left out of both alike.
 */
#define HLVG_TOOL_SIDE 1
#include "heaplab_vg.h"

#include "pub_tool_basics.h"
#include "pub_tool_clreq.h"
#include "pub_tool_debuginfo.h"
#include "pub_tool_libcassert.h"
#include "pub_tool_libcbase.h"
#include "pub_tool_libcprint.h"
#include "pub_tool_machine.h"
#include "pub_tool_options.h"
#include "pub_tool_tooliface.h"
#include "pub_tool_transtab.h"

#include "callgrind.h"

/* ---------------------------------------------------------------- state */

#define SLOTS HLVG_COUNT_SLOTS

/* Read and written by generated code. */
static ULong cur;         /* the slot of the call under way: 0 none */
static ULong alloc_total; /* ALLOC instructions since the start */
static ULong mark;        /* alloc_total when cur last changed: the rest is cur's */
static ULong instr[SLOTS]; /* per slot, credited when cur changes (and when read) */
static ULong calls[SLOTS];
static ULong replayer;

/* The bracket (START / STOP_INSTRUMENTATION): sums over closed brackets,
 * and the counters as they were when the open one began. */
static Bool open_bracket;
static ULong sum_instr[SLOTS], sum_calls[SLOTS], sum_replayer;
static ULong at_instr[SLOTS], at_calls[SLOTS], at_replayer;

/* What the replayer registered. */
static Bool registered;
static Addr repl_lo, repl_hi; /* its code */
static UInt n_entries, n_slots;
static Addr entry[HLVG_COUNT_ENTRIES];
static UInt entry_slot[HLVG_COUNT_ENTRIES];
static HChar entry_fn[HLVG_COUNT_ENTRIES][128]; /* a wrapper's function name */

/* ---------------------------------------------------------------- classes */

enum { C_ALLOC, C_OTHER, C_WRAP, C_ENTRY, C_DENTRY };

/* The class of the instruction at `a`; *w gets the slot of an (D)ENTRY. */
static UInt class_of(Addr a, UInt *w) {
    if (!registered) return C_ALLOC;
    for (UInt i = 0; i < n_entries; i++)
        if (a == entry[i]) {
            *w = entry_slot[i];
            return a >= repl_lo && a < repl_hi ? C_ENTRY : C_DENTRY;
        }
    if (a < repl_lo || a >= repl_hi) return C_ALLOC;
    /* The replayer calls the allocator through its GOT (-fno-plt), never its
     * PLT; a PLT stub, if one ran, is neither the loop nor a wrapper. */
    if (VG_(DebugInfo_sect_kind)(NULL, a) == Vg_SectPLT) return C_WRAP;
    const HChar *fn;
    if (VG_(get_fnname)(VG_(current_DiEpoch)(), a, &fn))
        for (UInt i = 0; i < n_entries; i++)
            if (entry_fn[i][0] && VG_(strcmp)(fn, entry_fn[i]) == 0) return C_WRAP;
    return C_OTHER;
}

/* ---------------------------------------------------------------- instrumentation */

#define mkU64(n)       IRExpr_Const(IRConst_U64(n))
#define mkexpr(t)      IRExpr_RdTmp(t)
#define binop(o, a, b) IRExpr_Binop((o), (a), (b))
#define assign(t, e)   IRStmt_WrTmp((t), (e))
#define HWORD(p)       mkIRExpr_HWord((HWord)(p))

/* A counter kept in a temp through a superblock: loaded once, stored back
 * (base + done) before each exit, never reloaded; nothing else writes it
 * while the superblock runs. */
typedef struct {
    ULong *at;   /* &alloc_total or &replayer */
    IRTemp base; /* its value when loaded; IRTemp_INVALID: not loaded yet */
    ULong done;  /* instructions stored since */
    ULong pend;  /* instructions not yet stored */
} ctr_t;

typedef struct {
    IRSB *sb;
    ctr_t r; /* the replayer's instructions */
    ctr_t a; /* ALLOC instructions, into alloc_total */
    Int known; /* cur's value here, when the translation knows it; -1: not */
} tr_t;

static IRTemp tmp64(tr_t *t) {
    return newIRTemp(t->sb->tyenv, Ity_I64);
}

static void put(tr_t *t, IRStmt *st) {
    addStmtToIRSB(t->sb, st);
}

static IRTemp load(tr_t *t, IRExpr *addr) {
    IRTemp v = tmp64(t);
    put(t, assign(v, IRExpr_Load(Iend_LE, Ity_I64, addr)));
    return v;
}

/* *p += n (a constant). */
static void add_at(tr_t *t, ULong *p, ULong n) {
    IRTemp v = load(t, HWORD(p)), s = tmp64(t);
    put(t, assign(s, binop(Iop_Add64, mkexpr(v), mkU64(n))));
    put(t, IRStmt_Store(Iend_LE, HWORD(p), mkexpr(s)));
}

static void store_ctr(tr_t *t, ctr_t *c) {
    if (!c->pend) return;
    if (c->base == IRTemp_INVALID) {
        c->base = load(t, HWORD(c->at));
        c->done = 0;
    }
    c->done += c->pend;
    c->pend = 0;
    IRTemp s = tmp64(t);
    put(t, assign(s, binop(Iop_Add64, mkexpr(c->base), mkU64(c->done))));
    put(t, IRStmt_Store(Iend_LE, HWORD(c->at), mkexpr(s)));
}

/* Stores the pending counts: in the allocator's superblocks, one add and
 * one store per exit (and one load per superblock) is the whole cost. */
static void flush(tr_t *t) {
    store_ctr(t, &t->r);
    store_ctr(t, &t->a);
}

/* instr[cur] += alloc_total - mark; mark = alloc_total. Returns cur. */
static IRTemp credit(tr_t *t) {
    flush(t);
    t->a.base = IRTemp_INVALID; /* reload after: alloc_total is read here */
    IRTemp c = load(t, HWORD(&cur)), tot = load(t, HWORD(&alloc_total)), m = load(t, HWORD(&mark));
    IRTemp d = tmp64(t), off = tmp64(t), at = tmp64(t), v = tmp64(t), s = tmp64(t);
    put(t, assign(d, binop(Iop_Sub64, mkexpr(tot), mkexpr(m))));
    put(t, assign(off, binop(Iop_Shl64, mkexpr(c), IRExpr_Const(IRConst_U8(3)))));
    put(t, assign(at, binop(Iop_Add64, mkexpr(off), HWORD(instr))));
    put(t, assign(v, IRExpr_Load(Iend_LE, Ity_I64, mkexpr(at))));
    put(t, assign(s, binop(Iop_Add64, mkexpr(v), mkexpr(d))));
    put(t, IRStmt_Store(Iend_LE, mkexpr(at), mkexpr(s)));
    put(t, IRStmt_Store(Iend_LE, HWORD(&mark), mkexpr(tot)));
    return c;
}

/* The call under way becomes `slot` (0: none). */
static void set_cur(tr_t *t, UInt slot) {
    credit(t);
    put(t, IRStmt_Store(Iend_LE, HWORD(&cur), mkU64(slot)));
    t->known = (Int)slot;
}

/* if (cur == 0) { cur = slot; calls[slot] += 1; } */
static void enter_if_idle(tr_t *t, UInt slot) {
    IRTemp c = credit(t), z = newIRTemp(t->sb->tyenv, Ity_I1), nc = tmp64(t), one = tmp64(t);
    put(t, assign(z, binop(Iop_CmpEQ64, mkexpr(c), mkU64(0))));
    put(t, assign(nc, IRExpr_ITE(mkexpr(z), mkU64(slot), mkexpr(c))));
    put(t, IRStmt_Store(Iend_LE, HWORD(&cur), mkexpr(nc)));
    put(t, assign(one, IRExpr_Unop(Iop_1Uto64, mkexpr(z))));
    IRTemp n = load(t, HWORD(&calls[slot])), m = tmp64(t);
    put(t, assign(m, binop(Iop_Add64, mkexpr(n), mkexpr(one))));
    put(t, IRStmt_Store(Iend_LE, HWORD(&calls[slot]), mkexpr(m)));
    t->known = -1;
}

static IRSB *hc_instrument(VgCallbackClosure *closure, IRSB *sbIn, const VexGuestLayout *layout,
                           const VexGuestExtents *vge, const VexArchInfo *archinfo_host,
                           IRType gWordTy, IRType hWordTy) {
    if (gWordTy != Ity_I64 || hWordTy != Ity_I64)
        VG_(tool_panic)("heaplab-count: 64-bit platforms only");
    tr_t t;
    t.sb = deepCopyIRSBExceptStmts(sbIn);
    t.r = (ctr_t){&replayer, IRTemp_INVALID, 0, 0};
    t.a = (ctr_t){&alloc_total, IRTemp_INVALID, 0, 0};
    t.known = -1;
    for (Int i = 0; i < sbIn->stmts_used; i++) {
        IRStmt *st = sbIn->stmts[i];
        if (!st) continue;
        switch (st->tag) {
        case Ist_IMark: {
            UInt w = 0;
            switch (class_of((Addr)st->Ist.IMark.addr, &w)) {
            case C_ALLOC:
                t.a.pend++;
                break;
            case C_ENTRY:
                set_cur(&t, w);
                add_at(&t, &calls[w], 1);
                t.r.pend++;
                break;
            case C_DENTRY:
                enter_if_idle(&t, w);
                t.a.pend++;
                break;
            case C_WRAP:
                t.r.pend++;
                break;
            default: /* C_OTHER */
                if (t.known != 0) set_cur(&t, 0);
                t.r.pend++;
                break;
            }
            break;
        }
        case Ist_Exit:
            flush(&t);
            break;
        default:
            break;
        }
        put(&t, st);
    }
    flush(&t);
    return t.sb;
}

/* ---------------------------------------------------------------- client requests */

static void discard_all(void) {
    VG_(discard_translations_safely)((Addr)0x1000, ~(SizeT)0xfff, "heaplab-count");
}

/* The instructions since the last change of cur, to cur's slot. */
static void credit_now(void) {
    instr[cur] += alloc_total - mark;
    mark = alloc_total;
}

static void bracket_close(void) {
    if (!open_bracket) return;
    credit_now();
    for (UInt i = 0; i < SLOTS; i++) {
        sum_instr[i] += instr[i] - at_instr[i];
        sum_calls[i] += calls[i] - at_calls[i];
    }
    sum_replayer += replayer - at_replayer;
    open_bracket = False;
}

static Bool hc_client_request(ThreadId tid, UWord *arg, UWord *ret) {
    switch (arg[0]) {
    case VG_USERREQ__START_INSTRUMENTATION:
        if (!open_bracket) {
            credit_now();
            for (UInt i = 0; i < SLOTS; i++) {
                at_instr[i] = instr[i];
                at_calls[i] = calls[i];
            }
            at_replayer = replayer;
            open_bracket = True;
        }
        *ret = 0;
        return True;
    case VG_USERREQ__STOP_INSTRUMENTATION:
        bracket_close();
        *ret = 0;
        return True;
    case HLVG_REQ_COUNT_INIT: {
        UInt n = (UInt)arg[4];
        const hlvg_entry_t *e = (const hlvg_entry_t *)arg[3];
        Bool ok = n <= HLVG_COUNT_ENTRIES && arg[1] < arg[2];
        for (UInt i = 0; ok && i < n; i++)
            ok = e[i].slot >= 1 && e[i].slot < SLOTS;
        if (!ok) {
            VG_(umsg)("heaplab-count: a bad HLVG_COUNT_INIT (%u entries, at most %u; slots 1..%u)\n",
                      n, HLVG_COUNT_ENTRIES, SLOTS - 1);
            *ret = 0;
            return True;
        }
        repl_lo = arg[1];
        repl_hi = arg[2];
        n_entries = n;
        n_slots = 1;
        for (UInt i = 0; i < n; i++) {
            const HChar *fn;
            entry[i] = (Addr)e[i].addr;
            entry_slot[i] = (UInt)e[i].slot;
            if (entry_slot[i] + 1 > n_slots) n_slots = entry_slot[i] + 1;
            entry_fn[i][0] = 0;
            if (entry[i] < repl_lo || entry[i] >= repl_hi) continue; /* the allocator's own */
            if (VG_(get_fnname_if_entry)(VG_(current_DiEpoch)(), entry[i], &fn))
                VG_(strncpy)(entry_fn[i], fn, sizeof entry_fn[i] - 1);
            else
                VG_(umsg)("heaplab-count: no function begins at entry %u (%#lx): is the replayer "
                          "stripped? Its calls would be counted short.\n",
                          i, (unsigned long)entry[i]);
        }
        registered = True;
        cur = 0;
        discard_all(); /* the replayer's code, translated before, was classed ALLOC */
        *ret = 1;
        return True;
    }
    case HLVG_REQ_COUNT_READ: {
        hlvg_counts_t c;
        VG_(memset)(&c, 0, sizeof c);
        c.version = HLVG_COUNT_VERSION;
        c.slots = n_slots;
        Bool was_open = open_bracket;
        bracket_close(); /* counts so far, then reopen */
        c.replayer = sum_replayer;
        for (UInt i = 0; i < SLOTS; i++) {
            c.instr[i] = sum_instr[i];
            c.calls[i] = sum_calls[i];
        }
        if (was_open) {
            UWord dummy;
            UWord a[2] = {VG_USERREQ__START_INSTRUMENTATION, 0};
            hc_client_request(tid, a, &dummy);
        }
        SizeT len = arg[2] < sizeof c ? arg[2] : sizeof c;
        VG_(memcpy)((void *)arg[1], &c, len);
        *ret = len;
        return True;
    }
    default:
        return False;
    }
}

/* ---------------------------------------------------------------- start and end */

static Bool hc_process_cmd_line_option(const HChar *arg) {
    return False;
}

static void hc_print_usage(void) {
    VG_(printf)("    (none: heaplab-replay --count vgcount registers itself)\n");
}

static void hc_print_debug_usage(void) {
    VG_(printf)("    (none)\n");
}

static void hc_post_clo_init(void) {
    /* No chasing: with it, VEX may translate a short forward branch and the
     * instructions it skips as straight-line code whose effects are selected
     * afterwards (the AND/OR idiom recognition of VexControl.guest_chase), so
     * those instructions' IMarks are in the superblock whether or not they
     * run. Without it, every instruction of a superblock runs, up to the exit
     * taken; callgrind turns chasing off too. */
    VG_(clo_vex_control).guest_chase = False;
    /* No loop unrolling either: measured, a replay of perl's trace under
     * mimalloc counted 998 of its 2,425,939 malloc instructions short with
     * it (the copies of an unrolled loop body do not all carry their
     * IMarks); callgrind turns it off as well. */
    VG_(clo_vex_control).iropt_unroll_thresh = 0;
}

static void hc_fini(Int exitcode) {
    if (!registered)
        VG_(umsg)("heaplab-count: nothing counted: the program never registered (this tool counts "
                  "heaplab-replay --count vgcount)\n");
}

static void hc_pre_clo_init(void) {
    VG_(details_name)("heaplab-count");
    VG_(details_version)("0.1.0");
    VG_(details_description)("instructions per allocator call of a heaplab replay");
    VG_(details_copyright_author)("heaplab contributors; GNU GPL'd, as Valgrind");
    VG_(details_bug_reports_to)("the heaplab repository");
    VG_(details_avg_translation_sizeB)(300);

    /* Registers need be exact only at superblock ends (the default keeps
     * those an unwinder reads exact at every memory access): nothing here
     * reads guest state mid-block, and the replay runs about 20% faster.
     * Callgrind's default is the same. A --vex-iropt-register-updates option
     * still overrides it. */
    VG_(clo_vex_control).iropt_register_updates_default = VG_(clo_px_file_backed) =
        VexRegUpdSpAtMemAccess;

    VG_(basic_tool_funcs)(hc_post_clo_init, hc_instrument, hc_fini);
    VG_(needs_command_line_options)
    (hc_process_cmd_line_option, hc_print_usage, hc_print_debug_usage);
    VG_(needs_client_requests)(hc_client_request);
}

VG_DETERMINE_INTERFACE_VERSION(hc_pre_clo_init)
