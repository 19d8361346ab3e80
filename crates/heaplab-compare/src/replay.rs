//! Running the replayer (`heaplab-replay`) under one allocator, natively or
//! under callgrind, and reading its JSON (docs/replay.md).

use crate::alloc::Allocator;
use crate::callgrind::{self, Profile};
use crate::tools::Tools;
use anyhow::{anyhow, Result};
use serde::Deserialize;
use std::collections::BTreeMap;
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

/// The replayer's modes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    Plain,
    Touch,
    Check,
}

impl Mode {
    pub fn arg(self) -> &'static str {
        match self {
            Mode::Plain => "plain",
            Mode::Touch => "touch",
            Mode::Check => "check",
        }
    }
}

#[derive(Debug, Clone, Deserialize)]
pub struct Footprint {
    pub peak_bytes: u64,
    pub end_bytes: u64,
    pub os_calls: u64,
}

#[derive(Debug, Clone, Deserialize)]
pub struct Rss {
    pub baseline_bytes: u64,
    pub peak_bytes: u64,
    pub growth_bytes: u64,
    pub hwm_reset: bool,
}

#[derive(Debug, Clone, Deserialize)]
pub struct Usable {
    pub peak_live_usable_bytes: u64,
    pub usable_at_peak_live_bytes: u64,
    pub peak_live_bytes: u64,
}

#[derive(Debug, Clone, Deserialize)]
pub struct Counters {
    pub unexpected_null: u64,
    pub failed_replayed: u64,
    pub failed_now_succeeded: u64,
    pub failed_realloc_skipped: u64,
    pub realloc0_returned_block: u64,
}

#[derive(Debug, Clone, Deserialize)]
pub struct Check {
    pub problems: u64,
    pub misaligned: u64,
    pub reported: Vec<String>,
}

/// What the zoo shim's one lock cost over a replay (hl_alloc.h): takes that
/// found it held, futex sleeps among them, and the time they waited (summed
/// over the threads).
#[derive(Debug, Clone, Copy, Deserialize)]
pub struct LockStats {
    pub contended: u64,
    pub sleeps: u64,
    pub wait_ns: u64,
}

/// The replayer's JSON object (the fields heaplab reads; docs/replay.md has all).
#[derive(Debug, Clone, Deserialize)]
pub struct ReplayOut {
    pub events: u64,
    pub kinds: BTreeMap<String, u64>,
    pub objects: u64,
    pub cut_short: bool,
    pub trace_warning: Option<String>,
    /// Where the reader stopped in a cut-short trace, and the events before it.
    #[serde(default)]
    pub cut_at_byte: Option<u64>,
    #[serde(default)]
    pub cut_after_events: Option<u64>,
    /// `recorded` (one replay thread per recorded thread), `serial` or
    /// `unordered`; absent from an older replayer.
    #[serde(default)]
    pub threads_mode: Option<String>,
    #[serde(default)]
    pub replay_threads: Option<u64>,
    /// How a threaded replay's threads waited (`futex` or `spin`, the
    /// replayer's `--wait`); null when serial, absent from an older replayer.
    #[serde(default)]
    pub thread_wait: Option<String>,
    /// The zoo shim's one lock over the replay: null for an allocator that
    /// does not count it, absent from an older replayer.
    #[serde(default)]
    pub lock: Option<LockStats>,
    /// Entry points the loaded malloc lacks, which the replayer emulated
    /// (`pvalloc` under Debian's jemalloc); absent from an older replayer.
    #[serde(default)]
    pub emulated: Vec<String>,
    pub timed_ns: u64,
    /// The process's CPU time (every thread's) over the timed region; 0 from
    /// an older replayer.
    #[serde(default)]
    pub timed_cpu_ns: u64,
    pub peak_live_bytes: u64,
    pub allocator: Option<String>,
    pub footprint: Option<Footprint>,
    pub rss: Rss,
    pub usable: Option<Usable>,
    pub replay: Counters,
    pub check: Option<Check>,
}

impl ReplayOut {
    /// Calls of the malloc family (malloc, calloc, memalign family).
    pub fn mallocs(&self) -> u64 {
        ["malloc", "calloc", "memalign", "posix_memalign", "aligned_alloc", "valloc", "pvalloc"]
            .iter()
            .map(|k| self.kinds.get(*k).copied().unwrap_or(0))
            .sum()
    }
    pub fn frees(&self) -> u64 {
        self.kinds.get("free").copied().unwrap_or(0)
            + self.kinds.get("realloc_free").copied().unwrap_or(0)
    }
    pub fn reallocs(&self) -> u64 {
        self.kinds.get("realloc").copied().unwrap_or(0)
    }
}

/// How one replay process ended.
#[derive(Debug, Clone)]
pub struct Outcome {
    /// The JSON, when the replayer printed it.
    pub out: Option<ReplayOut>,
    /// The same JSON, every field (a job's result keeps it whole).
    pub raw: Option<serde_json::Value>,
    /// The exit code (None: killed by a signal).
    pub code: Option<i32>,
    pub signal: Option<i32>,
    pub stderr: String,
}

impl Outcome {
    /// A one-line reason why this run does not count, or None when it ran clean.
    pub fn failure(&self) -> Option<String> {
        let last = self
            .stderr
            .lines()
            .rev()
            .find(|l| !l.trim().is_empty())
            .unwrap_or("")
            .trim()
            .to_string();
        match (self.code, self.signal) {
            (Some(0), _) if self.out.is_some() => None,
            (Some(0), _) => Some("the replayer printed no JSON".into()),
            (Some(c), _) => Some(if last.is_empty() {
                format!("the replayer exited with status {c}")
            } else {
                last
            }),
            (None, Some(s)) => Some(format!(
                "the replay died of signal {s}{}",
                if last.is_empty() { String::new() } else { format!(": {last}") }
            )),
            _ => Some("the replay ended abnormally".into()),
        }
    }
}

