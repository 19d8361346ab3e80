//! `heaplab demo`: the main job on the bundled workloads. It records each
//! workload with `heaplab record`, then reports what each asked of malloc.

use crate::cmd::stats::profile_trace;
use crate::human;
use crate::workloads::{self, Workload};
use anyhow::{bail, Context, Result};
use indicatif::{ProgressBar, ProgressStyle};
use std::path::PathBuf;
use std::process::{Command, Stdio};

/// Record the bundled workloads (perl, make, python3, sqlite3 on generated
/// inputs) and print what each asks of malloc.
#[derive(clap::Args)]
pub struct Args {
    /// Where traces, program output and reports go.
    #[arg(long, default_value = "out/demo")]
    out: PathBuf,
    /// Input size relative to the default (1.0).
    #[arg(long, default_value_t = 1.0)]
    scale: f64,
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
    std::fs::create_dir_all(&a.out).with_context(|| format!("creating {}", a.out.display()))?;
    let inputs = a.out.join("inputs");
    let exe = std::env::current_exe()?;
    let pb = ProgressBar::new(chosen.len() as u64 * 2);
    pb.set_style(ProgressStyle::with_template("{bar:30} {pos}/{len} {msg}").expect("valid template"));
    let mut rows = Vec::new();
    for w in &chosen {
        pb.set_message(format!("{}: preparing and recording", w.name));
        let prep = w.prepare(&inputs, 1, a.scale)?;
        let trace = a.out.join(format!("{}.hltrace", w.name));
        let stdout = a.out.join(format!("{}.stdout", w.name));
        let mut cmd = Command::new(&exe);
        cmd.arg("record").arg("-o").arg(&trace).arg("--stack-depth").arg(a.stack_depth.to_string()).arg("--");
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
        let (p, _meta, err) = profile_trace(&trace, 8, 16)?;
        if let Some(e) = err {
            bail!("{e}");
        }
        let size = std::fs::metadata(&trace)?.len();
        pb.inc(1);
        rows.push((w, p, size));
    }
    pb.finish_and_clear();

    println!("heaplab demo: what each workload asks of malloc (traces in {})\n", a.out.display());
    println!(
        "{:<10} {:>12} {:>12} {:>10} {:>10} {:>8} {:>8} {:>11} {:>9}",
        "workload", "events", "allocations", "reallocs", "peak live", "top-1", "top-4", "trace", "B/event"
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
        let top: Vec<String> =
            p.size_classes.iter().take(6).map(|c| format!("{}×{}", c.size, human::pct(c.share))).collect();
        println!("{:<10} {}", w.name, top.join("  "));
    }
    println!("\nmore: target/release/heaplab stats {}/NAME.hltrace", a.out.display());
    if let Some(j) = &a.json {
        let profiles: Vec<_> = rows.iter().map(|(w, p, _)| serde_json::json!({"workload": w.name, "profile": p})).collect();
        std::fs::write(j, serde_json::to_string_pretty(&profiles)?)?;
    }
    Ok(0)
}
