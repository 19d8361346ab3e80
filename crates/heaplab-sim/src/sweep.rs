//! Many cache configurations in one pass over the stream, in two modes:
//! unified (paper 003's Conv-Conf: application and allocator share a cache)
//! and split (paper 003's IMM: the allocator's accesses go to a cache of
//! their own, identical to the application's).
//!
//! ```text
//!   bank (one per cache instance: unified | split-application | split-allocator)
//!    └ chain per line size L (32, 64, ...), with the line of its last access
//!       └ group per number of sets S (increasing), depth = the most ways asked at S:
//!           meta[set]  = [MRU line, ranks]     ranks: one byte per way, 0 = MRU .. depth-1 = LRU
//!           tags[set]  = [way 0 .. way W-1]    W = 2, 4 or 8 slots, tags stay in their way
//!                        (depth 1: meta holds the line alone; depth > 8: tags kept MRU first)
//!           hist[class][d]: accesses whose LRU stack distance in their set was d
//!                           (1..=depth), d = 0 for beyond the depth
//! ```
//!
//! Configurations that share a line size and a number of sets differ only in
//! associativity, and LRU is a stack algorithm: one set of `depth` ways kept
//! in LRU order answers every associativity up to `depth` at once (Mattson
//! et al. 1970). An access hits in an A-way cache exactly when its distance is
//! 1..=A, so `misses(A) = hist[0] + sum(hist[A+1..=depth])`.
//!
//! Invariants: within a set the valid tags are distinct; the ranks of the
//! ways below the depth are a permutation of 0..depth, empty ways ranking
//! below (higher than) every filled one; the MRU line in `meta` is the tag of
//! the way of rank 0. Each access adds exactly 1 to every group's histogram,
//! directly or through the early-exit counts below.
//!
//! Early exit (set refinement, Hill and Smith 1989): with bit-selection
//! indexing, the sets of a cache with 2S sets split those of a cache with S
//! sets. A line that is the most recent of its set at S sets is the most
//! recent of the smaller group of lines at 2S sets too, whatever the
//! associativity. So once a line is found in MRU position, it is in MRU
//! position in every larger group of the same chain, where the access
//! changes nothing: the chain stops there and `exits[g]` remembers that all
//! groups from `g` on had distance 1. An access to the same line as the
//! chain's previous access stops before the first group. On the heap-like
//! test stream this leaves about 3.7 group lookups per access and chain, of
//! 15.
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

/// How a group keeps its sets.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Layout {
    /// Depth 1: `mru` is the whole cache.
    Direct,
    /// Depth 2 in 2 tag slots per set, LRU ranks packed one byte per way
    /// in `ranks`.
    Swar2,
    /// Depth 3..=4 in 4 tag slots per set (slots past the depth stay empty).
    Swar4,
    /// Depth 5..=8 in 8 tag slots per set.
    Swar8,
    /// Depth above 8: `tags` in LRU order, MRU first, moved on every access.
    List,
}

#[derive(Clone, Debug)]
struct Group {
    mask: u64,
    depth: usize,
    layout: Layout,
    /// Tag slots per set in `tags`.
    width: usize,
    /// Per set, `1 << meta_shift` words: its most recent line (INVALID when
    /// empty), then for `Swar` its ranks: byte w = LRU rank of way w (0 =
    /// most recent, depth - 1 = least; bytes from `depth` on hold 0x7f and
    /// never change). Side by side, one cache line serves both.
    meta: Box<[u64]>,
    meta_shift: u32,
    /// Per set, `width` tags (`Swar`: in place, ranked by `ranks`; `List`:
    /// MRU first).
    tags: Box<[u64]>,
    /// `hist[class * (depth + 1) + d]`.
    hist: Box<[u64]>,
    /// `Swar`: 0x01 in every byte below `depth`.
    lane_ones: u64,
}

const ONES: u64 = 0x0101_0101_0101_0101;
const HIGHS: u64 = 0x8080_8080_8080_8080;

impl Group {
    fn new(sets: u64, depth: usize) -> Group {
        let (layout, width) = match depth {
            1 => (Layout::Direct, 0),
            2 => (Layout::Swar2, 2),
            3..=4 => (Layout::Swar4, 4),
            5..=8 => (Layout::Swar8, 8),
            _ => (Layout::List, depth),
        };
        let lane_ones = if depth <= 8 { ONES >> (8 * (8 - depth)) } else { 0 };
        let meta_shift = matches!(layout, Layout::Swar2 | Layout::Swar4 | Layout::Swar8) as u32;
        let mut g = Group {
            mask: sets - 1,
            depth,
            layout,
            width,
            meta: vec![INVALID; (sets as usize) << meta_shift].into(),
            meta_shift,
            tags: vec![INVALID; sets as usize * width].into(),
            hist: vec![0; CLASSES * (depth + 1)].into(),
            lane_ones,
        };
        g.empty();
        g
    }

