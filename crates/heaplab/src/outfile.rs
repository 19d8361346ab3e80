//! An output file that appears whole or not at all.
//!
//! ```text
//!   DIR/.NAME.heaplab-XXXXXX   created exclusively (O_EXCL, mode given), written,
//!        │                     flushed and synced
//!        └── rename ──────────▶ DIR/NAME   only on commit(); dropped uncommitted,
//!                                          the temporary file is removed
//! ```
//!
//! A link at the final name is refused (rename would replace the link, not
//! write through it, but a user who made the link meant something else).
//!
//! A local helper for `heaplab convert` (and the scratch files its
//! conversions need); the plumbing crate's safe writer is meant to replace it.

use anyhow::{bail, Context, Result};
use std::fs::{File, OpenOptions};
use std::io::{BufWriter, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

/// A file being written under a temporary name beside its final one.
pub struct OutFile {
    tmp: PathBuf,
    dest: PathBuf,
    file: Option<BufWriter<File>>,
}

impl OutFile {
    /// Starts `dest` (mode `mode`, e.g. 0o644) as a temporary file in its directory.
    pub fn create(dest: &Path, mode: u32) -> Result<OutFile> {
        if std::fs::symlink_metadata(dest).is_ok_and(|m| m.file_type().is_symlink()) {
            bail!(
                "{} is a symbolic link; heaplab does not write through links (remove it, or give another name)",
                crate::human::escaped(&dest.display().to_string())
            );
        }
        let dir = match dest.parent() {
            Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
            _ => PathBuf::from("."),
        };
        let name =
            dest.file_name().with_context(|| format!("{}: not a file name", dest.display()))?;
        let mut last = None;
        for _ in 0..64 {
            let mut t = std::ffi::OsString::from(".");
            t.push(name);
            t.push(format!(".heaplab-{:06x}", random() & 0xff_ffff));
            let tmp = dir.join(t);
            match OpenOptions::new().write(true).create_new(true).mode(mode).open(&tmp) {
                Ok(f) => {
                    return Ok(OutFile {
                        tmp,
                        dest: dest.to_path_buf(),
                        file: Some(BufWriter::with_capacity(1 << 20, f)),
                    })
                }
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => last = Some(e),
                Err(e) => {
                    return Err(e)
                        .with_context(|| format!("cannot create a file in {}", dir.display()))
                }
            }
        }
        Err(last.expect("64 tries"))
            .with_context(|| format!("cannot create a file in {}", dir.display()))
    }

    /// The temporary file's path (to read back what was written).
    pub fn tmp_path(&self) -> &Path {
        &self.tmp
    }

    /// The writer.
    pub fn writer(&mut self) -> &mut BufWriter<File> {
        self.file.as_mut().expect("open until commit")
    }

    /// Flushes what was written so far (so that it can be read back).
    pub fn flush(&mut self) -> Result<()> {
        self.writer().flush().with_context(|| format!("writing {}", self.dest.display()))
    }

    /// Flushes, syncs and renames the file to its final name.
    pub fn commit(mut self) -> Result<()> {
        let f = self.file.take().expect("open until commit");
        let f = f
            .into_inner()
            .map_err(|e| e.into_error())
            .with_context(|| format!("writing {}", self.dest.display()))?;
        f.sync_all().with_context(|| format!("writing {}", self.dest.display()))?;
        drop(f);
        if std::fs::symlink_metadata(&self.dest).is_ok_and(|m| m.file_type().is_symlink()) {
            bail!(
                "{} became a symbolic link while it was written; not replaced",
                self.dest.display()
            );
        }
        std::fs::rename(&self.tmp, &self.dest).with_context(|| {
            format!("cannot rename {} to {}", self.tmp.display(), self.dest.display())
        })?;
        self.tmp = PathBuf::new();
        Ok(())
    }
}

impl Drop for OutFile {
    fn drop(&mut self) {
        if !self.tmp.as_os_str().is_empty() {
            let _ = std::fs::remove_file(&self.tmp);
        }
    }
}

/// A few random bits for a temporary name (from the kernel; the name is
/// created exclusively, so a collision only costs a retry).
fn random() -> u32 {
    let mut b = [0u8; 4];
    // SAFETY: getrandom writes at most b.len() bytes into b, which we own.
    let n = unsafe { libc::getrandom(b.as_mut_ptr().cast(), b.len(), 0) };
    if n != 4 {
        let t =
            std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
        return t.subsec_nanos() ^ std::process::id();
    }
    u32::from_le_bytes(b)
}
