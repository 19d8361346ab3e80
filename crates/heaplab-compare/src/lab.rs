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
use crate::health::{self, Truncation};
use crate::replay::{self, Mode};
use crate::tools::Tools;
use crate::{parallel, Progress};
use anyhow::{anyhow, bail, Context, Result};
use heaplab_trace::rep::{text_to_trace, TextFormat};
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
    /// The file could be read (else `error` says why, and nothing ran).
    pub readable: bool,
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
    /// Where the file deviates from its format (read anyway, as mdriver reads it).
    pub notes: Vec<String>,
    /// The trace stops early: the figures cover only the events before the cut.
    pub truncated: bool,
    pub truncated_at_byte: Option<u64>,
    pub truncated_after_events: Option<u64>,
    pub truncation: Option<String>,
}

/// The classic score.
pub fn score(utilization: f64, throughput_ops: f64) -> f64 {
    UTIL_WEIGHT * utilization + (1.0 - UTIL_WEIGHT) * (throughput_ops / TARGET_OPS).min(1.0)
}

/// A file ready to replay.
#[derive(Debug, Clone)]
pub struct Prepared {
    /// The file itself, or the trace it was converted to.
    pub trace: PathBuf,
    /// Deviations from the text format (see `heaplab_trace::rep`).
    pub notes: Vec<String>,
    pub cut: Option<Truncation>,
}

/// A trace for `file`: itself (checked to be whole or cut short), or a
/// `.rep` / `.script` converted into `work` as its `index`-th file.
pub fn as_trace(file: &Path, work: &Path, index: usize) -> Result<Prepared> {
    let ext = file.extension().and_then(|e| e.to_str()).unwrap_or("");
    let format = match ext {
        "rep" => TextFormat::Rep,
        "script" => TextFormat::Script,
        _ => {
            let cut = health::check(file)?;
            return Ok(Prepared { trace: file.to_path_buf(), notes: Vec::new(), cut });
        }
    };
    let f = std::fs::File::open(file).with_context(|| format!("cannot read {}", file.display()))?;
    if !f.metadata().map(|m| m.is_file()).unwrap_or(false) {
        bail!("{}: not a regular file", file.display());
    }
    std::fs::create_dir_all(work)?;
    let out = work.join(format!("{index}.hltrace"));
    let sink = std::io::BufWriter::new(
        std::fs::File::create(&out).with_context(|| format!("writing {}", out.display()))?,
    );
    use std::os::unix::ffi::OsStrExt;
    let (sink, summary) = text_to_trace(
        std::io::BufReader::new(f),
        format,
        file.as_os_str().as_bytes(),
        sink,
        WriterOptions::default(),
    )
    .map_err(|e| anyhow!("{}: {e}", file.display()))?;
    sink.into_inner().map_err(|e| anyhow!("writing {}: {e}", out.display()))?;
    Ok(Prepared { trace: out, notes: summary.notes, cut: None })
}

