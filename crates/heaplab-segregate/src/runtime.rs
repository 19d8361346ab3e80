//! The emitted allocators in the real program, on its test input (not in the
//! paper, which never built its predictors: §4.2 "we are not able to provide
//! estimates of the CPU overhead necessary to implement the predictors").
//!
//! - [`costs`]: the program under callgrind with each library preloaded
//!   (DEFAULT and every predictor): the allocator's instructions per malloc
//!   and per free, the identification's per new object (the instructions of
//!   `native/segregate/seg_ident.{c,h}`, inline in malloc or not:
//!   [`ident_instructions`]), and from the allocator's report where each
//!   identification was decided (the return address alone, or after L more
//!   frames).
//! - [`wall`]: the program's wall time with glibc, mimalloc, DEFAULT and the
//!   segmented allocators, runs interleaved, medians and ratios; each run's
//!   output compared with glibc's.

use anyhow::{bail, Context, Result};
use heaplab_plumb::callgrind;
use heaplab_plumb::process::CommandLine;
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;

/// One segment in the allocator's report (`hl_seg_report`, segregated.c).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct ReportSegment {
    pub class: String,
    #[serde(default)]
    pub first: String,
    #[serde(default)]
    pub end: String,
    /// Every address range of the segment: its best-fit heap, then each slot
    /// of its fast core (`[first, end)` as hex strings).
    #[serde(default)]
    pub ranges: Vec<[String; 2]>,
    #[serde(default)]
    pub objects: u64,
    #[serde(default)]
    pub hinted: u64,
    #[serde(default)]
    pub runtime: u64,
    #[serde(default)]
    pub from_cache: u64,
    #[serde(default)]
    pub bytes_live: u64,
    #[serde(default)]
    pub bytes_peak: u64,
    /// Bytes of slabs the segment's fast core holds at exit.
    #[serde(default)]
    pub core_bytes: u64,
    #[serde(default)]
    pub grows: u64,
}

/// The allocator's report at exit (`HEAPLAB_SEG_REPORT`): one JSON line.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct SegReport {
    #[serde(default)]
    pub pid: u64,
    pub predictor: String,
    #[serde(default)]
    pub entries: u64,
    pub segments: Vec<ReportSegment>,
    #[serde(default)]
    pub hints: u64,
    /// Identifications (new objects whose call site was identified).
    #[serde(default)]
    pub runtime_lookups: u64,
    /// ... that went to a segment other than "other".
    #[serde(default)]
    pub runtime_predicted: u64,
    /// Frames walked in all.
    #[serde(default)]
    pub runtime_frames: u64,
    /// Identifications decided after looking at the return address and L more frames.
    #[serde(default)]
    pub levels: Vec<u64>,
    /// ... whose last prefix had no node in the table ("other", or PATH's scan).
    #[serde(default)]
    pub unknown: u64,
    /// The context cache: (return address, frame) not in it; in it with other
    /// frames above; stack walks; decisions it could not keep; long slots it
    /// filled (contexts of more than eight words: seg_thread.h).
    #[serde(default)]
    pub ctx_misses: u64,
    #[serde(default)]
    pub ctx_others: u64,
    #[serde(default)]
    pub walks: u64,
    #[serde(default)]
    pub uncached: u64,
    #[serde(default)]
    pub longs: u64,
    #[serde(default)]
    pub ra_misses: u64,
    #[serde(default)]
    pub path_hits: u64,
    #[serde(default)]
    pub path_misses: u64,
    /// New objects served by the per-thread caches, and frees kept in them.
    #[serde(default)]
    pub cache_mallocs: u64,
    #[serde(default)]
    pub cache_frees: u64,
}

impl SegReport {
    /// Reads the report lines a run appended; the process that did the most
    /// (a wrapper's line is small) is the program's.
    pub fn read_main(path: &Path) -> Result<Option<SegReport>> {
        let text = match std::fs::read_to_string(path) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(e).with_context(|| format!("reading {}", path.display())),
        };
        let mut best: Option<SegReport> = None;
        for (i, line) in text.lines().enumerate().filter(|(_, l)| !l.trim().is_empty()) {
            let r: SegReport = serde_json::from_str(line).with_context(|| {
                format!("{} line {}: not a segment report", path.display(), i + 1)
            })?;
            let weight = |r: &SegReport| r.segments.iter().map(|s| s.objects).sum::<u64>();
            if best.as_ref().is_none_or(|b| weight(&r) > weight(b)) {
                best = Some(r);
            }
        }
        Ok(best)
    }

    /// Share of identifications the return address alone decided.
    pub fn level0_share(&self) -> Option<f64> {
        (self.runtime_lookups > 0)
            .then(|| self.levels.first().copied().unwrap_or(0) as f64 / self.runtime_lookups as f64)
    }

    /// Objects per segment, in segment order (DEFAULT: all in the first).
    pub fn objects(&self) -> [u64; 4] {
        let mut n = [0u64; 4];
        for s in &self.segments {
            let i = match s.class.as_str() {
                "SL" => 1,
                "HR" => 2,
                "nonHR" => 3,
                _ => 0,
            };
            n[i] += s.objects;
        }
        n
    }
}

