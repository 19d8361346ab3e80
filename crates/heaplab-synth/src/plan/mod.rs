//! Every decision the synthesizer makes, from the merged profile: the
//! allocation unit, the size classes kept, fast or general per class, the
//! free lists, the dispatch, the reclaim order and the per-thread caps. The
//! [`Plan`] is what `decisions.json` holds and what [`crate::emit`] turns
//! into C.
//!
//! The rules, with the paper section each follows:
//!
//! - **Unit** (§2.1, §4.3): plan at 8, 16 and 32 bytes; estimate the bytes
//!   wasted in the kept classes' blocks while their objects are live (mean
//!   live objects × (block − mean request)); among the units whose waste
//!   exceeds the least by no more than 2% of the mean live bytes (at least
//!   one page), take the one estimated cheapest per malloc + free (the
//!   dispatch, plus the share left to the general allocator times its cost),
//!   the larger on a tie. "Minimize the total memory wasted ... while
//!   maximizing the aggregation size" because "more allocations fall into
//!   the most common case".
//! - **Classes** (§2.2, §3): most frequent first, until the kept classes
//!   cover the target share of allocations (95%) or the cap is reached;
//!   classes over 32 KiB are never kept. The rest go to the general
//!   allocator as they are.
//! - **Fast or general** (§2.2, Table 4): a class whose objects are almost
//!   never freed is fast; a class whose mean free-list length exceeds its
//!   mean live objects (episodic use, ESPRESSO) and would give back at least
//!   64 KiB is general; every other class is fast (MAKE).
//! - **Lists**: kept classes with the same block and allocator share a list
//!   (e.g. at R = 8 the 16- and 24-byte classes both use 32-byte blocks).
//! - **Dispatch** (Figures 1 and 3, §4.3): tests in allocation-frequency
//!   order for malloc and free-frequency order for free, or a size-map array
//!   (paper 000 Figure 9) when the estimated cost of the ordered tests
//!   (about 3 instructions per malloc test, 2 per free test) exceeds the
//!   map's (about 7 and 5): that is, when many classes are comparably common.
//! - **Reclaim** (§2.2): the general lists in decreasing
//!   `P_f(s)(1 − P_m(s)) · s · F(s)`, until twice the request is recovered.
//!
//! One step per file: [`select`] (classes), [`kind`] (fast or general),
//! [`lists`] (lists, their order, caps and priorities), [`dispatch`]
//! (dispatch and reclaim order); this file holds the types, the unit rule
//! and [`plan`], which runs the steps at each unit.

pub mod core;
pub mod dispatch;
pub mod kind;
pub mod lists;
pub mod select;
#[cfg(test)]
mod tests;

pub use select::StoppedBy;

use crate::measure::{Measured, UNITS};
use anyhow::{bail, Result};
use heaplab_trace::profile::{Profile, SizeClass};
use serde::Serialize;

/// The version of the `decisions.json` format.
pub const FORMAT: &str = "heaplab-synth-decisions/2";

/// Instructions per frequency-ordered malloc test (compare and branch on the
/// request size: "each conditional statement adds ≈ 3 instructions", §3).
pub const COST_MALLOC_TEST: f64 = 3.0;
/// Instructions of the size-map lookup in malloc: one byte load from the
/// thread's map indexed by the size (the bound check is paid either way).
pub const COST_MALLOC_MAP: f64 = 1.0;
/// Instructions of free's class lookup, either way: the class is the block's
/// address minus the thread's slot base, shifted (fastcore.h): subtract,
/// shift, compare, branch.
pub const COST_FREE_ADDRESS: f64 = 4.0;
/// Instructions of a malloc and free that go to the general allocator: the
/// shim's lock and gnugpp (measured on perl-wc: gnugpp alone 98 per malloc +
/// 85 per free, with the lock; on python3 its first fit costs ~1,700).
pub const COST_GENERAL: f64 = 200.0;
/// Instructions of a malloc and free served by the fast core on the owning
/// thread (fastcore.h: a pop or a carve, 12 to 17, and a push, 11; vgcount
/// on the replays of bench/synth-vs-peers.py).
pub const COST_FAST: f64 = 23.0;

