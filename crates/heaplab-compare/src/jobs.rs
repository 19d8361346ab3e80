//! `heaplab compare` as independent jobs (heaplab-jobs): per (trace,
//! allocator), up to three, each a pure function of its hashed inputs (the
//! trace, the replayer, the allocator's shared object, the C library, the
//! counting tool):
//!
//! | kind | runs | gives |
//! |---|---|---|
//! | `compare.touch` | `heaplab-replay --mode touch` | footprint, RSS growth, usable bytes, the replay's figures |
//! | `compare.count` | the replay under a counter (count.rs) | instructions per call, by entry point |
//! | `compare.time` | `heaplab-replay`, `repeat` times (alone: it times) | the timed regions |
//!
//! A local run runs them here (touch and count in parallel, then the timing
//! runs one at a time, round-robin over the cells); `--plan DIR` writes them
//! for an engine; both end in [`merge`], which makes the records from the
//! outcomes, so a merged plan gives what a local run gives.

use crate::alloc::{Allocator, Source};
use crate::count::{self, Counter, Counts};
use crate::health::Truncation;
use crate::measure::ProgramCost;
use crate::record::Record;
use crate::replay::{self, Mode, ReplayOut};
use crate::tools::Tools;
use anyhow::{bail, Context, Result};
use heaplab_jobs::{Input, Job, JobState};
pub use heaplab_plumb::AllocSpec;
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use std::path::{Path, PathBuf};

/// A trace of the study.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TraceSpec {
    /// As the user gave it (the records' `trace`).
    pub given: String,
    /// Absolute.
    pub path: PathBuf,
    /// Events in it (for the estimates).
    pub events: u64,
    /// Where it stops early, if it does (its rows are marked truncated).
    pub cut: Option<Truncation>,
}

/// A comparison: what a plan keeps to merge its outcomes.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Study {
    pub traces: Vec<TraceSpec>,
    pub allocators: Vec<AllocSpec>,
    /// Each trace's `TRACE.program.json`, if it had one.
    pub programs: Vec<Option<ProgramCost>>,
    /// None: no instruction counts.
    pub counter: Option<Counter>,
    pub footprint: bool,
    pub repeat: usize,
    /// A replay's time limit (0: none); a counted replay gets ten times it
    /// under Valgrind.
    pub timeout_s: u64,
    /// The replayer's `--threads` for the touch and timing runs (None: its
    /// default). The counted replays run serially (`--count` replays on one
    /// thread).
    #[serde(default)]
    pub threads: Option<String>,
    /// The replayer's `--wait` for the touch and timing runs of a threaded
    /// replay (None: its default, futex).
    #[serde(default)]
    pub wait: Option<String>,
    /// The timing replays' mode when not plain: `touch` (`--time-mode`).
    #[serde(default)]
    pub time_mode: Option<String>,
    /// Paths of the native build the jobs run.
    pub replay: PathBuf,
    pub lib_dir: PathBuf,
}

/// The measurements of a cell.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Measure {
    Touch,
    Count,
    Time,
}

impl Measure {
    fn kind(self) -> &'static str {
        match self {
            Measure::Touch => "compare.touch",
            Measure::Count => "compare.count",
            Measure::Time => "compare.time",
        }
    }
    fn of_kind(kind: &str) -> Option<Measure> {
        [Measure::Touch, Measure::Count, Measure::Time].into_iter().find(|m| m.kind() == kind)
    }
}

/// The C library this machine's programs load (an input of every job: the
/// allocators call it, glibc is one).
fn libc_path() -> Option<PathBuf> {
    let maps = std::fs::read_to_string("/proc/self/maps").ok()?;
    maps.lines()
        .filter_map(|l| l.split_whitespace().nth(5))
        .find(|p| p.ends_with("/libc.so.6"))
        .map(PathBuf::from)
}

/// Nanoseconds per event of a native replay, for the first estimates (the
/// runner learns the real rate as jobs finish).
const NS_PER_EVENT: f64 = 15.0;

impl Study {
    /// Where heaplab's Valgrind tools are (`build/lib/valgrind`).
    fn vg_lib(&self) -> PathBuf {
        self.lib_dir.join("valgrind")
    }

    /// Cell index of (trace t, allocator a).
    pub fn cell(&self, t: usize, a: usize) -> usize {
        t * self.allocators.len() + a
    }

