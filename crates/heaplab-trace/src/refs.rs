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

use crate::error::{Problem, TraceError};
use crate::format::{kind, BLOCK_SKIPPABLE};
use crate::model::{Event, Kind};
use crate::reader::{Item, TraceReader};
use crate::varint::{put, put_bytes, Cursor};
use crate::writer::TraceWriter;
use std::collections::{HashMap, VecDeque};
use std::hash::{BuildHasherDefault, Hasher};
use std::io::{self, Read, Write};
use std::path::Path;

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

// ---------------------------------------------------------------- encoder

/// Builds REFS block payloads. Feed it events (as they are recorded with the
/// [`TraceWriter`]) and references in execution order; write a block with
/// [`write_block`] whenever [`RefsEncoder::is_full`] says so, and at the end.
#[derive(Debug, Default)]
pub struct RefsEncoder {
    n: u64,
    records: u64,
    placed: u64,
    next_id: u64,
    time: u64,
    // block start state
    first_record: u64,
    first_event: u64,
    first_id: u64,
    base_time: u64,
    // per-block state
    recent: [u64; RECENT],
    recent_len: usize,
    last_addr: [u64; 2],
    tags: Vec<u8>,
    times: Vec<u8>,
    objs: Vec<u8>,
    offs: Vec<u8>,
    addrs: Vec<u8>,
    sizes: Vec<u8>,
    counts: Vec<u8>,
    /// Records whose time ran backwards and was raised.
    pub raised_times: u64,
    /// Events placed and instructions (the reference counts are below).
    stats: RefsStats,
    /// References and bytes: heap load, heap store, other load, other store.
    counts_n: [u64; 4],
    counts_b: [u64; 4],
    /// Records every column has spare capacity for (see `make_room`).
    room: usize,
}

/// Counts over a REFS stream.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct RefsStats {
    pub heap_reads: u64,
    pub heap_writes: u64,
    pub heap_read_bytes: u64,
    pub heap_write_bytes: u64,
    pub other_reads: u64,
    pub other_writes: u64,
    pub other_read_bytes: u64,
    pub other_write_bytes: u64,
    /// Events placed by EVENTS records.
    pub events_placed: u64,
    /// Total instructions (from the END record), if there was one.
    pub instructions: Option<u64>,
}

impl RefsStats {
    /// Every reference.
    pub fn refs(&self) -> u64 {
        self.heap_refs() + self.other_reads + self.other_writes
    }
    /// References into heap objects.
    pub fn heap_refs(&self) -> u64 {
        self.heap_reads + self.heap_writes
    }
    fn count(&mut self, r: &Ref) {
        let b = u64::from(r.size);
        match (r.target, r.write) {
            (Target::Object { .. }, false) => {
                self.heap_reads += 1;
                self.heap_read_bytes += b;
            }
            (Target::Object { .. }, true) => {
                self.heap_writes += 1;
                self.heap_write_bytes += b;
            }
            (Target::Other { .. }, false) => {
                self.other_reads += 1;
                self.other_read_bytes += b;
            }
            (Target::Other { .. }, true) => {
                self.other_writes += 1;
                self.other_write_bytes += b;
            }
        }
    }
}

/// Appends `v` as a varint into `buf`'s spare capacity.
///
/// # Safety
/// `buf` must have at least 10 bytes of spare capacity (the encoder's `room`
/// accounting guarantees it for every column of every record).
#[inline(always)]
unsafe fn put_unchecked(buf: &mut Vec<u8>, mut v: u64) {
    let len = buf.len();
    debug_assert!(buf.capacity() - len >= 10);
    // SAFETY: the caller guarantees 10 bytes of spare capacity, and a varint
    // is at most 10 bytes; set_len covers exactly the bytes written.
    unsafe {
        let p = buf.as_mut_ptr().add(len);
        let mut i = 0;
        while v >= 0x80 {
            *p.add(i) = (v as u8) | 0x80;
            v >>= 7;
            i += 1;
        }
        *p.add(i) = v as u8;
        buf.set_len(len + i + 1);
    }
}