/// Runs the lab over `files` × `allocs`. Every file gets its records: one
/// that cannot be read is marked (`readable: false`, `error`), and the others
/// are graded.
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
    let prepared: Vec<Result<Prepared, String>> = files
        .iter()
        .enumerate()
        .map(|(i, f)| as_trace(f, &work, i).map_err(|e| format!("{e:#}")))
        .collect();
    let cells: Vec<(usize, usize)> =
        (0..files.len()).flat_map(|f| (0..allocs.len()).map(move |a| (f, a))).collect();
    let mut recs: Vec<LabRecord> = cells
        .iter()
        .map(|&(f, a)| {
            let mut r = LabRecord {
                trace: files[f].display().to_string(),
                allocator: allocs[a].name.clone(),
                source: allocs[a].source.name().into(),
                readable: prepared[f].is_ok(),
                ..LabRecord::default()
            };
            match &prepared[f] {
                Err(e) => r.error = Some(e.clone()),
                Ok(p) => {
                    r.notes = p.notes.clone();
                    set_cut(&mut r, p.cut.as_ref());
                }
            }
            r
        })
        .collect();
    let runnable: Vec<usize> = (0..cells.len())
        .filter(|&i| allocs[cells[i].1].missing.is_none() && prepared[cells[i].0].is_ok())
        .collect();
    let trace = |f: usize| &prepared[f].as_ref().expect("runnable files are prepared").trace;
    progress.start((runnable.len() * (1 + repeat.max(1))) as u64);
    let checks = parallel(runnable.len(), jobs, |j| {
        let (f, a) = cells[runnable[j]];
        let r = replay::run(tools, &allocs[a], trace(f), Mode::Check, &["--max-problems", "3"]);
        progress.step(&format!("check {} {}", files[f].display(), allocs[a].name));
        r
    });
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
                    if !rec.truncated {
                        set_cut(rec, Truncation::from_replay(out).as_ref());
                    }
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
            if recs[i].correct && recs[i].ops.unwrap_or(0) > 0 {
                if let Ok(o) = replay::run(tools, &allocs[a], trace(f), Mode::Plain, &[]) {
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
        if !rec.readable {
            continue;
        }
        if rec.ops == Some(0) {
            // Nothing ran: no utilization, no throughput, and so no score.
            rec.correct = false;
            rec.utilization = None;
            rec.error = Some(match (&rec.truncation, rec.truncated_at_byte) {
                (Some(_), Some(at)) => {
                    format!("no operations before the trace's cut at byte {at}: no score")
                }
                _ => "no operations: nothing to grade, no score".into(),
            });
            continue;
        }
        let mut t = times[i].clone();
        t.sort_by(|x, y| x.total_cmp(y));
        if let (Some(mid), Some(ops)) = (t.get(t.len() / 2), rec.ops) {
            // A timed region too short for the clock gives no figure, not infinity.
            rec.throughput_ops = (*mid > 0.0).then(|| ops as f64 / mid);
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

fn set_cut(r: &mut LabRecord, cut: Option<&Truncation>) {
    if let Some(c) = cut {
        r.truncated = true;
        r.truncated_at_byte = Some(c.offset);
        r.truncated_after_events = Some(c.events_read);
        r.truncation = Some(c.message.clone());
    }
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
        let name = heaplab_trace::escape::terminal_str(&name);
        if !r.readable {
            s.push_str(&format!(
                "{:<28} {:<14} UNREADABLE: {}\n",
                name,
                r.allocator,
                r.error.as_deref().unwrap_or("")
            ));
            continue;
        }
        if let Some(e) = &r.error {
            if r.score.is_none() {
                s.push_str(&format!("{:<28} {:<14} ERROR: {e}\n", name, r.allocator));
                continue;
            }
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
                + if r.truncated {
                    "  TRUNCATED: the figures cover only the events before the cut"
                } else {
                    ""
                }
        ));
    }
    let mut allocs: Vec<&str> = Vec::new();
    for r in recs {
        if !allocs.contains(&r.allocator.as_str()) {
            allocs.push(&r.allocator);
        }
    }
    s.push_str("\nmean over the files with a score (score in points of 100):\n");
    for a in allocs {
        let all: Vec<&LabRecord> = recs.iter().filter(|r| r.allocator == a).collect();
        let rs: Vec<&LabRecord> = all.iter().copied().filter(|r| r.score.is_some()).collect();
        let n = rs.len().max(1) as f64;
        let correct = rs.iter().filter(|r| r.correct).count();
        let sc: f64 = rs.iter().map(|r| r.score.unwrap_or(0.0)).sum::<f64>() / n;
        let util: f64 = rs.iter().map(|r| r.utilization.unwrap_or(0.0)).sum::<f64>() / n;
        let unscored = all.len() - rs.len();
        s.push_str(&format!(
            "  {:<14} correct {}/{}  util {:.0}%  score {:.1}{}\n",
            a,
            correct,
            rs.len(),
            util * 100.0,
            sc * 100.0,
            if unscored > 0 {
                format!("  ({unscored} files without a score)")
            } else {
                String::new()
            }
        ));
    }
    let mut seen: Vec<&str> = Vec::new();
    for r in recs {
        if seen.contains(&r.trace.as_str()) {
            continue;
        }
        seen.push(&r.trace);
        let name = heaplab_trace::escape::terminal_str(&r.trace);
        for n in &r.notes {
            s.push_str(&format!("note: {name}: {n}\n"));
        }
        if let Some(t) = &r.truncation {
            s.push_str(&format!("! {}\n", heaplab_trace::escape::terminal_str(t)));
        }
    }
    s
}
