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

use crate::measure::{Measured, UNITS};
use anyhow::{bail, Result};
use heaplab_trace::profile::{Profile, SizeClass};
use serde::Serialize;

/// The version of the `decisions.json` format.
pub const FORMAT: &str = "heaplab-synth-decisions/1";

/// Instructions per frequency-ordered malloc test (compare and branch on the
/// request size: "each conditional statement adds ≈ 3 instructions", §3).
pub const COST_MALLOC_TEST: f64 = 3.0;
/// Instructions per frequency-ordered free test (compare the tag, branch).
pub const COST_FREE_TEST: f64 = 2.0;
/// Instructions of a size-map lookup in malloc (bound check, shift, load,
/// compare with the number of fast lists).
pub const COST_MALLOC_MAP: f64 = 7.0;
/// Instructions to decode a list from a tag in free.
pub const COST_FREE_MAP: f64 = 5.0;
/// Instructions of a malloc and free that go to the general allocator: the
/// shim's lock and gnugpp (measured on perl-wc: gnugpp alone 98 per malloc +
/// 85 per free, with the lock; on python3 its first fit costs ~1,700).
pub const COST_GENERAL: f64 = 200.0;

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
    /// The heuristic of §2.2 chooses per class.
    Heuristic,
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
    /// Fast when frees / allocations is under this ("never returned").
    pub never_freed: f64,
    /// Classes larger than this are never kept.
    pub max_class_bytes: u64,
    /// A per-thread list holds at most this many bytes ...
    pub max_thread_list_bytes: u64,
    /// ... and at least this many blocks.
    pub min_thread_list_blocks: u64,
    /// Bytes a thread takes from the fast heap at a time, at least (the plan
    /// makes it room for 8 blocks of its largest fast list).
    pub extent_bytes: u64,
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
            never_freed: 0.01,
            max_class_bytes: 32 << 10,
            max_thread_list_bytes: 1 << 20,
            min_thread_list_blocks: 64,
            extent_bytes: 8192,
            unit_tolerance_share: 0.02,
            unit_tolerance_min_bytes: 4096,
        }
    }
}

/// Bytes of a fast block for requests up to `size`: an 8-byte tag below a
/// 16-aligned payload.
pub fn fast_block(size: u64) -> u64 {
    (size + 8).div_ceil(16) * 16
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
    /// Share of allocations left to the general allocator as they are.
    pub outlier_share: f64,
    /// `coverage` (target reached), `cap` (max_classes reached) or
    /// `classes` (every eligible class kept).
    pub stopped_by: String,
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
    /// Fast lists: the most blocks a thread's list holds before the whole
    /// list goes to the shared depot (where another thread, or this one
    /// later, takes it back whole).
    pub thread_cap: Option<u64>,
    /// General lists: P_f(s)(1 − P_m(s)) s F(s) summed over its classes.
    pub reclaim_priority: Option<f64>,
    /// Fast lists: the tag word of a block in use.
    pub tag_used: Option<String>,
}

#[derive(Debug, Clone, Serialize)]
pub struct Estimates {
    pub ordered_malloc: f64,
    pub ordered_free: f64,
    pub sizemap_malloc: f64,
    pub sizemap_free: f64,
}

#[derive(Debug, Clone, Serialize)]
pub struct DispatchDecision {
    pub kind: Dispatch,
    /// `given` (--dispatch) or `profile`.
    pub how: String,
    pub rule: String,
    pub estimated_instructions: Estimates,
    /// List indices in malloc order (fast lists are tested without the lock).
    pub malloc_order: Vec<usize>,
    /// Fast list indices in free order (tag tests without the lock).
    pub free_order: Vec<usize>,
    /// General list indices in free order (usable-size tests under the lock).
    pub general_free_order: Vec<usize>,
    /// Sizemap: the largest request it maps, and its entries.
    pub map_max_bytes: u64,
    pub map_entries: u64,
}

#[derive(Debug, Clone, Serialize)]
pub struct ReclaimDecision {
    pub rule: String,
    /// General list indices, first reclaimed first.
    pub order: Vec<usize>,
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
    pub thresholds: Thresholds,
    /// Bytes a thread takes from the fast heap at a time: the threshold, or
    /// 8 blocks of the largest fast list, rounded up to a page.
    pub extent_bytes: u64,
    pub general_allocator: String,
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
    match p.dispatch.kind {
        Dispatch::Sizemap => e.sizemap_malloc + e.sizemap_free,
        _ => e.ordered_malloc + e.ordered_free,
    }
}

