//! Reading `callgrind.out` files: the self cost of every function and the
//! inclusive cost of every call arc (caller → callee), in instructions (Ir).
//!
//! The format (valgrind's docs, "Callgrind Format Specification"): header
//! lines (`events:`, `positions:`, `summary:`/`totals:`), then cost lines
//! grouped under `fn=` (the function they belong to). `calls=COUNT POS`
//! announces a call to the function last named by `cfn=`, and the cost line
//! after it is the call's inclusive cost. Names may be compressed: `(id) name`
//! defines id, `(id)` alone refers to it; functions, files and objects have
//! separate id spaces.
//!
//! Two readings are built on it:
//! - [`replay_costs`]: with `--per-call` the replayer calls the allocator through
//!   one noinline function per entry point (`rp_call_malloc`, ...), so the
//!   inclusive cost of each one's callees is the allocator's cost of that
//!   kind of call, whatever name the allocator gives its functions;
//! - [`program_costs`]: in a real program, every arc from a function outside
//!   the malloc API into one inside it (after removing the prefixes that
//!   aliases carry: `__libc_`, `je_`, `mi_`, `tc_`...).

use anyhow::{bail, Result};
use std::collections::HashMap;

/// One call arc, summed over call sites.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Arc {
    pub calls: u64,
    pub inclusive: u64,
}

/// What a callgrind output file says, in instructions.
#[derive(Debug, Default)]
pub struct Profile {
    /// Instructions counted (the `totals:` or `summary:` line, else the sum of self costs).
    pub total: u64,
    /// Self cost per function name.
    pub self_cost: HashMap<String, u64>,
    /// Arcs (caller, callee).
    pub arcs: HashMap<(String, String), Arc>,
    /// The object (shared library or program) of each function, by name.
    pub object: HashMap<String, String>,
}

/// One of a callgrind file's tables of compressed names (files, or functions).
#[derive(Default)]
pub struct Names(HashMap<String, String>);

impl Names {
    /// "(12) name" defines and returns name; "(12)" returns what 12 was; "name" is name.
    pub fn resolve(&mut self, s: &str) -> Result<String> {
        let s = s.trim();
        if let Some(rest) = s.strip_prefix('(') {
            let close =
                rest.find(')').ok_or_else(|| anyhow::anyhow!("bad compressed name {s:?}"))?;
            let id = &rest[..close];
            let name = rest[close + 1..].trim();
            if name.is_empty() {
                return self
                    .0
                    .get(id)
                    .cloned()
                    .ok_or_else(|| anyhow::anyhow!("name id ({id}) used before it is defined"));
            }
            self.0.insert(id.to_string(), name.to_string());
            return Ok(name.to_string());
        }
        Ok(s.to_string())
    }
}

/// Parses a callgrind output file's text.
pub fn parse(text: &str) -> Result<Profile> {
    let mut p = Profile::default();
    let (mut fns, mut objs, mut files) = (Names::default(), Names::default(), Names::default());
    let mut npos = 1usize;
    let mut ir_index: Option<usize> = None;
    let (mut cur_fn, mut cur_ob) = (String::new(), String::new());
    let (mut callee, mut callee_ob) = (String::new(), None::<String>);
    let mut pending_calls: Option<u64> = None;
    let mut totals: Option<u64> = None;
    for (lineno, line) in text.lines().enumerate() {
        let at = |e: anyhow::Error| e.context(format!("callgrind output line {}", lineno + 1));
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let first = line.as_bytes()[0];
        if first.is_ascii_digit() || first == b'+' || first == b'-' || first == b'*' {
            let fields: Vec<&str> = line.split_whitespace().collect();
            let ir_at = npos + ir_index.unwrap_or(0);
            let cost: u64 = match fields.get(ir_at) {
                Some(s) => s.parse().map_err(|_| at(anyhow::anyhow!("bad cost {s:?}")))?,
                None => 0,
            };
            if let Some(n) = pending_calls.take() {
                let a = p.arcs.entry((cur_fn.clone(), callee.clone())).or_default();
                a.calls += n;
                a.inclusive += cost;
                if let Some(o) = callee_ob.take() {
                    p.object.entry(callee.clone()).or_insert(o);
                }
            } else {
                *p.self_cost.entry(cur_fn.clone()).or_default() += cost;
            }
            continue;
        }
        let (key, val) = match line.split_once('=') {
            Some((k, v)) if !k.contains(' ') && !k.contains(':') => (k, v),
            _ => {
                // header lines: "events: Ir ...", "positions: line", "totals: N"
                if let Some(ev) = line.strip_prefix("events:") {
                    let evs: Vec<&str> = ev.split_whitespace().collect();
                    ir_index = evs.iter().position(|e| *e == "Ir");
                    if ir_index.is_none() {
                        bail!("callgrind output has no Ir event (events: {ev})");
                    }
                } else if let Some(pos) = line.strip_prefix("positions:") {
                    npos = pos.split_whitespace().count().max(1);
                } else if let Some(t) =
                    line.strip_prefix("totals:").or_else(|| line.strip_prefix("summary:"))
                {
                    let v: Vec<&str> = t.split_whitespace().collect();
                    if let Some(s) = v.get(ir_index.unwrap_or(0)) {
                        totals = Some(totals.unwrap_or(0).max(s.parse().unwrap_or(0)));
                    }
                }
                continue;
            }
        };
        match key {
            "fn" => {
                cur_fn = fns.resolve(val).map_err(at)?;
                p.object.entry(cur_fn.clone()).or_insert_with(|| cur_ob.clone());
            }
            "cfn" => callee = fns.resolve(val).map_err(at)?,
            "ob" => cur_ob = objs.resolve(val).map_err(at)?,
            "cob" => callee_ob = Some(objs.resolve(val).map_err(at)?),
            "fl" | "fi" | "fe" | "cfi" | "cfl" => {
                files.resolve(val).map_err(at)?;
            }
            "calls" => {
                let n = val.split_whitespace().next().unwrap_or("");
                pending_calls =
                    Some(n.parse().map_err(|_| at(anyhow::anyhow!("bad calls= {val:?}")))?);
            }
            _ => {} // jump=, jcnd=, and keys of later versions
        }
    }
    p.total = totals.unwrap_or_else(|| p.self_cost.values().sum());
    Ok(p)
}

