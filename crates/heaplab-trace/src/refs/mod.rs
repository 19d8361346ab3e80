//! The REFS stream: the loads and stores a program made, timed in
//! instructions, placed among its allocation events (`docs/trace-format.md`,
//! section REFS).
//!
//! ```text
//!   EVENTS blocks ──┐
//!                   ├─ RefsReader ─▶ Event { time } | Ref { time, Object{id, offset} | Other{addr} } | End
//!   REFS blocks ────┘      (live objects at each point, recent-object list, deltas undone)
//!
//!   RefsEncoder ─▶ payload ─▶ TraceWriter::write_stream_block(REFS, SKIPPABLE)
//! ```
//!
//! A record is a tag byte plus entries in up to six varint columns: a heap
//! reference to one of the three most recent objects at a small offset, one
//! instruction after the previous record, is 3 bytes before compression.
//!
//! The encoder is `encode.rs`, the reader `read.rs`, the per-object profile
//! derived from a whole stream `objects.rs`; this file holds what they share.
//!
//! ```
//! use heaplab_trace::refs::*;
//! use heaplab_trace::*;
//! let meta = Meta { pid: 1, pointer_size: 8, time_unit_ns: 1000,
//!                   options: Some(OPTION.into()), ..Meta::default() };
//! let mut w = TraceWriter::new(Vec::new(), &meta, WriterOptions::default()).unwrap();
//! let t = w.add_thread(1, "main");
//! let mut enc = RefsEncoder::new();
//! let p = w.record(&NewEvent::alloc(Kind::Malloc, 24).at(t, 0)).unwrap().unwrap();
//! enc.events(1, 1, 100);                   // the malloc happened at instruction 100
//! enc.heap(p, 8, 8, true, 103);            // a store of 8 bytes at offset 8
//! enc.other(0x7ffe_0010, 8, false, 104);   // a load from the stack
//! w.record(&NewEvent::free(p).at(t, 1)).unwrap();
//! enc.events(1, 0, 110);
//! enc.end(120);
//! write_block(&mut w, &mut enc).unwrap();
//! let bytes = w.finish(&End::default()).unwrap();
//!
//! let mut r = RefsReader::new(TraceReader::new(&bytes[..], "t.hltrace").unwrap());
//! let mut seen = Vec::new();
//! while let Some(item) = r.next_item().unwrap() {
//!     seen.push(item);
//! }
//! assert!(matches!(&seen[0], RefItem::Event { time: 100, .. }));
//! assert_eq!(seen[1], RefItem::Ref(Ref { time: 103, size: 8, write: true,
//!                                       target: Target::Object { id: 0, offset: 8 } }));
//! assert_eq!(seen[4], RefItem::End { instructions: 120 });
//! ```

use crate::model::Event;
use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

mod encode;
mod objects;
mod read;

pub use encode::{write_block, RefsEncoder};
pub use objects::{object_profile, object_profile_from, Object, ObjectProfile};
pub use read::RefsReader;

/// Largest number of records in one REFS block.
pub const MAX_BLOCK_RECORDS: u64 = 1 << 22;
/// Length of the recent-object list.
pub const RECENT: usize = 3;

/// Record types (tag bits 0..1).
pub mod tag {
    pub const HEAP: u8 = 0;
    pub const OTHER: u8 = 1;
    pub const EVENTS: u8 = 2;
    pub const SPECIAL: u8 = 3;
    /// Bit 2 of a heap or other record: a store.
    pub const WRITE: u8 = 0x04;
    /// Size code 7: the size is in the `sizes` column.
    pub const SIZE_EXPLICIT: u8 = 7;
    /// Object code 3: the object is in the `objs` column.
    pub const OBJ_EXPLICIT: u8 = 3;
    /// EVENTS count code 63: n - 64 is in the `counts` column.
    pub const COUNT_EXPLICIT: u8 = 63;
    /// SPECIAL subkind 0: the end of the program.
    pub const END: u8 = 0;
}

/// The usable size of an object of `size` bytes, as the recorder's allocator
/// sees it: `max(16, size rounded up to 16)`. References at offsets below it
/// belong to the object.
#[inline]
pub fn usable(size: u64) -> u64 {
    size.saturating_add(15).max(16) & !15
}

/// What a reference touched.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Target {
    /// `offset` bytes into heap object `id`.
    Object { id: u64, offset: u64 },
    /// Any other memory: stack, globals, freed heap memory, ...
    Other { addr: u64 },
}

