//! Child processes: always an argument vector (never `sh -c` with data in
//! it), with time limits, the child's stderr carried in errors, and a
//! program run in the foreground the way a shell runs a job.
//!
//! ```text
//!   foreground(cmd)                         SIGTERM / SIGHUP to heaplab
//!     spawn ── CHILD := pid ──┐                 │ handler: CHILD > 0 ? kill(CHILD, sig)
//!     waitid(WEXITED|WNOWAIT) │ child runs      │                      : PENDING := sig
//!     CHILD := 0   ◀──────────┘ (zombie: its pid cannot be reused yet)
//!     wait4 (reap, rusage)
//!     ... heaplab finishes its outputs ...
//!   Signals::release(): dispositions restored, a PENDING signal re-raised
//! ```
//!
//! Invariant: a signal is forwarded only while CHILD names an unreaped
//! child. CHILD is cleared while the child is still a zombie (`WNOWAIT`),
//! before `wait4` frees its pid, so a signal is never sent to a recycled pid.
//! ^C and ^\ reach the program through the terminal's process group, so
//! heaplab ignores them while the program runs.

use anyhow::{anyhow, bail, Result};
use std::io::{self, Read};
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::Path;
use std::process::{Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicI32, Ordering};
use std::time::{Duration, Instant};

/// How a child ended, as a shell would report it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ended {
    Exit(i32),
    Signal(i32),
}

impl Ended {
    pub fn from_status(s: ExitStatus) -> Ended {
        match (s.code(), s.signal()) {
            (Some(c), _) => Ended::Exit(c),
            (None, Some(sig)) => Ended::Signal(sig),
            _ => Ended::Exit(128),
        }
    }

    /// From a raw `wait` status.
    pub fn from_raw(status: libc::c_int) -> Ended {
        Ended::from_status(ExitStatus::from_raw(status))
    }

    /// The shell's exit code: the status, or 128 + signal.
    pub fn code(self) -> i32 {
        match self {
            Ended::Exit(c) => c,
            Ended::Signal(s) => 128 + s,
        }
    }

    /// "exited with status 3", "was killed by signal 9 (Killed)".
    pub fn describe(self) -> String {
        match self {
            Ended::Exit(c) => format!("exited with status {c}"),
            Ended::Signal(s) => format!("was killed by signal {s} ({})", signal_name(s)),
        }
    }
}

/// The C library's name of a signal ("Segmentation fault").
pub fn signal_name(sig: i32) -> String {
    // SAFETY: strsignal returns a pointer to a static or thread-local string,
    // which is copied at once.
    let p = unsafe { libc::strsignal(sig) };
    if p.is_null() {
        return format!("signal {sig}");
    }
    // SAFETY: p is a valid NUL-terminated string (checked non-null above).
    unsafe { std::ffi::CStr::from_ptr(p) }.to_string_lossy().into_owned()
}

/// A command as one line, for messages and logs only (never run by a shell):
/// arguments with spaces or quotes are quoted.
pub fn show(cmd: &Command) -> String {
    let mut s = cmd.get_program().to_string_lossy().to_string();
    for a in cmd.get_args() {
        s.push(' ');
        s.push_str(&quote(&a.to_string_lossy()));
    }
    s
}

/// Quotes a word as a shell would need it (for display).
pub fn quote(a: &str) -> String {
    if !a.is_empty() && a.bytes().all(|b| b.is_ascii_alphanumeric() || b"-_./=:,+%@".contains(&b)) {
        a.to_string()
    } else {
        format!("'{}'", a.replace('\'', "'\\''"))
    }
}

/// What a shell prints and returns when it cannot start `prog`: 127 for a
/// program that is not there, 126 for one that cannot be run.
pub fn spawn_failure(prog: &std::ffi::OsStr, e: &io::Error) -> (String, i32) {
    let name = prog.to_string_lossy();
    match e.kind() {
        io::ErrorKind::NotFound if !name.contains('/') => ("command not found".into(), 127),
        io::ErrorKind::NotFound => ("No such file or directory".into(), 127),
        io::ErrorKind::PermissionDenied if Path::new(prog).is_dir() => {
            ("Is a directory".into(), 126)
        }
        io::ErrorKind::PermissionDenied => ("Permission denied".into(), 126),
        _ => (e.to_string(), 126),
    }
}