    /// Every job: the touch runs of every cell, then the counted replays,
    /// then the timing runs (a plan's lines keep this order: the touch runs
    /// decode each trace into the plan's cache natively, before the counted
    /// replays would under Valgrind). Hashes the inputs.
    pub fn jobs(&self) -> Result<Vec<Job>> {
        let mut common_inputs = vec![Input::of(&self.replay)?];
        if let Some(c) = libc_path() {
            common_inputs.push(Input::of(&c)?);
        }
        let tool = self.vg_lib().join("heaplab-count-amd64-linux");
        let mut jobs = Vec::new();
        for t in &self.traces {
            let trace_in = Input::of(&t.path)?;
            let native = t.events as f64 * NS_PER_EVENT * 1e-9;
            for a in &self.allocators {
                if a.missing.is_some() {
                    continue;
                }
                let mut inputs = vec![trace_in.clone()];
                inputs.extend(common_inputs.iter().cloned());
                if let Some(p) = &a.preload {
                    inputs.push(Input::of(p).with_context(|| format!("allocator {}", a.name))?);
                }
                let mut params = vec![("trace".to_string(), t.path.display().to_string())];
                params.extend(a.to_params());
                params.push(("replay".into(), self.replay.display().to_string()));
                params.push(("timeout".into(), self.timeout_s.to_string()));
                if let Some(t) = &self.threads {
                    params.push(("threads".into(), t.clone()));
                }
                if let Some(w) = &self.wait {
                    params.push(("wait".into(), w.clone()));
                }
                if let Some(m) = &self.time_mode {
                    params.push(("time-mode".into(), m.clone()));
                }
                let name = trace_name(&t.given);
                let job = |m: Measure,
                           extra: Vec<(String, String)>,
                           more: Vec<Input>,
                           weight: f64| {
                    let mut p = params.clone();
                    p.extend(extra);
                    let mut i = inputs.clone();
                    i.extend(more);
                    let what = match m {
                        Measure::Touch => "touch",
                        Measure::Count => "count",
                        Measure::Time => "time",
                    };
                    Job::new(m.kind(), &a.name, &format!("{what} {name} {}", a.name), i, p, weight)
                };
                if self.footprint {
                    jobs.push(job(Measure::Touch, vec![], vec![], 0.1 + 3.0 * native));
                }
                if let Some(c) = self.counter {
                    let mut extra = vec![("counter".to_string(), c.name().to_string())];
                    let mut more = vec![];
                    if c == Counter::Vgcount {
                        extra.push(("vg-lib".into(), self.vg_lib().display().to_string()));
                        more.push(Input::of(&tool).context("the counting tool")?);
                    }
                    // in the parameters, so that it is part of the job's id
                    for (k, v) in count::counting_env(a) {
                        extra.push(("count-env".into(), format!("{k}={v}")));
                    }
                    jobs.push(job(Measure::Count, extra, more, 0.5 + c.slowdown() * native));
                }
                if self.repeat > 0 {
                    let w = self.repeat as f64 * (0.05 + native);
                    jobs.push(
                        job(
                            Measure::Time,
                            vec![("repeat".into(), self.repeat.to_string())],
                            vec![],
                            w,
                        )
                        .alone(),
                    );
                }
            }
        }
        let phase = |j: &Job| Measure::of_kind(&j.kind).map(|m| m as u8).unwrap_or(9);
        jobs.sort_by_key(phase); // stable: cell order within each kind
        Ok(jobs)
    }
}

/// The file name without its extension.
pub fn trace_name(given: &str) -> String {
    Path::new(given).file_stem().unwrap_or_default().to_string_lossy().to_string()
}

/// Tools for jobs that name their own paths (and a private scratch directory).
fn tools_for(replay: &Path, lib_dir: &Path, timeout_s: u64) -> Result<Tools> {
    let mut t = Tools::new(&heaplab_plumb::Layout::checkout(Path::new("/")))?;
    t.replay = replay.to_path_buf();
    t.lib_dir = lib_dir.to_path_buf();
    t.ops_cache = None;
    t.timeout = (timeout_s > 0).then(|| std::time::Duration::from_secs(timeout_s));
    Ok(t)
}

fn param<'a>(job: &'a Job, key: &str) -> Result<&'a str> {
    job.param(key).with_context(|| format!("job {}: no --{key}", job.id))
}

