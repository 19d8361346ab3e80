//! `heaplab locality TRACE`: cache and page locality of allocators on a
//! trace recorded with references (papers 000 §4 and 003 §5). The work lives
//! in `heaplab-refs` (measure, study, report); this is flags and output.

use crate::cli::Dest;
use anyhow::{bail, Context, Result};
use heaplab_plumb::{alloc, output, Layout, Tools};
use heaplab_refs::measure::SimSpec;
use heaplab_refs::study::{self, Options};
use heaplab_refs::{report, vg::VgTools};
use heaplab_sim::config::{self, CacheConfig};
use std::io::Write;
use std::path::PathBuf;

/// Cache and page locality of allocators, on a trace recorded with references.
///
/// Each allocator runs the trace's allocation events in heaplab-replay under
/// heaplab's Valgrind tool (measure mode, the allocator LD_PRELOADed), which
/// streams the allocator's own loads and stores; the program's recorded loads
/// and stores are re-issued between them at the addresses this allocator
/// returned. Every cache of --caches (shared by program and allocator, and
/// split: the allocator on a cache of its own) and every page size of --pages
/// is simulated in one pass.
///
/// It reports: miss rate against cache size, direct-mapped with 32-byte lines
/// (paper 000 Figures 6-8) and 8-way with 64-byte lines; the estimated time
/// I + M·P·D with P = 25 cycles (000 Tables 4-5) and a modern P; page faults
/// per reference against memory size (000 Figures 2-3); boundary tags, for
/// every NAME with NAME+pad8 in the list (000 Table 6); and the allocator's
/// cache pollution, shared against split 32 KB caches, its own misses in a
/// 512-byte cache, and the references of each part (003 Figures 5-10, Tables
/// 2-4).
///
/// Examples:
///   heaplab record --refs -o gawk.hltrace -- gawk -f wc.awk input.txt
///   heaplab locality gawk.hltrace
///   heaplab locality gawk.hltrace --allocators bsd,glibc,gnulocal,gnulocal+pad8 --report out/gawk
///   heaplab locality t.hltrace --caches 16K:32:1,64K:32:1 --pages 4K --json t.json
#[derive(clap::Args)]
#[command(verbatim_doc_comment)]
pub struct Args {
    /// A trace with references (`heaplab record --refs`).
    #[arg(value_name = "TRACE")]
    trace: PathBuf,
    /// Allocators, comma-separated: heaplab's (NAME, NAME+padN), glibc,
    /// jemalloc, mimalloc, tcmalloc, zoo, peers, all, or a path to a .so.
    #[arg(long, value_name = "LIST", default_value = study::DEFAULT_ALLOCATORS)]
    allocators: Vec<String>,
    /// Caches to simulate, as for `heaplab sim` (SIZE:LINE:ASSOC,..., `sweep`,
    /// `paper000`); the configurations the papers' figures need are added.
    #[arg(long, value_name = "SPEC", default_value = "sweep")]
    caches: String,
    /// Page sizes, e.g. 4K,8K (`none`: no page simulation).
    #[arg(long, value_name = "SPEC", default_value = "4K,8K")]
    pages: String,
    /// Miss penalty in cycles for the time estimate (paper 000: 25).
    #[arg(long, value_name = "CYCLES", default_value_t = study::PAPER_PENALTY)]
    penalty: u64,
    /// A second, modern miss penalty in cycles.
    #[arg(long, value_name = "CYCLES", default_value_t = study::MODERN_PENALTY)]
    modern_penalty: u64,
    /// Write report.html (figures and tables) into DIR.
    #[arg(long, value_name = "DIR")]
    report: Option<PathBuf>,
    /// Write every result as JSON to FILE (no FILE, or -: standard output,
    /// the tables then go to stderr).
    #[arg(long, value_name = "FILE", num_args = 0..=1, default_missing_value = "-")]
    json: Option<PathBuf>,
    /// Say nothing while measuring.
    #[arg(short, long)]
    quiet: bool,
}

pub fn run(a: Args) -> Result<i32> {
    if !a.trace.exists() {
        bail!("{}: no such file", a.trace.display());
    }
    let json = crate::cli::dest("json", &a.json, std::slice::from_ref(&a.trace))?;
    let (trace, _input) = heaplab_plumb::input::prepare_one(&a.trace)?;
    let layout = Layout::get()?;
    let tools = Tools::new(layout)?;
    tools.check_replay()?;
    let vg = VgTools::new(layout);
    vg.check("heaplab-measure")?;
    {
        let r = heaplab_trace::refs::RefsReader::open(&trace)?;
        if !r.has_refs() {
            bail!(
                "{} has no references (its META options lack refs=1): record it with `heaplab record --refs -o {} -- PROG ...`",
                a.trace.display(),
                a.trace.display()
            );
        }
    }
    let allocators = alloc::resolve(&a.allocators, &tools)?;
    // where the results go, checked before minutes of measuring
    if let Some(Dest::File(p)) = &json {
        output::check(p)?;
        if let Some(d) = p.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(d).with_context(|| format!("creating {}", d.display()))?;
        }
    }
    if let Some(dir) = &a.report {
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
        output::check(&dir.join("report.html"))?;
    }
    let caches: Vec<CacheConfig> = if a.caches.trim() == "none" {
        Vec::new()
    } else {
        config::parse_cache_spec(&a.caches).map_err(|e| anyhow::anyhow!("--caches: {e}"))?
    };
    let page_sizes =
        config::parse_page_spec(&a.pages).map_err(|e| anyhow::anyhow!("--pages: {e}"))?;
    let opts = Options {
        allocators,
        sim: SimSpec { caches: study::with_required(caches), page_sizes },
        penalty: a.penalty,
        modern_penalty: a.modern_penalty,
    };
    let n = opts.allocators.len();
    let quiet = a.quiet;
    let result = study::run(&vg, &tools.replay, &trace, &opts, |i, name, r| {
        if quiet {
            return;
        }
        match r {
            None => eprint!("heaplab locality: {name} ({}/{n}) ... ", i + 1),
            Some(Ok(c)) => eprintln!(
                "{:.1} s, {} references ({} by the allocator)",
                c.seconds,
                crate::human::count(c.stats.refs()),
                crate::human::count(c.stats.alloc_refs)
            ),
            Some(Err(e)) => eprintln!("failed: {e:#}"),
        }
    })?;

    let text = report::text(&result);
    if let Some(d) = &json {
        d.write(&(serde_json::to_string_pretty(&result)? + "\n"))?;
    }
    crate::cli::text(crate::cli::any_stdout(&[&json])).write_all(text.as_bytes())?;
    if let Some(dir) = &a.report {
        let path = crate::cli::write_report(dir, &report::html(&result))?;
        if !quiet {
            eprintln!("heaplab locality: wrote {}", path.display());
        }
    }
    Ok(if result.failed.is_empty() { 0 } else { 1 })
}
