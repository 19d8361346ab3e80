//! `heaplab record -o FILE [options] -- PROG ARGS...`: runs a program under
//! the recording agent (`build/lib/libheaplab-record.so`, LD_PRELOAD) and
//! passes its exit status through, the way a shell would.
//!
//! The agent takes its settings from `HEAPLAB_RECORD_*` variables (see
//! `native/record/README.md`); the flags here set them. After the run, the
//! traces written (the program's, and one per fork child or exec'd program)
//! are listed on stderr with their event counts and sizes.

use crate::{human, paths};
use anyhow::{bail, Context, Result};
use heaplab_trace::block::BlockHeader;
use heaplab_trace::format::{codec, kind, BLOCK_HEADER_LEN, FILE_HEADER_LEN};
use heaplab_trace::reader::{parse_end, parse_meta};
use heaplab_trace::{End, EndReason, Meta, TraceReader};
use std::ffi::OsString;
use std::fs::File;
use std::io::{self, Read, Seek, SeekFrom};
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicI32, Ordering};

/// Run a program and record what it asks of malloc.
///
/// The trace of the program goes to FILE. A fork child, or a program the
/// recorded program execs or spawns, writes FILE.PID (FILE.PID.N when an exec
/// keeps the pid). Child traces left by an earlier recording to the same FILE
/// are removed first. The exit status is the program's; a program killed by
/// signal N gives 128+N, one that cannot be found 127, one that cannot be run
/// 126, as in a shell.
///
/// Examples:
///   heaplab record -o wc.hltrace -- perl wc.pl input.txt
///   heaplab record -o py.hltrace --stack-depth 0 -- env PYTHONMALLOC=malloc python3 x.py
#[derive(clap::Args)]
#[command(verbatim_doc_comment)]
pub struct Args {
    /// The trace to write.
    #[arg(short = 'o', long = "output", value_name = "FILE")]
    output: PathBuf,
    /// Frames per call stack; 0 turns stacks off (fastest).
    #[arg(long, default_value_t = 8, value_parser = clap::value_parser!(u32).range(0..=128))]
    stack_depth: u32,
    /// Record a call stack for frees too (allocations only by default).
    #[arg(long)]
    free_stacks: bool,
    /// Nanoseconds per unit of event time. The default, 10 us, keeps the
    /// time column to ~0.07 byte per event (1 us costs ~0.2); lifetimes
    /// shorter than that are exact in events and bytes allocated anyway.
    #[arg(long, value_name = "NS", default_value_t = 10_000, value_parser = clap::value_parser!(u64).range(1..=1_000_000_000))]
    time_unit_ns: u64,
    /// zstd level for the trace's blocks (1-19).
    #[arg(long, value_name = "LEVEL", default_value_t = 3, value_parser = clap::value_parser!(u32).range(1..=19))]
    compress: u32,
    /// Store blocks uncompressed.
    #[arg(long, conflicts_with = "compress")]
    no_compress: bool,
    /// Events per block (1..=1048576).
    #[arg(long, value_name = "N", default_value_t = 65536, value_parser = clap::value_parser!(u32).range(1..=1_048_576))]
    block_events: u32,
    /// Write a block at least this often, so a killed program leaves a trace
    /// readable up to its last few hundred milliseconds.
    #[arg(long, value_name = "MS", default_value_t = 200, value_parser = clap::value_parser!(u64).range(1..=3_600_000))]
    flush_ms: u64,
    /// Do not record fork children (they run unrecorded).
    #[arg(long)]
    no_follow_forks: bool,
    /// Size of each thread's event ring in KiB (rounded up to a power of two).
    #[arg(long, value_name = "KIB", default_value_t = 8192, value_parser = clap::value_parser!(u64).range(64..=1_048_576))]
    ring_kb: u64,
    /// Do not list the traces written.
    #[arg(short, long)]
    quiet: bool,
    /// Record every load and store too (the REFS stream, for `heaplab
    /// locality`): runs the program under heaplab's Valgrind tool, which
    /// replaces malloc, instead of LD_PRELOADing the agent. Much slower (the
    /// program runs under Valgrind); fork children are not recorded. Event
    /// times stay in microseconds (slowed by Valgrind); the REFS stream
    /// times events and references in instructions.
    #[arg(long)]
    refs: bool,
    /// The program and its arguments.
    #[arg(last = true, required = true, value_name = "PROG ARGS")]
    command: Vec<OsString>,
}

