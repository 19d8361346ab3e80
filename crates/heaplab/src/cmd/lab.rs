//! `heaplab lab`: the allocator-course driver. The work is in
//! `heaplab_compare::lab`.

use crate::cmd::compare::{tools, Bar};
use anyhow::Result;
use heaplab_compare::{alloc, lab};
use std::path::PathBuf;

/// What `heaplab lab --help` says (main.rs passes it as long_about).
pub const LONG_ABOUT: &str = r#"Grade allocators the way the malloc-lab driver does, on .rep and .script
files (or traces): correctness from a check-mode replay (overlaps,
damaged payloads, alignment, calloc zeroing, crashes), utilization (peak
live bytes over peak footprint), throughput in operations per second, and
the score 0.6 × utilization + 0.4 × min(1, throughput / 600K ops/s); an
allocator that is not correct on a file scores 0 on it.

Your own allocator: build it as a shared object that defines malloc,
free, realloc and calloc, and name it with --allocators LABEL=path/to/lib.so.

Examples:
  heaplab lab traces/*.rep
  heaplab lab traces/*.rep --allocators mine=./libmine.so,nextfit,glibc --json"#;

/// Flags of `heaplab lab`.
#[derive(clap::Args)]
pub struct Args {
    /// .rep, .script or .hltrace files.
    #[arg(required = true)]
    files: Vec<PathBuf>,
    /// Allocators to grade (names as in `heaplab compare`).
    #[arg(long, value_delimiter = ',', default_value = "zoo,glibc")]
    allocators: Vec<String>,
    /// Timing runs per file; the median gives the throughput.
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u32).range(1..))]
    repeat: u32,
    /// Parallel check-mode replays (default: the number of cores).
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..))]
    jobs: Option<u32>,
    /// Write one JSON record per (file, allocator) to FILE (no FILE, or -:
    /// standard output, instead of the table).
    #[arg(long, value_name = "FILE", num_args = 0..=1, default_missing_value = "-")]
    json: Option<PathBuf>,
    /// Accept traces that stop early (no END block, or a torn last block):
    /// their rows are still marked truncated, but the exit status is 0.
    #[arg(long)]
    allow_truncated: bool,
}

pub fn run(a: Args) -> Result<i32> {
    let json = crate::cli::dest("json", &a.json, &a.files)?;
    let inputs = heaplab_plumb::input::prepare(&a.files)?;
    let tools = tools()?;
    let allocs = alloc::resolve(&a.allocators, &tools)?;
    let bar = Bar::new();
    let jobs = a.jobs.map(|j| j as usize).unwrap_or_else(heaplab_compare::cores);
    let recs = lab::lab(&tools, &inputs.paths, &allocs, a.repeat as usize, jobs, &bar)?;
    bar.0.finish_and_clear();
    match &json {
        Some(d) => {
            d.write(&(serde_json::to_string_pretty(&recs)? + "\n"))?;
            if !d.is_stdout() {
                print!("{}", lab::table(&recs));
            }
        }
        None => print!("{}", lab::table(&recs)),
    }
    let mut code = 0;
    let missing: Vec<&str> =
        allocs.iter().filter(|x| x.missing.is_some()).map(|x| x.name.as_str()).collect();
    if !missing.is_empty() {
        eprintln!("heaplab lab: could not run {}", missing.join(", "));
        code = 1;
    }
    let files = |f: &dyn Fn(&lab::LabRecord) -> bool| {
        let mut v: Vec<String> =
            recs.iter().filter(|r| f(r)).map(|r| crate::human::escaped(&r.trace)).collect();
        v.dedup();
        v
    };
    let unreadable = files(&|r| !r.readable);
    if !unreadable.is_empty() {
        eprintln!("heaplab lab: could not read {} (see their rows)", unreadable.join(", "));
        code = 1;
    }
    let unscored = files(&|r| r.readable && r.score.is_none() && r.error.is_some());
    if !unscored.is_empty() {
        eprintln!("heaplab lab: no score for {} (see their rows)", unscored.join(", "));
        code = 1;
    }
    let cut = files(&|r| r.truncated);
    if !cut.is_empty() {
        eprintln!(
            "heaplab lab: {} stop early: their figures cover only the events before the cut{}",
            cut.join(", "),
            if a.allow_truncated {
                " (accepted: --allow-truncated)"
            } else {
                "; pass --allow-truncated to accept them"
            }
        );
        if !a.allow_truncated {
            code = 1;
        }
    }
    Ok(code)
}