/// What a finished child left.
#[derive(Debug)]
pub struct Captured {
    pub status: ExitStatus,
    pub stdout: Vec<u8>,
    pub stderr: Vec<u8>,
    /// It ran past its time limit and was killed.
    pub timed_out: bool,
}

impl Captured {
    /// The last few lines of stderr, for an error message.
    pub fn stderr_tail(&self, lines: usize) -> String {
        let t = String::from_utf8_lossy(&self.stderr);
        let v: Vec<&str> = t.lines().filter(|l| !l.trim().is_empty()).collect();
        v[v.len().saturating_sub(lines)..].join("\n")
    }
}

/// Runs `cmd` to completion with its stdout and stderr captured, killing it
/// after `timeout` (None: no limit).
pub fn capture(cmd: &mut Command, timeout: Option<Duration>) -> Result<Captured> {
    capture_until(cmd, timeout, None)
}

/// [`capture`], also killing the child and failing with "interrupted" as
/// soon as `stop` says so (polled every 5 ms; a study's jobs pass their
/// cancellation flag).
pub fn capture_until(
    cmd: &mut Command,
    timeout: Option<Duration>,
    stop: Option<&dyn Fn() -> bool>,
) -> Result<Captured> {
    cmd.stdout(Stdio::piped()).stderr(Stdio::piped());
    let mut child = cmd.spawn().map_err(|e| {
        anyhow!(e).context(format!("cannot run {}", cmd.get_program().to_string_lossy()))
    })?;
    let mut so = child.stdout.take().expect("piped");
    let mut se = child.stderr.take().expect("piped");
    let t_out = std::thread::spawn(move || {
        let mut v = Vec::new();
        let _ = so.read_to_end(&mut v);
        v
    });
    let t_err = std::thread::spawn(move || {
        let mut v = Vec::new();
        let _ = se.read_to_end(&mut v);
        v
    });
    let start = Instant::now();
    let mut timed_out = false;
    let status = match (timeout, stop) {
        (None, None) => child.wait()?,
        _ => loop {
            if let Some(s) = child.try_wait()? {
                break s;
            }
            if timeout.is_some_and(|t| start.elapsed() > t) {
                let _ = child.kill();
                timed_out = true;
                break child.wait()?;
            }
            if stop.is_some_and(|f| f()) {
                let _ = child.kill();
                let _ = child.wait();
                bail!("interrupted");
            }
            std::thread::sleep(Duration::from_millis(5));
        },
    };
    let stdout = t_out.join().unwrap_or_default();
    let stderr = t_err.join().unwrap_or_default();
    Ok(Captured { status, stdout, stderr, timed_out })
}

/// Runs `cmd` and fails unless it exits 0; the error shows the command and
/// what it printed on stderr (and stdout).
pub fn checked(cmd: &mut Command) -> Result<Captured> {
    let shown = show(cmd);
    let c = capture(cmd, None)?;
    if !c.status.success() {
        bail!(
            "{shown} failed ({}):\n{}{}",
            Ended::from_status(c.status).describe(),
            String::from_utf8_lossy(&c.stdout),
            String::from_utf8_lossy(&c.stderr)
        );
    }
    Ok(c)
}

static CHILD: AtomicI32 = AtomicI32::new(0);
static PENDING: AtomicI32 = AtomicI32::new(0);

extern "C" fn forward(sig: libc::c_int) {
    let pid = CHILD.load(Ordering::SeqCst);
    if pid > 0 {
        // SAFETY: kill is async-signal-safe; CHILD names our unreaped child.
        unsafe {
            libc::kill(pid, sig);
        }
    } else {
        PENDING.store(sig, Ordering::SeqCst);
    }
}