static CHILD: AtomicI32 = AtomicI32::new(0);

extern "C" fn forward(sig: libc::c_int) {
    let pid = CHILD.load(Ordering::Relaxed);
    if pid > 0 {
        // SAFETY: kill is async-signal-safe; pid is the child we started.
        unsafe {
            libc::kill(pid, sig);
        }
    }
}

/// `FILE.PID` or `FILE.PID.N`: the name a child process's trace gets.
fn is_child_trace(name: &str, base: &str) -> bool {
    let Some(rest) = name.strip_prefix(base).and_then(|r| r.strip_prefix('.')) else {
        return false;
    };
    let mut parts = rest.split('.');
    let ok =
        |p: Option<&str>| p.is_some_and(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()));
    let first = parts.next();
    let second = parts.next();
    ok(first) && (second.is_none() || ok(second)) && parts.next().is_none()
}

fn child_traces(out: &Path) -> Result<Vec<PathBuf>> {
    let dir = out.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(Path::new("."));
    let base =
        out.file_name().and_then(|b| b.to_str()).context("the output name must be valid UTF-8")?;
    let mut v: Vec<(std::time::SystemTime, PathBuf)> = Vec::new();
    for e in std::fs::read_dir(dir).with_context(|| format!("reading {}", dir.display()))? {
        let e = e?;
        if let Some(n) = e.file_name().to_str() {
            if is_child_trace(n, base) {
                let t = e.metadata().and_then(|m| m.modified()).unwrap_or(std::time::UNIX_EPOCH);
                v.push((t, e.path()));
            }
        }
    }
    v.sort();
    Ok(v.into_iter().map(|(_, p)| p).collect())
}

/// What the listing shows of one trace.
struct Summary {
    meta: Option<Meta>,
    events: u64,
    end: Option<End>,
    problem: Option<String>,
    bytes: u64,
}

/// Reads a trace's META and END by walking block headers (payloads are
/// skipped), so listing a large trace is quick. A trace whose last block is
/// not END is read through to count its events.
fn summarize(path: &Path) -> Summary {
    let bytes = std::fs::metadata(path).map(|m| m.len()).unwrap_or(0);
    let mut s = Summary { meta: None, events: 0, end: None, problem: None, bytes };
    let walk = || -> io::Result<(Option<Meta>, Option<End>, bool)> {
        let mut f = File::open(path)?;
        let mut h = [0u8; FILE_HEADER_LEN];
        f.read_exact(&mut h)?;
        let (mut meta, mut end, mut last_is_end) = (None, None, false);
        let mut hb = [0u8; BLOCK_HEADER_LEN];
        loop {
            match f.read_exact(&mut hb) {
                Ok(()) => {}
                Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => break,
                Err(e) => return Err(e),
            }
            let bh = BlockHeader::parse(&hb);
            let small = bh.codec == codec::NONE && bh.stored_len < (1 << 20);
            if small && (bh.kind == kind::META || bh.kind == kind::END) {
                let mut p = vec![0u8; bh.stored_len as usize];
                f.read_exact(&mut p)?;
                if bh.kind == kind::META {
                    meta = parse_meta(&p).ok();
                } else {
                    end = parse_end(&p).ok();
                }
            } else {
                f.seek(SeekFrom::Current(i64::from(bh.stored_len)))?;
            }
            last_is_end = bh.kind == kind::END;
        }
        Ok((meta, end, last_is_end))
    };
    match walk() {
        Ok((meta, end, true)) => {
            s.meta = meta;
            s.events = end.as_ref().map_or(0, |e| e.events);
            s.end = end;
        }
        _ => match TraceReader::open(path) {
            Ok(mut r) => {
                s.meta = Some(r.meta().clone());
                loop {
                    match r.next_event() {
                        Ok(Some(_)) => s.events += 1,
                        Ok(None) => break,
                        Err(e) => {
                            s.problem = Some(if e.is_cut_short() {
                                "cut short".into()
                            } else {
                                e.problem.to_string()
                            });
                            break;
                        }
                    }
                }
                s.end = r.ends().last().cloned();
            }
            Err(e) => s.problem = Some(e.problem.to_string()),
        },
    }
    s
}

