//! `heaplab compare`: what each allocator costs on recorded traces (or, with
//! `--live`, on the real program). The work is in `heaplab-compare`; this
//! module parses flags, shows progress and writes the outputs.

use crate::cli::{self, Dest};
use anyhow::{bail, Context, Result};
use heaplab_compare::count::Counter;
use heaplab_compare::jobs::{self, Study};
use heaplab_compare::{alloc, live, measure, record, report, Progress, Tools};
use heaplab_jobs::{JobState, Plan, Store};
use heaplab_plumb::AllocSpec;
use indicatif::{ProgressBar, ProgressStyle};
use std::io::Write;
use std::path::{Path, PathBuf};

/// What `heaplab compare --help` says (main.rs passes it as long_about).
pub const LONG_ABOUT: &str = r#"Compare allocators on recorded traces: instructions per malloc and per
free (counted exactly: --counter), the allocator's share of instructions,
wall time against glibc, peak footprint (also normalized to firstfit),
utilization and internal fragmentation. One process per (trace, allocator)
and measurement, the allocator loaded with LD_PRELOAD; independent replays
run in parallel, timing runs one at a time. glibc and firstfit are always
measured, as the baselines of the ratios.

Counters (--counter): vgcount (default; heaplab's own Valgrind tool, within
twice the cost of Valgrind's none tool), callgrind (the oracle, several
times slower), perf (the CPU's instruction counter, where the machine
lends it).

