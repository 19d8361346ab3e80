//! `heaplab compare --live`: the real program under each allocator, the final
//! truth beside the replay. Per allocator: wall time (median over repeats, one
//! run at a time), peak RSS, the exit status, whether stdout is byte-identical
//! to glibc's, and with callgrind the program's instructions, the allocator's
//! share of them and its instructions per call (paper 002 Figures 4 and 5,
//! paper 000 Figure 1).

use crate::alloc::Allocator;
use crate::callgrind::{self, program_costs};
use crate::measure::ProgramCost;
use crate::tools::Tools;
use crate::{parallel, Progress};
use anyhow::{anyhow, bail, Context, Result};
use serde::{Deserialize, Serialize};
use std::fs::File;
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;

/// How to run the program.
#[derive(Debug, Clone)]
pub struct LiveOptions {
    pub repeat: usize,
    pub jobs: usize,
    /// Run each allocator once more under callgrind.
    pub instructions: bool,
    /// A file to connect to the program's stdin (else /dev/null).
    pub stdin: Option<PathBuf>,
    /// Extra environment for the program (e.g. PYTHONMALLOC=malloc).
    pub env: Vec<(String, String)>,
    /// The output check: lines of stdout matching any of these regular
    /// expressions are left out before the comparison with glibc's (a program
    /// that prints its own run time).
    pub ignore_lines: Vec<String>,
    /// The output check: a command (argv, no shell) that each run's stdout
    /// goes through (on its stdin) before the comparison; empty: none.
    pub output_filter: Vec<String>,
}

impl Default for LiveOptions {
    fn default() -> Self {
        LiveOptions {
            repeat: 3,
            jobs: crate::cores(),
            instructions: true,
            stdin: None,
            env: Vec::new(),
            ignore_lines: Vec::new(),
            output_filter: Vec::new(),
        }
    }
}

/// One allocator running the program.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct LiveRecord {
    pub command: Vec<String>,
    pub allocator: String,
    pub source: String,
    pub status: String,
    pub error: Option<String>,
    pub exit_code: Option<i32>,
    pub wall_s: Option<f64>,
    pub wall_runs_s: Vec<f64>,
    pub wall_ratio_glibc: Option<f64>,
    /// User + system time of the program (and the children and threads it
    /// waited for), which a loaded machine disturbs less than wall time.
    pub cpu_s: Option<f64>,
    pub cpu_runs_s: Vec<f64>,
    pub cpu_ratio_glibc: Option<f64>,
    pub peak_rss_bytes: Option<u64>,
    pub rss_vs_glibc: Option<f64>,
    pub stdout_bytes: Option<u64>,
    pub stdout_matches_glibc: Option<bool>,
    /// How stdout was compared: `bytes`, or `filtered` (through
    /// `--output-filter` and/or `--ignore-lines`).
    pub output_check: Option<String>,
    /// Lines of this row's stdout that `--ignore-lines` left out.
    pub stdout_lines_ignored: Option<u64>,
    pub instructions: Option<u64>,
    pub alloc_instructions: Option<u64>,
    pub alloc_instr_share: Option<f64>,
    pub instr_per_malloc: Option<f64>,
    pub instr_per_free: Option<f64>,
    pub instr_per_realloc: Option<f64>,
    pub mallocs: Option<u64>,
    pub frees: Option<u64>,
    pub reallocs: Option<u64>,
}

struct Run {
    wall: f64,
    cpu: f64,
    code: Option<i32>,
    signal: Option<i32>,
    maxrss: u64,
    stdout: PathBuf,
    stderr: String,
}

fn prepare(
    cmd: &mut Command,
    alloc: &Allocator,
    opts: &LiveOptions,
    rss: Option<(&Path, &Path)>,
) -> Result<()> {
    cmd.env_remove("LD_PRELOAD").env_remove("HEAPLAB_STATS").env_remove("HEAPLAB_RSS_OUT");
    for (k, v) in &opts.env {
        cmd.env(k, v);
    }
    // The allocator first, so that it is the malloc; the RSS reporter defines none.
    let mut preload: Vec<String> = alloc.preload.iter().map(|p| p.display().to_string()).collect();
    if let Some((lib, out)) = rss {
        preload.push(lib.display().to_string());
        cmd.env("HEAPLAB_RSS_OUT", out);
    }
    if !preload.is_empty() {
        cmd.env("LD_PRELOAD", preload.join(":"));
    }
    for (k, v) in &alloc.env {
        cmd.env(k, v);
    }
    match &opts.stdin {
        Some(f) => cmd.stdin(File::open(f).with_context(|| format!("opening {}", f.display()))?),
        None => cmd.stdin(Stdio::null()),
    };
    Ok(())
}

