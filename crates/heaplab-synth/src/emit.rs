//! The generated C: `NAME.h` (the inlinable fast path of paper 002 §2.2 for
//! a program rebuilt with it, and the shim's hooks) and `NAME.c` (the fast
//! core's layout as tables, the general lists, the runtime every synthesized
//! allocator shares, `c/runtime.c`, and the entry points malloc, free,
//! calloc, realloc and malloc_usable_size with the fast path compiled into
//! them). Comments say which profile figures led to each decision; every
//! byte that comes from a trace goes through `heaplab_trace::escape`.

use crate::plan::core::{CoreClass, SF_MAP_MAX, SF_NCLASS, SF_NONE};
use crate::plan::{Allocator, Dispatch, ListPlan, Plan};
use heaplab_trace::escape;
use std::fmt::Write as _;

/// The runtime, copied verbatim into every `NAME.c`.
pub const RUNTIME: &str = include_str!("../c/runtime.c");

fn pct(x: f64) -> String {
    format!("{:.1}%", x * 100.0)
}

fn classes_text(l: &ListPlan) -> String {
    let c: Vec<String> = l.classes.iter().map(|s| s.to_string()).collect();
    if c.len() == 1 {
        format!("the {}-byte class", c[0])
    } else {
        format!("the {}-byte classes", c.join(" and "))
    }
}

/// Text for a C comment: trace bytes can neither end the comment, nor
/// splice a line, nor form a trigraph (`heaplab_trace::escape::c_comment`).
fn comment_safe(s: &str) -> String {
    escape::c_comment(s.as_bytes())
}

/// A one-line account of a list, for comments.
fn list_comment(p: &Plan, l: &ListPlan) -> String {
    let why: Vec<String> = p
        .classes
        .iter()
        .filter(|c| c.list == l.index)
        .map(|c| format!("{}: {}", c.size, c.why))
        .collect();
    comment_safe(&format!(
        "list {}: {} (requests of {}..{} bytes), {} of mallocs, {} of frees; {} block of {} bytes. {}",
        l.index,
        classes_text(l),
        l.range[0],
        l.range[1],
        pct(l.malloc_share),
        pct(l.free_share),
        match l.allocator {
            Allocator::Fast => "fast",
            Allocator::General => "general",
        },
        l.block_bytes,
        why.join("; ")
    ))
}

/// Wraps text into comment lines of at most `width` characters.
fn wrap(text: &str, indent: &str, width: usize) -> String {
    let mut out = String::new();
    let mut line = String::new();
    for word in text.split_whitespace() {
        if !line.is_empty() && indent.len() + line.len() + 1 + word.len() > width {
            let _ = writeln!(out, "{indent}{line}");
            line.clear();
        }
        if !line.is_empty() {
            line.push(' ');
        }
        line.push_str(word);
    }
    if !line.is_empty() {
        let _ = writeln!(out, "{indent}{line}");
    }
    out
}

/// A block comment of wrapped text at `indent`.
fn block_comment(text: &str, indent: &str) -> String {
    let body = wrap(text, &format!("{indent} * "), 96);
    format!("{indent}/*\n{body}{indent} */\n")
}

/// The range test of a list on the request size `n`.
fn range_test(l: &ListPlan) -> String {
    if l.range[0] == 0 {
        format!("n <= {}", l.range[1])
    } else if l.range[0] == l.range[1] {
        format!("n == {}", l.range[0])
    } else {
        format!("n - {} <= {}", l.range[0], l.range[1] - l.range[0])
    }
}

fn byte_table(name: &str, v: &[u8], row: usize, label: impl Fn(usize) -> String) -> String {
    let mut s = String::new();
    let _ = writeln!(s, "static const unsigned char {name}[{}] = {{", v.len());
    for (i, chunk) in v.chunks(row).enumerate() {
        let cells: Vec<String> = chunk.iter().map(|x| format!("{x:2}")).collect();
        let _ = writeln!(s, "    {}, /* {} */", cells.join(","), label(i * row));
    }
    s.push_str("};\n");
    s
}

