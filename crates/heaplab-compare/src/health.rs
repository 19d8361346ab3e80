//! Is a trace whole? Every trace a comparison or the course driver replays
//! is read to its end with the Rust reader first, and sorted into one of
//! three cases:
//!
//! ```text
//!   whole      every block good, END present            -> measured
//!   cut short  good blocks, then the file stops         -> measured, but marked
//!              (no END; a torn last block)                 truncated; exit non-zero
//!                                                          unless --allow-truncated
//!   corrupt    a bad checksum, bad magic, trailing junk  -> refused, with the reader's
//!              after END, a malformed block, ...           message (file, byte, events)
//! ```
//!
//! The replayer agrees with this reader (the shared test vectors keep the
//! two in step); when it reports a cut the Rust reader did not, the cut
//! still marks the result (see [`Truncation::from_replay`]).

use serde::{Deserialize, Serialize};
use std::path::Path;

/// Where a cut-short trace stops.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Truncation {
    /// Byte offset of the block (or header) where the trace stops being whole.
    pub offset: u64,
    /// Events read from good blocks before that point: all a replay sees.
    pub events_read: u64,
    /// The reader's message, `FILE: byte N: PROBLEM (M events read ...)`.
    pub message: String,
}

impl Truncation {
    /// The truncation a replayer's JSON reports, if any.
    pub fn from_replay(out: &crate::replay::ReplayOut) -> Option<Truncation> {
        out.cut_short.then(|| Truncation {
            offset: out.cut_at_byte.unwrap_or(0),
            events_read: out.cut_after_events.unwrap_or(out.events),
            message: out.trace_warning.clone().unwrap_or_else(|| "the trace is cut short".into()),
        })
    }
}

/// Reads `trace` to its end. `Ok(None)`: whole. `Ok(Some(t))`: cut short at
/// `t`, and the events before it can be trusted. `Err`: corrupt or unreadable,
/// with the reader's message.
pub fn check(trace: &Path) -> anyhow::Result<Option<Truncation>> {
    examine(trace).map(|(cut, _)| cut)
}

/// [`check`], and the events a replay of the trace will see (`heaplab
/// compare` estimates its jobs' costs from them).
pub fn examine(trace: &Path) -> anyhow::Result<(Option<Truncation>, u64)> {
    let mut r = heaplab_trace::TraceReader::open(trace).map_err(|e| anyhow::anyhow!("{e}"))?;
    let mut n = 0u64;
    let mut e = heaplab_trace::Event::default();
    loop {
        match r.read_event(&mut e) {
            Ok(true) => n += 1,
            Ok(false) => return Ok((None, n)),
            Err(e) if e.is_cut_short() => {
                let t = Truncation {
                    offset: e.offset,
                    events_read: e.events_read,
                    message: e.to_string(),
                };
                return Ok((Some(t), n));
            }
            Err(e) => anyhow::bail!("{e}"),
        }
    }
}
