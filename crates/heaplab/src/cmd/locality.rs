//! `heaplab locality TRACE`: cache and page locality of allocators on a
//! trace recorded with references (papers 000 §4 and 003 §5). The study lives
//! in `heaplab-locality` (study, report), the measurement in `heaplab-refs`;
//! this is flags and output.

use crate::cli::Dest;
use anyhow::{bail, Context, Result};
use heaplab_jobs::{Job, JobState, Plan, Runner, Store};
use heaplab_locality::jobs::{self, Study};
use heaplab_locality::report;
use heaplab_locality::study::{self, Locality, Options};
use heaplab_plumb::{alloc, output, Layout, Tools};
use heaplab_refs::measure::SimSpec;
use heaplab_refs::vg::VgTools;
use heaplab_sim::config::{self, CacheConfig};
use std::io::Write;
use std::path::{Path, PathBuf};

/// Cache and page locality of allocators, on a trace recorded with references.
///
/// Each allocator runs the trace's allocation events in heaplab-replay under
/// heaplab's Valgrind tool (measure mode, the allocator LD_PRELOADed), which
/// streams the allocator's own loads and stores; the program's recorded loads
/// and stores are re-issued between them at the addresses this allocator
/// returned. Every cache of --caches (shared by program and allocator, and
/// split: the allocator on a cache of its own) and every page size of --pages
/// is simulated in one pass.
///
/// It reports: miss rate against cache size, direct-mapped with 32-byte lines
/// (paper 000 Figures 6-8) and 8-way with 64-byte lines; the estimated time
/// I + M·P·D with P = 25 cycles (000 Tables 4-5) and a modern P; page faults
/// per reference against memory size (000 Figures 2-3); boundary tags, for
/// every NAME with NAME+pad8 in the list (000 Table 6); and the allocator's
/// cache pollution, shared against split 32 KB caches, its own misses in a
/// 512-byte cache, and the references of each part (003 Figures 5-10, Tables
/// 2-4).
///
/// Examples:
///   heaplab record --refs -o gawk.hltrace -- gawk -f wc.awk input.txt
///   heaplab locality gawk.hltrace
///   heaplab locality gawk.hltrace --allocators bsd,glibc,gnulocal,gnulocal+pad8 --report out/gawk
///   heaplab locality t.hltrace --caches 16K:32:1,64K:32:1 --pages 4K --json t.json
///
/// Each allocator's measurement is a job whose outcome is kept as it
/// finishes (--state DIR); --resume continues an interrupted study. --plan
/// DIR writes the jobs for GNU parallel or a Slurm array instead, and
/// --merge DIR gives the same tables, JSON and report from their outcomes.
#[derive(clap::Args)]
#[command(verbatim_doc_comment)]
pub struct Args {
    /// A trace with references (`heaplab record --refs`).
    #[arg(value_name = "TRACE", required_unless_present = "merge")]
    trace: Option<PathBuf>,
    /// Allocators, comma-separated: heaplab's (NAME, NAME+padN), glibc,
    /// jemalloc, mimalloc, tcmalloc, zoo, peers, all, or a path to a .so.
    #[arg(long, value_name = "LIST", default_value = study::DEFAULT_ALLOCATORS)]
    allocators: Vec<String>,
    /// Caches to simulate, as for `heaplab sim` (SIZE:LINE:ASSOC,..., `sweep`,
    /// `paper000`); the configurations the papers' figures need are added.
    #[arg(long, value_name = "SPEC", default_value = "sweep")]
    caches: String,
    /// Page sizes, e.g. 4K,8K (`none`: no page simulation).
    #[arg(long, value_name = "SPEC", default_value = "4K,8K")]
    pages: String,
    /// Miss penalty in cycles for the time estimate (paper 000: 25).
    #[arg(long, value_name = "CYCLES", default_value_t = study::PAPER_PENALTY)]
    penalty: u64,
    /// A second, modern miss penalty in cycles.
    #[arg(long, value_name = "CYCLES", default_value_t = study::MODERN_PENALTY)]
    modern_penalty: u64,
    /// Write report.html (figures and tables) into DIR.
    #[arg(long, value_name = "DIR")]
    report: Option<PathBuf>,
    /// Write every result as JSON to FILE (no FILE, or -: standard output,
    /// the tables then go to stderr).
    #[arg(long, value_name = "FILE", num_args = 0..=1, default_missing_value = "-")]
    json: Option<PathBuf>,
    /// Say nothing while measuring.
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
    /// Write the measurements as jobs into DIR (for GNU parallel or Slurm)
    /// instead of running them.
    #[arg(long, value_name = "DIR", conflicts_with_all = ["merge", "resume"])]
    plan: Option<PathBuf>,
    /// Assemble the study from the outcomes of the jobs of the plan in DIR.
    #[arg(long, value_name = "DIR", conflicts_with_all = ["trace", "resume"])]
    merge: Option<PathBuf>,
}

