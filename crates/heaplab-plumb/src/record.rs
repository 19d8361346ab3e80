//! The recording driver behind `heaplab record`: runs a program under the
//! recording agent (`libheaplab-record.so`, LD_PRELOAD) and puts the traces
//! it wrote where `-o` says, without ever writing through a link or
//! deleting a file heaplab did not write.
//!
//! ```text
//!   -o DIR/NAME
//!   mkdtemp DIR/.NAME.heaplab-Xxxxxx/   (0700, in the target directory: one file system)
//!      HEAPLAB_RECORD_OUT = that/NAME   the agent: the first process claims NAME, every
//!                                       other one (fork child, exec'd program) writes
//!                                       NAME.PID or NAME.PID.N there (O_NOFOLLOW, 0600)
//!   program runs in the foreground (process::Foreground: TERM/HUP forwarded)
//!   that/NAME       ─ rename ─▶ DIR/NAME          (replaces a regular file; a link
//!                                                  only with --force, the link itself)
//!   that/NAME.PID.. ─ rename, never replacing ─▶ DIR/NAME.PID.. (an existing name gets
//!                                                  the next free .N instead)
//!   rmdir that
//! ```
//!
//! Invariants: no file outside the private directory is opened for writing;
//! the only names replaced are `-o` itself (a regular file, or a link with
//! --force); the traces are 0600 (they hold command lines and paths). A
//! recording whose program is killed still yields its traces, readable to
//! their last block. The new set of traces is returned, main trace first;
//! traces of earlier recordings are left alone.

use crate::layout::Layout;
use crate::output::{self, Existing};
use crate::process::{self, Ended, Foreground};
use crate::scratch::mkdtemp;
use anyhow::{bail, Context, Result};
use heaplab_trace::block::BlockHeader;
use heaplab_trace::format::{
    codec, kind, BLOCK_HEADER_LEN, BLOCK_MAGIC, FILE_HEADER_LEN, FILE_MAGIC,
};
use heaplab_trace::reader::{parse_end, parse_meta};
use heaplab_trace::{End, EndReason, Meta, TraceReader};
use std::ffi::{OsStr, OsString};
use std::fs::File;
use std::io::{self, Read, Seek, SeekFrom};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// The agent's settings (`HEAPLAB_RECORD_*`, native/record/README.md).
#[derive(Debug, Clone)]
pub struct Settings {
    pub stack_depth: u32,
    pub free_stacks: bool,
    pub time_unit_ns: u64,
    /// zstd level; None: blocks stored uncompressed.
    pub compress: Option<u32>,
    pub block_events: u32,
    pub flush_ms: u64,
    pub follow_forks: bool,
    /// KiB of event chunks one thread may hold before it waits for the writer.
    pub ring_kb: u64,
    /// MiB of event chunks all threads together may hold (beyond two each).
    pub ring_total_mb: u64,
    /// Which processes are recorded (`--follow`).
    pub follow: Follow,
}

/// Which processes of a recording write traces.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Follow {
    /// Every process: fork children, the programs they run, exec chains.
    #[default]
    Fork,
    /// The launched process only, through its execs (wrappers such as
    /// `env` or a shell script that execs the real program).
    Exec,
    /// The launched process's first program only.
    None,
}

impl Follow {
    pub fn name(self) -> &'static str {
        match self {
            Follow::Fork => "fork",
            Follow::Exec => "exec",
            Follow::None => "none",
        }
    }
}

impl Default for Settings {
    fn default() -> Self {
        Settings {
            stack_depth: 8,
            free_stacks: false,
            time_unit_ns: 1,
            compress: Some(1),
            block_events: 65536,
            flush_ms: 200,
            follow_forks: true,
            ring_kb: 8192,
            ring_total_mb: 256,
            follow: Follow::Fork,
        }
    }
}