Every measurement is a job whose outcome is kept as it finishes (in --state
DIR); an interrupted comparison is continued with --resume. --plan DIR
writes the jobs as command lines for GNU parallel (locally or
--sshlogin) or a Slurm array instead of running them; --merge DIR then
gives the same table, JSON, CSV and report (docs/compare.md, "Many
machines").

With --live, runs the real program under each allocator instead: wall
time, peak RSS, instructions, and whether stdout is identical to glibc's.
A program that prints its own timings: --ignore-lines REGEX (repeatable)
leaves matching lines out of the comparison, --output-filter CMD ARGS… ';'
passes stdout through a command first (no shell). A row whose output still
differs keeps its figures, flagged OUTPUT DIFFERS (status output_differs).

Allocators (--allocators, comma-separated): all, zoo (heaplab's), peers
(glibc jemalloc mimalloc tcmalloc), any single name, NAME+padN, or a path
to a .so (LABEL=PATH names it). A peer that is not installed gets rows
that say so, and the exit status is 1.

A corrupt trace (bad checksum, malformed block, junk after the END block)
is refused. A trace that stops early (no END block, a torn last block) is
replayed up to the cut, its rows are marked TRUNCATED (truncated: true,
the byte offset and the events read, in JSON and CSV too), and the exit
status is 1 unless --allow-truncated is given.

Examples:
  heaplab compare perl.hltrace make.hltrace --report out/cmp
  heaplab compare t.hltrace --allocators firstfit,bsd,glibc,mimalloc --repeat 5 --json t.json
  heaplab compare t.hltrace --allocators bsd,glibc --json | jq '.[].instr_per_malloc'
  heaplab compare big.hltrace --resume                  # after an interruption
  heaplab compare t.hltrace --plan plan/ && parallel < plan/jobs-shared.txt \
    && parallel -j1 < plan/jobs-alone.txt && heaplab compare --merge plan/ --json t.json
  heaplab compare --live --allocators peers,bsd -- perl wc.pl input.txt
  heaplab compare --live --ignore-lines '^Time was' -- espresso -t ex.pla

--json [FILE] and --csv [FILE] write to FILE, or with no FILE (or -) to
standard output; the table then goes to stderr."#;

/// Flags of `heaplab compare`.
#[derive(clap::Args)]
pub struct Args {
    /// Traces to replay (.hltrace).
    traces: Vec<PathBuf>,
    /// Allocators to compare.
    #[arg(long, value_delimiter = ',', default_value = "all")]
    allocators: Vec<String>,
    /// Timing runs per cell; the median is reported (0: no timing).
    #[arg(long, default_value_t = 3)]
    repeat: usize,
    /// Parallel replays (default: the number of cores).
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..))]
    jobs: Option<u32>,
    /// Write the records as JSON (docs/compare.md) to FILE (no FILE, or -: standard output).
    #[arg(long, value_name = "FILE", num_args = 0..=1, default_missing_value = "-")]
    json: Option<PathBuf>,
    /// Write the records as CSV to FILE (no FILE, or -: standard output).
    #[arg(long, value_name = "FILE", num_args = 0..=1, default_missing_value = "-")]
    csv: Option<PathBuf>,
    /// Write DIR/report.html: the figures and every record, one self-contained page.
    #[arg(long, value_name = "DIR")]
    report: Option<PathBuf>,
    /// Skip the instruction counts.
    #[arg(long)]
    no_instructions: bool,
    /// How to count instructions: vgcount (heaplab's Valgrind tool), callgrind
    /// (the oracle, ten times slower) or perf (the CPU's counter, where allowed).
    #[arg(long, default_value = "vgcount", value_parser = ["vgcount", "callgrind", "perf"])]
    counter: String,
    /// Reuse the measurements an earlier, interrupted run of the same
    /// comparison kept (same traces, allocators and options, by content).
    #[arg(long)]
    resume: bool,
    /// Where each measurement's outcome is kept as it finishes
    /// (default: ~/.cache/heaplab/outcomes).
    #[arg(long, value_name = "DIR")]
    state: Option<PathBuf>,
    /// Write the measurements as jobs into DIR (for GNU parallel or Slurm)
    /// instead of running them.
    #[arg(long, value_name = "DIR", conflicts_with_all = ["merge", "live", "resume"])]
    plan: Option<PathBuf>,
    /// Combine the outcomes of the jobs of the plan in DIR into the table,
    /// JSON, CSV and report; name the jobs missing or failed.
    #[arg(long, value_name = "DIR", conflicts_with_all = ["live", "resume"])]
    merge: Option<PathBuf>,
    /// How the replays run a trace of several threads: recorded (each recorded
    /// thread on a thread of its own, waiting where the trace says: the
    /// default for such traces) or serial (every event on one thread, in the
    /// trace's merged order). Instruction counts always replay serially.
    #[arg(long, value_name = "MODE", value_parser = ["recorded", "serial"])]
    threads: Option<String>,
    /// How a thread of a threaded replay waits for another: futex (spin
    /// briefly, then sleep until woken: the default, which leaves a core to
    /// the thread waited for when there are fewer cores than threads) or
    /// spin (spin, then yield the CPU; never sleep).
    #[arg(long, value_name = "HOW", value_parser = ["futex", "spin"])]
    wait: Option<String>,
    /// The timing replays' mode: plain (calls only, the allocator's cost
    /// alone: the default) or touch (every new object's bytes written, as a
    /// program initializes what it allocates, so that page faults and cache
    /// misses of spread-out blocks count, as they do in the program).
    #[arg(long, value_name = "MODE", value_parser = ["plain", "touch"])]
    time_mode: Option<String>,
    /// Skip the touch-mode runs (footprint, utilization, fragmentation).
    #[arg(long)]
    no_footprint: bool,
    /// Accept traces that stop early (no END block, or a torn last block):
    /// their rows are still marked truncated, but the exit status is 0.
    #[arg(long)]
    allow_truncated: bool,
    /// Keep the decoded traces (in the work directory, named on stderr).
    #[arg(long)]
    keep_scratch: bool,
    /// Kill a replay that runs longer than this many seconds and mark its cell
    /// failed (callgrind replays get ten times as long; 0: no limit).
    #[arg(long, value_name = "SECS", default_value_t = 300)]
    timeout: u64,
    /// Run the program given after `--` under each allocator instead of replaying traces.
    #[arg(long)]
    live: bool,
    /// --live: a file to connect to the program's stdin.
    #[arg(long, value_name = "FILE", requires = "live")]
    stdin: Option<PathBuf>,
    /// --live: extra environment for the program (repeatable).
    #[arg(long = "env", value_name = "VAR=VALUE", requires = "live")]
    env: Vec<String>,
    /// --live: also write the program's instruction counts under glibc to FILE,
    /// in the form of TRACE.program.json (the denominator of the allocator's share).
    #[arg(long, value_name = "FILE", requires = "live")]
    program_cost: Option<PathBuf>,
    /// --live: leave out of the stdout comparison the lines that match REGEX
    /// (repeatable), e.g. a program's own timing line: 'Time was [0-9.]+ sec'.
    #[arg(long, value_name = "REGEX", requires = "live")]
    ignore_lines: Vec<String>,
    /// --live: pass each run's stdout through this command (its stdin) before
    /// comparing it; the command and its arguments, up to a lone `;` (no
    /// shell), e.g. --output-filter sed -e 's/ in [0-9.]*s$//' ';'
    #[arg(long, value_name = "CMD ARGS… ;", requires = "live", num_args = 1..,
          allow_hyphen_values = true, value_terminator = ";")]
    output_filter: Vec<String>,
    /// --live: the program and its arguments.
    #[arg(last = true, value_name = "PROG ARGS")]
    program: Vec<String>,
}