/// One load or store.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Ref {
    /// Instructions executed before the accessing instruction.
    pub time: u64,
    /// Bytes accessed (at least 1).
    pub size: u32,
    /// A store (else a load).
    pub write: bool,
    pub target: Target,
}

/// One thing in execution order.
#[derive(Debug, Clone, PartialEq)]
pub enum RefItem {
    /// An allocation event, placed at instruction `time` (0 in a trace
    /// without references).
    Event {
        event: Box<Event>,
        time: u64,
    },
    Ref(Ref),
    /// The program ended after this many instructions (the stream's END
    /// record; absent from a trace without references or cut short).
    End {
        instructions: u64,
    },
}

/// Counts over a REFS stream.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct RefsStats {
    pub heap_loads: u64,
    pub heap_stores: u64,
    pub heap_load_bytes: u64,
    pub heap_store_bytes: u64,
    pub other_loads: u64,
    pub other_stores: u64,
    pub other_load_bytes: u64,
    pub other_store_bytes: u64,
    /// Events placed by EVENTS records.
    pub events_placed: u64,
    /// Total instructions (from the END record), if there was one.
    pub instructions: Option<u64>,
}

impl RefsStats {
    /// Every reference.
    pub fn refs(&self) -> u64 {
        self.heap_refs() + self.other_loads + self.other_stores
    }
    /// References into heap objects.
    pub fn heap_refs(&self) -> u64 {
        self.heap_loads + self.heap_stores
    }
    pub(crate) fn count(&mut self, r: &Ref) {
        let b = u64::from(r.size);
        match (r.target, r.write) {
            (Target::Object { .. }, false) => {
                self.heap_loads += 1;
                self.heap_load_bytes += b;
            }
            (Target::Object { .. }, true) => {
                self.heap_stores += 1;
                self.heap_store_bytes += b;
            }
            (Target::Other { .. }, false) => {
                self.other_loads += 1;
                self.other_load_bytes += b;
            }
            (Target::Other { .. }, true) => {
                self.other_stores += 1;
                self.other_store_bytes += b;
            }
        }
    }
}

#[inline]
pub(crate) fn size_code(size: u32) -> u8 {
    if size.is_power_of_two() && size <= 64 {
        size.trailing_zeros() as u8
    } else {
        tag::SIZE_EXPLICIT
    }
}

#[inline]
pub(crate) fn zigzag(d: u64) -> u64 {
    (d << 1) ^ (((d as i64) >> 63) as u64)
}

#[inline]
pub(crate) fn unzigzag(z: u64) -> u64 {
    (z >> 1) ^ (z & 1).wrapping_neg()
}

/// The META options token that announces a REFS stream.
pub const OPTION: &str = "refs=1";

/// Whether a trace's META says it holds references.
pub fn announces_refs(m: &crate::model::Meta) -> bool {
    m.options.as_deref().is_some_and(|o| o.split_whitespace().any(|t| t == OPTION))
}

/// A hasher for dense object ids: one multiplication (ids are not chosen by
/// an adversary; SipHash would cost more than the rest of a reference).
#[derive(Default)]
pub struct IdHasher(u64);

impl Hasher for IdHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0.rotate_left(8) ^ u64::from(b)).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        }
    }
    fn write_u64(&mut self, x: u64) {
        self.0 = x.wrapping_mul(0x9E37_79B9_7F4A_7C15);
    }
}

/// Object id -> size.
pub type IdMap = HashMap<u64, u64, BuildHasherDefault<IdHasher>>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn zigzag_round_trips() {
        for d in [0u64, 1, u64::MAX, 5u64.wrapping_neg(), 1 << 63, 12345] {
            assert_eq!(unzigzag(zigzag(d)), d);
        }
        assert_eq!(zigzag(1u64.wrapping_neg()), 1);
        assert_eq!(zigzag(1), 2);
    }

    #[test]
    fn usable_sizes() {
        assert_eq!(usable(0), 16);
        assert_eq!(usable(1), 16);
        assert_eq!(usable(16), 16);
        assert_eq!(usable(17), 32);
        assert_eq!(usable(u64::MAX), !15);
    }

    #[test]
    fn size_codes() {
        assert_eq!(size_code(1), 0);
        assert_eq!(size_code(64), 6);
        assert_eq!(size_code(3), 7);
        assert_eq!(size_code(128), 7);
    }
}
