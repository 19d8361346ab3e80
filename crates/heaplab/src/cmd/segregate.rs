//! `heaplab segregate --train T --threshold T --test T`: Seidl and Zorn's
//! segregation of heap objects by predicted reference density and lifetime
//! (paper 001). The work lives in `heaplab-segregate`; this is flags and output.

use crate::cli::{self, Dest};
use anyhow::{bail, Context, Result};
use heaplab_jobs::{Job, JobState, Plan, Runner, Store};
use heaplab_plumb::process::CommandLine;
use heaplab_plumb::vg::VgTools;
use heaplab_plumb::{Layout, Tools};
use heaplab_segregate::classes::Thresholds;
use heaplab_segregate::jobs::{self as seg_jobs, Planned};
use heaplab_segregate::pipeline::{self, Options, Program};
use heaplab_segregate::predictors::{Kind, TrainOptions};
use heaplab_segregate::report::{self, Entry};
use heaplab_segregate::study::Study;
use std::io::Write;
use std::path::{Path, PathBuf};

/// Segregate heap objects by predicted reference density and lifetime (paper 001).
///
/// Three traces recorded with references (`heaplab record --refs`) of one
/// program on three inputs: the predictors are trained on --train, the four
/// thresholds (maximum SL age, minimum HR age, minimum HR density, maximum
/// not-HR density; SL and HR never overlap) are chosen on --threshold by a
/// search outward from a start point, and everything is measured on --test.
///
/// For DEFAULT (the segmented allocator with one segment) and each predictor
/// (SP, PATH, STACK with depth --depth, STACK+size, RANDOM) it emits a
/// segmented allocator with its predictor table (OUT/libNAME.so: four
/// contiguous segments grown in 2 MB steps, 64 KB apart), replays the test
/// trace on it under heaplab's Valgrind tool with the recorded call sites as
/// site hints, and reports: pages per segment and references per page
/// relative to DEFAULT (Tables 3, 4), the cumulative-reference curve and the
/// page-fault rate against memory size relative to DEFAULT (Figures 3, 4),
/// cache miss rates relative to DEFAULT (Figure 6: direct-mapped 32 KB and
/// 256 KB with 32-byte lines, and 32 KB / 1 MB 8-way with 64-byte lines),
/// and precision and recall per class on the test input.
///
/// With --run-test CMD it also runs the real program on its test input with
/// DEFAULT and each predictor's library, which identifies every allocation's
/// call site at run time (from the return address alone where the trained
/// tree allows, walking further up the stack only where it must): under
/// callgrind, the identification's instructions per new object, where it was
/// decided, and the allocator's instructions per malloc against DEFAULT's;
/// and the wall time against glibc, mimalloc and DEFAULT, with the output
/// checked against glibc's. It then says, program by program, whether
/// segregation pays: whether the whole program gets faster, or smaller
/// without getting slower. CMD is split into words as a shell would split
/// them, but no shell runs it: quotes, NAME=VALUE before the program and a
/// final `< FILE` are understood; pipes, `;`, `$` and globs are refused.
///
/// --combine puts the JSON files of several programs into one report.
///
/// Each allocator's measurement on the test trace is a job (one per
/// library, DEFAULT first) whose outcome is kept as it finishes (--state
/// DIR); --jobs N measures N at a time, --resume reuses what an earlier run
/// of the same study kept. --plan DIR writes the jobs for GNU parallel or a
/// Slurm array instead (after training and emitting the libraries, which
/// the jobs read at their paths), and --merge DIR gives the same tables,
/// JSON and report from their outcomes.
///
/// Examples:
///   heaplab segregate --train perl1.hltrace --threshold perl2.hltrace --test perl3.hltrace
///   heaplab segregate --train a.hltrace --threshold b.hltrace --test c.hltrace \
///       --predictor stack,stack:1,path,random -o out/seg-perl --report out/seg-perl --json out/seg-perl.json
///   heaplab segregate ... --run-test "$(heaplab workloads perl-wc --variant 3 --scale 0.05)"
///   heaplab segregate --combine out/seg-*.json --report out/seg-all
///   heaplab segregate --train a.hltrace --threshold b.hltrace --test c.hltrace --jobs 2
///   heaplab segregate --train a.hltrace --threshold b.hltrace --test c.hltrace -o out/seg --plan out/seg-plan
///   parallel -j2 < out/seg-plan/jobs.txt && heaplab segregate --merge out/seg-plan --json seg.json
#[derive(clap::Args)]
#[command(verbatim_doc_comment)]
pub struct Args {
    /// The training trace (with references).
    #[arg(long, value_name = "TRACE", required_unless_present_any = ["combine", "merge"])]
    train: Option<PathBuf>,
    /// The trace the thresholds are chosen on.
    #[arg(long, value_name = "TRACE", required_unless_present_any = ["combine", "merge"])]
    threshold: Option<PathBuf>,
    /// The trace everything is measured on.
    #[arg(long, value_name = "TRACE", required_unless_present_any = ["combine", "merge"])]
    test: Option<PathBuf>,
    /// Predictors besides DEFAULT, comma-separated or repeated: sp, path,
    /// stack[:K], stack+size[:K], random[:SEED].
    #[arg(
        long,
        value_name = "LIST",
        value_delimiter = ',',
        default_value = "sp,path,stack,stack+size,random"
    )]
    predictor: Vec<String>,
    /// STACK's depth: the last K call sites.
    #[arg(long, value_name = "K", default_value_t = 3, value_parser = clap::value_parser!(u32).range(1..=64))]
    depth: u32,
    /// Thresholds instead of the search: SL_MAX_AGE,HR_MIN_AGE,HR_MIN_DENSITY,NHR_MAX_DENSITY
    /// (instructions, instructions, references per byte, references per byte).
    #[arg(long, value_name = "T")]
    thresholds: Option<String>,
    /// The predictor the threshold search trains.
    #[arg(long, value_name = "P", default_value = "stack")]
    search_with: String,
    /// Candidates the search may evaluate.
    #[arg(long, value_name = "N", default_value_t = 400)]
    budget: usize,
    /// Share of a key's training objects that must share its class for the key to predict it.
    #[arg(long, value_name = "F", default_value_t = 0.9)]
    purity: f64,
    /// Where the emitted tables, libraries and measurement files go
    /// (default: out/segregate/TEST-STEM).
    #[arg(short = 'o', long = "output", alias = "out", value_name = "DIR")]
    out: Option<PathBuf>,
    /// Caches to simulate (SIZE:LINE:ASSOC,...).
    #[arg(long, value_name = "SPEC", default_value = "32K:32:1,256K:32:1,32K:64:8,1M:64:8")]
    caches: String,
    /// Train, emit and score predictions only; do not measure on the test trace.
    #[arg(long)]
    no_measure: bool,
    /// The real program on its test input, as one command line (run without
    /// a shell), for the run-time lookup cost and the wall times.
    #[arg(long, value_name = "CMD")]
    run_test: Option<String>,
    /// The directory --run-test runs in.
    #[arg(long, value_name = "DIR")]
    cwd: Option<PathBuf>,
    /// Rounds of the wall-time comparison (0: none).
    #[arg(long, value_name = "N", default_value_t = 5)]
    repeats: usize,
    /// Do not run the program under callgrind.
    #[arg(long)]
    no_callgrind: bool,
    /// The predictors whose libraries run the real program, comma-separated
    /// (default: every trained one).
    #[arg(long, value_name = "LIST", value_delimiter = ',')]
    runtime_predictor: Vec<String>,
    /// Combine these studies' JSON files into one report (no traces needed).
    #[arg(long, value_name = "JSON", num_args = 1.., conflicts_with_all = ["train", "threshold", "test"])]
    combine: Vec<PathBuf>,
    /// Write report.html (tables and figures) into DIR.
    #[arg(long, value_name = "DIR")]
    report: Option<PathBuf>,
    /// Write every result as JSON to FILE (no FILE, or -: standard output,
    /// the tables then go to stderr).
    #[arg(long, value_name = "FILE", num_args = 0..=1, default_missing_value = "-")]
    json: Option<PathBuf>,
    /// Say nothing while working.
    #[arg(short, long)]
    quiet: bool,
    /// Measurements at a time (each is a Valgrind process and a simulator,
    /// two cores' worth).
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..), default_value_t = 1)]
    jobs: u32,
    /// Reuse the measurements an earlier, interrupted run of the same study kept.
    #[arg(long)]
    resume: bool,
    /// Where each measurement's outcome is kept as it finishes
    /// (default: ~/.cache/heaplab/outcomes).
    #[arg(long, value_name = "DIR")]
    state: Option<PathBuf>,
    /// Train and emit, then write the measurements as jobs into DIR (for
    /// GNU parallel or Slurm) instead of running them.
    #[arg(long, value_name = "DIR", conflicts_with_all = ["merge", "resume", "combine", "no_measure", "run_test"])]
    plan: Option<PathBuf>,
    /// Assemble the study from the outcomes of the jobs of the plan in DIR
    /// (the real program's figures need a local run: --run-test with
    /// --state DIR/results --resume reuses the plan's measurements).
    #[arg(long, value_name = "DIR", conflicts_with_all = ["train", "threshold", "test", "resume", "combine", "run_test"])]
    merge: Option<PathBuf>,
}