    /// Empties every set.
    fn empty(&mut self) {
        self.tags.fill(INVALID);
        // Way w starts with rank w; unused bytes hold 0x7f.
        let mut r = 0u64;
        for b in 0..8 {
            r |= (if b < self.depth { b as u64 } else { 0x7f }) << (8 * b);
        }
        for m in self.meta.chunks_exact_mut(1 << self.meta_shift) {
            m[0] = INVALID;
            if self.meta_shift == 1 {
                m[1] = r;
            }
        }
    }

    /// References `line` in this group and returns its LRU stack distance in
    /// its set before the reference (1 = most recent), 0 when it was not there.
    #[inline(always)]
    fn touch<M: TagMatch>(&mut self, line: u64) -> usize {
        let set = (line & self.mask) as usize;
        let m = set << self.meta_shift;
        debug_assert!(m + (1 << self.meta_shift) <= self.meta.len());
        // SAFETY: set <= mask = sets - 1, and meta has 1 << meta_shift words
        // per set: word m (the MRU line) is in bounds, and so is m + 1 (the
        // ranks) for the Swar layouts, the only ones that use it.
        let mru = unsafe { &mut *self.meta.as_mut_ptr().add(m) };
        if *mru == line {
            return 1;
        }
        *mru = line;
        let (depth, lanes) = (self.depth, self.lane_ones);
        // At most one past the end (m < len), which `add` allows; it is
        // dereferenced only by the Swar layouts, where m + 1 < len.
        // SAFETY: see above.
        let rp = unsafe { self.meta.as_mut_ptr().add(m + 1) };
        match self.layout {
            Layout::Swar8 => {
                // SAFETY: a Swar layout has meta_shift = 1, so m + 1 < len.
                let ranks = unsafe { &mut *rp };
                swar_touch::<M, 8>(&mut self.tags, ranks, set, line, depth, lanes)
            }
            Layout::Direct => 0,
            Layout::Swar4 => {
                // SAFETY: a Swar layout has meta_shift = 1, so m + 1 < len.
                let ranks = unsafe { &mut *rp };
                swar_touch::<M, 4>(&mut self.tags, ranks, set, line, depth, lanes)
            }
            Layout::Swar2 => {
                // SAFETY: a Swar layout has meta_shift = 1, so m + 1 < len.
                let ranks = unsafe { &mut *rp };
                swar_touch::<M, 2>(&mut self.tags, ranks, set, line, depth, lanes)
            }
            Layout::List => {
                let base = set * self.width;
                lru_touch(&mut self.tags[base..base + self.width], line)
            }
        }
    }

    /// Counts an access of class `cls` at distance `d` (0: beyond the depth).
    #[inline(always)]
    fn count(&mut self, cls: usize, d: usize) {
        let i = cls * (self.depth + 1) + d;
        debug_assert!(i < self.hist.len());
        // SAFETY: cls < CLASSES and d <= depth (touch returns at most the
        // set's depth), and hist has CLASSES * (depth + 1) entries.
        unsafe { *self.hist.get_unchecked_mut(i) += 1 };
    }
}

/// Which of a set's `W` tags equal a line, as a bit mask.
trait TagMatch {
    fn mask<const W: usize>(t: &[u64; W], line: u64) -> u32;
}

/// Any CPU: one compare per tag.
struct Scalar;

impl TagMatch for Scalar {
    #[inline(always)]
    fn mask<const W: usize>(t: &[u64; W], line: u64) -> u32 {
        let mut hit = 0u32;
        for (j, &tag) in t.iter().enumerate() {
            hit |= ((tag == line) as u32) << j;
        }
        hit
    }
}

/// AVX2: four tags per compare. Used only inside `Bank::run_avx2`.
#[cfg(target_arch = "x86_64")]
struct Avx2;

#[cfg(target_arch = "x86_64")]
impl TagMatch for Avx2 {
    #[inline(always)]
    fn mask<const W: usize>(t: &[u64; W], line: u64) -> u32 {
        use std::arch::x86_64::*;
        if !W.is_multiple_of(4) {
            return Scalar::mask(t, line);
        }
        let mut hit = 0u32;
        // SAFETY: `Avx2` is only instantiated by `Bank::run_avx2`, which runs
        // only once AVX2 has been detected; the loads read `t[j..j + 4]`,
        // within the array since W is a multiple of 4 (unaligned loads).
        unsafe {
            let l = _mm256_set1_epi64x(line as i64);
            for j in (0..W).step_by(4) {
                let v = _mm256_loadu_si256(t.as_ptr().add(j) as *const __m256i);
                let m = _mm256_movemask_pd(_mm256_castsi256_pd(_mm256_cmpeq_epi64(v, l)));
                hit |= (m as u32) << j;
            }
        }
        hit
    }
}