fn how_it_ended(s: &Summary) -> String {
    if let Some(p) = &s.problem {
        return p.clone();
    }
    match &s.end {
        Some(e) => match e.reason {
            EndReason::Exit => format!("exit {}", e.status),
            EndReason::Exec => "exec".into(),
            EndReason::Signal => format!("signal {}", e.status),
            EndReason::Closed => "closed".into(),
            EndReason::Other(c) => format!("end {c}"),
        },
        None => "no END".into(),
    }
}

fn signal_name(sig: i32) -> String {
    // SAFETY: strsignal returns a pointer to a static or thread-local string,
    // which is copied at once.
    let p = unsafe { libc::strsignal(sig) };
    if p.is_null() {
        return format!("signal {sig}");
    }
    // SAFETY: p is a valid NUL-terminated string (checked non-null above).
    unsafe { std::ffi::CStr::from_ptr(p) }.to_string_lossy().into_owned()
}

pub fn run(a: Args) -> Result<i32> {
    if a.refs {
        return record_refs(a);
    }
    let agent = paths::lib("libheaplab-record.so");
    if !agent.exists() {
        bail!(
            "the recording agent {} is not built; run `make -C native` (or `make`) first",
            agent.display()
        );
    }
    let agent_s = agent.to_str().context("the agent's path must be valid UTF-8")?;
    if agent_s.contains([' ', ':']) {
        bail!(
            "LD_PRELOAD cannot hold the agent's path {agent_s:?}: it contains a space or a colon"
        );
    }
    let out = std::path::absolute(&a.output)
        .with_context(|| format!("resolving {}", a.output.display()))?;
    if out.is_dir() {
        bail!("{} is a directory; -o takes the trace's file name", out.display());
    }
    // The program's trace claims FILE only when it is empty: start it empty.
    File::create(&out).with_context(|| format!("cannot create {}", out.display()))?;
    for old in child_traces(&out)? {
        std::fs::remove_file(&old)
            .with_context(|| format!("removing the old child trace {}", old.display()))?;
    }

    let preload = match std::env::var("LD_PRELOAD") {
        Ok(p) if !p.trim().is_empty() => format!("{agent_s}:{p}"),
        _ => agent_s.to_string(),
    };
    let prog = &a.command[0];
    let mut cmd = Command::new(prog);
    cmd.args(&a.command[1..])
        .env("LD_PRELOAD", preload)
        .env("HEAPLAB_RECORD_OUT", &out)
        .env("HEAPLAB_RECORD_STACK_DEPTH", a.stack_depth.to_string())
        .env("HEAPLAB_RECORD_FREE_STACKS", u8::from(a.free_stacks).to_string())
        .env("HEAPLAB_RECORD_TIME_UNIT_NS", a.time_unit_ns.to_string())
        .env(
            "HEAPLAB_RECORD_COMPRESS",
            if a.no_compress { "0".into() } else { a.compress.to_string() },
        )
        .env("HEAPLAB_RECORD_BLOCK_EVENTS", a.block_events.to_string())
        .env("HEAPLAB_RECORD_FLUSH_MS", a.flush_ms.to_string())
        .env("HEAPLAB_RECORD_FOLLOW_FORKS", if a.no_follow_forks { "0" } else { "1" })
        .env("HEAPLAB_RECORD_RING_KB", a.ring_kb.to_string());

    let name = prog.to_string_lossy();
    let mut child = match cmd.spawn() {
        Ok(c) => c,
        Err(e) => {
            // what a shell says and returns
            let _ = std::fs::remove_file(&out);
            let (msg, code) = match e.kind() {
                io::ErrorKind::NotFound if !name.contains('/') => {
                    ("command not found".to_string(), 127)
                }
                io::ErrorKind::NotFound => ("No such file or directory".to_string(), 127),
                io::ErrorKind::PermissionDenied if Path::new(prog).is_dir() => {
                    ("Is a directory".to_string(), 126)
                }
                io::ErrorKind::PermissionDenied => ("Permission denied".to_string(), 126),
                _ => (e.to_string(), 126),
            };
            eprintln!("heaplab record: {name}: {msg}");
            return Ok(code);
        }
    };
    // Like a shell waiting for a foreground job: ^C and ^\ reach the program
    // through the terminal's process group; TERM and HUP sent to us are passed on.
    CHILD.store(child.id() as i32, Ordering::Relaxed);
    // SAFETY: installing dispositions for signals; `forward` only calls kill.
    unsafe {
        libc::signal(libc::SIGINT, libc::SIG_IGN);
        libc::signal(libc::SIGQUIT, libc::SIG_IGN);
        libc::signal(libc::SIGTERM, forward as extern "C" fn(libc::c_int) as libc::sighandler_t);
        libc::signal(libc::SIGHUP, forward as extern "C" fn(libc::c_int) as libc::sighandler_t);
    }
    let status = child.wait().with_context(|| format!("waiting for {name}"))?;
    let code = match (status.code(), status.signal()) {
        (Some(c), _) => c,
        (None, Some(s)) => 128 + s,
        _ => 128,
    };

    // A recording that lost events says so, and fails even if the program
    // did not: the agent's END counts what it could not record, and a
    // program that exited without its trace's END lost the end of it.
    let main_trace = summarize(&out);
    let mut lost = main_trace.end.as_ref().map_or(0, |e| e.lost);
    for c in child_traces(&out)? {
        lost += summarize(&c).end.as_ref().map_or(0, |e| e.lost);
    }
    let unfinished = status.code().is_some() && main_trace.bytes > 0 && main_trace.end.is_none();
    let incomplete = lost > 0 || unfinished;
    if incomplete {
        eprintln!(
            "heaplab record: the recording is INCOMPLETE: {}",
            if lost > 0 {
                format!("{lost} events were lost (see the agent's messages above)")
            } else {
                format!("{} has no END block although the program exited", out.display())
            }
        );
    }
    let code = if incomplete && code == 0 { 1 } else { code };

    if !a.quiet {
        let how = match (status.code(), status.signal()) {
            (Some(c), _) => format!("exited with status {c}"),
            (None, Some(s)) => format!("was killed by signal {s} ({})", signal_name(s)),
            _ => "ended".into(),
        };
        let mut traces = vec![out.clone()];
        traces.extend(child_traces(&out)?);
        let rows: Vec<(PathBuf, Summary)> = traces
            .into_iter()
            .map(|p| {
                let s = summarize(&p);
                (p, s)
            })
            .filter(|(_, s)| s.bytes > 0)
            .collect();
        if rows.is_empty() {
            eprintln!(
                "heaplab record: {name} {how}; no trace was written (a static or setuid program ignores LD_PRELOAD)"
            );
            let _ = std::fs::remove_file(&out);
            return Ok(code);
        }
        let plural = if rows.len() == 1 { "" } else { "s" };
        eprintln!("heaplab record: {name} {how}; {} trace{plural}:", rows.len());
        let width = rows.iter().map(|(p, _)| p.display().to_string().len()).max().unwrap_or(0);
        for (p, s) in &rows {
            let per = if s.events > 0 {
                format!("{:.2} B/event", s.bytes as f64 / s.events as f64)
            } else {
                String::new()
            };
            let argv = s.meta.as_ref().map(|m| m.command_line()).unwrap_or_default();
            let argv: String = argv.chars().take(60).collect();
            eprintln!(
                "  {:<width$}  {:>13} events  {:>10}  {:>13}  {:<10} {}",
                p.display(),
                human::count(s.events),
                human::bytes(s.bytes),
                per,
                how_it_ended(s),
                argv
            );
        }
    }
    Ok(code)
}