/// One library in the real program, under callgrind.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct RunCost {
    /// "DEFAULT" or the predictor's name.
    pub name: String,
    pub library: String,
    /// Every instruction of the program (callgrind's total).
    pub program_instructions: u64,
    /// malloc-family calls (malloc, calloc, the memalign family) and the
    /// allocator's instructions per call (inclusive); free's; realloc's.
    pub mallocs: u64,
    pub per_malloc: f64,
    pub frees: u64,
    pub per_free: f64,
    pub reallocs: u64,
    pub per_realloc: f64,
    /// Identifications (the allocator's report: one per new object that is
    /// not memalign's) and their instructions (the identification's code,
    /// inline or not: [`ident_instructions`]).
    pub identifications: u64,
    pub identify_instructions: u64,
    /// Per identification, and per malloc-family call.
    pub identify_per_object: Option<f64>,
    pub identify_per_malloc: Option<f64>,
    /// Share of the program's instructions spent identifying.
    pub identify_share: f64,
    /// The allocator's report of this run.
    pub report: Option<SegReport>,
    /// The callgrind output kept.
    pub callgrind_out: PathBuf,
}

/// The allocator's costs in the real program: DEFAULT and each predictor.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Costs {
    pub command: String,
    pub default: RunCost,
    pub predictors: Vec<RunCost>,
}

impl Costs {
    /// A predictor's row, by name.
    pub fn of(&self, name: &str) -> Option<&RunCost> {
        self.predictors.iter().find(|r| r.name == name)
    }
}

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

/// The program as an argument vector (never a shell), in `cwd`, with
/// `preload` loaded.
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

/// Runs `cmd` under callgrind with each library and reads the costs.
/// `libs`: DEFAULT first, then the predictors.
pub fn costs(
    cmd: &CommandLine,
    cwd: &Path,
    libs: &[(String, PathBuf)],
    scratch: &Path,
    log: &mut dyn FnMut(&str),
) -> Result<Costs> {
    let mut rows = Vec::new();
    for (name, lib) in libs {
        let tag = name.to_ascii_lowercase().replace('+', "-");
        let (cg, cg_text, report) = callgrind_run(cmd, cwd, lib, scratch, &tag)?;
        let c = callgrind::program_costs(&cg);
        // The identification's instructions: its code's lines, inline in the
        // front end or not; one identification per new object the report counts.
        let incl = ident_instructions(&cg_text)?;
        let ids = report.as_ref().map_or(0, |r| r.runtime_lookups);
        let row = RunCost {
            name: name.clone(),
            library: lib.display().to_string(),
            program_instructions: cg.total,
            mallocs: c.malloc.calls,
            per_malloc: c.malloc.per_call().unwrap_or(0.0),
            frees: c.free.calls,
            per_free: c.free.per_call().unwrap_or(0.0),
            reallocs: c.realloc.calls,
            per_realloc: c.realloc.per_call().unwrap_or(0.0),
            identifications: ids,
            identify_instructions: incl,
            identify_per_object: (ids > 0).then(|| incl as f64 / ids as f64),
            identify_per_malloc: (ids > 0 && c.malloc.calls > 0)
                .then(|| incl as f64 / c.malloc.calls as f64),
            identify_share: incl as f64 / cg.total.max(1) as f64,
            report,
            callgrind_out: scratch.join(format!("callgrind.{tag}.out")),
        };
        log(&format!(
            "callgrind, {name}: {:.0} instructions per malloc, {:.0} per free{}",
            row.per_malloc,
            row.per_free,
            match row.identify_per_object {
                Some(i) => format!(
                    "; identification {i:.1} per new object, the return address alone decides {:.1}%",
                    100.0 * row.report.as_ref().and_then(SegReport::level0_share).unwrap_or(0.0)
                ),
                None => String::new(),
            }
        ));
        rows.push(row);
    }
    let mut it = rows.into_iter();
    let default = it.next().context("no DEFAULT library to compare with")?;
    Ok(Costs { command: cmd.text.clone(), default, predictors: it.collect() })
}

