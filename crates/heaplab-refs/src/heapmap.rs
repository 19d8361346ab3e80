//! Which live heap object an address falls in, answered in a few loads.
//!
//! ```text
//!   address ─▶ [lo, hi) of every block ever seen?  no ─▶ not heap (stack, globals: one compare)
//!           ─▶ the block of the last hit, or the one before it?  ─▶ (object id, offset)
//!           ─▶ chunk = address >> 16 (a table over the heap's span, a hash map past 1 TiB)
//!           ─▶ granule = chunk[(address >> 4) & 4095]  (u32 slot, 0 = none)
//!           ─▶ slot: start <= address < start + usable ─▶ (object id, offset)
//! ```
//!
//! Every 16-byte granule a block covers names the block's slot. Slots are
//! recycled, and a freed block's granules are not cleared: a stale granule
//! names a slot whose block (if any) no longer covers the address, which the
//! range check catches. The table costs 4 bytes per 16 bytes of heap address
//! range touched (chunks of 64 KiB are made on first use).
//!
//! Invariant: a live block's granules all name its slot, except granules it
//! shares with a block created later at an unaligned address (its last
//! partial granule); the recorder's blocks are 16-byte aligned.

use heaplab_trace::refs::usable;
use std::collections::HashMap;

const CHUNK_SHIFT: u32 = 16;
const GRANULE_SHIFT: u32 = 4;
const PER_CHUNK: usize = 1 << (CHUNK_SHIFT - GRANULE_SHIFT);

#[derive(Clone, Copy, Default)]
struct Slot {
    start: u64,
    /// start + usable; 0 when the slot is free.
    end: u64,
    id: u64,
}

/// Live heap blocks by address.
pub struct HeapMap {
    lo: u64,
    hi: u64,
    /// Chunk index + 1 (0: none) for chunk keys first_key .. first_key + len.
    first: Vec<u32>,
    first_key: u64,
    /// Chunks outside `first` (blocks more than 1 TiB apart).
    chunk_index: HashMap<u64, u32>,
    chunks: Vec<Box<[u32; PER_CHUNK]>>,
    cache_key: u64,
    cache_idx: u32,
    /// The block of the last hit: start, usable length, id (len 0: none).
    last_start: u64,
    last_len: u64,
    last_id: u64,
    /// The block `last` replaced (len 0: none).
    prev_start: u64,
    prev_len: u64,
    prev_id: u64,
    slots: Vec<Slot>,
    free_slots: Vec<u32>,
    by_start: HashMap<u64, (u32, u64)>,
}

impl Default for HeapMap {
    fn default() -> Self {
        Self::new()
    }
}

impl HeapMap {
    pub fn new() -> Self {
        HeapMap {
            lo: u64::MAX,
            hi: 0,
            first: Vec::new(),
            first_key: 0,
            chunk_index: HashMap::new(),
            chunks: Vec::new(),
            cache_key: u64::MAX,
            cache_idx: 0,
            last_start: 0,
            last_len: 0,
            last_id: 0,
            prev_start: 0,
            prev_len: 0,
            prev_id: 0,
            slots: vec![Slot::default()], // slot 0 means "none"
            free_slots: Vec::new(),
            by_start: HashMap::new(),
        }
    }

    /// Widens `first` to cover `key` when that keeps it under 2^24 entries.
    fn cover(&mut self, key: u64) -> bool {
        const MAX: u64 = 1 << 24;
        if self.first.is_empty() {
            self.first_key = key;
            self.first.push(0);
            return true;
        }
        let (a, b) = (self.first_key, self.first_key + self.first.len() as u64);
        if key >= a && key < b {
            return true;
        }
        let (na, nb) = (a.min(key), b.max(key + 1));
        if nb - na > MAX {
            return false;
        }
        if na < a {
            let mut v = vec![0u32; (a - na) as usize];
            v.extend_from_slice(&self.first);
            self.first = v;
            self.first_key = na;
        }
        self.first.resize((nb - self.first_key) as usize, 0);
        true
    }