/// Which allocator a class uses when its free list is empty (§2.2, Figure 2).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Allocator {
    /// Contiguous extents, never coalesced; per-thread free lists.
    Fast,
    /// gnugpp (Lea's segregated first fit); the list can be reclaimed.
    General,
}

/// The experiment of paper 002 Table 5.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Variant {
    /// The heuristic of §2.2 chooses per class, then the cost check
    /// (`kind::cost_check`) makes the hot classes it made general fast.
    Heuristic,
    /// The heuristic of §2.2 alone, without the cost check.
    Paper,
    /// Every kept class is fast.
    AllFast,
    /// Every kept class is general.
    AllGeneral,
}

/// How malloc and free find a list.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Dispatch {
    /// Decide from the profile.
    Auto,
    /// Tests in frequency order (Figures 1 and 3).
    Ordered,
    /// A size-map array (paper 000 Figure 9).
    Sizemap,
}

/// What the user asked for.
#[derive(Debug, Clone)]
pub struct Options {
    /// The allocator's name: a C identifier.
    pub name: String,
    /// The allocation unit; None: choose from the profile.
    pub unit: Option<u64>,
    /// Share of allocations the kept classes must cover.
    pub coverage: f64,
    /// The most classes kept.
    pub max_classes: usize,
    /// Classes (bytes) forced fast / general.
    pub fast: Vec<u64>,
    pub general: Vec<u64>,
    pub dispatch: Dispatch,
    pub variant: Variant,
    /// The statistics build: every call counted, one add on each hot path
    /// (`SF_COUNT` in fastcore.h); by default the hot paths count nothing.
    pub count_calls: bool,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            name: "custom".into(),
            unit: None,
            coverage: 0.95,
            max_classes: 16,
            fast: Vec::new(),
            general: Vec::new(),
            dispatch: Dispatch::Auto,
            variant: Variant::Heuristic,
            count_calls: false,
        }
    }
}

/// The fixed thresholds of the rules (recorded in `decisions.json`).
#[derive(Debug, Clone, Serialize)]
pub struct Thresholds {
    /// General when mean free list > this × mean live objects (Table 4).
    pub free_list_ratio: f64,
    /// ... and the mean free list holds at least this many bytes.
    pub min_reclaim_bytes: u64,
    /// The cost check: a class the rule makes general stays general only if
    /// that adds at most this many instructions per malloc of the program
    /// (P_m(s) × (COST_GENERAL − COST_FAST)), estimated on the training runs.
    pub general_budget_instructions: f64,
    /// Fast when frees / allocations is under this ("never returned").
    pub never_freed: f64,
    /// Classes larger than this are never kept.
    pub max_class_bytes: u64,
    /// Every request up to this many bytes has a fast class (the ladder's top).
    pub fast_max_bytes: u64,
    /// Ladder steps per doubling above 128 bytes.
    pub ladder_steps: u64,
    /// A slab is at least this many bytes ...
    pub min_slab_bytes: u64,
    /// ... and this many blocks.
    pub slab_blocks: u64,
    /// A class's slabs double every `SF_GROW_EVERY` (fastcore.h) slabs a
    /// thread takes, up to the largest multiple of the first by a power of
    /// two that is at most this many bytes ...
    pub slab_max_bytes: u64,
    /// ... and this many blocks (never less than the first slab).
    pub slab_max_blocks: u64,
    /// The unit rule's tolerance: share of the mean live bytes ...
    pub unit_tolerance_share: f64,
    /// ... and at least this many bytes.
    pub unit_tolerance_min_bytes: u64,
}

impl Default for Thresholds {
    fn default() -> Self {
        Thresholds {
            free_list_ratio: 1.0,
            min_reclaim_bytes: 64 << 10,
            general_budget_instructions: 1.0,
            never_freed: 0.01,
            max_class_bytes: 32 << 10,
            fast_max_bytes: 32 << 10,
            ladder_steps: 4,
            min_slab_bytes: 16 << 10,
            slab_blocks: 8,
            slab_max_bytes: 256 << 10,
            slab_max_blocks: 1024,
            unit_tolerance_share: 0.02,
            unit_tolerance_min_bytes: 4096,
        }
    }
}

