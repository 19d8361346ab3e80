//! An LRU stack-distance page simulator: page faults for every memory size,
//! from one frame to every page touched, in one pass (Mattson et al. 1970),
//! in O(log n) per reference.
//!
//! ```text
//!   the LRU stack, most recent first:
//!
//!   top[0..TOP]      the TOP most recent pages, in order (stack positions 1..=TOP), with their slots
//!   ─────────────    every other touched page is "in the tree", keyed by its last-use time t:
//!   bits[t/64]       bit t%64 set iff t is the last use of a page below the top
//!   fen[b]           Fenwick tree over the 64-bit words: how many bits are set per block
//!   owner[t]         the slot of the page whose time is t (written once, read when compacting)
//!
//!   page table: chunk map (page >> 6 -> chunk), then entries[chunk * 64 + (page & 63)]:
//!               NEVER (not touched yet) | IN_TOP | its time t
//! ```
//!
//! Invariants: a touched page is in `top` (entry IN_TOP) or has its time set
//! in `bits`, never both; every page in `top` was used more recently than
//! every page in the tree; times increase with recency, so the pages more
//! recent than a page of time t are the TOP of the top plus the set bits at
//! t and above: its stack distance is `TOP + #{set bits >= t}`. `top` is full
//! before the tree holds anything.
//!
//! Per reference: a hit in the top costs a compare of TOP words and a short
//! shift, with no hashing; anything else costs a page-table lookup (a chunk
//! that is almost always the previous one), a rank (a Fenwick prefix over
//! blocks of 64 times, plus one popcount) and two point updates (the page
//! leaves the tree, the page pushed out of the top enters it at the newest
//! time). Counting per 64-time block keeps the Fenwick tree 64 times smaller
//! than one counter per time: a million pages in memory need 256 KiB of
//! counters and 512 KiB of bits, where a counter per time would take 16 MiB.
//! When the clock reaches the capacity, the live times are renumbered 0..n in
//! order and the tree rebuilt, in O(capacity); the capacity stays at least
//! twice the population, so this is O(1) amortised per reference.
//!
//! Notes:
//! - A page is `addr >> log2(page_size)` of the addresses as given (virtual).
//! - Reads, writes, fetches and unknown accesses are references alike; the
//!   application and the allocator share the memory (one address space).
//! - Straddling: an access that touches n > 1 pages makes n references, in
//!   address order, each of which may fault. `references` counts them.
//! - Replacement: LRU over all of memory (global, fully associative), demand
//!   paging, no prefetch or clustering. Memory starts empty, so the first
//!   touch of every page is a fault (compulsory faults are included at every
//!   memory size).
//! - A fault in a memory of m frames is a reference whose LRU stack distance
//!   is above m (or infinite): `faults(m) = compulsory + #{distance > m}`.
//! - A cache flush (din label 4) does not touch memory and is ignored.
//! - Cost in memory: the page table takes 256 bytes per 64-page chunk
//!   touched (so 4 bytes per page in dense regions, 256 for a lone page),
//!   the tree about 12 bytes per page in memory.

use crate::access::{Access, Simulator};
use crate::config::{check_page_size, ConfigError};

/// How many of the most recent pages are kept in an explicit array. A hit
/// there costs no hashing and no tree work.
const TOP: usize = 8;
/// No page, in `top`.
const NO_PAGE: u64 = u64::MAX;
/// The smallest tree.
const MIN_CAP: u32 = 1 << 12;

/// Faults for every memory size, from one LRU page simulation. With the
/// `serde` feature it reads and writes as JSON (a segregate job's outcome
/// carries its curves to the merge).
#[derive(Clone, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct PageCurve {
    /// Bytes per page.
    pub page_size: u64,
    /// Accesses seen.
    pub accesses: u64,
    /// Page references (an access that straddles pages makes several).
    pub references: u64,
    /// Distinct pages touched, which is also the compulsory faults.
    pub distinct_pages: u64,
    /// `faults[m - 1]`: faults with `m` frames of memory, for `m` in
    /// `1..=distinct_pages` (non-increasing, ending at `distinct_pages`).
    pub faults: Vec<u64>,
}

impl PageCurve {
    /// Faults with `frames` frames of memory (`frames >= 1`); with more frames
    /// than pages touched, only the compulsory ones. With no frame at all,
    /// every reference faults.
    pub fn faults_at(&self, frames: u64) -> u64 {
        if frames == 0 {
            return self.references;
        }
        match self.faults.get(frames as usize - 1) {
            Some(&f) => f,
            None => self.distinct_pages,
        }
    }

