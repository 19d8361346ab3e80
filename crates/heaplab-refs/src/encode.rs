//! Record mode's REFS encoder: byte for byte `heaplab_trace::refs::RefsEncoder`
//! (the format's reference, `docs/trace-format.md` section REFS), shaped for
//! a loop that encodes hundreds of millions of references.
//!
//! ```text
//!   FastEncoder { cols: 7 Vec<u8> (capacity only) , cold: block bookkeeping, hot: Hot }
//!                                                                              │ copied out
//!   Converter::feed_words:  let mut h = enc.hot();  ── every REF ──▶ h.heap / h.other
//!                           (h lives in registers)                   (pointer bumps, no Vec)
//!                           enc.put_hot(h)  ◀── before a control record, a refill, the end
//! ```
//!
//! Why a copy of the state: the columns are written through `*mut u8`, which
//! the compiler must assume may point anywhere, so an encoder reached through
//! `&mut self` reloads every field (lengths, time, recent objects) after each
//! byte it writes and carries them from record to record through memory. A
//! local copy whose address never escapes stays in registers. It measured
//! 5.4 ns of encoding per reference with `RefsEncoder` on gawk's stream
//! (`examples/convert_phases.rs`).
//!
//! Invariants: while a `Hot` is out, `FastEncoder`'s own copy is stale and
//! only the `Hot` may be used; `Hot::room` records fit in every column
//! without growing (10 bytes each, a varint's most); `tests::same_bytes`
//! checks the payloads against `RefsEncoder` on random streams.

use heaplab_trace::refs::{tag, RefsStats};
use heaplab_trace::varint::{put, put_bytes};

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

/// The state every record touches. `Copy`, to live in registers.
#[derive(Clone, Copy)]
pub struct Hot {
    base: [*mut u8; NCOLS],
    len: [usize; NCOLS],
    /// Records every column has room for.
    room: usize,
    time: u64,
    next_id: u64,
    /// The recent-object list; u64::MAX past its length.
    recent: [u64; 3],
    last_addr: [u64; 2],
    /// heap load, heap store, other load, other store
    counts_n: [u64; 4],
    counts_b: [u64; 4],
    raised: u64,
}

/// Appends `v` as a varint at `base + *len` (one compare and one store for
/// the common one-byte case).
///
/// # Safety
/// 10 bytes from `base + *len` must be writable (the `room` accounting).
#[inline(always)]
unsafe fn put_at(base: *mut u8, len: &mut usize, mut v: u64) {
    // SAFETY: the caller guarantees 10 writable bytes; a varint takes at most 10.
    unsafe {
        let p = base.add(*len);
        if v < 0x80 {
            *p = v as u8;
            *len += 1;
            return;
        }
        let mut i = 0;
        while v >= 0x80 {
            *p.add(i) = (v as u8) | 0x80;
            v >>= 7;
            i += 1;
        }
        *p.add(i) = v as u8;
        *len += i + 1;
    }
}

#[inline(always)]
fn size_code(size: u32) -> u8 {
    if size.is_power_of_two() && size <= 64 {
        size.trailing_zeros() as u8
    } else {
        tag::SIZE_EXPLICIT
    }
}

#[inline(always)]
fn zigzag(d: u64) -> u64 {
    (d << 1) ^ (((d as i64) >> 63) as u64)
}

/// The tag bits of a REF word's size code and WRITE flag: `size code << 3 |
/// WRITE`, the REFS tag's bits 2..5 (the tool's size codes 0..6 are the
/// format's, and its code 7, 128 bytes, is the format's explicit size).
#[inline(always)]
pub fn ref_bits(w: u64) -> u8 {
    (((w >> 53) & 0x38) | ((w >> 57) & 4)) as u8
}

/// The tag bits of a reference of `size` bytes (see [`ref_bits`]).
#[inline(always)]
pub fn bits_of(size: u32, write: bool) -> u8 {
    (size_code(size) << 3) | if write { tag::WRITE } else { 0 }
}

impl Hot {
    /// Records that fit without [`FastEncoder::refill`].
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
    fn push(&mut self, c: usize, b: u8) {
        // SAFETY: the caller keeps within room: the column has 10 bytes past
        // its length for this record.
        unsafe { *self.base[c].add(self.len[c]) = b };
        self.len[c] += 1;
    }

    #[inline(always)]
    fn put(&mut self, c: usize, v: u64) {
        // SAFETY: as in push.
        unsafe { put_at(self.base[c], &mut self.len[c], v) };
    }

    #[inline(always)]
    fn stamp(&mut self, time: u64) {
        let d = if time < self.time {
            self.raised += 1;
            0
        } else {
            let d = time - self.time;
            self.time = time;
            d
        };
        self.put(TIMES, d);
    }