/// The allocator and tools a job names.
fn setup(job: &Job, ops_cache: Option<&Path>) -> Result<(Tools, Allocator, PathBuf)> {
    let replay = PathBuf::from(param(job, "replay")?);
    let timeout: u64 = param(job, "timeout")?.parse().context("--timeout")?;
    let lib_dir = job
        .param("vg-lib")
        .and_then(|l| Path::new(l).parent().map(Path::to_path_buf))
        .unwrap_or_else(|| replay.parent().unwrap_or(Path::new("/")).join("../lib"));
    let mut tools = tools_for(&replay, &lib_dir, timeout)?;
    tools.ops_cache = ops_cache.map(Path::to_path_buf);
    tools.threads = job.param("threads").map(str::to_string);
    tools.wait = job.param("wait").map(str::to_string);
    let spec = AllocSpec::from_params(&job.params).with_context(|| format!("job {}", job.id))?;
    Ok((tools, spec.allocator(), PathBuf::from(param(job, "trace")?)))
}

fn failed(what: &str, o: &replay::Outcome) -> Result<()> {
    match o.failure() {
        Some(f) => bail!("{what}: {f}"),
        None => Ok(()),
    }
}

/// The timing replays' mode (`--time-mode`): plain unless the job says touch.
fn time_mode(job: &Job) -> Result<Mode> {
    match job.param("time-mode") {
        None | Some("plain") => Ok(Mode::Plain),
        Some("touch") => Ok(Mode::Touch),
        Some(m) => bail!("job {}: time-mode {m:?}: expected plain or touch", job.id),
    }
}

/// One timing replay: its timed region's wall time and CPU time (every
/// thread's), in seconds.
#[derive(Debug, Clone, Copy, Default)]
pub struct Timed {
    pub wall_s: f64,
    pub cpu_s: f64,
}

/// One replay's timed region and its JSON.
fn time_once(tools: &Tools, alloc: &Allocator, trace: &Path, mode: Mode) -> Result<(Timed, Value)> {
    let o = replay::run(tools, alloc, trace, mode, &[])?;
    failed("timing replay", &o)?;
    let out = o.out.as_ref().context("timing replay: no JSON")?;
    let t = Timed { wall_s: out.timed_ns as f64 / 1e9, cpu_s: out.timed_cpu_ns as f64 / 1e9 };
    Ok((t, o.raw.clone().unwrap_or(Value::Null)))
}

/// The result of a time job from its runs (what run_job gives for it).
pub fn time_result(job: &Job, runs: &[Timed], last: Value) -> Value {
    let wall: Vec<f64> = runs.iter().map(|t| t.wall_s).collect();
    let cpu: Vec<f64> = runs.iter().map(|t| t.cpu_s).collect();
    json!({"runs_s": wall, "cpu_runs_s": cpu, "replay": last, "trace": job.param("trace"), "allocator": job.param("allocator")})
}

/// Runs one compare job here: what `heaplab job compare.*` does, and what a
/// local run does for each of its jobs. `ops_cache`: a directory of decoded
/// traces to share between jobs (a plan's `ops-cache/`).
pub fn run_job(job: &Job, ops_cache: Option<&Path>) -> Result<Value> {
    let (tools, alloc, trace) = setup(job, ops_cache)?;
    let mut v = measure(job, &tools, &alloc, &trace)?;
    // whose cell this is, for a reader of the outcome alone
    v["trace"] = json!(trace);
    v["allocator"] = json!(alloc.name);
    Ok(v)
}

fn measure(job: &Job, tools: &Tools, alloc: &Allocator, trace: &Path) -> Result<Value> {
    match Measure::of_kind(&job.kind) {
        Some(Measure::Touch) => {
            let o = replay::run(tools, alloc, trace, Mode::Touch, &[])?;
            failed("touch-mode replay", &o)?;
            Ok(json!({"replay": o.raw}))
        }
        Some(Measure::Count) => {
            let counter = Counter::parse(param(job, "counter")?)?;
            let mut alloc = alloc.clone();
            let mut env = vec![];
            for (k, v) in job.params.iter().filter(|(k, _)| k == "count-env") {
                let (var, val) = v
                    .split_once('=')
                    .with_context(|| format!("--{k} {v:?}: expected VAR=VALUE"))?;
                alloc.env.push((var.to_string(), val.to_string()));
                env.push(v.clone());
            }
            let (o, counts) = count::run(tools, &alloc, trace, counter)?;
            failed(&format!("{} replay", counter.name()), &o)?;
            let mut counts = counts.context("the count replay gave no counts")?;
            counts.env = env;
            Ok(json!({"replay": o.raw, "counts": counts}))
        }
        Some(Measure::Time) => {
            let repeat: usize = param(job, "repeat")?.parse().context("--repeat")?;
            let (mut runs, mut last) = (Vec::new(), Value::Null);
            for _ in 0..repeat {
                let (t, raw) = time_once(tools, alloc, trace, time_mode(job)?)?;
                runs.push(t);
                last = raw;
            }
            let mut v = time_result(job, &runs, last);
            let o = v.as_object_mut().expect("an object");
            o.remove("trace");
            o.remove("allocator");
            Ok(v)
        }
        None => bail!("unknown job kind {} (compare.touch, compare.count, compare.time)", job.kind),
    }
}

