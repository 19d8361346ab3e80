//! Naive simulators, written to be obviously right rather than fast, against
//! which the fast ones are tested (they must agree exactly), and which the
//! benchmarks use as a baseline.
//!
//! ```text
//!   NaiveCache: sets[s] = Vec of line numbers, most recent first; a lookup
//!               searches it, removes the line, inserts it at the front and
//!               drops the last one beyond `assoc`.
//!   NaivePages: one Vec of page numbers, most recent LAST; the stack
//!               distance of a reference is how far from the end it is found.
//! ```
//!
//! Notes: they model exactly what the Notes of `cache.rs`, `sweep.rs` and
//! `pages.rs` say (write-allocate, straddling accesses touch every line or
//! page in address order and count once per access for caches, once per page
//! for pages, true LRU, flush empties caches only), with none of the tricks.

use crate::access::{Access, Counts, Part, Simulator};
use crate::config::CacheConfig;
use crate::pages::PageCurve;
use crate::sweep::{CacheResult, Mode};

/// One cache as a literal LRU list per set.
#[derive(Clone, Debug)]
pub struct NaiveCache {
    cfg: CacheConfig,
    sets: Vec<Vec<u64>>,
    only: Option<Part>,
    counts: Counts,
}

impl NaiveCache {
    /// An empty cache that sees every access.
    pub fn new(cfg: CacheConfig) -> NaiveCache {
        NaiveCache {
            cfg,
            sets: vec![Vec::new(); cfg.sets() as usize],
            only: None,
            counts: Counts::default(),
        }
    }

    /// An empty cache that sees only the accesses of `part` (and ignores the others).
    pub fn only(cfg: CacheConfig, part: Part) -> NaiveCache {
        NaiveCache { only: Some(part), ..NaiveCache::new(cfg) }
    }

    /// Accesses and misses so far.
    pub fn counts(&self) -> &Counts {
        &self.counts
    }

    /// Simulates one access; returns true when it missed (false when ignored).
    pub fn access(&mut self, a: &Access) -> bool {
        if self.only.is_some_and(|p| p != a.part) {
            return false;
        }
        let line_size = self.cfg.line() as u64;
        let first = a.addr / line_size;
        let last = a.last_byte() / line_size;
        let mut miss = false;
        for line in first..=last {
            let set = &mut self.sets[(line % self.cfg.sets()) as usize];
            match set.iter().position(|&l| l == line) {
                Some(i) => {
                    set.remove(i);
                }
                None => miss = true,
            }
            set.insert(0, line);
            set.truncate(self.cfg.assoc() as usize);
        }
        let c = a.class().index();
        self.counts.accesses[c] += 1;
        self.counts.misses[c] += miss as u64;
        miss
    }
}

impl Simulator for NaiveCache {
    fn run(&mut self, batch: &[Access]) {
        for a in batch {
            self.access(a);
        }
    }
    fn flush(&mut self) {
        for s in &mut self.sets {
            s.clear();
        }
    }
}

/// The oracle of [`crate::CacheSweep`]: one [`NaiveCache`] per configuration
/// and cache instance, results in the sweep's order (modes, then configs).
#[derive(Clone, Debug)]
pub struct NaiveSweep {
    modes: Vec<Mode>,
    /// Per mode, per config: the caches whose counts add up to the result.
    caches: Vec<Vec<Vec<NaiveCache>>>,
}

impl NaiveSweep {
    /// One naive cache per configuration for unified mode, two for split.
    pub fn new(configs: &[CacheConfig], modes: &[Mode]) -> NaiveSweep {
        let mut ms: Vec<Mode> = Vec::new();
        for &m in modes {
            if !ms.contains(&m) {
                ms.push(m);
            }
        }
        let caches = ms
            .iter()
            .map(|m| {
                configs
                    .iter()
                    .map(|&c| match m {
                        Mode::Unified => vec![NaiveCache::new(c)],
                        Mode::Split => {
                            vec![
                                NaiveCache::only(c, Part::Application),
                                NaiveCache::only(c, Part::Allocator),
                            ]
                        }
                    })
                    .collect()
            })
            .collect();
        NaiveSweep { modes: ms, caches }
    }

    /// Results, as [`crate::CacheSweep::results`] orders them.
    pub fn results(&self) -> Vec<CacheResult> {
        let mut out = Vec::new();
        for (m, per_config) in self.modes.iter().zip(&self.caches) {
            for caches in per_config {
                let mut counts = Counts::default();
                for c in caches {
                    counts.add(c.counts());
                }
                out.push(CacheResult { config: caches[0].cfg, mode: *m, counts });
            }
        }
        out
    }
}

impl Simulator for NaiveSweep {
    fn run(&mut self, batch: &[Access]) {
        for c in self.caches.iter_mut().flatten().flatten() {
            c.run(batch);
        }
    }
    fn flush(&mut self) {
        for c in self.caches.iter_mut().flatten().flatten() {
            c.flush();
        }
    }
}

/// LRU page simulation as a literal stack.
#[derive(Clone, Debug)]
pub struct NaivePages {
    page_size: u64,
    /// Most recent last.
    stack: Vec<u64>,
    /// `hist[d]`: references at distance `d`.
    hist: Vec<u64>,
    compulsory: u64,
    accesses: u64,
}

impl NaivePages {
    /// An empty memory of `page_size`-byte pages (a power of two).
    pub fn new(page_size: u64) -> NaivePages {
        assert!(page_size.is_power_of_two());
        NaivePages { page_size, stack: Vec::new(), hist: vec![0; 1], compulsory: 0, accesses: 0 }
    }

    /// Simulates one access.
    pub fn access(&mut self, a: &Access) {
        self.accesses += 1;
        for page in a.addr / self.page_size..=a.last_byte() / self.page_size {
            match self.stack.iter().rposition(|&p| p == page) {
                Some(i) => {
                    let d = self.stack.len() - i;
                    self.hist[d] += 1;
                    self.stack.remove(i);
                }
                None => {
                    self.compulsory += 1;
                    self.hist.push(0);
                }
            }
            self.stack.push(page);
        }
    }

    /// The fault curve so far, computed the long way: for every memory size,
    /// count the references whose distance exceeds it.
    pub fn curve(&self) -> PageCurve {
        let n = self.compulsory;
        let faults = (1..=n)
            .map(|m| {
                self.compulsory
                    + self
                        .hist
                        .iter()
                        .enumerate()
                        .filter(|&(d, _)| d as u64 > m)
                        .map(|(_, &h)| h)
                        .sum::<u64>()
            })
            .collect();
        PageCurve {
            page_size: self.page_size,
            accesses: self.accesses,
            references: self.compulsory + self.hist.iter().sum::<u64>(),
            distinct_pages: n,
            faults,
        }
    }
}

impl Simulator for NaivePages {
    fn run(&mut self, batch: &[Access]) {
        for a in batch {
            self.access(a);
        }
    }
    fn flush(&mut self) {}
}