    /// `(frames, faults)` for every memory size from 1 frame to
    /// `distinct_pages`.
    pub fn points(&self) -> impl Iterator<Item = (u64, u64)> + '_ {
        self.faults.iter().enumerate().map(|(i, &f)| (i as u64 + 1, f))
    }

    /// The curve from a histogram of stack distances: `hist[d]` references at
    /// distance `d >= 1` (`hist[0]` is ignored) and `compulsory` first
    /// touches.
    pub fn from_histogram(
        page_size: u64,
        accesses: u64,
        hist: &[u64],
        compulsory: u64,
    ) -> PageCurve {
        let n = compulsory as usize;
        let mut faults = vec![0; n];
        // faults(m) = compulsory + sum over d > m of hist[d], for m = n down to 1.
        let mut beyond = 0u64;
        for m in (1..=n).rev() {
            faults[m - 1] = compulsory + beyond;
            beyond += hist.get(m).copied().unwrap_or(0);
        }
        let references = compulsory + hist.iter().skip(1).sum::<u64>();
        PageCurve { page_size, accesses, references, distinct_pages: compulsory, faults }
    }
}

/// Pages per page-table chunk.
const CHUNK_BITS: u32 = 6;
const CHUNK: usize = 1 << CHUNK_BITS;
/// Page-table entry of a page never touched.
const NEVER: u32 = u32::MAX;
/// Page-table entry of a page in `top`.
const IN_TOP: u32 = u32::MAX - 1;
/// No slot, in `top_slots`.
const NO_SLOT: u32 = u32::MAX;

/// Page number to page-table slot: an open-addressing map (linear probing,
/// Fibonacci hashing, at most half full) from chunk number to chunk, with
/// the last chunk used remembered. Chunks of 64 pages keep the entries of
/// neighbouring pages together; a lone page costs 64 entries (256 bytes).
#[derive(Clone, Debug)]
struct PageTable {
    keys: Vec<u64>,
    chunks: Vec<u32>,
    shift: u32,
    len: usize,
    last_key: u64,
    last_base: u32,
    /// `entries[chunk * CHUNK + (page % CHUNK)]`.
    entries: Vec<u32>,
}

impl PageTable {
    fn new() -> PageTable {
        let bits = 8;
        PageTable {
            keys: vec![NO_PAGE; 1 << bits],
            chunks: vec![0; 1 << bits],
            shift: 64 - bits,
            len: 0,
            last_key: NO_PAGE,
            last_base: 0,
            entries: Vec::new(),
        }
    }

    #[inline]
    fn hash(&self, key: u64) -> usize {
        (key.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> self.shift) as usize
    }

    /// The slot of `page`, making its chunk if it has none.
    #[inline]
    fn slot(&mut self, page: u64) -> u32 {
        let key = page >> CHUNK_BITS;
        let off = (page as u32) & (CHUNK as u32 - 1);
        if key == self.last_key {
            return self.last_base + off;
        }
        let base = self.chunk(key);
        self.last_key = key;
        self.last_base = base;
        base + off
    }

    fn chunk(&mut self, key: u64) -> u32 {
        let mask = self.keys.len() - 1;
        let mut i = self.hash(key);
        loop {
            let k = self.keys[i];
            if k == key {
                return self.chunks[i];
            }
            if k == NO_PAGE {
                let base = self.entries.len();
                assert!(base + CHUNK < IN_TOP as usize, "page table full");
                self.entries.resize(base + CHUNK, NEVER);
                self.keys[i] = key;
                self.chunks[i] = base as u32;
                self.len += 1;
                if self.len * 2 > self.keys.len() {
                    self.grow();
                }
                return base as u32;
            }
            i = (i + 1) & mask;
        }
    }

    fn grow(&mut self) {
        let keys = std::mem::take(&mut self.keys);
        let chunks = std::mem::take(&mut self.chunks);
        let n = keys.len() * 2;
        self.keys = vec![NO_PAGE; n];
        self.chunks = vec![0; n];
        self.shift -= 1;
        let mask = n - 1;
        for (k, c) in keys.into_iter().zip(chunks) {
            if k != NO_PAGE {
                let mut i = self.hash(k);
                while self.keys[i] != NO_PAGE {
                    i = (i + 1) & mask;
                }
                self.keys[i] = k;
                self.chunks[i] = c;
            }
        }
    }
}