fn u32_table(name: &str, v: &[u64]) -> String {
    let cells: Vec<String> = v.iter().map(u64::to_string).collect();
    let mut s = format!("static const uint32_t {name}[SF_NCLASS] = {{\n");
    s.push_str(&wrap(&(cells.join(", ") + ","), "    ", 96));
    s.push_str("};\n");
    s
}

/// A class of the core, for comments.
fn core_comment(c: &CoreClass) -> String {
    format!(
        "{:2}: {:5}-byte blocks, requests of {}..{}, {} blocks a {} KiB slab (up to {} KiB), {} of \
         mallocs{}",
        c.index,
        c.block_bytes,
        c.range[0],
        c.range[1],
        c.blocks_per_slab,
        c.slab_bytes / 1024,
        c.slab_max_bytes / 1024,
        pct(c.malloc_share),
        match c.list {
            Some(l) => format!(" (fast list {l})"),
            None => " (ladder)".into(),
        }
    )
}

/// The class of a request size as a chain of comparisons that a compiler
/// folds when the size is a constant (-1: not a fast class).
fn class_chain(map: &[u8]) -> String {
    let mut runs: Vec<(usize, i32)> = Vec::new(); // (last size of the run, class)
    for (n, &c) in map.iter().enumerate() {
        let c = if c == SF_NONE { -1 } else { c as i32 };
        match runs.last_mut() {
            Some(r) if r.1 == c => r.0 = n,
            _ => runs.push((n, c)),
        }
    }
    let mut s = String::new();
    for (last, c) in &runs {
        let _ = writeln!(s, "    if (n <= {last}) return {c};");
    }
    s.push_str("    return -1;\n");
    s
}

