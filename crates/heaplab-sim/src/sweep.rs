//! Many cache configurations in one pass over the stream, in two modes:
//! unified (paper 003's Conv-Conf: application and allocator share a cache)
//! and split (paper 003's IMM: the allocator's accesses go to a cache of
//! their own, identical to the application's).
//!
//! ```text
//!   bank (one per cache instance: unified | split-application | split-allocator)
//!    └ chain per line size L (32, 64, ...)          groups in increasing number of sets
//!       └ group per number of sets S:  tags [S x depth] (MRU first), depth = max ways asked
//!                                      hist[class][d]: accesses whose LRU stack distance
//!                                      in their set was d (1..=depth), d = 0 for beyond
//! ```
//!
//! Configurations that share a line size and a number of sets differ only in
//! associativity, and LRU is a stack algorithm: one set of `depth` ways kept
//! in LRU order answers every associativity up to `depth` at once (Mattson
//! et al. 1970). An access hits in an A-way cache exactly when its distance is
//! 1..=A, so `misses(A) = hist[0] + sum(hist[A+1..=depth])`.
//!
//! Invariants: within a set the valid tags are distinct, MRU first, invalid
//! ones last; each access adds exactly 1 to every group's histogram (directly,
//! or through the early-exit count below).
//!
//! Early exit (set refinement, Hill and Smith 1989): with bit-selection
//! indexing, the sets of a cache with 2S sets split those of a cache with S
//! sets. A line that is the most recent of its set at S sets is the most
//! recent of the smaller group of lines at 2S sets too, whatever the
//! associativity. So once a line is found in MRU position, it is in MRU
//! position in every larger group of the same chain, where the access
//! changes nothing: the chain stops there and `exits[g]` remembers that all
//! groups from `g` on had distance 1.
//!
//! Notes (the cache model is the one of `cache.rs`, and gives identical
//! counts to `Cache` and to the naive oracle):
//! - Write-allocate; no write-back, dirty bits or write buffers; every kind
//!   of access looks up and fills lines alike, the kind only picks a counter.
//! - Straddling: an access touching n > 1 lines looks them up in address
//!   order; it is one access, and one miss if any line missed. Its distance
//!   in a group is the largest of its lines' distances (a miss if any line
//!   missed); straddling accesses skip the early exit.
//! - True LRU within a set; a miss is any lookup of an absent line
//!   (compulsory, capacity and conflict alike); caches start empty; a flush
//!   empties every cache of every bank.
//! - Split mode: the application's cache sees only application accesses and
//!   the allocator's only allocator accesses; each configuration's counts
//!   then hold the application part from the first and the allocator part
//!   from the second.

use crate::access::{Access, Counts, Part, Simulator, CLASSES};
use crate::cache::{lru_touch, INVALID};
use crate::config::CacheConfig;

/// Who shares a cache.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Mode {
    /// Application and allocator share one cache (paper 003's Conv-Conf).
    Unified,
    /// The allocator has a cache of its own, of the same configuration
    /// (paper 003's IMM: IMM-Application and IMM-Allocator).
    Split,
}

impl Mode {
    /// `unified` or `split`.
    pub fn name(self) -> &'static str {
        match self {
            Mode::Unified => "unified",
            Mode::Split => "split",
        }
    }
}

/// The counts of one configuration in one mode.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CacheResult {
    /// The configuration.
    pub config: CacheConfig,
    /// Shared or split.
    pub mode: Mode,
    /// Accesses and misses per class. In split mode the application's
    /// classes come from the application's cache, the allocator's from the
    /// allocator's.
    pub counts: Counts,
}

#[derive(Clone, Debug)]
struct Group {
    mask: u64,
    depth: usize,
    tags: Box<[u64]>,
    /// `hist[class * (depth + 1) + d]`.
    hist: Box<[u64]>,
}

#[derive(Clone, Debug)]
struct Chain {
    shift: u32,
    groups: Vec<Group>,
    /// `exits[g * CLASSES + class]`: accesses that found their line MRU in
    /// group `g`, hence in every group from `g` on.
    exits: Vec<u64>,
}

#[derive(Clone, Debug)]
struct Bank {
    only: Option<Part>,
    chains: Vec<Chain>,
    accesses: [u64; CLASSES],
}

