//! `heaplab lab`: the allocator-course driver (the CS:APP malloc lab's, on
//! heaplab's replayer). For each `.rep`, `.script` or trace and each
//! allocator:
//!
//! - correct: a check-mode replay finds no problem (no overlap, no damaged
//!   payload, every block aligned, calloc zeroed, no crash, no NULL where the
//!   trace succeeded);
//! - utilization: the peak of live payload over the peak footprint (exact for
//!   heaplab's allocators; peak RSS growth in check mode, where every byte of
//!   every object is written, for the others);
//! - throughput: operations per second of the plain replay (median of the
//!   repeats, the decoding excluded);
//! - score: 0.6 × utilization + 0.4 × min(1, throughput / 600K ops/s), and 0
//!   when the allocator is not correct on that file, as the course driver
//!   gives no credit for a wrong trace.

use crate::alloc::{Allocator, Source};
use crate::replay::{self, Mode};
use crate::tools::Tools;
use crate::{parallel, Progress};
use anyhow::{anyhow, bail, Context, Result};
use heaplab_trace::rep::{ops_to_trace, parse, TextFormat};
use heaplab_trace::WriterOptions;
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

/// The throughput that earns full marks (the classic driver's 600K ops/s).
pub const TARGET_OPS: f64 = 600_000.0;
/// Weight of utilization in the score (the rest is throughput's).
pub const UTIL_WEIGHT: f64 = 0.6;

/// One (file, allocator) result.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct LabRecord {
    pub trace: String,
    pub allocator: String,
    pub source: String,
    pub correct: bool,
    pub problems: u64,
    pub problem: Option<String>,
    pub ops: Option<u64>,
    pub peak_live_bytes: Option<u64>,
    pub peak_footprint_bytes: Option<u64>,
    pub footprint_source: Option<String>,
    pub utilization: Option<f64>,
    pub throughput_ops: Option<f64>,
    pub score: Option<f64>,
    pub error: Option<String>,
}

/// The classic score.
pub fn score(utilization: f64, throughput_ops: f64) -> f64 {
    UTIL_WEIGHT * utilization + (1.0 - UTIL_WEIGHT) * (throughput_ops / TARGET_OPS).min(1.0)
}

/// A trace for `file`: itself, or `.rep` / `.script` converted into `work`.
pub fn as_trace(file: &Path, work: &Path) -> Result<PathBuf> {
    let ext = file.extension().and_then(|e| e.to_str()).unwrap_or("");
    let format = match ext {
        "rep" => TextFormat::Rep,
        "script" => TextFormat::Script,
        _ => {
            crate::measure::validate(file)?;
            return Ok(file.to_path_buf());
        }
    };
    let text =
        std::fs::read_to_string(file).with_context(|| format!("reading {}", file.display()))?;
    let ops = parse(&text, format).map_err(|e| anyhow!("{}: {e}", file.display()))?;
    let bytes =
        ops_to_trace(&ops, &file.display().to_string(), Vec::new(), WriterOptions::default())
            .map_err(|e| anyhow!("{}: {e}", file.display()))?;
    std::fs::create_dir_all(work)?;
    let stem = file.file_name().unwrap_or_default().to_string_lossy().to_string();
    let out = work.join(format!("{stem}.hltrace"));
    std::fs::write(&out, bytes).with_context(|| format!("writing {}", out.display()))?;
    Ok(out)
}

