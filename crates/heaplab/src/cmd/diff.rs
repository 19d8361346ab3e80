//! `heaplab diff A B`: where the memory goes, before and after a change,
//! site by site (heaplab-memory's diff).

use crate::cli;
use crate::cmd::memargs::{self, MemArgs};
use crate::human;
use anyhow::Result;
use heaplab_memory::{analyze, diff, report};
use std::io::Write;
use std::path::PathBuf;

/// Compare two runs (before and after a change) call site by call site:
/// allocation calls, bytes at the peak, bytes leaked and temporary
/// allocations, each run's figure and the change. Sites are matched by
/// their functions (outermost first), not by addresses or lines, so the
/// runs may come from different builds.
///
/// Examples:
///   heaplab diff before.hltrace after.hltrace
///   heaplab diff before.hltrace after.hltrace --report out/diff   (differential flame graphs)
///   heaplab diff before.hltrace after.hltrace --json d.json --csv d.csv
#[derive(clap::Args)]
#[command(verbatim_doc_comment)]
pub struct Args {
    /// The first run (before).
    before: PathBuf,
    /// The second run (after).
    after: PathBuf,
    /// Sites to list.
    #[arg(long, default_value_t = 20)]
    rows: usize,
    /// Write the comparison as JSON to FILE (no FILE, or -: standard output).
    #[arg(long, value_name = "FILE", num_args = 0..=1, default_missing_value = "-")]
    json: Option<PathBuf>,
    /// Write the comparison as CSV to FILE (no FILE, or -: standard output).
    #[arg(long, value_name = "FILE", num_args = 0..=1, default_missing_value = "-")]
    csv: Option<PathBuf>,
    /// Write DIR/report.html with the table and differential flame graphs.
    #[arg(long, value_name = "DIR")]
    report: Option<PathBuf>,
    #[command(flatten)]
    mem: MemArgs,
}

pub fn run(a: Args) -> Result<i32> {
    let ins = [a.before.clone(), a.after.clone()];
    let json = cli::dest("json", &a.json, &ins)?;
    let csv = cli::dest("csv", &a.csv, &ins)?;
    if cli::any_stdout(&[&json]) && cli::any_stdout(&[&csv]) {
        anyhow::bail!("--json and --csv cannot both go to standard output");
    }
    let inputs = heaplab_plumb::input::prepare(&ins)?;
    let opts = a.mem.options()?;
    let mut sym = a.mem.symbolizer();
    let mut code = 0;
    let mut runs = Vec::new();
    for (t, p) in ins.iter().zip(&inputs.paths) {
        let mut an = analyze::analyze(p, &opts, &mut sym, |_| {})?;
        an.trace = t.display().to_string();
        if let Some(e) = &an.error {
            eprintln!("heaplab diff: {}", human::escaped(e));
            code = 1;
        }
        runs.push(an);
    }
    let d = diff::diff(&runs[0], &runs[1], &mut sym);
    if let Some(dest) = &json {
        let mut v = serde_json::to_value(&d)?;
        if let serde_json::Value::Object(o) = &mut v {
            o.insert("schema_version".into(), 1.into());
            o.insert("provenance".into(), serde_json::to_value(memargs::provenance())?);
        }
        dest.write(&(serde_json::to_string_pretty(&v)? + "\n"))?;
    }
    if let Some(dest) = &csv {
        let mut o = String::from("site,stack,allocs_before,allocs_after,peak_bytes_before,peak_bytes_after,leaked_bytes_before,leaked_bytes_after,temporary_before,temporary_after\n");
        let q = |s: &str| format!("\"{}\"", s.replace('"', "\"\""));
        for r in &d.rows {
            o.push_str(&format!(
                "{},{},{},{},{},{},{},{},{},{}\n",
                q(&r.name),
                q(&r.stack),
                r.before.allocs,
                r.after.allocs,
                r.before.peak_bytes,
                r.after.peak_bytes,
                r.before.leaked_bytes,
                r.after.leaked_bytes,
                r.before.temporary,
                r.after.temporary
            ));
        }
        dest.write(&o)?;
    }
    if let Some(dir) = &a.report {
        let page =
            report::diff_page(&d, &runs[0], &runs[1], &mut sym, &memargs::provenance().rows());
        let p = cli::write_report(dir, &page)?;
        eprintln!("report: {}", p.display());
    }
    if !cli::any_stdout(&[&json, &csv]) {
        let mut out = std::io::stdout().lock();
        let t = report::diff_table(&d, a.rows);
        // site names come from the traces and the binaries: escaped
        write!(out, "{}", human::escaped(&t.to_text()))?;
    }
    Ok(code)
}
