//! The REFS encoder (version 2, `docs/trace-format.md`, REFS): block
//! payloads from events and references in execution order. The one REFS
//! write path: `heaplab record --refs` drives [`Hot`] from its tight loop,
//! everything else calls [`RefsEncoder`]'s methods.
//!
//! ```text
//!   RefsEncoder { cols: 7 Vec<u8> (capacity only), block bookkeeping, aux: counts, hot: Hot }
//!                                                                        │ copied out
//!   a tight loop:  let mut h = enc.hot();  ── every reference ──▶ h.heap / h.other
//!                  (h lives in registers)                         (pointer bumps, no Vec)
//!                  enc.put_hot(h)  ◀── before anything else on the encoder
//! ```
//!
//! Why a copy of the state: the columns are written through `*mut u8`, which
//! the compiler must assume may point anywhere, so an encoder reached through
//! `&mut self` reloads every field after each byte it writes. A local copy
//! whose address never escapes stays in registers.
//!
//! A small time delta goes into the tag; the `times` byte is written
//! whatever the delta and kept only when the tag cannot say it (a length
//! bump of 0 or 1, not a branch that would mispredict on one reference in
//! five). Counts come from the tags, tallied when a block is taken.
//!
//! Invariants: while a `Hot` is out, the encoder's own copy is stale and
//! only the `Hot` may be used; `Hot::room` records fit in every column
//! without growing (10 bytes each, a varint's most); the tests read back
//! what random streams encode, and a committed vector pins the bytes.

use super::{v2, zigzag, RefsStats, RECENT};
use crate::format::{kind, BLOCK_SKIPPABLE};
use crate::varint::{put, put_bytes};
use crate::writer::TraceWriter;
use std::io::{self, Write};

const TAGS: usize = 0;
const TIMES: usize = 1;
const OBJS: usize = 2;
const OFFS: usize = 3;
const ADDRS: usize = 4;
const SIZES: usize = 5;
const COUNTS: usize = 6;
const NCOLS: usize = 7;

/// Records a refill makes room for.
const ROOM: usize = 4096;
/// Bytes every column keeps free per record of room.
const PER_RECORD: usize = 10;

/// The state every record touches. `Copy`, to live in registers.
#[derive(Clone, Copy)]
pub struct Hot {
    /// Where each column's next byte goes (its start is the encoder's).
    cur: [*mut u8; NCOLS],
    /// Records every column has room for.
    room: usize,
    time: u64,
    next_id: u64,
    /// The recent-object list; u64::MAX past its length.
    recent: [u64; RECENT],
    reg: [u64; 2],
    /// What a record rarely or cheaply touches, in the encoder (the state
    /// above is all a loop can keep in registers).
    aux: *mut Aux,
}

/// The encoder's counts, reached from [`Hot`] through a pointer.
struct Aux {
    /// Bytes of explicit-size references: heap loads, heap stores, other
    /// loads, other stores.
    explicit_bytes: [u64; 4],
    /// Records whose time ran backwards and was raised.
    raised: u64,
}

/// Appends `v` as a varint at `*cur` and moves it on (one compare and one
/// store for the common one-byte case).
///
/// # Safety
/// 10 bytes from `*cur` must be writable (the `room` accounting).
#[inline(always)]
unsafe fn put_at(cur: &mut *mut u8, mut v: u64) {
    // SAFETY: the caller guarantees 10 writable bytes; a varint takes at most 10.
    unsafe {
        let p = *cur;
        if v < 0x80 {
            *p = v as u8;
            *cur = p.add(1);
            return;
        }
        let mut i = 0;
        while v >= 0x80 {
            *p.add(i) = (v as u8) | 0x80;
            v >>= 7;
            i += 1;
        }
        *p.add(i) = v as u8;
        *cur = p.add(i + 1);
    }
}

impl Hot {
    /// Records that fit without [`RefsEncoder::refill`].
    #[inline(always)]
    pub fn room(&self) -> usize {
        self.room
    }

    /// `records` were encoded (the caller counts them, against [`Self::room`]).
    #[inline(always)]
    pub fn used(&mut self, records: usize) {
        self.room -= records;
    }

    #[inline(always)]
    fn put(&mut self, c: usize, v: u64) {
        // SAFETY: the caller keeps within room: the column has 10 bytes past
        // its length for this record.
        unsafe { put_at(&mut self.cur[c], v) };
    }

    #[inline(always)]
    fn push(&mut self, c: usize, b: u8) {
        // SAFETY: as in put.
        unsafe {
            *self.cur[c] = b;
            self.cur[c] = self.cur[c].add(1);
        }
    }

