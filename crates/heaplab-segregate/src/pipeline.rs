//! `heaplab segregate` from end to end: load, search, train, emit
//! ([`prepare`]), measure (as jobs, [`crate::jobs`]: run by the caller's
//! runner, or planned and merged later), run the real program, derive
//! ([`run`]). The command only parses flags and prints; this does the work.

use crate::classes::Thresholds;
use crate::emit::{self, Builder};
use crate::jobs::{self, Measurements};
use crate::objects::{self, Profile};
use crate::predictors::{Kind, Predictor, TrainOptions};
use crate::runtime;
use crate::search::{self, SearchOptions, Timeline};
use crate::study::{self, Study, ThresholdChoice};
use anyhow::{bail, Context, Result};
use heaplab_jobs::{Job, JobState};
use heaplab_refs::vg::VgTools;
use heaplab_sim::config::CacheConfig;
use std::path::{Path, PathBuf};

/// The real program on its test input, for the run-time figures.
#[derive(Debug, Clone)]
pub struct Program {
    /// The program, e.g. the line `heaplab workloads NAME --variant 3` prints:
    /// split into words and run without a shell.
    pub command: heaplab_plumb::process::CommandLine,
    pub cwd: PathBuf,
    /// Rounds of the wall-time comparison.
    pub repeats: usize,
    /// Also run it under callgrind for the lookup's cost.
    pub callgrind: bool,
}

/// Everything a study needs.
#[derive(Debug, Clone)]
pub struct Options {
    pub train: PathBuf,
    pub threshold: PathBuf,
    pub test: PathBuf,
    /// Predictors to build and measure besides DEFAULT, in order.
    pub predictors: Vec<Kind>,
    /// The predictor the threshold search trains (the paper: one set of
    /// thresholds per program).
    pub search_with: Kind,
    /// Given thresholds (no search).
    pub thresholds: Option<Thresholds>,
    pub train_options: TrainOptions,
    pub search_budget: usize,
    /// Libraries, tables and scratch files.
    pub out_dir: PathBuf,
    /// The tree: `native/` (the sources built here) and the zoo's flags.
    pub layout: heaplab_plumb::Layout,
    pub replay: PathBuf,
    pub vg: VgTools,
    pub caches: Vec<CacheConfig>,
    /// Measure on the test trace (else: train, emit and score only).
    pub measure: bool,
    pub program: Option<Program>,
    /// The predictors whose libraries run the real program (empty: every
    /// trained one).
    pub runtime_predictors: Vec<Kind>,
    /// mimalloc, the fast allocator the wall times compare with (None: not installed).
    pub mimalloc: Option<PathBuf>,
}

fn load(role: &str, p: &Path, log: &mut dyn FnMut(&str)) -> Result<Profile> {
    let t0 = std::time::Instant::now();
    let prof = objects::load(p).with_context(|| format!("the {role} trace"))?;
    log(&format!(
        "{role}: {} ({} objects, {} heap references, {} instructions) read in {:.1} s",
        p.display(),
        prof.objects.len(),
        prof.heap_refs,
        prof.instructions,
        t0.elapsed().as_secs_f64()
    ));
    Ok(prof)
}

/// A study up to its measurements: the runs summarized, the thresholds,
/// every predictor trained and scored, every library emitted.
#[derive(Debug, Clone)]
pub struct Prepared {
    /// The study, nothing measured yet.
    pub study: Study,
    /// (name, shared object), DEFAULT first.
    pub libs: Vec<(String, PathBuf)>,
    /// The measurements on the test trace (None: `measure` was off).
    pub measurements: Option<Measurements>,
    out_dir: PathBuf,
}

/// Runs a set of jobs and returns their states in order: a
/// [`heaplab_jobs::Runner`] with the caller's workers, store and progress.
pub type RunJobs<'a> = dyn Fn(&[Job]) -> Vec<JobState> + 'a;