fn command_line() -> String {
    std::env::args().collect::<Vec<_>>().join(" ")
}

fn write_out(a: &Args, entries: &[Entry], json: String, dest: Option<&Dest>) -> Result<i32> {
    let text = report::text_report(entries);
    cli::text(dest.is_some_and(Dest::is_stdout)).write_all(text.as_bytes())?;
    if let Some(d) = dest {
        d.write(&(json + "\n"))?;
    }
    if let Some(dir) = &a.report {
        let title = if entries.len() == 1 {
            format!("heaplab segregate: {}", entries[0].label)
        } else {
            "heaplab segregate".to_string()
        };
        let path = cli::write_report(dir, &report::html(entries, &title, &command_line()))?;
        if !a.quiet {
            eprintln!("heaplab segregate: wrote {}", path.display());
        }
    }
    std::io::stdout().flush()?;
    Ok(0)
}

pub fn run(a: Args) -> Result<i32> {
    let inputs: Vec<PathBuf> = [&a.train, &a.threshold, &a.test]
        .into_iter()
        .flatten()
        .cloned()
        .chain(a.combine.clone())
        .collect();
    let dest = cli::dest("json", &a.json, &inputs)?;
    if !a.combine.is_empty() {
        let mut entries = Vec::new();
        for p in &a.combine {
            let bytes = std::fs::read(p).with_context(|| format!("reading {}", p.display()))?;
            let v: serde_json::Value = serde_json::from_slice(&bytes).with_context(|| {
                format!("{}: not JSON (a file that `heaplab segregate --json` wrote?)", p.display())
            })?;
            if v.get("table3").is_none() {
                bail!("{}: not a `heaplab segregate --json` result (no table3)", p.display());
            }
            let mut study: Study = serde_json::from_value(v).with_context(|| {
                format!(
                    "{}: a `heaplab segregate --json` result this version cannot read (written by an older one? run the study again)",
                    p.display()
                )
            })?;
            // the verdict by this version's rule, from the stored figures
            study.verdict = Some(study.judge());
            entries.push(Entry { label: report::label_of(&study.program), study });
        }
        let all: Vec<&Study> = entries.iter().map(|e| &e.study).collect();
        return write_out(&a, &entries, serde_json::to_string_pretty(&all)?, dest.as_ref());
    }
    if let Some(dir) = &a.merge {
        return merge(&a, dir, dest.as_ref());
    }
    let given = [a.train.clone(), a.threshold.clone(), a.test.clone()];
    let Some(given) = given.into_iter().collect::<Option<Vec<PathBuf>>>() else {
        bail!("--train, --threshold and --test are all needed (or --combine)");
    };
    for p in &given {
        if !p.exists() {
            bail!("{}: no such file", p.display());
        }
    }
    let spooled = heaplab_plumb::input::prepare(&given)?;
    let (train, threshold, test) =
        (spooled.paths[0].clone(), spooled.paths[1].clone(), spooled.paths[2].clone());
    if !(0.5..=1.0).contains(&a.purity) {
        bail!("--purity {}: a share from 0.5 to 1", a.purity);
    }
    let mut predictors = Vec::new();
    for p in &a.predictor {
        let k = Kind::parse(p, a.depth)?;
        if k == Kind::Default {
            continue; // always measured, as the baseline
        }
        if !predictors.contains(&k) {
            predictors.push(k);
        }
    }
    let search_with = Kind::parse(&a.search_with, a.depth)?;
    let runtime_predictors = a
        .runtime_predictor
        .iter()
        .map(|p| Kind::parse(p, a.depth))
        .collect::<Result<Vec<Kind>>>()?;
    let thresholds = a.thresholds.as_deref().map(Thresholds::parse).transpose()?;
    let caches = heaplab_sim::config::parse_cache_spec(&a.caches)
        .map_err(|e| anyhow::anyhow!("--caches: {e}"))?;
    let layout = Layout::get()?;
    let tools = Tools::new(layout)?;
    let vg = VgTools::new(layout);
    if !a.no_measure {
        tools.check_replay()?;
        vg.check("heaplab-measure")?;
    }
    // The default directory is named after the test trace, in characters a
    // path in LD_PRELOAD can hold (no space, no colon) and a reader can see.
    let stem: String = given[2]
        .file_stem()
        .map(|s| s.to_string_lossy().to_string())
        .unwrap_or_else(|| "test".into())
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() || "._-+".contains(c) { c } else { '_' })
        .collect();
    let out = a.out.clone().unwrap_or_else(|| PathBuf::from("out/segregate").join(&stem));
    let run_test =
        a.run_test.as_deref().map(CommandLine::parse).transpose().context("--run-test")?;
    let program = run_test.map(|c| Program {
        command: c,
        cwd: a
            .cwd
            .clone()
            .unwrap_or_else(|| std::env::current_dir().unwrap_or_else(|_| ".".into())),
        repeats: a.repeats,
        callgrind: !a.no_callgrind,
    });
    let o = Options {
        train,
        threshold,
        test,
        predictors,
        search_with,
        thresholds,
        train_options: TrainOptions { purity: a.purity },
        search_budget: a.budget,
        out_dir: out,
        layout: layout.clone(),
        replay: tools.replay.clone(),
        vg,
        caches,
        measure: !a.no_measure,
        program,
        runtime_predictors,
        mimalloc: heaplab_plumb::alloc::resolve(&["mimalloc".to_string()], &tools)?
            .into_iter()
            .find(|m| m.missing.is_none())
            .and_then(|m| m.preload),
    };
    let quiet = a.quiet;
    let mut log = |m: &str| {
        if !quiet {
            eprintln!("heaplab segregate: {m}");
        }
    };
    if let Some(dir) = &a.plan {
        if spooled.paths[2] != given[2] {
            bail!("--plan needs its test trace as a file (a plan's jobs read it by name, later), not a pipe");
        }
        return plan(&o, dir, &mut log);
    }
    let state = a.state.clone().unwrap_or_else(heaplab_compare::measure::default_state_dir);
    let store = Store::open(&state)?;
    heaplab_jobs::cancel::install();
    let run_jobs = |jobs: &[Job]| -> Vec<JobState> {
        let progress = crate::progress::Progress::new("heaplab segregate", a.jobs as usize);
        let observer: &dyn heaplab_jobs::Observer =
            if quiet { &heaplab_jobs::run::Quiet } else { &progress };
        observer.begin(jobs);
        let runner = Runner {
            workers: a.jobs as usize,
            store: Some(&store),
            resume: a.resume,
            observer,
            eta: None,
        };
        let states = runner.run(jobs, &seg_jobs::run_job);
        progress.finish();
        store.prune_after_run(jobs, "heaplab segregate");
        if heaplab_jobs::cancel::requested() {
            eprintln!(
                "heaplab segregate: interrupted; what finished is kept in {}: run the same command with --resume to measure the rest",
                state.display()
            );
        }
        states
    };
    let study = pipeline::run(&o, &run_jobs, &mut log)?;
    let json = serde_json::to_string_pretty(&study)?;
    let entries = vec![Entry { label: report::label_of(&study.program), study }];
    write_out(&a, &entries, json, dest.as_ref())
}

