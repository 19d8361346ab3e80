/*
 * hl_unwind.c: a cached x86-64 call-stack walker that returns what libunwind
 * returns (hl_unwind.h).
 *
 *   caller's frame            a return address ip (= the last frame's RA)
 *   ┌──────────────┐          │
 *   │ ...          │          ▼  rules[] (2^16 words, .bss, lock-free)
 *   │ saved rbp?   │◀─ CFA+k     ┌────────────────────────────────────────────┐
 *   │ RA           │◀─ CFA-8     │ tag=ip>>16 │valid│kind│cfa base│cfa off/8│  │
 *   ├──────────────┤◀─ CFA = rsp+off or rbp+off  rbp: unchanged | at CFA+k │alt│
 *   │ callee frame │             └────────────────────────────────────────────┘
 *   └──────────────┘  sp         miss: _dl_find_object(ip-1) -> .eh_frame_hdr
 *                                -> binary search -> FDE -> CIE+FDE CFA program
 *                                run up to ip-1 -> the rule
 *
 * One step: CFA = (rsp or rbp) + off; RA = *(CFA-8); rbp = *(CFA+k) or kept;
 * rsp = CFA.  The table word holds the whole rule and enough of the address
 * to know it (the slot gives the low 16 bits, the tag the rest), so a reader
 * sees a whole entry or none: no locks, nothing to tear.  A slot's two ways
 * (i, i^1) keep two hot addresses that hash alike.
 *
 * Invariants: every stack read lies in [first SP, top of this thread's
 * stack) and each CFA is above the SP it came from; a rule is cached only if
 * it came from the module's own .eh_frame.  Frames whose rule is not of this
 * form (DW_CFA_*expression, signal frames, CFA on another register, no FDE,
 * no module) are "odd": with HL_UNWIND_LIBUNWIND the whole walk is redone by
 * libunwind from the same point, so the result is libunwind's; without it
 * the walk stops after that frame.  Like libunwind's own fast trace
 * (src/x86_64/Gtrace.c), the walk ends after a frame whose return address is
 * undefined (_start, clone3) or when a return address is below 0x4000.
 *
 * Memos of walks (hl_unwind_backtrace_memo, one table per thread): a walk is
 * a function of its start (ra, cfa, rbp where a rule uses it first), the
 * rules and the stack words it reads, so a memo keeps the start, each word
 * read (RA at CFA-8; a saved rbp only once a later rule uses it) with its
 * value, and the caller's value; it stands when every word still holds its
 * value, and the rules have not been reset since (a generation count).
 *
 *   memos[slot(ra, cfa, salt)]  two ways, the last that stood tried first
 *   ┌────────────────────────────────────────────────────────────────┐
 *   │ ra cfa rbp │ gen max use_rbp nreads mru │ value │ addr[20] val[20] │
 *   └────────────────────────────────────────────────────────────────┘
 *
 * Stack tops without allocating: another thread's stack lies below its
 * thread control block (%fs:0, glibc puts struct pthread at the top of the
 * stack mapping); the main thread's top is the end of the mapping that holds
 * __libc_stack_end, read once from /proc/self/maps with open/read.
 */
#define _GNU_SOURCE
#include "hl_unwind.h"

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <link.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#ifdef HL_UNWIND_LIBUNWIND
#define UNW_LOCAL_ONLY
#include <libunwind.h>
#endif

#if !defined(__x86_64__) || !defined(__GLIBC__) || __GLIBC__ < 2 ||                                \
    (__GLIBC__ == 2 && __GLIBC_MINOR__ < 35)
#error "hl_unwind.c: x86-64 with glibc >= 2.35 (_dl_find_object) only"
#endif

extern void *__libc_stack_end;

/* ---------------------------------------------------------------- rules */

enum { K_STD = 0, K_LAST = 1, K_ODD = 2, K_NOMOD = 3 };

typedef struct rule {
    int kind;
    int cfa_rbp;     /* CFA based on rbp (else rsp) */
    int64_t cfa_off; /* CFA = base + cfa_off */
    int rbp_saved;   /* rbp saved at CFA + rbp_off (else unchanged) */
    int64_t rbp_off;
} rule_t;

#define HL_RULE_BITS  16
#define HL_RULE_SLOTS (1u << HL_RULE_BITS)
static uint64_t rules[HL_RULE_SLOTS];

static int mode = -1; /* hl_unwind_mode_t once known */
static uint64_t n_misses, n_fallbacks;

/* word layout: [0,31) tag = ip >> 16; 31 valid; [32,34) kind; 34 cfa_rbp;
 * [35,52) cfa_off / 8; [52,62) rbp: 0 unchanged, else saved at CFA + (v-512)*8;
 * 62 alt (stored in the other way of its slot) */
static inline unsigned slot_of(uintptr_t ip) {
    return (unsigned)((ip ^ (ip >> 16)) & (HL_RULE_SLOTS - 1)); /* low 16 bits = slot ^ tag */
}

static inline uint64_t tag_of(uintptr_t ip) {
    return ((ip >> 16) & 0x7fffffffu) | (1ull << 31);
}

static uint64_t encode(uintptr_t ip, const rule_t *r) {
    if (ip >> 47) return 0;
    uint64_t w = tag_of(ip) | (uint64_t)r->kind << 32;
    if (r->kind != K_STD) return w;
    if (r->cfa_off <= 0 || (r->cfa_off & 7) || r->cfa_off >= (8ll << 17)) return 0;
    w |= (uint64_t)r->cfa_rbp << 34 | (uint64_t)(r->cfa_off >> 3) << 35;
    if (r->rbp_saved) {
        if (r->rbp_off & 7) return 0;
        int64_t v = r->rbp_off / 8 + 512;
        if (v < 1 || v > 1023) return 0;
        w |= (uint64_t)v << 52;
    }
    return w;
}

/* ---------------------------------------------------------------- DWARF */

