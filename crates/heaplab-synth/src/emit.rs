//! The generated C: `NAME.h` (the front end: per-thread lists, the dispatch,
//! and the inlinable fast path of paper 002 §2.2) and `NAME.c` (the tables,
//! the dispatch under the lock, the reclaim order, then the runtime that every
//! synthesized allocator shares, `c/runtime.c`). Comments in both say which
//! profile figures led to each decision.

use crate::plan::{tag, Allocator, Dispatch, ListPlan, Plan};
use heaplab_trace::escape;
use std::fmt::Write as _;

/// The runtime, copied verbatim at the end of every `NAME.c`.
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

/// Wraps text into ` * ` comment lines of at most `width` characters.
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

/// The range test of a list on the request size `n`, folded by the compiler
/// when `n` is a constant.
fn range_test(l: &ListPlan) -> String {
    if l.range[0] == 0 {
        format!("n <= {}", l.range[1])
    } else if l.range[0] == l.range[1] {
        format!("n == {}", l.range[0])
    } else {
        format!("n - {} <= {}", l.range[0], l.range[1] - l.range[0])
    }
}

fn shift_of(unit: u64) -> u32 {
    unit.trailing_zeros()
}

/// The size map (paper 000 Figure 9): entry k is the list of requests of
/// (k-1)·R+1 .. k·R bytes (entry 0: malloc(0)), 255 for none.
fn size_map(p: &Plan) -> Vec<u8> {
    let r = p.unit.chosen;
    let n = p.dispatch.map_entries as usize;
    let mut map = vec![255u8; n];
    for (k, e) in map.iter_mut().enumerate() {
        let hi = k as u64 * r; // the largest request of entry k
        if let Some(l) = p.lists.iter().find(|l| hi >= l.range[0] && hi <= l.range[1]) {
            *e = l.index as u8;
        }
    }
    map
}

fn map_text(name: &str, map: &[u8]) -> String {
    let mut s = String::new();
    let _ = writeln!(s, "static const unsigned char {name}[{}] = {{", map.len());
    for chunk in map.chunks(16) {
        let row: Vec<String> = chunk.iter().map(|v| format!("{v:3}")).collect();
        let _ = writeln!(s, "    {},", row.join(", "));
    }
    s.push_str("};\n");
    s
}

