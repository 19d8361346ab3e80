//! The emitted allocator in the real program, on its test input (not in the
//! paper, which never built its predictors: §4.2 "we are not able to provide
//! estimates of the CPU overhead necessary to implement the predictors").
//!
//! - [`lookup_cost`]: the program under callgrind with the library
//!   preloaded: the instructions of the run-time lookup (`hl_seg_front`:
//!   unwinding, frame keys, table search) per allocation, and the allocator's
//!   instructions per malloc with it; beside them, how many lookups found a
//!   class (the allocator's report).
//! - [`wall`]: the program's wall time with glibc, DEFAULT and the
//!   segmented allocators, runs interleaved, medians and ratios; each run's
//!   output compared with glibc's.

use anyhow::{bail, Context, Result};
use heaplab_plumb::callgrind;
use heaplab_plumb::process::CommandLine;
use serde::Serialize;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;

/// The cost of predicting at run time, from one callgrind run.
#[derive(Debug, Clone, Serialize)]
pub struct LookupCost {
    pub library: String,
    pub command: String,
    /// Calls of the lookup, its inclusive instructions, and per call.
    pub lookups: u64,
    pub lookup_instructions: u64,
    pub per_lookup: f64,
    /// The allocator's malloc-family calls and instructions per call,
    /// lookup included (callgrind's arcs into the malloc API).
    pub mallocs: u64,
    pub per_malloc: f64,
    /// The same for DEFAULT (no lookup) on the same input.
    pub default_per_malloc: Option<f64>,
    /// Share of all the program's instructions spent in lookups.
    pub share_of_program: f64,
    /// From the allocator's report: lookups that found a class, and the
    /// frames unwound per lookup.
    pub runtime_predicted: u64,
    pub frames_per_lookup: f64,
    /// The callgrind output kept.
    pub callgrind_out: PathBuf,
}

/// The program as an argument vector (never a shell), in `cwd`, with
/// `preload` loaded.
/// LD_PRELOAD splits on spaces and colons: a library whose path holds one
/// would silently not load.
fn preloadable(lib: &Path) -> Result<()> {
    let s = lib.as_os_str().to_string_lossy();
    if s.contains([' ', ':']) {
        bail!(
            "LD_PRELOAD cannot hold {}: it contains a space or a colon (choose another -o)",
            lib.display()
        );
    }
    Ok(())
}

fn command(cmd: &CommandLine, cwd: &Path, preload: Option<&Path>) -> Result<Command> {
    let mut c = cmd.command();
    c.current_dir(cwd).stdin(cmd.stdin(cwd)?);
    c.env_remove("LD_PRELOAD");
    if let Some(p) = preload {
        preloadable(p)?;
        c.env("LD_PRELOAD", p);
    }
    Ok(c)
}

/// Runs `cmd` under callgrind with `library` preloaded and reads the lookup's cost.
pub fn lookup_cost(
    cmd: &CommandLine,
    cwd: &Path,
    library: &Path,
    default_library: Option<&Path>,
    scratch: &Path,
) -> Result<LookupCost> {
    let (cg, report) = callgrind_run(cmd, cwd, library, scratch, "lookup")?;
    let mut lookups = 0;
    let mut incl = 0;
    for ((_, callee), arc) in &cg.arcs {
        if callee == "hl_seg_front" {
            lookups += arc.calls;
            incl += arc.inclusive;
        }
    }
    if lookups == 0 {
        bail!(
            "callgrind saw no call of hl_seg_front in `{}` with {}: is it a segmented allocator with a stack predictor?",
            cmd.text,
            library.display()
        );
    }
    let costs = callgrind::program_costs(&cg);
    let default_per_malloc = match default_library {
        Some(d) => {
            let (dcg, _) = callgrind_run(cmd, cwd, d, scratch, "default")?;
            callgrind::program_costs(&dcg).malloc.per_call()
        }
        None => None,
    };
    let r = report.as_ref();
    let rl = r.and_then(|v| v["runtime_lookups"].as_u64()).unwrap_or(0);
    Ok(LookupCost {
        library: library.display().to_string(),
        command: cmd.text.clone(),
        lookups,
        lookup_instructions: incl,
        per_lookup: incl as f64 / lookups as f64,
        mallocs: costs.malloc.calls,
        per_malloc: costs.malloc.per_call().unwrap_or(0.0),
        default_per_malloc,
        share_of_program: incl as f64 / cg.total.max(1) as f64,
        runtime_predicted: r.and_then(|v| v["runtime_predicted"].as_u64()).unwrap_or(0),
        frames_per_lookup: r.and_then(|v| v["runtime_frames"].as_u64()).unwrap_or(0) as f64
            / rl.max(1) as f64,
        callgrind_out: scratch.join("callgrind.lookup.out"),
    })
}