    fn chunk_mut(&mut self, key: u64) -> &mut [u32; PER_CHUNK] {
        let n = self.chunks.len() as u32;
        let idx = if self.cover(key) {
            let e = &mut self.first[(key - self.first_key) as usize];
            if *e == 0 {
                *e = n + 1;
            }
            *e - 1
        } else {
            *self.chunk_index.entry(key).or_insert(n)
        };
        if idx == n {
            self.chunks.push(Box::new([0; PER_CHUNK]));
        }
        &mut self.chunks[idx as usize]
    }

    /// A block of `size` bytes at `start` is now object `id`.
    pub fn insert(&mut self, start: u64, size: u64, id: u64) {
        let end = start.saturating_add(usable(size));
        let slot = match self.free_slots.pop() {
            Some(s) => s,
            None => {
                self.slots.push(Slot::default());
                (self.slots.len() - 1) as u32
            }
        };
        self.slots[slot as usize] = Slot { start, end, id };
        self.by_start.insert(start, (slot, id));
        self.lo = self.lo.min(start);
        self.hi = self.hi.max(end);
        let mut g = start >> GRANULE_SHIFT;
        let last = (end - 1) >> GRANULE_SHIFT;
        while g <= last {
            let key = g >> (CHUNK_SHIFT - GRANULE_SHIFT);
            let chunk = self.chunk_mut(key);
            let from = (g as usize) & (PER_CHUNK - 1);
            let to = if (last >> (CHUNK_SHIFT - GRANULE_SHIFT)) == key {
                (last as usize & (PER_CHUNK - 1)) + 1
            } else {
                PER_CHUNK
            };
            chunk[from..to].fill(slot);
            g += (to - from) as u64;
        }
    }

    /// The block that starts at `start` is gone; returns its object id.
    pub fn remove(&mut self, start: u64) -> Option<u64> {
        let (slot, id) = self.by_start.remove(&start)?;
        if start == self.last_start {
            self.last_len = 0;
        }
        if start == self.prev_start {
            self.prev_len = 0;
        }
        self.slots[slot as usize].end = 0;
        self.free_slots.push(slot);
        Some(id)
    }

    /// The object id of the live block starting at `start`.
    pub fn id_at(&self, start: u64) -> Option<u64> {
        self.by_start.get(&start).map(|&(_, id)| id)
    }

    /// Live blocks.
    pub fn len(&self) -> usize {
        self.by_start.len()
    }

    pub fn is_empty(&self) -> bool {
        self.by_start.is_empty()
    }