/// Bytes of a fast block for requests up to `size`: no header (the block's
/// address says its class), a multiple of 16.
pub fn fast_block(size: u64) -> u64 {
    size.max(1).div_ceil(16) * 16
}

/// Bytes of a gnugpp block for a request of `size` (header and footer, 16
/// aligned, at least 32): `request_block` in native/alloc/gnugpp.c.
pub fn general_block(size: u64) -> u64 {
    ((size + 16).div_ceil(16) * 16).max(32)
}

/// A summary of the merged profile.
#[derive(Debug, Clone, Serialize)]
pub struct ProfileSummary {
    pub traces: Vec<String>,
    pub commands: Vec<String>,
    pub runs: usize,
    pub weighting: String,
    pub allocations: u64,
    pub frees: u64,
    pub reallocs: u64,
    pub peak_live_bytes: u64,
    pub mean_live_bytes: f64,
    pub threads: u64,
    /// Size classes seen at the chosen unit.
    pub classes_seen: usize,
}

/// One candidate unit.
#[derive(Debug, Clone, Serialize)]
pub struct UnitCandidate {
    pub unit: u64,
    pub kept_classes: usize,
    pub lists: usize,
    pub covered_share: f64,
    /// Mean live objects × (block − mean request), summed over kept classes.
    pub wasted_live_bytes: f64,
    pub wasted_share_of_live: f64,
    /// Estimated dispatch instructions per malloc + free, as planned.
    pub dispatch_instructions: f64,
    /// The same plus the outliers' trips to the general allocator
    /// (outlier share × COST_GENERAL): what the unit rule compares.
    pub estimated_instructions: f64,
}

#[derive(Debug, Clone, Serialize)]
pub struct UnitDecision {
    pub chosen: u64,
    /// `given` (--unit) or `profile`.
    pub how: String,
    pub rule: String,
    pub tolerance_bytes: f64,
    pub candidates: Vec<UnitCandidate>,
}

#[derive(Debug, Clone, Serialize)]
pub struct Selection {
    pub coverage_target: f64,
    pub max_classes: usize,
    pub kept: usize,
    pub covered_share: f64,
    /// Share of allocations the lists serve: the kept classes and those
    /// absorbed into their lists.
    pub served_share: f64,
    /// Share of allocations the fast core serves (the fast lists and the
    /// ladder classes, every size up to `core.fast_max_bytes` not general).
    pub fast_share: f64,
    /// Share of allocations left to gnugpp as they are (neither the fast
    /// core nor a general list).
    pub outlier_share: f64,
    /// `coverage` (target reached), `cap` (max_classes reached) or
    /// `classes` (every eligible class kept).
    pub stopped_by: StoppedBy,
    /// Frequent classes skipped for being over `max_class_bytes`.
    pub too_large: Vec<u64>,
}

/// The decision for one kept class.
#[derive(Debug, Clone, Serialize)]
pub struct ClassDecision {
    pub size: u64,
    /// Request sizes (bytes) of the class: `[lo, hi]`.
    pub range: [u64; 2],
    pub allocs: u64,
    pub frees: u64,
    /// P_m(s): share of all allocations.
    pub p_m: f64,
    /// P_f(s): share of all frees.
    pub p_f: f64,
    pub mean_live: f64,
    pub max_live: u64,
    pub mean_free_list: f64,
    pub free_list_to_live: f64,
    pub mean_request: f64,
    pub allocator: Allocator,
    pub why: String,
    /// Set by --fast / --general rather than the rule or the variant.
    pub overridden: bool,
    /// Not kept by the selection, but served by a kept class's list because
    /// it uses the same block.
    pub absorbed: bool,
    /// Index of its list.
    pub list: usize,
}