    /// The time delta of a record at `time` (a time that runs backwards is
    /// raised to the previous record's and counted).
    #[inline(always)]
    fn delta(&mut self, time: u64) -> u64 {
        if time >= self.time {
            let d = time - self.time;
            self.time = time;
            d
        } else {
            // SAFETY: as in count.
            unsafe { (*self.aux).raised += 1 };
            0
        }
    }

    /// The `times` entry of a record at `time` whose tag says deltas that
    /// `fits` accepts: written in any case, kept only when it does not fit.
    /// Returns the delta and whether the tag says it.
    #[inline(always)]
    fn time_in_tag(&mut self, time: u64, fits: impl Fn(u64) -> bool) -> (u64, bool) {
        let d = self.delta(time);
        let inline = fits(d);
        if d < 0x80 {
            // SAFETY: as in put (1 of the record's 10 bytes).
            unsafe {
                *self.cur[TIMES] = d as u8;
                self.cur[TIMES] = self.cur[TIMES].add(usize::from(!inline));
            }
        } else {
            self.put(TIMES, d); // never fits a tag
        }
        (d, inline)
    }

    #[inline(always)]
    fn explicit_size(&mut self, bits: u8, size: u32, other: usize) {
        if bits >> 1 == v2::SIZE_EXPLICIT {
            self.put(SIZES, u64::from(size));
            // SAFETY: as in count.
            unsafe {
                (*self.aux).explicit_bytes[other << 1 | usize::from(bits & 1)] += u64::from(size)
            };
        }
    }

    /// A load or store of `size` bytes at `offset` in live object `id`;
    /// `bits` from [`v2::access_bits`]. The caller keeps within
    /// [`Self::room`] and counts the record with [`Self::used`].
    #[inline(always)]
    pub fn heap(&mut self, id: u64, offset: u64, bits: u8, size: u32, time: u64) {
        // slots past the list's length hold u64::MAX, which no id is
        let [r0, r1, r2] = self.recent;
        let code: u8 = if r0 == id {
            0
        } else if r1 == id {
            1
        } else if r2 == id {
            2
        } else {
            v2::OBJ_EXPLICIT
        };
        self.recent = [id, if code >= 1 { r0 } else { r1 }, if code >= 2 { r1 } else { r2 }];
        if code == v2::OBJ_EXPLICIT {
            self.put(OBJS, self.next_id.wrapping_sub(1).wrapping_sub(id));
        }
        let (_, one) = self.time_in_tag(time, |d| d == 1);
        let t = v2::HEAP | bits << 2 | code << 5 | if one { v2::HEAP_TIME1 } else { 0 };
        self.push(TAGS, t);
        self.put(OFFS, offset);
        self.explicit_size(bits, size, 0);
    }

    /// A load or store of `size` bytes at `addr`, outside every heap object;
    /// as [`Self::heap`].
    #[inline(always)]
    pub fn other(&mut self, addr: u64, bits: u8, size: u32, time: u64) {
        // the nearer of the two address registers (the stack and the rest, typically)
        let z0 = zigzag(addr.wrapping_sub(self.reg[0]));
        let z1 = zigzag(addr.wrapping_sub(self.reg[1]));
        let r = z1 < z0;
        let z = if r { z1 } else { z0 };
        self.reg = if r { [self.reg[0], addr] } else { [addr, self.reg[1]] };
        let (d, inline) = self.time_in_tag(time, |d| d.wrapping_sub(1) < 3);
        let tc = if inline { d as u8 } else { 0 };
        let t = v2::OTHER | bits << 2 | if r { v2::REGISTER } else { 0 } | tc << 6;
        self.push(TAGS, t);
        self.put(ADDRS, z);
        self.explicit_size(bits, size, 1);
    }
}

/// Builds REFS block payloads. Feed it events (as they are recorded with the
/// [`TraceWriter`]) and references in execution order; write a block with
/// [`write_block`] whenever [`RefsEncoder::is_full`] says so, and at the end.
pub struct RefsEncoder {
    cols: [Vec<u8>; NCOLS],
    /// Where each column's buffer starts (`hot.cur` is where it ends).
    base: [*mut u8; NCOLS],
    hot: Hot,
    /// The explicit sizes' bytes and raised times (boxed: `hot` points to it).
    aux: Box<Aux>,
    /// The stats folded so far.
    folded: RefsStats,
    /// Records of the blocks taken.
    records: u64,
    placed: u64,
    first_record: u64,
    first_event: u64,
    first_id: u64,
    base_time: u64,
    events_placed: u64,
    instructions: Option<u64>,
}