/// The dispositions heaplab had before a foreground run, restored by
/// [`Signals::release`] (or on drop).
#[derive(Debug)]
pub struct Signals {
    saved: Vec<(libc::c_int, libc::sighandler_t)>,
}

impl Signals {
    fn install() -> Signals {
        let handler = forward as extern "C" fn(libc::c_int) as libc::sighandler_t;
        let mut saved = Vec::new();
        for (sig, how) in [
            (libc::SIGINT, libc::SIG_IGN),
            (libc::SIGQUIT, libc::SIG_IGN),
            (libc::SIGTERM, handler),
            (libc::SIGHUP, handler),
        ] {
            // SAFETY: setting a disposition; `forward` only touches atomics
            // and calls kill, both async-signal-safe.
            let old = unsafe { libc::signal(sig, how) };
            saved.push((sig, old));
        }
        Signals { saved }
    }

    /// Restores heaplab's own dispositions; a TERM or HUP that arrived after
    /// the child was reaped (while heaplab finished its outputs) is raised
    /// now, so heaplab stops as it was asked to.
    pub fn release(mut self) {
        self.restore();
    }

    fn restore(&mut self) {
        for (sig, old) in self.saved.drain(..) {
            // SAFETY: restoring the disposition saved by `install`.
            unsafe {
                libc::signal(sig, old);
            }
        }
        let p = PENDING.swap(0, Ordering::SeqCst);
        if p != 0 {
            // SAFETY: raising a signal at ourselves with its old disposition.
            unsafe {
                libc::raise(p);
            }
        }
    }
}

impl Drop for Signals {
    fn drop(&mut self) {
        if !self.saved.is_empty() {
            self.restore();
        }
    }
}

/// A foreground child that has ended and been reaped.
#[derive(Debug)]
pub struct Finished {
    pub pid: i32,
    pub ended: Ended,
    /// Its resource usage (`ru_maxrss` in KiB).
    pub rusage: libc::rusage,
    pub wall: Duration,
    /// Release once heaplab's outputs are safe: until then a TERM or HUP is
    /// held back, not lost.
    pub signals: Signals,
}

/// How to run a foreground child.
#[derive(Debug, Clone, Copy, Default)]
pub struct Foreground {
    /// Give the child default INT and QUIT dispositions even when heaplab
    /// was started with them ignored.
    pub default_int_quit: bool,
}

impl Foreground {
    /// Runs `cmd` as a shell runs a foreground job (see the module docs) and
    /// reaps it. A program that cannot be started is `Err` with the
    /// `io::Error` (see [`spawn_failure`]).
    pub fn run(self, cmd: &mut Command) -> io::Result<Finished> {
        if self.default_int_quit {
            // SAFETY: between fork and exec the child only resets signal
            // dispositions, which is async-signal-safe.
            unsafe {
                cmd.pre_exec(|| {
                    libc::signal(libc::SIGINT, libc::SIG_DFL);
                    libc::signal(libc::SIGQUIT, libc::SIG_DFL);
                    Ok(())
                });
            }
        }
        let start = Instant::now();
        let child = cmd.spawn()?;
        let pid = child.id() as i32;
        PENDING.store(0, Ordering::SeqCst);
        CHILD.store(pid, Ordering::SeqCst);
        let signals = Signals::install();
        let r = wait_foreground(pid);
        CHILD.store(0, Ordering::SeqCst);
        drop(child); // reaped by wait_foreground (or an error below)
        let (status, rusage) = r?;
        Ok(Finished { pid, ended: Ended::from_raw(status), rusage, wall: start.elapsed(), signals })
    }
}