fn plan_at(m: &Measured, unit: u64, opts: &Options, th: &Thresholds, strict: bool) -> Result<Plan> {
    let prof = m.at(unit);
    let total_allocs = prof.size_classes.iter().map(|c| c.allocs).sum::<u64>().max(1) as f64;
    let total_frees = prof.size_classes.iter().map(|c| c.frees).sum::<u64>().max(1) as f64;

    // Classes: most frequent first until the coverage target or the cap.
    let mut kept: Vec<&SizeClass> = Vec::new();
    let mut too_large = Vec::new();
    let mut covered = 0.0;
    let mut stopped_by = "classes";
    for c in &prof.size_classes {
        if covered >= opts.coverage - 1e-12 {
            stopped_by = "coverage";
            break;
        }
        if kept.len() == opts.max_classes {
            stopped_by = "cap";
            break;
        }
        if c.size > th.max_class_bytes {
            if c.allocs as f64 / total_allocs >= 0.001 {
                too_large.push(c.size);
            }
            continue;
        }
        covered += c.allocs as f64 / total_allocs;
        kept.push(c);
    }
    if stopped_by == "classes" && covered >= opts.coverage - 1e-12 {
        stopped_by = "coverage";
    }
    if strict {
        for (flag, sizes) in [("--fast", &opts.fast), ("--general", &opts.general)] {
            for s in sizes.iter() {
                if !kept.iter().any(|c| c.size == *s) {
                    let mut names: Vec<u64> = kept.iter().map(|c| c.size).collect();
                    names.sort_unstable();
                    bail!(
                        "{flag} {s}: not a kept size class at unit {unit}; the kept classes are {}",
                        names.iter().map(u64::to_string).collect::<Vec<_>>().join(", ")
                    );
                }
            }
        }
        if let Some(s) = opts.fast.iter().find(|s| opts.general.contains(s)) {
            bail!("class {s} is given both --fast and --general");
        }
    }

    // Fast or general per class.
    let mut classes: Vec<ClassDecision> = kept
        .iter()
        .map(|c| {
            let ratio =
                if c.mean_live > 0.0 { c.mean_free_list / c.mean_live } else { f64::INFINITY };
            let (mut alloc, mut why) = heuristic(c, unit, th);
            match opts.variant {
                Variant::Heuristic => {}
                Variant::AllFast => {
                    alloc = Allocator::Fast;
                    why = "variant all-fast (002 Table 5)".into();
                }
                Variant::AllGeneral => {
                    alloc = Allocator::General;
                    why = "variant all-general (002 Table 5)".into();
                }
            }
            let mut overridden = false;
            if opts.fast.contains(&c.size) {
                (alloc, why, overridden) = (Allocator::Fast, "--fast".into(), true);
            }
            if opts.general.contains(&c.size) {
                (alloc, why, overridden) = (Allocator::General, "--general".into(), true);
            }
            ClassDecision {
                size: c.size,
                range: [c.size.saturating_sub(unit) + 1, c.size],
                allocs: c.allocs,
                frees: c.frees,
                p_m: c.allocs as f64 / total_allocs,
                p_f: c.frees as f64 / total_frees,
                mean_live: c.mean_live,
                max_live: c.max_live,
                mean_free_list: c.mean_free_list,
                free_list_to_live: if ratio.is_finite() { ratio } else { -1.0 },
                mean_request: mean_request(c),
                allocator: alloc,
                why,
                overridden,
                absorbed: false,
                list: 0,
            }
        })
        .collect();
    // A list also serves the unit classes that would use its very block
    // (at R = 8, the 16- and 24-byte classes both use 32-byte fast blocks):
    // the same test with a wider range, so they are taken at no cost.
    let block_of = |a: Allocator, size: u64| match a {
        Allocator::Fast => fast_block(size),
        Allocator::General => general_block(size),
    };
    let mut absorbed: Vec<ClassDecision> = Vec::new();
    for c in &classes {
        let b = block_of(c.allocator, c.size);
        for nb in [c.size.checked_sub(unit), Some(c.size + unit)].into_iter().flatten() {
            if nb == 0
                || nb > th.max_class_bytes
                || block_of(c.allocator, nb) != b
                || classes.iter().chain(absorbed.iter()).any(|k| k.size == nb)
            {
                continue;
            }
            let seen = prof.size_classes.iter().find(|x| x.size == nb);
            let (allocs, frees, mean_live, max_live, mean_free_list, mean_req) = match seen {
                Some(x) => {
                    (x.allocs, x.frees, x.mean_live, x.max_live, x.mean_free_list, mean_request(x))
                }
                None => (0, 0, 0.0, 0, 0.0, nb as f64),
            };
            absorbed.push(ClassDecision {
                size: nb,
                range: [nb.saturating_sub(unit) + 1, nb],
                allocs,
                frees,
                p_m: allocs as f64 / total_allocs,
                p_f: frees as f64 / total_frees,
                mean_live,
                max_live,
                mean_free_list,
                free_list_to_live: if mean_live > 0.0 { mean_free_list / mean_live } else { -1.0 },
                mean_request: mean_req,
                allocator: c.allocator,
                why: format!(
                    "absorbed: not kept, but it uses the {b}-byte block of the kept {}-byte class",
                    c.size
                ),
                overridden: false,
                absorbed: true,
                list: 0,
            });
        }
    }
    classes.extend(absorbed);
    // The smallest class takes malloc(0).
    classes.sort_by_key(|c| c.size);
    if let Some(c) = classes.first_mut() {
        if c.range[0] == 1 {
            c.range[0] = 0;
        }
    }

    // Lists: classes with the same allocator and block, adjacent ranges.
    let mut lists: Vec<ListPlan> = Vec::new();
    for c in classes.iter_mut() {
        let b = block_of(c.allocator, c.size);
        if let Some(l) = lists.iter_mut().find(|l| {
            l.allocator == c.allocator && l.block_bytes == b && l.range[1] + 1 == c.range[0]
        }) {
            l.classes.push(c.size);
            l.range[1] = c.range[1];
            l.malloc_share += c.p_m;
            l.free_share += c.p_f;
            c.list = l.index;
            continue;
        }
        c.list = lists.len();
        lists.push(ListPlan {
            index: lists.len(),
            allocator: c.allocator,
            classes: vec![c.size],
            range: c.range,
            block_bytes: b,
            malloc_share: c.p_m,
            free_share: c.p_f,
            malloc_rank: 0,
            free_rank: 0,
            thread_cap: None,
            reclaim_priority: None,
            tag_used: None,
        });
    }
    // Requests smaller than the smallest kept class go to its list when it is
    // fast: a few bytes of waste each, where the general allocator would
    // give them its smallest blocks, whose bin fills with fragments (python3
    // at R = 8: 147 instructions per malloc with its 1- to 24-byte requests
    // left to gnugpp, 22 with them in the 48-byte list).
    if let Some(c0) = classes.first() {
        let (l0, lo0, alloc0) = (c0.list, c0.range[0], c0.allocator);
        if alloc0 == Allocator::Fast && lo0 > 1 {
            let mut small = Vec::new();
            for x in prof.size_classes.iter().filter(|x| x.size < lo0) {
                small.push(ClassDecision {
                    size: x.size,
                    range: [x.size.saturating_sub(unit) + 1, x.size],
                    allocs: x.allocs,
                    frees: x.frees,
                    p_m: x.allocs as f64 / total_allocs,
                    p_f: x.frees as f64 / total_frees,
                    mean_live: x.mean_live,
                    max_live: x.max_live,
                    mean_free_list: x.mean_free_list,
                    free_list_to_live: if x.mean_live > 0.0 {
                        x.mean_free_list / x.mean_live
                    } else {
                        -1.0
                    },
                    mean_request: mean_request(x),
                    allocator: Allocator::Fast,
                    why: format!(
                        "absorbed: smaller than the smallest kept class ({}), served by its list",
                        c0.size
                    ),
                    overridden: false,
                    absorbed: true,
                    list: l0,
                });
            }
            let l = &mut lists[l0];
            l.range[0] = 0;
            for c in &small {
                l.malloc_share += c.p_m;
                l.free_share += c.p_f;
            }
            classes.extend(small);
        }
    }
    // Order lists: fast first, each group by malloc share; renumber.
    let mut order: Vec<usize> = (0..lists.len()).collect();
    order.sort_by(|&a, &b| {
        let (la, lb) = (&lists[a], &lists[b]);
        (la.allocator == Allocator::General)
            .cmp(&(lb.allocator == Allocator::General))
            .then(lb.malloc_share.total_cmp(&la.malloc_share))
            .then(la.range[0].cmp(&lb.range[0]))
    });
    let mut renum = vec![0; lists.len()];
    for (new, &old) in order.iter().enumerate() {
        renum[old] = new;
    }
    let mut lists: Vec<ListPlan> = order.iter().map(|&o| lists[o].clone()).collect();
    for (i, l) in lists.iter_mut().enumerate() {
        l.index = i;
    }
    for c in classes.iter_mut() {
        c.list = renum[c.list];
    }
    classes.sort_by(|a, b| b.allocs.cmp(&a.allocs).then(a.size.cmp(&b.size)));

    let nfast = lists.iter().filter(|l| l.allocator == Allocator::Fast).count();
    // Caps and batches of the fast lists; reclaim priorities of the general ones.
    for l in lists.iter_mut() {
        let members: Vec<&ClassDecision> = classes.iter().filter(|c| c.list == l.index).collect();
        match l.allocator {
            Allocator::Fast => {
                let max_live: u64 = members.iter().map(|c| c.max_live).sum();
                let by_bytes =
                    (th.max_thread_list_bytes / l.block_bytes).max(th.min_thread_list_blocks);
                let cap = max_live.clamp(th.min_thread_list_blocks, by_bytes);
                l.thread_cap = Some(cap);
                l.tag_used = Some(format!("0x{:x}", tag(l.index, true)));
            }
            Allocator::General => {
                l.reclaim_priority = Some(
                    members
                        .iter()
                        .map(|c| c.p_f * (1.0 - c.p_m) * c.size as f64 * c.mean_free_list)
                        .sum(),
                );
            }
        }
    }
    // Dispatch orders.
    let mut malloc_order: Vec<usize> = (0..lists.len()).collect();
    malloc_order
        .sort_by(|&a, &b| lists[b].malloc_share.total_cmp(&lists[a].malloc_share).then(a.cmp(&b)));
    let by_free = |ids: Vec<usize>| {
        let mut v = ids;
        v.sort_by(|&a, &b| lists[b].free_share.total_cmp(&lists[a].free_share).then(a.cmp(&b)));
        v
    };
    let free_order = by_free((0..nfast).collect());
    let general_free_order = by_free((nfast..lists.len()).collect());
    let front: Vec<usize> = if nfast > 0 {
        malloc_order.iter().copied().filter(|&i| i < nfast).collect()
    } else {
        malloc_order.clone()
    };
    for (rank, &i) in front.iter().enumerate() {
        lists[i].malloc_rank = rank;
    }
    if nfast == 0 {
        for (rank, &i) in general_free_order.iter().enumerate() {
            lists[i].free_rank = rank;
        }
    } else {
        for (rank, &i) in free_order.iter().enumerate() {
            lists[i].free_rank = rank;
        }
        for (rank, &i) in general_free_order.iter().enumerate() {
            lists[i].free_rank = nfast + rank;
        }
    }
    let tested_free: Vec<usize> =
        if nfast > 0 { free_order.clone() } else { general_free_order.clone() };
    let est = Estimates {
        ordered_malloc: ordered_cost(
            front.iter().map(|&i| lists[i].malloc_share),
            COST_MALLOC_TEST,
        ),
        ordered_free: ordered_cost(
            tested_free.iter().map(|&i| lists[i].free_share),
            COST_FREE_TEST,
        ),
        sizemap_malloc: if lists.is_empty() { 0.0 } else { COST_MALLOC_MAP },
        sizemap_free: if lists.is_empty() { 0.0 } else { COST_FREE_MAP },
    };
    let (kind, how) = match opts.dispatch {
        Dispatch::Auto => {
            if est.ordered_malloc + est.ordered_free > est.sizemap_malloc + est.sizemap_free {
                (Dispatch::Sizemap, "profile")
            } else {
                (Dispatch::Ordered, "profile")
            }
        }
        d => (d, "given"),
    };
    let map_max = lists.iter().map(|l| l.range[1]).max().unwrap_or(0);
    let mut reclaim_order: Vec<usize> = (nfast..lists.len()).collect();
    reclaim_order.sort_by(|&a, &b| {
        lists[b]
            .reclaim_priority
            .unwrap_or(0.0)
            .total_cmp(&lists[a].reclaim_priority.unwrap_or(0.0))
            .then(a.cmp(&b))
    });

    let extent_bytes = lists
        .iter()
        .filter(|l| l.allocator == Allocator::Fast)
        .map(|l| l.block_bytes * 8)
        .fold(th.extent_bytes, u64::max)
        .div_ceil(4096)
        * 4096;
    let classes_seen = prof.size_classes.len();
    let served: f64 = classes.iter().map(|c| c.p_m).sum();
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
            covered_share: covered,
            served_share: served,
            outlier_share: (1.0 - served).max(0.0),
            stopped_by: stopped_by.into(),
            too_large,
        },
        classes,
        lists,
        dispatch: DispatchDecision {
            kind,
            how: how.into(),
            rule: format!(
                "size map when the frequency-ordered tests are estimated to cost more than the \
                 map ({COST_MALLOC_TEST} instructions per malloc test, {COST_FREE_TEST} per free \
                 test; the map {COST_MALLOC_MAP} and {COST_FREE_MAP}); 002 §4.3, 000 Figure 9"
            ),
            estimated_instructions: est,
            malloc_order,
            free_order,
            general_free_order,
            map_max_bytes: map_max,
            map_entries: map_max / unit + 1,
        },
        reclaim: ReclaimDecision {
            rule: "general lists in decreasing P_f(s)(1 - P_m(s)) s F(s), computed here; \
                   reclaimed into gnugpp until twice the request is recovered, when gnugpp \
                   would otherwise grow its heap (002 §2.2)"
                .into(),
            order: reclaim_order,
        },
        thresholds: th.clone(),
        extent_bytes,
        general_allocator: "gnugpp: Lea's segregated first fit with coalescing \
                            (native/alloc/gnugpp.c; 002 §2.2 and §4 FIRSTFIT)"
            .into(),
        outputs: None,
    })
}