/// Appends one byte into `buf`'s spare capacity.
///
/// # Safety
/// `buf` must have spare capacity (see [`put_unchecked`]).
#[inline(always)]
unsafe fn push_unchecked(buf: &mut Vec<u8>, b: u8) {
    let len = buf.len();
    debug_assert!(buf.capacity() > len);
    // SAFETY: the caller guarantees spare capacity for the byte.
    unsafe {
        *buf.as_mut_ptr().add(len) = b;
        buf.set_len(len + 1);
    }
}

/// Records a refill makes room for.
const ROOM: usize = 4096;

#[inline]
fn size_code(size: u32) -> u8 {
    if size.is_power_of_two() && size <= 64 {
        size.trailing_zeros() as u8
    } else {
        tag::SIZE_EXPLICIT
    }
}

#[inline]
fn zigzag(d: u64) -> u64 {
    (d << 1) ^ (((d as i64) >> 63) as u64)
}

#[inline]
fn unzigzag(z: u64) -> u64 {
    (z >> 1) ^ (z & 1).wrapping_neg()
}

impl RefsEncoder {
    pub fn new() -> Self {
        Self::default()
    }

    /// Makes sure every column can take one more record (at most 10 bytes
    /// each) without growing: one counter test per record.
    #[inline(always)]
    fn make_room(&mut self) {
        if self.room == 0 {
            self.refill();
        }
        self.room -= 1;
    }

    #[cold]
    #[inline(never)]
    fn refill(&mut self) {
        for c in [
            &mut self.tags,
            &mut self.times,
            &mut self.objs,
            &mut self.offs,
            &mut self.addrs,
            &mut self.sizes,
            &mut self.counts,
        ] {
            c.reserve(10 * ROOM);
        }
        self.room = ROOM;
    }

    /// The time column's entry. Call after `make_room`.
    #[inline(always)]
    fn stamp(&mut self, time: u64) {
        let d = if time < self.time {
            self.raised_times += 1;
            0
        } else {
            let d = time - self.time;
            self.time = time;
            d
        };
        // SAFETY: make_room was called for this record.
        unsafe { put_unchecked(&mut self.times, d) };
        self.n += 1;
    }

    /// Counts one reference: class = heap 0 / other 2, + 1 for a store.
    #[inline(always)]
    fn count(&mut self, class: usize, size: u32) {
        self.counts_n[class] += 1;
        self.counts_b[class] += u64::from(size);
    }

    /// `n` events (the next ones recorded with the writer), creating
    /// `ids_created` objects, happened at instruction `time`.
    pub fn events(&mut self, n: u64, ids_created: u64, time: u64) {
        if n == 0 {
            return;
        }
        self.make_room();
        if n < 64 {
            // SAFETY: make_room was called for this record.
            unsafe { push_unchecked(&mut self.tags, tag::EVENTS | (((n - 1) as u8) << 2)) };
        } else {
            // SAFETY: as above.
            unsafe {
                push_unchecked(&mut self.tags, tag::EVENTS | (tag::COUNT_EXPLICIT << 2));
                put_unchecked(&mut self.counts, n - 64);
            }
        }
        self.stamp(time);
        self.placed += n;
        self.next_id += ids_created;
        self.stats.events_placed += n;
    }

    /// A load or store of `size` bytes at `offset` in live object `id`.
    #[inline(always)]
    pub fn heap(&mut self, id: u64, offset: u64, size: u32, write: bool, time: u64) {
        self.make_room();
        let sc = size_code(size);
        let mut t = tag::HEAP | (sc << 3) | if write { tag::WRITE } else { 0 };
        let r = &mut self.recent;
        let code = if self.recent_len > 0 && r[0] == id {
            0
        } else if self.recent_len > 1 && r[1] == id {
            r[1] = r[0];
            r[0] = id;
            1
        } else if self.recent_len > 2 && r[2] == id {
            r[2] = r[1];
            r[1] = r[0];
            r[0] = id;
            2
        } else {
            // SAFETY: make_room was called for this record.
            unsafe { put_unchecked(&mut self.objs, self.next_id.wrapping_sub(1).wrapping_sub(id)) };
            r[2] = r[1];
            r[1] = r[0];
            r[0] = id;
            self.recent_len = (self.recent_len + 1).min(RECENT);
            tag::OBJ_EXPLICIT
        };
        t |= code << 6;
        // SAFETY: make_room was called for this record.
        unsafe {
            push_unchecked(&mut self.tags, t);
            put_unchecked(&mut self.offs, offset);
            if sc == tag::SIZE_EXPLICIT {
                put_unchecked(&mut self.sizes, u64::from(size));
            }
        }
        self.stamp(time);
        self.count(write as usize, size);
    }

