//! The locality study as independent jobs (heaplab-jobs): one per
//! allocator, `locality.measure`, a pure function of its hashed inputs (the
//! trace with references, the replayer, the measure tool, the allocator's
//! shared object) and its parameters (the caches and page sizes simulated,
//! the penalties): it measures the allocator ([`heaplab_refs::measure`]) and derives
//! its figures ([`crate::study::derive`]). [`merge`] assembles the study from
//! the outcomes, whether they were run here (`heaplab locality`, with
//! progress and `--resume`) or by an engine from a plan (`--plan DIR`, then
//! `--merge DIR`).

use crate::study::{self, AllocatorResult, Failure, Locality, Options};
use anyhow::{Context, Result};
use heaplab_jobs::{Input, Job, JobState};
use heaplab_plumb::vg::VgTools;
pub use heaplab_plumb::AllocSpec;
use heaplab_refs::measure::{self, SimSpec};
use heaplab_sim::config::{self, fmt_bytes};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::path::{Path, PathBuf};

/// A locality study: what a plan keeps to merge its outcomes.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Study {
    /// The trace as the user gave it, and absolute.
    pub trace: String,
    pub path: PathBuf,
    /// The recorded program's command line (the report's title).
    pub command: String,
    pub allocators: Vec<AllocSpec>,
    /// Every cache simulated, as SIZE:LINE:ASSOC,... (the required ones included).
    pub caches: String,
    /// Page sizes, as 4K,8K (empty: none).
    pub pages: String,
    pub penalty: u64,
    pub modern_penalty: u64,
    pub replay: PathBuf,
    /// The VALGRIND_LIB folder with heaplab's tools.
    pub vg_lib: PathBuf,
}

impl Study {
    /// The study of `trace` with `opts` (its allocators and simulations).
    pub fn new(trace: &Path, opts: &Options, replay: &Path, vg: &VgTools) -> Result<Study> {
        let meta = heaplab_trace::TraceReader::open(trace)
            .map_err(|e| anyhow::anyhow!("{e}"))?
            .meta()
            .clone();
        Ok(Study {
            trace: trace.display().to_string(),
            path: std::path::absolute(trace)?,
            command: meta.command_line(),
            allocators: opts.allocators.iter().map(AllocSpec::of).collect(),
            caches: opts.sim.caches.iter().map(study::cache_name).collect::<Vec<_>>().join(","),
            pages: opts.sim.page_sizes.iter().map(|&p| fmt_bytes(p)).collect::<Vec<_>>().join(","),
            penalty: opts.penalty,
            modern_penalty: opts.modern_penalty,
            replay: std::path::absolute(replay)?,
            vg_lib: std::path::absolute(&vg.lib)?,
        })
    }

    /// The options the study's figures are derived with.
    pub fn options(&self) -> Result<Options> {
        options(&self.caches, &self.pages, self.penalty, self.modern_penalty)
    }

    /// One job per allocator that can run, in the allocators' order.
    pub fn jobs(&self) -> Result<Vec<Job>> {
        let common = vec![
            Input::of(&self.path)?,
            Input::of(&self.replay)?,
            Input::of(&self.vg_lib.join("heaplab-measure-amd64-linux"))
                .context("the measure tool")?,
        ];
        // a measurement costs about a second per 10 MB of trace (references)
        let weight =
            2.0 + std::fs::metadata(&self.path).map(|m| m.len() as f64 / 1e7).unwrap_or(1.0);
        let mut jobs = Vec::new();
        for a in self.allocators.iter().filter(|a| a.missing.is_none()) {
            let mut inputs = common.clone();
            let mut params = vec![("trace".to_string(), self.path.display().to_string())];
            params.extend(a.to_params());
            if let Some(p) = &a.preload {
                inputs.push(Input::of(p).with_context(|| format!("allocator {}", a.name))?);
            }
            params.extend([
                ("replay".into(), self.replay.display().to_string()),
                ("vg-lib".into(), self.vg_lib.display().to_string()),
                ("caches".into(), self.caches.clone()),
                ("pages".into(), self.pages.clone()),
                ("penalty".into(), self.penalty.to_string()),
                ("modern-penalty".into(), self.modern_penalty.to_string()),
            ]);
            let name = Path::new(&self.trace)
                .file_stem()
                .unwrap_or_default()
                .to_string_lossy()
                .to_string();
            jobs.push(Job::new(
                "locality.measure",
                &a.name,
                &format!("locality {name} {}", a.name),
                inputs,
                params,
                weight,
            ));
        }
        Ok(jobs)
    }
}

