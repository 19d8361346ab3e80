//! `heaplab demo`: the main job on the bundled workloads. It records each
//! workload with `heaplab record`, reports what each asked of malloc, then
//! compares every allocator (heaplab's and the peers) on those traces and
//! writes the report (`heaplab compare`, `heaplab-compare`).

use crate::cli::{self, Dest};
use crate::cmd::stats::profile_trace;
use crate::human;
use crate::workloads::{self, Workload};
use anyhow::{bail, Context, Result};
use heaplab_plumb::record::{self, Outcome, Request, Settings};
use heaplab_plumb::{output, Layout};
use indicatif::{ProgressBar, ProgressStyle};
use std::io::Write;
use std::path::PathBuf;

/// Record the bundled workloads (perl, make, python3, sqlite3 on generated
/// inputs), print what each asks of malloc, then compare every allocator on
/// those traces: instructions per malloc and free, wall time against glibc,
/// footprint against firstfit. Writes OUT/compare.json, OUT/compare.csv and
/// OUT/report/report.html.
#[derive(clap::Args)]
pub struct Args {
    /// Where traces, program output and reports go.
    #[arg(
        short = 'o',
        long = "output",
        alias = "out",
        value_name = "DIR",
        default_value = "out/demo"
    )]
    out: PathBuf,
    /// Input size relative to the default (1.0; 0.25 with --quick).
    #[arg(long)]
    scale: Option<f64>,
    /// A shorter run: inputs at a quarter of the size, one timing run per cell.
    #[arg(long)]
    quick: bool,
    /// Only record and profile; compare no allocators.
    #[arg(long)]
    no_compare: bool,
    /// Allocators to compare (as in `heaplab compare`).
    #[arg(long, value_delimiter = ',', default_value = "all")]
    allocators: Vec<String>,
    /// Timing runs per (workload, allocator) (default 3; 1 with --quick).
    #[arg(long)]
    repeat: Option<usize>,
    /// Skip the callgrind runs (instruction counts).
    #[arg(long)]
    no_instructions: bool,
    /// Also run each program once under callgrind with glibc, so that the
    /// allocator's share is of the program's instructions (paper 002 Figure 5)
    /// rather than of the replay's (adds about a minute at scale 1).
    #[arg(long, conflicts_with = "no_instructions")]
    program_share: bool,
    /// Seconds a replay may run before its cell is marked failed (callgrind: ten times as long).
    #[arg(long, value_name = "SECS", default_value_t = 20)]
    timeout: u64,
    /// Comma-separated workloads (default: perl-wc,make-n,python,sqlite).
    #[arg(long, value_delimiter = ',')]
    workloads: Vec<String>,
    /// Call-stack depth to record.
    #[arg(long, default_value_t = 8)]
    stack_depth: u32,
    /// Also write the profiles as JSON to FILE (no FILE, or -: standard output,
    /// the tables then go to stderr).
    #[arg(long, value_name = "FILE", num_args = 0..=1, default_missing_value = "-")]
    json: Option<PathBuf>,
}

