//! The comparison, run here: every (trace, allocator) cell as up to three
//! jobs (jobs.rs), each its own processes:
//!
//! 0. (not a job) each trace decoded into the ops cache, natively and once,
//!    while the health check reads it (`heaplab-replay --fill-cache`); a job
//!    that finds no cache decodes it itself, and jobs started together wait
//!    for the one that does;
//! 1. a touch-mode replay (footprint, RSS growth, usable sizes), natively;
//! 2. a counted replay (instructions per call: vgcount, callgrind or perf),
//!    the longest first (as the touch runs predict them),
//!
//! each phase in parallel up to `jobs` at a time; then
//!
//! 3. `repeat` plain-mode replays per cell for wall time, one at a time,
//!    round-robin over the cells so that a slow patch of the machine is spread
//!    over every allocator rather than falling on one.
//!
//! Every job's outcome is kept in the state directory as it finishes, so an
//! interrupted comparison keeps what it measured, and `resume` reuses it; the
//! records come from the outcomes by the same merge a plan's outcomes go
//! through (`heaplab compare --plan` / `--merge`).

use crate::alloc::Allocator;
use crate::count::{self, Counter};
use crate::health;
use crate::jobs::{self, AllocSpec, Study, TraceSpec};
use crate::record::Record;
use crate::replay;
use crate::tools::Tools;
use anyhow::{bail, Context, Result};
use heaplab_jobs::{cancel, run, Job, JobState, Observer, Runner, Store};
use serde::{Deserialize, Serialize};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::time::Instant;

/// What to measure, and how.
#[derive(Debug, Clone)]
pub struct Options {
    /// Timing runs per cell (the median is reported); 0 turns timing off.
    pub repeat: usize,
    /// Parallel replays in the first phase.
    pub jobs: usize,
    /// Instruction counts.
    pub instructions: bool,
    /// How to count them.
    pub counter: Counter,
    /// The touch-mode run (footprint, utilization, fragmentation).
    pub footprint: bool,
    /// Keep the decoded traces in the work directory.
    pub keep_scratch: bool,
    /// Where each job's outcome is kept as it finishes; None: nowhere.
    pub state: Option<PathBuf>,
    /// Reuse the outcomes already in `state` instead of measuring again.
    pub resume: bool,
    /// The replayer's `--threads` (`recorded` or `serial`); None: its
    /// default, recorded for a trace of more than one thread.
    pub threads: Option<String>,
    /// The replayer's `--wait` (`futex` or `spin`) in a threaded replay;
    /// None: its default, futex.
    pub wait: Option<String>,
    /// The timing replays' mode: `plain` (None: calls only) or `touch`
    /// (every new object's bytes written, as the program did).
    pub time_mode: Option<String>,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            repeat: 3,
            jobs: crate::cores(),
            instructions: true,
            counter: Counter::Vgcount,
            footprint: true,
            keep_scratch: false,
            state: None,
            resume: false,
            threads: None,
            wait: None,
            time_mode: None,
        }
    }
}