/// Runs the study: [`prepare`], the measurements as jobs on `run_jobs`
/// (merged in the libraries' order, whatever order they finished in), the
/// real program, then the tables and figures.
pub fn run(o: &Options, run_jobs: &RunJobs, log: &mut dyn FnMut(&str)) -> Result<Study> {
    let mut p = prepare(o, log)?;
    if let Some(m) = &p.measurements {
        let jobs = m.jobs()?;
        let states = run_jobs(&jobs);
        let interrupted = heaplab_jobs::cancel::requested();
        p.study.measured = jobs::merge(&jobs, &states, &|j: &Job| {
            if interrupted {
                format!(
                    "not measured ({}): interrupted; the same command with --resume measures the rest",
                    j.label
                )
            } else {
                format!("job {} left no outcome", j.id)
            }
        })?;
        for m in &p.study.measured {
            log(&format!(
                "measured {} on the test trace in {:.1} s: {} pages of 8 KB in its segments, {} allocator instructions",
                m.name,
                m.seconds,
                m.pages_8k(),
                m.stats.alloc_instructions
            ));
        }
    }
    run_program(&mut p, o, log)?;
    p.study.derive();
    Ok(p.study)
}

/// Loads the traces, chooses the thresholds, trains and scores every
/// predictor and emits its library: everything before the measurements.
pub fn prepare(o: &Options, log: &mut dyn FnMut(&str)) -> Result<Prepared> {
    std::fs::create_dir_all(&o.out_dir)
        .with_context(|| format!("creating {}", o.out_dir.display()))?;
    // Absolute: the measured replay runs in the events file's folder (a fixed
    // environment, heaplab_refs::measure), so a relative library or report
    // path would not be found there.
    let out_dir = std::path::absolute(&o.out_dir)
        .with_context(|| format!("resolving {}", o.out_dir.display()))?;
    let train = load("training", &o.train, log)?;
    let thresh = load("threshold", &o.threshold, log)?;
    let test = load("test", &o.test, log)?;
    let mut notes = Vec::new();
    let mut predictors = o.predictors.clone();
    if predictors.contains(&Kind::Sp) && !(train.has_sp && test.has_sp) {
        notes.push("SP left out: the training or test trace records no stack depths (the SP stream; record them again with `heaplab record --refs`)".to_string());
        log(notes.last().unwrap());
        predictors.retain(|k| *k != Kind::Sp);
    }
    // thresholds
    let choice = match o.thresholds {
        Some(t) => ThresholdChoice { thresholds: t, how: "given".into(), search: None },
        None => {
            let opt = SearchOptions {
                train: o.train_options,
                budget: o.search_budget,
                ..SearchOptions::default()
            };
            let r = search::search(o.search_with, &train, &thresh, &opt);
            if !r.best.score.is_finite() {
                bail!("the threshold search found no candidate that obeys the non-overlap rule; give --thresholds");
            }
            log(&format!(
                "thresholds: searched with {} from {} ({} candidates, {} broke the non-overlap rule): {} (model score {:.3})",
                o.search_with,
                r.start,
                r.evaluated.len(),
                r.skipped_overlap,
                r.best.thresholds,
                r.best.score
            ));
            ThresholdChoice {
                thresholds: r.best.thresholds,
                how: format!("searched with {} on the threshold input", o.search_with),
                search: Some(r),
            }
        }
    };
    let t = choice.thresholds;
    // train every predictor
    let tl = Timeline::new(&test);
    let mut trained = Vec::new();
    for &k in &predictors {
        let tr = study::train_and_score(k, &train, &test, &t, &o.train_options, &tl);
        log(&format!(
            "{}: {} table entries ({} SL, {} HR, {} not-HR) from {} keys; test objects predicted other/SL/HR/not-HR: {:?}; accuracy {:.1}% of objects",
            tr.name,
            tr.predictor.table.len(),
            tr.entries[1],
            tr.entries[2],
            tr.entries[3],
            tr.predictor.keys_seen,
            tr.predicted_objects,
            100.0 * tr.accuracy.accuracy_objects
        ));
        trained.push(tr);
    }
    // emit
    let mut b = Builder::new(&o.layout, &out_dir)?;
    let about = [
        b"trained on ".as_slice(),
        o.train.as_os_str().as_encoded_bytes(),
        format!("\nthresholds {} ({})", t, choice.how).as_bytes(),
    ]
    .concat();
    let mut libs = Vec::new();
    let default = Predictor::untrained(Kind::Default);
    libs.push((
        "DEFAULT".to_string(),
        b.build(
            "default",
            &emit::table_c(&default, 1, 0, "DEFAULT: one segment"),
            &out_dir,
            emit::Front::One,
        )?,
    ));
    for tr in &trained {
        let c = emit::table_c(
            &tr.predictor,
            emit::segments(tr.kind),
            emit::table_depth(tr.kind, train.stack_depth),
            &about,
        );
        libs.push((
            tr.name.clone(),
            b.build(&tr.kind.slug(), &c, &out_dir, emit::Front::of(tr.kind))?,
        ));
    }
    log(&format!("emitted {} libraries in {}", libs.len(), out_dir.display()));
    let measurements = if o.measure {
        Some(Measurements::new(
            &o.test,
            &o.replay,
            &o.vg,
            &o.caches,
            libs.iter().map(|(n, b)| (n.clone(), b.so.clone())).collect(),
        )?)
    } else {
        None
    };
    let study = Study {
        program: test.command.clone(),
        runs: vec![
            study::summarize("training", &train),
            study::summarize("threshold", &thresh),
            study::summarize("test", &test),
        ],
        thresholds: choice,
        test_classes: Study::class_counts(&test, &t),
        trained,
        measured: vec![],
        table3: vec![],
        table4: vec![],
        figure3: vec![],
        figure4: vec![],
        fault_curves: vec![],
        figure6: vec![],
        costs: None,
        wall: None,
        verdict: None,
        libraries: libs.iter().map(|(_, b)| b.clone()).collect(),
        notes,
    };
    Ok(Prepared {
        study,
        libs: libs.into_iter().map(|(n, b)| (n, b.so)).collect(),
        measurements,
        out_dir,
    })
}