static uint64_t uleb(const uint8_t **pp, const uint8_t *end) {
    const uint8_t *p = *pp;
    uint64_t v = 0;
    unsigned s = 0;
    while (p < end) {
        uint8_t b = *p++;
        if (s < 64) v |= (uint64_t)(b & 0x7f) << s;
        s += 7;
        if (!(b & 0x80)) break;
    }
    *pp = p;
    return v;
}

static int64_t sleb(const uint8_t **pp, const uint8_t *end) {
    const uint8_t *p = *pp;
    uint64_t v = 0;
    unsigned s = 0;
    uint8_t b = 0;
    while (p < end) {
        b = *p++;
        if (s < 64) v |= (uint64_t)(b & 0x7f) << s;
        s += 7;
        if (!(b & 0x80)) break;
    }
    if (s < 64 && (b & 0x40)) v |= ~0ull << s;
    *pp = p;
    return (int64_t)v;
}

/* A DW_EH_PE-encoded value; `data` is the base of datarel. -1: unsupported. */
static int read_enc(const uint8_t **pp, const uint8_t *end, uint8_t enc, uintptr_t data,
                    uintptr_t *out) {
    const uint8_t *p = *pp;
    uintptr_t at = (uintptr_t)p, v;
    if (enc == 0xff) return -1; /* omit */
    switch (enc & 0x0f) {
    case 0x00: /* absptr */
    case 0x04:
    case 0x0c:
        if (end - p < 8) return -1;
        memcpy(&v, p, 8);
        p += 8;
        break;
    case 0x01:
        v = (uintptr_t)uleb(&p, end);
        break;
    case 0x09:
        v = (uintptr_t)sleb(&p, end);
        break;
    case 0x02: {
        uint16_t x;
        if (end - p < 2) return -1;
        memcpy(&x, p, 2);
        v = x;
        p += 2;
        break;
    }
    case 0x0a: {
        int16_t x;
        if (end - p < 2) return -1;
        memcpy(&x, p, 2);
        v = (uintptr_t)(intptr_t)x;
        p += 2;
        break;
    }
    case 0x03: {
        uint32_t x;
        if (end - p < 4) return -1;
        memcpy(&x, p, 4);
        v = x;
        p += 4;
        break;
    }
    case 0x0b: {
        int32_t x;
        if (end - p < 4) return -1;
        memcpy(&x, p, 4);
        v = (uintptr_t)(intptr_t)x;
        p += 4;
        break;
    }
    default:
        return -1;
    }
    switch (enc & 0x70) {
    case 0x00:
        break;
    case 0x10:
        v += at;
        break; /* pcrel */
    case 0x30:
        v += data;
        break; /* datarel */
    default:
        return -1;
    }
    if (enc & 0x80) return -1; /* indirect: not in .eh_frame of code we walk */
    *pp = p;
    *out = v;
    return 0;
}

/* How a register is found in the caller, for the three that matter. */
enum { R_SAME = 0, R_OFFSET, R_UNDEF, R_ODD };

typedef struct cfa_state {
    int cfa_reg;
    int64_t cfa_off;
    int cfa_expr;
    int how[3]; /* rbp, rsp, ra */
    int64_t off[3];
} cfa_state_t;

#define DW_RBP 6
#define DW_RSP 7

static int reg_index(uint64_t reg, uint64_t ra_reg) {
    if (reg == DW_RBP) return 0;
    if (reg == DW_RSP) return 1;
    if (reg == ra_reg) return 2;
    return -1;
}

typedef struct cie {
    uint64_t code_align;
    int64_t data_align;
    uint64_t ra_reg;
    uint8_t fde_enc;
    int aug_z, signal;
    const uint8_t *insns, *end;
} cie_t;

static int parse_cie(const uint8_t *c, cie_t *out) {
    uint32_t len32;
    memcpy(&len32, c, 4);
    const uint8_t *p = c + 4;
    uint64_t len = len32;
    if (len32 == 0xffffffffu) {
        memcpy(&len, p, 8);
        p += 8;
        if (memcmp(p, "\0\0\0\0\0\0\0\0", 8)) return -1;
        p += 8;
    } else {
        uint32_t id;
        memcpy(&id, p, 4);
        if (id) return -1;
        p += 4;
    }
    if (len == 0) return -1;
    const uint8_t *end = c + (len32 == 0xffffffffu ? 12 : 4) + len;
    uint8_t ver = *p++;
    const char *aug = (const char *)p;
    size_t alen = strnlen(aug, (size_t)(end - p));
    p += alen + 1;
    if (aug[0] == 'e' && aug[1] == 'h') return -1; /* old GCC: not on this system */
    out->code_align = uleb(&p, end);
    out->data_align = sleb(&p, end);
    out->ra_reg = ver == 1 ? *p++ : uleb(&p, end);
    out->fde_enc = 0; /* absptr */
    out->aug_z = 0;
    out->signal = 0;
    const uint8_t *aend = NULL;
    for (size_t i = 0; i < alen; i++) {
        switch (aug[i]) {
        case 'z': {
            uint64_t n = uleb(&p, end);
            out->aug_z = 1;
            aend = p + n;
            break;
        }
        case 'R':
            out->fde_enc = *p++;
            break;
        case 'L':
            p++;
            break;
        case 'P': { /* skip the personality routine's pointer */
            uint8_t enc = (uint8_t)(*p & 0x7f);
            uintptr_t dummy;
            p++;
            if (read_enc(&p, end, enc, 0, &dummy)) return -1;
            break;
        }
        case 'S':
            out->signal = 1;
            break;
        case 'B':
            break;
        default:
            return -1;
        }
    }
    if (aend) p = aend;
    if (p > end) return -1;
    out->insns = p;
    out->end = end;
    return 0;
}

/* Runs a CFA program until the location passes pc.  0, or -1 for an
 * instruction this walker does not model at all. */