/// One recording.
pub struct Request<'a> {
    /// `-o`: the main trace's name.
    pub output: &'a Path,
    pub settings: &'a Settings,
    /// The program and its arguments.
    pub command: &'a [OsString],
    /// Extra environment for the program.
    pub env: Vec<(OsString, OsString)>,
    /// The program's stdin and stdout (None: heaplab's own).
    pub stdin: Option<Stdio>,
    pub stdout: Option<Stdio>,
}

/// What a recording made.
#[derive(Debug)]
pub struct Recording {
    pub ended: Ended,
    /// The traces written, main first (when the program wrote one), then
    /// its children's by time.
    pub traces: Vec<PathBuf>,
    /// Whether the first trace is the main one (`-o` itself): the launched
    /// process, after any chain of execs (wrappers such as `env`, pyenv's
    /// shims or a shell script that execs the real program).
    pub has_main: bool,
    /// The traces of the launched process's earlier programs (the wrappers
    /// it exec'd through), oldest first; they are among `traces`.
    pub wrappers: Vec<PathBuf>,
    /// Traces that could not be moved out of the private directory
    /// (a child still running): where they are.
    pub left: Option<PathBuf>,
}

/// How the program ended up.
#[derive(Debug)]
pub enum Outcome {
    Recorded(Recording),
    /// It could not be started: what a shell says, and its exit code
    /// (127 not found, 126 not runnable).
    NotStarted {
        message: String,
        code: i32,
    },
}

/// The agent, checked: present, and a path LD_PRELOAD can hold.
pub fn agent(layout: &Layout) -> Result<PathBuf> {
    let agent = layout.lib_file("libheaplab-record.so");
    if !agent.exists() {
        bail!("the recording agent {} is not built; {}", agent.display(), layout.build_hint());
    }
    let b = agent.as_os_str().as_bytes();
    if b.contains(&b' ') || b.contains(&b':') {
        bail!(
            "LD_PRELOAD cannot hold the agent's path {:?}: it contains a space or a colon",
            agent.display()
        );
    }
    Ok(agent)
}

/// Checks `-o` before anything runs: a link (without --force), a
/// directory, a device or FIFO are refused with the reason.
pub fn check_output(output: &Path) -> Result<PathBuf> {
    let out =
        std::path::absolute(output).with_context(|| format!("resolving {}", output.display()))?;
    if out.file_name().is_none() {
        bail!("{}: -o takes the trace's file name", out.display());
    }
    match output::check(&out).map_err(|e| e.context("heaplab record -o"))? {
        Existing::Special => bail!(
            "{} is not a regular file; -o takes the name of the trace file to write \
             (child processes' traces go beside it as FILE.PID)",
            out.display()
        ),
        Existing::Absent | Existing::Regular => Ok(out),
    }
}

/// Renames `from` to `to` unless `to` exists (renameat2 RENAME_NOREPLACE,
/// or link + unlink where the file system lacks it). Err(AlreadyExists) then.
fn rename_noreplace(from: &Path, to: &Path) -> io::Result<()> {
    let c = |p: &Path| {
        std::ffi::CString::new(p.as_os_str().as_bytes())
            .map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))
    };
    let (f, t) = (c(from)?, c(to)?);
    // SAFETY: two valid NUL-terminated paths, relative to the cwd.
    let r = unsafe {
        libc::renameat2(
            libc::AT_FDCWD,
            f.as_ptr(),
            libc::AT_FDCWD,
            t.as_ptr(),
            libc::RENAME_NOREPLACE,
        )
    };
    if r == 0 {
        return Ok(());
    }
    let e = io::Error::last_os_error();
    match e.raw_os_error() {
        Some(libc::EINVAL) | Some(libc::ENOSYS) => {
            std::fs::hard_link(from, to)?;
            std::fs::remove_file(from)
        }
        _ => Err(e),
    }
}