/// The LRU page simulator of one page size.
///
/// ```
/// use heaplab_sim::{Access, Kind, PageSim};
/// let mut p = PageSim::new(4096).unwrap();
/// for page in [0u64, 1, 2, 0, 1, 2, 0] {
///     p.access(&Access::new(page * 4096, 8, Kind::Read));
/// }
/// let curve = p.curve();
/// // 3 frames: only the 3 first touches fault; 2 or 1 frame: all 7 fault.
/// assert_eq!(curve.points().collect::<Vec<_>>(), vec![(1, 7), (2, 7), (3, 3)]);
/// ```
#[derive(Clone, Debug)]
pub struct PageSim {
    page_size: u64,
    shift: u32,
    top_pages: [u64; TOP],
    top_slots: [u32; TOP],
    table: PageTable,
    /// One bit per time: set while it is the last use of a page in the tree.
    bits: Vec<u64>,
    /// Fenwick tree over the words of `bits`, 1-based: `fen[i]` counts the
    /// set bits of words `(i - lowbit(i), i]` (1-based word numbers).
    fen: Vec<u32>,
    /// Per time: the slot of the page it was given to.
    owner: Vec<u32>,
    /// Times available before a compaction (a multiple of 64).
    cap: u32,
    /// The next time to give.
    now: u32,
    in_tree: u32,
    distinct: u64,
    /// `hist[d]`: references at stack distance `d` (index 0 unused).
    hist: Vec<u64>,
    accesses: u64,
}

impl PageSim {
    /// A simulator for pages of `page_size` bytes (a power of two).
    pub fn new(page_size: u64) -> Result<PageSim, ConfigError> {
        check_page_size(page_size)?;
        let cap = MIN_CAP;
        Ok(PageSim {
            page_size,
            shift: page_size.trailing_zeros(),
            top_pages: [NO_PAGE; TOP],
            top_slots: [NO_SLOT; TOP],
            table: PageTable::new(),
            bits: vec![0; cap as usize / 64],
            fen: vec![0; cap as usize / 64 + 1],
            owner: vec![0; cap as usize],
            cap,
            now: 0,
            in_tree: 0,
            distinct: 0,
            hist: vec![0; 2],
            accesses: 0,
        })
    }

    /// Bytes per page.
    pub fn page_size(&self) -> u64 {
        self.page_size
    }

    /// Distinct pages touched so far.
    pub fn distinct_pages(&self) -> u64 {
        self.distinct
    }

    /// Simulates one access.
    #[inline]
    pub fn access(&mut self, a: &Access) {
        self.run_batch(std::slice::from_ref(a))
    }

    fn run_batch(&mut self, batch: &[Access]) {
        self.accesses += batch.len() as u64;
        let shift = self.shift;
        // Distance-1 hits (the page of the previous reference) are the common
        // case; count them in a register.
        let mut mru_hits = 0u64;
        for a in batch {
            let (first, last) = a.blocks(shift);
            if first == last && first == self.top_pages[0] {
                mru_hits += 1;
                continue;
            }
            let mut page = first;
            loop {
                if page == self.top_pages[0] {
                    mru_hits += 1;
                } else {
                    self.reference(page);
                }
                if page == last {
                    break;
                }
                page += 1;
            }
        }
        self.hist[1] += mru_hits;
    }

    /// One reference to `page`, which is not the most recent one.
    #[inline]
    fn reference(&mut self, page: u64) {
        // Stack positions 2..=TOP: compare them all at once.
        let mut hit = 0u32;
        for j in 1..TOP {
            hit |= ((self.top_pages[j] == page) as u32) << j;
        }
        if hit != 0 {
            let j = hit.trailing_zeros() as usize;
            self.hist[j + 1] += 1;
            let slot = self.top_slots[j];
            self.push_top(j, page, slot);
            return;
        }
        self.deep_reference(page);
    }

    /// A reference to a page below the top, or to a new page.
    #[inline(never)]
    fn deep_reference(&mut self, page: u64) {
        let slot = self.table.slot(page);
        let t = self.table.entries[slot as usize];
        if t == NEVER {
            self.distinct += 1;
            self.hist.push(0);
        } else {
            debug_assert!(t != IN_TOP && t < self.now);
            let newer = self.in_tree - self.rank(t);
            self.hist[TOP + newer as usize] += 1;
            self.unmark(t);
            self.in_tree -= 1;
        }
        self.table.entries[slot as usize] = IN_TOP;
        // Push onto the top; what falls off its bottom enters the tree.
        let out = self.top_slots[TOP - 1];
        self.push_top(TOP - 1, page, slot);
        if out != NO_SLOT {
            if self.now == self.cap {
                self.compact();
            }
            let t = self.now;
            self.now += 1;
            self.mark(t);
            self.owner[t as usize] = out;
            self.table.entries[out as usize] = t;
            self.in_tree += 1;
        }
    }

    /// Moves top[0..j] down one place and puts `page` first (top[j] is
    /// overwritten). A loop of moves, not a call to memmove.
    #[inline(always)]
    fn push_top(&mut self, j: usize, page: u64, slot: u32) {
        for k in (1..=j.min(TOP - 1)).rev() {
            self.top_pages[k] = self.top_pages[k - 1];
            self.top_slots[k] = self.top_slots[k - 1];
        }
        self.top_pages[0] = page;
        self.top_slots[0] = slot;
    }