/// `NAME.h`.
pub fn header(p: &Plan, command: &str) -> String {
    let n = &p.name;
    let up = n.to_uppercase();
    let nfast = p.fast_lists();
    let fast: Vec<&ListPlan> = p.lists.iter().filter(|l| l.allocator == Allocator::Fast).collect();
    let mut s = String::new();
    let _ = write!(
        s,
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
 * or link it (-LDIR -l{n}, or DIR/lib{n}.a) and, where the size of an
 * allocation is known when compiling, write {n}_malloc(sizeof(struct foo)),
 * {n}_free(p) or {n}_free_sized(p, sizeof(struct foo)): the class tests fold
 * away and what is left is paper 002 §2.2's list pop (load the head, test it,
 * unlink, tag).  Every miss, and every other size, goes to malloc and free.
 * These inline functions are valid only while this library is the program's
 * malloc.
 *
 * Allocation unit {unit} bytes; {nl} lists ({nfast} fast, with per-thread free
 * lists; {ngen} general); dispatch: {disp}.
 */
#ifndef {up}_H
#define {up}_H

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define {up}_UNIT  {unit}
#define {up}_NFAST {nfast}
/* The word below a fast block's payload: list l, in use (D) or free (C). */
#define {up}_TAG_MAGIC   0x5c000000u
#define {up}_TAG_USED(l) ((uint64_t)({up}_TAG_MAGIC | (unsigned)(l) << 4 | 0xDu))
#define {up}_TAG_FREE(l) ((uint64_t)({up}_TAG_MAGIC | (unsigned)(l) << 4 | 0xCu))

/* One thread's state.  The fields above `adj` are the fast path's. */
typedef struct {n}_thread {{
    void *head[{nf1}];      /* the free list of each fast list */
    long left[{nf1}];       /* frees the list takes before it is full (cap - length) */
    char *bump[{nf1}];      /* this thread's extent of the fast heap for each list */
    char *end[{nf1}];
    unsigned long pops;    /* mallocs served from the lists without the lock */
    unsigned long carved;  /* ... and from the extents (statistics) */
    long adj[{nf1}];        /* changes to `left` made under the lock */
    int state;             /* 0 new, 1 starting, 2 with lists, 3 without */
    struct {n}_thread *next;
}} {n}_thread_t;

extern __thread {n}_thread_t {n}_tls __attribute__((tls_model(\"initial-exec\")));

/* The cold path of a thread's first miss (in {n}.c). */
void {n}_thread_start(void);

",
        cmd = comment_safe(p.profile.commands.first().map(String::as_str).unwrap_or("?")),
        command = comment_safe(command),
        unit = p.unit.chosen,
        nl = p.lists.len(),
        ngen = p.lists.len() - nfast,
        disp = match p.dispatch.kind {
            Dispatch::Sizemap => "size map (paper 000 Figure 9)",
            _ => "tests in frequency order (paper 002 Figures 1 and 3)",
        },
        nf1 = nfast.max(1),
    );
    // Block sizes and (size map) the map.
    let blocks: Vec<String> = fast.iter().map(|l| l.block_bytes.to_string()).collect();
    let _ = writeln!(
        s,
        "/* Bytes of a block of each fast list (tag + payload, a multiple of 16). */\n\
         static const unsigned short {n}_block[{}] = {{{}}};\n",
        nfast.max(1),
        if blocks.is_empty() { "0".to_string() } else { blocks.join(", ") }
    );
    if p.dispatch.kind == Dispatch::Sizemap {
        let _ = writeln!(
            s,
            "/* The size map: entry k holds the list of requests of (k-1)*{r}+1 .. k*{r}\n \
             * bytes (entry 0: malloc(0)); 255: no list.  Lists {nfast} and up are general. */\n\
             #define {up}_MAP_MAX {max}\n{map}",
            r = p.unit.chosen,
            max = p.dispatch.map_max_bytes,
            map = map_text(&format!("{n}_map"), &size_map(p)),
        );
    }
    // The pop and push.
    let _ = write!(
        s,
        "/* Inside the library, the front end carves a new block only while the shared
 * depot has none of the list to give (a hint read without the lock). */
#ifdef HL_FRONT_H
extern unsigned long {n}_depot_hint[];
#define {up}_DEPOT_EMPTY(l) (!{n}_depot_hint[l])
#else
#define {up}_DEPOT_EMPTY(l) 1
#endif

/* Pop a block of fast list l: ~8 instructions when the list has one
 * (002 §2.2's sequence), ~8 more to carve one from the thread's extent of
 * the list (so that a list's blocks lie together, as in a page of one size); NULL
 * when both are empty (malloc then takes the lock and refills).  For calloc
 * (zero = n), a block from the list has its first n bytes cleared; a block
 * carved from the extent was never used and reads as zero. */
static inline __attribute__((always_inline)) void *{n}_pop(unsigned l, size_t block, size_t zero) {{
    {n}_thread_t *t = &{n}_tls;
    void **b = (void **)t->head[l];
    if (__builtin_expect(b != NULL, 1)) {{
        t->head[l] = *b;
        ((uint64_t *)b)[-1] += 1; /* TAG_FREE(l) -> TAG_USED(l) */
        t->left[l]++;
        t->pops++;
        if (zero) memset(b, 0, zero);
        return b;
    }}
    char *x = t->bump[l];
    if ((size_t)(t->end[l] - x) >= block && {up}_DEPOT_EMPTY(l)) {{
        t->bump[l] = x + block;
        *(uint64_t *)x = {up}_TAG_USED(l);
        t->carved++;
        return x + 8;
    }}
    return NULL;
}}

/* After a miss, outside the lock: a new thread gets its lists. */
static inline void {n}_slow(void) {{
    if ({n}_tls.state == 0) {n}_thread_start();
}}

/* Push p on fast list l; 0 when the list is full or the thread has no lists
 * yet (free then takes the lock). */
static inline __attribute__((always_inline)) int {n}_push(void *p, unsigned l) {{
    {n}_thread_t *t = &{n}_tls;
    if (__builtin_expect(--t->left[l] < 0, 0)) {{
        t->left[l] = 0;
        return 0;
    }}
    ((uint64_t *)p)[-1] -= 1; /* TAG_USED(l) -> TAG_FREE(l) */
    *(void **)p = t->head[l];
    t->head[l] = p;
    return 1;
}}

"
    );
    // list_of_size (constant folding for free_sized) and try_malloc.
    let mut order: Vec<&ListPlan> = p
        .dispatch
        .malloc_order
        .iter()
        .map(|&i| &p.lists[i])
        .filter(|l| l.allocator == Allocator::Fast)
        .collect();
    if order.is_empty() {
        order = Vec::new();
    }
    let _ = writeln!(
        s,
        "/* The fast list of a request size, or -1; for sizes known when compiling. */\n\
         static inline __attribute__((always_inline)) int {n}_list_of_size(size_t n) {{"
    );
    if order.is_empty() {
        let _ = writeln!(s, "    (void)n;");
    }
    for l in &order {
        let _ = writeln!(s, "    if ({}) return {};", range_test(l), l.index);
    }
    let _ = writeln!(s, "    return -1;\n}}\n");

    let _ = writeln!(
        s,
        "/* malloc (zero = 0) or calloc (zero = n) without the lock: a block of a\n \
         * fast list, or NULL. */\n\
         static inline __attribute__((always_inline)) void *{n}_alloc(size_t n, size_t zero) {{"
    );
    if order.is_empty() {
        let _ = writeln!(
            s,
            "    (void)n;\n    (void)zero; /* no fast lists: every malloc takes the lock */"
        );
    } else if p.dispatch.kind == Dispatch::Sizemap {
        let _ = writeln!(
            s,
            "    if (__builtin_constant_p(n)) {{\n\
             \x20       int l = {n}_list_of_size(n);\n\
             \x20       return l >= 0 ? {n}_pop((unsigned)l, {n}_block[l], zero) : NULL;\n\
             \x20   }}\n\
             \x20   if (n <= {up}_MAP_MAX) {{\n\
             \x20       unsigned l = {n}_map[(n + {rm1}) >> {sh}];\n\
             \x20       if (l < {up}_NFAST) return {n}_pop(l, {n}_block[l], zero);\n\
             \x20   }}",
            rm1 = p.unit.chosen - 1,
            sh = shift_of(p.unit.chosen)
        );
    } else {
        for l in &order {
            let _ = write!(
                s,
                "{}",
                wrap(&list_comment(p, l), "    /* ", 96)
                    .replace("\n    /* ", "\n     * ")
                    .trim_end()
            );
            let _ = writeln!(s, " */");
            let _ = writeln!(
                s,
                "    if ({}) return {n}_pop({}, {}, zero);",
                range_test(l),
                l.index,
                l.block_bytes
            );
        }
    }
    let _ = writeln!(s, "    return NULL;\n}}\n");
    let _ = writeln!(
        s,
        "static inline __attribute__((always_inline)) void *{n}_try_malloc(size_t n) {{\n    \
         return {n}_alloc(n, 0);\n}}\n\n\
         static inline __attribute__((always_inline)) void *{n}_try_calloc(size_t n) {{\n    \
         return {n}_alloc(n, n);\n}}\n"
    );

    // try_free
    let _ = writeln!(
        s,
        "/* free without the lock: 1 if p was a fast block in use and its list had\n \
         * room; 0 sends it to free's locked path (general blocks, full lists). */\n\
         static inline __attribute__((always_inline)) int {n}_try_free(void *p) {{"
    );
    if order.is_empty() {
        let _ = writeln!(s, "    (void)p; /* no fast lists */");
    } else {
        let _ = writeln!(s, "    uint64_t tag = ((const uint64_t *)p)[-1];");
        if p.dispatch.kind == Dispatch::Sizemap {
            let _ = writeln!(
                s,
                "    /* TAG_USED(l) for some l < NFAST: one range test and an alignment test */\n\
                 \x20   uint64_t d = tag - {up}_TAG_USED(0);\n\
                 \x20   if (d <= ({up}_NFAST - 1) * 16u && !(d & 15)) return {n}_push(p, (unsigned)(d >> 4));"
            );
        } else {
            for &i in &p.dispatch.free_order {
                let l = &p.lists[i];
                let _ = writeln!(
                    s,
                    "    if (tag == {up}_TAG_USED({i})) return {n}_push(p, {i}); /* {}: {} of frees */",
                    classes_text(l),
                    pct(l.free_share)
                );
            }
        }
    }
    let _ = writeln!(s, "    return 0;\n}}\n");

    let _ = write!(
        s,
        "/* The inlinable API: with a constant size the tests fold to one list. */
static inline void *{n}_malloc(size_t n) {{
    void *p = {n}_try_malloc(n);
    return p ? p : malloc(n);
}}

static inline void {n}_free(void *p) {{
    if (p && {n}_try_free(p)) return;
    free(p);
}}

/* free for a block allocated with a size known when compiling: one tag test. */
static inline void {n}_free_sized(void *p, size_t n) {{
    int l = {n}_list_of_size(n);
    if (p && l >= 0 && ((const uint64_t *)p)[-1] == {up}_TAG_USED(l) && {n}_push(p, (unsigned)l)) return;
    free(p);
}}

#ifdef HL_FRONT_H /* native/alloc/shim.c includes this header as its front end */
#include \"hl_alloc.h\"
void {n}_front_stats(heaplab_alloc_stats_t *s);
void {n}_front_fork_child(void);
#define HL_FRONT_MALLOC(size)  {n}_try_malloc(size)
#define HL_FRONT_CALLOC(size)  {n}_try_calloc(size)
#define HL_FRONT_FREE(p)       {n}_try_free(p)
#define HL_FRONT_SLOW()        {n}_slow()
#define HL_FRONT_STATS(s)      {n}_front_stats(s)
#define HL_FRONT_FORK_CHILD()  {n}_front_fork_child()
#endif

#endif /* {up}_H */
"
    );
    s
}

/// `NAME.c`.
pub fn source(p: &Plan, command: &str) -> String {
    let n = &p.name;
    let up = n.to_uppercase();
    let nfast = p.fast_lists();
    let ngen = p.lists.len() - nfast;
    let mut s = String::new();
    let u = &p.unit;
    let mut units = String::new();
    for c in &u.candidates {
        let _ = writeln!(
            units,
            " *   R = {:2}: {:2} classes in {:2} lists cover {}, waste ~{:.0} live bytes ({}), \
             ~{:.1} instructions per malloc + free (dispatch {:.1})",
            c.unit,
            c.kept_classes,
            c.lists,
            pct(c.covered_share),
            c.wasted_live_bytes,
            pct(c.wasted_share_of_live),
            c.estimated_instructions,
            c.dispatch_instructions
        );
    }
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
 * {served}; the other {out} go to the general allocator as they are.
 * Fast lists take blocks from contiguous extents and never give them back;
 * general lists keep gnugpp blocks that reclaim returns to gnugpp (002 §2.2).
 *
 * Built with native/alloc/shim.c (the malloc API, the lock, errno, fork;
 * its front end is {n}.h), gnugpp.c (the general allocator), platform.c
 * (the heaps and the footprint that heaplab_alloc_stats() reports) and pad.c.
 */
#define _GNU_SOURCE
#include \"{n}.h\"
#include \"hl_internal.h\"

#include <string.h>

#define SYN_NAME             \"{n}\"
#define SYN_DESCRIPTION      \"synthesized by heaplab synth for \" {cmd_short}
#define SYN_ALLOC_SYM        hl_alloc_{n}
#define SYN_T                {n}_thread_t
#define SYN_TLS              {n}_tls
#define SYN_NFAST            {up}_NFAST
#define SYN_NLISTS           {nl}
#define SYN_NGEN             {ngen}
#define SYN_MAGIC            {up}_TAG_MAGIC
#define SYN_TAG_USED(l)      {up}_TAG_USED(l)
#define SYN_TAG_FREE(l)      {up}_TAG_FREE(l)
#define SYN_EXTENT           {extent}
#define SYN_THREAD_START     {n}_thread_start
#define SYN_FRONT_STATS      {n}_front_stats
#define SYN_FRONT_FORK_CHILD {n}_front_fork_child
#define SYN_GP_SBRK          {n}_gp_sbrk
#define SYN_DEPOT_HINT       {n}_depot_hint

__attribute__((visibility(\"default\"), tls_model(\"initial-exec\"))) __thread {n}_thread_t {n}_tls;

/* Each list: its block, the requests it serves [lo, hi], and for fast lists
 * the most blocks a thread keeps before it gives its list to the shared depot
 * (the classes' peak live objects, within {minb} blocks and {maxb} bytes). */
typedef struct syn_list {{
    size_t block, lo, hi, cap;
}} syn_list_t;

static const syn_list_t syn_lists[SYN_NLISTS ? SYN_NLISTS : 1] = {{
",
        cmd = comment_safe(p.profile.commands.first().map(String::as_str).unwrap_or("?")),
        command = comment_safe(command),
        cmd_short = escape::c_string(
            short(p.profile.commands.first().map(String::as_str).unwrap_or("?"), 60).as_bytes()
        ),
        runs = p.profile.runs,
        allocs = p.profile.allocations,
        frees = p.profile.frees,
        peak = p.profile.peak_live_bytes,
        seen = p.profile.classes_seen,
        unit = u.chosen,
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
        out = pct(p.selection.outlier_share),
        nl = p.lists.len(),
        extent = p.extent_bytes,
        minb = p.thresholds.min_thread_list_blocks,
        maxb = p.thresholds.max_thread_list_bytes,
    );
    for l in &p.lists {
        let _ = write!(
            s,
            "{}",
            wrap(&list_comment(p, l), "    /* ", 96).replace("\n    /* ", "\n     * ").trim_end()
        );
        let _ = writeln!(s, " */");
        let _ = writeln!(
            s,
            "    {{{}, {}, {}, {}}},",
            l.block_bytes,
            l.range[0],
            l.range[1],
            l.thread_cap.unwrap_or(0)
        );
    }
    if p.lists.is_empty() {
        let _ = writeln!(s, "    {{0, 0, 0, 0}}, /* no lists */");
    }
    let _ = writeln!(s, "}};\n");

    // Locked dispatch over every list.
    let _ = writeln!(
        s,
        "/* The list of a request under the lock (fast lists after a miss, general\n \
         * lists always), or -1 for the general allocator. */\n\
         static int syn_list_of(size_t n) {{"
    );
    if p.lists.is_empty() {
        let _ = writeln!(s, "    (void)n;");
    } else if p.dispatch.kind == Dispatch::Sizemap {
        let _ = writeln!(
            s,
            "    if (n <= {up}_MAP_MAX) {{\n        unsigned l = {n}_map[(n + {}) >> {}];\n        \
             if (l != 255) return (int)l;\n    }}",
            p.unit.chosen - 1,
            shift_of(p.unit.chosen)
        );
    } else {
        for &i in &p.dispatch.malloc_order {
            let l = &p.lists[i];
            let _ = writeln!(
                s,
                "    if ({}) return {}; /* {} of mallocs */",
                range_test(l),
                i,
                pct(l.malloc_share)
            );
        }
    }
    let _ = writeln!(s, "    return -1;\n}}\n");

    // General list of a usable size, in free order.
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

    // Reclaim order.
    let _ = writeln!(
        s,
        "/* Reclaim order of the general lists (by index among them): decreasing\n \
         * P_f(s)(1 - P_m(s)) * s * F(s), computed when synthesizing (002 §2.2). */\n\
         static const unsigned char syn_reclaim_order[{}] = {{",
        ngen.max(1)
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
            l.reclaim_priority.unwrap_or(0.0)
        );
    }
    let _ = writeln!(s, "}};\n");
    s.push_str(RUNTIME);
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

/// The tag value of a fast list in use, for tests and docs.
pub fn tag_used(list: usize) -> u64 {
    tag(list, true)
}