/// Waits until `pid` has ended, clears CHILD while it is a zombie, then reaps it.
fn wait_foreground(pid: i32) -> io::Result<(libc::c_int, libc::rusage)> {
    loop {
        // SAFETY: an all-zero siginfo_t is a valid out-parameter.
        let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
        // SAFETY: waiting (without reaping) for our own child; info is valid.
        let r = unsafe {
            libc::waitid(libc::P_PID, pid as libc::id_t, &mut info, libc::WEXITED | libc::WNOWAIT)
        };
        if r == 0 {
            break;
        }
        let e = io::Error::last_os_error();
        if e.kind() != io::ErrorKind::Interrupted {
            return Err(e);
        }
    }
    // The child is a zombie: its pid stays ours until reaped.
    CHILD.store(0, Ordering::SeqCst);
    let mut status: libc::c_int = 0;
    // SAFETY: an all-zero rusage is a valid value to be overwritten.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    loop {
        // SAFETY: reaping our own child; status and ru are valid out-pointers.
        let r = unsafe { libc::wait4(pid, &mut status, 0, &mut ru) };
        if r == pid {
            return Ok((status, ru));
        }
        let e = io::Error::last_os_error();
        if e.kind() != io::ErrorKind::Interrupted {
            return Err(e);
        }
    }
}

pub use crate::cmdline::CommandLine;

/// The pid signals are forwarded to now (0: none).
pub fn forwarding_to() -> i32 {
    CHILD.load(Ordering::SeqCst)
}

/// Checks the time limit and an exit status for a captured run of a helper
/// program (`what` names it): the error carries its stderr.
pub fn expect_success(what: &str, c: &Captured) -> Result<()> {
    if c.timed_out {
        bail!("{what} ran past its time limit and was killed");
    }
    if !c.status.success() {
        let tail = c.stderr_tail(5);
        bail!(
            "{what} {}{}",
            Ended::from_status(c.status).describe(),
            if tail.is_empty() { String::new() } else { format!(": {tail}") }
        );
    }
    Ok(())
}

/// `PROG` as the shell would find it (None when it is not there).
pub fn resolve_program(prog: &std::ffi::OsStr) -> Option<std::path::PathBuf> {
    use std::os::unix::ffi::OsStrExt;
    let p = Path::new(prog);
    if p.as_os_str().as_bytes().contains(&b'/') {
        return std::fs::canonicalize(p).ok();
    }
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|d| d.join(p))
        .find(|c| c.is_file())
        .and_then(|c| std::fs::canonicalize(c).ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn foreground_reports_like_a_shell_and_clears_the_pid() {
        let f = Foreground::default().run(Command::new("sh").args(["-c", "exit 3"])).unwrap();
        assert_eq!(f.ended, Ended::Exit(3));
        assert_eq!(forwarding_to(), 0, "the pid is still set after the child was reaped");
        f.signals.release();
        let f =
            Foreground::default().run(Command::new("sh").args(["-c", "kill -TERM $$"])).unwrap();
        assert_eq!(f.ended.code(), 128 + 15);
        assert!(f.ended.describe().contains("signal 15"));
        drop(f);
        let e = Foreground::default().run(&mut Command::new("no-such-program-x")).unwrap_err();
        assert_eq!(spawn_failure("no-such-program-x".as_ref(), &e).1, 127);
    }

    #[test]
    fn capture_kills_at_the_limit_and_checked_carries_stderr() {
        let c = capture(Command::new("sleep").arg("5"), Some(Duration::from_millis(100))).unwrap();
        assert!(c.timed_out);
        let e = checked(Command::new("sh").args(["-c", "echo oops >&2; exit 4"]))
            .unwrap_err()
            .to_string();
        assert!(e.contains("oops") && e.contains("status 4"), "{e}");
    }

    #[test]
    fn capture_until_stops_when_told_and_not_before() {
        // a child that would outlive any stall of CI's loaded machine: only
        // a kill ends it in time
        let t = Instant::now();
        let e = capture_until(Command::new("sleep").arg("600"), None, Some(&|| true)).unwrap_err();
        assert_eq!(e.to_string(), "interrupted");
        assert!(t.elapsed() < Duration::from_secs(300), "the child was not killed");
        let c = capture_until(Command::new("echo").arg("hi"), None, Some(&|| false)).unwrap();
        assert_eq!((c.stdout.as_slice(), c.timed_out), (&b"hi\n"[..], false));
    }
}