/// Runs one timing replay of a time job (the local runner's round-robin).
pub fn time_run(job: &Job, ops_cache: Option<&Path>) -> Result<(Timed, Value)> {
    let (tools, alloc, trace) = setup(job, ops_cache)?;
    time_once(&tools, &alloc, &trace, time_mode(job)?)
}

fn median(v: &[f64]) -> Option<f64> {
    if v.is_empty() {
        return None;
    }
    let mut s = v.to_vec();
    s.sort_by(|a, b| a.total_cmp(b));
    let n = s.len();
    Some(if n % 2 == 1 { s[n / 2] } else { (s[n / 2 - 1] + s[n / 2]) / 2.0 })
}

/// What the outcomes of one cell hold.
#[derive(Default)]
struct Cell {
    touch: Option<ReplayOut>,
    counted: Option<ReplayOut>,
    timed: Option<ReplayOut>,
    counts: Option<Counts>,
    wall: Vec<f64>,
    cpu: Vec<f64>,
    failure: Option<String>,
}

impl Cell {
    fn fail(&mut self, why: String) {
        if self.failure.is_none() {
            self.failure = Some(why);
        }
    }
    fn any_out(&self) -> Option<&ReplayOut> {
        self.touch.as_ref().or(self.counted.as_ref()).or(self.timed.as_ref())
    }
}

fn replay_out(v: &Value) -> Option<ReplayOut> {
    serde_json::from_value(v.get("replay")?.clone()).ok()
}

/// Why a job has no outcome, for a record's error.
pub type WhyMissing<'a> = dyn Fn(&Job) -> String + 'a;

/// The records of a study from its jobs' states (same order as the jobs):
/// one per (trace, allocator), trace-major, in the allocators' order.
pub fn merge(
    study: &Study,
    jobs: &[Job],
    states: &[JobState],
    why_missing: &WhyMissing,
) -> Vec<Record> {
    let n = study.traces.len() * study.allocators.len();
    let mut cells: Vec<Cell> = (0..n).map(|_| Cell::default()).collect();
    for (job, state) in jobs.iter().zip(states) {
        let (Some(t), Some(a)) = (
            study
                .traces
                .iter()
                .position(|t| Some(t.path.to_string_lossy().as_ref()) == job.param("trace")),
            study.allocators.iter().position(|a| Some(a.name.as_str()) == job.param("allocator")),
        ) else {
            continue;
        };
        let c = &mut cells[study.cell(t, a)];
        let o = match state {
            JobState::Done(o) => o,
            JobState::Failed(o) => {
                c.fail(o.error.clone().unwrap_or_else(|| format!("job {} failed", job.id)));
                continue;
            }
            JobState::Missing => {
                c.fail(why_missing(job));
                continue;
            }
            JobState::Unreadable(e) => {
                c.fail(format!("job {} ({}): {e}", job.id, job.label));
                continue;
            }
        };
        match Measure::of_kind(&job.kind) {
            Some(Measure::Touch) => c.touch = replay_out(&o.result),
            Some(Measure::Count) => {
                c.counted = replay_out(&o.result);
                c.counts = serde_json::from_value(o.result["counts"].clone()).ok();
            }
            Some(Measure::Time) => {
                c.timed = replay_out(&o.result);
                c.wall = serde_json::from_value(o.result["runs_s"].clone()).unwrap_or_default();
                // absent from outcomes kept before CPU time was measured
                c.cpu = serde_json::from_value(o.result["cpu_runs_s"].clone()).unwrap_or_default();
            }
            None => {}
        }
    }
    records(study, &cells)
}

