//! The locality study of papers 000 and 003 on one recorded trace: every
//! allocator measured (`heaplab_refs::measure`), then the figures derived.
//!
//! ```text
//!   trace (EVENTS + REFS) ─┬─ allocator 1 ─ measure ─┐
//!                          ├─ allocator 2 ─ measure ─┼─▶ Locality: miss rate vs cache size (000 Figs 6-8),
//!                          └─ ...                    │   time I + M·P·D (000 Tables 4-5), page faults vs
//!                                                    │   memory (000 Figs 2-3), boundary tags (000 Table 6),
//!                                                    └   allocator pollution (003 Figs 5-10, Tables 2-4)
//! ```
//!
//! Every number comes from a simulation of the merged stream; nothing is
//! taken from the papers but their configurations and the penalty P = 25.

use anyhow::Result;
use heaplab_plumb::vg::VgTools;
use heaplab_plumb::Allocator;
use heaplab_refs::measure::{self, Cell, MeasureStats, SimSpec};
use heaplab_sim::config::{fmt_bytes, CacheConfig};
use heaplab_sim::{CacheResult, Mode, Part};
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

/// The allocators `heaplab locality` measures when not told: paper 000's
/// five, paper 003's sbt and sgf, glibc, and GNU LOCAL with 8-byte tags.
pub const DEFAULT_ALLOCATORS: &str =
    "firstfit,gnugpp,bsd,gnulocal,quickfit,sbt,sgf,glibc,gnulocal+pad8";

/// The miss penalty of paper 000 (Tables 4 and 5), in cycles.
pub const PAPER_PENALTY: u64 = 25;
/// A modern penalty: a miss that goes to DRAM, about 65 ns at 3 GHz.
pub const MODERN_PENALTY: u64 = 200;

/// How to run the study.
#[derive(Debug, Clone)]
pub struct Options {
    pub allocators: Vec<Allocator>,
    pub sim: SimSpec,
    pub penalty: u64,
    pub modern_penalty: u64,
}

/// How the allocator's references meet the program's in a cache.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum CacheMode {
    /// `unified`: application and allocator share the cache (003's Conv-Conf).
    Unified,
    /// `split`: the allocator has a cache of its own, of the same
    /// configuration (003's IMM).
    Split,
}

impl From<Mode> for CacheMode {
    fn from(m: Mode) -> CacheMode {
        match m {
            Mode::Unified => CacheMode::Unified,
            Mode::Split => CacheMode::Split,
        }
    }
}

/// One cache configuration's counts in one mode.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct CacheRow {
    pub size: u64,
    pub line: u32,
    pub assoc: u32,
    pub mode: CacheMode,
    pub accesses: u64,
    pub misses: u64,
    pub app_accesses: u64,
    pub app_misses: u64,
    pub alloc_accesses: u64,
    pub alloc_misses: u64,
}

/// One page size's fault curve.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct PageRow {
    pub page_size: u64,
    /// References (an access straddling pages counts on each).
    pub references: u64,
    pub distinct_pages: u64,
    /// `[frames, faults]` for every memory size from 1 frame to every page touched.
    pub curve: Vec<[u64; 2]>,
}

/// Estimated execution time `I + M·P·D` with one cache (paper 000 §4.2).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct TimeRow {
    /// The cache, as SIZE:LINE:ASSOC.
    pub cache: String,
    pub penalty: u64,
    /// I: the program's instructions plus the allocator's.
    pub instructions: u64,
    /// D: data references.
    pub references: u64,
    /// M·D: misses.
    pub misses: u64,
    /// I + M·P·D, in cycles (one cycle per instruction).
    pub total_cycles: u64,
    /// M·P·D.
    pub miss_cycles: u64,
}

/// How much of the application's misses the allocator causes (paper 003):
/// the application sharing a cache with its allocator (Conv-Conf) against
/// the allocator on a cache of its own (IMM).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct PollutionRow {
    pub cache: String,
    /// Conv-Conf: all misses, application and allocator sharing the cache.
    pub conv_misses: u64,
    /// IMM-Application: the application's misses with the allocator moved out.
    pub imm_app_misses: u64,
    /// IMM-Allocator: the allocator's misses on its own cache.
    pub imm_alloc_misses: u64,
    /// (conv - imm_app) / conv, in percent (003 Figure 7).
    pub improvement_pct: f64,
}