/// A progress bar on stderr (hidden when stderr is not a terminal).
pub struct Bar(pub ProgressBar);

impl Bar {
    pub fn new() -> Bar {
        let pb = ProgressBar::new(0);
        pb.set_style(
            ProgressStyle::with_template("{bar:30} {pos}/{len} {elapsed_precise} {wide_msg}")
                .expect("valid template"),
        );
        Bar(pb)
    }
}

impl Progress for Bar {
    fn start(&self, steps: u64) {
        self.0.set_length(steps);
    }
    fn step(&self, what: &str) {
        self.0.set_message(what.to_string());
        self.0.inc(1);
    }
}

/// The tools, with scratch files in a fresh private directory.
pub fn tools() -> Result<Tools> {
    Tools::discover()
}

/// The tools with a replay time limit (0: none).
pub fn tools_with_timeout(secs: u64) -> Result<Tools> {
    let mut t = tools()?;
    t.timeout = (secs > 0).then(|| std::time::Duration::from_secs(secs));
    Ok(t)
}

fn write(path: &Path, text: &str) -> Result<()> {
    heaplab_plumb::output::write(path, text)
}

/// Runs the trace comparison and writes the outputs; returns the records.
#[allow(clippy::too_many_arguments)]
pub fn compare_traces(
    tools: &Tools,
    traces: &[PathBuf],
    allocators: &[String],
    opts: &measure::Options,
    json: Option<&Dest>,
    csv: Option<&Dest>,
    report_dir: Option<&Path>,
    command: &str,
) -> Result<Vec<record::Record>> {
    let mut allocs = alloc::resolve(allocators, tools)?;
    let added = alloc::add_baselines(&mut allocs, tools);
    // where the results go, checked before minutes of measuring
    for d in [json, csv].into_iter().flatten() {
        if let Dest::File(p) = d {
            heaplab_plumb::output::check(p)?;
        }
    }
    if opts.keep_scratch {
        tools.keep_scratch();
        eprintln!("heaplab compare: scratch files in {}", tools.work_dir.display());
    }
    heaplab_jobs::cancel::install();
    let progress = crate::progress::Progress::new("heaplab compare", opts.jobs);
    let records = measure::compare(tools, traces, &allocs, opts, &progress)?;
    progress.finish();
    if heaplab_jobs::cancel::requested() {
        let state = opts.state.as_ref().map(|p| p.display().to_string()).unwrap_or_default();
        eprintln!(
            "heaplab compare: interrupted; what finished is kept in {state}: run the same command with --resume to measure the rest"
        );
    }
    output(&records, &allocs, &added, json, csv, report_dir, command)?;
    Ok(records)
}

