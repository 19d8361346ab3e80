//! Private scratch directories, with `mkdtemp` semantics.
//!
//! ```text
//!   $TMPDIR/heaplab-TAG-PID.PIDNS-Xxxxxx/
//!                                   mode 0700, a fresh name (never reused:
//!      ├─ FILE                      mkdtemp fails rather than take an
//!      └─ FIFO                      existing one), files created with
//!                                   O_EXCL | O_NOFOLLOW, mode 0600;
//!                                   removed with everything in it on drop
//! ```
//!
//! Nothing another user can plant (a directory at a predictable name, a
//! symbolic link where an output goes) is ever followed: the directory is
//! made by this process with a random name, and only its owner can enter it.
//!
//! A process killed with SIGKILL cannot remove its directory (a compare's
//! holds the decoded ops, a gigabyte for a 67 M-event trace). So the name
//! says whose it is, `heaplab-TAG-PID.PIDNS-xxxxxx` (PIDNS: the inode of
//! the creator's PID namespace), and the first [`ScratchDir::new`] of each
//! process sweeps `$TMPDIR` of the directories of ended runs: named so, this
//! user's, of this PID namespace, whose PID is not running, and not kept
//! (`--keep-scratch` leaves a `.keep` file in it). A PID reused since is
//! running, so its directory stays: the sweep errs towards keeping.

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
        static SWEPT: std::sync::Once = std::sync::Once::new();
        let tmp = std::env::temp_dir();
        SWEPT.call_once(|| {
            sweep_stale(&tmp);
        });
        ScratchDir::new_in(&tmp, &format!("heaplab-{tag}-{}.{}-", std::process::id(), pid_ns()))
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
        // so that no later run's sweep takes it for an ended run's
        let _ = create_new(&self.dir.join(KEEP));
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

/// The file in a kept directory that the sweep respects.
const KEEP: &str = ".keep";

/// The inode of this process's PID namespace (0 where /proc does not say:
/// then nothing is swept).
fn pid_ns() -> u64 {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata("/proc/self/ns/pid").map(|m| m.ino()).unwrap_or(0)
}

/// Whether process `pid` exists (in this PID namespace): kill(pid, 0)
/// fails with ESRCH only where there is none.
fn running(pid: i32) -> bool {
    // SAFETY: signal 0 sends nothing; kill only checks that the process
    // exists and may be signalled.
    let rc = unsafe { libc::kill(pid, 0) };
    rc == 0 || std::io::Error::last_os_error().raw_os_error() != Some(libc::ESRCH)
}

/// The PID and PID namespace in a [`ScratchDir::new`] name,
/// `heaplab-TAG-PID.PIDNS-xxxxxx`, or None for any other name.
fn owner_of(name: &str) -> Option<(i32, u64)> {
    let rest = name.strip_prefix("heaplab-")?;
    let mut parts = rest.rsplitn(3, '-');
    let random = parts.next()?;
    let owner = parts.next()?;
    let tag = parts.next()?;
    if random.len() != 6 || tag.is_empty() {
        return None;
    }
    let (pid, ns) = owner.split_once('.')?;
    let pid: i32 = pid.parse().ok().filter(|p| *p > 0)?;
    Some((pid, ns.parse().ok()?))
}