static int run_cfa(const uint8_t *p, const uint8_t *end, const cie_t *cie, uintptr_t loc,
                   uintptr_t pc, cfa_state_t *st, const cfa_state_t *init) {
    cfa_state_t stack[8];
    int depth = 0;
    while (p < end) {
        uint8_t op = *p++;
        uint64_t reg, delta;
        int64_t off;
        int ri;
        switch (op & 0xc0) {
        case 0x40:
            delta = (op & 0x3f) * cie->code_align;
            loc += delta;
            if (loc > pc) return 0;
            continue;
        case 0x80:
            reg = op & 0x3f;
            off = (int64_t)uleb(&p, end) * cie->data_align;
            ri = reg_index(reg, cie->ra_reg);
            if (ri >= 0) {
                st->how[ri] = R_OFFSET;
                st->off[ri] = off;
            }
            continue;
        case 0xc0:
            reg = op & 0x3f;
            ri = reg_index(reg, cie->ra_reg);
            if (ri >= 0) {
                if (!init) return -1;
                st->how[ri] = init->how[ri];
                st->off[ri] = init->off[ri];
            }
            continue;
        }
        switch (op) {
        case 0x00:
            break;   /* nop */
        case 0x01: { /* set_loc */
            uintptr_t v;
            if (read_enc(&p, end, cie->fde_enc, 0, &v)) return -1;
            loc = v;
            if (loc > pc) return 0;
            break;
        }
        case 0x02:
            loc += p[0] * cie->code_align;
            p += 1;
            if (loc > pc) return 0;
            break;
        case 0x03: {
            uint16_t d;
            memcpy(&d, p, 2);
            p += 2;
            loc += d * cie->code_align;
            if (loc > pc) return 0;
            break;
        }
        case 0x04: {
            uint32_t d;
            memcpy(&d, p, 4);
            p += 4;
            loc += d * cie->code_align;
            if (loc > pc) return 0;
            break;
        }
        case 0x05: /* offset_extended */
            reg = uleb(&p, end);
            off = (int64_t)uleb(&p, end) * cie->data_align;
            goto set_offset;
        case 0x11: /* offset_extended_sf */
            reg = uleb(&p, end);
            off = sleb(&p, end) * cie->data_align;
            goto set_offset;
        case 0x2f: /* GNU_negative_offset_extended */
            reg = uleb(&p, end);
            off = -(int64_t)uleb(&p, end) * cie->data_align;
        set_offset:
            ri = reg_index(reg, cie->ra_reg);
            if (ri >= 0) {
                st->how[ri] = R_OFFSET;
                st->off[ri] = off;
            }
            break;
        case 0x06: /* restore_extended */
            reg = uleb(&p, end);
            ri = reg_index(reg, cie->ra_reg);
            if (ri >= 0) {
                if (!init) return -1;
                st->how[ri] = init->how[ri];
                st->off[ri] = init->off[ri];
            }
            break;
        case 0x07: /* undefined */
        case 0x08: /* same_value */
            reg = uleb(&p, end);
            ri = reg_index(reg, cie->ra_reg);
            if (ri >= 0) st->how[ri] = op == 0x07 ? R_UNDEF : R_SAME;
            break;
        case 0x09: /* register */
            reg = uleb(&p, end);
            uleb(&p, end);
            ri = reg_index(reg, cie->ra_reg);
            if (ri >= 0) st->how[ri] = R_ODD;
            break;
        case 0x0a: /* remember_state */
            if (depth == 8) return -1;
            stack[depth++] = *st;
            break;
        case 0x0b: /* restore_state: the CFA rule too, as GCC's epilogues expect */
            if (!depth) return -1;
            *st = stack[--depth];
            break;
        case 0x0c: /* def_cfa */
            st->cfa_reg = (int)uleb(&p, end);
            st->cfa_off = (int64_t)uleb(&p, end);
            st->cfa_expr = 0;
            break;
        case 0x12: /* def_cfa_sf */
            st->cfa_reg = (int)uleb(&p, end);
            st->cfa_off = sleb(&p, end) * cie->data_align;
            st->cfa_expr = 0;
            break;
        case 0x0d: /* def_cfa_register */
            st->cfa_reg = (int)uleb(&p, end);
            st->cfa_expr = 0;
            break;
        case 0x0e: /* def_cfa_offset */
            st->cfa_off = (int64_t)uleb(&p, end);
            break;
        case 0x13: /* def_cfa_offset_sf */
            st->cfa_off = sleb(&p, end) * cie->data_align;
            break;
        case 0x0f: /* def_cfa_expression */
            delta = uleb(&p, end);
            p += delta;
            st->cfa_expr = 1;
            break;
        case 0x10: /* expression */
        case 0x16: /* val_expression */
            reg = uleb(&p, end);
            delta = uleb(&p, end);
            p += delta;
            ri = reg_index(reg, cie->ra_reg);
            if (ri >= 0) st->how[ri] = R_ODD;
            break;
        case 0x14: /* val_offset */
            reg = uleb(&p, end);
            uleb(&p, end);
            ri = reg_index(reg, cie->ra_reg);
            if (ri >= 0) st->how[ri] = R_ODD;
            break;
        case 0x15: /* val_offset_sf */
            reg = uleb(&p, end);
            sleb(&p, end);
            ri = reg_index(reg, cie->ra_reg);
            if (ri >= 0) st->how[ri] = R_ODD;
            break;
        case 0x2e: /* GNU_args_size */
            uleb(&p, end);
            break;
        default:
            return -1;
        }
    }
    return 0;
}

/* The rule for the frame whose return address is ip (looked up at ip-1,
 * inside the call, as libunwind does). */