/// Many cache configurations, in one or both modes, simulated in one pass.
///
/// ```
/// use heaplab_sim::{Access, CacheSweep, Kind, Mode, Part, config::parse_cache_spec};
/// let configs = parse_cache_spec("512:32:1,32K:32:1,32K:64:8").unwrap();
/// let mut sweep = CacheSweep::new(&configs, &[Mode::Unified, Mode::Split]);
/// for i in 0..1000u64 {
///     let part = if i % 10 == 0 { Part::Allocator } else { Part::Application };
///     sweep.access(&Access::new(0x10000 + (i * 40) % 4096, 8, Kind::Read).with_part(part));
/// }
/// let results = sweep.results(); // configs x modes, in that order
/// assert_eq!(results.len(), 6);
/// assert_eq!(results[1].counts.total_accesses(), 1000);
/// assert_eq!(results[1].counts.total_misses(), 128); // 32K: only cold misses
/// ```
#[derive(Clone, Debug)]
pub struct CacheSweep {
    configs: Vec<CacheConfig>,
    modes: Vec<Mode>,
    /// Per config: (chain, group).
    slots: Vec<(usize, usize)>,
    /// Unified bank first if asked, then the two split banks if asked.
    banks: Vec<Bank>,
}

impl CacheSweep {
    /// A sweep over `configs` in each of `modes` (duplicates ignored).
    pub fn new(configs: &[CacheConfig], modes: &[Mode]) -> CacheSweep {
        let mut modes_u: Vec<Mode> = Vec::new();
        for &m in modes {
            if !modes_u.contains(&m) {
                modes_u.push(m);
            }
        }
        // Chains by line size; groups by number of sets, depth = max assoc.
        let mut shape: Vec<(u32, Vec<(u64, usize)>)> = Vec::new();
        for c in configs {
            let ci = match shape.iter().position(|(s, _)| *s == c.line_shift()) {
                Some(i) => i,
                None => {
                    shape.push((c.line_shift(), Vec::new()));
                    shape.len() - 1
                }
            };
            let groups = &mut shape[ci].1;
            match groups.iter_mut().find(|(s, _)| *s == c.sets()) {
                Some(g) => g.1 = g.1.max(c.assoc() as usize),
                None => groups.push((c.sets(), c.assoc() as usize)),
            }
        }
        for (_, groups) in &mut shape {
            groups.sort_unstable();
        }
        let slots = configs
            .iter()
            .map(|c| {
                let ci = shape.iter().position(|(s, _)| *s == c.line_shift()).unwrap();
                let gi = shape[ci].1.iter().position(|(s, _)| *s == c.sets()).unwrap();
                (ci, gi)
            })
            .collect();
        let make_bank = |only: Option<Part>| Bank {
            only,
            accesses: [0; CLASSES],
            chains: shape
                .iter()
                .map(|(shift, groups)| Chain {
                    shift: *shift,
                    exits: vec![0; groups.len() * CLASSES],
                    groups: groups
                        .iter()
                        .map(|&(sets, depth)| Group {
                            mask: sets - 1,
                            depth,
                            tags: vec![INVALID; sets as usize * depth].into(),
                            hist: vec![0; CLASSES * (depth + 1)].into(),
                        })
                        .collect(),
                })
                .collect(),
        };
        let mut banks = Vec::new();
        for &m in &modes_u {
            match m {
                Mode::Unified => banks.insert(0, make_bank(None)),
                Mode::Split => {
                    banks.push(make_bank(Some(Part::Application)));
                    banks.push(make_bank(Some(Part::Allocator)));
                }
            }
        }
        CacheSweep { configs: configs.to_vec(), modes: modes_u, slots, banks }
    }

    /// The configurations, in the order given.
    pub fn configs(&self) -> &[CacheConfig] {
        &self.configs
    }

    /// The modes, in the order given.
    pub fn modes(&self) -> &[Mode] {
        &self.modes
    }

    /// Simulates one access.
    #[inline]
    pub fn access(&mut self, a: &Access) {
        self.run_batch(std::slice::from_ref(a))
    }

    fn run_batch(&mut self, batch: &[Access]) {
        for bank in &mut self.banks {
            bank.run(batch);
        }
    }

    /// Empties every cache (the counts stay).
    pub fn flush_lines(&mut self) {
        for b in &mut self.banks {
            for ch in &mut b.chains {
                for g in &mut ch.groups {
                    g.tags.fill(INVALID);
                }
            }
        }
    }

    /// The counts so far: for each mode (in the order given), each
    /// configuration (in the order given).
    pub fn results(&self) -> Vec<CacheResult> {
        let mut out = Vec::with_capacity(self.modes.len() * self.configs.len());
        for &mode in &self.modes {
            let banks: Vec<&Bank> = match mode {
                Mode::Unified => self.banks.iter().filter(|b| b.only.is_none()).collect(),
                Mode::Split => self.banks.iter().filter(|b| b.only.is_some()).collect(),
            };
            for (cfg, &(ci, gi)) in self.configs.iter().zip(&self.slots) {
                let mut counts = Counts::default();
                for b in &banks {
                    counts.add(&b.counts(ci, gi, cfg.assoc() as usize));
                }
                out.push(CacheResult { config: *cfg, mode, counts });
            }
        }
        out
    }
}