pub fn run(a: Args) -> Result<i32> {
    let json = crate::cli::dest("json", &a.json, a.trace.as_slice())?;
    if let Some(dir) = &a.merge {
        return merge(&a, dir, json.as_ref());
    }
    let given = a.trace.clone().expect("clap requires a trace without --merge");
    if !given.exists() {
        bail!("{}: no such file", given.display());
    }
    let (trace, _input) = heaplab_plumb::input::prepare_one(&given)?;
    let layout = Layout::get()?;
    let tools = Tools::new(layout)?;
    tools.check_replay()?;
    let vg = VgTools::new(layout);
    vg.check("heaplab-measure")?;
    {
        let r = heaplab_trace::refs::RefsReader::open(&trace)?;
        if !r.has_refs() {
            bail!(
                "{} has no references (its META options lack refs=1): record it with `heaplab record --refs -o {} -- PROG ...`",
                given.display(),
                given.display()
            );
        }
    }
    let allocators = alloc::resolve(&a.allocators, &tools)?;
    check_outputs(&a, json.as_ref())?;
    let caches: Vec<CacheConfig> = if a.caches.trim() == "none" {
        Vec::new()
    } else {
        config::parse_cache_spec(&a.caches).map_err(|e| anyhow::anyhow!("--caches: {e}"))?
    };
    let page_sizes =
        config::parse_page_spec(&a.pages).map_err(|e| anyhow::anyhow!("--pages: {e}"))?;
    let opts = Options {
        allocators,
        sim: SimSpec { caches: study::with_required(caches), page_sizes },
        penalty: a.penalty,
        modern_penalty: a.modern_penalty,
    };
    let study = Study::new(&trace, &opts, &tools.replay, &vg)?;
    let jobs = study.jobs()?;
    if let Some(dir) = &a.plan {
        if trace != given {
            bail!("--plan needs its trace as a file (a plan's jobs read it by name, later), not a pipe");
        }
        return plan(study, jobs, dir);
    }
    let state = a.state.clone().unwrap_or_else(heaplab_compare::measure::default_state_dir);
    let store = Store::open(&state)?;
    heaplab_jobs::cancel::install();
    let progress = crate::progress::Progress::new("heaplab locality", a.jobs as usize);
    let observer: &dyn heaplab_jobs::Observer =
        if a.quiet { &heaplab_jobs::run::Quiet } else { &progress };
    observer.begin(&jobs);
    let runner = Runner {
        workers: a.jobs as usize,
        store: Some(&store),
        resume: a.resume,
        observer,
        eta: None,
    };
    let states = runner.run(&jobs, &jobs::run_job);
    progress.finish();
    store.prune_after_run(&jobs, "heaplab locality");
    let interrupted = heaplab_jobs::cancel::requested();
    let result = jobs::merge(&study, &jobs, &states, &|j: &Job| {
        if interrupted {
            format!("not measured ({}): interrupted; --resume measures the rest", j.label)
        } else {
            format!("job {} left no outcome", j.id)
        }
    })?;
    if interrupted {
        eprintln!(
            "heaplab locality: interrupted; what finished is kept in {}: run the same command with --resume to measure the rest",
            state.display()
        );
    }
    output_all(&a, json.as_ref(), &result)
}

