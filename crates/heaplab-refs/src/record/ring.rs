//! The shared ring between the Valgrind tool and heaplab (`hl_flush` in
//! native/vgtool/hl_tool.c):
//!
//! ```text
//!   /dev/shm/heaplab-ring-XXXX/ring-N (0600, in a private directory)
//!   ┌ header page: "HLRING\0\0", segments, bytes per segment ┐
//!   ├ segment 0 ┤ segment 1 ┤ ... ┤ segment 15 (1 MiB each) ┘
//!   tool ──(segment, bytes) token, FIFO──▶ heaplab decodes ──8-byte ack, FIFO──▶ tool reuses it
//! ```

use anyhow::{bail, Context, Result};
use heaplab_plumb::scratch::ScratchDir;
use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

/// Segments of the ring, and their size: 16 × 1 MiB in /dev/shm, the least
/// the tool takes (twice its 512 KiB reserve; it flushes a segment when the
/// reserve is reached). A small ring stays in the last-level cache and its
/// pages are faulted in once: 16 × 4 MiB cost 5% more CPU on gawk and 8% on
/// bignum, both sides' page faults and misses (`heaplab record --refs`,
/// /usr/bin/time, 3 interleaved runs each, load ~10 on 2 cores).
pub const RING_SEGMENTS: u64 = 16;
pub const RING_SEGMENT_BYTES: u64 = 1 << 20;

/// The shared file the tool writes its records into (see `hl_flush` in
/// native/vgtool/hl_tool.c): a header page, then segments. heaplab maps it
/// read-only; the tool sends (segment, bytes) tokens through the FIFO and
/// heaplab acknowledges each segment once decoded, so nothing but tokens
/// crosses the kernel.
pub struct Ring {
    pub path: PathBuf,
    /// The private directory holding the file, removed after it.
    _dir: ScratchDir,
    base: *const u8,
    len: usize,
    seg_bytes: u64,
    segs: u64,
}

// SAFETY: the mapping is read-only on this side and stays mapped until the
// Ring is dropped; whoever holds the Ring may read it from any thread.
unsafe impl Send for Ring {}

impl Ring {
    /// Makes the file (in /dev/shm when there is one) and maps it.
    pub fn create(segs: u64, seg_bytes: u64) -> Result<Ring> {
        use std::os::unix::io::AsRawFd;
        use std::sync::atomic::{AtomicU64, Ordering};
        static N: AtomicU64 = AtomicU64::new(0);
        let parent = if Path::new("/dev/shm").is_dir() {
            PathBuf::from("/dev/shm")
        } else {
            std::env::temp_dir()
        };
        // A private directory (mkdtemp, 0700) holds the file, created
        // exclusively: nothing planted at a predictable name is followed.
        let dir = ScratchDir::new_in(&parent, "heaplab-ring-")?;
        let path = dir.join(&format!("ring-{}", N.fetch_add(1, Ordering::Relaxed)));
        let len = 4096 + segs * seg_bytes;
        let mut f = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&path)
            .with_context(|| format!("creating {}", path.display()))?;
        let mut hdr = Vec::with_capacity(24);
        hdr.extend_from_slice(b"HLRING\0\0");
        hdr.extend_from_slice(&segs.to_le_bytes());
        hdr.extend_from_slice(&seg_bytes.to_le_bytes());
        f.write_all(&hdr)?;
        f.set_len(len).with_context(|| format!("sizing {}", path.display()))?;
        // SAFETY: mapping a file we just sized to `len` bytes, read-only and
        // shared; the result is checked against MAP_FAILED.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len as usize,
                libc::PROT_READ,
                libc::MAP_SHARED,
                f.as_raw_fd(),
                0,
            )
        };
        if p == libc::MAP_FAILED {
            let e = std::io::Error::last_os_error();
            let _ = std::fs::remove_file(&path);
            return Err(e).with_context(|| format!("mapping {}", path.display()));
        }
        Ok(Ring { path, _dir: dir, base: p as *const u8, len: len as usize, seg_bytes, segs })
    }

    /// The first `bytes` of segment `i`, as words.
    pub fn segment(&self, i: u64, bytes: u64) -> Result<&[u64]> {
        if i >= self.segs || bytes > self.seg_bytes || !bytes.is_multiple_of(8) {
            bail!("the tool sent a bad segment token ({i}, {bytes} bytes)");
        }
        // SAFETY: the range lies inside the mapping (checked above), which is
        // page-aligned so the offset 4096 + i * seg_bytes (a multiple of 8)
        // is 8-aligned; the tool finished writing the segment before it sent
        // the token (the FIFO syscalls order the writes before our reads),
        // and it does not touch the segment again until we acknowledge it.
        Ok(unsafe {
            std::slice::from_raw_parts(
                self.base.add(4096 + (i * self.seg_bytes) as usize) as *const u64,
                (bytes / 8) as usize,
            )
        })
    }
}

impl Drop for Ring {
    fn drop(&mut self) {
        // SAFETY: unmapping exactly what create mapped; no slice outlives the Ring.
        unsafe {
            libc::munmap(self.base as *mut libc::c_void, self.len);
        }
        let _ = std::fs::remove_file(&self.path);
    }
}