/// `NAME.h`.
pub fn header(p: &Plan, command: &str) -> String {
    let n = &p.name;
    let up = n.to_uppercase();
    let cmd = comment_safe(p.profile.commands.first().map(String::as_str).unwrap_or("?"));
    format!(
        "/*
 * {n}.h: the allocator heaplab synthesized for
 *   {cmd}
 * (paper 002, CUSTOMALLOC), and its inlinable fast path.
 *
 * Made by `{command}`; every decision and the profile figures behind it are in
 * decisions.json beside this file.
 *
 * Use it unchanged as the program's malloc:
 *     LD_PRELOAD=DIR/lib{n}.so program ...
 * or rebuild the program with it (-IDIR, link DIR/lib{n}.a) and, where the
 * size of an allocation is known when compiling, write
 * {n}_malloc(sizeof(struct foo)) and {n}_free(p): the class is a constant, and
 * what is left is paper 002 §2.2's list pop (load the head, test it, unlink)
 * or a carve from the thread's slab; free is the push.  Every miss, and
 * every other size, goes to the library's slow path.  These inline
 * functions are valid only while this library is the program's malloc.
 */
#ifndef {up}_H
#define {up}_H

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

/* {count_doc} */
#define SF_COUNT {count}
#include \"fastcore.h\"

/* The calling thread's lists (fastcore.h). */
extern __thread sf_tls_t {n}_tls __attribute__((tls_model(\"initial-exec\")));

/* The slow paths of malloc and free (in {n}.c). */
void *{n}_malloc_slow(size_t n);
void {n}_free_slow(void *p);

/* The fast class of a request size known when compiling, or -1. */
static inline __attribute__((always_inline)) int {n}_class_of_size(size_t n) {{
{chain}}}

static inline __attribute__((always_inline)) void *{n}_malloc(size_t n) {{
    if (__builtin_constant_p(n) && n <= SF_MAP_MAX) {{
        int c = {n}_class_of_size(n), fresh;
        void *p = c >= 0 ? sf_take(&{n}_tls, (unsigned)c, &fresh) : NULL;
        return p ? p : {n}_malloc_slow(n);
    }}
    return malloc(n);
}}

static inline __attribute__((always_inline)) void {n}_free(void *p) {{
    if (!sf_free_own(&{n}_tls, p)) {n}_free_slow(p);
}}

/* The size is not needed (the address says the class); kept for programs
 * written against earlier versions. */
static inline __attribute__((always_inline)) void {n}_free_sized(void *p, size_t n) {{
    (void)n;
    {n}_free(p);
}}

#ifdef HL_FRONT_H /* native/alloc/shim.c includes this header for its hooks */
#include \"hl_alloc.h\"
void {n}_front_stats(heaplab_alloc_stats_t *s);
void {n}_front_fork_child(void);
/* malloc and free are {n}.c's own: the shim's front end serves nothing. */
#define HL_FRONT_MALLOC(size)  ((void)(size), (void *)0)
#define HL_FRONT_CALLOC(size)  ((void)(size), (void *)0)
#define HL_FRONT_FREE(p)       ((void)(p), 0)
#define HL_FRONT_SLOW()        ((void)0)
#define HL_FRONT_STATS(s)      {n}_front_stats(s)
#define HL_FRONT_FORK_CHILD()  {n}_front_fork_child()
#endif

#endif /* {up}_H */
",
        command = comment_safe(command),
        chain = class_chain(&p.core.map),
        count = u8::from(p.count_calls),
        count_doc = if p.count_calls {
            "The statistics build (--count-calls): the hot paths count every call."
        } else {
            "The hot paths count nothing (heaplab_alloc_stats reports mallocs and frees as 0); \
             heaplab synth --count-calls builds the statistics version."
        },
    )
}

/// `NAME.c`.
pub fn source(p: &Plan, command: &str) -> String {
    let n = &p.name;
    let nfast = p.fast_lists();
    let ngen = p.lists.len() - nfast;
    let core = &p.core;
    let mut s = String::new();
    let u = &p.unit;
    let mut units = String::new();
    for c in &u.candidates {
        let _ = writeln!(
            units,
            " *   R = {:2}: {:2} classes in {:2} lists cover {}, waste ~{:.0} live bytes ({}), \
             ~{:.1} instructions per malloc + free",
            c.unit,
            c.kept_classes,
            c.lists,
            pct(c.covered_share),
            c.wasted_live_bytes,
            pct(c.wasted_share_of_live),
            c.estimated_instructions,
        );
    }
    let cmd = comment_safe(p.profile.commands.first().map(String::as_str).unwrap_or("?"));
    let cmd_short = escape::c_string(
        short(p.profile.commands.first().map(String::as_str).unwrap_or("?"), 60).as_bytes(),
    );
    let _ = write!(
        s,
        "/*
 * {n}.c: the allocator heaplab synthesized for
 *   {cmd}
 * from {runs} run(s) weighted equally (paper 002 §3): {allocs} allocations,
 * {frees} frees, peak live {peak} bytes, {seen} size classes at R = {unit}.
 * Made by `{command}`.
 *
 * Allocation unit: {unit} bytes, {how} ({rule}).
{units} *
 * Classes: the {kept} most frequent cover {cov} of allocations (target {target},
 * stopped by {stop}); with the classes their lists absorb, the lists serve
 * {served}.  The fast core serves {fastshare} (every size up to {fast_max} bytes
 * that no general list takes, {ncore} classes); {out} go to gnugpp as they are.
 *
 * Built with native/alloc/fastcore.c (the fast core), shim.c (the malloc
 * API under its lock, errno, fork, the memalign family; exported as
 * {n}_locked_* for the slow paths here), gnugpp.c (the general allocator),
 * platform.c (the address space and the footprint heaplab_alloc_stats()
 * reports) and pad.c.
 */
#define _GNU_SOURCE
#include \"{n}.h\"
#include \"hl_internal.h\"

#include <string.h>

#define HL_HIDDEN            __attribute__((visibility(\"hidden\")))
#define SYN_NAME             \"{n}\"
#define SYN_DESCRIPTION      \"synthesized by heaplab synth for \" {cmd_short}
#define SYN_ALLOC_SYM        hl_alloc_{n}
#define SYN_CORE             {n}_core
#define SYN_TLS              {n}_tls
#define SYN_NGEN             {ngen}
#define SYN_FAST_MAX         {fast_max}
#define SYN_GP_SBRK          {n}_gp_sbrk
#define SYN_FRONT_STATS      {n}_front_stats
#define SYN_FRONT_FORK_CHILD {n}_front_fork_child
#define SYN_MALLOC_SLOW      {n}_malloc_slow
#define SYN_FREE_SLOW        {n}_free_slow
#define SYN_LOCKED_MALLOC    {n}_locked_malloc
#define SYN_LOCKED_FREE      {n}_locked_free
#define SYN_LOCKED_CALLOC    {n}_locked_calloc
#define SYN_LOCKED_REALLOC   {n}_locked_realloc
#define SYN_LOCKED_USABLE    {n}_locked_malloc_usable_size

",
        runs = p.profile.runs,
        allocs = p.profile.allocations,
        frees = p.profile.frees,
        peak = p.profile.peak_live_bytes,
        seen = p.profile.classes_seen,
        unit = u.chosen,
        command = comment_safe(command),
        how = if u.how == "given" { "as given (--unit)" } else { "chosen from the profile" },
        rule = if u.how == "given" {
            "002 §2.1"
        } else {
            "002 §4.3: least waste, favouring the larger unit"
        },
        kept = p.selection.kept,
        cov = pct(p.selection.covered_share),
        served = pct(p.selection.served_share),
        target = pct(p.selection.coverage_target),
        stop = p.selection.stopped_by,
        fastshare = pct(p.selection.fast_share),
        fast_max = core.fast_max_bytes,
        ncore = core.classes.len(),
        out = pct(p.selection.outlier_share),
    );

    // ---- the fast core's layout ----
    s.push_str(&block_comment(
        "The fast core's classes (native/alloc/fastcore.h): the fast lists' blocks, exact to 16 \
         bytes, and a ladder for every other size, so that a size the training runs never asked \
         for is as fast as one they did. Each block lies in its class's span of the thread's \
         slot, so free needs no header. A slab holds the blocks a thread carves at a time; an \
         empty one goes back to the OS.",
        "",
    ));
    for c in &core.classes {
        let _ = writeln!(s, "/* {} */", comment_safe(&core_comment(c)));
    }
    let mut blocks: Vec<u64> = core.classes.iter().map(|c| c.block_bytes).collect();
    let mut slabs: Vec<u64> = core.classes.iter().map(|c| c.slab_bytes).collect();
    let mut slab_max: Vec<u64> = core.classes.iter().map(|c| c.slab_max_bytes).collect();
    blocks.resize(64, 0);
    slabs.resize(64, 0);
    slab_max.resize(64, 0);
    s.push_str(&u32_table("syn_block", &blocks));
    s.push_str(&u32_table("syn_slab", &slabs));
    s.push_str(&u32_table("syn_slab_max", &slab_max));
    let _ = writeln!(
        s,
        "\n/* The class of each request of 0 .. {SF_MAP_MAX} bytes ({SF_NONE}: none; the general \
         allocator).\n * Each thread copies it into its own map, one load away. */"
    );
    s.push_str(&byte_table("syn_map", &core.map, 16, |k| format!("{k}..{}", k + 15)));
    let _ = writeln!(
        s,
        "\n/* The class of requests of n bytes, {SF_MAP_MAX} < n <= {}, at [(n + 15) >> 4]. */",
        core.fast_max_bytes
    );
    s.push_str(&byte_table("syn_medium", &core.medium, 16, |k| {
        format!("{}..{}", (16 * k).saturating_sub(15), 16 * (k + 15))
    }));
    let _ = writeln!(
        s,
        "\n/* The order in which empty slabs are given back: decreasing\n * P_f(s)(1 - P_m(s)) * s * \
         F(s), computed when synthesizing (002 §2.2). */"
    );
    let mut order: Vec<u8> = core.reclaim_order.iter().map(|&i| i as u8).collect();
    order.resize(64, SF_NONE);
    s.push_str(&byte_table("syn_core_reclaim", &order, 16, |k| format!("{k}..")));
    let _ = write!(
        s,
        "
static sf_core_t {n}_core = {{
    .name = SYN_NAME,
    .nclass = {ncore},
    .block = syn_block,
    .slab = syn_slab,
    .slab_max = syn_slab_max,
    .map = syn_map,
    .medium = syn_medium,
    .fast_max = {fast_max},
    .reclaim_order = syn_core_reclaim,
}};

__attribute__((visibility(\"default\"), tls_model(\"initial-exec\"))) __thread sf_tls_t {n}_tls =
    SF_TLS_INIT;

",
        ncore = core.classes.len(),
        fast_max = core.fast_max_bytes,
    );

    // ---- the general lists ----
    s.push_str(&block_comment(
        "The general lists (002 §2.2): the classes whose storage the plan decided to give back. \
         Their blocks are gnugpp's; free keeps one on its list, reclaim gives listed blocks back \
         to gnugpp in the priority order below when gnugpp would otherwise grow its heap.",
        "",
    ));
    let _ = writeln!(
        s,
        "typedef struct syn_general_list {{\n    size_t block, lo, hi;\n}} syn_general_t;\n\n\
         static const syn_general_t syn_general[SYN_NGEN ? SYN_NGEN : 1] = {{"
    );
    for l in p.lists.iter().filter(|l| l.allocator == Allocator::General) {
        let _ = write!(
            s,
            "{}",
            wrap(&list_comment(p, l), "    /* ", 96).replace("\n    /* ", "\n     * ").trim_end()
        );
        let _ = writeln!(s, " */");
        let _ = writeln!(s, "    {{{}, {}, {}}},", l.block_bytes, l.range[0], l.range[1]);
    }
    if ngen == 0 {
        let _ = writeln!(s, "    {{0, 0, 0}}, /* no general lists */");
    }
    let _ = writeln!(s, "}};\n");
    let _ = writeln!(
        s,
        "/* The general list of a request, or -1 (under the lock). */\nstatic int syn_general_of(size_t n) {{"
    );
    if ngen == 0 {
        let _ = writeln!(s, "    (void)n;");
    }
    for &i in &p.dispatch.malloc_order {
        let l = &p.lists[i];
        if l.allocator == Allocator::General {
            let _ = writeln!(
                s,
                "    if ({}) return {}; /* {} of mallocs */",
                range_test(l),
                i - nfast,
                pct(l.malloc_share)
            );
        }
    }
    let _ = writeln!(s, "    return -1;\n}}\n");
    let _ = writeln!(
        s,
        "/* The general list a freed gnugpp block joins, by its usable size u, tested\n \
         * in free-frequency order; -1: back to gnugpp.  A list takes the usable\n \
         * sizes of its block: block - 16 .. block + 15 (gnugpp leaves a remainder\n \
         * under 32 bytes unsplit). */\n\
         static int syn_general_of_usable(size_t u) {{"
    );
    if ngen == 0 {
        let _ = writeln!(s, "    (void)u; /* no general lists */");
    }
    for &i in &p.dispatch.general_free_order {
        let l = &p.lists[i];
        let _ = writeln!(
            s,
            "    if (u - {} < 32) return {}; /* list {i}, {}: {} of frees */",
            l.block_bytes - 16,
            i - nfast,
            classes_text(l),
            pct(l.free_share)
        );
    }
    let _ = writeln!(s, "    return -1;\n}}\n");
    let _ = writeln!(
        s,
        "/* Reclaim order of the general lists (by index among them): decreasing\n \
         * P_f(s)(1 - P_m(s)) * s * F(s), computed when synthesizing (002 §2.2). */\n\
         static const unsigned char syn_reclaim_order[SYN_NGEN ? SYN_NGEN : 1] = {{"
    );
    if ngen == 0 {
        let _ = writeln!(s, "    0, /* no general lists */");
    }
    for &i in &p.reclaim.order {
        let l = &p.lists[i];
        let _ = writeln!(
            s,
            "    {}, /* list {i}, {}: priority {:.4} */",
            i - nfast,
            classes_text(l),
            l.reclaim_priority
        );
    }
    let _ = writeln!(s, "}};\n");
    s.push_str(RUNTIME);
    s.push_str(&entry_points(p));
    s
}

/// malloc, free, calloc, realloc and malloc_usable_size, with the fast
/// path compiled into the first three.
fn entry_points(p: &Plan) -> String {
    let n = &p.name;
    let mut s = String::new();
    s.push_str(
        "\n/* ======================================================================== */\n\
         /* The entry points (generated)                                              */\n\
         /* ======================================================================== */\n\n",
    );
    let fast: Vec<&ListPlan> = p
        .dispatch
        .malloc_order
        .iter()
        .map(|&i| &p.lists[i])
        .filter(|l| l.allocator == Allocator::Fast && l.core_class.is_some())
        .collect();
    if p.dispatch.kind == Dispatch::Ordered && !fast.is_empty() {
        s.push_str(&block_comment(
            "malloc: the fast lists tested in allocation-frequency order (002 Figure 1), then the \
             thread's size map for every other size; a pop from the thread's list of the class, \
             or a block carved from its slab: no lock, no atomic.",
            "",
        ));
        let _ = writeln!(s, "HL_EXPORT void *malloc(size_t n) {{\n    unsigned c;");
        for (k, l) in fast.iter().enumerate() {
            let _ = writeln!(
                s,
                "    {}if ({}) /* {}: {} of mallocs */\n        c = {};",
                if k == 0 { "" } else { "else " },
                range_test(l),
                classes_text(l),
                pct(l.malloc_share),
                l.core_class.unwrap_or(0)
            );
        }
        let _ = writeln!(
            s,
            "    else if (n <= SF_MAP_MAX)\n        c = {n}_tls.map[n];\n    else\n        \
             return syn_malloc_slow(n);\n    int fresh;\n    void *p = sf_take(&{n}_tls, c, \
             &fresh);\n    return HL_LIKELY(p != NULL) ? p : syn_malloc_slow(n);\n}}\n"
        );
    } else {
        s.push_str(&block_comment(
            "malloc: the class from the thread's size map (000 Figure 9; one load), or from the \
             medium table above it, a pop from the thread's list of the class (002 §2.2), or a \
             block carved from its slab: no lock, no atomic. Everything else (a new slab, sizes \
             over the fast core's, the first call of a thread) is the slow path.",
            "",
        ));
        let _ = writeln!(
            s,
            "HL_EXPORT void *malloc(size_t n) {{\n    return sf_malloc(&{n}_tls, n, syn_medium, \
             {}, syn_malloc_slow);\n}}\n",
            p.core.fast_max_bytes
        );
    }
    s.push_str(&block_comment(
        "free: the class is the block's address less the thread's slot base, shifted; a block of \
         another thread, of the general allocator, or NULL, falls outside and takes the slow path.",
        "",
    ));
    let _ = writeln!(
        s,
        "HL_EXPORT void free(void *p) {{\n    sf_free(&{n}_tls, p, syn_free_slow);\n}}\n"
    );
    s.push_str(&calloc(p));
    let _ = writeln!(
        s,
        "HL_EXPORT void *realloc(void *p, size_t n) {{\n    if (HL_LIKELY(syn_realloc_stays(p, \
         n)))\n        return p;\n    return syn_realloc_entry(p, n);\n}}\n\n\
         HL_EXPORT size_t malloc_usable_size(void *p) {{\n    return syn_usable_entry(p);\n}}"
    );
    s
}

/// Stores of 16 bytes that clear a block of `block` bytes, or `None` when
/// calloc leaves a block that large to memset.
fn zero_stores(block: u64) -> Option<u64> {
    (block <= ZERO_MAX).then_some(block / 16)
}

/// Blocks up to this many bytes are cleared inline by calloc.
const ZERO_MAX: u64 = 512;

/// calloc, with the clearing of a reused block inline: a jump by class into
/// an unrolled run of 16-byte stores (the block size is the class's).
fn calloc(p: &Plan) -> String {
    let n = &p.name;
    let mut s = block_comment(
        &format!(
            "calloc: a block carved from a slab was never used and reads as zero (fresh pages from \
             the OS); a block from a list is cleared inline, up to {ZERO_MAX} bytes: the table \
             zero_at enters an unrolled run of 16-byte stores where the class's block (16-aligned, \
             a multiple of 16) needs it, one jump where a call to memset took some 30 \
             instructions. Larger blocks go to memset."
        ),
        "",
    );
    let mut used = std::collections::BTreeSet::new();
    let mut cells = Vec::new();
    for i in 0..SF_NCLASS {
        let k = p.core.classes.get(i).and_then(|c| zero_stores(c.block_bytes));
        match k {
            Some(k) => {
                used.insert(k);
                cells.push(format!("&&z{k}"));
            }
            None => cells.push("&&zmem".to_string()),
        }
    }
    let table = wrap(&(cells.join(", ") + ","), "        ", 96);
    let _ = write!(
        s,
        "HL_EXPORT void *calloc(size_t a, size_t b) {{
    /* Per class: the first of the stores that clear its block (a class over
     * {ZERO_MAX} bytes, or with no blocks: memset). */
    static void *const zero_at[SF_NCLASS] = {{
{table}    }};
    typedef long long syn_v2 __attribute__((vector_size(16)));
    size_t n;
    if (HL_LIKELY(!__builtin_mul_overflow(a, b, &n) && n <= SF_MAP_MAX)) {{
        uintptr_t c = {n}_tls.map[n];
        void **p = (void **){n}_tls.head[c];
        if (HL_LIKELY(p != NULL)) {{
            {n}_tls.head[c] = *p;
            SF_COUNTED({n}_tls.mallocs);
            syn_v2 *q = (syn_v2 *)p, z = {{0, 0}};
            __asm__(\"\" : \"+x\"(z)); /* one register for every store */
            goto *zero_at[c];
"
    );
    let top = used.iter().max().copied().unwrap_or(0);
    for k in (1..=top).rev() {
        if used.contains(&k) {
            let _ = writeln!(s, "        z{k}:");
        }
        let _ = writeln!(s, "            q[{}] = z;", k - 1);
    }
    let _ = write!(
        s,
        "            return p;
        zmem:
            return memset(p, 0, n);
        }}
        uintptr_t x = (uintptr_t){n}_tls.carve[c] - {n}_tls.bsize[c];
        if (HL_LIKELY(x >= (uintptr_t){n}_tls.floor[c])) {{
            __asm__(\"\" : \"+r\"(c)); /* as in fastcore.h's sf_carve */
            {n}_tls.carve[c] = (char *)x;
            SF_COUNTED({n}_tls.mallocs);
            return (void *)x;
        }}
    }}
    return syn_calloc_slow(a, b);
}}

"
    );
    s
}

fn short(s: &str, max: usize) -> String {
    if s.chars().count() <= max {
        s.to_string()
    } else {
        let t: String = s.chars().take(max - 3).collect();
        format!("{t}...")
    }
}
