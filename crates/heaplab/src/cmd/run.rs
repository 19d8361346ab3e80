//! `heaplab run --allocator NAME -- PROG ARGS...`: runs a real program on one
//! allocator (LD_PRELOAD of `build/lib/libheaplab-NAME.so`) and passes its
//! exit status through, the way a shell would.
//!
//! With `--stats`, the allocator's own counters (`heaplab_alloc_stats`,
//! written at exit through `HEAPLAB_STATS`) are printed after the run: peak
//! footprint obtained from the OS, calls, and the wall time and peak RSS of
//! the program.

use super::allocators::{self, Choice};
use crate::cli::{self, Dest};
use anyhow::{Context, Result};
use heaplab_plumb::process::{self, Foreground};
use heaplab_plumb::scratch::ScratchDir;
use serde_json::Value;
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::Command;

/// Run a program on one of heaplab's allocators (or another malloc).
///
/// The allocator is preloaded into the program and every program it starts.
/// The exit status is the program's; a program killed by signal N gives
/// 128+N, one that cannot be found 127, one that cannot be run 126, as in a
/// shell. Allocator names: `heaplab allocators` lists the zoo; also glibc,
/// jemalloc, mimalloc, tcmalloc, NAME+padN (the pad layer) and a path to a
/// shared object.
///
/// Examples:
///   heaplab run --allocator bsd -- perl -e 'print "hi\n"'
///   heaplab run --allocator gnulocal+pad8 --stats -- gawk -f prog.awk input.txt
///   heaplab run --allocator firstfit --check 1 -- env PYTHONMALLOC=malloc python3 x.py
#[derive(clap::Args)]
#[command(verbatim_doc_comment)]
pub struct Args {
    /// The allocator (see `heaplab allocators`).
    #[arg(short, long, value_name = "NAME")]
    allocator: String,
    /// After the run, print the allocator's statistics (peak footprint,
    /// calls) and the program's wall time and peak RSS on stderr.
    #[arg(long)]
    stats: bool,
    /// With --stats: write them as one JSON object to FILE instead (no FILE,
    /// or -: standard output, after the program's own output).
    #[arg(long, requires = "stats", value_name = "FILE", num_args = 0..=1, default_missing_value = "-")]
    json: Option<PathBuf>,
    /// Run the allocator's invariant checker after every N heap operations
    /// (HEAPLAB_CHECK; slow: try 1000, or 1 to catch a bug at once).
    #[arg(long, value_name = "N")]
    check: Option<u64>,
    /// The program and its arguments.
    #[arg(last = true, required = true, value_name = "PROG ARGS")]
    command: Vec<OsString>,
}

/// The line the program itself wrote (children that exit normally write theirs too).
fn read_stats(path: &Path, pid: i32) -> Option<Value> {
    let text = std::fs::read_to_string(path).ok()?;
    text.lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .find(|v| v.get("pid").and_then(Value::as_i64) == Some(i64::from(pid)))
}

fn mib(v: &Value, k: &str) -> String {
    v.get(k)
        .and_then(Value::as_u64)
        .map_or("?".into(), |b| format!("{:.1} MiB", b as f64 / 1048576.0))
}

fn report(
    c: &Choice,
    stats: Option<&Value>,
    wall: f64,
    maxrss_kib: i64,
    json: Option<&Dest>,
) -> Result<()> {
    if let Some(d) = json {
        let mut o = serde_json::json!({
            "allocator": c.name,
            "wall_seconds": wall,
            "max_rss_bytes": maxrss_kib * 1024,
        });
        o["heaplab"] = stats.cloned().unwrap_or(Value::Null);
        return d.write(&format!("{o}\n"));
    }
    eprintln!(
        "heaplab run: {}: wall {:.3} s, peak RSS {:.1} MiB",
        c.name,
        wall,
        maxrss_kib as f64 / 1024.0
    );
    match stats {
        Some(s) => {
            let n = |k: &str| s.get(k).and_then(Value::as_u64).unwrap_or(0);
            eprintln!(
                "heaplab run: {}: footprint peak {} (heap {} + mapped {}), now {}; \
                 {} mallocs, {} frees, {} reallocs, {} aligned, {} failed, {} OS calls",
                c.name,
                mib(s, "footprint_peak_bytes"),
                mib(s, "heap_peak_bytes"),
                mib(s, "mapped_peak_bytes"),
                mib(s, "footprint_bytes"),
                n("mallocs"),
                n("frees"),
                n("reallocs"),
                n("memaligns"),
                n("failures"),
                n("os_calls")
            );
        }
        None if c.heaplab => {
            eprintln!("heaplab run: {}: no statistics (the program did not exit normally)", c.name)
        }
        None => eprintln!(
            "heaplab run: {}: footprint statistics exist only for heaplab's allocators",
            c.name
        ),
    }
    Ok(())
}

pub fn run(a: Args) -> Result<i32> {
    let choice = allocators::resolve(&a.allocator)?;
    let prog = &a.command[0];
    let mut cmd = Command::new(prog);
    cmd.args(&a.command[1..]);
    if let Some(so) = &choice.preload {
        let s = so.to_str().context("the allocator's path must be valid UTF-8")?;
        anyhow::ensure!(
            !s.contains([' ', ':']),
            "LD_PRELOAD cannot hold {s:?}: it contains a space or a colon"
        );
        let preload = match std::env::var("LD_PRELOAD") {
            Ok(p) if !p.trim().is_empty() => format!("{s}:{p}"),
            _ => s.to_string(),
        };
        cmd.env("LD_PRELOAD", preload);
    }
    for (k, v) in &choice.env {
        cmd.env(k, v);
    }
    if let Some(n) = a.check {
        cmd.env("HEAPLAB_CHECK", n.to_string());
    }
    let json = cli::dest("json", &a.json, &[])?;
    // The allocator writes its statistics at exit into a fresh private
    // directory (not a predictable name in $TMPDIR), removed afterwards.
    let scratch = if a.stats { Some(ScratchDir::new("run")?) } else { None };
    let stats_path = scratch.as_ref().map(|d| d.join("stats"));
    if let Some(p) = &stats_path {
        cmd.env("HEAPLAB_STATS", p);
    }
    let finished = match (Foreground { default_int_quit: true }).run(&mut cmd) {
        Ok(f) => f,
        Err(e) => {
            let (msg, code) = process::spawn_failure(prog, &e);
            eprintln!("heaplab run: {}: {msg}", prog.to_string_lossy());
            return Ok(code);
        }
    };
    let code = finished.ended.code();
    let wall = finished.wall.as_secs_f64();
    let maxrss = finished.rusage.ru_maxrss;
    finished.signals.release();
    if let Some(p) = &stats_path {
        let s = read_stats(p, finished.pid);
        drop(scratch);
        report(&choice, s.as_ref(), wall, maxrss, json.as_ref())?;
    }
    Ok(code)
}