/// Reads and parses a callgrind output file.
pub fn read(path: &std::path::Path) -> Result<Profile> {
    let text =
        std::fs::read_to_string(path).map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?;
    parse(&text).map_err(|e| e.context(path.display().to_string()))
}

/// An entry point's allocator cost: calls and inclusive instructions.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct KindCost {
    pub calls: u64,
    pub instructions: u64,
}

impl KindCost {
    pub fn per_call(&self) -> Option<f64> {
        (self.calls > 0).then(|| self.instructions as f64 / self.calls as f64)
    }
    fn add(&mut self, a: Arc) {
        self.calls += a.calls;
        self.instructions += a.inclusive;
    }
}

/// The allocator's cost by kind of call.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct AllocCosts {
    /// malloc, calloc and the memalign family (and operator new, in programs).
    pub malloc: KindCost,
    /// free (and operator delete; in replays also realloc(p, 0)).
    pub free: KindCost,
    /// realloc.
    pub realloc: KindCost,
    /// Every allocator instruction, including calls of other kinds
    /// (malloc_usable_size ...).
    pub total: u64,
}

/// The replayer's per-entry-point functions, and the kind each counts as.
pub const REPLAY_WRAPPERS: [(&str, &str); 10] = [
    ("rp_call_malloc", "malloc"),
    ("rp_call_calloc", "malloc"),
    ("rp_call_memalign", "malloc"),
    ("rp_call_posix_memalign", "malloc"),
    ("rp_call_aligned_alloc", "malloc"),
    ("rp_call_valloc", "malloc"),
    ("rp_call_pvalloc", "malloc"),
    ("rp_call_free", "free"),
    ("rp_call_realloc_free", "free"),
    ("rp_call_realloc", "realloc"),
];

/// The allocator's costs in a replay run with `--per-call` (or `--general`):
/// the inclusive cost of every callee of each `rp_call_*` function.
pub fn replay_costs(p: &Profile) -> AllocCosts {
    let mut c = AllocCosts::default();
    for ((caller, _), arc) in &p.arcs {
        if let Some((_, kind)) = REPLAY_WRAPPERS.iter().find(|(w, _)| w == caller) {
            match *kind {
                "malloc" => c.malloc.add(*arc),
                "free" => c.free.add(*arc),
                _ => c.realloc.add(*arc),
            }
            c.total += arc.inclusive;
        }
    }
    c
}

/// The malloc API name behind an allocator's symbol (aliases stripped), if it is one.
pub fn api_name(symbol: &str) -> Option<&'static str> {
    let mut s = symbol;
    for prefix in ["__GI___libc_", "__libc_", "__GI_", "je_", "mi_", "tc_", "__wrap_"] {
        if let Some(r) = s.strip_prefix(prefix) {
            s = r;
            break;
        }
    }
    // C++ operators, Itanium-mangled: new, new[], delete, delete[] with their variants.
    if s.starts_with("_Znw") || s.starts_with("_Zna") {
        return Some("new");
    }
    if s.starts_with("_Zdl") || s.starts_with("_Zda") {
        return Some("delete");
    }
    Some(match s {
        "malloc" | "calloc" | "memalign" | "posix_memalign" | "aligned_alloc" | "valloc"
        | "pvalloc" | "zalloc" | "mallocx" | "malloc_aligned" => "malloc",
        "new"
        | "newarray"
        | "new_nothrow"
        | "newarray_nothrow"
        | "new_aligned"
        | "new_aligned_nothrow" => "new",
        "free" | "cfree" | "free_sized" | "free_aligned_sized" | "dallocx" | "sdallocx" => "free",
        "delete"
        | "deletearray"
        | "delete_nothrow"
        | "deletearray_nothrow"
        | "delete_sized"
        | "deletearray_sized"
        | "delete_aligned" => "delete",
        "realloc" | "reallocarray" | "rallocx" | "xallocx" | "reallocf" => "realloc",
        "malloc_usable_size" | "malloc_size" | "sallocx" | "nallocx" => "usable_size",
        _ => return None,
    })
}