    /// (object id, offset) of the live block whose usable bytes hold `addr`.
    #[inline(always)]
    pub fn lookup(&mut self, addr: u64) -> Option<(u64, u64)> {
        // most references are not to the heap (stack, globals): one compare
        // says so first; then the block of the last hit
        if addr.wrapping_sub(self.lo) >= self.hi.wrapping_sub(self.lo) {
            return None;
        }
        let d = addr.wrapping_sub(self.last_start);
        if d < self.last_len {
            return Some((self.last_id, d));
        }
        // then the block found before it: a program that works on two
        // objects at once (a bignum's operands) alternates between them
        let d = addr.wrapping_sub(self.prev_start);
        if d < self.prev_len {
            return Some((self.prev_id, d));
        }
        let key = addr >> CHUNK_SHIFT;
        if key != self.cache_key {
            let d = key.wrapping_sub(self.first_key);
            self.cache_idx = match self.first.get(d as usize) {
                Some(&0) => return None,
                Some(&e) => e - 1,
                None => *self.chunk_index.get(&key)?,
            };
            self.cache_key = key;
        }
        let s = self.chunks[self.cache_idx as usize]
            [((addr >> GRANULE_SHIFT) as usize) & (PER_CHUNK - 1)];
        if s == 0 {
            return None;
        }
        let sl = &self.slots[s as usize];
        if addr >= sl.start && addr < sl.end {
            (self.prev_start, self.prev_len, self.prev_id) =
                (self.last_start, self.last_len, self.last_id);
            self.last_start = sl.start;
            self.last_len = sl.end - sl.start;
            self.last_id = sl.id;
            Some((sl.id, addr - sl.start))
        } else {
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blocks_are_found_by_any_of_their_bytes() {
        let mut m = HeapMap::new();
        m.insert(0x10000, 24, 0);
        m.insert(0x10020, 100_000, 1); // spans chunks
        assert_eq!(m.lookup(0x10000), Some((0, 0)));
        assert_eq!(m.lookup(0x1001f), Some((0, 31))); // usable 32
        assert_eq!(m.lookup(0x10020), Some((1, 0)));
        assert_eq!(m.lookup(0x10020 + 99_999), Some((1, 99_999)));
        assert_eq!(m.lookup(0x10020 + 100_000), None);
        assert_eq!(m.lookup(0xffff), None);
        assert_eq!(m.lookup(0x7ffe_0000), None);
        // far apart: the table widens, then a hash map takes the rest
        m.insert(0x1000, 16, 2);
        m.insert(0x7f00_0000_0000, 32, 3);
        assert_eq!(m.lookup(0x1008), Some((2, 8)));
        assert_eq!(m.lookup(0x7f00_0000_0010), Some((3, 16)));
        assert_eq!(m.lookup(0x10000), Some((0, 0)));
        assert_eq!(m.lookup(0x5000_0000), None);
    }

    #[test]
    fn freed_and_reused_addresses_name_the_new_object() {
        let mut m = HeapMap::new();
        m.insert(0x20000, 64, 0);
        m.insert(0x20040, 64, 1);
        assert_eq!(m.remove(0x20000), Some(0));
        assert_eq!(m.lookup(0x20008), None, "freed memory is no object's");
        m.insert(0x20000, 16, 2); // reuses slot and address, smaller
        assert_eq!(m.lookup(0x20008), Some((2, 8)));
        assert_eq!(m.lookup(0x20010), None, "past the new block: the stale granule is caught");
        assert_eq!(m.remove(0x20040), Some(1));
        m.insert(0x30000, 8, 3); // slot of object 1 recycled far away
        assert_eq!(m.lookup(0x20040), None);
        assert_eq!(m.lookup(0x30004), Some((3, 4)));
        assert_eq!(m.remove(0x12345), None);
        assert_eq!(m.len(), 2);
    }

    /// Against a naive map of live blocks: random inserts, removals and
    /// lookups, half of them alternating between the last two blocks found
    /// (the remembered ones), so that a removed block that one of them
    /// still names would be caught.
    #[test]
    fn lookups_agree_with_a_naive_map() {
        use std::collections::BTreeMap;
        let mut m = HeapMap::new();
        let mut live: BTreeMap<u64, (u64, u64)> = BTreeMap::new(); // start -> (end, id)
        let mut x = 0x9E37_79B9_7F4A_7C15u64;
        let mut rnd = |n: u64| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x % n
        };
        let naive = |live: &BTreeMap<u64, (u64, u64)>, a: u64| {
            live.range(..=a)
                .next_back()
                .filter(|(_, &(end, _))| a < end)
                .map(|(&s, &(_, id))| (id, a - s))
        };
        let mut next_id = 0;
        let mut recent: Vec<u64> = Vec::new();
        for _ in 0..200_000 {
            match rnd(10) {
                0..=2 => {
                    // a block at a free 16-aligned place in a 64 KiB arena
                    let start = 0x40_0000 + rnd(4096) * 16;
                    let size = 1 + rnd(200);
                    let end = start + usable(size);
                    let clash = live.range(..end).next_back().is_some_and(|(_, &(e, _))| e > start);
                    if !clash {
                        m.insert(start, size, next_id);
                        live.insert(start, (end, next_id));
                        next_id += 1;
                    }
                }
                3 => {
                    if let Some((&s, _)) = live.iter().nth(rnd(live.len() as u64 + 1) as usize) {
                        assert_eq!(m.remove(s), live.remove(&s).map(|(_, id)| id));
                    }
                }
                _ => {
                    let a = if rnd(2) == 0 && recent.len() >= 2 {
                        recent[recent.len() - 1 - rnd(2) as usize] + rnd(48)
                    } else {
                        0x40_0000 - 64 + rnd(4096 * 16 + 128)
                    };
                    let got = m.lookup(a);
                    assert_eq!(got, naive(&live, a), "lookup({a:#x})");
                    if let Some((_, off)) = got {
                        recent.push(a - off);
                    }
                }
            }
        }
    }
}