/// Runs the program once. Its peak RSS is the VmHWM that
/// libheaplab-rsspeak.so reports as it exits; wait4's ru_maxrss (which also
/// counts the image the child had before exec, a copy of ours) only when the
/// reporter is missing or the program did not exit normally.
fn run_once(
    tools: &Tools,
    argv: &[String],
    alloc: &Allocator,
    opts: &LiveOptions,
    stdout: &Path,
) -> Result<Run> {
    let mut cmd = Command::new(&argv[0]);
    cmd.args(&argv[1..]);
    let lib = tools.lib_dir.join("libheaplab-rsspeak.so");
    let rss_out = stdout.with_extension("rss");
    let _ = std::fs::remove_file(&rss_out);
    prepare(&mut cmd, alloc, opts, lib.exists().then_some((lib.as_path(), rss_out.as_path())))?;
    let err_path = stdout.with_extension("stderr");
    cmd.stdout(File::create(stdout)?).stderr(File::create(&err_path)?);
    let t0 = Instant::now();
    let child = cmd.spawn().map_err(|e| anyhow!("cannot run {}: {e}", argv[0]))?;
    let pid = child.id() as libc::pid_t;
    let mut status: libc::c_int = 0;
    // SAFETY: an all-zero rusage is a valid value of this plain C struct.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    let r = loop {
        // SAFETY: pid is our own child, not yet waited for (std's Child is never
        // waited on: it is dropped below without wait); status and ru are valid
        // out-pointers for the duration of the call.
        let r = unsafe { libc::wait4(pid, &mut status, 0, &mut ru) };
        if r >= 0 || std::io::Error::last_os_error().kind() != std::io::ErrorKind::Interrupted {
            break r;
        }
    };
    let wall = t0.elapsed().as_secs_f64();
    drop(child);
    if r < 0 {
        bail!("waiting for {}: {}", argv[0], std::io::Error::last_os_error());
    }
    let es = std::process::ExitStatus::from_raw(status);
    let stderr = std::fs::read_to_string(&err_path).unwrap_or_default();
    let reported =
        std::fs::read_to_string(&rss_out).ok().and_then(|s| s.trim().parse::<u64>().ok());
    let _ = std::fs::remove_file(&rss_out);
    let secs = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    Ok(Run {
        wall,
        cpu: secs(ru.ru_utime) + secs(ru.ru_stime),
        code: es.code(),
        signal: es.signal(),
        maxrss: reported.unwrap_or(ru.ru_maxrss as u64 * 1024),
        stdout: stdout.to_path_buf(),
        stderr,
    })
}

/// The output check users shape: `--output-filter` then `--ignore-lines`.
struct OutputCheck {
    ignore: Vec<regex::bytes::Regex>,
    filter: Vec<String>,
}

impl OutputCheck {
    fn new(opts: &LiveOptions) -> Result<OutputCheck> {
        let ignore = opts
            .ignore_lines
            .iter()
            .map(|p| {
                regex::bytes::Regex::new(p)
                    .map_err(|e| anyhow!("--ignore-lines {p:?} is not a regular expression: {e}"))
            })
            .collect::<Result<Vec<_>>>()?;
        Ok(OutputCheck { ignore, filter: opts.output_filter.clone() })
    }

    fn shaped(&self) -> bool {
        !self.ignore.is_empty() || !self.filter.is_empty()
    }