/// One free list: one or more kept classes with the same block.
#[derive(Debug, Clone, Serialize)]
pub struct ListPlan {
    pub index: usize,
    pub allocator: Allocator,
    pub classes: Vec<u64>,
    /// Request sizes served: `[lo, hi]` (lo 0 for the smallest list, which
    /// takes malloc(0)).
    pub range: [u64; 2],
    /// Bytes of each block (fast: with its tag; general: gnugpp's block).
    pub block_bytes: u64,
    pub malloc_share: f64,
    pub free_share: f64,
    /// Position in the malloc / free tests (0 first).
    pub malloc_rank: usize,
    pub free_rank: usize,
    /// P_f(s)(1 − P_m(s)) s F(s) summed over its classes (002 §2.2).
    pub reclaim_priority: f64,
    /// Fast lists: the fast core's class that serves it.
    pub core_class: Option<usize>,
}

/// Estimated instructions of the class lookup per malloc and per free.
#[derive(Debug, Clone, Serialize)]
pub struct Estimates {
    pub ordered_malloc: f64,
    pub sizemap_malloc: f64,
    /// Free finds the class from the address whatever malloc does.
    pub free: f64,
}

#[derive(Debug, Clone, Serialize)]
pub struct DispatchDecision {
    pub kind: Dispatch,
    /// `given` (--dispatch) or `profile`.
    pub how: String,
    pub rule: String,
    pub estimated_instructions: Estimates,
    /// List indices in malloc order (ordered: the fast lists tested before
    /// the map, in this order).
    pub malloc_order: Vec<usize>,
    /// Fast list indices in free-frequency order (their rank only: free
    /// tests nothing).
    pub free_order: Vec<usize>,
    /// General list indices in free order (usable-size tests under the lock).
    pub general_free_order: Vec<usize>,
    /// The per-thread byte map: the largest request it maps, and its entries.
    pub map_max_bytes: u64,
    pub map_entries: u64,
}

#[derive(Debug, Clone, Serialize)]
pub struct ReclaimDecision {
    pub rule: String,
    /// General list indices, first reclaimed first.
    pub order: Vec<usize>,
    /// The fast core's classes, first given back first (`core.reclaim_order`).
    pub core_order: Vec<usize>,
}

/// Everything decided; serialized as `decisions.json`.
#[derive(Debug, Clone, Serialize)]
pub struct Plan {
    pub format: &'static str,
    pub name: String,
    pub variant: Variant,
    pub profile: ProfileSummary,
    pub unit: UnitDecision,
    pub selection: Selection,
    pub classes: Vec<ClassDecision>,
    pub lists: Vec<ListPlan>,
    pub dispatch: DispatchDecision,
    pub reclaim: ReclaimDecision,
    /// The fast core's classes, map and slabs.
    pub core: core::CoreLayout,
    /// The cost check of the fast/general decisions (`kind::cost_check`):
    /// null when the rule made no class general.
    pub check: Option<serde_json::Value>,
    pub thresholds: Thresholds,
    pub general_allocator: String,
    /// The statistics build (`--count-calls`): the hot paths count every
    /// call for heaplab_alloc_stats; false: they count none (reported as 0).
    pub count_calls: bool,
    /// Filled in by the build.
    pub outputs: Option<serde_json::Value>,
}

impl Plan {
    pub fn fast_lists(&self) -> usize {
        self.lists.iter().filter(|l| l.allocator == Allocator::Fast).count()
    }
}

/// The names a synthesized allocator may not take: heaplab's other allocators
/// and the words `heaplab compare` gives a meaning.
pub const RESERVED_NAMES: &[&str] = &[
    "all", "zoo", "heaplab", "peers", "glibc", "system", "libc", "jemalloc", "mimalloc", "tcmalloc",
];

const C_KEYWORDS: &[&str] = &[
    "auto", "break", "case", "char", "const", "continue", "default", "do", "double", "else",
    "enum", "extern", "float", "for", "goto", "if", "inline", "int", "long", "register",
    "restrict", "return", "short", "signed", "sizeof", "static", "struct", "switch", "typedef",
    "union", "unsigned", "void", "volatile", "while", "malloc", "free", "calloc", "realloc",
];

