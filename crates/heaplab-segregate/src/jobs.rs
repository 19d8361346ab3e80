//! The segregate study's measurements as independent jobs (heaplab-jobs):
//! one per emitted allocator (DEFAULT, then each predictor),
//! `segregate.measure`, a pure function of its hashed inputs (the test
//! trace, the replayer, the measure tool, the allocator's shared object) and
//! its parameters (the allocator's name, whether it is SP's, the caches).
//!
//! ```text
//!   pipeline::prepare: load, search, train, emit ──▶ Measurements ──▶ jobs (DEFAULT, SP, PATH, ...)
//!        │                                                              │
//!        │   here: Runner (-j N, progress, outcomes kept, --resume)     │  or: --plan DIR, any engine
//!        │                                                              ▼
//!        │                                  outcome: {measured, faults} per job (run_job)
//!        ▼                                                              │
//!   Study (before measuring) ◀──────────── merge (jobs' order) ─────────┘ ──▶ Study::derive
//! ```
//!
//! A job runs [`crate::evaluate::measure`] in a private scratch directory
//! (the events-only copy of the test trace, or SP's copy with stack depths,
//! and the allocator's segment report are made there) and returns the
//! [`Measured`] with its page-fault curves beside it ([`JobResult`]: the
//! study's JSON leaves the curves out, the outcome needs them for Figure 4).
//! [`merge`] puts the allocators back in the jobs' order, so a local run
//! with any `--jobs`, a resumed one and a merged plan give the same study.

use crate::evaluate::{self, MeasureJob, Measured};
use crate::predictors::Kind;
use crate::study::Study;
use anyhow::{bail, Context, Result};
use heaplab_jobs::{Input, Job, JobState};
use heaplab_plumb::vg::VgTools;
use heaplab_sim::config::{fmt_bytes, CacheConfig};
use heaplab_sim::PageCurve;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::path::{Path, PathBuf};

/// The job kind `heaplab job` dispatches here.
pub const KIND: &str = "segregate.measure";

/// What the measurements of one study need: the test trace, the tools, the
/// caches, and the libraries in the order the study lists them.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Measurements {
    /// The test trace, absolute.
    pub trace: PathBuf,
    pub replay: PathBuf,
    /// The VALGRIND_LIB folder with heaplab's tools.
    pub vg_lib: PathBuf,
    /// The caches simulated, as SIZE:LINE:ASSOC,...
    pub caches: String,
    /// (name, shared object), DEFAULT first.
    pub libraries: Vec<(String, PathBuf)>,
}

/// What a plan keeps to merge its outcomes: the study before measuring
/// (runs, thresholds, trained predictors, libraries, notes) and its
/// measurements.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Planned {
    pub study: Study,
    pub measurements: Measurements,
}

/// A job's result: the allocator measured, and its fault curves (which
/// [`Measured`] does not write in the study's JSON).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct JobResult {
    pub measured: Measured,
    pub faults: Vec<PageCurve>,
}

/// Caches as a spec `parse_cache_spec` reads back.
pub fn cache_spec(caches: &[CacheConfig]) -> String {
    caches
        .iter()
        .map(|c| format!("{}:{}:{}", fmt_bytes(c.size()), c.line(), c.assoc()))
        .collect::<Vec<_>>()
        .join(",")
}

impl Measurements {
    pub fn new(
        trace: &Path,
        replay: &Path,
        vg: &VgTools,
        caches: &[CacheConfig],
        libraries: Vec<(String, PathBuf)>,
    ) -> Result<Measurements> {
        Ok(Measurements {
            trace: std::path::absolute(trace)?,
            replay: std::path::absolute(replay)?,
            vg_lib: std::path::absolute(&vg.lib)?,
            caches: cache_spec(caches),
            libraries: libraries
                .into_iter()
                .map(|(n, so)| Ok((n, std::path::absolute(&so)?)))
                .collect::<Result<_>>()?,
        })
    }