    /// A load or store of `size` bytes at `offset` in live object `id`;
    /// `bits` from [`ref_bits`] or [`bits_of`]. The caller keeps within
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
            3
        };
        self.recent = [id, if code >= 1 { r0 } else { r1 }, if code >= 2 { r1 } else { r2 }];
        if code == tag::OBJ_EXPLICIT {
            self.put(OBJS, self.next_id.wrapping_sub(1).wrapping_sub(id));
        }
        self.push(TAGS, tag::HEAP | bits | (code << 6));
        self.put(OFFS, offset);
        if bits >> 3 == tag::SIZE_EXPLICIT {
            self.put(SIZES, u64::from(size));
        }
        self.stamp(time);
        let class = usize::from(bits & tag::WRITE != 0);
        self.counts_n[class] += 1;
        self.counts_b[class] += u64::from(size);
    }

    /// A load or store of `size` bytes at `addr`, outside every heap object;
    /// as [`Self::heap`].
    #[inline(always)]
    pub fn other(&mut self, addr: u64, bits: u8, size: u32, time: u64) {
        let z0 = zigzag(addr.wrapping_sub(self.last_addr[0]));
        let z1 = zigzag(addr.wrapping_sub(self.last_addr[1]));
        // the nearer of the two address registers (the stack and the rest, typically)
        let r = (z1 < z0) as usize;
        self.push(TAGS, tag::OTHER | bits | ((r as u8) << 6));
        self.put(ADDRS, z0.min(z1));
        if bits >> 3 == tag::SIZE_EXPLICIT {
            self.put(SIZES, u64::from(size));
        }
        self.last_addr[r] = addr;
        self.stamp(time);
        let class = 2 + usize::from(bits & tag::WRITE != 0);
        self.counts_n[class] += 1;
        self.counts_b[class] += u64::from(size);
    }
}

/// Builds REFS block payloads, as `RefsEncoder` does.
pub struct FastEncoder {
    cols: [Vec<u8>; NCOLS],
    hot: Hot,
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

// SAFETY: the raw pointers in `hot` point into `cols`, which the encoder
// owns; moving the encoder to another thread moves them together.
unsafe impl Send for FastEncoder {}

impl Default for FastEncoder {
    fn default() -> Self {
        Self::new()
    }
}

impl FastEncoder {
    pub fn new() -> Self {
        let mut e = FastEncoder {
            cols: Default::default(),
            hot: Hot {
                base: [std::ptr::null_mut(); NCOLS],
                len: [0; NCOLS],
                room: 0,
                time: 0,
                next_id: 0,
                recent: [u64::MAX; 3],
                last_addr: [0; 2],
                counts_n: [0; 4],
                counts_b: [0; 4],
                raised: 0,
            },
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
            // SAFETY: the hot state wrote len[c] bytes into the column's
            // capacity (the room accounting kept it inside).
            unsafe { col.set_len(self.hot.len[c]) };
            col.reserve(10 * ROOM);
            self.hot.base[c] = col.as_mut_ptr();
        }
        self.hot.room = ROOM;
    }

    /// Makes sure one record fits, and counts it (for the cold entry points).
    fn make_room(&mut self) {
        if self.hot.room == 0 {
            self.refill();
        }
        self.hot.room -= 1;
    }

    /// Records in the block being built (one tag byte each).
    fn records_in_block(&self) -> u64 {
        self.hot.len[TAGS] as u64
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
            h.push(TAGS, tag::EVENTS | (((n - 1) as u8) << 2));
        } else {
            h.push(TAGS, tag::EVENTS | (tag::COUNT_EXPLICIT << 2));
            h.put(COUNTS, n - 64);
        }
        h.stamp(time);
        h.next_id += ids_created;
        self.placed += n;
        self.events_placed += n;
    }

    /// The program ended after `instructions` instructions.
    pub fn end(&mut self, instructions: u64) {
        self.make_room();
        let h = &mut self.hot;
        h.push(TAGS, tag::SPECIAL | (tag::END << 2));
        h.stamp(instructions);
        self.instructions = Some(h.time);
    }

    /// Counts over the whole stream so far.
    pub fn stats(&self) -> RefsStats {
        let (n, b) = (&self.hot.counts_n, &self.hot.counts_b);
        RefsStats {
            heap_loads: n[0],
            heap_stores: n[1],
            heap_load_bytes: b[0],
            heap_store_bytes: b[1],
            other_loads: n[2],
            other_stores: n[3],
            other_load_bytes: b[2],
            other_store_bytes: b[3],
            events_placed: self.events_placed,
            instructions: self.instructions,
        }
    }

    /// Records whose time ran backwards and was raised.
    pub fn raised_times(&self) -> u64 {
        self.hot.raised
    }

    /// Bytes the block being built holds before compression.
    pub fn raw_bytes(&self) -> usize {
        self.hot.len.iter().sum()
    }