/// The LRU update of one set of at most 8 ways kept in place, with one rank
/// byte per way: about 20 instructions and no loop, where moving tags to keep
/// them in LRU order would cost a loop and up to 7 moves. `line` is not the
/// set's most recent line (the caller checked).
///
/// Hit on way w of rank k: every way ranked below k moves down one, w becomes
/// rank 0; distance k + 1. Miss: the way of rank depth - 1 (the LRU, or an
/// empty one: empty ways always rank below the filled ones) takes the line,
/// every other way moves down one.
#[inline(always)]
fn swar_touch<M: TagMatch, const W: usize>(
    tags: &mut [u64],
    ranks: &mut u64,
    set: usize,
    line: u64,
    depth: usize,
    lane_ones: u64,
) -> usize {
    debug_assert!((set + 1) * W <= tags.len());
    // SAFETY: set < sets (it is masked by sets - 1), and a group of this
    // layout has W tags per set.
    let t = unsafe { &mut *(tags.as_mut_ptr().add(set * W) as *mut [u64; W]) };
    let hit = M::mask(t, line);
    let r = *ranks;
    if hit != 0 {
        let w = hit.trailing_zeros();
        let k = (r >> (8 * w)) & 0xff;
        // Bytes with rank < k: (0x7f + k) - rank has its top bit set exactly
        // then (ranks are at most 0x7f, so no byte borrows from the next).
        let below = ((0x7f + k) * ONES - r) & HIGHS;
        *ranks = (r + (below >> 7)) & !(0xff << (8 * w));
        k as usize + 1
    } else {
        // The byte equal to depth - 1: the lowest zero byte of r ^ that.
        let x = r ^ ((depth as u64 - 1) * ONES);
        let w = ((x.wrapping_sub(ONES) & !x & HIGHS).trailing_zeros() / 8) as usize;
        t[w] = line;
        *ranks = (r + lane_ones) & !(0xff << (8 * w));
        0
    }
}

#[derive(Clone, Debug)]
struct Chain {
    shift: u32,
    /// The line of the last access (its last line if it straddled): it is
    /// the most recent line of its set in every group.
    last: u64,
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
                    last: INVALID,
                    exits: vec![0; groups.len() * CLASSES],
                    groups: groups.iter().map(|&(sets, depth)| Group::new(sets, depth)).collect(),
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
                ch.last = INVALID;
                for g in &mut ch.groups {
                    g.empty();
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
        #[cfg(target_arch = "x86_64")]
        if std::arch::is_x86_feature_detected!("avx2") {
            // SAFETY: run_avx2 needs only AVX2, which this CPU has (checked
            // just above).
            unsafe { self.run_avx2(batch) };
            return;
        }
        self.run_inline::<Scalar>(batch)
    }

    /// The same loop compiled for AVX2, where the tag compares of a set
    /// become two vector compares.
    ///
    /// # Safety
    ///
    /// The CPU must have AVX2.
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2")]
    unsafe fn run_avx2(&mut self, batch: &[Access]) {
        self.run_inline::<Avx2>(batch)
    }

    #[inline(always)]
    fn run_inline<M: TagMatch>(&mut self, batch: &[Access]) {
        let only = self.only;
        for chunk in batch.chunks(255) {
            // Accesses per class in eight byte lanes of a register (see
            // `cache::count_packed`).
            let mut acc = 0u64;
            for a in chunk {
                if only.is_some_and(|p| p != a.part) {
                    continue;
                }
                let cls = a.class().index();
                acc += 1u64 << (8 * cls);
                for chain in &mut self.chains {
                    chain.access::<M>(a, cls);
                }
            }
            for (c, n) in self.accesses.iter_mut().enumerate() {
                *n += (acc >> (8 * c)) & 0xff;
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
    #[inline(always)]
    fn access<M: TagMatch>(&mut self, a: &Access, cls: usize) {
        let (first, last) = a.blocks(self.shift);
        if first == last {
            if first == self.last {
                // The previous access's line: most recent everywhere.
                self.exits[cls] += 1;
                return;
            }
            self.last = first;
            for (gi, g) in self.groups.iter_mut().enumerate() {
                let d = g.touch::<M>(first);
                if d == 1 {
                    // Most recent here, so in every larger group (see above).
                    self.exits[gi * CLASSES + cls] += 1;
                    return;
                }
                g.count(cls, d);
            }
        } else {
            self.last = last;
            for g in &mut self.groups {
                let mut worst = 1;
                let mut line = first;
                loop {
                    match g.touch::<M>(line) {
                        0 => worst = 0,
                        d if worst != 0 => worst = worst.max(d),
                        _ => {}
                    }
                    if line == last {
                        break;
                    }
                    line += 1;
                }
                g.count(cls, worst);
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