fn records(study: &Study, cells: &[Cell]) -> Vec<Record> {
    let allocs: Vec<Allocator> = study.allocators.iter().map(AllocSpec::allocator).collect();
    let mut out = Vec::with_capacity(cells.len());
    for (t, trace) in study.traces.iter().enumerate() {
        let cell = |a: usize| &cells[study.cell(t, a)];
        let glibc_wall =
            allocs.iter().position(|a| a.is_glibc()).and_then(|a| median(&cell(a).wall));
        let glibc_cpu = allocs.iter().position(|a| a.is_glibc()).and_then(|a| median(&cell(a).cpu));
        let footprint = |c: &Cell, a: &Allocator| -> Option<(u64, &'static str)> {
            let o = c.touch.as_ref()?;
            match (&o.footprint, a.source) {
                (Some(f), Source::Heaplab) => Some((f.peak_bytes, "heaplab_alloc_stats")),
                _ => Some((o.rss.growth_bytes, "rss_touch")),
            }
        };
        let firstfit = allocs
            .iter()
            .position(|a| a.name == "firstfit")
            .and_then(|a| footprint(cell(a), &allocs[a]).map(|f| f.0));
        for (a, alloc) in allocs.iter().enumerate() {
            let c = cell(a);
            let mut r = Record {
                trace: trace.given.clone(),
                trace_name: trace_name(&trace.given),
                allocator: alloc.name.clone(),
                source: alloc.source.name().to_string(),
                status: "ok".into(),
                ..Record::default()
            };
            if let Some(m) = &alloc.missing {
                r.status = "missing".into();
                r.error = Some(m.clone());
                out.push(r);
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
                r.emulated = (!o.emulated.is_empty()).then(|| o.emulated.join(","));
            }
            if let Some(o) = c.timed.as_ref().or(c.touch.as_ref()) {
                r.threads_mode = o.threads_mode.clone();
                r.replay_threads = o.replay_threads;
                r.thread_wait = o.thread_wait.clone();
            }
            if let Some(l) = c.timed.as_ref().and_then(|o| o.lock) {
                let calls = r.mallocs.unwrap_or(0) + r.frees.unwrap_or(0) + r.reallocs.unwrap_or(0);
                r.lock_contended = Some(l.contended);
                r.lock_contended_share = (calls > 0).then(|| l.contended as f64 / calls as f64);
                r.lock_sleeps = Some(l.sleeps);
                r.lock_wait_s = Some(l.wait_ns as f64 / 1e9);
            }
            let cut = trace.cut.clone().or_else(|| c.any_out().and_then(Truncation::from_replay));
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
                out.push(r);
                continue;
            }
            if let Some(counts) = &c.counts {
                let costs = counts.costs();
                r.instr_per_malloc = costs.malloc.per_call();
                r.instr_per_free = costs.free.per_call();
                r.instr_per_realloc = costs.realloc.per_call();
                r.alloc_instructions = Some(costs.total);
                r.replay_instructions = counts.replay_instructions;
                r.counter = Some(counts.counter.name().to_string());
                r.count_env = (!counts.env.is_empty()).then(|| counts.env.join(" "));
                let al = costs.total as f64;
                match (&study.programs[t], counts.replay_instructions) {
                    (Some(p), _) => {
                        r.alloc_instr_share = Some(al / (al + p.outside() as f64));
                        r.share_basis = Some("program".into());
                    }
                    (None, Some(total)) if total > 0 => {
                        r.alloc_instr_share = Some(al / total as f64);
                        r.share_basis = Some("replay".into());
                    }
                    _ => {}
                }
            }
            r.wall_runs_s = c.wall.clone();
            if !c.wall.is_empty() {
                r.time_mode = Some(study.time_mode.clone().unwrap_or_else(|| "plain".into()));
            }
            r.wall_s = median(&c.wall);
            r.wall_ratio_glibc = match (r.wall_s, glibc_wall) {
                (Some(w), Some(g)) if g > 0.0 => Some(w / g),
                _ => None,
            };
            r.cpu_runs_s = c.cpu.clone();
            r.cpu_s = median(&c.cpu);
            r.cpu_ratio_glibc = match (r.cpu_s, glibc_cpu) {
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
            if let Some(o) = &c.touch {
                r.peak_rss_growth_bytes = Some(o.rss.growth_bytes);
                if let Some(u) = &o.usable {
                    r.peak_live_usable_bytes = Some(u.peak_live_usable_bytes);
                    r.internal_fragmentation = (u.usable_at_peak_live_bytes > 0).then(|| {
                        1.0 - u.peak_live_bytes as f64 / u.usable_at_peak_live_bytes as f64
                    });
                }
            }
            out.push(r);
        }
    }
    out
}