    /// True when the block should be written now (1 M records or 16 MiB).
    pub fn is_full(&self) -> bool {
        self.records_in_block() >= 1 << 20 || self.raw_bytes() >= 16 << 20
    }

    /// The payload of the block built so far, then starts a new block.
    /// `None` when the block is empty.
    pub fn take_block(&mut self) -> Option<Vec<u8>> {
        let n = self.records_in_block();
        if n == 0 {
            return None;
        }
        let h = &mut self.hot;
        let mut p = Vec::with_capacity(h.len.iter().sum::<usize>() + 64);
        put(&mut p, n);
        put(&mut p, self.first_record);
        put(&mut p, self.first_event);
        put(&mut p, self.first_id);
        put(&mut p, self.base_time);
        for (c, col) in self.cols.iter_mut().enumerate() {
            // SAFETY: as in refill.
            unsafe { col.set_len(h.len[c]) };
            put_bytes(&mut p, col);
            col.clear();
            h.len[c] = 0;
        }
        self.records += n;
        self.first_record = self.records;
        self.first_event = self.placed;
        self.first_id = h.next_id;
        self.base_time = h.time;
        h.recent = [u64::MAX; 3];
        h.last_addr = [0; 2];
        // the capacity is kept: every column is empty, so `room` still holds
        Some(p)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use heaplab_trace::refs::RefsEncoder;

    /// A small deterministic generator.
    struct Rng(u64);
    impl Rng {
        fn next(&mut self) -> u64 {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            self.0
        }
    }

    #[test]
    fn ref_words_carry_the_tag_bits() {
        for code in 0..8u64 {
            for write in [false, true] {
                let w = 0x1234 | code << 56 | if write { crate::raw::WRITE } else { 0 };
                assert_eq!(ref_bits(w), bits_of(crate::raw::size(w), write), "{code} {write}");
            }
        }
    }

    #[test]
    fn same_bytes() {
        for seed in 1..6u64 {
            let mut rng = Rng(seed * 0x9e37_79b9_7f4a_7c15);
            let mut a = RefsEncoder::new();
            let mut b = FastEncoder::new();
            let (mut pa, mut pb) = (Vec::new(), Vec::new());
            let mut time = 0u64;
            let mut ids = 0u64;
            for i in 0..200_000u64 {
                let r = rng.next();
                // times go forward, now and then backward (raised)
                time = if r.is_multiple_of(97) { time.saturating_sub(5) } else { time + (r >> 60) };
                let size = match (r >> 8) % 10 {
                    0 => 3,
                    1 => 128,
                    2 => 1 << 20,
                    k => 1 << (k % 7),
                };
                let write = r & 1 != 0;
                match (r >> 4) % 16 {
                    0 => {
                        let made = (r >> 20) % 3;
                        let n = [1, 5, 70, 300][((r >> 24) % 4) as usize];
                        a.events(n, made, time);
                        b.events(n, made, time);
                        ids += made;
                    }
                    1..=7 if ids > 0 => {
                        // mostly recent objects, some far ones
                        let id = ids - 1 - (r >> 32) % if r & 2 != 0 { 4 } else { ids };
                        let off = (r >> 40) % if r & 4 != 0 { 64 } else { 1 << 20 };
                        a.heap(id, off, size, write, time);
                        let mut h = b.hot();
                        if h.room() == 0 {
                            b.refill();
                            h = b.hot();
                        }
                        h.heap(id, off, bits_of(size, write), size, time);
                        h.used(1);
                        b.put_hot(h);
                    }
                    _ => {
                        let addr = match r % 3 {
                            0 => 0x7ffe_0000_0000 + ((r >> 30) & 0xfff),
                            1 => 0x40_0000 + ((r >> 30) & 0xffff),
                            _ => r >> 16,
                        };
                        a.other(addr, size, write, time);
                        let mut h = b.hot();
                        if h.room() == 0 {
                            b.refill();
                            h = b.hot();
                        }
                        h.other(addr, bits_of(size, write), size, time);
                        h.used(1);
                        b.put_hot(h);
                    }
                }
                if i % 50_000 == 49_999 || a.is_full() {
                    assert_eq!(a.is_full(), b.is_full());
                    pa.push(a.take_block());
                    pb.push(b.take_block());
                }
            }
            a.end(time + 10);
            b.end(time + 10);
            pa.push(a.take_block());
            pb.push(b.take_block());
            pa.push(a.take_block()); // empty
            pb.push(b.take_block());
            assert_eq!(pa, pb, "seed {seed}");
            assert_eq!(a.stats(), b.stats());
            assert_eq!(a.raised_times, b.raised_times());
            assert!(
                b.raised_times() > 0 && b.stats().heap_refs() > 0 && b.stats().other_stores > 0
            );
        }
    }
}