/// One callgrind run of the program: its profile, and the allocator's report.
fn callgrind_run(
    cmd: &CommandLine,
    cwd: &Path,
    library: &Path,
    scratch: &Path,
    tag: &str,
) -> Result<(callgrind::Profile, String, Option<SegReport>)> {
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
    // The program's own output file is the largest (a wrapper's, env's say, is
    // small); of two the same size, the first by name, whatever order the
    // directory lists them in.
    let mut best: Option<(u64, PathBuf)> = None;
    for e in std::fs::read_dir(&dir)? {
        let p = e?.path();
        if p.file_name().and_then(|n| n.to_str()).is_some_and(|n| n.starts_with("cg.")) {
            let len = p.metadata()?.len();
            if best.as_ref().is_none_or(|b| len > b.0 || (len == b.0 && p < b.1)) {
                best = Some((len, p));
            }
        }
    }
    let (_, path) = best.context("callgrind wrote no output")?;
    let text =
        std::fs::read_to_string(&path).with_context(|| format!("reading {}", path.display()))?;
    let prof = callgrind::parse(&text).with_context(|| path.display().to_string())?;
    let _ = std::fs::copy(&path, scratch.join(format!("callgrind.{tag}.out")));
    let rep = SegReport::read_main(&report)?;
    let _ = std::fs::remove_dir_all(&dir);
    Ok((prof, text, rep))
}

/// Is this source file the identification's (`native/segregate/seg_ident.c`
/// and `seg_ident.h`)?
fn is_ident_file(f: &str) -> bool {
    let base = f.rsplit('/').next().unwrap_or(f);
    base == "seg_ident.c" || base == "seg_ident.h"
}

/// The instructions of the identification's code in a callgrind output: every
/// cost line of its source files (the shims built for one predictor inline
/// its fast path into malloc, where callgrind names the inlined file with
/// `fi=`/`fe=`), and the calls those lines make into code of other files
/// (the module map, the unwinder). Calls into the identification's own
/// functions are not added again: their lines count where they run.
pub fn ident_instructions(text: &str) -> Result<u64> {
    let mut files = heaplab_plumb::callgrind::Names::default();
    // (cfi= names the callee's file only where it is not the caller's)
    let (mut fl, mut cur, mut callee, mut callee_named) = (false, false, false, None::<bool>);
    let mut npos = 1usize;
    let mut ir = 0usize;
    let mut pending_call = false;
    let mut total = 0u64;
    for line in text.lines() {
        let Some(&first) = line.as_bytes().first() else { continue };
        if first.is_ascii_digit() || first == b'+' || first == b'-' || first == b'*' {
            let cost: u64 =
                line.split_whitespace().nth(npos + ir).and_then(|c| c.parse().ok()).unwrap_or(0);
            if std::mem::take(&mut pending_call) {
                if cur && !callee {
                    total += cost;
                }
            } else if cur {
                total += cost;
            }
            continue;
        }
        if let Some(ev) = line.strip_prefix("events:") {
            ir = ev.split_whitespace().position(|e| e == "Ir").unwrap_or(0);
        } else if let Some(pos) = line.strip_prefix("positions:") {
            npos = pos.split_whitespace().count().max(1);
        } else if let Some((key, val)) = line.split_once('=') {
            match key {
                "fl" => {
                    fl = is_ident_file(&files.resolve(val)?);
                    cur = fl;
                }
                "fi" | "fe" => cur = is_ident_file(&files.resolve(val)?),
                "fn" => cur = fl,
                "cfi" | "cfl" => callee_named = Some(is_ident_file(&files.resolve(val)?)),
                "calls" => {
                    pending_call = true;
                    callee = callee_named.take().unwrap_or(cur);
                }
                _ => {}
            }
        }
    }
    Ok(total)
}

/// One allocator's wall times.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct WallRow {
    pub name: String,
    pub library: Option<PathBuf>,
    pub seconds: Vec<f64>,
    pub median: f64,
    /// median / glibc's median, / DEFAULT's, / mimalloc's.
    pub vs_glibc: f64,
    pub vs_default: Option<f64>,
    #[serde(default)]
    pub vs_mimalloc: Option<f64>,
    /// Every run's stdout and exit status equal glibc's.
    pub same_output: bool,
    pub exit_status: i32,
}