/// Mean tests until the match: share_i × cost × (i + 1), and a miss pays
/// for every test.
fn ordered_cost(shares: impl Iterator<Item = f64>, per_test: f64) -> f64 {
    let mut cost = 0.0;
    let mut hit = 0.0;
    let mut k = 0.0;
    for s in shares {
        k += 1.0;
        cost += s * per_test * k;
        hit += s;
    }
    cost + (1.0 - hit).max(0.0) * per_test * k
}

/// The heuristic of §2.2 for one class.
fn heuristic(c: &SizeClass, unit: u64, th: &Thresholds) -> (Allocator, String) {
    let _ = unit;
    let freed = if c.allocs == 0 { 0.0 } else { c.frees as f64 / c.allocs as f64 };
    if freed < th.never_freed {
        return (
            Allocator::Fast,
            format!(
                "storage almost never returned: {} frees of {} allocations (002 §2.2)",
                c.frees, c.allocs
            ),
        );
    }
    let reclaim = c.mean_free_list * fast_block(c.size) as f64;
    if c.mean_free_list > th.free_list_ratio * c.mean_live {
        if reclaim >= th.min_reclaim_bytes as f64 {
            return (
                Allocator::General,
                format!(
                    "episodic: mean free list {:.1} > {:.1} mean live objects, {:.0} bytes to \
                     reclaim (002 Table 4, ESPRESSO)",
                    c.mean_free_list, c.mean_live, reclaim
                ),
            );
        }
        return (
            Allocator::Fast,
            format!(
                "mean free list {:.1} exceeds {:.1} mean live objects, but holds only {:.0} \
                 bytes (< {}): too little to reclaim",
                c.mean_free_list, c.mean_live, reclaim, th.min_reclaim_bytes
            ),
        );
    }
    (
        Allocator::Fast,
        format!(
            "mean free list {:.1} <= {:.1} mean live objects: little to reclaim (002 Table 4, MAKE)",
            c.mean_free_list, c.mean_live
        ),
    )
}