/// `--plan DIR`: the study trained and its libraries emitted, the
/// measurements written out as jobs, nothing measured.
fn plan(o: &Options, dir: &Path, log: &mut dyn FnMut(&str)) -> Result<i32> {
    let p = pipeline::prepare(o, log)?;
    let measurements = p.measurements.expect("--plan conflicts with --no-measure");
    let jobs = measurements.jobs()?;
    let exe = std::fs::canonicalize(std::env::current_exe()?)?;
    let planned = Planned { study: p.study, measurements };
    let plan = Plan::new("segregate", serde_json::to_value(&planned)?, jobs, exe);
    plan.write(dir)?;
    let d = heaplab_jobs::shell::quote(&std::fs::canonicalize(dir)?.display().to_string());
    println!("heaplab segregate: {} jobs in {d}/jobs.txt (one per allocator)", plan.jobs.len());
    println!("run them, e.g.: parallel -j\"$(( $(nproc) / 2 ))\" < {d}/jobs.txt   (each is two cores' worth)");
    println!("  (or --sshlogin HOSTS, or Slurm: {d}/slurm.sbatch; {d}/README.txt says how)");
    println!("then: heaplab segregate --merge {d} [--json F --report DIR]");
    Ok(0)
}

/// `--merge DIR`: the study from the outcomes of a plan's jobs.
fn merge(a: &Args, dir: &Path, dest: Option<&Dest>) -> Result<i32> {
    let plan = Plan::load(dir)?;
    if plan.study != "segregate" {
        bail!(
            "{} holds a {} plan; merge it with heaplab {} --merge",
            dir.display(),
            plan.study,
            plan.study
        );
    }
    let planned: Planned = serde_json::from_value(plan.params.clone())
        .with_context(|| format!("{}: the plan's parameters do not read", dir.display()))?;
    let store = Store::open(&Plan::results_dir(dir))?;
    let states = store.states(&plan.jobs);
    let mut study = planned.study;
    study.measured = seg_jobs::merge(&plan.jobs, &states, &|j: &Job| {
        format!("job {} ({}) has no outcome in {}", j.id, j.label, store.dir.display())
    })?;
    study.derive();
    let json = serde_json::to_string_pretty(&study)?;
    let entries = vec![Entry { label: report::label_of(&study.program), study }];
    write_out(a, &entries, json, dest)
}
