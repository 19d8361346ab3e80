//! Running a program under heaplab's Valgrind tool with its raw stream coming
//! back through a FIFO.
//!
//! ```text
//!   heaplab ── mkfifo DIR/raw ── spawn valgrind --tool=T --hl-out=DIR/raw PROG ...
//!      └─ reader thread: open DIR/raw (blocks until the tool opens it), consume, EOF
//!   when the child exits without ever opening the FIFO, heaplab opens it for
//!   writing once, so the reader thread sees the end instead of waiting forever
//! ```

use anyhow::{bail, Context, Result};
use std::ffi::OsString;
use std::fs::File;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// Where the tool and Valgrind are.
#[derive(Debug, Clone)]
pub struct VgTools {
    /// `valgrind` (on PATH by default).
    pub valgrind: PathBuf,
    /// The VALGRIND_LIB folder `make` assembles: `build/lib/valgrind`.
    pub lib: PathBuf,
}

impl VgTools {
    /// The folder under a tree's library directory.
    pub fn from_lib_dir(lib_dir: &Path) -> VgTools {
        VgTools { valgrind: PathBuf::from("valgrind"), lib: lib_dir.join("valgrind") }
    }

    /// The tool of a tree.
    pub fn new(layout: &crate::layout::Layout) -> VgTools {
        VgTools { valgrind: PathBuf::from("valgrind"), lib: layout.valgrind_lib() }
    }

    /// Fails with what to do when the tool (`tool` = heaplab or
    /// heaplab-measure) or valgrind is missing.
    pub fn check(&self, tool: &str) -> Result<()> {
        let exe = self.lib.join(format!("{tool}-amd64-linux"));
        if !exe.exists() {
            bail!(
                "heaplab's Valgrind tool {} is not built; run `make -C native` (it needs Debian's valgrind package, which `make` installs)",
                exe.display()
            );
        }
        let ok = Command::new(&self.valgrind)
            .arg("--version")
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .status()
            .map(|s| s.success())
            .unwrap_or(false);
        if !ok {
            bail!("`{}` does not run; install Debian's valgrind package", self.valgrind.display());
        }
        Ok(())
    }
}

/// A private directory for the FIFO, removed on drop.
pub use crate::scratch::ScratchDir as Scratch;

/// How the child ended, as a shell would report it.
pub use crate::process::Ended;

/// Runs `cmd` (valgrind with the tool, writing to `fifo`) while `consume`
/// reads the FIFO on another thread; returns how the child ended and what
/// `consume` returned. When the tool never opens the FIFO (valgrind failed to
/// start the program), `consume` reads an empty stream.
pub fn run_with_fifo<T: Send + 'static>(
    mut cmd: Command,
    fifo: &Path,
    consume: impl FnOnce(File) -> T + Send + 'static,
) -> Result<(Ended, T)> {
    let opened = Arc::new(AtomicBool::new(false));
    let opened2 = opened.clone();
    let fifo2 = fifo.to_path_buf();
    let reader = std::thread::spawn(move || -> std::io::Result<T> {
        let f = File::open(&fifo2);
        opened2.store(true, Ordering::SeqCst);
        let f = f?;
        set_pipe_size(&f);
        Ok(consume(f))
    });
    let mut child = cmd.spawn().with_context(|| format!("starting {:?}", cmd.get_program()))?;
    let status = child.wait().context("waiting for valgrind")?;
    // The tool may never have opened the FIFO: open it for writing once, so
    // that the reader's open returns (it then reads whatever came, and the
    // end). Until the reader is in its open, that open fails (ENXIO): retry.
    while !opened.load(Ordering::SeqCst) {
        let w = std::fs::OpenOptions::new().write(true).custom_flags(libc::O_NONBLOCK).open(fifo);
        if w.is_ok() {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    let out = reader
        .join()
        .map_err(|_| anyhow::anyhow!("the stream reader panicked"))?
        .with_context(|| format!("opening {}", fifo.display()))?;
    Ok((Ended::from_status(status), out))
}

/// A larger pipe buffer: fewer, larger reads (best effort).
fn set_pipe_size(f: &File) {
    use std::os::unix::io::AsRawFd;
    // SAFETY: F_SETPIPE_SZ on a FIFO we own; failure is harmless.
    unsafe {
        libc::fcntl(f.as_raw_fd(), libc::F_SETPIPE_SZ, 1 << 20);
    }
}

/// The valgrind command line for `tool`, writing to `fifo`, with `extra`
/// tool options, then the program.
pub fn command(
    tools: &VgTools,
    tool: &str,
    fifo: &Path,
    extra: &[String],
    program: &[OsString],
) -> Command {
    let mut c = Command::new(&tools.valgrind);
    c.env("VALGRIND_LIB", &tools.lib);
    c.arg(format!("--tool={tool}")).arg("-q");
    let mut out = OsString::from("--hl-out=");
    out.push(fifo.as_os_str());
    c.arg(out);
    for e in extra {
        c.arg(e);
    }
    c.args(program);
    c
}

/// Joins arguments for a message.
pub fn show(args: &[OsString]) -> String {
    args.iter().map(|a| a.to_string_lossy().into_owned()).collect::<Vec<_>>().join(" ")
}

/// `PROG` as the shell would find it (for the trace's executable field).
pub use crate::process::resolve_program;
