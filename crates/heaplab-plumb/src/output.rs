//! Writing an output file safely.
//!
//! ```text
//!   DIR/.NAME.heaplab-N      created O_EXCL | O_NOFOLLOW in the target's own
//!        │ write, flush      directory (so the rename stays on one file system)
//!        ▼
//!   rename(2) ──▶ DIR/NAME   atomic: a reader sees the old file or the whole
//!                            new one; the temporary is removed on any error
//! ```
//!
//! Invariants: nothing is ever written through a symbolic link. A link at
//! the final name is refused, unless `--force` ([`set_force`]) asks to
//! replace the link itself (rename replaces the link, never its target). A
//! directory there is refused. A device or FIFO that already exists
//! (`--json /dev/null`, `--json /dev/stdout`) is opened and written in place,
//! as a shell redirection would; nothing is created or renamed then.

use anyhow::{bail, Context, Result};
use std::fs::File;
use std::io::Write;
use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

static FORCE: AtomicBool = AtomicBool::new(false);

/// `--force`: replace a symbolic link at an output's name (the link, not
/// what it points to).
pub fn set_force(on: bool) {
    FORCE.store(on, Ordering::Relaxed);
}

/// Whether `--force` was given.
pub fn force() -> bool {
    FORCE.load(Ordering::Relaxed)
}

/// What is at an output's name now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Existing {
    Absent,
    Regular,
    /// A character device, FIFO or socket: written in place.
    Special,
}

/// Checks what is at `dest`: a symbolic link (without --force) and a
/// directory are errors that say why.
pub fn check(dest: &Path) -> Result<Existing> {
    match std::fs::symlink_metadata(dest) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Existing::Absent),
        Err(e) => Err(e).with_context(|| format!("cannot examine {}", dest.display())),
        Ok(m) => {
            let t = m.file_type();
            if t.is_symlink() {
                if force() {
                    return Ok(Existing::Regular);
                }
                bail!(
                    "{} is a symbolic link; heaplab does not write through links \
                     (remove it, or give --force to replace the link itself)",
                    dest.display()
                );
            }
            if t.is_dir() {
                bail!("{} is a directory; a file name was expected", dest.display());
            }
            if t.is_char_device() || t.is_fifo() || t.is_socket() || t.is_block_device() {
                return Ok(Existing::Special);
            }
            Ok(Existing::Regular)
        }
    }
}

/// An output being written: a temporary file beside the final name, renamed
/// over it by [`OutputFile::commit`], removed if dropped before.
#[derive(Debug)]
pub struct OutputFile {
    file: Option<File>,
    /// The temporary name (None: a device or FIFO written in place).
    tmp: Option<PathBuf>,
    dest: PathBuf,
}

fn temp_name(dest: &Path) -> PathBuf {
    static N: AtomicU64 = AtomicU64::new(0);
    let name = dest.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    let tag = format!(
        "{:x}{:x}{:x}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed),
        nanos & 0xffff
    );
    dest.with_file_name(format!(".{name}.heaplab-{tag}"))
}

impl OutputFile {
    /// Starts writing `dest` with the usual mode (0666 less the umask).
    pub fn create(dest: &Path) -> Result<OutputFile> {
        OutputFile::create_mode(dest, 0o666)
    }