    /// A load or store of `size` bytes at `addr`, outside every heap object.
    #[inline(always)]
    pub fn other(&mut self, addr: u64, size: u32, write: bool, time: u64) {
        self.make_room();
        let sc = size_code(size);
        // the nearer of the two address registers (the stack and the rest, typically)
        let z0 = zigzag(addr.wrapping_sub(self.last_addr[0]));
        let z1 = zigzag(addr.wrapping_sub(self.last_addr[1]));
        let r = (z1 < z0) as usize;
        // SAFETY: make_room was called for this record.
        unsafe {
            push_unchecked(
                &mut self.tags,
                tag::OTHER | (sc << 3) | if write { tag::WRITE } else { 0 } | ((r as u8) << 6),
            );
            put_unchecked(&mut self.addrs, if r == 1 { z1 } else { z0 });
            if sc == tag::SIZE_EXPLICIT {
                put_unchecked(&mut self.sizes, u64::from(size));
            }
        }
        self.last_addr[r] = addr;
        self.stamp(time);
        self.count(2 + write as usize, size);
    }

    /// The program ended after `instructions` instructions.
    pub fn end(&mut self, instructions: u64) {
        self.make_room();
        // SAFETY: make_room was called for this record.
        unsafe { push_unchecked(&mut self.tags, tag::SPECIAL | (tag::END << 2)) };
        self.stamp(instructions);
        self.stats.instructions = Some(self.time);
    }

    /// Counts over the whole stream so far.
    pub fn stats(&self) -> RefsStats {
        let (n, b) = (&self.counts_n, &self.counts_b);
        RefsStats {
            heap_reads: n[0],
            heap_writes: n[1],
            heap_read_bytes: b[0],
            heap_write_bytes: b[1],
            other_reads: n[2],
            other_writes: n[3],
            other_read_bytes: b[2],
            other_write_bytes: b[3],
            ..self.stats
        }
    }

    /// Records in the block being built.
    pub fn len(&self) -> u64 {
        self.n
    }

    pub fn is_empty(&self) -> bool {
        self.n == 0
    }

    /// Bytes the block being built holds before compression.
    pub fn raw_bytes(&self) -> usize {
        self.tags.len()
            + self.times.len()
            + self.objs.len()
            + self.offs.len()
            + self.addrs.len()
            + self.sizes.len()
            + self.counts.len()
    }

    /// True when the block should be written now (1 M records or 16 MiB).
    pub fn is_full(&self) -> bool {
        self.n >= 1 << 20 || self.raw_bytes() >= 16 << 20
    }

    /// Records encoded so far, in every block.
    pub fn records(&self) -> u64 {
        self.records + self.n
    }

    /// The payload of the block built so far, then starts a new block.
    /// `None` when the block is empty.
    pub fn take_block(&mut self) -> Option<Vec<u8>> {
        if self.n == 0 {
            return None;
        }
        let mut p = Vec::with_capacity(self.raw_bytes() + 64);
        put(&mut p, self.n);
        put(&mut p, self.first_record);
        put(&mut p, self.first_event);
        put(&mut p, self.first_id);
        put(&mut p, self.base_time);
        for c in [
            &self.tags,
            &self.times,
            &self.objs,
            &self.offs,
            &self.addrs,
            &self.sizes,
            &self.counts,
        ] {
            put_bytes(&mut p, c);
        }
        self.records += self.n;
        self.n = 0;
        self.first_record = self.records;
        self.first_event = self.placed;
        self.first_id = self.next_id;
        self.base_time = self.time;
        self.recent_len = 0;
        self.last_addr = [0; 2];
        for c in [
            &mut self.tags,
            &mut self.times,
            &mut self.objs,
            &mut self.offs,
            &mut self.addrs,
            &mut self.sizes,
            &mut self.counts,
        ] {
            c.clear();
        }
        Some(p)
    }
}

