//! `heaplab stats`: the CUSTOMALLOC measurement table (paper 002 §2.1) of one
//! trace, or of several runs merged into one profile.

use crate::cli;
use crate::human;
use crate::symbols::Symbolizer;
use anyhow::Result;
use clap::ValueEnum;
use heaplab_trace::profile::{Profile, ProfileBuilder, Weighting};
use heaplab_trace::{Meta, TraceReader};
use std::io::Write;
use std::path::{Path, PathBuf};

/// Print the allocation profile of a recorded program: size classes in
/// allocation units, live objects and free-list lengths per class, lifetimes
/// and the top allocation sites. Several traces are merged into one profile.
#[derive(clap::Args)]
#[command(after_help = "\
Columns, per size class (a request for B bytes is in class R*ceil(B/R)):
  allocs, frees     calls, a realloc counting as a free and an allocation
  max live, mean    objects of the class in use; the mean is sampled at each
                    allocation of the class
  mean free list    objects of the class freed and not yet reused, sampled at
                    each allocation of the class (the paper's mean free-list length)

Exit status: 0; 1 when a trace could not be read to its end (the table then
covers what was readable, and the error names the file, byte offset and the
events read before it).")]
pub struct Args {
    /// Trace files (.hltrace); several are merged into one profile.
    #[arg(required = true, value_name = "TRACE")]
    traces: Vec<PathBuf>,
    /// Allocation unit R in bytes (8, 16 or 32 in the paper; any power of two).
    #[arg(long, default_value_t = 8, value_parser = parse_unit)]
    unit: u64,
    /// Write the profile as JSON to FILE (no FILE, or -: standard output,
    /// instead of the table).
    #[arg(long, value_name = "FILE", num_args = 0..=1, default_missing_value = "-")]
    json: Option<PathBuf>,
    /// Also write the size-class table as CSV to FILE (no FILE, or -: standard output).
    #[arg(long, value_name = "FILE", num_args = 0..=1, default_missing_value = "-")]
    csv: Option<PathBuf>,
    /// How merged runs count: each run equally, or each allocation equally.
    #[arg(long, value_enum, default_value_t = WeightArg::Runs)]
    weighting: WeightArg,
    /// Size classes to show in the table (the JSON has them all).
    #[arg(long, default_value_t = 16)]
    classes: usize,
    /// Allocation sites to list.
    #[arg(long, default_value_t = 10)]
    sites: usize,
}

#[derive(Clone, Copy, ValueEnum)]
enum WeightArg {
    Runs,
    Allocations,
}

fn parse_unit(s: &str) -> Result<u64, String> {
    match s.parse::<u64>() {
        Ok(v) if v.is_power_of_two() && v <= 4096 => Ok(v),
        _ => Err(format!("{s:?} is not a unit; use a power of two such as 8, 16 or 32")),
    }
}

/// Reads one trace into a profile. On a read error the profile covers the
/// events before it, and the error comes back beside it.
pub fn profile_trace(
    path: &Path,
    unit: u64,
    max_sites: usize,
) -> Result<(Profile, Meta, Option<String>)> {
    let mut r = TraceReader::open(path)?;
    let mut b = ProfileBuilder::new(unit, r.meta().time_unit_ns);
    let err = loop {
        match r.next_event() {
            Ok(Some(e)) => b.add(&e),
            Ok(None) => break None,
            Err(e) => break Some(e.to_string()),
        }
    };
    let p = b.finish(
        &path.display().to_string(),
        |s| r.stack(s).to_vec(),
        |m| r.module(m).map(|m| String::from_utf8_lossy(&m.path).into_owned()).unwrap_or_default(),
        max_sites,
    );
    Ok((p, r.meta().clone(), err))
}

pub fn run(a: Args) -> Result<i32> {
    let json = cli::dest("json", &a.json, &a.traces)?;
    let csv = cli::dest("csv", &a.csv, &a.traces)?;
    if cli::any_stdout(&[&json]) && cli::any_stdout(&[&csv]) {
        anyhow::bail!("--json and --csv cannot both go to standard output");
    }
    let inputs = heaplab_plumb::input::prepare(&a.traces)?;
    let mut profiles = Vec::new();
    let mut code = 0;
    let mut headers = Vec::new();
    for (t, path) in a.traces.iter().zip(&inputs.paths) {
        let (p, m, err) = profile_trace(path, a.unit, a.sites.max(64))?;
        if let Some(e) = err {
            eprintln!("heaplab stats: {e}");
            eprintln!(
                "heaplab stats: the profile covers the {} events read before that point",
                human::count(p.events)
            );
            code = 1;
        }
        headers.push(format!(
            "{}: {} (pid {})",
            human::escaped(&t.display().to_string()),
            m.argv.iter().map(|a| heaplab_trace::escape::terminal(a)).collect::<Vec<_>>().join(" "),
            m.pid
        ));
        profiles.push(p);
    }
    let weighting = match a.weighting {
        WeightArg::Runs => Weighting::Runs,
        WeightArg::Allocations => Weighting::Allocations,
    };
    let p = if profiles.len() == 1 {
        profiles.pop().expect("one")
    } else {
        Profile::merge(&profiles, weighting, a.sites.max(64)).map_err(anyhow::Error::msg)?
    };
    if !p.saturated.is_empty() {
        eprintln!(
            "heaplab stats: {} reached 2^64-1 and stopped there: the true values are larger",
            p.saturated.join(", ")
        );
    }
    if let Some(d) = &csv {
        let mut v = Vec::new();
        write_csv(&p, &mut v)?;
        d.write(&String::from_utf8_lossy(&v))?;
    }
    if let Some(d) = &json {
        d.write(&(serde_json::to_string_pretty(&p)? + "\n"))?;
    }
    if !cli::any_stdout(&[&json, &csv]) {
        let stdout = std::io::stdout();
        let mut out = stdout.lock();
        print_table(&mut out, &p, &headers, a.classes, a.sites)?;
    }
    Ok(code)
}

fn write_csv(p: &Profile, f: &mut impl Write) -> Result<()> {
    writeln!(f, "size,allocs,share,frees,max_live,mean_live,mean_free_list,bytes")?;
    for c in &p.size_classes {
        writeln!(
            f,
            "{},{},{:.6},{},{},{:.3},{:.3},{}",
            c.size, c.allocs, c.share, c.frees, c.max_live, c.mean_live, c.mean_free_list, c.bytes
        )?;
    }
    Ok(())
}

fn print_table(
    out: &mut impl Write,
    p: &Profile,
    headers: &[String],
    classes: usize,
    sites: usize,
) -> Result<()> {
    for h in headers {
        writeln!(out, "{h}")?;
    }
    if p.runs > 1 {
        let w = match p.weighting {
            Weighting::Runs => "each run weighs the same",
            Weighting::Allocations => "each allocation weighs the same",
        };
        writeln!(out, "{} runs merged; {w}", p.runs)?;
    }
    writeln!(
        out,
        "events {}   allocations {}   frees {}   reallocs {}   failed {}   threads {}   duration {}",
        human::count(p.events),
        human::count(p.allocations),
        human::count(p.frees),
        human::count(p.reallocs),
        human::count(p.failed),
        p.threads,
        human::ns(p.duration_ns)
    )?;
    let sat = |field: &str, text: String| {
        if p.saturated.iter().any(|s| s == field) {
            format!("≥ {text} (saturated)")
        } else {
            text
        }
    };
    writeln!(
        out,
        "bytes allocated {}   peak live {} in {} objects",
        sat("bytes_allocated", human::bytes(p.bytes_allocated)),
        sat("peak_live_bytes", human::bytes(p.peak_live_bytes)),
        human::count(p.peak_live_objects)
    )?;
    if !p.saturated.is_empty() {
        writeln!(
            out,
            "saturated: {} reached 2^64-1 and stopped there (the true values are larger)",
            p.saturated.join(", ")
        )?;
    }
    let cov: Vec<String> = ["1", "2", "4", "8"]
        .iter()
        .map(|k| format!("top {k}: {}", human::pct(p.top_coverage[*k])))
        .collect();
    writeln!(out, "share of allocations in the most frequent classes: {}", cov.join("   "))?;
    writeln!(out)?;
    writeln!(
        out,
        "{:>10} {:>12} {:>7} {:>12} {:>10} {:>11} {:>14}",
        format!("class(R={})", p.unit),
        "allocs",
        "share",
        "frees",
        "max live",
        "mean live",
        "mean free list"
    )?;
    for c in p.size_classes.iter().take(classes) {
        writeln!(
            out,
            "{:>10} {:>12} {:>7} {:>12} {:>10} {:>11.1} {:>14.1}",
            c.size,
            human::count(c.allocs),
            human::pct(c.share),
            human::count(c.frees),
            human::count(c.max_live),
            c.mean_live,
            c.mean_free_list
        )?;
    }
    if p.size_classes.len() > classes {
        let rest: u64 = p.size_classes.iter().skip(classes).map(|c| c.allocs).sum();
        writeln!(
            out,
            "{:>10} {:>12}   ({} more classes)",
            "...",
            human::count(rest),
            p.size_classes.len() - classes
        )?;
    }
    writeln!(out)?;
    let l = &p.lifetimes;
    writeln!(
        out,
        "lifetimes of freed objects ({} freed, {} never freed)",
        human::count(l.events.count),
        human::count(l.never_freed)
    )?;
    writeln!(
        out,
        "{:>16} {:>12} {:>12} {:>12} {:>12} {:>12}",
        "", "p50 ≤", "p90 ≤", "p99 ≤", "max", "mean"
    )?;
    writeln!(
        out,
        "{:>16} {:>12} {:>12} {:>12} {:>12} {:>12}",
        "events",
        human::count(l.events.p50),
        human::count(l.events.p90),
        human::count(l.events.p99),
        human::count(l.events.max),
        format!("{:.1}", l.events.mean)
    )?;
    writeln!(
        out,
        "{:>16} {:>12} {:>12} {:>12} {:>12} {:>12}",
        "bytes allocated",
        human::bytes(l.bytes.p50),
        human::bytes(l.bytes.p90),
        human::bytes(l.bytes.p99),
        human::bytes(l.bytes.max),
        human::bytes(l.bytes.mean as u64)
    )?;
    writeln!(
        out,
        "{:>16} {:>12} {:>12} {:>12} {:>12} {:>12}",
        "time",
        human::ns(l.ns.p50),
        human::ns(l.ns.p90),
        human::ns(l.ns.p99),
        human::ns(l.ns.max),
        human::ns(l.ns.mean as u64)
    )?;
    if sites > 0 && !p.sites.is_empty() {
        writeln!(out)?;
        writeln!(out, "top allocation sites")?;
        writeln!(out, "{:>12} {:>12}  site (innermost frame first)", "allocs", "bytes")?;
        let mut sym = Symbolizer::default();
        for s in p.sites.iter().take(sites) {
            let frames: Vec<String> = if s.frames.is_empty() {
                vec!["(no stack recorded)".into()]
            } else {
                // Paths and symbol names come from the trace and the binaries: escaped.
                s.frames
                    .iter()
                    .take(3)
                    .map(|f| human::escaped(&sym.frame(&f.module, f.offset)))
                    .collect()
            };
            writeln!(
                out,
                "{:>12} {:>12}  {}",
                human::count(s.allocs),
                human::bytes(s.bytes),
                frames.join(" ← ")
            )?;
        }
    }
    Ok(())
}
