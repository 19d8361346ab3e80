//! The REFS stream: the loads and stores a program made, timed in
//! instructions, placed among its allocation events (`docs/trace-format.md`,
//! section REFS).
//!
//! ```text
//!   EVENTS blocks ──┐
//!                   ├─ RefsReader ─▶ Event { time } | Ref { time, Object{id, offset} | Other{addr} } | End
//!   REFS blocks ────┘      (live objects at each point, recent-object list, deltas undone)
//!
//!   RefsEncoder (Hot: its state in registers) ─▶ payload ─▶ TraceWriter::write_stream_block(REFS, SKIPPABLE)
//! ```
//!
//! Two encodings, announced in META options (`refs=N`), both a tag byte per
//! record plus varints in up to six columns. Version 2, which every writer
//! writes now, keeps a small time delta in the tag (four loads or stores in
//! five on gawk, where version 1 spent a `times` byte on each): about 3
//! bytes a reference before compression instead of 3.7, so less for the
//! encoder to write and for zstd to read. Readers read both.
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

pub use encode::{write_block, Hot, RefsEncoder};
pub use objects::{object_profile, object_profile_from, Object, ObjectProfile};
pub use read::RefsReader;

/// Largest number of records in one REFS block.
pub const MAX_BLOCK_RECORDS: u64 = 1 << 22;
/// Length of the recent-object list.
pub const RECENT: usize = 3;

/// Version 1's tag byte (`docs/trace-format.md`, REFS, version 1).
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

/// Version 2's tag byte (`docs/trace-format.md`, REFS, version 2): the
/// types and the object codes of version 1, a two-bit size code, and the
/// time delta in the tag when it is small (the `times` entry otherwise).
///
/// ```text
///   bits   0-1    2       3-4    5          6      7
///   heap   0      STORE   size   object code        time delta is 1
///   other  1      STORE   size   register   time code: 1-3 the delta, 0 a times entry
///   events 2      count code (bits 2-7), as version 1
///   special 3     subkind (bits 2-7): 0 END
/// ```
pub mod v2 {
    pub const HEAP: u8 = 0;
    pub const OTHER: u8 = 1;
    pub const EVENTS: u8 = 2;
    pub const SPECIAL: u8 = 3;
    /// Bit 2 of a heap or other record: a store.
    pub const STORE: u8 = 0x04;
    /// Size codes (bits 3-4): 8, 4 and 1 bytes; 3: the size is in `sizes`.
    pub const SIZE_EXPLICIT: u8 = 3;
    pub const SIZE_OF_CODE: [u32; 3] = [8, 4, 1];
    /// Object code 3 (bits 5-6 of a heap record): the object is in `objs`.
    pub const OBJ_EXPLICIT: u8 = 3;
    /// Bit 7 of a heap record: the time delta is 1 (no `times` entry).
    pub const HEAP_TIME1: u8 = 0x80;
    /// Bit 5 of an other record: the address register.
    pub const REGISTER: u8 = 0x20;
    /// EVENTS count code 63: n - 64 is in the `counts` column.
    pub const COUNT_EXPLICIT: u8 = 63;
    /// SPECIAL subkind 0: the end of the program.
    pub const END: u8 = 0;

    /// Size code of an access of `size` bytes.
    #[inline(always)]
    pub fn size_code(size: u32) -> u8 {
        match size {
            8 => 0,
            4 => 1,
            1 => 2,
            _ => SIZE_EXPLICIT,
        }
    }

    /// `STORE | size code << 1` (3 bits, the tag's bits 2-4): what
    /// [`super::Hot::heap`] and [`super::Hot::other`] take. A tight loop may
    /// compute it another way, e.g. by table (heaplab-refs does, from the
    /// Valgrind tool's word).
    #[inline(always)]
    pub fn access_bits(size: u32, store: bool) -> u8 {
        (size_code(size) << 1) | u8::from(store)
    }
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
pub(crate) fn zigzag(d: u64) -> u64 {
    (d << 1) ^ (((d as i64) >> 63) as u64)
}

#[inline]
pub(crate) fn unzigzag(z: u64) -> u64 {
    (z >> 1) ^ (z & 1).wrapping_neg()
}

/// The META options token that announces a REFS stream in the encoding
/// every writer writes (version 2).
pub const OPTION: &str = "refs=2";
/// The REFS encodings this reader reads.
pub const VERSIONS: [u32; 2] = [1, 2];

/// Whether a trace's META says it holds references.
pub fn announces_refs(m: &crate::model::Meta) -> bool {
    refs_version(m).is_some()
}

/// The REFS encoding a trace's META announces: N of its `refs=N` option
/// (`refs=0`: none). A version this reader does not know is returned as it
/// is; the reader refuses its first REFS block, naming it.
pub fn refs_version(m: &crate::model::Meta) -> Option<u32> {
    m.options
        .as_deref()?
        .split(u8::is_ascii_whitespace)
        .find_map(|t| std::str::from_utf8(t.strip_prefix(b"refs=")?).ok()?.parse::<u32>().ok())
        .filter(|&v| v > 0)
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
        assert_eq!(v2::size_code(8), 0);
        assert_eq!(v2::size_code(4), 1);
        assert_eq!(v2::size_code(1), 2);
        for s in [2, 3, 16, 64, 128] {
            assert_eq!(v2::size_code(s), v2::SIZE_EXPLICIT);
        }
        for (c, &s) in v2::SIZE_OF_CODE.iter().enumerate() {
            assert_eq!(usize::from(v2::size_code(s)), c);
        }
        assert_eq!(v2::access_bits(4, true), 0b011);
        assert_eq!(v2::access_bits(3, false), v2::SIZE_EXPLICIT << 1);
    }
}