/// The tag word of a fast block of list `l` (`used` or free): the magic
/// 0x5c000000, the list in bits 4-11, 0xD in use / 0xC free. gnugpp's
/// headers have 0 or 1 in their low four bits.
pub fn tag(l: usize, used: bool) -> u64 {
    0x5c00_0000 | (l as u64) << 4 | if used { 0xD } else { 0xC }
}

#[cfg(test)]
mod tests {
    use super::*;
    use heaplab_trace::model::{Event, Kind};
    use heaplab_trace::profile::ProfileBuilder;

    /// A run built event by event.
    #[derive(Default)]
    struct Run {
        evs: Vec<Event>,
        next: u64,
    }

    impl Run {
        fn malloc(&mut self, size: u64) -> u64 {
            let id = self.next;
            self.next += 1;
            self.evs.push(ev(Kind::Malloc, Some(id), None, size));
            id
        }
        fn free(&mut self, id: u64) {
            self.evs.push(ev(Kind::Free, None, Some(id), 0));
        }
        /// `n` objects of `size` that are never freed.
        fn never_freed(&mut self, size: u64, n: usize) {
            for _ in 0..n {
                self.malloc(size);
            }
        }
        /// MAKE: `n` objects, `live` kept at once, each freed `live` later.
        fn steady(&mut self, size: u64, n: usize, live: usize) {
            let mut q = std::collections::VecDeque::new();
            for _ in 0..n {
                q.push_back(self.malloc(size));
                if q.len() > live {
                    let id = q.pop_front().unwrap();
                    self.free(id);
                }
            }
        }
        /// ESPRESSO: a burst of `burst` objects freed at once, then `n` short
        /// lives, one at a time.
        fn episodic(&mut self, size: u64, burst: usize, n: usize) {
            let ids: Vec<u64> = (0..burst).map(|_| self.malloc(size)).collect();
            for id in ids {
                self.free(id);
            }
            for _ in 0..n {
                let id = self.malloc(size);
                self.free(id);
            }
        }
    }