fn options(caches: &str, pages: &str, penalty: u64, modern_penalty: u64) -> Result<Options> {
    let caches = if caches.trim().is_empty() {
        Vec::new()
    } else {
        config::parse_cache_spec(caches).map_err(|e| anyhow::anyhow!("caches: {e}"))?
    };
    let page_sizes = config::parse_page_spec(pages).map_err(|e| anyhow::anyhow!("pages: {e}"))?;
    Ok(Options {
        allocators: Vec::new(),
        sim: SimSpec { caches, page_sizes },
        penalty,
        modern_penalty,
    })
}

fn param<'a>(job: &'a Job, key: &str) -> Result<&'a str> {
    job.param(key).with_context(|| format!("job {}: no --{key}", job.id))
}

/// Runs one locality job here: measures the allocator and derives its figures.
pub fn run_job(job: &Job) -> Result<Value> {
    let alloc =
        AllocSpec::from_params(&job.params).with_context(|| format!("job {}", job.id))?.allocator();
    let opts = options(
        param(job, "caches")?,
        param(job, "pages")?,
        param(job, "penalty")?.parse().context("--penalty")?,
        param(job, "modern-penalty")?.parse().context("--modern-penalty")?,
    )?;
    let vg =
        VgTools { valgrind: PathBuf::from("valgrind"), lib: PathBuf::from(param(job, "vg-lib")?) };
    let trace = PathBuf::from(param(job, "trace")?);
    let scratch = heaplab_plumb::scratch::ScratchDir::new("locality")?;
    let events = scratch.path().join("events.hltrace");
    measure::events_only(&trace, &events)?;
    let cell = measure::measure(
        &vg,
        Path::new(param(job, "replay")?),
        &trace,
        &events,
        &alloc,
        &opts.sim,
    )?;
    Ok(serde_json::to_value(study::derive(&cell, &opts))?)
}

/// The study from its jobs' states (same order as the jobs): every
/// allocator's figures in the allocators' order; an allocator that could
/// not run, failed, or has no outcome is named among the failures.
pub fn merge(
    study: &Study,
    jobs: &[Job],
    states: &[JobState],
    why_missing: &dyn Fn(&Job) -> String,
) -> Result<Locality> {
    let mut results: Vec<AllocatorResult> = Vec::new();
    let mut failed = Vec::new();
    for a in &study.allocators {
        if let Some(m) = &a.missing {
            failed.push(Failure { allocator: a.name.clone(), error: format!("{}: {m}", a.name) });
            continue;
        }
        let Some(i) = jobs.iter().position(|j| j.param("allocator") == Some(a.name.as_str()))
        else {
            failed.push(Failure { allocator: a.name.clone(), error: "not in the plan".into() });
            continue;
        };
        match &states[i] {
            JobState::Done(o) => {
                match serde_json::from_value::<AllocatorResult>(o.result.clone()) {
                    Ok(r) => results.push(r),
                    Err(e) => failed.push(Failure {
                        allocator: a.name.clone(),
                        error: format!("job {}: its result does not read: {e}", jobs[i].id),
                    }),
                }
            }
            JobState::Failed(o) => failed.push(Failure {
                allocator: a.name.clone(),
                error: o.error.clone().unwrap_or_else(|| format!("job {} failed", jobs[i].id)),
            }),
            JobState::Missing => {
                failed.push(Failure { allocator: a.name.clone(), error: why_missing(&jobs[i]) })
            }
            JobState::Unreadable(e) => {
                failed.push(Failure { allocator: a.name.clone(), error: e.clone() })
            }
        }
    }
    Ok(study::assemble(&study.trace, &study.command, &study.options()?, results, failed))
}