/// Removes from `parent` the scratch directories of ended runs (see the
/// module's text) and returns how many it removed. Anything else (another
/// name, a link, another user's, a running process's, a kept one, another
/// PID namespace's) is left alone.
pub fn sweep_stale(parent: &Path) -> usize {
    use std::os::unix::fs::MetadataExt;
    let ns = pid_ns();
    let Ok(entries) = std::fs::read_dir(parent) else { return 0 };
    // SAFETY: geteuid has no preconditions and cannot fail.
    let uid = unsafe { libc::geteuid() };
    let me = std::process::id() as i32;
    let mut removed = 0;
    for e in entries.flatten() {
        let name = e.file_name();
        let Some((pid, its_ns)) = name.to_str().and_then(owner_of) else { continue };
        if ns == 0 || its_ns != ns || pid == me || running(pid) {
            continue;
        }
        let path = e.path();
        let Ok(m) = std::fs::symlink_metadata(&path) else { continue };
        if !m.file_type().is_dir() || m.uid() != uid || m.mode() & 0o777 != 0o700 {
            continue;
        }
        if std::fs::symlink_metadata(path.join(KEEP)).is_ok() {
            continue;
        }
        if std::fs::remove_dir_all(&path).is_ok() {
            removed += 1;
        }
    }
    removed
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

    #[test]
    fn names_say_whose() {
        let a = ScratchDir::new("unit").unwrap();
        let name = a.dir.file_name().unwrap().to_str().unwrap().to_string();
        assert_eq!(owner_of(&name), Some((std::process::id() as i32, pid_ns())));
        assert_eq!(owner_of("heaplab-compare-12.34-abcdef"), Some((12, 34)));
        assert_eq!(owner_of("heaplab-seg-e2e-12.34-abcdef"), Some((12, 34)));
        for other in [
            "heaplab-compare-abcdef",
            "heaplab-compare-x.34-abcdef",
            "heaplab-12.34-abcdef",
            "heaplab-compare-12.34-abc",
            "other-compare-12.34-abcdef",
            "heaplab-compare-0.34-abcdef",
        ] {
            assert_eq!(owner_of(other), None, "{other}");
        }
    }

    #[test]
    fn sweep_takes_only_ended_runs_dirs() {
        let parent = ScratchDir::new_in(&std::env::temp_dir(), "heaplab-sweep-test-").unwrap();
        let ns = pid_ns();
        assert_ne!(ns, 0, "this test needs /proc");
        // a PID that has ended: a child reaped
        let dead = std::process::Command::new("true").spawn().unwrap();
        let dead_pid = dead.id();
        let mut dead = dead;
        dead.wait().unwrap();
        assert!(!running(dead_pid as i32));
        let me = std::process::id();
        let mk = |name: &str, mode: u32| {
            let p = parent.join(name);
            std::fs::create_dir(&p).unwrap();
            std::fs::set_permissions(&p, std::fs::Permissions::from_mode(mode)).unwrap();
            std::fs::write(p.join("ops"), b"x").unwrap();
            p
        };
        let ended = mk(&format!("heaplab-compare-{dead_pid}.{ns}-aaaaaa"), 0o700);
        let live = mk(&format!("heaplab-compare-{me}.{ns}-bbbbbb"), 0o700);
        let parent_live = mk(&format!("heaplab-compare-1.{ns}-cccccc"), 0o700); // init: running
        let kept = mk(&format!("heaplab-compare-{dead_pid}.{ns}-dddddd"), 0o700);
        std::fs::write(kept.join(KEEP), b"").unwrap();
        let other_ns = mk(&format!("heaplab-compare-{dead_pid}.{}-eeeeee", ns + 1), 0o700);
        let open_mode = mk(&format!("heaplab-compare-{dead_pid}.{ns}-ffffff"), 0o755);
        let unnamed = mk("heaplab-compare-gggggg", 0o700);
        let target = mk("elsewhere", 0o700);
        let link = parent.join(&format!("heaplab-compare-{dead_pid}.{ns}-hhhhhh"));
        std::os::unix::fs::symlink(&target, &link).unwrap();
        let file = parent.join(&format!("heaplab-compare-{dead_pid}.{ns}-iiiiii"));
        std::fs::write(&file, b"not a directory").unwrap();

        assert_eq!(sweep_stale(parent.path()), 1);
        assert!(!ended.exists());
        for p in [&live, &parent_live, &kept, &other_ns, &open_mode, &unnamed, &target, &file] {
            assert!(p.join("ops").exists() || p.is_file(), "{} was removed", p.display());
        }
        assert!(std::fs::symlink_metadata(&link).is_ok());
        assert!(target.join("ops").exists());
        // keep() marks the directory for later sweeps
        let k = ScratchDir::new("unit").unwrap();
        k.keep();
        assert!(k.join(KEEP).exists());
        std::fs::remove_dir_all(&k.dir).unwrap();
    }
}