/// Prints the table and notes and writes the JSON, CSV and report.
fn output(
    records: &[record::Record],
    allocs: &[heaplab_plumb::Allocator],
    added: &[String],
    json: Option<&Dest>,
    csv: Option<&Dest>,
    report_dir: Option<&Path>,
    command: &str,
) -> Result<()> {
    let mut out = cli::text(json.is_some_and(Dest::is_stdout) || csv.is_some_and(Dest::is_stdout));
    write!(out, "{}", record::table(records))?;
    let mut notes = Vec::new();
    let mut seen: Vec<&str> = Vec::new();
    for r in records.iter().filter(|r| r.truncated) {
        if !seen.contains(&r.trace.as_str()) {
            seen.push(&r.trace);
            notes.push(format!(
                "! {}: {}",
                crate::human::escaped(&r.trace_name),
                r.truncation.as_deref().unwrap_or("the trace is cut short")
            ));
        }
    }
    if !added.is_empty() {
        notes.push(format!("Added as baselines: {}.", added.join(", ")));
    }
    if records.iter().any(|r| r.footprint_source.as_deref() == Some("rss_touch")) {
        notes.push(
            "* footprint is peak RSS growth in touch mode (the allocator exports no heaplab_alloc_stats); \
             heaplab's allocators report bytes obtained from the OS exactly."
                .into(),
        );
    }
    match records.iter().find_map(|r| r.share_basis.as_deref()) {
        Some("replay") => notes.push(
            "share = allocator instructions / the replay's instructions (no TRACE.program.json beside the trace; \
             `heaplab compare --live --program-cost TRACE.program.json -- PROG` makes one)."
                .into(),
        ),
        Some("program") => notes.push(
            "share = allocator instructions / (those + the program's own instructions, from TRACE.program.json)."
                .into(),
        ),
        _ => {}
    }
    writeln!(out)?;
    for n in &notes {
        writeln!(out, "{n}")?;
    }
    let provenance = crate::cmd::memargs::provenance().with_allocators(allocs);
    if let Some(d) = json {
        let doc = record::Document::new("heaplab.compare", provenance.clone(), records.to_vec());
        d.write(&(serde_json::to_string_pretty(&doc)? + "\n"))?;
    }
    if let Some(d) = csv {
        d.write(&record::to_csv(records))?;
    }
    if let Some(d) = report_dir {
        let page = report::html(records, command, &notes, &provenance.rows());
        let p = cli::write_report(d, &page)?;
        writeln!(out, "report: {}", p.display())?;
    }
    Ok(())
}

fn command_line() -> String {
    std::env::args()
        .map(|a| if a.contains(' ') { format!("'{a}'") } else { a })
        .collect::<Vec<_>>()
        .join(" ")
}

pub fn run(a: Args) -> Result<i32> {
    let jobs = a.jobs.map(|j| j as usize).unwrap_or_else(heaplab_compare::cores);
    if a.live {
        if !a.traces.is_empty() {
            bail!("--live runs a program, not traces: put the program after `--` (heaplab compare --live -- PROG ARGS)");
        }
        return run_live(&a, jobs);
    }
    let json = cli::dest("json", &a.json, &a.traces)?;
    let csv = cli::dest("csv", &a.csv, &a.traces)?;
    if json.as_ref().is_some_and(Dest::is_stdout) && csv.as_ref().is_some_and(Dest::is_stdout) {
        bail!("--json and --csv cannot both go to standard output");
    }
    if let Some(dir) = &a.merge {
        if !a.traces.is_empty() {
            bail!("--merge DIR takes its traces from the plan in DIR; give no traces");
        }
        return merge(&a, dir, json.as_ref(), csv.as_ref());
    }
    if a.traces.is_empty() {
        bail!("no traces given (heaplab compare TRACE.hltrace ...), or --live -- PROG ARGS to run a program");
    }
    if !a.program.is_empty() {
        bail!("a program after `--` needs --live");
    }
    let inputs = heaplab_plumb::input::prepare(&a.traces)?;
    let opts = measure::Options {
        repeat: a.repeat,
        jobs,
        instructions: !a.no_instructions,
        counter: Counter::parse(&a.counter)?,
        footprint: !a.no_footprint,
        keep_scratch: a.keep_scratch,
        state: Some(a.state.clone().unwrap_or_else(measure::default_state_dir)),
        resume: a.resume,
        threads: a.threads.clone(),
        wait: a.wait.clone(),
        time_mode: a.time_mode.clone(),
    };
    let tools = tools_with_timeout(a.timeout)?;
    if let Some(dir) = &a.plan {
        if inputs.paths != a.traces {
            bail!("--plan needs its traces as files (a plan's jobs read them by name, later), not pipes");
        }
        return plan(&tools, &a, &opts, dir);
    }
    let records = compare_traces(
        &tools,
        &inputs.paths,
        &a.allocators,
        &opts,
        json.as_ref(),
        csv.as_ref(),
        a.report.as_deref(),
        &command_line(),
    )?;
    let mut code = 0;
    let bad = records.iter().filter(|r| r.status != "ok").count();
    if bad > 0 {
        eprintln!(
            "heaplab compare: {bad} of {} cells did not run cleanly (see their rows)",
            records.len()
        );
        code = 1;
    }
    let mut cut: Vec<&str> =
        records.iter().filter(|r| r.truncated).map(|r| r.trace.as_str()).collect();
    cut.dedup();
    if !cut.is_empty() {
        eprintln!(
            "heaplab compare: {} of the traces stop early ({}): their figures cover only the events before the cut{}",
            cut.len(),
            cut.iter().map(|t| crate::human::escaped(t)).collect::<Vec<_>>().join(", "),
            if a.allow_truncated { " (accepted: --allow-truncated)" } else { "; pass --allow-truncated to accept them" }
        );
        if !a.allow_truncated {
            code = 1;
        }
    }
    Ok(code)
}

