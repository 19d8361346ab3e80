//! `heaplab demo`: the main job on the bundled workloads. It records each
//! workload with `heaplab record`, reports what each asked of malloc, then
//! compares every allocator (heaplab's and the peers) on those traces and
//! writes the report (`heaplab compare`, `heaplab-compare`).

use crate::cmd::stats::profile_trace;
use crate::human;
use crate::workloads::{self, Workload};
use anyhow::{bail, Context, Result};
use indicatif::{ProgressBar, ProgressStyle};
use std::path::PathBuf;
use std::process::{Command, Stdio};

/// Record the bundled workloads (perl, make, python3, sqlite3 on generated
/// inputs), print what each asks of malloc, then compare every allocator on
/// those traces: instructions per malloc and free, wall time against glibc,
/// footprint against firstfit. Writes OUT/compare.json, OUT/compare.csv and
/// OUT/report/report.html.
#[derive(clap::Args)]
pub struct Args {
    /// Where traces, program output and reports go.
    #[arg(long, default_value = "out/demo")]
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
    /// Also write the profiles as JSON.
    #[arg(long, value_name = "FILE")]
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
    let exe = std::env::current_exe()?;
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
        let stdout = a.out.join(format!("{}.stdout", w.name));
        let mut cmd = Command::new(&exe);
        cmd.arg("record")
            .arg("-o")
            .arg(&trace)
            .arg("--stack-depth")
            .arg(a.stack_depth.to_string())
            .arg("--");
        cmd.args(&prep.argv).envs(prep.env.iter().cloned());
        cmd.stdout(std::fs::File::create(&stdout)?).stderr(Stdio::piped());
        if let Some(i) = &prep.stdin {
            cmd.stdin(std::fs::File::open(i)?);
        }
        let out = cmd.output().context("running heaplab record")?;
        pb.inc(1);
        if !out.status.success() {
            pb.finish_and_clear();
            bail!(
                "recording {} failed ({}):\n{}",
                w.name,
                out.status,
                String::from_utf8_lossy(&out.stderr)
            );
        }
        pb.set_message(format!("{}: profiling", w.name));
        // The program's own trace, not a wrapper's (see main_trace).
        let main = main_trace(&a.out, w.name)?;
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

    println!("heaplab demo: what each workload asks of malloc (traces in {})\n", a.out.display());
    println!(
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
    );
    for (w, p, size) in &rows {
        println!(
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
        );
    }
    println!("\nmost frequent size classes (R = 8 bytes): class bytes × share of allocations");
    for (w, p, _) in &rows {
        let top: Vec<String> = p
            .size_classes
            .iter()
            .take(6)
            .map(|c| format!("{}×{}", c.size, human::pct(c.share)))
            .collect();
        println!("{:<10} {}", w.name, top.join("  "));
    }
    println!("\nmore: target/release/heaplab stats {}/NAME.hltrace", a.out.display());
    if let Some(j) = &a.json {
        let profiles: Vec<_> = rows
            .iter()
            .map(|(w, p, _)| serde_json::json!({"workload": w.name, "profile": p}))
            .collect();
        std::fs::write(j, serde_json::to_string_pretty(&profiles)?)?;
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
    let tools = crate::cmd::compare::tools_with_timeout(a.timeout);
    let records = crate::cmd::compare::compare_traces(
        &tools,
        &traces,
        &a.allocators,
        &opts,
        Some(&a.out.join("compare.json")),
        Some(&a.out.join("compare.csv")),
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
    let tools = crate::cmd::compare::tools_with_timeout(timeout);
    let glibc = alloc::resolve(&["glibc".into()], &tools)?;
    let jobs = heaplab_compare::cores();
    let results = heaplab_compare::parallel(traces.len(), jobs, |i| -> Result<()> {
        let (main, prep) = &mains[i];
        let meta = heaplab_trace::TraceReader::open(main)
            .map_err(|e| anyhow::anyhow!("{e}"))?
            .meta()
            .clone();
        let mut argv: Vec<String> =
            meta.argv.iter().map(|a| String::from_utf8_lossy(a).into_owned()).collect();
        if let (Some(exe), false) = (&meta.executable, argv.is_empty()) {
            argv[0] = exe.clone();
        }
        let opts = live::LiveOptions {
            repeat: 1,
            jobs: 1,
            instructions: true,
            stdin: prep.stdin.clone(),
            env: prep.env.clone(),
        };
        let recs = live::live(&tools, &argv, &glibc, &opts, &heaplab_compare::NoProgress)?;
        if let Some(r) = recs.iter().find(|r| r.status != "ok") {
            bail!("{}: {}", argv.join(" "), r.error.clone().unwrap_or_default());
        }
        let cost = live::program_cost(&recs)?;
        std::fs::write(
            heaplab_compare::measure::ProgramCost::sidecar(&traces[i]),
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
/// (NAME.hltrace.PID[.N]). The one with the most bytes is the program's.
fn main_trace(out: &std::path::Path, name: &str) -> Result<PathBuf> {
    let prefix = format!("{name}.hltrace");
    let mut best: Option<(u64, PathBuf)> = None;
    for e in std::fs::read_dir(out)? {
        let e = e?;
        let f = e.file_name().to_string_lossy().to_string();
        if f == prefix || f.starts_with(&format!("{prefix}.")) {
            let len = e.metadata()?.len();
            let better = match &best {
                None => true,
                Some(b) => len > b.0,
            };
            if better {
                best = Some((len, e.path()));
            }
        }
    }
    best.map(|b| b.1).with_context(|| format!("no trace {prefix} in {}", out.display()))
}
