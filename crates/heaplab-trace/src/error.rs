//! The one error a reader reports: which file, at which byte, what is wrong,
//! and how many events were read before it.

use std::fmt;
use std::path::{Path, PathBuf};

/// What went wrong, without the position.
#[derive(Debug)]
pub enum Problem {
    /// An I/O error from the operating system.
    Io(std::io::Error),
    /// The first bytes are not a heaplab trace.
    NotATrace,
    /// A trace of another format version.
    Version(u16),
    /// The file ends inside a block header or payload.
    Truncated(String),
    /// A block header does not start with "HLBK".
    BadBlockMagic,
    /// A length field no sane trace would hold.
    AbsurdLength(String),
    /// The block's CRC-32C does not match its contents.
    Checksum { kind: u8, stored: u32, computed: u32 },
    /// A stream this version does not know, not marked skippable.
    UnknownStream(u8),
    /// A block whose contents break the spec.
    Malformed(String),
    /// The trace ends at a block boundary without an END block.
    CutShort,
}

/// A reader error with its position: `FILE: byte OFFSET: PROBLEM (N events read before this point)`.
#[derive(Debug)]
pub struct TraceError {
    pub path: PathBuf,
    /// Byte offset of the block (or header) where the problem is.
    pub offset: u64,
    /// Events successfully read before the problem.
    pub events_read: u64,
    pub problem: Problem,
}

impl TraceError {
    pub fn new(path: &Path, offset: u64, events_read: u64, problem: Problem) -> Self {
        TraceError { path: path.to_path_buf(), offset, events_read, problem }
    }

    /// True when every complete block was good and only the tail is missing:
    /// the events read so far can be trusted.
    pub fn is_cut_short(&self) -> bool {
        matches!(self.problem, Problem::CutShort | Problem::Truncated(_))
    }
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Problem::Io(e) => write!(f, "{e}"),
            Problem::NotATrace => write!(f, "not a heaplab trace (bad magic)"),
            Problem::Version(v) => {
                write!(f, "trace format version {v}; this reader understands 1 and {}", crate::format::VERSION_MAX)
            }
            Problem::Truncated(what) => write!(f, "truncated: {what}"),
            Problem::BadBlockMagic => write!(f, "bad block magic (corrupt data, or not a block boundary)"),
            Problem::AbsurdLength(what) => write!(f, "absurd length: {what}"),
            Problem::Checksum { kind, stored, computed } => write!(
                f,
                "checksum mismatch in {} block (stored {stored:#010x}, computed {computed:#010x}): the block is corrupt",
                crate::format::kind::name(*kind)
            ),
            Problem::UnknownStream(k) => {
                write!(f, "unknown stream kind {k:#04x} (written by a newer heaplab?)")
            }
            Problem::Malformed(what) => write!(f, "malformed block: {what}"),
            Problem::CutShort => write!(f, "no END block: the recording was cut short"),
        }
    }
}

impl fmt::Display for TraceError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}: byte {}: {} ({} events read before this point)",
            crate::escape::terminal_path(&self.path),
            self.offset,
            self.problem,
            self.events_read
        )
    }
}

impl std::error::Error for TraceError {}