/// Everything measured for one allocator.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct AllocatorResult {
    pub name: String,
    pub stats: MeasureStats,
    pub seconds: f64,
    pub caches: Vec<CacheRow>,
    pub pages: Vec<PageRow>,
    pub time: Vec<TimeRow>,
    pub pollution: Vec<PollutionRow>,
}

/// Paper 000 Table 6: one allocator with and without 8-byte tags.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct TagsRow {
    pub allocator: String,
    pub with_tags: String,
    pub cache: String,
    pub miss_rate_pct_tags: f64,
    pub miss_rate_pct_no_tags: f64,
    /// Miss time with tags, in percent of the total time without tags.
    pub penalty_pct_tags: f64,
    pub penalty_pct_no_tags: f64,
    /// The difference: what the tags cost.
    pub penalty_due_to_tags_pct: f64,
}

/// An allocator that could not be measured.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Failure {
    pub allocator: String,
    pub error: String,
}

/// The study's results (the JSON `heaplab locality --json` writes).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Locality {
    pub trace: String,
    pub command: String,
    pub penalty: u64,
    pub modern_penalty: u64,
    pub allocators: Vec<AllocatorResult>,
    pub boundary_tags: Vec<TagsRow>,
    pub failed: Vec<Failure>,
}

fn cfg(size: u64, line: u32, assoc: u32) -> CacheConfig {
    CacheConfig::new(size, line, assoc).expect("a valid configuration")
}

/// `size:line:assoc`, as the SPEC syntax writes it.
pub fn cache_name(c: &CacheConfig) -> String {
    format!("{}:{}:{}", fmt_bytes(c.size()), c.line(), c.assoc())
}

/// The configurations the study needs beside the user's: paper 000's and
/// 003's.
pub fn required_configs() -> Vec<CacheConfig> {
    let mut v = Vec::new();
    for s in 14..=18 {
        v.push(cfg(1 << s, 32, 1)); // 000: 16K..256K direct-mapped, 32-byte lines
    }
    v.push(cfg(32 << 10, 32, 1)); // 003 Figures 5-7
    v.push(cfg(32 << 10, 64, 1)); // 003 Figures 8-9
    v.push(cfg(512, 32, 1)); // 003 Figure 10
    v
}

/// Adds the required configurations to `caches` (once each).
pub fn with_required(mut caches: Vec<CacheConfig>) -> Vec<CacheConfig> {
    for c in required_configs() {
        if !caches.contains(&c) {
            caches.push(c);
        }
    }
    caches
}

fn find<'a>(caches: &'a [CacheResult], c: &CacheConfig, mode: Mode) -> Option<&'a CacheResult> {
    caches.iter().find(|r| r.config == *c && r.mode == mode)
}

/// One allocator's figures, from its measurement.
pub fn derive(cell: &Cell, opts: &Options) -> AllocatorResult {
    let s = &cell.stats;
    let caches = cell
        .caches
        .iter()
        .map(|r| CacheRow {
            size: r.config.size(),
            line: r.config.line(),
            assoc: r.config.assoc(),
            mode: r.mode.into(),
            accesses: r.counts.total_accesses(),
            misses: r.counts.total_misses(),
            app_accesses: r.counts.part_accesses(Part::Application),
            app_misses: r.counts.part_misses(Part::Application),
            alloc_accesses: r.counts.part_accesses(Part::Allocator),
            alloc_misses: r.counts.part_misses(Part::Allocator),
        })
        .collect();
    let pages = cell
        .pages
        .iter()
        .map(|p| PageRow {
            page_size: p.page_size,
            references: p.references,
            distinct_pages: p.distinct_pages,
            curve: p.points().map(|(f, n)| [f, n]).collect(),
        })
        .collect();
    let instructions = s.app_instructions + s.alloc_instructions;
    let mut time = Vec::new();
    for c in [cfg(16 << 10, 32, 1), cfg(64 << 10, 32, 1)] {
        if let Some(r) = find(&cell.caches, &c, Mode::Unified) {
            for p in [opts.penalty, opts.modern_penalty] {
                let misses = r.counts.total_misses();
                time.push(TimeRow {
                    cache: cache_name(&c),
                    penalty: p,
                    instructions,
                    references: r.counts.total_accesses(),
                    misses,
                    total_cycles: instructions + misses * p,
                    miss_cycles: misses * p,
                });
            }
        }
    }
    let mut pollution = Vec::new();
    for c in [cfg(32 << 10, 32, 1), cfg(32 << 10, 64, 1), cfg(512, 32, 1)] {
        if let (Some(u), Some(sp)) =
            (find(&cell.caches, &c, Mode::Unified), find(&cell.caches, &c, Mode::Split))
        {
            let conv = u.counts.total_misses();
            let imm = sp.counts.part_misses(Part::Application);
            pollution.push(PollutionRow {
                cache: cache_name(&c),
                conv_misses: conv,
                imm_app_misses: imm,
                imm_alloc_misses: sp.counts.part_misses(Part::Allocator),
                improvement_pct: if conv > 0 {
                    100.0 * (conv as f64 - imm as f64) / conv as f64
                } else {
                    0.0
                },
            });
        }
    }
    AllocatorResult {
        name: cell.allocator.clone(),
        stats: *s,
        seconds: cell.seconds,
        caches,
        pages,
        time,
        pollution,
    }
}