    /// Starts writing `dest` with `mode` (less the umask): 0600 for what
    /// holds command lines and paths (traces).
    pub fn create_mode(dest: &Path, mode: u32) -> Result<OutputFile> {
        if dest.as_os_str().is_empty() {
            bail!("an empty output name");
        }
        if check(dest)? == Existing::Special {
            let file = std::fs::OpenOptions::new()
                .write(true)
                .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
                .open(dest)
                .with_context(|| format!("cannot open {}", dest.display()))?;
            return Ok(OutputFile { file: Some(file), tmp: None, dest: dest.to_path_buf() });
        }
        if let Some(d) = dest.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(d).with_context(|| format!("creating {}", d.display()))?;
        }
        for _ in 0..100 {
            let tmp = temp_name(dest);
            match std::fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .mode(mode)
                .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
                .open(&tmp)
            {
                Ok(file) => {
                    return Ok(OutputFile {
                        file: Some(file),
                        tmp: Some(tmp),
                        dest: dest.to_path_buf(),
                    })
                }
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
                Err(e) => {
                    return Err(e).with_context(|| format!("cannot create {}", dest.display()))
                }
            }
        }
        bail!("cannot create a temporary file beside {}", dest.display())
    }

    /// The final name.
    pub fn dest(&self) -> &Path {
        &self.dest
    }

    /// The open file (the temporary, until committed).
    pub fn file(&mut self) -> &mut File {
        self.file.as_mut().expect("open until committed")
    }

    /// Another handle on the file being written (for a child's stdout).
    pub fn try_clone(&self) -> Result<File> {
        self.file
            .as_ref()
            .expect("open until committed")
            .try_clone()
            .with_context(|| format!("writing {}", self.dest.display()))
    }

    /// Finishes: the temporary becomes the final name.
    pub fn commit(mut self) -> Result<()> {
        let mut f = self.file.take().expect("open until committed");
        f.flush().with_context(|| format!("writing {}", self.dest.display()))?;
        drop(f);
        if let Some(tmp) = self.tmp.take() {
            if let Err(e) = std::fs::rename(&tmp, &self.dest) {
                let _ = std::fs::remove_file(&tmp);
                return Err(e).with_context(|| format!("cannot create {}", self.dest.display()));
            }
        }
        Ok(())
    }
}

impl Write for OutputFile {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.file().write(buf)
    }
    fn flush(&mut self) -> std::io::Result<()> {
        self.file().flush()
    }
}

impl Drop for OutputFile {
    fn drop(&mut self) {
        if let Some(t) = self.tmp.take() {
            let _ = std::fs::remove_file(t);
        }
    }
}

/// Writes `bytes` to `dest` safely (see the module docs).
pub fn write(dest: &Path, bytes: impl AsRef<[u8]>) -> Result<()> {
    let mut o = OutputFile::create(dest)?;
    o.write_all(bytes.as_ref()).with_context(|| format!("writing {}", dest.display()))?;
    o.commit()
}

/// Where a `--json [FILE]` or `--csv [FILE]` goes: standard output (no
/// FILE, or `-`) or a file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Dest {
    Stdout,
    File(PathBuf),
}

impl Dest {
    /// `-` is standard output; anything else a file.
    pub fn parse(s: &std::ffi::OsStr) -> Dest {
        if s == "-" {
            Dest::Stdout
        } else {
            Dest::File(PathBuf::from(s))
        }
    }

    /// Writes `text` there (a file safely, standard output as it is).
    pub fn write(&self, text: &str) -> Result<()> {
        match self {
            Dest::Stdout => {
                let mut o = std::io::stdout().lock();
                o.write_all(text.as_bytes())?;
                o.flush()?;
                Ok(())
            }
            Dest::File(p) => write(p, text),
        }
    }

    pub fn is_stdout(&self) -> bool {
        *self == Dest::Stdout
    }
}

impl std::fmt::Display for Dest {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Dest::Stdout => write!(f, "standard output"),
            Dest::File(p) => write!(f, "{}", p.display()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writes_through_a_temporary_and_refuses_links() {
        let d = crate::scratch::ScratchDir::new("output-test").unwrap();
        let out = d.join("a.json");
        write(&out, "one").unwrap();
        write(&out, "two").unwrap();
        assert_eq!(std::fs::read_to_string(&out).unwrap(), "two");
        // no temporary left behind
        assert_eq!(std::fs::read_dir(&d.dir).unwrap().count(), 1);
        // a link at the name: refused, its target untouched
        let victim = d.join("victim");
        std::fs::write(&victim, "precious").unwrap();
        let link = d.join("link");
        std::os::unix::fs::symlink(&victim, &link).unwrap();
        let e = write(&link, "x").unwrap_err().to_string();
        assert!(e.contains("symbolic link"), "{e}");
        assert_eq!(std::fs::read_to_string(&victim).unwrap(), "precious");
        // a directory: refused
        assert!(write(&d.dir, "x").unwrap_err().to_string().contains("directory"));
        // a device is written in place
        write(Path::new("/dev/null"), "x").unwrap();
        // dropped before commit: nothing left
        let o = OutputFile::create(&d.join("b")).unwrap();
        drop(o);
        assert!(!d.join("b").exists());
        assert_eq!(std::fs::read_dir(&d.dir).unwrap().count(), 3);
    }
}