/// Writes the encoder's block (if it holds any record) as a REFS block,
/// after every event recorded so far. Returns the payload bytes written.
pub fn write_block<W: Write>(w: &mut TraceWriter<W>, enc: &mut RefsEncoder) -> io::Result<usize> {
    match enc.take_block() {
        Some(p) => {
            w.write_stream_block(kind::REFS, BLOCK_SKIPPABLE, &p)?;
            Ok(p.len())
        }
        None => Ok(0),
    }
}

// ---------------------------------------------------------------- reader

/// A column of varints, read with the one-byte case inline.
struct Col<'a> {
    d: &'a [u8],
    pos: usize,
    what: &'static str,
}

impl<'a> Col<'a> {
    fn new(d: &'a [u8], what: &'static str) -> Self {
        Col { d, pos: 0, what }
    }

    #[inline(always)]
    fn get(&mut self) -> Result<u64, String> {
        if let Some(&b) = self.d.get(self.pos) {
            if b < 0x80 {
                self.pos += 1;
                return Ok(u64::from(b));
            }
        }
        self.get_slow()
    }

    #[cold]
    #[inline(never)]
    fn get_slow(&mut self) -> Result<u64, String> {
        let mut c = Cursor::new(&self.d[self.pos..]);
        let v = c.varint(self.what)?;
        self.pos += c.pos();
        Ok(v)
    }

    fn is_empty(&self) -> bool {
        self.pos >= self.d.len()
    }

    fn remaining(&self) -> usize {
        self.d.len().saturating_sub(self.pos)
    }
}

/// `Vec::push`, inlined (the decoder pushes one item per record).
#[inline(always)]
fn push_item(v: &mut Vec<RefItem>, item: RefItem) {
    if v.len() == v.capacity() {
        v.reserve(4096);
    }
    // SAFETY: there is spare capacity (reserved just above if there was none);
    // the slot is written once, then counted by set_len.
    unsafe {
        v.as_mut_ptr().add(v.len()).write(item);
        v.set_len(v.len() + 1);
    }
}

/// The META options token that announces a REFS stream.
pub const OPTION: &str = "refs=1";