    /// One job per library, in the libraries' order.
    pub fn jobs(&self) -> Result<Vec<Job>> {
        let common = vec![
            Input::of(&self.trace).context("the test trace")?,
            Input::of(&self.replay).context("the replayer")?,
            Input::of(&self.vg_lib.join("heaplab-measure-amd64-linux"))
                .context("the measure tool")?,
        ];
        // a measurement costs about a second per 10 MB of trace (references)
        let weight =
            2.0 + std::fs::metadata(&self.trace).map(|m| m.len() as f64 / 1e7).unwrap_or(1.0);
        let stem = self.trace.file_stem().unwrap_or_default().to_string_lossy().to_string();
        let mut jobs = Vec::new();
        for (name, so) in &self.libraries {
            let mut inputs = common.clone();
            inputs.push(Input::of(so).with_context(|| format!("{name}'s library"))?);
            let sp = *name == Kind::Sp.name();
            let params = vec![
                ("name".to_string(), name.clone()),
                ("library".into(), so.display().to_string()),
                ("sp".into(), if sp { "1" } else { "0" }.into()),
                ("trace".into(), self.trace.display().to_string()),
                ("replay".into(), self.replay.display().to_string()),
                ("vg-lib".into(), self.vg_lib.display().to_string()),
                ("caches".into(), self.caches.clone()),
            ];
            jobs.push(Job::new(
                KIND,
                name,
                &format!("segregate {stem} {name}"),
                inputs,
                params,
                weight,
            ));
        }
        Ok(jobs)
    }
}

fn param<'a>(job: &'a Job, key: &str) -> Result<&'a str> {
    job.param(key).with_context(|| format!("job {}: no --{key}", job.id))
}

/// Runs one segregate job here: the allocator on the test trace, measured.
pub fn run_job(job: &Job) -> Result<Value> {
    let name = param(job, "name")?;
    let library = PathBuf::from(param(job, "library")?);
    let sp = match param(job, "sp")? {
        "1" => true,
        "0" => false,
        v => bail!("job {}: --sp {v:?}: expected 0 or 1", job.id),
    };
    let trace = PathBuf::from(param(job, "trace")?);
    let replay = PathBuf::from(param(job, "replay")?);
    let caches = heaplab_sim::config::parse_cache_spec(param(job, "caches")?)
        .map_err(|e| anyhow::anyhow!("job {}: --caches: {e}", job.id))?;
    let vg =
        VgTools { valgrind: PathBuf::from("valgrind"), lib: PathBuf::from(param(job, "vg-lib")?) };
    let scratch = heaplab_plumb::scratch::ScratchDir::new("segregate")?;
    // SP replays a copy whose stacks are the recorded stack depths; the
    // others the plain events.
    let events = scratch.join(if sp { "sp-events.hltrace" } else { "events.hltrace" });
    if sp {
        evaluate::sp_events(&trace, &events)?;
    } else {
        heaplab_refs::measure::events_only(&trace, &events)?;
    }
    let mj = MeasureJob {
        tools: &vg,
        replay: &replay,
        trace: &trace,
        events: &events,
        sp_events: sp.then_some(events.as_path()),
        caches: &caches,
        scratch: scratch.path(),
    };
    let mut measured = evaluate::measure(&mj, name, &library, sp)?;
    let faults = std::mem::take(&mut measured.faults);
    Ok(serde_json::to_value(JobResult { measured, faults })?)
}