/// `--refs`: under the Valgrind tool (crates/heaplab-refs does the work).
fn record_refs(a: Args) -> Result<i32> {
    use heaplab_refs::{record, vg};
    let tools = vg::VgTools::from_lib_dir(&paths::build_dir().join("lib"));
    let opts = record::Options {
        stack_depth: a.stack_depth.min(64),
        free_stacks: a.free_stacks,
        refs: true,
        codec: if a.no_compress {
            heaplab_trace::Codec::None
        } else {
            heaplab_trace::Codec::Zstd(a.compress as i32)
        },
        refs_codec: if a.no_compress {
            heaplab_trace::Codec::None
        } else {
            heaplab_trace::Codec::Zstd(1)
        },
        block_events: a.block_events as usize,
    };
    let name = a.command[0].to_string_lossy().into_owned();
    if vg::resolve_program(&a.command[0]).is_none() {
        // what a shell says and returns
        let msg =
            if name.contains('/') { "No such file or directory" } else { "command not found" };
        eprintln!("heaplab record: {name}: {msg}");
        return Ok(127);
    }
    // ^C and ^\ reach the program through the terminal; we finish the trace.
    // SAFETY: setting dispositions before the child starts; no handler runs Rust code.
    unsafe {
        libc::signal(libc::SIGINT, libc::SIG_IGN);
        libc::signal(libc::SIGQUIT, libc::SIG_IGN);
    }
    let t0 = std::time::Instant::now();
    let (ended, s) = match record::record(&tools, &a.command, &a.output, &opts) {
        Ok(r) => r,
        Err(e) => {
            if std::fs::metadata(&a.output).is_ok_and(|m| m.len() == 0) {
                let _ = std::fs::remove_file(&a.output);
            }
            return Err(e);
        }
    };
    if !a.quiet {
        let how = match ended {
            vg::Ended::Exit(c) => format!("exited with status {c}"),
            vg::Ended::Signal(sig) => format!("was killed by signal {sig} ({})", signal_name(sig)),
        };
        let refs = s.refs.refs();
        eprintln!(
            "heaplab record: {name} {how} under valgrind after {:.1} s; {}: {} events, {} references ({} heap), {} instructions, {} ({:.2} B/reference)",
            t0.elapsed().as_secs_f64(),
            a.output.display(),
            human::count(s.events),
            human::count(refs),
            human::count(s.refs.heap_refs()),
            s.instructions.map(human::count).unwrap_or_else(|| "?".into()),
            human::bytes(s.trace_bytes),
            if refs > 0 { s.trace_bytes as f64 / refs as f64 } else { 0.0 },
        );
    }
    Ok(ended.code())
}

#[cfg(test)]
mod tests {
    use super::is_child_trace;

    #[test]
    fn child_trace_names() {
        assert!(is_child_trace("t.hltrace.123", "t.hltrace"));
        assert!(is_child_trace("t.hltrace.123.2", "t.hltrace"));
        assert!(!is_child_trace("t.hltrace", "t.hltrace"));
        assert!(!is_child_trace("t.hltrace.txt", "t.hltrace"));
        assert!(!is_child_trace("t.hltrace.12.x", "t.hltrace"));
        assert!(!is_child_trace("t.hltrace.1.2.3", "t.hltrace"));
        assert!(!is_child_trace("t.hltrace.", "t.hltrace"));
    }
}
