//! The REFS encoder: builds block payloads from events and references in
//! execution order (`docs/trace-format.md`, section REFS, Payload).

use super::{size_code, tag, zigzag, RefsStats, RECENT};
use crate::format::{kind, BLOCK_SKIPPABLE};
use crate::varint::{put, put_bytes};
use crate::writer::TraceWriter;
use std::io::{self, Write};

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
            heap_loads: n[0],
            heap_stores: n[1],
            heap_load_bytes: b[0],
            heap_store_bytes: b[1],
            other_loads: n[2],
            other_stores: n[3],
            other_load_bytes: b[2],
            other_store_bytes: b[3],
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