pub fn run(a: Args) -> Result<i32> {
    let chosen: Vec<Workload> = if a.workloads.is_empty() {
        workloads::defaults().to_vec()
    } else {
        a.workloads.iter().map(|n| workloads::find(n)).collect::<Result<_>>()?
    };
    let scale = a.scale.unwrap_or(if a.quick { 0.25 } else { 1.0 });
    std::fs::create_dir_all(&a.out).with_context(|| format!("creating {}", a.out.display()))?;
    let inputs = a.out.join("inputs");
    let json = cli::dest("json", &a.json, &[])?;
    let layout = Layout::get()?;
    let settings = Settings { stack_depth: a.stack_depth, ..Settings::default() };
    let pb = ProgressBar::new(chosen.len() as u64 * 2);
    pb.set_style(
        ProgressStyle::with_template("{bar:30} {pos}/{len} {msg}").expect("valid template"),
    );
    let mut rows = Vec::new();
    let mut mains = Vec::new();
    for w in &chosen {
        pb.set_message(format!("{}: preparing and recording", w.name));
        let prep = w.prepare(&inputs, 1, scale)?;
        let trace = a.out.join(format!("{}.hltrace", w.name));
        let stdout = output::OutputFile::create(&a.out.join(format!("{}.stdout", w.name)))?;
        let argv: Vec<std::ffi::OsString> = prep.argv.iter().map(Into::into).collect();
        let req = Request {
            output: &trace,
            settings: &settings,
            command: &argv,
            env: prep.env.iter().map(|(k, v)| (k.into(), v.into())).collect(),
            stdin: match &prep.stdin {
                Some(i) => Some(std::fs::File::open(i)?.into()),
                None => Some(std::process::Stdio::null()),
            },
            stdout: Some(stdout.try_clone()?.into()),
        };
        let rec = match record::record(layout, req)? {
            Outcome::Recorded(r) => r,
            Outcome::NotStarted { message, .. } => {
                pb.finish_and_clear();
                bail!("recording {}: {}: {message}", w.name, prep.argv[0]);
            }
        };
        stdout.commit()?;
        pb.inc(1);
        if rec.ended.code() != 0 {
            pb.finish_and_clear();
            bail!("recording {}: {} {}", w.name, prep.argv[0], rec.ended.describe());
        }
        pb.set_message(format!("{}: profiling", w.name));
        // The program's own trace, not a wrapper's (see main_trace).
        let main = main_trace(&rec.traces)?;
        let (p, _meta, err) = profile_trace(&main, 8, 16)?;
        if let Some(e) = err {
            bail!("{e}");
        }
        let size = std::fs::metadata(&main)?.len();
        pb.inc(1);
        rows.push((w, p, size));
        mains.push((main, prep));
    }
    pb.finish_and_clear();

    let mut out = cli::text(cli::any_stdout(&[&json]));
    let out = &mut out;
    writeln!(
        out,
        "heaplab demo: what each workload asks of malloc (traces in {})\n",
        a.out.display()
    )?;
    writeln!(
        out,
        "{:<10} {:>12} {:>12} {:>10} {:>10} {:>8} {:>8} {:>11} {:>9}",
        "workload",
        "events",
        "allocations",
        "reallocs",
        "peak live",
        "top-1",
        "top-4",
        "trace",
        "B/event"
    )?;
    for (w, p, size) in &rows {
        writeln!(
            out,
            "{:<10} {:>12} {:>12} {:>10} {:>10} {:>8} {:>8} {:>11} {:>9.2}",
            w.name,
            human::count(p.events),
            human::count(p.allocations),
            human::count(p.reallocs),
            human::bytes(p.peak_live_bytes),
            human::pct(p.top_coverage["1"]),
            human::pct(p.top_coverage["4"]),
            human::bytes(*size),
            *size as f64 / p.events.max(1) as f64
        )?;
    }
    writeln!(
        out,
        "\nmost frequent size classes (R = 8 bytes): class bytes × share of allocations"
    )?;
    for (w, p, _) in &rows {
        let top: Vec<String> = p
            .size_classes
            .iter()
            .take(6)
            .map(|c| format!("{}×{}", c.size, human::pct(c.share)))
            .collect();
        writeln!(out, "{:<10} {}", w.name, top.join("  "))?;
    }
    writeln!(out, "\nmore: heaplab stats {}/NAME.hltrace", a.out.display())?;
    if let Some(d) = &json {
        let profiles: Vec<_> = rows
            .iter()
            .map(|(w, p, _)| serde_json::json!({"workload": w.name, "profile": p}))
            .collect();
        d.write(&(serde_json::to_string_pretty(&profiles)? + "\n"))?;
    }
    if a.no_compare {
        return Ok(0);
    }

    // Compare every allocator on the traces just recorded.
    let dir = a.out.join("traces");
    std::fs::create_dir_all(&dir)?;
    let mut traces = Vec::new();
    for ((w, _, _), (main, _)) in rows.iter().zip(&mains) {
        let link = dir.join(format!("{}.hltrace", w.name));
        let _ = std::fs::remove_file(&link);
        let _ = std::fs::remove_file(heaplab_compare::measure::ProgramCost::sidecar(&link));
        std::os::unix::fs::symlink(std::fs::canonicalize(main)?, &link)
            .with_context(|| format!("linking {}", link.display()))?;
        traces.push(link);
    }
    if a.program_share {
        program_costs(&traces, &mains, a.timeout)?;
    }
    let repeat = a.repeat.unwrap_or(if a.quick { 1 } else { 3 });
    println!(
        "\nheaplab demo: every allocator on these traces ({} timing run{} per cell; instructions counted by heaplab's Valgrind tool)\n",
        repeat,
        if repeat == 1 { "" } else { "s" }
    );
    let opts = heaplab_compare::Options {
        repeat,
        jobs: heaplab_compare::cores(),
        instructions: !a.no_instructions,
        footprint: true,
        keep_scratch: false,
        state: Some(heaplab_compare::measure::default_state_dir()),
        ..heaplab_compare::Options::default()
    };
    let tools = crate::cmd::compare::tools_with_timeout(a.timeout)?;
    let records = crate::cmd::compare::compare_traces(
        &tools,
        &traces,
        &a.allocators,
        &opts,
        Some(&Dest::File(a.out.join("compare.json"))),
        Some(&Dest::File(a.out.join("compare.csv"))),
        Some(&a.out.join("report")),
        &format!("heaplab demo --scale {scale} --repeat {repeat}"),
    )?;
    println!(
        "records: {} and {}",
        a.out.join("compare.json").display(),
        a.out.join("compare.csv").display()
    );
    let bad: Vec<String> = records
        .iter()
        .filter(|r| r.status != "ok")
        .map(|r| format!("{}/{} ({})", r.trace_name, r.allocator, r.status))
        .collect();
    if !bad.is_empty() {
        println!("not measured in full: {}", bad.join(", "));
    }
    Ok(if records.iter().any(|r| r.status == "missing") { 1 } else { 0 })
}