/// Whether a trace's META says it holds references.
pub fn announces_refs(m: &crate::model::Meta) -> bool {
    m.options
        .as_deref()
        .is_some_and(|o| o.split(u8::is_ascii_whitespace).any(|t| t == OPTION.as_bytes()))
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

/// Reads a trace's events and references merged in execution order.
///
/// Memory is bounded by the live objects, one decoded block, and the events
/// read ahead of their place (at most the events blocks before the REFS block
/// that places them).
pub struct RefsReader<R: Read> {
    tr: TraceReader<R>,
    /// Events read from EVENTS blocks, not yet placed.
    pending: VecDeque<Event>,
    /// Decoded items; those before `out_pos` were handed out.
    out: Vec<RefItem>,
    out_pos: usize,
    /// The block's recent-object list: (id, usable size; 0 once freed).
    recent: [(u64, u64); RECENT],
    recent_len: usize,
    /// Live objects at the current place: id -> size.
    live: IdMap,
    next_id: u64,
    placed: u64,
    records: u64,
    time: u64,
    ended: bool,
    saw_refs: bool,
    /// The trace has been read to its end (events left over are placed last).
    drained: bool,
    /// META says the trace has references: events wait for their place.
    expect_refs: bool,
    /// A cut-short error, handed out after the good items.
    deferred: Option<TraceError>,
    stats: RefsStats,
}

impl RefsReader<std::io::BufReader<std::fs::File>> {
    /// Opens a trace file.
    pub fn open(path: impl AsRef<Path>) -> Result<Self, TraceError> {
        Ok(RefsReader::new(TraceReader::open(path)?))
    }
}

impl<R: Read> RefsReader<R> {
    /// Merges the streams of a trace whose header was read.
    pub fn new(mut tr: TraceReader<R>) -> Self {
        tr.keep_refs(true);
        let expect_refs = announces_refs(tr.meta());
        RefsReader {
            tr,
            pending: VecDeque::new(),
            out: Vec::new(),
            out_pos: 0,
            recent: [(0, 0); RECENT],
            recent_len: 0,
            live: IdMap::default(),
            next_id: 0,
            placed: 0,
            records: 0,
            time: 0,
            ended: false,
            saw_refs: false,
            drained: false,
            expect_refs,
            deferred: None,
            stats: RefsStats::default(),
        }
    }

    /// The underlying trace reader (META, modules, stacks, threads, ENDs).
    pub fn trace(&self) -> &TraceReader<R> {
        &self.tr
    }

    /// Whether the trace announces references (META options `refs=1`).
    pub fn has_refs(&self) -> bool {
        self.expect_refs
    }

    /// Counts of everything handed out or queued so far.
    pub fn stats(&self) -> &RefsStats {
        &self.stats
    }

    /// Objects live at the current place, with their sizes.
    pub fn live_objects(&self) -> &IdMap {
        &self.live
    }

    /// The next item; `Ok(None)` at the end. A trace cut short gives its
    /// items, then the error ([`TraceError::is_cut_short`]).
    pub fn next_item(&mut self) -> Result<Option<RefItem>, TraceError> {
        loop {
            if self.out_pos < self.out.len() {
                let it = std::mem::replace(
                    &mut self.out[self.out_pos],
                    RefItem::End { instructions: 0 },
                );
                self.out_pos += 1;
                return Ok(Some(it));
            }
            self.out.clear();
            self.out_pos = 0;
            if !self.fill()? {
                return Ok(None);
            }
        }
    }

    /// Moves every decoded item into `buf` (after clearing it), decoding one
    /// more block if none is ready; an empty `buf` means the end. This is the
    /// fast way to read: one call per block.
    pub fn next_batch(&mut self, buf: &mut Vec<RefItem>) -> Result<(), TraceError> {
        buf.clear();
        if self.out_pos == self.out.len() {
            self.out.clear();
            self.out_pos = 0;
            while self.out.is_empty() {
                if !self.fill()? {
                    return Ok(());
                }
            }
        }
        if self.out_pos == 0 {
            std::mem::swap(buf, &mut self.out); // no copy: the block's items change hands
        } else {
            buf.extend(self.out.drain(self.out_pos..));
            self.out.clear();
        }
        self.out_pos = 0;
        Ok(())
    }

    fn err(&self, offset: u64, what: String) -> TraceError {
        TraceError::new(
            self.tr.path(),
            offset,
            self.tr.events_read(),
            Problem::Malformed(format!("REFS: {what}")),
        )
    }

    /// Places one event: updates liveness, queues it.
    fn place(&mut self, e: Event, time: u64) {
        let releases = e.kind.is_release() || (e.kind == Kind::Realloc && !e.failed);
        if let (true, Some(o)) = (releases, e.old) {
            self.live.remove(&o);
            for r in &mut self.recent[..self.recent_len] {
                if r.0 == o {
                    r.1 = 0;
                }
            }
        }
        if let Some(id) = e.id {
            self.live.insert(id, e.size);
            self.next_id = id + 1;
        }
        self.placed += 1;
        self.out.push(RefItem::Event { event: Box::new(e), time });
    }

    /// Decodes more: returns false at the end.
    fn fill(&mut self) -> Result<bool, TraceError> {
        if let Some(e) = self.deferred.take() {
            self.drained = true;
            return Err(e);
        }
        if self.drained {
            return Ok(false);
        }
        loop {
            match self.tr.next_item() {
                Ok(Some(Item::Event(e))) => {
                    if self.expect_refs && !self.ended {
                        self.pending.push_back(e);
                    } else {
                        let t = self.time;
                        self.place(e, t);
                        return Ok(true);
                    }
                }
                Ok(Some(Item::Skipped { kind: k, .. })) if k == kind::REFS => {
                    let at = self.tr.position();
                    if !self.expect_refs {
                        return Err(self.err(
                            at,
                            "a REFS block in a trace whose META options do not say refs=1".into(),
                        ));
                    }
                    let (at, payload) =
                        self.tr.take_refs().ok_or_else(|| self.err(at, "payload lost".into()))?;
                    self.saw_refs = true;
                    self.decode(at, &payload)?;
                    return Ok(true);
                }
                Ok(Some(_)) => {}
                Ok(None) => {
                    // the end: events never placed happened after the last reference
                    self.drained = true;
                    let any = !self.pending.is_empty();
                    self.place_pending();
                    return Ok(any);
                }
                Err(e) if e.is_cut_short() => {
                    // hand out every good item first, then the error
                    self.place_pending();
                    self.deferred = Some(e);
                    return Ok(true);
                }
                Err(e) => return Err(e),
            }
        }
    }

    fn place_pending(&mut self) {
        while let Some(ev) = self.pending.pop_front() {
            let t = self.time;
            self.place(ev, t);
        }
    }

    fn decode(&mut self, at: u64, p: &[u8]) -> Result<(), TraceError> {
        let mut c = Cursor::new(p);
        let hdr = (|| -> Result<[u64; 5], String> {
            Ok([
                c.varint("record count")?,
                c.varint("first_record")?,
                c.varint("first_event")?,
                c.varint("first_id")?,
                c.varint("base_time")?,
            ])
        })()
        .map_err(|m| self.err(at, m))?;
        let [n, first_record, first_event, first_id, base_time] = hdr;
        if n == 0 || n > MAX_BLOCK_RECORDS {
            return Err(
                self.err(at, format!("{n} records in one block; 1..={MAX_BLOCK_RECORDS} allowed"))
            );
        }
        if self.ended {
            return Err(self.err(at, "a REFS block after the END record".into()));
        }
        if first_record != self.records {
            return Err(self.err(
                at,
                format!("block starts at record {first_record}, but {} records came before it (a block is missing)", self.records),
            ));
        }
        if first_event != self.placed || first_id != self.next_id {
            return Err(self.err(
                at,
                format!(
                    "block starts after event {first_event} / object {first_id}, but {} events / {} objects were placed before it",
                    self.placed, self.next_id
                ),
            ));
        }
        if base_time != self.time {
            return Err(self.err(
                at,
                format!(
                    "block base time {base_time}, but the previous record was at {}",
                    self.time
                ),
            ));
        }
        let cols = (|| -> Result<[&[u8]; 7], String> {
            Ok([
                c.bytes("tags column")?,
                c.bytes("times column")?,
                c.bytes("objs column")?,
                c.bytes("offs column")?,
                c.bytes("addrs column")?,
                c.bytes("sizes column")?,
                c.bytes("counts column")?,
            ])
        })()
        .map_err(|m| self.err(at, m))?;
        if !c.is_empty() {
            return Err(self.err(at, format!("{} bytes after the last column", c.remaining())));
        }
        let tags = cols[0];
        if tags.len() as u64 != n {
            return Err(
                self.err(at, format!("tags column holds {} bytes for {n} records", tags.len()))
            );
        }
        let mut times = Col::new(cols[1], "time");
        let mut objs = Col::new(cols[2], "object");
        let mut offs = Col::new(cols[3], "offset");
        let mut addrs = Col::new(cols[4], "address");
        let mut sizes = Col::new(cols[5], "size");
        let mut counts = Col::new(cols[6], "event count");
        self.recent_len = 0;
        let mut last_addr = [0u64; 2];
        let mut time = self.time;
        self.out.reserve(n as usize);
        let base = self.records;
        for (i, &t) in tags.iter().enumerate() {
            let at_rec = |m: String| format!("record {} (#{i} of the block): {m}", base + i as u64);
            if self.ended {
                return Err(self.err(at, at_rec("a record after the END record".into())));
            }
            let dt = times.get().map_err(|m| self.err(at, at_rec(m)))?;
            time = time
                .checked_add(dt)
                .ok_or_else(|| self.err(at, at_rec("time overflows".into())))?;
            match t & 3 {
                tag::HEAP | tag::OTHER => {
                    let sc = (t >> 3) & 7;
                    let size = if sc == tag::SIZE_EXPLICIT {
                        let s = sizes.get().map_err(|m| self.err(at, at_rec(m)))?;
                        if s == 0 || s > u64::from(u32::MAX) {
                            return Err(self.err(at, at_rec(format!("access size {s}"))));
                        }
                        s as u32
                    } else {
                        1u32 << sc
                    };
                    let write = t & tag::WRITE != 0;
                    let target = if t & 3 == tag::HEAP {
                        let code = (t >> 6) as usize;
                        let (id, us) = if code < RECENT {
                            if code >= self.recent_len {
                                return Err(self.err(
                                    at,
                                    at_rec(format!(
                                        "object code {code}, but the recent-object list holds {}",
                                        self.recent_len
                                    )),
                                ));
                            }
                            let e = self.recent[code];
                            self.recent.copy_within(0..code, 1);
                            self.recent[0] = e;
                            e
                        } else {
                            let d = objs.get().map_err(|m| self.err(at, at_rec(m)))?;
                            if d >= self.next_id {
                                return Err(self.err(
                                    at,
                                    at_rec(format!("object ref {d} points before object 0")),
                                ));
                            }
                            let id = self.next_id - 1 - d;
                            let us = self.live.get(&id).map_or(0, |&s| usable(s));
                            self.recent.copy_within(0..RECENT - 1, 1);
                            self.recent[0] = (id, us);
                            self.recent_len = (self.recent_len + 1).min(RECENT);
                            (id, us)
                        };
                        let offset = offs.get().map_err(|m| self.err(at, at_rec(m)))?;
                        if us == 0 {
                            return Err(self.err(
                                at,
                                at_rec(format!("reference to object {id}, which is not live")),
                            ));
                        }
                        if offset >= us {
                            let osize = self.live.get(&id).copied().unwrap_or(0);
                            return Err(self.err(
                                at,
                                at_rec(format!(
                                    "offset {offset} in object {id} of {osize} bytes (usable {us})"
                                )),
                            ));
                        }
                        Target::Object { id, offset }
                    } else {
                        if t >> 7 != 0 {
                            return Err(self.err(
                                at,
                                at_rec(format!("reserved bit 7 in an other record ({t:#04x})")),
                            ));
                        }
                        let r = ((t >> 6) & 1) as usize;
                        let z = addrs.get().map_err(|m| self.err(at, at_rec(m)))?;
                        last_addr[r] = last_addr[r].wrapping_add(unzigzag(z));
                        Target::Other { addr: last_addr[r] }
                    };
                    let r = Ref { time, size, write, target };
                    self.stats.count(&r);
                    push_item(&mut self.out, RefItem::Ref(r));
                }
                tag::EVENTS => {
                    let c6 = t >> 2;
                    let k = if c6 == tag::COUNT_EXPLICIT {
                        64 + counts.get().map_err(|m| self.err(at, at_rec(m)))?
                    } else {
                        u64::from(c6) + 1
                    };
                    if (self.pending.len() as u64) < k {
                        return Err(self.err(
                            at,
                            at_rec(format!(
                                "places {k} events from event {}, but only {} were read before this block",
                                self.placed,
                                self.pending.len()
                            )),
                        ));
                    }
                    for _ in 0..k {
                        let ev = self.pending.pop_front().expect("counted above");
                        self.place(ev, time);
                    }
                    self.stats.events_placed += k;
                }
                _ => {
                    let sub = t >> 2;
                    if sub != tag::END {
                        return Err(self.err(at, at_rec(format!("reserved special record {sub}"))));
                    }
                    self.ended = true;
                    self.stats.instructions = Some(time);
                    self.out.push(RefItem::End { instructions: time });
                }
            }
        }
        for (name, cur) in [
            ("times", &times),
            ("objs", &objs),
            ("offs", &offs),
            ("addrs", &addrs),
            ("sizes", &sizes),
            ("counts", &counts),
        ] {
            if !cur.is_empty() {
                return Err(
                    self.err(at, format!("{} unused bytes in the {name} column", cur.remaining()))
                );
            }
        }
        self.records += n;
        self.time = time;
        Ok(())
    }
}

// ---------------------------------------------------------------- per-object profile

/// What the references say about one object: the input of paper 001's
/// segregation (reference density, lifetime).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct ObjectRefs {
    pub id: u64,
    /// Requested size in bytes.
    pub size: u64,
    /// Stack id of the allocation (0: none recorded).
    pub stack: u32,
    pub kind_code: u8,
    /// Instruction time of the allocation.
    pub born: u64,
    /// Instruction time of the free (or the realloc that replaced it); None
    /// while still live at the end.
    pub died: Option<u64>,
    pub reads: u64,
    pub writes: u64,
    pub read_bytes: u64,
    pub write_bytes: u64,
}