/// One callgrind run of the program: its profile, and the allocator's report.
fn callgrind_run(
    cmd: &CommandLine,
    cwd: &Path,
    library: &Path,
    scratch: &Path,
    tag: &str,
) -> Result<(callgrind::Profile, Option<serde_json::Value>)> {
    preloadable(library)?;
    let dir = scratch.join(format!("callgrind-{tag}"));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    let report = dir.join("report.jsonl");
    let mut out_file = std::ffi::OsString::from("--callgrind-out-file=");
    out_file.push(dir.join("cg.%p"));
    let mut c = Command::new("valgrind");
    c.args(["--tool=callgrind", "-q", "--trace-children=yes"])
        .arg(out_file)
        .args(&cmd.argv)
        .envs(cmd.env.iter().map(|(k, v)| (k, v)))
        .current_dir(cwd)
        .stdin(cmd.stdin(cwd)?)
        .env("LD_PRELOAD", library)
        .env("HEAPLAB_SEG_REPORT", &report)
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    let out = c.output().context("running valgrind --tool=callgrind")?;
    if !out.status.success() {
        bail!(
            "`{}` under callgrind with {} failed ({}): {}",
            cmd.text,
            library.display(),
            out.status,
            String::from_utf8_lossy(&out.stderr)
                .lines()
                .rev()
                .take(5)
                .collect::<Vec<_>>()
                .join(" | ")
        );
    }
    // The program's own output file is the largest (a wrapper's, env's say, is small).
    let mut best: Option<(u64, PathBuf)> = None;
    for e in std::fs::read_dir(&dir)? {
        let p = e?.path();
        if p.file_name().and_then(|n| n.to_str()).is_some_and(|n| n.starts_with("cg.")) {
            let len = p.metadata()?.len();
            if best.as_ref().is_none_or(|b| len > b.0) {
                best = Some((len, p));
            }
        }
    }
    let (_, path) = best.context("callgrind wrote no output")?;
    let prof = callgrind::read(&path)?;
    let _ = std::fs::copy(&path, scratch.join(format!("callgrind.{tag}.out")));
    let rep = std::fs::read_to_string(&report).ok().and_then(|t| {
        t.lines().filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok()).max_by_key(
            |v| v["runtime_lookups"].as_u64().unwrap_or(0) + v["hints"].as_u64().unwrap_or(0),
        )
    });
    let _ = std::fs::remove_dir_all(&dir);
    Ok((prof, rep))
}

/// One allocator's wall times.
#[derive(Debug, Clone, Serialize)]
pub struct WallRow {
    pub name: String,
    pub library: Option<PathBuf>,
    pub seconds: Vec<f64>,
    pub median: f64,
    /// median / glibc's median, and / DEFAULT's.
    pub vs_glibc: f64,
    pub vs_default: Option<f64>,
    /// Every run's stdout and exit status equal glibc's.
    pub same_output: bool,
    pub exit_status: i32,
}

/// Wall times of the real program.
#[derive(Debug, Clone, Serialize)]
pub struct WallTimes {
    pub command: String,
    pub repeats: usize,
    pub rows: Vec<WallRow>,
}

fn median(v: &[f64]) -> f64 {
    let mut s = v.to_vec();
    s.sort_by(|a, b| a.total_cmp(b));
    if s.is_empty() {
        0.0
    } else if s.len() % 2 == 1 {
        s[s.len() / 2]
    } else {
        (s[s.len() / 2 - 1] + s[s.len() / 2]) / 2.0
    }
}

/// Runs `cmd` with glibc and each library, `repeats` rounds, interleaved.
/// The first of `libs` named "DEFAULT" is the second baseline.
pub fn wall(
    cmd: &CommandLine,
    cwd: &Path,
    libs: &[(String, PathBuf)],
    repeats: usize,
    scratch: &Path,
) -> Result<WallTimes> {
    let mut all: Vec<(String, Option<PathBuf>)> = vec![("glibc".into(), None)];
    all.extend(libs.iter().map(|(n, p)| (n.clone(), Some(p.clone()))));
    let mut secs = vec![Vec::new(); all.len()];
    let mut same = vec![true; all.len()];
    let mut status = vec![0; all.len()];
    let expected = scratch.join("wall.glibc.out");
    for round in 0..repeats.max(1) {
        for (i, (name, lib)) in all.iter().enumerate() {
            let out = scratch.join(format!("wall.{name}.out"));
            let f = std::fs::File::create(&out)?;
            let t0 = Instant::now();
            let st = command(cmd, cwd, lib.as_deref())?
                .stdout(f)
                .stderr(Stdio::null())
                .status()
                .with_context(|| format!("running `{}`", cmd.text))?;
            secs[i].push(t0.elapsed().as_secs_f64());
            status[i] = st.code().unwrap_or(-1);
            if i == 0 && round == 0 && !st.success() {
                bail!("`{}` fails with glibc ({st}): fix the command first", cmd.text);
            }
            if i > 0 {
                let a = std::fs::read(&out)?;
                let b = std::fs::read(&expected)?;
                if a != b || status[i] != status[0] {
                    same[i] = false;
                }
            }
        }
    }
    let med: Vec<f64> = secs.iter().map(|s| median(s)).collect();
    let def = all.iter().position(|(n, _)| n == "DEFAULT").map(|i| med[i]);
    let rows = all
        .into_iter()
        .enumerate()
        .map(|(i, (name, library))| WallRow {
            name,
            library,
            seconds: secs[i].clone(),
            median: med[i],
            vs_glibc: med[i] / med[0].max(1e-9),
            vs_default: def.map(|d| med[i] / d.max(1e-9)),
            same_output: same[i],
            exit_status: status[i],
        })
        .collect();
    Ok(WallTimes { command: cmd.text.clone(), repeats, rows })
}