/// Runs each workload's program (the executable its trace names, so not a
/// wrapper) once under callgrind with glibc, and writes the program cost
/// beside each trace (TRACE.program.json), which `compare` then uses.
fn program_costs(
    traces: &[PathBuf],
    mains: &[(PathBuf, workloads::Prepared)],
    timeout: u64,
) -> Result<()> {
    use heaplab_compare::{alloc, live};
    let tools = crate::cmd::compare::tools_with_timeout(timeout)?;
    let glibc = alloc::resolve(&["glibc".into()], &tools)?;
    let jobs = heaplab_compare::cores();
    let results = heaplab_compare::parallel(traces.len(), jobs, |i| -> Result<()> {
        let (main, prep) = &mains[i];
        let meta = heaplab_trace::TraceReader::open(main)?.meta().clone();
        let mut argv: Vec<String> =
            meta.argv.iter().map(|a| String::from_utf8_lossy(a).into_owned()).collect();
        if let (Some(exe), false) = (&meta.executable, argv.is_empty()) {
            argv[0] = String::from_utf8_lossy(exe).into_owned();
        }
        let opts = live::LiveOptions {
            repeat: 1,
            jobs: 1,
            instructions: true,
            stdin: prep.stdin.clone(),
            env: prep.env.clone(),
            ..live::LiveOptions::default()
        };
        let recs = live::live(&tools, &argv, &glibc, &opts, &heaplab_compare::NoProgress)?;
        if let Some(r) = recs.iter().find(|r| r.status != "ok") {
            bail!("{}: {}", argv.join(" "), r.error.clone().unwrap_or_default());
        }
        let cost = live::program_cost(&recs)?;
        output::write(
            &heaplab_compare::measure::ProgramCost::sidecar(&traces[i]),
            serde_json::to_string_pretty(&cost)?,
        )?;
        Ok(())
    });
    println!("\nprogram instructions (callgrind, glibc) measured for the allocator's share");
    results.into_iter().collect()
}

/// The trace of the workload's program itself: `heaplab record` writes one
/// trace per process, and a workload started through a wrapper (env, a
/// shell, pyenv's shim) leaves the program's trace under a child's name
/// (NAME.hltrace.PID[.N]). Of the traces this recording wrote, the one with
/// the most bytes is the program's.
fn main_trace(traces: &[PathBuf]) -> Result<PathBuf> {
    let mut best: Option<(u64, PathBuf)> = None;
    for t in traces {
        let len = std::fs::metadata(t)?.len();
        if best.as_ref().is_none_or(|b| len > b.0) {
            best = Some((len, t.clone()));
        }
    }
    best.map(|b| b.1).context("the recording wrote no trace (a static or setuid program?)")
}