    /// The run's stdout as compared, and the lines left out.
    fn apply(&self, stdout: &Path) -> Result<(Vec<u8>, u64)> {
        let mut out = if self.filter.is_empty() {
            std::fs::read(stdout).with_context(|| format!("reading {}", stdout.display()))?
        } else {
            let o = Command::new(&self.filter[0])
                .args(&self.filter[1..])
                .stdin(File::open(stdout)?)
                .stderr(Stdio::piped())
                .output()
                .map_err(|e| anyhow!("--output-filter: cannot run {}: {e}", self.filter[0]))?;
            if !o.status.success() {
                bail!(
                    "--output-filter {} failed ({}): {}",
                    self.filter.join(" "),
                    o.status,
                    String::from_utf8_lossy(&o.stderr).lines().last().unwrap_or("")
                );
            }
            o.stdout
        };
        let mut dropped = 0;
        if !self.ignore.is_empty() {
            let mut kept = Vec::with_capacity(out.len());
            for line in out.split_inclusive(|&b| b == b'\n') {
                let body = line.strip_suffix(b"\n").unwrap_or(line);
                if self.ignore.iter().any(|r| r.is_match(body)) {
                    dropped += 1;
                } else {
                    kept.extend_from_slice(line);
                }
            }
            out = kept;
        }
        Ok((out, dropped))
    }
}

fn median(v: &[f64]) -> Option<f64> {
    let mut s = v.to_vec();
    s.sort_by(|a, b| a.total_cmp(b));
    let n = s.len();
    (n > 0).then(|| if n % 2 == 1 { s[n / 2] } else { (s[n / 2 - 1] + s[n / 2]) / 2.0 })
}

