//! `heaplab compare`: what each allocator costs on recorded traces (or, with
//! `--live`, on the real program). The work is in `heaplab-compare`; this
//! module parses flags, shows progress and writes the outputs.

use crate::cli::{self, Dest};
use anyhow::{bail, Context, Result};
use heaplab_compare::{alloc, live, measure, record, report, Progress, Tools};
use indicatif::{ProgressBar, ProgressStyle};
use std::io::Write;
use std::path::{Path, PathBuf};

/// What `heaplab compare --help` says (main.rs passes it as long_about).
pub const LONG_ABOUT: &str = r#"Compare allocators on recorded traces: instructions per malloc and per
free (callgrind), the allocator's share of instructions, wall time against
glibc, peak footprint (also normalized to firstfit), utilization and
internal fragmentation. One process per (trace, allocator), the allocator
loaded with LD_PRELOAD; independent replays run in parallel, timing runs
one at a time. glibc and firstfit are always measured, as the baselines of
the ratios.

With --live, runs the real program under each allocator instead: wall
time, peak RSS, instructions, and whether stdout is identical to glibc's.

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

--json [FILE] and --csv [FILE] write to FILE, or with no FILE (or -) to
standard output; the table then goes to stderr.
  heaplab compare --live --allocators peers,bsd -- perl wc.pl input.txt"#;

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
    /// Skip the callgrind runs (instruction counts), which are the slow part.
    #[arg(long)]
    no_instructions: bool,
    /// Skip the touch-mode runs (footprint, utilization, fragmentation).
    #[arg(long)]
    no_footprint: bool,
    /// Accept traces that stop early (no END block, or a torn last block):
    /// their rows are still marked truncated, but the exit status is 0.
    #[arg(long)]
    allow_truncated: bool,
    /// Keep callgrind's output files and the decoded traces (in the work
    /// directory, named on stderr).
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
    let bar = Bar::new();
    if opts.keep_scratch {
        tools.keep_scratch();
        eprintln!("heaplab compare: scratch files in {}", tools.work_dir.display());
    }
    let records = measure::compare(tools, traces, &allocs, opts, &bar)?;
    bar.0.finish_and_clear();
    let mut out = cli::text(json.is_some_and(Dest::is_stdout) || csv.is_some_and(Dest::is_stdout));
    write!(out, "{}", record::table(&records))?;
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
    if let Some(d) = json {
        d.write(&(serde_json::to_string_pretty(&records)? + "\n"))?;
    }
    if let Some(d) = csv {
        d.write(&record::to_csv(&records))?;
    }
    if let Some(d) = report_dir {
        let page = report::html(&records, command, &notes);
        let p = cli::write_report(d, &page)?;
        writeln!(out, "report: {}", p.display())?;
    }
    Ok(records)
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
    if a.traces.is_empty() {
        bail!("no traces given (heaplab compare TRACE.hltrace ...), or --live -- PROG ARGS to run a program");
    }
    if !a.program.is_empty() {
        bail!("a program after `--` needs --live");
    }
    let json = cli::dest("json", &a.json, &a.traces)?;
    let csv = cli::dest("csv", &a.csv, &a.traces)?;
    if json.as_ref().is_some_and(Dest::is_stdout) && csv.as_ref().is_some_and(Dest::is_stdout) {
        bail!("--json and --csv cannot both go to standard output");
    }
    let inputs = heaplab_plumb::input::prepare(&a.traces)?;
    let opts = measure::Options {
        repeat: a.repeat,
        jobs,
        instructions: !a.no_instructions,
        footprint: !a.no_footprint,
        keep_scratch: a.keep_scratch,
    };
    let records = compare_traces(
        &tools_with_timeout(a.timeout)?,
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
    };
    let bar = Bar::new();
    let records = live::live(&tools, &a.program, &allocs, &opts, &bar)?;
    bar.0.finish_and_clear();
    let mut out = cli::text(cli::any_stdout(&[&json, &csv]));
    writeln!(out, "heaplab compare --live: {}\n", crate::human::escaped(&a.program.join(" ")))?;
    write!(out, "{}", live::table(&records))?;
    if let Some(d) = &json {
        d.write(&(serde_json::to_string_pretty(&records)? + "\n"))?;
    }
    if let Some(d) = &csv {
        let mut o = String::from("allocator,status,exit_code,wall_s,wall_ratio_glibc,peak_rss_bytes,rss_vs_glibc,stdout_matches_glibc,instructions,alloc_instructions,alloc_instr_share,instr_per_malloc,instr_per_free,instr_per_realloc,error\n");
        for r in &records {
            let f = |v: Option<f64>| v.map(|x| x.to_string()).unwrap_or_default();
            let u = |v: Option<u64>| v.map(|x| x.to_string()).unwrap_or_default();
            o.push_str(&format!(
                "{},{},{},{},{},{},{},{},{},{},{},{},{},{},\"{}\"\n",
                r.allocator,
                r.status,
                r.exit_code.map(|c| c.to_string()).unwrap_or_default(),
                f(r.wall_s),
                f(r.wall_ratio_glibc),
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
