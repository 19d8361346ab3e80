//! One set-associative LRU cache, direct-mapped as the one-way case: the
//! fastest way to simulate a single configuration.
//!
//! ```text
//!   tags: [ set 0: way0 way1 .. way(A-1) | set 1: ... | ... | set S-1: ... ]
//!           └ MRU ─────────────── LRU ┘
//!   a tag is the whole line number (addr >> line_shift); INVALID = u64::MAX
//! ```
//!
//! Invariant: within a set the valid tags are distinct and ordered from most
//! to least recently used, and the invalid ones (never filled, or flushed)
//! come last.
//!
//! Notes:
//! - One level, one cache. No prefetching, no victim buffer, no hierarchy.
//! - Kinds are not told apart by the state: reads, writes, instruction
//!   fetches and unknown accesses all look up and fill lines alike; the kind
//!   only picks the counter. Feed only data accesses to model a data cache
//!   (the `din` source leaves instruction fetches out unless asked).
//! - Write-allocate: a write miss fills the line as a read miss does. No
//!   write-back traffic, dirty bits or write buffers are modelled.
//! - Straddling: an access that touches n > 1 lines looks the lines up in
//!   address order, each lookup updating LRU as its own reference would. It
//!   counts as ONE access, and as ONE miss if any of its lines missed (as
//!   cachegrind's cg_sim.c does for its two-line case).
//! - Replacement: true LRU within a set (the least recently used way is
//!   evicted); direct-mapped has no choice to make.
//! - A miss is any lookup of a line that is not present: compulsory,
//!   capacity and conflict misses alike. The cache starts empty.
//! - Indexing by bit selection on the addresses as given (virtual addresses
//!   for heaplab's streams); a flush (din label 4) invalidates every line.

use crate::access::{Access, Counts, Simulator, CLASSES};
use crate::config::CacheConfig;

/// The tag of an empty way. No line number reaches it: lines are at least
/// `MIN_LINE` = 4 bytes, so line numbers are below `u64::MAX >> 2`.
pub(crate) const INVALID: u64 = u64::MAX;

/// One cache configuration being simulated.
///
/// ```
/// use heaplab_sim::{Access, Cache, CacheConfig, Kind};
/// let mut c = Cache::new(CacheConfig::new(1024, 32, 1).unwrap());
/// assert!(c.access(&Access::new(0x1000, 8, Kind::Read)));   // cold miss
/// assert!(!c.access(&Access::new(0x1008, 8, Kind::Write))); // same line
/// assert!(c.access(&Access::new(0x1400, 4, Kind::Read)));   // conflict, 1 KiB away
/// assert_eq!((c.counts().total_accesses(), c.counts().total_misses()), (3, 2));
/// ```
#[derive(Clone, Debug)]
pub struct Cache {
    cfg: CacheConfig,
    ways: usize,
    tags: Box<[u64]>,
    counts: Counts,
}

impl Cache {
    /// An empty cache.
    pub fn new(cfg: CacheConfig) -> Cache {
        let n = (cfg.sets() * cfg.assoc() as u64) as usize;
        Cache {
            cfg,
            ways: cfg.assoc() as usize,
            tags: vec![INVALID; n].into(),
            counts: Counts::default(),
        }
    }

    /// Its configuration.
    pub fn config(&self) -> &CacheConfig {
        &self.cfg
    }

    /// Accesses and misses so far.
    pub fn counts(&self) -> &Counts {
        &self.counts
    }

    /// Simulates one access; returns true when it missed.
    #[inline]
    pub fn access(&mut self, a: &Access) -> bool {
        let (first, last) = a.blocks(self.cfg.line_shift());
        let miss = if self.ways == 1 {
            dm_lines(&mut self.tags, self.cfg.set_mask(), first, last)
        } else {
            lru_lines(&mut self.tags, self.ways, self.cfg.set_mask(), first, last)
        };
        let c = a.class().index();
        self.counts.accesses[c] += 1;
        self.counts.misses[c] += miss as u64;
        miss
    }

    /// Forgets every line (the counts stay).
    pub fn flush_lines(&mut self) {
        self.tags.fill(INVALID);
    }

    fn run_batch(&mut self, batch: &[Access]) {
        let shift = self.cfg.line_shift();
        let mask = self.cfg.set_mask();
        if self.ways == 1 {
            let tags = &mut self.tags;
            count_packed(&mut self.counts, batch, |a| {
                let (first, last) = a.blocks(shift);
                if first == last {
                    // Fast path, about 10 instructions: one tag load, one
                    // compare, one store; no branch on hit or miss.
                    let set = (first & mask) as usize;
                    debug_assert!(set < tags.len());
                    // SAFETY: set <= mask == sets - 1 and tags.len() == sets
                    // (ways == 1), so the index is in bounds.
                    let t = unsafe { tags.get_unchecked_mut(set) };
                    let miss = *t != first;
                    *t = first;
                    miss
                } else {
                    dm_lines(tags, mask, first, last)
                }
            });
        } else {
            let ways = self.ways;
            let tags = &mut self.tags;
            count_packed(&mut self.counts, batch, |a| {
                let (first, last) = a.blocks(shift);
                if first == last {
                    let base = (first & mask) as usize * ways;
                    // Per-set MRU fast path: a hit on the most recent way
                    // changes nothing.
                    if tags[base] == first {
                        return false;
                    }
                }
                lru_lines(tags, ways, mask, first, last)
            });
        }
    }
}