// SAFETY: the raw pointers in `base` and `hot` point into `cols` and `aux`,
// which the encoder owns (`aux` boxed, so it does not move with the
// encoder); moving the encoder to another thread moves them together.
unsafe impl Send for RefsEncoder {}

impl Default for RefsEncoder {
    fn default() -> Self {
        Self::new()
    }
}

impl std::fmt::Debug for RefsEncoder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RefsEncoder")
            .field("records", &self.records())
            .field("raw_bytes", &self.raw_bytes())
            .finish()
    }
}

impl RefsEncoder {
    pub fn new() -> Self {
        let mut aux = Box::new(Aux { explicit_bytes: [0; 4], raised: 0 });
        let ap: *mut Aux = &mut *aux;
        let mut e = RefsEncoder {
            cols: Default::default(),
            base: [std::ptr::null_mut(); NCOLS],
            hot: Hot {
                cur: [std::ptr::null_mut(); NCOLS],
                room: 0,
                time: 0,
                next_id: 0,
                recent: [u64::MAX; RECENT],
                reg: [0; 2],
                aux: ap,
            },
            aux,
            folded: RefsStats::default(),
            records: 0,
            placed: 0,
            first_record: 0,
            first_event: 0,
            first_id: 0,
            base_time: 0,
            events_placed: 0,
            instructions: None,
        };
        e.refill();
        e
    }

    /// The hot state, to encode with; give it back with [`Self::put_hot`]
    /// before calling anything else on the encoder.
    #[inline(always)]
    pub fn hot(&self) -> Hot {
        self.hot
    }

    #[inline(always)]
    pub fn put_hot(&mut self, h: Hot) {
        self.hot = h;
    }

    /// Makes room for [`ROOM`] more records in every column.
    #[cold]
    #[inline(never)]
    pub fn refill(&mut self) {
        for (c, col) in self.cols.iter_mut().enumerate() {
            let len = self.hot.cur[c] as usize - self.base[c] as usize;
            // SAFETY: the hot state wrote len bytes into the column's
            // capacity (the room accounting kept it inside).
            unsafe { col.set_len(len) };
            col.reserve(PER_RECORD * ROOM);
            self.base[c] = col.as_mut_ptr();
            // SAFETY: within the capacity just reserved.
            self.hot.cur[c] = unsafe { self.base[c].add(len) };
        }
        self.hot.room = ROOM;
    }

    /// Makes sure one record fits, and counts it (for the entry points below).
    #[inline(always)]
    fn make_room(&mut self) {
        if self.hot.room == 0 {
            self.refill();
        }
        self.hot.room -= 1;
    }

    /// A load or store of `size` bytes at `offset` in live object `id`.
    pub fn heap(&mut self, id: u64, offset: u64, size: u32, write: bool, time: u64) {
        self.make_room();
        self.hot.heap(id, offset, v2::access_bits(size, write), size, time);
    }

    /// A load or store of `size` bytes at `addr`, outside every heap object.
    pub fn other(&mut self, addr: u64, size: u32, write: bool, time: u64) {
        self.make_room();
        self.hot.other(addr, v2::access_bits(size, write), size, time);
    }

    /// `n` events (the next ones recorded with the writer), creating
    /// `ids_created` objects, happened at instruction `time`.
    pub fn events(&mut self, n: u64, ids_created: u64, time: u64) {
        if n == 0 {
            return;
        }
        self.make_room();
        let h = &mut self.hot;
        if n < 64 {
            h.push(TAGS, v2::EVENTS | (((n - 1) as u8) << 2));
        } else {
            h.push(TAGS, v2::EVENTS | (v2::COUNT_EXPLICIT << 2));
            h.put(COUNTS, n - 64);
        }
        let d = h.delta(time);
        h.put(TIMES, d);
        h.next_id += ids_created;
        self.placed += n;
        self.events_placed += n;
    }

    /// The program ended after `instructions` instructions.
    pub fn end(&mut self, instructions: u64) {
        self.make_room();
        let h = &mut self.hot;
        h.push(TAGS, v2::SPECIAL | (v2::END << 2));
        let d = h.delta(instructions);
        h.put(TIMES, d);
        self.instructions = Some(h.time);
    }

    /// Counts over the whole stream so far.
    pub fn stats(&self) -> RefsStats {
        let mut s = self.folded;
        // SAFETY: the block's tags so far, written by the hot state into the
        // column's capacity, from its start to its cursor.
        let written = unsafe {
            std::slice::from_raw_parts(
                self.base[TAGS],
                self.hot.cur[TAGS] as usize - self.base[TAGS] as usize,
            )
        };
        fold(&tally(written), &mut s);
        let e = self.aux.explicit_bytes;
        s.heap_load_bytes += e[0];
        s.heap_store_bytes += e[1];
        s.other_load_bytes += e[2];
        s.other_store_bytes += e[3];
        s.events_placed = self.events_placed;
        s.instructions = self.instructions;
        s
    }