/// Paper 000 Table 6 for every pair NAME, NAME+padN measured.
fn boundary_tags(results: &[AllocatorResult], penalty: u64) -> Vec<TagsRow> {
    let c = cfg(64 << 10, 32, 1);
    let mut rows = Vec::new();
    for padded in results {
        let Some((base, _)) = padded.name.split_once("+pad") else { continue };
        let Some(plain) = results.iter().find(|r| r.name == base) else { continue };
        let row = |r: &AllocatorResult| {
            r.caches
                .iter()
                .find(|x| {
                    x.mode == CacheMode::Unified
                        && x.size == c.size()
                        && x.line == c.line()
                        && x.assoc == c.assoc()
                })
                .map(|x| {
                    (x.misses, x.accesses, r.stats.app_instructions + r.stats.alloc_instructions)
                })
        };
        let (Some((mt, at, _)), Some((mn, an, inn))) = (row(padded), row(plain)) else { continue };
        let total_no_tags = (inn + mn * penalty) as f64;
        let pct = |m: u64| 100.0 * (m * penalty) as f64 / total_no_tags;
        rows.push(TagsRow {
            allocator: plain.name.clone(),
            with_tags: padded.name.clone(),
            cache: cache_name(&c),
            miss_rate_pct_tags: 100.0 * mt as f64 / at.max(1) as f64,
            miss_rate_pct_no_tags: 100.0 * mn as f64 / an.max(1) as f64,
            penalty_pct_tags: pct(mt),
            penalty_pct_no_tags: pct(mn),
            penalty_due_to_tags_pct: pct(mt) - pct(mn),
        });
    }
    rows
}

/// Measures every allocator on `trace` (one at a time: each measurement is a
/// Valgrind process and a simulation, two cores' worth) and derives the
/// figures. `progress` hears about each allocator as it starts and ends.
pub fn run(
    vg: &VgTools,
    replay: &Path,
    trace: &Path,
    opts: &Options,
    mut progress: impl FnMut(usize, &str, Option<&Result<Cell>>),
) -> Result<Locality> {
    let scratch = heaplab_plumb::vg::Scratch::new("locality")?;
    let events = scratch.dir.join("events.hltrace");
    measure::events_only(trace, &events)?;
    let meta = heaplab_trace::TraceReader::open(trace)?.meta().clone();
    let mut results = Vec::new();
    let mut failed = Vec::new();
    for (i, a) in opts.allocators.iter().enumerate() {
        progress(i, &a.name, None);
        let r = measure::measure(vg, replay, trace, &events, a, &opts.sim);
        progress(i, &a.name, Some(&r));
        match r {
            Ok(cell) => results.push(derive(&cell, opts)),
            Err(e) => failed.push(Failure { allocator: a.name.clone(), error: format!("{e:#}") }),
        }
    }
    Ok(assemble(&trace.display().to_string(), &meta.command_line(), opts, results, failed))
}

/// The study from every allocator's figures (in the allocators' order) and
/// the failures: the figures that compare allocators are derived here.
pub fn assemble(
    trace: &str,
    command: &str,
    opts: &Options,
    results: Vec<AllocatorResult>,
    failed: Vec<Failure>,
) -> Locality {
    let boundary_tags = boundary_tags(&results, opts.penalty);
    Locality {
        trace: trace.to_string(),
        command: command.to_string(),
        penalty: opts.penalty,
        modern_penalty: opts.modern_penalty,
        allocators: results,
        boundary_tags,
        failed,
    }
}

/// Where a trace's default report goes.
pub fn default_report_dir(trace: &Path) -> PathBuf {
    trace.with_extension("locality")
}