/// The allocator's costs in a real program: every arc from a function that
/// is not part of the malloc API into one that is.
pub fn program_costs(p: &Profile) -> AllocCosts {
    let mut c = AllocCosts::default();
    for ((caller, callee), arc) in &p.arcs {
        let Some(kind) = api_name(callee) else { continue };
        if api_name(caller).is_some() {
            continue; // calloc calling malloc, delete calling free: counted once, at the outer call
        }
        match kind {
            "malloc" | "new" => c.malloc.add(*arc),
            "free" | "delete" => c.free.add(*arc),
            "realloc" => c.realloc.add(*arc),
            _ => {}
        }
        c.total += arc.inclusive;
    }
    c
}

#[cfg(test)]
mod tests {
    use super::*;

    const SAMPLE: &str = "# callgrind format
version: 1
creator: callgrind-3.19.0
positions: line
events: Ir
summary: 1000

ob=(1) /bin/prog
fl=(1) prog.c
fn=(1) main
10 5
cob=(2) /lib/libc.so.6
cfi=(2) malloc.c
cfn=(2) malloc
calls=3 20
11 300
cfn=(3) calloc
calls=1 20
12 150
cfn=(4) rp_call_free
calls=2 5
13 40

ob=(2)
fl=(2)
fn=(2)
20 280
fn=(3)
21 10
cfn=(2)
calls=1 20
+1 90
ob=(1)
fl=(1)
fn=(4)
5 4
cob=(2)
cfn=(5) je_free
calls=2 0
* 36
";

    #[test]
    fn parses_self_costs_arcs_and_compressed_names() {
        let p = parse(SAMPLE).unwrap();
        assert_eq!(p.total, 1000);
        assert_eq!(p.self_cost["main"], 5);
        assert_eq!(p.self_cost["malloc"], 280);
        assert_eq!(
            p.arcs[&("main".to_string(), "malloc".to_string())],
            Arc { calls: 3, inclusive: 300 }
        );
        assert_eq!(
            p.arcs[&("calloc".to_string(), "malloc".to_string())],
            Arc { calls: 1, inclusive: 90 }
        );
        assert_eq!(
            p.arcs[&("rp_call_free".to_string(), "je_free".to_string())],
            Arc { calls: 2, inclusive: 36 }
        );
        assert_eq!(p.object["malloc"], "/lib/libc.so.6");
    }

    #[test]
    fn program_costs_count_outer_calls_once() {
        let c = program_costs(&parse(SAMPLE).unwrap());
        // main→malloc (300) and main→calloc (150); calloc→malloc is inside calloc's 150.
        assert_eq!(c.malloc, KindCost { calls: 4, instructions: 450 });
        // rp_call_free→je_free: je_free is free.
        assert_eq!(c.free, KindCost { calls: 2, instructions: 36 });
        assert_eq!(c.total, 486);
    }

    #[test]
    fn replay_costs_use_the_wrappers() {
        let c = replay_costs(&parse(SAMPLE).unwrap());
        assert_eq!(c.free, KindCost { calls: 2, instructions: 36 });
        assert_eq!(c.malloc.calls, 0);
        assert_eq!(c.free.per_call(), Some(18.0));
    }

    #[test]
    fn api_names_see_through_aliases() {
        for (s, k) in [
            ("__libc_malloc", Some("malloc")),
            ("tc_free", Some("free")),
            ("mi_realloc", Some("realloc")),
            ("_Znwm", Some("new")),
            ("_ZdlPvm", Some("delete")),
            ("je_mallocx", Some("malloc")),
            ("_int_malloc", None),
            ("strdup", None),
        ] {
            assert_eq!(api_name(s), k, "{s}");
        }
    }

    #[test]
    fn errors_name_the_line() {
        let e = parse("events: Ir\nfn=(7)\n").unwrap_err();
        assert!(format!("{e:#}").contains("line 2"), "{e:#}");
        assert!(parse("events: Dr\n").is_err());
    }
}