/// The default state directory: `$XDG_CACHE_HOME/heaplab/outcomes`, else
/// `~/.cache/heaplab/outcomes`, else one under the temporary directory.
pub fn default_state_dir() -> PathBuf {
    let base = std::env::var_os("XDG_CACHE_HOME")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .or_else(|| {
            std::env::var_os("HOME")
                .filter(|v| !v.is_empty())
                .map(|h| PathBuf::from(h).join(".cache"))
        })
        .unwrap_or_else(std::env::temp_dir);
    base.join("heaplab").join("outcomes")
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

/// The study behind a comparison: the traces checked (whole, or cut short
/// and marked; a corrupt one is an error) and counted, the allocators
/// resolved, each trace's program cost.
pub fn study(
    tools: &Tools,
    traces: &[PathBuf],
    allocs: &[Allocator],
    opts: &Options,
) -> Result<Study> {
    tools.check_replay()?;
    if opts.instructions {
        count::check(tools, opts.counter)?;
    }
    let mut specs = Vec::new();
    for t in traces {
        let (cut, events) = health::examine(t)?;
        let path = std::path::absolute(t).with_context(|| format!("{}", t.display()))?;
        specs.push(TraceSpec { given: t.display().to_string(), path, events, cut });
    }
    let programs: Vec<Option<ProgramCost>> =
        traces.iter().map(|t| ProgramCost::load(t)).collect::<Result<_>>()?;
    Ok(Study {
        traces: specs,
        allocators: allocs.iter().map(AllocSpec::of).collect(),
        programs,
        counter: opts.instructions.then_some(opts.counter),
        footprint: opts.footprint,
        repeat: opts.repeat,
        timeout_s: tools.timeout.map(|t| t.as_secs()).unwrap_or(0),
        threads: opts.threads.clone(),
        wait: opts.wait.clone(),
        time_mode: opts.time_mode.clone().filter(|m| m != "plain"),
        replay: std::path::absolute(&tools.replay)?,
        lib_dir: std::path::absolute(&tools.lib_dir)?,
    })
}

/// Runs the comparison here and returns one record per (trace, allocator),
/// in trace-major order. Allocators marked missing get records that say so.
pub fn compare(
    tools: &Tools,
    traces: &[PathBuf],
    allocs: &[Allocator],
    opts: &Options,
    observer: &dyn Observer,
) -> Result<Vec<Record>> {
    // Each trace is decoded into the ops cache (natively, once) while the
    // health check reads it: every job then reads the cache.
    let study = std::thread::scope(|scope| {
        let fill = scope.spawn(|| {
            if !opts.resume && tools.check_replay().is_ok() {
                for t in traces {
                    if cancel::requested() || !matches!(replay::fill_cache(tools, t), Ok(true)) {
                        break;
                    }
                }
            }
        });
        let s = study(tools, traces, allocs, opts);
        let _ = fill.join();
        s
    })?;
    let jobs = study.jobs()?;
    std::fs::create_dir_all(&tools.work_dir)
        .with_context(|| format!("creating {}", tools.work_dir.display()))?;
    let store = match opts.state.as_deref().map(Store::open) {
        Some(Err(e)) if !opts.resume => {
            eprintln!("heaplab compare: warning: {e:#}; measurements are not kept as they finish");
            None
        }
        other => other.transpose()?,
    };
    observer.begin(&jobs);
    let ops = tools.ops_cache.clone();
    let work = |j: &Job| jobs::run_job(j, ops.as_deref());
    let runner = Runner {
        workers: opts.jobs,
        store: store.as_ref(),
        resume: opts.resume,
        observer,
        eta: None,
    };
    let of = |kind: &str| jobs.iter().filter(|j| j.kind == kind).cloned().collect::<Vec<Job>>();
    let (touch, mut counted, alone) =
        (of("compare.touch"), of("compare.count"), of("compare.time"));
    let mut by_id: HashMap<String, JobState> = HashMap::new();
    // The touch runs first: natively they decode a trace into the ops cache
    // if the fill above did not (under Valgrind that would take ten times as
    // long), and their replay time tells how long each counted replay will
    // take.
    for (j, s) in touch.iter().zip(runner.run(&touch, &work)) {
        by_id.insert(j.id.clone(), s);
    }
    let native = |j: &Job| -> Option<f64> {
        let t = touch.iter().find(|t| {
            t.param("trace") == j.param("trace") && t.param("allocator") == j.param("allocator")
        })?;
        match by_id.get(&t.id)? {
            JobState::Done(o) => Some(o.result["replay"]["timed_ns"].as_f64()? / 1e9),
            _ => None,
        }
    };
    for j in counted.iter_mut() {
        if let Some(s) = native(j) {
            j.weight = 0.5 + s * opts.counter.slowdown();
            observer.reweigh(j);
        }
    }
    for j in &alone {
        if let Some(s) = native(j) {
            // a plain run costs at most its touch run, plus the process's start
            let mut j = j.clone();
            j.weight = opts.repeat as f64 * (0.3 + s);
            observer.reweigh(&j);
        }
    }
    // Longest first, so that no core idles at the end while one long count runs.
    counted.sort_by(|a, b| b.weight.total_cmp(&a.weight));
    for (j, s) in counted.iter().zip(runner.run(&counted, &work)) {
        by_id.insert(j.id.clone(), s);
    }
    for (j, s) in alone.iter().zip(round_robin(&alone, &runner, ops.as_deref())) {
        by_id.insert(j.id.clone(), s);
    }
    if !opts.keep_scratch {
        tools.clean();
    }
    if let Some(store) = &store {
        store.prune_after_run(&jobs, "heaplab compare");
    }
    let states: Vec<JobState> =
        jobs.iter().map(|j| by_id.remove(&j.id).unwrap_or(JobState::Missing)).collect();
    let interrupted = cancel::requested();
    Ok(jobs::merge(&study, &jobs, &states, &|j| {
        if interrupted {
            format!(
                "not measured ({}): the comparison was interrupted; --resume measures the rest",
                j.label
            )
        } else {
            format!("job {} ({}) left no outcome", j.id, j.label)
        }
    }))
}

/// The timing jobs, run one replay at a time, round-robin over the jobs (a
/// slow moment of the machine falls on every allocator alike). Each job's
/// outcome is what running it alone would give.
fn round_robin(jobs: &[Job], runner: &Runner, ops: Option<&Path>) -> Vec<JobState> {
    let mut states = vec![JobState::Missing; jobs.len()];
    let mut pending = Vec::new();
    for (i, j) in jobs.iter().enumerate() {
        if runner.resume {
            if let Some(JobState::Done(o)) = runner.store.map(|s| s.get(&j.id)) {
                runner.observer.finished(j, &o, true);
                states[i] = JobState::Done(o);
                continue;
            }
        }
        pending.push(i);
    }
    struct Run {
        runs: Vec<jobs::Timed>,
        last: serde_json::Value,
        error: Option<anyhow::Error>,
        started: f64,
        spent: f64,
    }
    let mut st: HashMap<usize, Run> = HashMap::new();
    for &i in &pending {
        let error = jobs[i].inputs.iter().try_for_each(|x| x.verify()).err();
        st.insert(
            i,
            Run {
                runs: vec![],
                last: serde_json::Value::Null,
                error,
                started: run::now_unix(),
                spent: 0.0,
            },
        );
        runner.observer.started(&jobs[i]);
    }
    let repeat =
        jobs.iter().filter_map(|j| j.param("repeat")?.parse::<usize>().ok()).max().unwrap_or(0);
    'rounds: for round in 0..repeat {
        for k in heaplab_plumb::rounds::order(pending.len(), round) {
            let i = pending[k];
            if cancel::requested() {
                break 'rounds;
            }
            let r = st.get_mut(&i).expect("every pending job has a state");
            if r.error.is_some() {
                continue;
            }
            let t0 = Instant::now();
            match jobs::time_run(&jobs[i], ops) {
                Ok((s, raw)) => {
                    r.runs.push(s);
                    r.last = raw;
                }
                Err(e) => r.error = Some(e),
            }
            r.spent += t0.elapsed().as_secs_f64();
        }
    }
    for &i in &pending {
        let r = st.remove(&i).expect("every pending job has a state");
        let done = r.error.is_some() || r.runs.len() == repeat;
        if !done || (r.error.is_some() && cancel::requested()) {
            continue; // interrupted: no outcome, so resume times it again
        }
        let result = match r.error {
            Some(e) => Err(e),
            None => Ok(jobs::time_result(&jobs[i], &r.runs, r.last)),
        };
        let o = run::outcome(&jobs[i], result, r.started, r.spent);
        if let Some(s) = runner.store {
            if let Err(e) = s.put(&o) {
                eprintln!("heaplab: could not keep the outcome of job {}: {e:#}", jobs[i].id);
            }
        }
        runner.observer.finished(&jobs[i], &o, false);
        states[i] = if o.ok() { JobState::Done(o) } else { JobState::Failed(o) };
    }
    states
}