/// The plan's parameters: the study and what the outputs need.
#[derive(serde::Serialize, serde::Deserialize)]
struct PlanParams {
    study: Study,
    added: Vec<String>,
    command: String,
}

/// `--plan DIR`: the jobs written out, nothing run.
fn plan(tools: &Tools, a: &Args, opts: &measure::Options, dir: &Path) -> Result<i32> {
    let mut allocs = alloc::resolve(&a.allocators, tools)?;
    let added = alloc::add_baselines(&mut allocs, tools);
    let study = measure::study(tools, &a.traces, &allocs, opts)?;
    let jobs = study.jobs()?;
    let exe = std::fs::canonicalize(std::env::current_exe()?)?;
    let params = PlanParams { study, added, command: command_line() };
    let plan = Plan::new("compare", serde_json::to_value(&params)?, jobs, exe);
    plan.write(dir)?;
    let shared = plan.jobs.iter().filter(|j| !j.alone).count();
    let alone = plan.jobs.len() - shared;
    let d = heaplab_jobs::shell::quote(&std::fs::canonicalize(dir)?.display().to_string());
    println!("heaplab compare: {} jobs in {d}", plan.jobs.len());
    println!("  {shared} that may share a machine: {d}/jobs-shared.txt");
    println!("  {alone} that time something, one at a time on a quiet machine: {d}/jobs-alone.txt");
    println!("run them, e.g.:");
    println!(
        "  parallel -j\"$(nproc)\" < {d}/jobs-shared.txt && parallel -j1 < {d}/jobs-alone.txt"
    );
    println!("  (or --sshlogin HOSTS, or Slurm: {d}/slurm.sbatch; {d}/README.txt says how)");
    println!("then: heaplab compare --merge {d} [--json F --csv F --report DIR]");
    Ok(0)
}

/// `--merge DIR`: the records from the outcomes of a plan's jobs.
fn merge(a: &Args, dir: &Path, json: Option<&Dest>, csv: Option<&Dest>) -> Result<i32> {
    let plan = Plan::load(dir)?;
    if plan.study != "compare" {
        bail!(
            "{} holds a {} plan; merge it with heaplab {} --merge",
            dir.display(),
            plan.study,
            plan.study
        );
    }
    let params: PlanParams = serde_json::from_value(plan.params.clone())
        .with_context(|| format!("{}: the plan's parameters do not read", dir.display()))?;
    let store = Store::open(&Plan::results_dir(dir))?;
    let states = store.states(&plan.jobs);
    let records = jobs::merge(&params.study, &plan.jobs, &states, &|j| {
        format!("job {} ({}) has no outcome in {}", j.id, j.label, store.dir.display())
    });
    let mut missing = 0;
    for (j, s) in plan.jobs.iter().zip(&states) {
        let why = match s {
            JobState::Done(_) => continue,
            JobState::Missing => "missing: no outcome".to_string(),
            JobState::Failed(o) => {
                format!("failed on {}: {}", o.host, o.error.as_deref().unwrap_or(""))
            }
            JobState::Unreadable(e) => format!("unreadable: {e}"),
        };
        missing += 1;
        eprintln!("heaplab compare --merge: job {} ({}) {why}", j.id, j.label);
    }
    let hosts: std::collections::BTreeSet<String> = states
        .iter()
        .zip(&plan.jobs)
        .filter(|(_, j)| j.alone)
        .filter_map(|(s, _)| match s {
            JobState::Done(o) => Some(o.host.clone()),
            _ => None,
        })
        .collect();
    if hosts.len() > 1 {
        eprintln!(
            "heaplab compare --merge: the timing jobs ran on {} machines ({}): wall-time ratios compare runs made on different machines",
            hosts.len(),
            hosts.into_iter().collect::<Vec<_>>().join(", ")
        );
    }
    let allocs: Vec<_> = params.study.allocators.iter().map(AllocSpec::allocator).collect();
    output(&records, &allocs, &params.added, json, csv, a.report.as_deref(), &params.command)?;
    let bad = records.iter().filter(|r| r.status != "ok").count();
    if records.iter().any(|r| r.truncated) && !a.allow_truncated {
        eprintln!(
            "heaplab compare --merge: some traces stop early (rows marked TRUNCATED); pass --allow-truncated to accept them"
        );
        return Ok(1);
    }
    if missing > 0 || bad > 0 {
        eprintln!(
            "heaplab compare --merge: {missing} of {} jobs missing or failed; {bad} of {} cells not clean",
            plan.jobs.len(),
            records.len()
        );
        return Ok(1);
    }
    Ok(0)
}