/// `NAME.PID` or `NAME.PID.N`: the name a child process's trace gets.
pub fn is_child_trace(name: &str, base: &str) -> bool {
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

/// Records `req.command` (see the module docs).
pub fn record(layout: &Layout, req: Request) -> Result<Outcome> {
    let agent = agent(layout)?;
    let out = check_output(req.output)?;
    let dir = out.parent().expect("an absolute file name has a parent").to_path_buf();
    let base = out.file_name().expect("checked").to_owned();
    let base_s = base.to_str().context("the output name must be valid UTF-8")?.to_string();
    let private = mkdtemp(&dir, &format!(".{base_s}.heaplab-"))?;
    let inner = private.join(&base);
    let s = req.settings;
    let preload = match std::env::var_os("LD_PRELOAD") {
        Some(p) if !p.to_string_lossy().trim().is_empty() => {
            let mut v = agent.clone().into_os_string();
            v.push(":");
            v.push(p);
            v
        }
        _ => agent.clone().into_os_string(),
    };
    let prog = &req.command[0];
    let mut cmd = Command::new(prog);
    cmd.args(&req.command[1..])
        .envs(req.env.iter().map(|(k, v)| (k, v)))
        .env("LD_PRELOAD", preload)
        .env("HEAPLAB_RECORD_OUT", &inner)
        .env("HEAPLAB_RECORD_STACK_DEPTH", s.stack_depth.to_string())
        .env("HEAPLAB_RECORD_FREE_STACKS", u8::from(s.free_stacks).to_string())
        .env("HEAPLAB_RECORD_TIME_UNIT_NS", s.time_unit_ns.to_string())
        .env("HEAPLAB_RECORD_COMPRESS", s.compress.map_or("0".into(), |c| c.to_string()))
        .env("HEAPLAB_RECORD_BLOCK_EVENTS", s.block_events.to_string())
        .env("HEAPLAB_RECORD_FLUSH_MS", s.flush_ms.to_string())
        .env(
            "HEAPLAB_RECORD_FOLLOW_FORKS",
            if s.follow_forks && s.follow == Follow::Fork { "1" } else { "0" },
        )
        .env("HEAPLAB_RECORD_FOLLOW", s.follow.name())
        .env("HEAPLAB_RECORD_LAUNCHER", std::process::id().to_string())
        .env("HEAPLAB_RECORD_RING_KB", s.ring_kb.to_string())
        .env("HEAPLAB_RECORD_RING_TOTAL_MB", s.ring_total_mb.to_string());
    if let Some(i) = req.stdin {
        cmd.stdin(i);
    }
    if let Some(o) = req.stdout {
        cmd.stdout(o);
    }
    let finished = match Foreground::default().run(&mut cmd) {
        Ok(f) => f,
        Err(e) => {
            let _ = std::fs::remove_dir_all(&private);
            let (message, code) = process::spawn_failure(prog, &e);
            return Ok(Outcome::NotStarted { message, code });
        }
    };
    // TERM/HUP arriving now are held until the traces are in place.
    let moved = move_out(&private, &base_s, &out);
    finished.signals.release();
    let (traces, has_main, left, wrappers) = moved?;
    Ok(Outcome::Recorded(Recording { ended: finished.ended, traces, has_main, left, wrappers }))
}

/// The main trace: the launched process (a child of `launcher`) after its
/// execs. The agent names its first program's trace `base`, the next
/// `base.PID`, then `base.PID.1`, ...; the last of that chain is the main
/// one. When it is not `base`, it takes `base` and the first program's
/// trace takes `base.PID.0` (a name the agent never uses). Returns the
/// wrappers' new names, oldest first.
fn name_main(private: &Path, base: &str, launcher: u32) -> Vec<String> {
    let Ok(rd) = std::fs::read_dir(private) else { return Vec::new() };
    let mut chain: Vec<(u64, u64, String)> = Vec::new();
    for e in rd.flatten() {
        let Some(n) = e.file_name().to_str().map(str::to_string) else { continue };
        if n != base && !is_child_trace(&n, base) {
            continue;
        }
        let s = summarize(&private.join(&n));
        if let Some(m) = &s.meta {
            if m.ppid == Some(u64::from(launcher)) {
                chain.push((m.start_ns, if n == base { 0 } else { 1 }, n));
            }
        }
    }
    chain.sort();
    let Some(first) = chain.first() else { return Vec::new() };
    if chain.len() < 2 || first.2 != base {
        return Vec::new();
    }
    let last = chain.last().expect("two or more").2.clone();
    let pid = summarize(&private.join(base)).meta.map_or(0, |m| m.pid);
    let parked = format!("{base}.{pid}.0");
    let moved = std::fs::rename(private.join(base), private.join(&parked))
        .and_then(|()| std::fs::rename(private.join(&last), private.join(base)));
    if moved.is_err() {
        return Vec::new();
    }
    chain[..chain.len() - 1]
        .iter()
        .map(|c| if c.2 == base { parked.clone() } else { c.2.clone() })
        .collect()
}

/// Moves the traces out of the private directory (see the module docs).
#[allow(clippy::type_complexity)]
fn move_out(
    private: &Path,
    base: &str,
    out: &Path,
) -> Result<(Vec<PathBuf>, bool, Option<PathBuf>, Vec<PathBuf>)> {
    let dir = out.parent().expect("absolute");
    let wrapper_names = name_main(private, base, std::process::id());
    let mut wrappers = Vec::new();
    let mut children: Vec<(std::time::SystemTime, String)> = Vec::new();
    let mut has_main = false;
    for e in std::fs::read_dir(private).with_context(|| format!("reading {}", private.display()))? {
        let e = e?;
        let n = e.file_name();
        let Some(n) = n.to_str() else { continue };
        if n == base {
            has_main = true;
        } else if is_child_trace(n, base) {
            let t = e.metadata().and_then(|m| m.modified()).unwrap_or(std::time::UNIX_EPOCH);
            children.push((t, n.to_string()));
        }
    }
    children.sort();
    let mut traces = Vec::new();
    if has_main {
        // -o itself: replace what is there (checked: a regular file, or a
        // link the user asked to replace); never write through it.
        let from = private.join(base);
        std::fs::rename(&from, out)
            .with_context(|| format!("moving the trace to {}", out.display()))?;
        traces.push(out.to_path_buf());
    }
    for (_, n) in children {
        let from = private.join(&n);
        let mut to = dir.join(&n);
        let mut k = 1;
        loop {
            match rename_noreplace(&from, &to) {
                Ok(()) => break,
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists && k < 10_000 => {
                    // an earlier recording's (or someone else's) file: keep it
                    to = dir.join(format!("{n}.{k}"));
                    if !is_child_trace(&format!("{n}.{k}"), base) {
                        to = dir.join(format!("{n}-{k}"));
                    }
                    k += 1;
                }
                Err(e) => {
                    return Err(e).with_context(|| format!("moving the trace to {}", to.display()))
                }
            }
        }
        if wrapper_names.contains(&n) {
            wrappers.push(to.clone());
        }
        traces.push(to);
    }
    let left = match std::fs::remove_dir(private) {
        Ok(()) => None,
        Err(_) => Some(private.to_path_buf()),
    };
    Ok((traces, has_main, left, wrappers))
}

/// What the listing shows of one trace.
#[derive(Debug, Clone)]
pub struct Summary {
    pub meta: Option<Meta>,
    pub events: u64,
    pub end: Option<End>,
    pub problem: Option<String>,
    pub bytes: u64,
}

/// Reads a trace's META and END by walking block headers (payloads are
/// skipped), so listing a large trace is quick. A trace whose last block is
/// not END, or whose headers do not check, is read through the reader to
/// count its events and name its problem. The walk never passes the file's
/// size, so it ends on any input.
pub fn summarize(path: &Path) -> Summary {
    let bytes = std::fs::metadata(path).map(|m| m.len()).unwrap_or(0);
    let mut s = Summary { meta: None, events: 0, end: None, problem: None, bytes };
    let walk = || -> io::Result<Option<(Option<Meta>, Option<End>)>> {
        let mut f = File::open(path)?;
        if !f.metadata()?.is_file() {
            return Ok(None);
        }
        let mut h = [0u8; FILE_HEADER_LEN];
        f.read_exact(&mut h)?;
        if h[..8] != FILE_MAGIC {
            return Ok(None);
        }
        let (mut meta, mut end, mut last_is_end) = (None, None, false);
        let mut pos = FILE_HEADER_LEN as u64;
        let mut hb = [0u8; BLOCK_HEADER_LEN];
        while pos < bytes {
            f.read_exact(&mut hb)?;
            if hb[..4] != BLOCK_MAGIC {
                return Ok(None);
            }
            let bh = BlockHeader::parse(&hb);
            pos += BLOCK_HEADER_LEN as u64 + u64::from(bh.stored_len);
            if pos > bytes {
                return Ok(None);
            }
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
                f.seek(SeekFrom::Start(pos))?;
            }
            last_is_end = bh.kind == kind::END;
        }
        Ok(last_is_end.then_some((meta, end)))
    };
    match walk() {
        Ok(Some((meta, end))) => {
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

impl Summary {
    /// How the process ended, for the listing: "exit 0", "signal 9", a problem.
    pub fn how_it_ended(&self) -> String {
        if let Some(p) = &self.problem {
            return p.clone();
        }
        match &self.end {
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
}

/// The other traces of the recording that wrote `path`: beside `NAME`, the
/// `NAME.PID` and `NAME.PID.N` files; beside such a child trace, `NAME` and
/// the other children. Sorted by name; `path` itself is not listed.
pub fn siblings(path: &Path) -> Vec<PathBuf> {
    let Some(name) = path.file_name().and_then(|n| n.to_str()) else { return Vec::new() };
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
        _ => PathBuf::from("."),
    };
    // the recording's base name: NAME itself, or NAME.PID[.N] with the numbers off
    let parts: Vec<&str> = name.split('.').collect();
    let mut base = name.to_string();
    for k in [2usize, 1] {
        if parts.len() > k {
            let b = parts[..parts.len() - k].join(".");
            if is_child_trace(name, &b) && dir.join(&b).is_file() {
                base = b;
                break;
            }
        }
    }
    let Ok(rd) = std::fs::read_dir(&dir) else { return Vec::new() };
    let mut out: Vec<PathBuf> = rd
        .flatten()
        .filter_map(|e| e.file_name().to_str().map(str::to_string))
        .filter(|n| n != name && (*n == base || is_child_trace(n, &base)))
        .map(|n| dir.join(n))
        .collect();
    out.sort();
    out
}

/// The program's name for messages.
pub fn program_name(command: &[OsString]) -> String {
    command.first().map(|p| OsStr::new(p).to_string_lossy().into_owned()).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

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

    #[test]
    fn moving_out_keeps_what_was_there() {
        let d = crate::scratch::ScratchDir::new("record-test").unwrap();
        let out = d.join("t");
        std::fs::write(&out, "old main").unwrap();
        std::fs::write(d.join("t.7"), "someone's").unwrap();
        let p = mkdtemp(&d.dir, ".t.heaplab-").unwrap();
        std::fs::write(p.join("t"), "new main").unwrap();
        std::fs::write(p.join("t.7"), "new child").unwrap();
        std::fs::write(p.join("t.8.1"), "new child 2").unwrap();
        let (traces, main, left, _) = move_out(&p, "t", &out).unwrap();
        assert!(main && left.is_none() && !p.exists());
        assert_eq!(std::fs::read_to_string(&out).unwrap(), "new main");
        assert_eq!(std::fs::read_to_string(d.join("t.7")).unwrap(), "someone's");
        assert_eq!(traces.len(), 3);
        let moved: Vec<String> =
            traces.iter().map(|t| std::fs::read_to_string(t).unwrap()).collect();
        assert!(moved.contains(&"new child".to_string()) && moved.contains(&"new child 2".into()));
    }

    #[test]
    fn summarize_ends_on_zeros() {
        let d = crate::scratch::ScratchDir::new("record-test").unwrap();
        std::fs::write(d.join("z"), vec![0u8; 4096]).unwrap();
        let s = summarize(&d.join("z"));
        assert!(s.problem.is_some());
    }
}