static void compute_rule(uintptr_t ip, rule_t *r) {
    memset(r, 0, sizeof *r);
    r->kind = K_ODD;
    uintptr_t pc = ip - 1;
    struct dl_find_object dfo;
    if (_dl_find_object((void *)pc, &dfo) != 0) {
        r->kind = K_NOMOD;
        return;
    }
    const uint8_t *hdr = dfo.dlfo_eh_frame;
    if (!hdr || hdr[0] != 1) return;
    const uint8_t *p = hdr + 4, *hend = hdr + 64 + 16; /* the fixed part */
    uintptr_t ehf, count;
    if (read_enc(&p, hend, hdr[1], (uintptr_t)hdr, &ehf)) return;
    if (read_enc(&p, hend, hdr[2], (uintptr_t)hdr, &count)) return;
    if (hdr[3] != 0x3b || !count) return; /* datarel sdata4 pairs */
    const int32_t *tab = (const int32_t *)p;
    if (pc < (uintptr_t)hdr + (intptr_t)tab[0]) return;
    size_t lo = 0, hi = count; /* the last entry with start <= pc */
    while (hi - lo > 1) {
        size_t mid = lo + (hi - lo) / 2;
        if ((uintptr_t)hdr + (intptr_t)tab[2 * mid] <= pc)
            lo = mid;
        else
            hi = mid;
    }
    const uint8_t *fde = hdr + (intptr_t)tab[2 * lo + 1];
    uint32_t len32;
    memcpy(&len32, fde, 4);
    const uint8_t *q = fde + 4;
    uint64_t len = len32;
    if (len32 == 0xffffffffu) return; /* 64-bit DWARF: not produced for x86-64 code here */
    const uint8_t *fend = q + len;
    uint32_t cie_ptr;
    memcpy(&cie_ptr, q, 4);
    if (!cie_ptr) return;
    cie_t cie;
    if (parse_cie(q - cie_ptr, &cie)) return;
    q += 4;
    uintptr_t start, range;
    if (read_enc(&q, fend, cie.fde_enc, 0, &start)) return;
    if (read_enc(&q, fend, cie.fde_enc & 0x0f, 0, &range)) return;
    if (pc < start || pc - start >= range) return; /* in a gap: no FDE */
    if (cie.aug_z) {
        uint64_t n = uleb(&q, fend);
        q += n;
    }
    if (cie.signal) return;
    cfa_state_t st = {.cfa_reg = DW_RSP, .cfa_off = 8}, init;
    st.how[0] = st.how[1] = st.how[2] = R_SAME;
    if (run_cfa(cie.insns, cie.end, &cie, start, UINTPTR_MAX, &st, NULL)) return;
    init = st;
    if (run_cfa(q, fend, &cie, start, pc, &st, &init)) return;
    if (st.how[2] == R_UNDEF) {
        r->kind = K_LAST;
        return;
    }
    if (st.cfa_expr || (st.cfa_reg != DW_RSP && st.cfa_reg != DW_RBP)) return;
    if (st.how[2] != R_OFFSET || st.off[2] != -8) return;
    if (st.how[1] != R_SAME) return;
    if (st.how[0] != R_SAME && st.how[0] != R_OFFSET) return;
    r->kind = K_STD;
    r->cfa_rbp = st.cfa_reg == DW_RBP;
    r->cfa_off = st.cfa_off;
    r->rbp_saved = st.how[0] == R_OFFSET;
    r->rbp_off = st.off[0];
}

/* A miss: the rule from .eh_frame, cached when it can be. Returns the
 * table word (kind K_NOMOD when the address is in no module). */
static __attribute__((noinline, cold)) uint64_t lookup_slow(uintptr_t ip, rule_t *r) {
    __atomic_fetch_add(&n_misses, 1, __ATOMIC_RELAXED);
    compute_rule(ip, r);
    if (r->kind == K_NOMOD) return (uint64_t)K_NOMOD << 32;
    uint64_t w = encode(ip, r);
    if (!w) return 0; /* not encodable: the caller uses *r */
    unsigned s = slot_of(ip);
    /* the home way if it is free (empty, or another slot's overflow); else
     * the other way if that is free; else evict the home way's entry */
    uint64_t home = __atomic_load_n(&rules[s], __ATOMIC_RELAXED);
    uint64_t other = __atomic_load_n(&rules[s ^ 1], __ATOMIC_RELAXED);
    if (home && !(home >> 62 & 1) && (!other || other >> 62 & 1))
        __atomic_store_n(&rules[s ^ 1], w | 1ull << 62, __ATOMIC_RELAXED);
    else
        __atomic_store_n(&rules[s], w, __ATOMIC_RELAXED);
    return w;
}

/* The table word of ip's rule, or 0 when the rule is in *r (a miss whose
 * rule does not fit a word): the other way, then .eh_frame. */
static uint64_t lookup_rest(uintptr_t ip, rule_t *r) {
    unsigned s = slot_of(ip);
    uint64_t tag = tag_of(ip);
    uint64_t w = __atomic_load_n(&rules[s], __ATOMIC_RELAXED);
    if ((w & 0x40000000ffffffffull) == tag) return w;
    w = __atomic_load_n(&rules[s ^ 1], __ATOMIC_RELAXED);
    if ((w & 0x40000000ffffffffull) == (tag | 1ull << 62)) return w;
    return lookup_slow(ip, r);
}

static uint32_t gen; /* hl_unwind_reset's count: memos made before it are stale */

void hl_unwind_reset(void) {
    for (unsigned i = 0; i < HL_RULE_SLOTS; i++)
        __atomic_store_n(&rules[i], 0, __ATOMIC_RELAXED);
    __atomic_fetch_add(&gen, 1, __ATOMIC_RELEASE); /* every memo is stale */
}

void hl_unwind_get_stats(hl_unwind_stats_t *out) {
    out->misses = __atomic_load_n(&n_misses, __ATOMIC_RELAXED);
    out->fallbacks = __atomic_load_n(&n_fallbacks, __ATOMIC_RELAXED);
}

/* ---------------------------------------------------------------- stacks */