/// Checks a name: a lower-case C identifier that names nothing else.
pub fn check_name(name: &str, zoo: &[String]) -> Result<()> {
    let ok = !name.is_empty()
        && name.len() <= 40
        && name.bytes().next().is_some_and(|b| b.is_ascii_lowercase() || b == b'_')
        && name.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_');
    if !ok {
        bail!(
            "--name {name:?}: the name becomes C identifiers and file names; \
             use [a-z_][a-z0-9_]* (at most 40 characters), e.g. custom_perl"
        );
    }
    if C_KEYWORDS.contains(&name) || name.starts_with("hl_") || name.starts_with("heaplab") {
        bail!("--name {name:?}: that is a C keyword or a prefix heaplab uses; pick another");
    }
    if RESERVED_NAMES.contains(&name) || zoo.iter().any(|z| z == name) {
        bail!(
            "--name {name:?}: `heaplab compare` already means another allocator by it; \
             pick another (e.g. custom_{name})"
        );
    }
    Ok(())
}

/// Makes every decision for the runs in `m`.
pub fn plan(m: &Measured, opts: &Options) -> Result<Plan> {
    let th = Thresholds::default();
    if !(opts.coverage > 0.0 && opts.coverage <= 1.0) {
        bail!("--coverage {}: give a share of allocations in (0, 1], e.g. 0.95", opts.coverage);
    }
    if opts.max_classes == 0 || opts.max_classes > 200 {
        bail!("--max-classes {}: give 1 to 200", opts.max_classes);
    }
    if let Some(u) = opts.unit {
        if !UNITS.contains(&u) {
            bail!("--unit {u}: the unit is 8, 16 or 32 bytes");
        }
    }
    let mean_live_bytes = mean_live_bytes(m.at(8));
    let tolerance =
        (th.unit_tolerance_share * mean_live_bytes).max(th.unit_tolerance_min_bytes as f64);
    let mut candidates = Vec::new();
    for &u in &UNITS {
        let p = plan_at(m, u, opts, &th, false)?;
        candidates.push(UnitCandidate {
            unit: u,
            kept_classes: p.selection.kept,
            lists: p.lists.len(),
            covered_share: p.selection.served_share,
            wasted_live_bytes: wasted_live_bytes(&p),
            wasted_share_of_live: if mean_live_bytes > 0.0 {
                wasted_live_bytes(&p) / mean_live_bytes
            } else {
                0.0
            },
            dispatch_instructions: dispatch_cost(&p),
            estimated_instructions: dispatch_cost(&p) + p.selection.outlier_share * COST_GENERAL,
        });
    }
    let least = candidates.iter().map(|c| c.wasted_live_bytes).fold(f64::INFINITY, f64::min);
    let (chosen, how) = match opts.unit {
        Some(u) => (u, "given"),
        None => (choose_unit(&candidates, least + tolerance), "profile"),
    };
    // Re-plan at the chosen unit with the overrides checked.
    let mut p = plan_at(m, chosen, opts, &th, true)?;
    p.unit = UnitDecision {
        chosen,
        how: how.into(),
        rule: format!(
            "among the units whose estimated waste (mean live objects x (block - mean request), \
             over the kept classes) exceeds the least by at most {tolerance:.0} bytes \
             (max({:.0}% of the {mean_live_bytes:.0} mean live bytes, {} bytes)), the one \
             estimated cheapest per malloc + free (dispatch, plus the share left to the general \
             allocator x {COST_GENERAL} instructions), the larger on a tie (within {UNIT_TIE}): \
             least waste, favouring the larger unit where more allocations fall in the common \
             case; 002 §4.3",
            th.unit_tolerance_share * 100.0,
            th.unit_tolerance_min_bytes
        ),
        tolerance_bytes: tolerance,
        candidates,
    };
    Ok(p)
}

/// Estimated dispatch instructions within which two units count as equally fast.
pub const UNIT_TIE: f64 = 0.25;

/// The unit rule: of the candidates wasting at most `max_waste`, the one
/// estimated cheapest (dispatch and outliers); on a tie, the larger unit.
pub fn choose_unit(candidates: &[UnitCandidate], max_waste: f64) -> u64 {
    let ok: Vec<&UnitCandidate> =
        candidates.iter().filter(|c| c.wasted_live_bytes <= max_waste).collect();
    let fastest = ok.iter().map(|c| c.estimated_instructions).fold(f64::INFINITY, f64::min);
    ok.iter()
        .filter(|c| c.estimated_instructions <= fastest + UNIT_TIE)
        .map(|c| c.unit)
        .max()
        .unwrap_or(8)
}