impl Simulator for Cache {
    fn run(&mut self, batch: &[Access]) {
        self.run_batch(batch)
    }
    fn flush(&mut self) {
        self.flush_lines()
    }
}

/// Runs `sim` over `batch`, counting accesses and misses per class in two
/// registers of eight 8-bit lanes (one lane per class), spilled to `counts`
/// every 255 accesses. This keeps the counters out of memory in the hot loop:
/// a `counts[class] += 1` per access would chain every iteration through a
/// store-to-load forward.
#[inline(always)]
pub(crate) fn count_packed(
    counts: &mut Counts,
    batch: &[Access],
    mut sim: impl FnMut(&Access) -> bool,
) {
    for chunk in batch.chunks(255) {
        let mut acc: u64 = 0;
        let mut mis: u64 = 0;
        for a in chunk {
            let lane = (a.class().index() as u32) * 8;
            let miss = sim(a);
            acc += 1u64 << lane;
            mis += (miss as u64) << lane;
        }
        for c in 0..CLASSES {
            counts.accesses[c] += (acc >> (c * 8)) & 0xff;
            counts.misses[c] += (mis >> (c * 8)) & 0xff;
        }
    }
}

/// Direct-mapped lookup of lines `first..=last`; true when any missed.
#[inline]
fn dm_lines(tags: &mut [u64], mask: u64, first: u64, last: u64) -> bool {
    let mut miss = false;
    let mut line = first;
    loop {
        let t = &mut tags[(line & mask) as usize];
        miss |= *t != line;
        *t = line;
        if line == last {
            return miss;
        }
        line += 1;
    }
}

/// LRU lookup of lines `first..=last` in sets of `ways` tags; true when any
/// missed.
#[inline]
fn lru_lines(tags: &mut [u64], ways: usize, mask: u64, first: u64, last: u64) -> bool {
    let mut miss = false;
    let mut line = first;
    loop {
        let base = (line & mask) as usize * ways;
        miss |= lru_touch(&mut tags[base..base + ways], line) == 0;
        if line == last {
            return miss;
        }
        line += 1;
    }
}

/// Looks `line` up in one set (MRU first) and makes it the MRU. Returns its
/// LRU stack distance before the access (1 = it was the MRU), or 0 for a miss,
/// in which case the LRU way was evicted.
#[inline(always)]
pub(crate) fn lru_touch(set: &mut [u64], line: u64) -> usize {
    if set[0] == line {
        return 1;
    }
    let ways = set.len();
    let mut pos = ways;
    for (i, &t) in set.iter().enumerate().skip(1) {
        if t == line {
            pos = i;
            break;
        }
    }
    let d = if pos == ways {
        pos = ways - 1;
        0
    } else {
        pos + 1
    };
    set.copy_within(0..pos, 1);
    set[0] = line;
    d
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::access::{Kind, Part};

    fn rd(addr: u64) -> Access {
        Access::new(addr, 4, Kind::Read)
    }

    #[test]
    fn two_way_lru_evicts_the_least_recent() {
        // 2 sets x 2 ways x 32 B: lines 0, 2, 4 all map to set 0.
        let mut c = Cache::new(CacheConfig::new(128, 32, 2).unwrap());
        assert!(c.access(&rd(0)));
        assert!(c.access(&rd(64)));
        assert!(!c.access(&rd(0))); // 0 is now MRU, 64 LRU
        assert!(c.access(&rd(128))); // evicts 64
        assert!(!c.access(&rd(0)));
        assert!(c.access(&rd(64)));
    }

    #[test]
    fn straddle_is_one_access_and_one_miss() {
        let mut c = Cache::new(CacheConfig::new(1024, 32, 1).unwrap());
        let a = Access::new(28, 8, Kind::Write).with_part(Part::Allocator);
        assert!(c.access(&a));
        assert!(!c.access(&rd(0)));
        assert!(!c.access(&rd(32)));
        let n = c.counts();
        assert_eq!((n.total_accesses(), n.total_misses()), (3, 1));
        assert_eq!(n.part_misses(Part::Allocator), 1);
        assert_eq!(n.kind_accesses(Kind::Read), 2);
    }

    #[test]
    fn batch_and_single_agree_and_flush_forgets() {
        let stream: Vec<Access> = (0..5000u64)
            .map(|i| rd((i * 2654435761) % 8192).with_part(Part::ALL[(i % 3 == 0) as usize]))
            .collect();
        for ways in [1, 2, 4] {
            let cfg = CacheConfig::new(1024, 32, ways).unwrap();
            let mut a = Cache::new(cfg);
            let mut b = Cache::new(cfg);
            a.run(&stream);
            for x in &stream {
                b.access(x);
            }
            assert_eq!(a.counts(), b.counts());
            a.flush();
            assert!(a.access(&stream[stream.len() - 1]));
        }
    }
}