static uintptr_t main_hi, main_lo; /* the main thread's stack; 0: unknown */
static int main_known;             /* 0 not read, 1 read */

static uintptr_t hex(const char **pp, const char *end) {
    const char *p = *pp;
    uintptr_t v = 0;
    for (; p < end; p++) {
        int d = *p >= '0' && *p <= '9' ? *p - '0' : *p >= 'a' && *p <= 'f' ? *p - 'a' + 10 : -1;
        if (d < 0) break;
        v = v << 4 | (uintptr_t)d;
    }
    *pp = p;
    return v;
}

static void read_main_stack(void) {
    uintptr_t a = (uintptr_t)__libc_stack_end, hi = 0;
    int fd = open("/proc/self/maps", O_RDONLY | O_CLOEXEC);
    if (fd >= 0 && a) {
        char buf[4096];
        size_t have = 0;
        for (;;) {
            ssize_t n = read(fd, buf + have, sizeof buf - have);
            if (n <= 0) break;
            have += (size_t)n;
            size_t start = 0;
            for (size_t i = 0; i < have; i++) {
                if (buf[i] != '\n') continue;
                const char *p = buf + start, *e = buf + i;
                uintptr_t lo = hex(&p, e);
                if (p < e && *p == '-') {
                    p++;
                    uintptr_t h = hex(&p, e);
                    if (a >= lo && a < h) hi = h;
                }
                start = i + 1;
            }
            memmove(buf, buf + start, have - start);
            have -= start;
            if (have == sizeof buf) have = 0; /* an overlong line: drop it */
        }
    }
    if (fd >= 0) close(fd);
    struct rlimit rl;
    uintptr_t lim = 8u << 20;
    if (getrlimit(RLIMIT_STACK, &rl) == 0)
        lim = rl.rlim_cur == RLIM_INFINITY ? (uintptr_t)4 << 30 : rl.rlim_cur;
    if (lim < (1u << 20)) lim = 1u << 20;
    if (lim > (uintptr_t)4 << 30) lim = (uintptr_t)4 << 30;
    main_lo = hi > lim ? hi - lim : 0;
    __atomic_store_n(&main_hi, hi, __ATOMIC_RELAXED);
    __atomic_store_n(&main_known, 1, __ATOMIC_RELEASE);
}

/* The top of the stack that holds sp, or 0 when unknown. */
static inline uintptr_t stack_top(uintptr_t sp) {
    uintptr_t tcb;
    __asm__("mov %%fs:0, %0" : "=r"(tcb));
    if (sp < tcb && tcb - sp < ((uintptr_t)1 << 30)) return tcb;
    if (__builtin_expect(!__atomic_load_n(&main_known, __ATOMIC_ACQUIRE), 0)) read_main_stack();
    if (sp < main_hi && sp >= main_lo) return main_hi;
    return 0;
}

/* ---------------------------------------------------------------- modes */

static void say(const char *s) {
    ssize_t r = write(2, s, strlen(s));
    (void)r;
}

void hl_unwind_init(void) {
    const char *v = getenv("HEAPLAB_UNWIND");
    int m = HL_UNWIND_MODE_FAST;
    if (v && *v) {
        if (!strcmp(v, "fast")) {
            m = HL_UNWIND_MODE_FAST;
        } else if (!strcmp(v, "libunwind")) {
#ifdef HL_UNWIND_LIBUNWIND
            m = HL_UNWIND_MODE_LIBUNWIND;
#else
            say("heaplab: HEAPLAB_UNWIND=libunwind: this library is built without libunwind; using "
                "fast\n");
#endif
        } else {
            say("heaplab: HEAPLAB_UNWIND=");
            say(v);
            say(": expected fast or libunwind; using fast\n");
        }
    }
    __atomic_store_n(&mode, m, __ATOMIC_RELAXED);
}

int hl_unwind_set_mode(hl_unwind_mode_t m) {
#ifndef HL_UNWIND_LIBUNWIND
    if (m == HL_UNWIND_MODE_LIBUNWIND) return -1;
#endif
    if (m != HL_UNWIND_MODE_FAST && m != HL_UNWIND_MODE_LIBUNWIND) return -1;
    __atomic_store_n(&mode, (int)m, __ATOMIC_RELAXED);
    return 0;
}

hl_unwind_mode_t hl_unwind_mode(void) {
    if (__atomic_load_n(&mode, __ATOMIC_RELAXED) < 0) hl_unwind_init();
    return (hl_unwind_mode_t)__atomic_load_n(&mode, __ATOMIC_RELAXED);
}

const char *hl_unwind_mode_name(void) {
    return hl_unwind_mode() == HL_UNWIND_MODE_LIBUNWIND ? "libunwind" : "fast";
}

/* ---------------------------------------------------------------- libunwind */

#ifdef HL_UNWIND_LIBUNWIND
/* The walk from (ra, cfa) by libunwind: start here and skip our own frames
 * up to the caller's (its return address is ra, its SP cfa, because the
 * entry stubs jump to hl_unwind_walk_ instead of calling it). */
static __attribute__((noinline)) int lu_walk(uintptr_t *out, uintptr_t *sp, int max, uintptr_t ra,
                                             uintptr_t cfa) {
    if (max > 1024) max = 1024;
    if (!sp) {
        void *b[max + 16];
        int n = unw_backtrace(b, max + 16), i = 0, k = 0;
        while (i < n && i < 16 && (uintptr_t)b[i] != ra)
            i++;
        if (i == n || i == 16) return 0;
        while (i < n && k < max)
            out[k++] = (uintptr_t)b[i++];
        return k;
    }
    unw_context_t uc;
    unw_cursor_t cur;
    if (unw_getcontext(&uc) || unw_init_local(&cur, &uc)) return 0;
    int k = 0;
    for (int guard = 0; guard < 16 && !k; guard++) {
        unw_word_t ip, s;
        if (unw_get_reg(&cur, UNW_REG_IP, &ip) || unw_get_reg(&cur, UNW_REG_SP, &s)) return 0;
        if (ip == ra && s == cfa) {
            for (;;) {
                out[k] = ip;
                sp[k] = s;
                if (++k == max || unw_step(&cur) <= 0) return k;
                if (unw_get_reg(&cur, UNW_REG_IP, &ip) || unw_get_reg(&cur, UNW_REG_SP, &s))
                    return k;
            }
        }
        if (unw_step(&cur) <= 0) return 0;
    }
    return k;
}
#endif