/// The measured allocators from their jobs' states (same order as the
/// jobs), or an error naming every job that is missing, failed, or left an
/// outcome that does not read (`why_missing` says why one has no outcome).
pub fn merge(
    jobs: &[Job],
    states: &[JobState],
    why_missing: &dyn Fn(&Job) -> String,
) -> Result<Vec<Measured>> {
    let mut measured = Vec::new();
    let mut wrong = Vec::new();
    for (j, s) in jobs.iter().zip(states) {
        let name = j.param("name").unwrap_or("?");
        match s {
            JobState::Done(o) => match serde_json::from_value::<JobResult>(o.result.clone()) {
                Ok(r) => {
                    let mut m = r.measured;
                    m.faults = r.faults;
                    measured.push(m);
                }
                Err(e) => {
                    wrong.push(format!("{name}: job {}: its result does not read: {e}", j.id))
                }
            },
            JobState::Failed(o) => wrong.push(format!(
                "{name}: job {} failed on {}: {}",
                j.id,
                o.host,
                o.error.as_deref().unwrap_or("no reason given")
            )),
            JobState::Missing => wrong.push(format!("{name}: {}", why_missing(j))),
            JobState::Unreadable(e) => wrong.push(format!("{name}: job {}: {e}", j.id)),
        }
    }
    if states.len() != jobs.len() {
        bail!("{} jobs but {} states", jobs.len(), states.len());
    }
    if !wrong.is_empty() {
        bail!(
            "{} of {} measurements are not there:\n  {}",
            wrong.len(),
            jobs.len(),
            wrong.join("\n  ")
        );
    }
    Ok(measured)
}

#[cfg(test)]
mod tests {
    use super::*;
    use heaplab_jobs::Outcome;

    fn measured(name: &str) -> Measured {
        Measured {
            name: name.into(),
            library: format!("/l/lib{name}.so").into(),
            stats: Default::default(),
            segments: vec![],
            outside_pages_4k: 0,
            page_refs_8k: vec![3, 1],
            faults: vec![],
            caches: vec![],
            report: Default::default(),
            seconds: 0.5,
        }
    }

    fn outcome(job: &Job, name: &str, pages: u64) -> Outcome {
        let curve = PageCurve {
            page_size: 8192,
            accesses: 10,
            references: 10,
            distinct_pages: pages,
            faults: (0..pages).map(|i| 10 - i).collect(),
        };
        let r = JobResult { measured: measured(name), faults: vec![curve] };
        heaplab_jobs::run::outcome(job, Ok(serde_json::to_value(r).unwrap()), 0.0, 1.0)
    }

    #[test]
    fn merge_keeps_the_jobs_order_and_the_fault_curves_and_names_what_is_missing() {
        let job = |n: &str| Job::new(KIND, n, n, vec![], vec![("name".into(), n.into())], 1.0);
        let jobs = vec![job("DEFAULT"), job("STACK")];
        // the outcome travels as JSON text, as it does through a store
        let through_text = |o: Outcome| {
            serde_json::from_str::<Outcome>(&serde_json::to_string(&o).unwrap()).unwrap()
        };
        let states = vec![
            JobState::Done(through_text(outcome(&jobs[0], "DEFAULT", 3))),
            JobState::Done(through_text(outcome(&jobs[1], "STACK", 2))),
        ];
        let m = merge(&jobs, &states, &|_| "missing".into()).unwrap();
        assert_eq!(m.iter().map(|m| m.name.as_str()).collect::<Vec<_>>(), ["DEFAULT", "STACK"]);
        assert_eq!(m[0].curve(8192).unwrap().faults, vec![10, 9, 8], "the curves came back");
        assert_eq!(m[1].curve(8192).unwrap().distinct_pages, 2);
        let states = vec![states[0].clone(), JobState::Missing];
        let e = merge(&jobs, &states, &|j| format!("job {} left nothing", j.id)).unwrap_err();
        let e = format!("{e:#}");
        assert!(e.contains("1 of 2") && e.contains("STACK: job segregate-measure-"), "{e}");
    }

    #[test]
    fn cache_specs_read_back() {
        let c = crate::evaluate::default_caches();
        assert_eq!(heaplab_sim::config::parse_cache_spec(&cache_spec(&c)).unwrap(), c);
    }
}
