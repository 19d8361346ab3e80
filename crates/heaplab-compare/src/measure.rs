//! The comparison: every (trace, allocator) cell replayed in its own
//! processes, in three kinds of run:
//!
//! 1. a touch-mode replay (footprint, RSS growth, usable sizes), and
//! 2. a callgrind replay of the general loop (instructions per call),
//!
//! which are independent and run in parallel up to `jobs` at a time; then
//!
//! 3. `repeat` plain-mode replays per cell for wall time, one at a time,
//!    round-robin over the cells so that a slow patch of the machine is spread
//!    over every allocator rather than falling on one.

use crate::alloc::{Allocator, Source};
use crate::callgrind::{replay_costs, AllocCosts};
use crate::health::{self, Truncation};
use crate::record::Record;
use crate::replay::{self, Mode, Outcome};
use crate::tools::Tools;
use crate::{parallel, Progress};
use anyhow::{bail, Context, Result};
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

/// What to measure, and how.
#[derive(Debug, Clone)]
pub struct Options {
    /// Timing runs per cell (the median is reported); 0 turns timing off.
    pub repeat: usize,
    /// Parallel replays in the first phase.
    pub jobs: usize,
    /// Instruction counts with callgrind (slow: 20 to 50 times the replay).
    pub instructions: bool,
    /// The touch-mode run (footprint, utilization, fragmentation).
    pub footprint: bool,
    /// Keep callgrind's output files in the work directory.
    pub keep_scratch: bool,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            repeat: 3,
            jobs: crate::cores(),
            instructions: true,
            footprint: true,
            keep_scratch: false,
        }
    }
}

/// What a real program costs, read from `TRACE.program.json` when it exists
/// beside a trace (`heaplab compare --live --program-cost` writes it): the
/// program's own instructions, outside the allocator, give the allocator's
/// share its denominator (paper 002 Figure 5).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct ProgramCost {
    /// Every instruction of the program's run (callgrind's total).
    pub program_instructions: u64,
    /// Of which in the allocator.
    pub alloc_instructions: u64,
    /// The allocator it ran with.
    pub allocator: String,
    /// The command line.
    pub command: Vec<String>,
}

impl ProgramCost {
    /// The sidecar of a trace: `perl.hltrace` → `perl.hltrace.program.json`.
    pub fn sidecar(trace: &Path) -> PathBuf {
        let mut s = trace.as_os_str().to_owned();
        s.push(".program.json");
        PathBuf::from(s)
    }

    pub fn load(trace: &Path) -> Result<Option<ProgramCost>> {
        let p = Self::sidecar(trace);
        if !p.exists() {
            return Ok(None);
        }
        let text =
            std::fs::read_to_string(&p).with_context(|| format!("reading {}", p.display()))?;
        let c: ProgramCost = serde_json::from_str(&text)
            .with_context(|| format!("{}: not a program-cost file", p.display()))?;
        if c.alloc_instructions > c.program_instructions {
            bail!("{}: alloc_instructions exceeds program_instructions", p.display());
        }
        Ok(Some(c))
    }

    /// Instructions of the program outside its allocator.
    pub fn outside(&self) -> u64 {
        self.program_instructions - self.alloc_instructions
    }
}

#[derive(Default)]
struct Cell {
    touch: Option<Outcome>,
    costs: Option<(AllocCosts, u64)>,
    events_from_cg: Option<Outcome>,
    wall: Vec<f64>,
    timing_out: Option<Outcome>,
    failure: Option<String>,
}

impl Cell {
    fn fail(&mut self, why: String) {
        if self.failure.is_none() {
            self.failure = Some(why);
        }
    }
    fn any_out(&self) -> Option<&replay::ReplayOut> {
        [&self.touch, &self.events_from_cg, &self.timing_out]
            .into_iter()
            .flatten()
            .find_map(|o| o.out.as_ref())
    }
}

/// How much slower a replay runs under callgrind than a touch-mode replay
/// natively: 10 to 20 times on this project's allocators (memory-bound ones
/// like firstfit lose less, because callgrind does not simulate the cache).
pub const CALLGRIND_SLOWDOWN: f64 = 20.0;

fn median(v: &[f64]) -> Option<f64> {
    if v.is_empty() {
        return None;
    }
    let mut s = v.to_vec();
    s.sort_by(|a, b| a.total_cmp(b));
    let n = s.len();
    Some(if n % 2 == 1 { s[n / 2] } else { (s[n / 2 - 1] + s[n / 2]) / 2.0 })
}