/// Runs `argv` under every allocator. `glibc` must be among them (it is the
/// reference for stdout and the baseline of the ratios).
pub fn live(
    tools: &Tools,
    argv: &[String],
    allocs: &[Allocator],
    opts: &LiveOptions,
    progress: &dyn Progress,
) -> Result<Vec<LiveRecord>> {
    if argv.is_empty() {
        bail!("no program given: heaplab compare --live -- PROG ARGS...");
    }
    if opts.instructions && !tools.have_valgrind() {
        bail!("valgrind is not installed, and instruction counts need it (apt-get install valgrind, or pass --no-instructions)");
    }
    let check = OutputCheck::new(opts)?;
    std::fs::create_dir_all(&tools.work_dir)?;
    let runnable: Vec<usize> = (0..allocs.len()).filter(|&a| allocs[a].missing.is_none()).collect();
    let cg_jobs: Vec<usize> = if opts.instructions { runnable.clone() } else { Vec::new() };
    progress.start((cg_jobs.len() + runnable.len() * opts.repeat.max(1)) as u64);
    // A tag per call, so that several live runs may share the work directory.
    static CALLS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let tag = CALLS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let file = |a: &Allocator, what: &str| {
        let clean: String =
            a.name.chars().map(|c| if c.is_ascii_alphanumeric() { c } else { '_' }).collect();
        tools.work_dir.join(format!("live{tag}.{clean}.{what}"))
    };

    let cg =
        parallel(cg_jobs.len(), opts.jobs, |j| -> Result<(Option<String>, callgrind::Profile)> {
            let a = &allocs[cg_jobs[j]];
            let out = file(a, "callgrind.out");
            let mut cmd = Command::new(&tools.valgrind);
            cmd.arg("--tool=callgrind")
                .arg(format!("--callgrind-out-file={}", out.display()))
                .args(argv);
            prepare(&mut cmd, a, opts, None)?;
            cmd.stdout(Stdio::null()).stderr(Stdio::piped());
            let o = cmd.output().map_err(|e| anyhow!("cannot run valgrind: {e}"))?;
            progress.step(&format!("callgrind {}", a.name));
            if !o.status.success() && !out.exists() {
                let err = String::from_utf8_lossy(&o.stderr);
                return Ok((
                    Some(format!("callgrind run failed: {}", err.lines().last().unwrap_or(""))),
                    Default::default(),
                ));
            }
            let p = callgrind::read(&out)?;
            let _ = std::fs::remove_file(&out);
            Ok((None, p))
        });

    let mut runs: Vec<Vec<Run>> = (0..allocs.len()).map(|_| Vec::new()).collect();
    let mut errors: Vec<Option<String>> = vec![None; allocs.len()];
    for r in 0..opts.repeat.max(1) {
        for k in heaplab_plumb::rounds::order(runnable.len(), r) {
            let a = runnable[k];
            let out = file(&allocs[a], &format!("stdout.{r}"));
            match run_once(tools, argv, &allocs[a], opts, &out) {
                Ok(run) => runs[a].push(run),
                Err(e) => {
                    errors[a].get_or_insert(format!("{e:#}"));
                }
            }
            progress.step(&format!("run {}", allocs[a].name));
        }
    }

    let glibc = allocs.iter().position(|a| a.is_glibc());
    let glibc_out = match glibc.and_then(|g| runs[g].first()) {
        // glibc's is the reference: a filter that fails on it fails the whole run
        Some(r) => Some(check.apply(&r.stdout).context("glibc's output")?.0),
        None => None,
    };
    let glibc_wall =
        glibc.and_then(|g| median(&runs[g].iter().map(|r| r.wall).collect::<Vec<_>>()));
    let glibc_cpu = glibc.and_then(|g| median(&runs[g].iter().map(|r| r.cpu).collect::<Vec<_>>()));
    let glibc_rss = glibc.and_then(|g| runs[g].iter().map(|r| r.maxrss).max());
    let mut records = Vec::new();
    type CgResult = Result<(Option<String>, callgrind::Profile)>;
    let mut cg_by: Vec<Option<CgResult>> = (0..allocs.len()).map(|_| None).collect();
    for (a, r) in cg_jobs.iter().zip(cg) {
        cg_by[*a] = Some(r);
    }
    for (i, a) in allocs.iter().enumerate() {
        let mut rec = LiveRecord {
            command: argv.to_vec(),
            allocator: a.name.clone(),
            source: a.source.name().into(),
            status: "ok".into(),
            ..LiveRecord::default()
        };
        if let Some(m) = &a.missing {
            rec.status = "missing".into();
            rec.error = Some(m.clone());
            records.push(rec);
            continue;
        }
        let fail = |rec: &mut LiveRecord, why: String| {
            if rec.status == "ok" || rec.status == "output_differs" {
                rec.status = "failed".into();
                rec.error = Some(why);
            }
        };
        if let Some(e) = &errors[i] {
            fail(&mut rec, e.clone());
        }
        if let Some(first) = runs[i].first() {
            rec.exit_code = first.code;
            if let Some(s) = first.signal {
                fail(
                    &mut rec,
                    format!("killed by signal {s}: {}", first.stderr.lines().last().unwrap_or("")),
                );
            }
            rec.stdout_bytes = std::fs::metadata(&first.stdout).ok().map(|m| m.len());
            rec.output_check = Some(if check.shaped() { "filtered" } else { "bytes" }.into());
            match (check.apply(&first.stdout), &glibc_out) {
                (Ok((out, dropped)), Some(g)) => {
                    let same = &out == g;
                    rec.stdout_matches_glibc = Some(same);
                    rec.stdout_lines_ignored = (!check.ignore.is_empty()).then_some(dropped);
                    if !same && rec.status == "ok" {
                        // flagged, not failed: the figures stand
                        rec.status = "output_differs".into();
                        rec.error = Some(if check.shaped() {
                            "stdout differs from glibc's after the output check".into()
                        } else {
                            "stdout differs from glibc's (shape the check with --ignore-lines or --output-filter)".into()
                        });
                    }
                }
                (Err(e), _) => fail(&mut rec, format!("{e:#}")),
                (Ok(_), None) => {}
            }
            if let (Some(g), Some(c)) =
                (glibc.and_then(|g| runs[g].first()).map(|r| r.code), first.code)
            {
                if g != Some(c) {
                    fail(
                        &mut rec,
                        format!(
                            "exit status {c}, glibc's was {}",
                            g.map(|x| x.to_string()).unwrap_or("a signal".into())
                        ),
                    );
                }
            }
        }
        rec.wall_runs_s = runs[i].iter().map(|r| r.wall).collect();
        rec.wall_s = median(&rec.wall_runs_s);
        rec.wall_ratio_glibc =
            rec.wall_s.zip(glibc_wall).filter(|(_, g)| *g > 0.0).map(|(w, g)| w / g);
        rec.cpu_runs_s = runs[i].iter().map(|r| r.cpu).collect();
        rec.cpu_s = median(&rec.cpu_runs_s);
        rec.cpu_ratio_glibc =
            rec.cpu_s.zip(glibc_cpu).filter(|(_, g)| *g > 0.0).map(|(w, g)| w / g);
        rec.peak_rss_bytes = runs[i].iter().map(|r| r.maxrss).max();
        rec.rss_vs_glibc = rec
            .peak_rss_bytes
            .zip(glibc_rss)
            .filter(|(_, g)| *g > 0)
            .map(|(r, g)| r as f64 / g as f64);
        match cg_by[i].take() {
            Some(Ok((None, p))) => {
                let c = program_costs(&p);
                rec.instructions = Some(p.total);
                rec.alloc_instructions = Some(c.total);
                rec.alloc_instr_share = (p.total > 0).then(|| c.total as f64 / p.total as f64);
                rec.instr_per_malloc = c.malloc.per_call();
                rec.instr_per_free = c.free.per_call();
                rec.instr_per_realloc = c.realloc.per_call();
                rec.mallocs = Some(c.malloc.calls);
                rec.frees = Some(c.free.calls);
                rec.reallocs = Some(c.realloc.calls);
            }
            Some(Ok((Some(e), _))) => fail(&mut rec, e),
            Some(Err(e)) => fail(&mut rec, format!("{e:#}")),
            None => {}
        }
        records.push(rec);
    }
    for a in allocs {
        for r in 0..opts.repeat.max(1) {
            let _ = std::fs::remove_file(file(a, &format!("stdout.{r}")));
            let _ = std::fs::remove_file(file(a, &format!("stdout.{r}")).with_extension("stderr"));
        }
    }
    // The work directory itself is the tools' private one: it goes when they
    // do (removing it here could let a parallel call recreate it unprivate).
    Ok(records)
}