/// Where the results go, checked (and made) before minutes of measuring.
fn check_outputs(a: &Args, json: Option<&Dest>) -> Result<()> {
    if let Some(Dest::File(p)) = json {
        output::check(p)?;
        if let Some(d) = p.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(d).with_context(|| format!("creating {}", d.display()))?;
        }
    }
    if let Some(dir) = &a.report {
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
        output::check(&dir.join("report.html"))?;
    }
    Ok(())
}

/// `--plan DIR`: the jobs written out, nothing run.
fn plan(study: Study, jobs: Vec<Job>, dir: &Path) -> Result<i32> {
    let exe = std::fs::canonicalize(std::env::current_exe()?)?;
    let plan = Plan::new("locality", serde_json::to_value(&study)?, jobs, exe);
    plan.write(dir)?;
    let d = heaplab_jobs::shell::quote(&std::fs::canonicalize(dir)?.display().to_string());
    println!("heaplab locality: {} jobs in {d}/jobs.txt (one per allocator)", plan.jobs.len());
    println!("run them, e.g.: parallel -j\"$(( $(nproc) / 2 ))\" < {d}/jobs.txt   (each is two cores' worth)");
    println!("  (or --sshlogin HOSTS, or Slurm: {d}/slurm.sbatch; {d}/README.txt says how)");
    println!("then: heaplab locality --merge {d} [--json F --report DIR]");
    Ok(0)
}

/// `--merge DIR`: the study from the outcomes of a plan's jobs.
fn merge(a: &Args, dir: &Path, json: Option<&Dest>) -> Result<i32> {
    let plan = Plan::load(dir)?;
    if plan.study != "locality" {
        bail!(
            "{} holds a {} plan; merge it with heaplab {} --merge",
            dir.display(),
            plan.study,
            plan.study
        );
    }
    let study: Study = serde_json::from_value(plan.params.clone())
        .with_context(|| format!("{}: the plan's parameters do not read", dir.display()))?;
    check_outputs(a, json)?;
    let store = Store::open(&Plan::results_dir(dir))?;
    let states = store.states(&plan.jobs);
    for (j, s) in plan.jobs.iter().zip(&states) {
        let why = match s {
            JobState::Done(_) => continue,
            JobState::Missing => "missing: no outcome".to_string(),
            JobState::Failed(o) => {
                format!("failed on {}: {}", o.host, o.error.as_deref().unwrap_or(""))
            }
            JobState::Unreadable(e) => format!("unreadable: {e}"),
        };
        eprintln!("heaplab locality --merge: job {} ({}) {why}", j.id, j.label);
    }
    let result = jobs::merge(&study, &plan.jobs, &states, &|j: &Job| {
        format!("job {} ({}) has no outcome in {}", j.id, j.label, store.dir.display())
    })?;
    output_all(a, json, &result)
}

/// The tables, the JSON and the report; the exit status.
fn output_all(a: &Args, json: Option<&Dest>, result: &Locality) -> Result<i32> {
    let text = report::text(result);
    if let Some(d) = json {
        d.write(&(serde_json::to_string_pretty(result)? + "\n"))?;
    }
    crate::cli::text(json.is_some_and(Dest::is_stdout)).write_all(text.as_bytes())?;
    if let Some(dir) = &a.report {
        let path = crate::cli::write_report(dir, &report::html(result))?;
        if !a.quiet {
            eprintln!("heaplab locality: wrote {}", path.display());
        }
    }
    Ok(if result.failed.is_empty() { 0 } else { 1 })
}