    fn ev(kind: Kind, id: Option<u64>, old: Option<u64>, size: u64) -> Event {
        Event {
            index: 0,
            kind,
            thread: 0,
            time: 0,
            size,
            align: 0,
            id,
            old,
            old_size: 0,
            stack: 0,
            failed: false,
            inherited: false,
            ..Event::default()
        }
    }

    fn measured(runs: &[&Run]) -> Measured {
        let by_unit = UNITS
            .iter()
            .map(|&u| {
                let ps: Vec<Profile> = runs
                    .iter()
                    .map(|r| {
                        let mut b = ProfileBuilder::new(u, 1);
                        r.evs.iter().for_each(|e| b.add(e));
                        b.finish("t", |_| Vec::new(), |_| String::new(), 0)
                    })
                    .collect();
                if ps.len() == 1 {
                    ps.into_iter().next().unwrap()
                } else {
                    Profile::merge(&ps, heaplab_trace::profile::Weighting::Runs, 0).unwrap()
                }
            })
            .collect();
        Measured {
            traces: runs.iter().map(|_| "t".into()).collect(),
            commands: vec!["prog".into()],
            by_unit,
        }
    }

    fn opts() -> Options {
        Options { name: "t".into(), ..Options::default() }
    }

    fn class(p: &Plan, size: u64) -> &ClassDecision {
        p.classes.iter().find(|c| c.size == size).unwrap_or_else(|| panic!("no class {size}"))
    }