    /// Set bits below time `t`.
    #[inline(always)]
    fn rank(&self, t: u32) -> u32 {
        let w = (t / 64) as usize;
        let mut s = (self.bits[w] & ((1u64 << (t % 64)) - 1)).count_ones();
        // Words before w: Fenwick prefix over 1-based word numbers 1..=w.
        let fen = &self.fen[..=w];
        let mut i = w;
        while i > 0 {
            s += fen[i];
            i &= i - 1;
        }
        s
    }

    #[inline(always)]
    fn mark(&mut self, t: u32) {
        let w = (t / 64) as usize;
        self.bits[w] |= 1u64 << (t % 64);
        let fen = &mut self.fen[..];
        let mut i = w + 1;
        while i < fen.len() {
            fen[i] += 1;
            i += i & i.wrapping_neg();
        }
    }

    #[inline(always)]
    fn unmark(&mut self, t: u32) {
        let w = (t / 64) as usize;
        self.bits[w] &= !(1u64 << (t % 64));
        let fen = &mut self.fen[..];
        let mut i = w + 1;
        while i < fen.len() {
            fen[i] -= 1;
            i += i & i.wrapping_neg();
        }
    }

    /// Renumbers the live times 0..in_tree, in order, into a capacity of at
    /// least twice that, and rebuilds the tree: O(capacity).
    #[cold]
    fn compact(&mut self) {
        let cap = ((self.in_tree as u64 + 1) * 2).next_power_of_two().max(MIN_CAP as u64);
        assert!(cap < IN_TOP as u64, "more than 2^31 pages in memory");
        let cap = cap as u32;
        let mut owner = vec![0u32; cap as usize];
        let mut k = 0u32;
        for (w, &word) in self.bits.iter().enumerate() {
            let mut b = word;
            while b != 0 {
                let t = w * 64 + b.trailing_zeros() as usize;
                b &= b - 1;
                let slot = self.owner[t];
                owner[k as usize] = slot;
                self.table.entries[slot as usize] = k;
                k += 1;
            }
        }
        debug_assert_eq!(k, self.in_tree);
        let words = cap as usize / 64;
        let mut bits = vec![0u64; words];
        for (w, word) in bits.iter_mut().enumerate() {
            let lo = (w * 64) as u32;
            if k >= lo + 64 {
                *word = u64::MAX;
            } else if k > lo {
                *word = (1u64 << (k - lo)) - 1;
            }
        }
        let mut fen = vec![0u32; words + 1];
        for i in 1..=words {
            fen[i] += bits[i - 1].count_ones();
            let j = i + (i & i.wrapping_neg());
            if j <= words {
                fen[j] += fen[i];
            }
        }
        self.owner = owner;
        self.bits = bits;
        self.fen = fen;
        self.cap = cap;
        self.now = k;
    }

    /// The fault curve so far.
    pub fn curve(&self) -> PageCurve {
        PageCurve::from_histogram(self.page_size, self.accesses, &self.hist, self.distinct)
    }
}

impl Simulator for PageSim {
    fn run(&mut self, batch: &[Access]) {
        self.run_batch(batch)
    }
    fn flush(&mut self) {}
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::access::Kind;

    fn touch(p: &mut PageSim, pages: &[u64]) {
        for &pg in pages {
            p.access(&Access::new(pg * p.page_size(), 1, Kind::Read));
        }
    }

    #[test]
    fn cyclic_pattern_faults_until_everything_fits() {
        // Cycling over 20 pages (more than TOP): LRU faults on every reference
        // until all 20 fit.
        let mut p = PageSim::new(4096).unwrap();
        let seq: Vec<u64> = (0..5).flat_map(|_| 0..20u64).collect();
        touch(&mut p, &seq);
        let c = p.curve();
        assert_eq!(c.distinct_pages, 20);
        assert_eq!(c.faults_at(19), 100);
        assert_eq!(c.faults_at(20), 20);
        assert_eq!(c.faults_at(1000), 20);
        assert_eq!(c.faults_at(0), 100);
    }

    #[test]
    fn straddling_access_references_both_pages() {
        let mut p = PageSim::new(4096).unwrap();
        p.access(&Access::new(4090, 16, Kind::Write));
        let c = p.curve();
        assert_eq!((c.accesses, c.references, c.distinct_pages), (1, 2, 2));
    }

    #[test]
    fn compaction_keeps_distances() {
        // Many distinct pages and re-touches force several compactions.
        let mut p = PageSim::new(8192).unwrap();
        let mut seq = Vec::new();
        for round in 0..4u64 {
            for i in 0..30_000u64 {
                seq.push((i * 7 + round) % 25_000);
            }
        }
        touch(&mut p, &seq);
        let c = p.curve();
        assert_eq!(c.distinct_pages, 25_000);
        assert_eq!(c.references, 120_000);
        assert!(c.faults.windows(2).all(|w| w[0] >= w[1]));
        assert_eq!(*c.faults.last().unwrap(), 25_000);
    }
}