/// Runs the comparison and returns one record per (trace, allocator), in
/// trace-major order. Allocators marked missing get records that say so.
pub fn compare(
    tools: &Tools,
    traces: &[PathBuf],
    allocs: &[Allocator],
    opts: &Options,
    progress: &dyn Progress,
) -> Result<Vec<Record>> {
    tools.check_replay()?;
    if opts.instructions && !tools.have_valgrind() {
        bail!("valgrind is not installed, and instruction counts need it (apt-get install valgrind, or pass --no-instructions)");
    }
    std::fs::create_dir_all(&tools.work_dir)
        .with_context(|| format!("creating {}", tools.work_dir.display()))?;
    let cuts: Vec<Option<Truncation>> =
        traces.iter().map(|t| health::check(t)).collect::<Result<_>>()?;
    let programs: Vec<Option<ProgramCost>> =
        traces.iter().map(|t| ProgramCost::load(t)).collect::<Result<_>>()?;
    let n = traces.len() * allocs.len();
    let idx = |t: usize, a: usize| t * allocs.len() + a;
    let runnable: Vec<usize> =
        (0..n).filter(|&i| allocs[i % allocs.len()].missing.is_none()).collect();
    let phase1: Vec<(usize, u8)> = runnable
        .iter()
        .flat_map(|&i| {
            let mut v = Vec::new();
            if opts.footprint {
                v.push((i, 0u8));
            }
            if opts.instructions {
                v.push((i, 1u8));
            }
            v
        })
        .collect();
    progress.start((phase1.len() + runnable.len() * opts.repeat) as u64);

    // Phase 1: touch runs, then callgrind runs, each in parallel. A cell
    // whose touch run failed, or whose replay is so slow natively that
    // callgrind would pass its time limit, gets no callgrind run.
    let mut cells: Vec<Cell> = (0..n).map(|_| Cell::default()).collect();
    let stem = |t: &Path| t.file_stem().unwrap_or_default().to_string_lossy().to_string();
    let touch_jobs: Vec<usize> = phase1.iter().filter(|j| j.1 == 0).map(|j| j.0).collect();
    let touched = parallel(touch_jobs.len(), opts.jobs, |j| {
        let i = touch_jobs[j];
        let (trace, alloc) = (&traces[i / allocs.len()], &allocs[i % allocs.len()]);
        let r = replay::run(tools, alloc, trace, Mode::Touch, &[]);
        progress.step(&format!("touch {} {}", stem(trace), alloc.name));
        r
    });
    for (&i, r) in touch_jobs.iter().zip(touched) {
        match r {
            Err(e) => cells[i].fail(format!("{e:#}")),
            Ok(o) => {
                if let Some(f) = o.failure() {
                    cells[i].fail(format!("touch-mode replay: {f}"));
                }
                cells[i].touch = Some(o);
            }
        }
    }
    let cg_limit = tools.callgrind_timeout();
    let mut cg_jobs: Vec<usize> = Vec::new();
    for i in phase1.iter().filter(|j| j.1 == 1).map(|j| j.0) {
        let native =
            cells[i].touch.as_ref().and_then(|o| o.out.as_ref()).map(|o| o.timed_ns as f64 / 1e9);
        match (native, cg_limit) {
            _ if cells[i].failure.is_some() => progress.step("skipped"),
            (Some(s), Some(limit)) if s * CALLGRIND_SLOWDOWN > limit.as_secs_f64() => {
                cells[i].fail(format!(
                    "not run under callgrind: the touch-mode replay took {s:.1} s, so about {:.0} s under \
                     callgrind, past the limit of {} s (raise --timeout)",
                    s * CALLGRIND_SLOWDOWN,
                    limit.as_secs()
                ));
                progress.step("skipped");
            }
            _ => cg_jobs.push(i),
        }
    }
    let results = parallel(cg_jobs.len(), opts.jobs, |j| {
        let i = cg_jobs[j];
        let (trace, alloc) = (&traces[i / allocs.len()], &allocs[i % allocs.len()]);
        let out = replay::scratch(tools, trace, alloc, "callgrind.out");
        let r = replay::run_callgrind(tools, alloc, trace, &out)
            .map(|(o, p)| (o, (replay_costs(&p), p.total)));
        if !opts.keep_scratch {
            let _ = std::fs::remove_file(&out);
        }
        progress.step(&format!("callgrind {} {}", stem(trace), alloc.name));
        r
    });
    for (&i, r) in cg_jobs.iter().zip(results) {
        let c = &mut cells[i];
        match r {
            Err(e) => c.fail(format!("{e:#}")),
            Ok((o, costs)) => {
                if let Some(f) = o.failure() {
                    c.fail(format!("callgrind replay: {f}"));
                } else {
                    c.costs = Some(costs);
                }
                c.events_from_cg = Some(o);
            }
        }
    }

    // Phase 2: timing, one run at a time.
    for _ in 0..opts.repeat {
        for &i in &runnable {
            let (trace, alloc) = (&traces[i / allocs.len()], &allocs[i % allocs.len()]);
            if cells[i].failure.is_some() {
                progress.step("skipped");
                continue;
            }
            match replay::run(tools, alloc, trace, Mode::Plain, &[]) {
                Err(e) => cells[i].fail(format!("{e:#}")),
                Ok(o) => {
                    if let Some(f) = o.failure() {
                        cells[i].fail(format!("plain replay: {f}"));
                    } else if let Some(out) = &o.out {
                        cells[i].wall.push(out.timed_ns as f64 / 1e9);
                    }
                    cells[i].timing_out = Some(o);
                }
            }
            progress.step(&format!(
                "time {} {}",
                trace.file_stem().unwrap_or_default().to_string_lossy(),
                alloc.name
            ));
        }
    }
    if !opts.keep_scratch {
        tools.clean();
    }

    // Records.
    let mut records = Vec::with_capacity(n);
    for (t, trace) in traces.iter().enumerate() {
        let glibc_wall =
            allocs.iter().position(|a| a.is_glibc()).and_then(|a| median(&cells[idx(t, a)].wall));
        let footprint = |c: &Cell, a: &Allocator| -> Option<(u64, &'static str)> {
            let o = c.touch.as_ref()?.out.as_ref()?;
            match (&o.footprint, a.source) {
                (Some(f), Source::Heaplab) => Some((f.peak_bytes, "heaplab_alloc_stats")),
                _ => Some((o.rss.growth_bytes, "rss_touch")),
            }
        };
        let firstfit = allocs
            .iter()
            .position(|a| a.name == "firstfit")
            .and_then(|a| footprint(&cells[idx(t, a)], &allocs[a]).map(|f| f.0));
        for (a, alloc) in allocs.iter().enumerate() {
            let c = &cells[idx(t, a)];
            let mut r = Record {
                trace: trace.display().to_string(),
                trace_name: trace.file_stem().unwrap_or_default().to_string_lossy().to_string(),
                allocator: alloc.name.clone(),
                source: alloc.source.name().to_string(),
                status: "ok".into(),
                ..Record::default()
            };
            if let Some(m) = &alloc.missing {
                r.status = "missing".into();
                r.error = Some(m.clone());
                records.push(r);
                continue;
            }
            if let Some(f) = &c.failure {
                r.status = "failed".into();
                r.error = Some(f.clone());
            }
            if let Some(o) = c.any_out() {
                r.events = Some(o.events);
                r.mallocs = Some(o.mallocs());
                r.frees = Some(o.frees());
                r.reallocs = Some(o.reallocs());
                r.peak_live_bytes = Some(o.peak_live_bytes);
            }
            let cut = cuts[t].clone().or_else(|| c.any_out().and_then(Truncation::from_replay));
            if let Some(cut) = &cut {
                r.truncated = true;
                r.truncated_at_byte = Some(cut.offset);
                r.truncated_after_events = Some(cut.events_read);
                r.truncation = Some(cut.message.clone());
            }
            if r.events == Some(0) {
                // Nothing ran: every figure would be 0 or a division by 0.
                r.status = "empty".into();
                r.error = Some(match &cut {
                    Some(cut) => format!(
                        "no events to replay: the trace is cut at byte {} before its first event",
                        cut.offset
                    ),
                    None => "the trace holds no events: nothing to measure".into(),
                });
                records.push(r);
                continue;
            }
            if let Some((costs, replay_total)) = &c.costs {
                r.instr_per_malloc = costs.malloc.per_call();
                r.instr_per_free = costs.free.per_call();
                r.instr_per_realloc = costs.realloc.per_call();
                r.alloc_instructions = Some(costs.total);
                r.replay_instructions = Some(*replay_total);
                let a = costs.total as f64;
                match &programs[t] {
                    Some(p) => {
                        r.alloc_instr_share = Some(a / (a + p.outside() as f64));
                        r.share_basis = Some("program".into());
                    }
                    None if *replay_total > 0 => {
                        r.alloc_instr_share = Some(a / *replay_total as f64);
                        r.share_basis = Some("replay".into());
                    }
                    None => {}
                }
            }
            r.wall_runs_s = c.wall.clone();
            r.wall_s = median(&c.wall);
            r.wall_ratio_glibc = match (r.wall_s, glibc_wall) {
                (Some(w), Some(g)) if g > 0.0 => Some(w / g),
                _ => None,
            };
            r.ns_per_event = match (r.wall_s, r.events) {
                (Some(w), Some(e)) if e > 0 => Some(w * 1e9 / e as f64),
                _ => None,
            };
            if let Some((fp, src)) = footprint(c, alloc) {
                r.peak_footprint_bytes = Some(fp);
                r.footprint_source = Some(src.into());
                r.footprint_vs_firstfit = firstfit.filter(|&f| f > 0).map(|f| fp as f64 / f as f64);
                r.utilization = (fp > 0).then(|| r.peak_live_bytes.unwrap_or(0) as f64 / fp as f64);
            }
            if let Some(o) = c.touch.as_ref().and_then(|o| o.out.as_ref()) {
                r.peak_rss_growth_bytes = Some(o.rss.growth_bytes);
                if let Some(u) = &o.usable {
                    r.peak_live_usable_bytes = Some(u.peak_live_usable_bytes);
                    r.internal_fragmentation = (u.usable_at_peak_live_bytes > 0).then(|| {
                        1.0 - u.peak_live_bytes as f64 / u.usable_at_peak_live_bytes as f64
                    });
                }
            }
            records.push(r);
        }
    }
    Ok(records)
}
