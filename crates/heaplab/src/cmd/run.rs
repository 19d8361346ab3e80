//! `heaplab run --allocator NAME -- PROG ARGS...`: runs a real program on one
//! allocator (LD_PRELOAD of `build/lib/libheaplab-NAME.so`) and passes its
//! exit status through, the way a shell would.
//!
//! With `--stats`, the allocator's own counters (`heaplab_alloc_stats`,
//! written at exit through `HEAPLAB_STATS`) are printed after the run: peak
//! footprint obtained from the OS, calls, and the wall time and peak RSS of
//! the program.

use super::allocators::{self, Choice};
use anyhow::{Context, Result};
use serde_json::Value;
use std::ffi::OsString;
use std::io;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicI32, Ordering};
use std::time::Instant;

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
    /// With --stats: print them as one JSON object instead.
    #[arg(long, requires = "stats")]
    json: bool,
    /// Run the allocator's invariant checker after every N heap operations
    /// (HEAPLAB_CHECK; slow: try 1000, or 1 to catch a bug at once).
    #[arg(long, value_name = "N")]
    check: Option<u64>,
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

/// What a shell prints and returns when it cannot start `prog`.
fn spawn_failure(prog: &OsString, e: &io::Error) -> (String, i32) {
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

fn stats_file() -> PathBuf {
    std::env::temp_dir().join(format!("heaplab-run-{}.stats", std::process::id()))
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

fn report(c: &Choice, stats: Option<&Value>, wall: f64, maxrss_kib: i64, json: bool) {
    if json {
        let mut o = serde_json::json!({
            "allocator": c.name,
            "wall_seconds": wall,
            "max_rss_bytes": maxrss_kib * 1024,
        });
        o["heaplab"] = stats.cloned().unwrap_or(Value::Null);
        eprintln!("{o}");
        return;
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
    let stats_path = stats_file();
    if a.stats {
        let _ = std::fs::remove_file(&stats_path);
        cmd.env("HEAPLAB_STATS", &stats_path);
    }
    // SAFETY: between fork and exec the child only restores default signal
    // dispositions, which is async-signal-safe.
    unsafe {
        cmd.pre_exec(|| {
            libc::signal(libc::SIGINT, libc::SIG_DFL);
            libc::signal(libc::SIGQUIT, libc::SIG_DFL);
            Ok(())
        });
    }

    let start = Instant::now();
    let child = match cmd.spawn() {
        Ok(c) => c,
        Err(e) => {
            let (msg, code) = spawn_failure(prog, &e);
            eprintln!("heaplab run: {}: {msg}", prog.to_string_lossy());
            return Ok(code);
        }
    };
    let pid = child.id() as i32;
    // Like a shell waiting for a foreground job: ^C and ^\ reach the program
    // through the terminal's process group; TERM and HUP sent to us are passed on.
    CHILD.store(pid, Ordering::Relaxed);
    // SAFETY: installing dispositions for signals; `forward` only calls kill.
    unsafe {
        libc::signal(libc::SIGINT, libc::SIG_IGN);
        libc::signal(libc::SIGQUIT, libc::SIG_IGN);
        libc::signal(libc::SIGTERM, forward as extern "C" fn(libc::c_int) as libc::sighandler_t);
        libc::signal(libc::SIGHUP, forward as extern "C" fn(libc::c_int) as libc::sighandler_t);
    }
    let mut status: libc::c_int = 0;
    // SAFETY: an all-zero rusage is a valid value to be overwritten.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    loop {
        // SAFETY: waiting for our own child; status and ru are valid out-pointers.
        let r = unsafe { libc::wait4(pid, &mut status, 0, &mut ru) };
        if r == pid {
            break;
        }
        let e = io::Error::last_os_error();
        if e.kind() != io::ErrorKind::Interrupted {
            return Err(e).context("waiting for the program");
        }
    }
    let wall = start.elapsed().as_secs_f64();
    drop(child); // already reaped by wait4
    let code = if libc::WIFEXITED(status) {
        libc::WEXITSTATUS(status)
    } else if libc::WIFSIGNALED(status) {
        128 + libc::WTERMSIG(status)
    } else {
        1
    };
    if a.stats {
        let s = read_stats(&stats_path, pid);
        let _ = std::fs::remove_file(&stats_path);
        report(&choice, s.as_ref(), wall, ru.ru_maxrss, a.json);
    }
    Ok(code)
}