    #[test]
    fn cfrac_like_small_objects_never_freed_choose_the_8_byte_unit() {
        // 8-byte objects, never freed (002 §4.3: CFRAC and YACR waste space
        // at 32 bytes): at R = 8 a block is 16 bytes, at 16 or 32 it is 32+.
        let mut r = Run::default();
        r.never_freed(8, 20000);
        r.steady(100, 500, 10);
        let p = plan(&measured(&[&r]), &opts()).unwrap();
        assert_eq!(p.unit.chosen, 8, "{:?}", p.unit.candidates);
        let c8 = p.unit.candidates.iter().find(|c| c.unit == 8).unwrap();
        let c32 = p.unit.candidates.iter().find(|c| c.unit == 32).unwrap();
        assert!(c32.wasted_live_bytes > 2.0 * c8.wasted_live_bytes);
        assert_eq!(class(&p, 8).allocator, Allocator::Fast);
        assert!(class(&p, 8).why.contains("never returned"), "{}", class(&p, 8).why);
        assert_eq!(p.lists[class(&p, 8).list].block_bytes, 16);
    }

    #[test]
    fn a_larger_unit_is_taken_when_it_wastes_little_and_serves_more() {
        // Sizes 1..=32 equally often, short-lived: at R = 32 one class serves
        // all, at R = 8 four classes do (more tests, or outliers); the live
        // waste is tiny either way.
        let mut r = Run::default();
        for i in 0..32_000u64 {
            let id = r.malloc(1 + i % 32);
            r.free(id);
        }
        let mut o = opts();
        o.max_classes = 2;
        let p = plan(&measured(&[&r]), &o).unwrap();
        assert_eq!(p.unit.chosen, 32, "{:?}", p.unit.candidates);
        assert!((p.selection.served_share - 1.0).abs() < 1e-9);
        // Given, the unit is obeyed.
        o.unit = Some(8);
        let p8 = plan(&measured(&[&r]), &o).unwrap();
        assert_eq!((p8.unit.chosen, p8.unit.how.as_str()), (8, "given"));
    }