/// Wall times of the real program.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct WallTimes {
    pub command: String,
    pub repeats: usize,
    pub rows: Vec<WallRow>,
    /// The load average when the runs began and ended (`/proc/loadavg`: the
    /// machine may be shared).
    #[serde(default)]
    pub load_before: Option<String>,
    #[serde(default)]
    pub load_after: Option<String>,
}

impl WallTimes {
    pub fn of(&self, name: &str) -> Option<&WallRow> {
        self.rows.iter().find(|r| r.name == name)
    }

    /// In how many rounds `a` ran faster than `b`, of the rounds both ran
    /// (the runs are interleaved: a round runs every allocator once).
    pub fn rounds_faster(&self, a: &str, b: &str) -> Option<(usize, usize)> {
        let (a, b) = (self.of(a)?, self.of(b)?);
        let n = a.seconds.len().min(b.seconds.len());
        let k = a.seconds.iter().zip(&b.seconds).filter(|(x, y)| x < y).count();
        (n > 0).then_some((k, n))
    }
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

fn loadavg() -> Option<String> {
    std::fs::read_to_string("/proc/loadavg")
        .ok()
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
}

/// Runs `cmd` with glibc and each library, `repeats` rounds, interleaved.
/// The libraries named "DEFAULT" and "mimalloc" are the other baselines.
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
    // glibc's first run's output and status are the reference (rounds after
    // the first may run a library before glibc's run of that round)
    let mut expected: Vec<u8> = Vec::new();
    let mut expected_status = 0;
    let load_before = loadavg();
    for round in 0..repeats.max(1) {
        for i in heaplab_plumb::rounds::order(all.len(), round) {
            let (name, lib) = &all[i];
            let out = scratch.join(format!("wall.{}.out", name.replace(['/', ' '], "_")));
            let f = std::fs::File::create(&out)?;
            let t0 = Instant::now();
            let st = command(cmd, cwd, lib.as_deref())?
                .stdout(f)
                .stderr(Stdio::null())
                .status()
                .with_context(|| format!("running `{}`", cmd.text))?;
            secs[i].push(t0.elapsed().as_secs_f64());
            status[i] = st.code().unwrap_or(-1);
            if i == 0 && round == 0 {
                if !st.success() {
                    bail!("`{}` fails with glibc ({st}): fix the command first", cmd.text);
                }
                expected = std::fs::read(&out)?;
                expected_status = status[0];
            } else {
                let a = std::fs::read(&out)?;
                if a != expected || status[i] != expected_status {
                    same[i] = false;
                }
            }
        }
    }
    let med: Vec<f64> = secs.iter().map(|s| median(s)).collect();
    let base = |n: &str| all.iter().position(|(m, _)| m == n).map(|i| med[i]);
    let (def, mi) = (base("DEFAULT"), base("mimalloc"));
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
            vs_mimalloc: mi.map(|m| med[i] / m.max(1e-9)),
            same_output: same[i],
            exit_status: status[i],
        })
        .collect();
    Ok(WallTimes { command: cmd.text.clone(), repeats, rows, load_before, load_after: loadavg() })
}

#[cfg(test)]
mod tests {
    use super::ident_instructions;

    #[test]
    fn ident_instructions_counts_the_identification_s_lines_inline_or_not() {
        // malloc (seg_front.h) with the identification inline (fi=seg_ident.h),
        // a call from it to hl_seg_ident_miss (seg_ident.c: its lines count
        // where they run), which calls hl_seg_os_key (seg_os.c: added at the
        // call); then free, whose lines are not the identification's.
        let text = "events: Ir\npositions: line\n\
            fl=(1) /n/seg_front.h\nfn=(1) malloc\n10 5\n\
            fi=(2) /n/seg_ident.h\n20 7\n+1 3\n\
            cfn=(2) hl_seg_ident_miss\ncalls=2 30\n+2 100\n\
            fe=(1)\n11 4\n\
            fl=(3) /n/seg_ident.c\nfn=(2)\n30 60\n\
            cfi=(4) /n/seg_os.c\ncfn=(3) hl_seg_os_key\ncalls=1 5\n31 40\n\
            fl=(4)\nfn=(3)\n5 40\n\
            fl=(1)\nfn=(4) free\n50 9\n";
        // 7 + 3 (inline) + 60 (hl_seg_ident_miss's own) + 40 (its call out)
        assert_eq!(ident_instructions(text).unwrap(), 110);
    }
}