/// Runs the lab over `files` × `allocs`.
pub fn lab(
    tools: &Tools,
    files: &[PathBuf],
    allocs: &[Allocator],
    repeat: usize,
    jobs: usize,
    progress: &dyn Progress,
) -> Result<Vec<LabRecord>> {
    tools.check_replay()?;
    if files.is_empty() {
        bail!("no files given: heaplab lab FILE.rep|FILE.script|FILE.hltrace ...");
    }
    let work = tools.work_dir.join("lab");
    let traces: Vec<PathBuf> = files.iter().map(|f| as_trace(f, &work)).collect::<Result<_>>()?;
    let cells: Vec<(usize, usize)> =
        (0..files.len()).flat_map(|f| (0..allocs.len()).map(move |a| (f, a))).collect();
    let runnable: Vec<usize> =
        (0..cells.len()).filter(|&i| allocs[cells[i].1].missing.is_none()).collect();
    progress.start((runnable.len() * (1 + repeat.max(1))) as u64);
    let checks = parallel(runnable.len(), jobs, |j| {
        let (f, a) = cells[runnable[j]];
        let r = replay::run(tools, &allocs[a], &traces[f], Mode::Check, &["--max-problems", "3"]);
        progress.step(&format!("check {} {}", files[f].display(), allocs[a].name));
        r
    });
    let mut recs: Vec<LabRecord> = cells
        .iter()
        .map(|&(f, a)| LabRecord {
            trace: files[f].display().to_string(),
            allocator: allocs[a].name.clone(),
            source: allocs[a].source.name().into(),
            ..LabRecord::default()
        })
        .collect();
    for (&i, r) in runnable.iter().zip(checks) {
        let (_, a) = cells[i];
        let rec = &mut recs[i];
        match r {
            Err(e) => rec.error = Some(format!("{e:#}")),
            Ok(o) => {
                if let Some(out) = &o.out {
                    rec.ops = Some(out.events);
                    rec.peak_live_bytes = Some(out.peak_live_bytes);
                    rec.problems = out.check.as_ref().map(|c| c.problems).unwrap_or(0);
                    rec.problem = out.check.as_ref().and_then(|c| c.reported.first().cloned());
                    let (fp, src) = match (&out.footprint, allocs[a].source) {
                        (Some(f), Source::Heaplab) => (f.peak_bytes, "heaplab_alloc_stats"),
                        _ => (out.rss.growth_bytes, "rss_check"),
                    };
                    rec.peak_footprint_bytes = Some(fp);
                    rec.footprint_source = Some(src.into());
                    rec.utilization =
                        (fp > 0).then(|| (out.peak_live_bytes as f64 / fp as f64).min(1.0));
                }
                match o.failure() {
                    None => rec.correct = rec.problems == 0,
                    Some(f) => {
                        rec.correct = false;
                        if rec.problem.is_none() {
                            rec.problem = Some(f);
                        }
                        if rec.problems == 0 {
                            rec.problems = 1;
                        }
                    }
                }
            }
        }
    }
    let mut times: Vec<Vec<f64>> = vec![Vec::new(); cells.len()];
    for _ in 0..repeat.max(1) {
        for &i in &runnable {
            let (f, a) = cells[i];
            if recs[i].correct {
                if let Ok(o) = replay::run(tools, &allocs[a], &traces[f], Mode::Plain, &[]) {
                    if let (None, Some(out)) = (o.failure(), &o.out) {
                        times[i].push(out.timed_ns as f64 / 1e9);
                    }
                }
            }
            progress.step("time");
        }
    }
    for (i, rec) in recs.iter_mut().enumerate() {
        let (_, a) = cells[i];
        if let Some(m) = &allocs[a].missing {
            rec.error = Some(m.clone());
            continue;
        }
        let mut t = times[i].clone();
        t.sort_by(|x, y| x.total_cmp(y));
        if let (Some(mid), Some(ops)) = (t.get(t.len() / 2), rec.ops) {
            rec.throughput_ops =
                Some(if *mid > 0.0 { ops as f64 / mid } else { f64::INFINITY }.min(1e12));
        }
        rec.score = if rec.correct {
            rec.utilization.zip(rec.throughput_ops).map(|(u, t)| score(u, t))
        } else {
            Some(0.0)
        };
    }
    let _ = std::fs::remove_dir_all(&work);
    tools.clean();
    Ok(recs)
}

/// The terminal table, with each allocator's mean over the files at the end.
pub fn table(recs: &[LabRecord]) -> String {
    let mut s = format!(
        "{:<28} {:<14} {:>7} {:>6} {:>12} {:>6}\n",
        "trace", "allocator", "correct", "util", "Kops/s", "score"
    );
    for r in recs {
        let name = Path::new(&r.trace)
            .file_name()
            .map(|f| f.to_string_lossy().to_string())
            .unwrap_or_default();
        if let (Some(e), None) = (&r.error, r.ops) {
            s.push_str(&format!("{:<28} {:<14} ERROR: {e}\n", name, r.allocator));
            continue;
        }
        s.push_str(&format!(
            "{:<28} {:<14} {:>7} {:>6} {:>12} {:>6}{}\n",
            name,
            r.allocator,
            if r.correct { "yes" } else { "NO" },
            r.utilization.map(|u| format!("{:.0}%", u * 100.0)).unwrap_or("—".into()),
            r.throughput_ops.map(|t| format!("{:.0}", t / 1e3)).unwrap_or("—".into()),
            r.score.map(|x| format!("{:.1}", x * 100.0)).unwrap_or("—".into()),
            r.problem.as_ref().filter(|_| !r.correct).map(|p| format!("  {p}")).unwrap_or_default()
        ));
    }
    let mut allocs: Vec<&str> = Vec::new();
    for r in recs {
        if !allocs.contains(&r.allocator.as_str()) {
            allocs.push(&r.allocator);
        }
    }
    s.push_str("\nmean over the files (score in points of 100):\n");
    for a in allocs {
        let rs: Vec<&LabRecord> = recs.iter().filter(|r| r.allocator == a).collect();
        let n = rs.len() as f64;
        let correct = rs.iter().filter(|r| r.correct).count();
        let sc: f64 = rs.iter().map(|r| r.score.unwrap_or(0.0)).sum::<f64>() / n;
        let util: f64 = rs.iter().map(|r| r.utilization.unwrap_or(0.0)).sum::<f64>() / n;
        s.push_str(&format!(
            "  {:<14} correct {}/{}  util {:.0}%  score {:.1}\n",
            a,
            correct,
            rs.len(),
            util * 100.0,
            sc * 100.0
        ));
    }
    s
}