    #[test]
    fn fewest_classes_reaching_the_coverage_up_to_the_cap() {
        let mut r = Run::default();
        r.steady(16, 6000, 50); // 60%
        r.steady(48, 3000, 50); // 30%
        r.steady(96, 600, 5); // 6%
        r.steady(200, 300, 5); // 3%
        r.steady(40000, 100, 5); // 1%, too large for a list
        let m = measured(&[&r]);
        let p = plan(&m, &Options { unit: Some(16), ..opts() }).unwrap();
        let kept: Vec<u64> = p.classes.iter().filter(|c| !c.absorbed).map(|c| c.size).collect();
        assert_eq!(kept.len(), 3, "{kept:?}");
        assert!(kept.contains(&16) && kept.contains(&48) && kept.contains(&96));
        assert_eq!(p.selection.stopped_by, "coverage");
        assert!((p.selection.covered_share - 0.96).abs() < 1e-9);
        let capped = plan(&m, &Options { unit: Some(16), max_classes: 1, ..opts() }).unwrap();
        assert_eq!((capped.selection.kept, capped.selection.stopped_by.as_str()), (1, "cap"));
        let all = plan(&m, &Options { unit: Some(16), coverage: 1.0, ..opts() }).unwrap();
        assert_eq!(all.selection.kept, 4);
        assert_eq!(all.selection.too_large, vec![40000]);
        assert!(plan(&m, &Options { coverage: 0.0, ..opts() }).is_err());
    }

    #[test]
    fn fast_or_general_follows_table_4() {
        let mut r = Run::default();
        r.steady(32, 20000, 5000); // MAKE: free list short against live objects
        r.episodic(64, 5000, 20000); // ESPRESSO: free list long, live few, 5000 x 80 B
        r.episodic(128, 40, 4000); // episodic but only 40 blocks to reclaim
        r.never_freed(256, 3000);
        let p =
            plan(&measured(&[&r]), &Options { unit: Some(32), coverage: 1.0, ..opts() }).unwrap();
        assert_eq!(class(&p, 32).allocator, Allocator::Fast);
        assert!(class(&p, 32).why.contains("MAKE"), "{}", class(&p, 32).why);
        let c64 = class(&p, 64);
        assert_eq!(c64.allocator, Allocator::General, "{}", c64.why);
        assert!(c64.mean_free_list > c64.mean_live);
        assert_eq!(class(&p, 128).allocator, Allocator::Fast, "{}", class(&p, 128).why);
        assert_eq!(class(&p, 256).allocator, Allocator::Fast);
        // Overrides and variants.
        let o =
            Options { unit: Some(32), coverage: 1.0, fast: vec![64], general: vec![32], ..opts() };
        let p2 = plan(&measured(&[&r]), &o).unwrap();
        assert_eq!((class(&p2, 64).allocator, class(&p2, 64).overridden), (Allocator::Fast, true));
        assert_eq!(class(&p2, 32).allocator, Allocator::General);
        for (v, a) in
            [(Variant::AllFast, Allocator::Fast), (Variant::AllGeneral, Allocator::General)]
        {
            let pv = plan(
                &measured(&[&r]),
                &Options { unit: Some(32), coverage: 1.0, variant: v, ..opts() },
            )
            .unwrap();
            assert!(pv.classes.iter().all(|c| c.allocator == a));
            assert!(pv.lists.iter().all(|l| l.allocator == a));
        }
        let bad = Options { unit: Some(32), fast: vec![24], ..opts() };
        let e = plan(&measured(&[&r]), &bad).unwrap_err().to_string();
        assert!(e.contains("--fast 24") && e.contains("kept classes are"), "{e}");
    }

    #[test]
    fn reclaim_order_is_the_papers_priority() {
        let mut r = Run::default();
        r.episodic(64, 4000, 8000);
        r.episodic(256, 2000, 8000);
        r.steady(32, 30000, 10);
        let p =
            plan(&measured(&[&r]), &Options { unit: Some(32), coverage: 1.0, ..opts() }).unwrap();
        let gen: Vec<&ListPlan> =
            p.lists.iter().filter(|l| l.allocator == Allocator::General).collect();
        assert_eq!(gen.len(), 2);
        for l in &gen {
            let c = class(&p, l.classes[0]);
            let want = c.p_f * (1.0 - c.p_m) * c.size as f64 * c.mean_free_list;
            assert!((l.reclaim_priority.unwrap() - want).abs() < 1e-9 * want.max(1.0));
        }
        let first = &p.lists[p.reclaim.order[0]];
        let second = &p.lists[p.reclaim.order[1]];
        assert!(first.reclaim_priority >= second.reclaim_priority);
    }