    /// Records whose time ran backwards and was raised.
    pub fn raised_times(&self) -> u64 {
        self.aux.raised
    }

    /// Records in the block being built (one tag byte each).
    pub fn len(&self) -> u64 {
        (self.hot.cur[TAGS] as usize - self.base[TAGS] as usize) as u64
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Records encoded so far, in every block.
    pub fn records(&self) -> u64 {
        self.records + self.len()
    }

    /// Bytes the block being built holds before compression.
    pub fn raw_bytes(&self) -> usize {
        (0..NCOLS).map(|c| self.hot.cur[c] as usize - self.base[c] as usize).sum()
    }

    /// True when the block should be written now (1 M records or 16 MiB).
    pub fn is_full(&self) -> bool {
        self.len() >= 1 << 20 || self.raw_bytes() >= 16 << 20
    }

    /// The payload of the block built so far, then starts a new block.
    /// `None` when the block is empty.
    pub fn take_block(&mut self) -> Option<Vec<u8>> {
        let mut p = Vec::new();
        self.take_block_into(&mut p).then_some(p)
    }

    /// [`Self::take_block`] into `p` (cleared first), whose memory a caller
    /// may reuse from block to block: a fresh 16 MiB buffer per block costs
    /// its page faults. False (and `p` empty) when the block is empty.
    pub fn take_block_into(&mut self, p: &mut Vec<u8>) -> bool {
        p.clear();
        let n = self.len();
        if n == 0 {
            return false;
        }
        p.reserve(self.raw_bytes() + 64);
        let h = &mut self.hot;
        put(p, n);
        put(p, self.first_record);
        put(p, self.first_event);
        put(p, self.first_id);
        put(p, self.base_time);
        for (c, col) in self.cols.iter_mut().enumerate() {
            // SAFETY: as in refill.
            unsafe { col.set_len(h.cur[c] as usize - self.base[c] as usize) };
            put_bytes(p, col);
            if c == TAGS {
                fold(&tally(col), &mut self.folded);
            }
            col.clear();
            h.cur[c] = self.base[c];
        }
        self.records += n;
        self.first_record = self.records;
        self.first_event = self.placed;
        self.first_id = h.next_id;
        self.base_time = h.time;
        h.recent = [u64::MAX; RECENT];
        h.reg = [0; 2];
        // the capacity is kept: every column is empty, so `room` still holds
        true
    }
}

/// Records by tag: counted when a block is taken, not one by one as they
/// are encoded (an increment per record in memory chains each record to the
/// last one with the same tag). Four partial counts keep the loop free of
/// that chain too.
fn tally(tags: &[u8]) -> [u32; 256] {
    let mut h = [[0u32; 256]; 4];
    let mut q = tags.chunks_exact(4);
    for c in &mut q {
        h[0][usize::from(c[0])] += 1;
        h[1][usize::from(c[1])] += 1;
        h[2][usize::from(c[2])] += 1;
        h[3][usize::from(c[3])] += 1;
    }
    for &t in q.remainder() {
        h[0][usize::from(t)] += 1;
    }
    let mut out = [0u32; 256];
    for (i, o) in out.iter_mut().enumerate() {
        *o = h[0][i] + h[1][i] + h[2][i] + h[3][i];
    }
    out
}

/// Adds the counts of a histogram of tags to `s` (bytes of explicit sizes
/// excepted: those records count here, their bytes where they were encoded).
fn fold(hist: &[u32; 256], s: &mut RefsStats) {
    for (t, &n) in hist.iter().enumerate() {
        let (n, t) = (u64::from(n), t as u8);
        if n == 0 || t & 3 > v2::OTHER {
            continue; // none, or events and special
        }
        let bytes = v2::SIZE_OF_CODE.get(usize::from(t >> 3 & 3)).map_or(0, |&x| n * u64::from(x));
        let (count, total) = match (t & 3 == v2::OTHER, t & v2::STORE != 0) {
            (false, false) => (&mut s.heap_loads, &mut s.heap_load_bytes),
            (false, true) => (&mut s.heap_stores, &mut s.heap_store_bytes),
            (true, false) => (&mut s.other_loads, &mut s.other_load_bytes),
            (true, true) => (&mut s.other_stores, &mut s.other_store_bytes),
        };
        *count += n;
        *total += bytes;
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