/* ---------------------------------------------------------------- the walk */

/* Entered by jumps from the two stubs below, with the caller's state: its
 * return address, its stack pointer (after the return) and rbp. */
__attribute__((visibility("hidden"), used)) int
hl_unwind_walk_(uintptr_t *out, uintptr_t *sp, int max, uintptr_t ra, uintptr_t cfa, uintptr_t rbp);

/* The rule of pc when its home way does not hold it: the other way, or
 * .eh_frame (out of line: the walk's loop stays small). Returns its kind;
 * for K_STD, *r. */
static __attribute__((noinline)) int rule_rest(uintptr_t pc, rule_t *r) {
    uint64_t w = lookup_rest(pc, r);
    if (!w) return r->kind; /* a rule that does not fit a word: in *r */
    r->kind = (int)(w >> 32 & 3);
    if (r->kind == K_STD) {
        r->cfa_rbp = (int)(w >> 34 & 1);
        r->cfa_off = (int64_t)(w >> 32 & (0x1ffffu << 3));
        unsigned v = (unsigned)(w >> 52 & 0x3ff);
        r->rbp_saved = v != 0;
        r->rbp_off = ((int64_t)v - 512) * 8;
    }
    return r->kind;
}

/* What a walk read, for a memo (rec NULL: nothing kept). */
typedef struct reads {
    unsigned n;      /* words read; > HL_UNWIND_MEMO_READS: too many to keep */
    int use_rbp;     /* a rule used rbp as it was at the start */
    int ok;          /* the walk stayed in the fast form */
    uintptr_t *addr, *val;
} reads_t;

static inline __attribute__((always_inline)) void note_read(reads_t *rec, uintptr_t a,
                                                            uintptr_t v) {
    if (rec->n < HL_UNWIND_MEMO_READS) rec->addr[rec->n] = a, rec->val[rec->n] = v;
    rec->n++;
}

/* The walk (fast form) from ra/cfa/rbp, bounded by [lo, hi); with rec, every
 * stack word read. Returns the frames, or -1-n when it met an odd frame
 * after n frames (the caller falls back). Expected cost on cached rules:
 * ~3-5 ns a frame (a hash, one table load, one or two loads from the stack). */
static inline __attribute__((always_inline)) int walk_fast(uintptr_t *out, uintptr_t *sp, int max,
                                                           uintptr_t ra, uintptr_t cfa,
                                                           uintptr_t rbp, uintptr_t hi,
                                                           reads_t *rec) {
    uintptr_t lo = cfa;
    uintptr_t pc = ra, s = cfa, bp = rbp;
    uintptr_t bp_at = 0;
    int n = 0, bp_start = 1;
    if (!hi) return -1;
    for (;;) {
        if (pc < 0x4000) return n;
        out[n] = pc;
        if (sp) sp[n] = s;
        if (++n == max) return n;
        /* the hot case in one test: home way, this address, valid, K_STD
         * (the mask keeps the kind bits, which are 0 for K_STD); anything
         * else out of line */
        uint64_t w =
            __atomic_load_n(&rules[(pc ^ (pc >> 16)) & (HL_RULE_SLOTS - 1)], __ATOMIC_RELAXED);
        uintptr_t c, a = 0;
        int on_bp;
        if (__builtin_expect((w & 0x40000003ffffffffull) == ((pc >> 16) | 1ull << 31), 1)) {
            on_bp = (int)(w >> 34 & 1);
            c = (on_bp ? bp : s) + (w >> 32 & (0x1ffffu << 3));
            unsigned v = (unsigned)(w >> 52 & 0x3ff);
            if (v) a = c + (uintptr_t)(((intptr_t)v - 512) * 8);
        } else {
            rule_t r;
            int k = rule_rest(pc, &r);
            if (k == K_LAST) return n;
            if (k != K_STD) return -1 - n;
            on_bp = r.cfa_rbp;
            c = (on_bp ? bp : s) + (uintptr_t)r.cfa_off;
            if (r.rbp_saved) a = c + (uintptr_t)r.rbp_off;
        }
        if (rec && on_bp) { /* bp matters: where it came from must hold it still */
            if (bp_start)
                rec->use_rbp = 1;
            else if (bp_at)
                note_read(rec, bp_at, bp), bp_at = 0;
        }
        if (__builtin_expect(c <= s || c > hi, 0)) return -1 - n;
        if (a) {
            if (__builtin_expect(a < lo || a > hi - 8, 0)) return -1 - n;
            bp = *(const uintptr_t *)a;
            bp_start = 0;
            bp_at = a; /* a read that counts only if a later rule uses bp */
        }
        pc = *(const uintptr_t *)(c - 8);
        if (rec) note_read(rec, c - 8, pc);
        s = c;
    }
}

/* A walk that met an odd frame after n frames (n < 0: -1-n). */
static __attribute__((noinline)) int walk_odd(uintptr_t *out, uintptr_t *sp, int max, uintptr_t ra,
                                              uintptr_t cfa, int n) {
    __atomic_fetch_add(&n_fallbacks, 1, __ATOMIC_RELAXED);
#ifdef HL_UNWIND_LIBUNWIND
    (void)n;
    return lu_walk(out, sp, max, ra, cfa);
#else
    (void)max;
    n = -1 - n;
    if (!n) { /* an unknown stack: the first frame needs no read */
        out[0] = ra;
        if (sp) sp[0] = cfa;
        n = 1;
    }
    return n;
#endif
}

