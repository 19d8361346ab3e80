//! An LRU stack-distance page simulator: page faults for every memory size,
//! from one frame to every page touched, in one pass (Mattson et al. 1970),
//! in O(log n) per reference.
//!
//! ```text
//!   the LRU stack, most recent first:
//!
//!   top[0..TOP]        explicit array of the TOP most recent pages (stack positions 1..=TOP)
//!   ───────────────    every page below them is in the tree, keyed by its last-use time:
//!   fenwick[t] = 1     iff time t is the last use of a page below the top; then
//!                      position(p) = TOP + #{marked t >= time(p)}
//!   owner[t]           the page id that holds time t (for compaction)
//!   time[id]           a page's time in the tree
//! ```
//!
//! Invariants: a page that was touched is either in `top` or marked in the
//! tree, never both; every page in `top` was used more recently than every
//! page in the tree; times in the tree are distinct and increase with
//! recency, so counting marked times is counting more recent pages. `top` is
//! full before the tree holds anything.
//!
//! Per reference: a hit in the top costs a compare of TOP words and a short
//! shift; anything else costs one hash lookup, one Fenwick prefix query and
//! two point updates (the page leaves the tree, the page pushed out of the
//! top enters it at the newest time). When the clock reaches the tree's
//! capacity the live times are renumbered 0..n and the tree rebuilt in O(n);
//! the capacity is kept at least twice the population, so this costs O(1)
//! amortised per reference.
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

use crate::access::{Access, Simulator};
use crate::config::{check_page_size, ConfigError};

/// How many of the most recent pages are kept in an explicit array. A hit
/// there costs no hashing and no tree work.
const TOP: usize = 8;
/// No page, in `top`.
const NO_PAGE: u64 = u64::MAX;
/// No id, in `owner`.
const NO_ID: u32 = u32::MAX;
/// The smallest tree.
const MIN_CAP: u32 = 1 << 12;

/// Faults for every memory size, from one LRU page simulation.
#[derive(Clone, Debug, PartialEq, Eq)]
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

/// An open-addressing map from page number to dense id (linear probing,
/// Fibonacci hashing, at most half full).
#[derive(Clone, Debug)]
struct PageMap {
    keys: Vec<u64>,
    ids: Vec<u32>,
    shift: u32,
    len: usize,
}

impl PageMap {
    fn new() -> PageMap {
        let bits = 12;
        PageMap {
            keys: vec![NO_PAGE; 1 << bits],
            ids: vec![0; 1 << bits],
            shift: 64 - bits,
            len: 0,
        }
    }

    #[inline]
    fn slot(&self, page: u64) -> usize {
        (page.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> self.shift) as usize
    }

    /// The id of `page`, or `fresh` (then stored) and `true` when it is new.
    #[inline]
    fn get_or_insert(&mut self, page: u64, fresh: u32) -> (u32, bool) {
        let mask = self.keys.len() - 1;
        let mut i = self.slot(page);
        loop {
            let k = self.keys[i];
            if k == page {
                return (self.ids[i], false);
            }
            if k == NO_PAGE {
                self.keys[i] = page;
                self.ids[i] = fresh;
                self.len += 1;
                if self.len * 2 > self.keys.len() {
                    self.grow();
                }
                return (fresh, true);
            }
            i = (i + 1) & mask;
        }
    }