    #[test]
    fn one_dominant_class_is_tested_in_order_many_comparable_ones_use_the_map() {
        let mut one = Run::default();
        one.steady(16, 9000, 10);
        one.steady(48, 500, 10);
        let p = plan(&measured(&[&one]), &Options { unit: Some(16), ..opts() }).unwrap();
        assert_eq!(p.dispatch.kind, Dispatch::Ordered);
        assert_eq!(p.lists[p.dispatch.malloc_order[0]].classes, vec![16]);
        let mut many = Run::default();
        for s in [16u64, 32, 48, 64, 80, 96, 112, 128] {
            many.steady(s, 1000, 10);
        }
        let p = plan(&measured(&[&many]), &Options { unit: Some(16), ..opts() }).unwrap();
        assert_eq!(p.dispatch.kind, Dispatch::Sizemap, "{:?}", p.dispatch.estimated_instructions);
        let forced = plan(
            &measured(&[&many]),
            &Options { unit: Some(16), dispatch: Dispatch::Ordered, ..opts() },
        )
        .unwrap();
        assert_eq!(
            (forced.dispatch.kind, forced.dispatch.how.as_str()),
            (Dispatch::Ordered, "given")
        );
    }

    #[test]
    fn free_order_follows_free_frequency() {
        // 48-byte objects are allocated most but mostly never freed.
        let mut r = Run::default();
        r.never_freed(48, 6000);
        r.steady(16, 4000, 10);
        let p =
            plan(&measured(&[&r]), &Options { unit: Some(16), coverage: 1.0, ..opts() }).unwrap();
        let l48 = class(&p, 48).list;
        let l16 = class(&p, 16).list;
        assert_eq!(p.dispatch.malloc_order[0], l48);
        assert_eq!(p.dispatch.free_order[0], l16);
    }

    #[test]
    fn a_list_absorbs_the_unit_class_with_its_block() {
        let mut r = Run::default();
        r.steady(16, 9000, 10);
        r.steady(24, 100, 10); // 1%: not kept, but 16 and 24 both use 32-byte blocks
        let p =
            plan(&measured(&[&r]), &Options { unit: Some(8), coverage: 0.9, ..opts() }).unwrap();
        assert_eq!(p.selection.kept, 1);
        assert!(class(&p, 24).absorbed);
        assert_eq!(p.lists.len(), 1);
        // 9..24 by the shared block; 0..8 as the smallest fast list.
        assert_eq!(p.lists[0].range, [0, 24]);
        assert!((p.selection.served_share - 1.0).abs() < 1e-9);
    }

    #[test]
    fn requests_below_the_smallest_fast_class_join_its_list() {
        let mut r = Run::default();
        r.steady(40, 9000, 10);
        r.steady(8, 300, 10); // 3%: not kept
        let p =
            plan(&measured(&[&r]), &Options { unit: Some(8), coverage: 0.9, ..opts() }).unwrap();
        assert_eq!(p.selection.kept, 1);
        let c8 = class(&p, 8);
        assert!(c8.absorbed && c8.why.contains("smaller than the smallest"), "{}", c8.why);
        assert_eq!(p.lists[c8.list].range, [0, 40]);
        assert!((p.selection.served_share - 1.0).abs() < 1e-9);
        // Not when the smallest class is general: gnugpp serves small requests.
        let g = plan(
            &measured(&[&r]),
            &Options { unit: Some(8), coverage: 0.9, variant: Variant::AllGeneral, ..opts() },
        )
        .unwrap();
        assert_eq!(g.lists[0].range, [33, 48]); // 40 and 48 share a 64-byte gnugpp block
    }

    #[test]
    fn runs_weigh_the_same() {
        // A small run of 16-byte objects and a large run of 48-byte ones:
        // each run weighs half, whatever its size (002 §3).
        let mut a = Run::default();
        a.steady(16, 1000, 5);
        let mut b = Run::default();
        b.steady(48, 9000, 5);
        let p = plan(&measured(&[&a, &b]), &Options { unit: Some(16), ..opts() }).unwrap();
        assert!((class(&p, 16).p_m - 0.5).abs() < 1e-9);
        assert!((class(&p, 48).p_m - 0.5).abs() < 1e-9);
        assert_eq!(p.profile.runs, 2);
    }

    #[test]
    fn names_must_be_identifiers_that_name_nothing_else() {
        let zoo = vec!["gnugpp".to_string()];
        assert!(check_name("custom_perl", &zoo).is_ok());
        for bad in ["Perl", "1x", "a-b", "", "gnugpp", "glibc", "mimalloc", "int", "hl_x"] {
            assert!(check_name(bad, &zoo).is_err(), "{bad}");
        }
    }

    #[test]
    fn blocks() {
        assert_eq!(
            (fast_block(8), fast_block(16), fast_block(24), fast_block(48)),
            (16, 32, 32, 64)
        );
        assert_eq!(
            (general_block(1), general_block(16), general_block(17), general_block(100)),
            (32, 32, 48, 128)
        );
        assert_eq!(tag(2, true), 0x5c00_002d);
        assert_eq!(tag(2, false), 0x5c00_002c);
    }
}