impl ObjectRefs {
    /// Lifetime in instructions; an object live at the end lives until `end`.
    pub fn lifetime(&self, end: u64) -> u64 {
        self.died.unwrap_or(end).saturating_sub(self.born)
    }
    /// Loads and stores.
    pub fn refs(&self) -> u64 {
        self.reads + self.writes
    }
    /// References per byte (paper 001's reference density).
    pub fn density(&self) -> f64 {
        self.refs() as f64 / self.size.max(1) as f64
    }
}

/// Per-object results of a whole trace.
#[derive(Debug, Clone, Default)]
pub struct ObjectProfile {
    /// Indexed by object id.
    pub objects: Vec<ObjectRefs>,
    /// Instructions at the end (END record, else the last record's time).
    pub end: u64,
    pub stats: RefsStats,
    /// False when the trace holds no REFS stream (counts are then all 0).
    pub has_refs: bool,
}

/// Reads a whole trace and returns every object's lifetime (instructions)
/// and reference counts. Memory is one small record per object.
pub fn object_refs(path: impl AsRef<Path>) -> Result<ObjectProfile, TraceError> {
    object_refs_from(RefsReader::open(path)?)
}

/// [`object_refs`] over any reader.
pub fn object_refs_from<R: Read>(mut r: RefsReader<R>) -> Result<ObjectProfile, TraceError> {
    let mut objects: Vec<ObjectRefs> = Vec::new();
    let mut end = 0u64;
    let mut buf = Vec::new();
    loop {
        r.next_batch(&mut buf)?;
        if buf.is_empty() {
            break;
        }
        for it in &buf {
            match it {
                RefItem::Ref(x) => {
                    end = x.time;
                    if let Target::Object { id, .. } = x.target {
                        let o = &mut objects[id as usize];
                        if x.write {
                            o.writes += 1;
                            o.write_bytes += u64::from(x.size);
                        } else {
                            o.reads += 1;
                            o.read_bytes += u64::from(x.size);
                        }
                    }
                }
                RefItem::Event { event, time } => {
                    end = end.max(*time);
                    let releases =
                        event.kind.is_release() || (event.kind == Kind::Realloc && !event.failed);
                    if let (true, Some(old)) = (releases, event.old) {
                        if let Some(o) = objects.get_mut(old as usize) {
                            o.died = Some(*time);
                        }
                    }
                    if let Some(id) = event.id {
                        if objects.len() <= id as usize {
                            objects.resize(id as usize + 1, ObjectRefs::default());
                        }
                        objects[id as usize] = ObjectRefs {
                            id,
                            size: event.size,
                            stack: event.stack,
                            kind_code: event.kind.code(),
                            born: *time,
                            ..ObjectRefs::default()
                        };
                    }
                }
                RefItem::End { instructions } => end = *instructions,
            }
        }
    }
    Ok(ObjectProfile { objects, end, stats: *r.stats(), has_refs: r.has_refs() })
}

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