    fn grow(&mut self) {
        let keys = std::mem::take(&mut self.keys);
        let ids = std::mem::take(&mut self.ids);
        let n = keys.len() * 2;
        self.keys = vec![NO_PAGE; n];
        self.ids = vec![0; n];
        self.shift -= 1;
        let mask = n - 1;
        for (k, id) in keys.into_iter().zip(ids) {
            if k != NO_PAGE {
                let mut i = self.slot(k);
                while self.keys[i] != NO_PAGE {
                    i = (i + 1) & mask;
                }
                self.keys[i] = k;
                self.ids[i] = id;
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
    top_ids: [u32; TOP],
    map: PageMap,
    /// Per id: its time in the tree (meaningless while it is in `top`).
    time: Vec<u32>,
    /// Per time: the id whose last use it is, or NO_ID.
    owner: Vec<u32>,
    /// Fenwick tree over times, 1-based: `fen[i]` sums marks in `(i - lowbit(i), i]`.
    fen: Vec<u32>,
    cap: u32,
    now: u32,
    in_tree: u32,
    /// `hist[d]`: references at stack distance `d` (index 0 unused).
    hist: Vec<u64>,
    accesses: u64,
}

impl PageSim {
    /// A simulator for pages of `page_size` bytes (a power of two).
    pub fn new(page_size: u64) -> Result<PageSim, ConfigError> {
        check_page_size(page_size)?;
        Ok(PageSim {
            page_size,
            shift: page_size.trailing_zeros(),
            top_pages: [NO_PAGE; TOP],
            top_ids: [NO_ID; TOP],
            map: PageMap::new(),
            time: Vec::new(),
            owner: vec![NO_ID; MIN_CAP as usize],
            fen: vec![0; MIN_CAP as usize + 1],
            cap: MIN_CAP,
            now: 0,
            in_tree: 0,
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
        self.time.len() as u64
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
            let id = self.top_ids[j];
            self.top_pages.copy_within(0..j, 1);
            self.top_ids.copy_within(0..j, 1);
            self.top_pages[0] = page;
            self.top_ids[0] = id;
            return;
        }
        self.deep_reference(page);
    }

    /// A reference to a page below the top, or a new page.
    #[inline(never)]
    fn deep_reference(&mut self, page: u64) {
        let fresh = self.time.len() as u32;
        let (id, new) = self.map.get_or_insert(page, fresh);
        if new {
            self.time.push(0);
            self.hist.push(0);
        } else {
            let t = self.time[id as usize];
            let newer = self.in_tree - self.prefix(t);
            self.hist[TOP + newer as usize] += 1;
            self.update(t, u32::MAX); // -1
            self.owner[t as usize] = NO_ID;
            self.in_tree -= 1;
        }
        // Push onto the top; what falls off its bottom enters the tree.
        let out_id = self.top_ids[TOP - 1];
        self.top_pages.copy_within(0..TOP - 1, 1);
        self.top_ids.copy_within(0..TOP - 1, 1);
        self.top_pages[0] = page;
        self.top_ids[0] = id;
        if out_id != NO_ID {
            if self.now == self.cap {
                self.compact();
            }
            let t = self.now;
            self.now += 1;
            self.update(t, 1);
            self.owner[t as usize] = out_id;
            self.time[out_id as usize] = t;
            self.in_tree += 1;
        }
    }

    /// Marked times in `[0, t)`.
    #[inline(always)]
    fn prefix(&self, t: u32) -> u32 {
        let mut i = t as usize;
        let mut s = 0u32;
        while i > 0 {
            s = s.wrapping_add(self.fen[i]);
            i &= i - 1;
        }
        s
    }

    /// Adds `delta` (wrapping: `u32::MAX` is -1) at time `t`.
    #[inline(always)]
    fn update(&mut self, t: u32, delta: u32) {
        let mut i = t as usize + 1;
        let n = self.cap as usize;
        while i <= n {
            self.fen[i] = self.fen[i].wrapping_add(delta);
            i += i & i.wrapping_neg();
        }
    }

    /// Renumbers the live times 0..in_tree, in order, into a tree with room
    /// to spare, and rebuilds the Fenwick tree in O(capacity).
    #[cold]
    fn compact(&mut self) {
        let cap = ((self.in_tree as u64 + 1) * 2).next_power_of_two().max(MIN_CAP as u64);
        assert!(cap <= u32::MAX as u64, "more than 2^31 pages in memory");
        let cap = cap as u32;
        let mut owner = vec![NO_ID; cap as usize];
        let mut k = 0u32;
        for &id in &self.owner[..self.now as usize] {
            if id != NO_ID {
                owner[k as usize] = id;
                self.time[id as usize] = k;
                k += 1;
            }
        }
        debug_assert_eq!(k, self.in_tree);
        let n = cap as usize;
        let mut fen = vec![0u32; n + 1];
        fen[1..=k as usize].fill(1);
        for i in 1..=n {
            let j = i + (i & i.wrapping_neg());
            if j <= n {
                fen[j] += fen[i];
            }
        }
        self.owner = owner;
        self.fen = fen;
        self.cap = cap;
        self.now = k;
    }

    /// The fault curve so far.
    pub fn curve(&self) -> PageCurve {
        let distinct = self.time.len() as u64;
        PageCurve::from_histogram(self.page_size, self.accesses, &self.hist, distinct)
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