impl Simulator for CacheSweep {
    fn run(&mut self, batch: &[Access]) {
        self.run_batch(batch)
    }
    fn flush(&mut self) {
        self.flush_lines()
    }
}

impl Bank {
    fn run(&mut self, batch: &[Access]) {
        for a in batch {
            if let Some(p) = self.only {
                if a.part != p {
                    continue;
                }
            }
            let cls = a.class().index();
            self.accesses[cls] += 1;
            for chain in &mut self.chains {
                chain.access(a, cls);
            }
        }
    }

    /// The counts of an `assoc`-way cache from group `gi` of chain `ci`.
    fn counts(&self, ci: usize, gi: usize, assoc: usize) -> Counts {
        let g = &self.chains[ci].groups[gi];
        let stride = g.depth + 1;
        let mut c = Counts { accesses: self.accesses, misses: [0; CLASSES] };
        for cls in 0..CLASSES {
            let h = &g.hist[cls * stride..(cls + 1) * stride];
            c.misses[cls] = h[0] + h[assoc + 1..].iter().sum::<u64>();
        }
        debug_assert!({
            // Every access is in every group's histogram, once.
            let ch = &self.chains[ci];
            (0..CLASSES).all(|cls| {
                let credited: u64 = (0..=gi).map(|i| ch.exits[i * CLASSES + cls]).sum();
                let h = &g.hist[cls * stride..(cls + 1) * stride];
                h.iter().sum::<u64>() + credited == self.accesses[cls]
            })
        });
        c
    }
}

impl Chain {
    #[inline]
    fn access(&mut self, a: &Access, cls: usize) {
        let (first, last) = a.blocks(self.shift);
        if first == last {
            for (gi, g) in self.groups.iter_mut().enumerate() {
                let base = (first & g.mask) as usize * g.depth;
                // MRU here means MRU in every larger group: stop (see above).
                if g.tags[base] == first {
                    self.exits[gi * CLASSES + cls] += 1;
                    return;
                }
                let d = if g.depth == 1 {
                    g.tags[base] = first;
                    0
                } else {
                    lru_touch(&mut g.tags[base..base + g.depth], first)
                };
                g.hist[cls * (g.depth + 1) + d] += 1;
            }
        } else {
            for g in &mut self.groups {
                let mut worst = 1;
                let mut line = first;
                loop {
                    let base = (line & g.mask) as usize * g.depth;
                    match lru_touch(&mut g.tags[base..base + g.depth], line) {
                        0 => worst = 0,
                        d if worst != 0 => worst = worst.max(d),
                        _ => {}
                    }
                    if line == last {
                        break;
                    }
                    line += 1;
                }
                g.hist[cls * (g.depth + 1) + worst] += 1;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::access::Kind;
    use crate::cache::Cache;

    #[test]
    fn sweep_matches_single_caches() {
        let configs = crate::config::sweep_configs();
        let mut sweep = CacheSweep::new(&configs, &[Mode::Unified]);
        let mut singles: Vec<Cache> = configs.iter().map(|&c| Cache::new(c)).collect();
        let mut x: u64 = 1;
        let stream: Vec<Access> = (0..20000)
            .map(|_| {
                x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                Access::new((x >> 33) % 200_000, 1 + ((x >> 20) % 16) as u32, Kind::Read)
            })
            .collect();
        sweep.run(&stream);
        for s in &mut singles {
            s.run(&stream);
        }
        for (r, s) in sweep.results().iter().zip(&singles) {
            assert_eq!(&r.counts, s.counts(), "{}", r.config);
        }
    }

    #[test]
    fn split_sends_each_part_to_its_own_cache() {
        // One direct-mapped line: the application and the allocator fight
        // over it when unified, and never when split.
        let cfg = CacheConfig::new(32, 32, 1).unwrap();
        let mut sweep = CacheSweep::new(&[cfg], &[Mode::Split, Mode::Unified]);
        for i in 0..10 {
            let app = Access::new(0, 4, Kind::Read);
            let alloc = Access::new(64, 4, Kind::Write).with_part(Part::Allocator);
            sweep.access(&app);
            sweep.access(&alloc);
            let _ = i;
        }
        let r = sweep.results();
        assert_eq!((r[0].mode, r[0].counts.total_misses()), (Mode::Split, 2));
        assert_eq!(r[0].counts.part_accesses(Part::Allocator), 10);
        assert_eq!((r[1].mode, r[1].counts.total_misses()), (Mode::Unified, 20));
        assert_eq!(r[1].counts.part_misses(Part::Application), 10);
    }
}