/// The real program on its test input with the libraries (`o.program`):
/// the lookup's cost under callgrind, and the wall times.
fn run_program(p: &mut Prepared, o: &Options, log: &mut dyn FnMut(&str)) -> Result<()> {
    let Some(prog) = &o.program else { return Ok(()) };
    let s = &mut p.study;
    let names: Vec<String> = if o.runtime_predictors.is_empty() {
        s.trained.iter().filter(|t| t.kind.trained()).map(|t| t.name.clone()).collect()
    } else {
        o.runtime_predictors.iter().map(|k| k.name()).collect()
    };
    let mut run_libs: Vec<(String, PathBuf)> = Vec::new();
    for name in std::iter::once("DEFAULT".to_string()).chain(names) {
        match p.libs.iter().find(|(n, _)| *n == name) {
            Some((_, so)) => run_libs.push((name, so.clone())),
            None => s.notes.push(format!("no {name} library, so it did not run the program")),
        }
    }
    if prog.callgrind {
        s.costs = Some(runtime::costs(&prog.command, &prog.cwd, &run_libs, &p.out_dir, log)?);
    }
    if prog.repeats > 0 {
        let mut v = run_libs.clone();
        match &o.mimalloc {
            Some(m) => v.insert(0, ("mimalloc".to_string(), m.clone())),
            None => s.notes.push("mimalloc is not installed: no wall time beside it".into()),
        }
        let w = runtime::wall(&prog.command, &prog.cwd, &v, prog.repeats, &p.out_dir)?;
        for r in &w.rows {
            log(&format!(
                "wall time, {}: median {:.3} s over {} runs ({:.2}x glibc{}){}",
                r.name,
                r.median,
                r.seconds.len(),
                r.vs_glibc,
                r.vs_default.map_or(String::new(), |d| format!(", {d:.2}x DEFAULT")),
                if r.same_output { "" } else { "; OUTPUT DIFFERS FROM GLIBC'S" }
            ));
        }
        s.wall = Some(w);
    }
    Ok(())
}