/// The program-cost sidecar of a trace, from the glibc row of a live run.
pub fn program_cost(records: &[LiveRecord]) -> Result<ProgramCost> {
    let g = records
        .iter()
        .find(|r| r.allocator == "glibc")
        .ok_or_else(|| anyhow!("the program cost needs glibc among the allocators"))?;
    match (g.instructions, g.alloc_instructions) {
        (Some(p), Some(a)) => Ok(ProgramCost {
            program_instructions: p,
            alloc_instructions: a,
            allocator: "glibc".into(),
            command: g.command.clone(),
        }),
        _ => bail!("the program cost needs instruction counts (drop --no-instructions)"),
    }
}

/// The terminal table.
pub fn table(records: &[LiveRecord]) -> String {
    let o = |v: Option<f64>, d: usize| v.map(|x| format!("{x:.d$}")).unwrap_or_else(|| "—".into());
    let mut s = format!(
        "{:<14} {:>9} {:>7} {:>11} {:>7} {:>7} {:>9} {:>9} {:>7}\n",
        "allocator",
        "wall ms",
        "×glibc",
        "peak RSS",
        "×glibc",
        "stdout",
        "ins/mall",
        "ins/free",
        "share"
    );
    for r in records {
        if r.status == "missing" {
            s.push_str(&format!(
                "{:<14} MISSING: {}\n",
                r.allocator,
                r.error.as_deref().unwrap_or("")
            ));
            continue;
        }
        s.push_str(&format!(
            "{:<14} {:>9} {:>7} {:>11} {:>7} {:>7} {:>9} {:>9} {:>7}{}\n",
            r.allocator,
            o(r.wall_s.map(|w| w * 1e3), 1),
            o(r.wall_ratio_glibc, 2),
            r.peak_rss_bytes.map(crate::record::bytes).unwrap_or_else(|| "—".into()),
            o(r.rss_vs_glibc, 2),
            match r.stdout_matches_glibc {
                Some(true) => "same",
                Some(false) => "DIFF",
                None => "—",
            },
            o(r.instr_per_malloc, 1),
            o(r.instr_per_free, 1),
            r.alloc_instr_share.map(|x| format!("{:.1}%", x * 100.0)).unwrap_or_else(|| "—".into()),
            if r.status == "failed" {
                format!("  FAILED: {}", r.error.as_deref().unwrap_or(""))
            } else if r.status == "output_differs" {
                "  OUTPUT DIFFERS (figures kept)".to_string()
            } else {
                String::new()
            }
        ));
    }
    s
}