fn run_live(a: &Args, jobs: usize) -> Result<i32> {
    let json = cli::dest("json", &a.json, &[])?;
    let csv = cli::dest("csv", &a.csv, &[])?;
    let tools = tools_with_timeout(a.timeout)?;
    let mut allocs = alloc::resolve(&a.allocators, &tools)?;
    alloc::add_baselines(&mut allocs, &tools);
    let mut env = Vec::new();
    for e in &a.env {
        let (k, v) =
            e.split_once('=').with_context(|| format!("--env {e:?}: expected VAR=VALUE"))?;
        env.push((k.to_string(), v.to_string()));
    }
    let opts = live::LiveOptions {
        repeat: a.repeat.max(1),
        jobs,
        instructions: !a.no_instructions,
        stdin: a.stdin.clone(),
        env,
        ignore_lines: a.ignore_lines.clone(),
        output_filter: a.output_filter.clone(),
    };
    let bar = Bar::new();
    let records = live::live(&tools, &a.program, &allocs, &opts, &bar)?;
    bar.0.finish_and_clear();
    let mut out = cli::text(cli::any_stdout(&[&json, &csv]));
    writeln!(out, "heaplab compare --live: {}\n", crate::human::escaped(&a.program.join(" ")))?;
    write!(out, "{}", live::table(&records))?;
    if let Some(d) = &json {
        let provenance = crate::cmd::memargs::provenance().with_allocators(&allocs);
        let doc = record::Document::new("heaplab.compare.live", provenance, records.clone());
        d.write(&(serde_json::to_string_pretty(&doc)? + "\n"))?;
    }
    if let Some(d) = &csv {
        let mut o = String::from("allocator,status,exit_code,wall_s,wall_ratio_glibc,cpu_s,cpu_ratio_glibc,peak_rss_bytes,rss_vs_glibc,stdout_matches_glibc,instructions,alloc_instructions,alloc_instr_share,instr_per_malloc,instr_per_free,instr_per_realloc,error\n");
        for r in &records {
            let f = |v: Option<f64>| v.map(|x| x.to_string()).unwrap_or_default();
            let u = |v: Option<u64>| v.map(|x| x.to_string()).unwrap_or_default();
            o.push_str(&format!(
                "{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},\"{}\"\n",
                r.allocator,
                r.status,
                r.exit_code.map(|c| c.to_string()).unwrap_or_default(),
                f(r.wall_s),
                f(r.wall_ratio_glibc),
                f(r.cpu_s),
                f(r.cpu_ratio_glibc),
                u(r.peak_rss_bytes),
                f(r.rss_vs_glibc),
                r.stdout_matches_glibc.map(|b| b.to_string()).unwrap_or_default(),
                u(r.instructions),
                u(r.alloc_instructions),
                f(r.alloc_instr_share),
                f(r.instr_per_malloc),
                f(r.instr_per_free),
                f(r.instr_per_realloc),
                r.error.clone().unwrap_or_default().replace('"', "\"\"")
            ));
        }
        d.write(&o)?;
    }
    if let Some(p) = &a.program_cost {
        let c = live::program_cost(&records)?;
        write(p, &serde_json::to_string_pretty(&c)?)?;
    }
    let bad = records.iter().filter(|r| r.status != "ok").count();
    if bad > 0 {
        eprintln!(
            "heaplab compare --live: {bad} of {} allocators did not run cleanly",
            records.len()
        );
        return Ok(1);
    }
    Ok(0)
}
