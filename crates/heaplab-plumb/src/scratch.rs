//! Private scratch directories, with `mkdtemp` semantics.
//!
//! ```text
//!   $TMPDIR/heaplab-TAG-Xxxxxx/     mode 0700, a fresh name (never reused:
//!      ├─ FILE                      mkdtemp fails rather than take an
//!      └─ FIFO                      existing one), files created with
//!                                   O_EXCL | O_NOFOLLOW, mode 0600;
//!                                   removed with everything in it on drop
//! ```
//!
//! Nothing another user can plant (a directory at a predictable name, a
//! symbolic link where an output goes) is ever followed: the directory is
//! made by this process with a random name, and only its owner can enter it.

use anyhow::{Context, Result};
use std::ffi::CString;
use std::fs::File;
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};

/// A directory only this user can enter, removed (with its contents) when
/// dropped unless [`ScratchDir::keep`] was called.
#[derive(Debug)]
pub struct ScratchDir {
    /// The directory.
    pub dir: PathBuf,
    keep: AtomicBool,
}

/// Makes `parent/PREFIXxxxxxx` with mkdtemp(3): a fresh name, mode 0700.
pub fn mkdtemp(parent: &Path, prefix: &str) -> Result<PathBuf> {
    let mut template = parent.join(format!("{prefix}XXXXXX")).into_os_string().into_vec();
    template.push(0);
    // SAFETY: `template` is a writable NUL-terminated buffer that ends in
    // six X's, as mkdtemp requires; it rewrites them in place and keeps no
    // pointer.
    let p = unsafe { libc::mkdtemp(template.as_mut_ptr() as *mut libc::c_char) };
    if p.is_null() {
        return Err(std::io::Error::last_os_error())
            .with_context(|| format!("cannot create a private directory in {}", parent.display()));
    }
    template.pop();
    Ok(PathBuf::from(std::ffi::OsString::from_vec(template)))
}

/// One private directory for the rest of this process (what a test binary's
/// tests share: a trace recorded once, a cache), made with [`mkdtemp`] as
/// `heaplab-TAG-xxxxxx` on the first call (later calls return it, whatever
/// their tag) and removed at exit unless HEAPLAB_KEEP_TEST_DIRS is set: a
/// static is never dropped, so atexit(3) removes it.
pub fn process_dir(tag: &str) -> Result<&'static Path> {
    static D: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    if let Some(d) = D.get() {
        return Ok(d);
    }
    let d = mkdtemp(&std::env::temp_dir(), &format!("heaplab-{tag}-"))?;
    if D.set(d.clone()).is_err() {
        // another thread won the race: its directory stands, this one goes
        let _ = std::fs::remove_dir(&d);
    } else {
        extern "C" fn remove() {
            if std::env::var_os("HEAPLAB_KEEP_TEST_DIRS").is_none() {
                if let Some(d) = D.get() {
                    let _ = std::fs::remove_dir_all(d);
                }
            }
        }
        // SAFETY: `remove` is a plain extern "C" function with no arguments
        // that touches only the directory this process made; atexit keeps
        // only its address.
        unsafe { libc::atexit(remove) };
    }
    Ok(D.get().expect("set above"))
}

impl ScratchDir {
    /// A fresh private directory under the system's temporary directory
    /// (`$TMPDIR`, else /tmp), named `heaplab-TAG-` and six random characters.
    pub fn new(tag: &str) -> Result<ScratchDir> {
        ScratchDir::new_in(&std::env::temp_dir(), &format!("heaplab-{tag}-"))
    }

    /// A fresh private directory `parent/PREFIXxxxxxx`.
    pub fn new_in(parent: &Path, prefix: &str) -> Result<ScratchDir> {
        Ok(ScratchDir { dir: mkdtemp(parent, prefix)?, keep: AtomicBool::new(false) })
    }

    /// The directory.
    pub fn path(&self) -> &Path {
        &self.dir
    }

    /// `name` inside the directory.
    pub fn join(&self, name: &str) -> PathBuf {
        self.dir.join(name)
    }

    /// Leaves the directory in place when dropped (`--keep-scratch`).
    pub fn keep(&self) {
        self.keep.store(true, Ordering::Relaxed);
    }

    /// Creates `name` in the directory, exclusively (never an existing file
    /// or a link), mode 0600.
    pub fn create(&self, name: &str) -> Result<File> {
        let p = self.dir.join(name);
        create_new(&p)
    }

    /// Makes a FIFO named `name` in the directory, mode 0600.
    pub fn fifo(&self, name: &str) -> Result<PathBuf> {
        let p = self.dir.join(name);
        let c = CString::new(p.as_os_str().as_bytes()).context("FIFO path")?;
        // SAFETY: c is a valid NUL-terminated path; mkfifo does not keep the pointer.
        let rc = unsafe { libc::mkfifo(c.as_ptr(), 0o600) };
        if rc != 0 {
            return Err(std::io::Error::last_os_error())
                .with_context(|| format!("mkfifo {}", p.display()));
        }
        Ok(p)
    }
}

impl Drop for ScratchDir {
    fn drop(&mut self) {
        if !self.keep.load(Ordering::Relaxed) {
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }
}

/// Creates `path` for writing: a new file (O_EXCL, so never an existing
/// file, and never through a symbolic link), mode 0600.
pub fn create_new(path: &Path) -> Result<File> {
    std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(path)
        .with_context(|| format!("cannot create {}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn fresh_private_and_removed() {
        let a = ScratchDir::new("unit").unwrap();
        let b = ScratchDir::new("unit").unwrap();
        assert_ne!(a.dir, b.dir);
        let m = std::fs::metadata(&a.dir).unwrap().permissions().mode() & 0o777;
        assert_eq!(m, 0o700);
        let f = a.create("x").unwrap();
        drop(f);
        assert_eq!(std::fs::metadata(a.join("x")).unwrap().permissions().mode() & 0o777, 0o600);
        // exclusive: an existing name (or a planted link) is refused
        assert!(a.create("x").is_err());
        std::os::unix::fs::symlink("/etc/passwd", a.join("l")).unwrap();
        assert!(a.create("l").is_err());
        let d = a.dir.clone();
        drop(a);
        assert!(!d.exists());
        b.keep();
        let d = b.dir.clone();
        drop(b);
        assert!(d.exists());
        std::fs::remove_dir_all(d).unwrap();
    }
}