fn mean_request(c: &SizeClass) -> f64 {
    if c.allocs == 0 {
        c.size as f64
    } else {
        c.bytes as f64 / c.allocs as f64
    }
}

fn mean_live_bytes(p: &Profile) -> f64 {
    p.size_classes.iter().map(|c| c.mean_live * mean_request(c)).sum()
}

/// Mean live objects × (block − mean request) over the kept classes.
pub fn wasted_live_bytes(p: &Plan) -> f64 {
    p.classes
        .iter()
        .map(|c| c.mean_live * (p.lists[c.list].block_bytes as f64 - c.mean_request).max(0.0))
        .sum()
}

/// The planned dispatch's estimated instructions per malloc + free.
pub fn dispatch_cost(p: &Plan) -> f64 {
    let e = &p.dispatch.estimated_instructions;
    e.free
        + match p.dispatch.kind {
            Dispatch::Sizemap => e.sizemap_malloc,
            _ => e.ordered_malloc,
        }
}
/// Plans at one unit: the steps of this module in order. `strict` checks
/// `--fast`/`--general` against the kept classes (at the chosen unit only).
fn plan_at(m: &Measured, unit: u64, opts: &Options, th: &Thresholds, strict: bool) -> Result<Plan> {
    let prof = m.at(unit);
    let totals = kind::Totals::of(&prof.size_classes);
    let sel = select::select(prof, opts, th);
    if strict {
        select::check_overrides(&sel, unit, opts)?;
    }
    let mut classes = kind::decide(&sel.kept, unit, totals, opts, th);
    let check = kind::cost_check(&mut classes, opts, th);
    lists::absorb_neighbours(&mut classes, prof, unit, totals, th);
    let lists = lists::group(&mut classes);
    let mut lists = lists::order(&mut classes, lists);
    lists::priorities(&mut lists, &classes);
    let core = core::layout(&lists, prof, th);
    for c in &core.classes {
        if let Some(l) = c.list {
            lists[l].core_class = Some(c.index);
        }
    }
    let dispatch = dispatch::decide(&mut lists, opts);
    let reclaim = dispatch::reclaim(&lists, &core);
    let classes_seen = prof.size_classes.len();
    let served: f64 = classes.iter().map(|c| c.p_m).sum();
    let fast: f64 = core.classes.iter().map(|c| c.malloc_share).sum();
    let general: f64 =
        lists.iter().filter(|l| l.allocator == Allocator::General).map(|l| l.malloc_share).sum();
    Ok(Plan {
        format: FORMAT,
        name: opts.name.clone(),
        variant: opts.variant,
        profile: ProfileSummary {
            traces: m.traces.iter().map(|t| t.display().to_string()).collect(),
            commands: m.commands.clone(),
            runs: prof.runs,
            weighting: "runs".into(),
            allocations: prof.allocations,
            frees: prof.frees,
            reallocs: prof.reallocs,
            peak_live_bytes: prof.peak_live_bytes,
            mean_live_bytes: mean_live_bytes(prof),
            threads: prof.threads,
            classes_seen,
        },
        unit: UnitDecision {
            chosen: unit,
            how: String::new(),
            rule: String::new(),
            tolerance_bytes: 0.0,
            candidates: Vec::new(),
        },
        selection: Selection {
            coverage_target: opts.coverage,
            max_classes: opts.max_classes,
            kept: classes.iter().filter(|c| !c.absorbed).count(),
            covered_share: sel.covered,
            served_share: served,
            fast_share: fast,
            outlier_share: (1.0 - fast - general).max(0.0),
            stopped_by: sel.stopped_by,
            too_large: sel.too_large,
        },
        classes,
        lists,
        dispatch,
        reclaim,
        core,
        check,
        thresholds: th.clone(),
        general_allocator: "gnugpp: Lea's segregated first fit with coalescing \
                            (native/alloc/gnugpp.c; 002 §2.2 and §4 FIRSTFIT)"
            .into(),
        count_calls: opts.count_calls,
        outputs: None,
    })
}