static inline int mode_now(void) {
    int m = __atomic_load_n(&mode, __ATOMIC_RELAXED);
    if (__builtin_expect(m < 0, 0)) {
        hl_unwind_init();
        m = __atomic_load_n(&mode, __ATOMIC_RELAXED);
    }
    return m;
}

int hl_unwind_walk_(uintptr_t *out, uintptr_t *sp, int max, uintptr_t ra, uintptr_t cfa,
                    uintptr_t rbp) {
    if (max <= 0) return 0;
    int m = mode_now();
#ifdef HL_UNWIND_LIBUNWIND
    if (m == HL_UNWIND_MODE_LIBUNWIND) return lu_walk(out, sp, max, ra, cfa);
#else
    (void)m;
#endif
    uintptr_t hi = stack_top(cfa);
    int n = sp ? walk_fast(out, sp, max, ra, cfa, rbp, hi, NULL)
               : walk_fast(out, NULL, max, ra, cfa, rbp, hi, NULL); /* (no store per frame) */
    if (__builtin_expect(n < 0, 0)) return walk_odd(out, sp, max, ra, cfa, n);
    return n;
}

/* ---------------------------------------------------------------- memos */


static inline unsigned memo_slot(const hl_unwind_memos_t *m, uintptr_t ra, uintptr_t cfa) {
    return (unsigned)((uint64_t)(ra ^ (cfa >> 3) ^ m->salt * 0xff51afd7ed558ccdull) *
                          0x9E3779B97F4A7C15ull >>
                      40) &
           m->mask;
}

/* A walk that no memo answers: made, its reads kept in e for
 * hl_unwind_memo_keep. Leaves errno as it was (a walk that meets odd frames
 * may read files or call libunwind). */
static __attribute__((noinline)) int memo_miss(uintptr_t *out, int max, hl_unwind_memos_t *m,
                                               hl_unwind_memo_t *e, uint32_t g) {
    uintptr_t ra = m->ra, cfa = m->cfa, rbp = m->rbp;
    int err = errno;
    int n;
    if (mode_now() != HL_UNWIND_MODE_FAST || !e) {
        n = hl_unwind_walk_(out, NULL, max, ra, cfa, rbp);
        errno = err;
        return n;
    }
    m->walks++;
    uintptr_t hi = stack_top(cfa);
    e->nreads = 0; /* empty until kept */
    reads_t rec = {0, 0, 1, e->addr, e->val};
    n = walk_fast(out, NULL, max, ra, cfa, rbp, hi, &rec);
    if (__builtin_expect(n < 0, 0)) {
        n = walk_odd(out, NULL, max, ra, cfa, n);
        errno = err;
        return n;
    }
    if (rec.n && rec.n <= HL_UNWIND_MEMO_READS && max <= 0xffff) {
        e->ra = ra;
        e->cfa = cfa;
        e->rbp = rbp;
        e->gen = g;
        e->max = (uint16_t)max;
        e->use_rbp = (uint8_t)rec.use_rbp;
        e->value = (uint64_t)rec.n; /* nreads, until kept */
        m->pending = e;
    }
    errno = err;
    return n;
}

/* Everything a lookup does beyond the hit of hl_unwind_memo_walk_: the
 * other way, the place of a new memo, the score; then the walk. */
static __attribute__((noinline)) int memo_walk_slow(void **buf, int max, hl_unwind_memos_t *m,
                                                    uint64_t *value, uint32_t g) {
    if (max <= 0) return 0;
    if (__builtin_expect(__atomic_load_n(&mode, __ATOMIC_RELAXED) != HL_UNWIND_MODE_FAST ||
                             !m->slots,
                         0))
        return memo_miss((uintptr_t *)buf, max, m, NULL, g);
    if (__builtin_expect(m->skip != 0, 0)) { /* memos stood too rarely of late */
        m->skip--;
        return memo_miss((uintptr_t *)buf, max, m, NULL, g);
    }
    uintptr_t ra = m->ra, cfa = m->cfa;
    unsigned s = memo_slot(m, ra, cfa) & ~1u;
    /* two ways, s and s + 1, the one that stood last first (its number in
     * the even slot's mru): two call sites at the same depth (a loop that
     * calls malloc from two places) keep one each. (One thread's table: the
     * same cfa has the same stack top, which the walk's bounds come from.) */
    unsigned mru = m->slots[s].mru;
    for (unsigned way = 0; way < 2; way++) {
        hl_unwind_memo_t *e = &m->slots[s + (mru ^ way)];
        if (e->nreads && e->ra == ra && e->cfa == cfa && e->max == (unsigned)max && e->gen == g &&
            (!e->use_rbp || e->rbp == m->rbp)) {
            unsigned i = 0, k = e->nreads;
            while (i < k && *(const uintptr_t *)e->addr[i] == e->val[i])
                i++;
            if (__builtin_expect(i == k, 1)) {
                m->hits++;
                if (m->score < 64) m->score++;
                m->slots[s].mru = (uint8_t)(mru ^ way);
                *value = e->value;
                return -1;
            }
            m->stale++;
        }
    }
    /* the new memo: an empty way, else the one that stood less recently */
    hl_unwind_memo_t *e0 = &m->slots[s], *e1 = &m->slots[s + 1];
    unsigned w = !e0->nreads ? 0 : !e1->nreads ? 1 : mru ^ 1;
    e0->mru = (uint8_t)w; /* (kept or not, it is the one to try first) */
    /* a program whose walks from one start seldom repeat (make: one
     * allocation wrapper under ever other frames) pays for checks and kept
     * reads and gains little: after more misses than hits, plain walks for a
     * while, then the memos again */
    if (--m->score <= -16 && !m->steady) {
        m->score = 0;
        m->skip = 4096;
    }
    return memo_miss((uintptr_t *)buf, max, m, w ? e1 : e0, g);
}

