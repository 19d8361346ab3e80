//! A private scratch directory: made by mkdtemp (a fresh name, mode 0700),
//! removed with everything in it when dropped.

use anyhow::{Context, Result};
use std::ffi::{CString, OsString};
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::{Path, PathBuf};

pub struct Scratch {
    dir: PathBuf,
}

impl Scratch {
    /// A new directory `heaplab-TAG-XXXXXX` under the system's temporary directory.
    pub fn new(tag: &str) -> Result<Scratch> {
        let template = std::env::temp_dir().join(format!("heaplab-{tag}-XXXXXX"));
        let mut bytes = CString::new(template.as_os_str().as_bytes())
            .context("a temporary directory path with a NUL byte")?
            .into_bytes_with_nul();
        // SAFETY: bytes is a writable NUL-terminated template ending in XXXXXX;
        // mkdtemp fills the Xs in place and returns it, or NULL.
        let p = unsafe { libc::mkdtemp(bytes.as_mut_ptr().cast()) };
        if p.is_null() {
            return Err(std::io::Error::last_os_error())
                .with_context(|| format!("mkdtemp {}", template.display()));
        }
        bytes.pop();
        Ok(Scratch { dir: PathBuf::from(OsString::from_vec(bytes)) })
    }

    pub fn path(&self) -> &Path {
        &self.dir
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn private_and_removed() {
        let s = Scratch::new("t").unwrap();
        let d = s.path().to_path_buf();
        assert_eq!(std::fs::metadata(&d).unwrap().permissions().mode() & 0o777, 0o700);
        std::fs::write(d.join("f"), b"x").unwrap();
        drop(s);
        assert!(!d.exists());
    }
}