pub(crate) fn command(program: &Path, alloc: &Allocator) -> Command {
    let mut c = Command::new(program);
    c.env_remove("LD_PRELOAD").env_remove("HEAPLAB_STATS").env_remove("HEAPLAB_CHECK");
    if let Some(p) = &alloc.preload {
        c.env("LD_PRELOAD", p);
    }
    for (k, v) in &alloc.env {
        c.env(k, v);
    }
    c.stdin(Stdio::null());
    c
}

pub(crate) fn finish(c: &mut Command, timeout: Option<Duration>) -> Result<Outcome> {
    let out =
        heaplab_plumb::process::capture_until(c, timeout, Some(&heaplab_jobs::cancel::requested))?;
    if out.timed_out {
        let t = timeout.expect("a timeout").as_secs();
        return Ok(Outcome {
            out: None,
            raw: None,
            code: Some(124),
            signal: None,
            stderr: format!("timed out after {t} s (raise it with --timeout)"),
        });
    }
    let stdout = String::from_utf8_lossy(&out.stdout);
    let line = stdout.lines().find(|l| l.starts_with('{'));
    let raw = match line.map(serde_json::from_str::<serde_json::Value>) {
        Some(Ok(v)) => Some(v),
        Some(Err(e)) => return Err(anyhow!("the replayer's JSON does not parse: {e}: {stdout}")),
        None => None,
    };
    let parsed = match raw.clone().map(serde_json::from_value::<ReplayOut>) {
        Some(Ok(o)) => Some(o),
        Some(Err(e)) => return Err(anyhow!("the replayer's JSON does not parse: {e}: {stdout}")),
        None => None,
    };
    Ok(Outcome {
        out: parsed,
        raw,
        code: out.status.code(),
        signal: out.status.signal(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    })
}

/// Replays `trace` under `alloc` natively.
pub fn run(
    tools: &Tools,
    alloc: &Allocator,
    trace: &Path,
    mode: Mode,
    extra: &[&str],
) -> Result<Outcome> {
    let mut c = command(&tools.replay, alloc);
    c.arg("--mode").arg(mode.arg()).args(extra);
    if let Some(t) = tools.threads.as_ref().filter(|_| !extra.contains(&"--site-hints")) {
        c.arg("--threads").arg(t);
    }
    if let Some(w) = &tools.wait {
        c.arg("--wait").arg(w);
    }
    if let Some(d) = tools.ops_cache.as_ref().filter(|_| !extra.contains(&"--site-hints")) {
        c.arg("--ops-cache").arg(d);
    }
    c.arg(trace);
    finish(&mut c, tools.timeout)
}

/// Decodes `trace` into the ops cache, if `tools` has one and it does not
/// hold the trace yet (`heaplab-replay --fill-cache`), without replaying:
/// every later run of the trace reads the cache. Returns whether the cache
/// holds it now; a trace the replayer cannot read is not an error here (the
/// runs that replay it say why).
pub fn fill_cache(tools: &Tools, trace: &Path) -> Result<bool> {
    let Some(dir) = &tools.ops_cache else { return Ok(false) };
    let mut c = Command::new(&tools.replay);
    c.env_remove("LD_PRELOAD").env_remove("HEAPLAB_STATS").env_remove("HEAPLAB_CHECK");
    c.arg("--ops-cache").arg(dir).arg("--fill-cache").arg(trace).stdin(Stdio::null());
    let out = heaplab_plumb::process::capture_until(
        &mut c,
        tools.timeout,
        Some(&heaplab_jobs::cancel::requested),
    )?;
    Ok(!out.timed_out && out.status.success())
}

/// Replays `trace` under `alloc` inside callgrind, every call made through
/// one function per entry point (`--per-call`), instrumentation on only
/// while ops run.
/// The callgrind output goes to `out_file`.
pub fn run_callgrind(
    tools: &Tools,
    alloc: &Allocator,
    trace: &Path,
    out_file: &Path,
) -> Result<(Outcome, Profile)> {
    let mut c = command(&tools.valgrind, alloc);
    c.arg("--tool=callgrind")
        .arg("--instr-atstart=no")
        .arg(format!("--callgrind-out-file={}", out_file.display()))
        .arg(&tools.replay)
        .arg("--per-call");
    if let Some(t) = &tools.threads {
        c.arg("--threads").arg(t);
    }
    if let Some(d) = &tools.ops_cache {
        c.arg("--ops-cache").arg(d);
    }
    c.arg(trace);
    let o = finish(&mut c, tools.callgrind_timeout())?;
    if o.failure().is_some() {
        return Ok((o, Profile::default()));
    }
    let p = callgrind::read(out_file)?;
    Ok((o, p))
}

/// A file name for scratch output of one cell.
pub fn scratch(tools: &Tools, trace: &Path, alloc: &Allocator, what: &str) -> PathBuf {
    let stem = trace.file_stem().map(|s| s.to_string_lossy().to_string()).unwrap_or_default();
    let clean = |s: &str| {
        s.chars()
            .map(|c| if c.is_ascii_alphanumeric() || c == '-' { c } else { '_' })
            .collect::<String>()
    };
    tools.work_dir.join(format!("{}.{}.{}", clean(&stem), clean(&alloc.name), what))
}