/* Entered by a jump from the stub below, which left the caller's return
 * address, stack pointer and rbp in m->ra, m->cfa, m->rbp. The hit of the
 * way that stood last is a leaf with few registers (~50 instructions and
 * 6 a word read); everything else is memo_walk_slow's. */
__attribute__((visibility("hidden"), used)) int hl_unwind_memo_walk_(void **buf, int max,
                                                                     hl_unwind_memos_t *m,
                                                                     uint64_t *value);
int hl_unwind_memo_walk_(void **buf, int max, hl_unwind_memos_t *m, uint64_t *value) {
    m->pending = NULL;
    uint32_t g = __atomic_load_n(&gen, __ATOMIC_ACQUIRE);
    /* mode is HL_UNWIND_MODE_FAST (0) once known, -1 before */
    if (__builtin_expect(
            (__atomic_load_n(&mode, __ATOMIC_RELAXED) | (int)m->skip) == 0 && m->slots && max > 0,
            1)) {
        uintptr_t ra = m->ra, cfa = m->cfa;
        unsigned s = memo_slot(m, ra, cfa) & ~1u;
        const hl_unwind_memo_t *e = &m->slots[s + m->slots[s].mru];
        if (e->ra == ra && e->cfa == cfa && e->max == (unsigned)max && e->gen == g &&
            e->nreads && (!e->use_rbp || e->rbp == m->rbp)) {
            const uintptr_t *const *a = (const uintptr_t *const *)e->addr;
            unsigned i = 0, k = e->nreads;
            while (*a[i] == e->val[i])
                if (++i == k) {
                    m->hits++;
                    if (m->score < 64) m->score++;
                    *value = e->value;
                    return -1;
                }
        }
    }
    return memo_walk_slow(buf, max, m, value, g);
}

void hl_unwind_memo_keep(hl_unwind_memos_t *m, uint64_t value) {
    hl_unwind_memo_t *e = m->pending;
    if (!e) return;
    m->pending = NULL;
    e->nreads = (uint8_t)e->value;
    e->value = value;
}

int hl_unwind_rule(uintptr_t ra, hl_unwind_rule_t *out) {
    rule_t r;
    if (ra < 0x4000) return HL_UNWIND_RULE_LAST;
    uint64_t w = lookup_rest(ra, &r);
    if (w) { /* decode the table word (see encode) */
        r.kind = (int)(w >> 32 & 3);
        if (r.kind == K_STD) {
            r.cfa_rbp = (int)(w >> 34 & 1);
            r.cfa_off = (int64_t)(w >> 32 & (0x1ffffu << 3));
            unsigned v = (unsigned)(w >> 52 & 0x3ff);
            r.rbp_saved = v != 0;
            r.rbp_off = ((int64_t)v - 512) * 8;
        }
    }
    if (r.kind == K_LAST) return HL_UNWIND_RULE_LAST;
    if (r.kind != K_STD) return HL_UNWIND_RULE_ODD;
    out->cfa_rbp = r.cfa_rbp;
    out->cfa_off = r.cfa_off;
    out->rbp_saved = r.rbp_saved;
    out->rbp_off = r.rbp_off;
    return HL_UNWIND_RULE_STD;
}

uintptr_t hl_unwind_stack_top(uintptr_t sp) {
    return stack_top(sp);
}

int hl_unwind_from(uintptr_t *ip, uintptr_t *sp, int max, uintptr_t ra, uintptr_t cfa,
                   uintptr_t rbp) {
    return hl_unwind_walk_(ip, sp, max, ra, cfa, rbp);
}

/* The entry points: no frame of their own, so the walk starts at the
 * caller's return address with the caller's registers. */
_Static_assert(__builtin_offsetof(hl_unwind_memos_t, ra) == 0 &&
                   __builtin_offsetof(hl_unwind_memos_t, cfa) == 8 &&
                   __builtin_offsetof(hl_unwind_memos_t, rbp) == 16,
               "the memo stub's offsets");
__asm__(".text\n"
        ".globl hl_unwind_trace\n"
        ".hidden hl_unwind_trace\n"
        ".type hl_unwind_trace, @function\n"
        "hl_unwind_trace:\n"
        ".cfi_startproc\n"
        "  movq (%rsp), %rcx\n"
        "  leaq 8(%rsp), %r8\n"
        "  movq %rbp, %r9\n"
        "  jmp hl_unwind_walk_\n"
        ".cfi_endproc\n"
        ".size hl_unwind_trace, .-hl_unwind_trace\n"
        ".globl hl_unwind_backtrace\n"
        ".hidden hl_unwind_backtrace\n"
        ".type hl_unwind_backtrace, @function\n"
        "hl_unwind_backtrace:\n"
        ".cfi_startproc\n"
        "  movl %esi, %edx\n"
        "  xorl %esi, %esi\n"
        "  movq (%rsp), %rcx\n"
        "  leaq 8(%rsp), %r8\n"
        "  movq %rbp, %r9\n"
        "  jmp hl_unwind_walk_\n"
        ".cfi_endproc\n"
        ".size hl_unwind_backtrace, .-hl_unwind_backtrace\n"
        ".globl hl_unwind_backtrace_memo\n"
        ".hidden hl_unwind_backtrace_memo\n"
        ".type hl_unwind_backtrace_memo, @function\n"
        "hl_unwind_backtrace_memo:\n"
        ".cfi_startproc\n"
        "  movq (%rsp), %rax\n"
        "  movq %rax, 0(%rdx)\n"
        "  leaq 8(%rsp), %rax\n"
        "  movq %rax, 8(%rdx)\n"
        "  movq %rbp, 16(%rdx)\n"
        "  jmp hl_unwind_memo_walk_\n"
        ".cfi_endproc\n"
        ".size hl_unwind_backtrace_memo, .-hl_unwind_backtrace_memo\n");
