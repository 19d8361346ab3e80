//! Cache and page simulators for heaplab's locality studies.
//!
//! The papers behind heaplab drive simulators with the address streams of
//! real programs: direct-mapped caches of 16 KB to 256 KB with 32-byte lines
//! and an LRU stack simulator for page faults at every memory size
//! (Grunwald, Zorn and Henderson 1993), and caches in which the allocator's
//! references share the application's cache or have one of their own
//! (Rezaei and Kavi 2005). This crate is those simulators:
//!
//! - [`Cache`]: one set-associative LRU cache (direct-mapped is one way), the
//!   fastest way to simulate one configuration.
//! - [`CacheSweep`]: many configurations in one pass (one LRU stack per set
//!   answers every associativity; configurations with the same line size
//!   stop early once a line is most recent), in [`Mode::Unified`] (paper 003's
//!   Conv-Conf) and/or [`Mode::Split`] (IMM: the allocator's own cache).
//! - [`PageSim`]: LRU stack distances of pages, giving a [`PageCurve`] of
//!   faults for every memory size from one frame to every page touched.
//! - [`oracle`]: literal, slow versions of all three; the tests demand exact
//!   agreement.
//!
//! Every access is an [`Access`] (address, size, read/write/fetch, and part:
//! application or allocator) and every count is kept per part and kind
//! ([`Counts`]). Simulators take accesses one at a time or in batches
//! ([`Simulator`]); any [`AccessSource`] can feed them through [`drive`]:
//! [`din::DinSource`] reads DineroIV's `din` text.
//!
//! Each simulator's file opens with Notes on what it models (write-allocate,
//! straddling accesses, replacement, what a miss is). Configurations and
//! their SPEC strings live apart, in [`config`].
//!
//! ```
//! use heaplab_sim::{drive, Access, CacheSweep, IterSource, Kind, Mode, PageSim, Part};
//! use heaplab_sim::config::parse_cache_spec;
//!
//! // A stream: the application walks an array, the allocator touches a header.
//! let stream = (0..4096u64).map(|i| {
//!     if i % 64 == 0 {
//!         Access::new(0x9000, 8, Kind::Write).with_part(Part::Allocator)
//!     } else {
//!         Access::new(0x10000 + 8 * i, 8, Kind::Read)
//!     }
//! });
//! let mut caches = CacheSweep::new(&parse_cache_spec("16K:32:1,32K:64:8").unwrap(), &[Mode::Unified]);
//! let mut pages = PageSim::new(4096).unwrap();
//! drive(&mut IterSource::new(stream), &mut [&mut caches, &mut pages]).unwrap();
//!
//! let r = &caches.results()[0];
//! assert_eq!(r.counts.total_accesses(), 4096);
//! assert_eq!(r.counts.part_accesses(Part::Allocator), 64);
//! // 16K direct-mapped: the array's 1024 lines miss once each; the header
//! // misses when first touched and after each of the two array lines that
//! // map to its set evicts it.
//! assert_eq!(r.counts.part_misses(Part::Application), 1024);
//! assert_eq!(r.counts.part_misses(Part::Allocator), 3);
//!
//! let curve = pages.curve();
//! assert_eq!(curve.distinct_pages, 9);
//! assert_eq!(curve.faults_at(2), 9); // the header's page stays, the array streams
//! ```
//!
//! # Another source of accesses
//!
//! A new input format (heaplab's own reference stream, say) is an
//! [`AccessSource`]: it fills a batch of accesses, marks each with its
//! [`Part`] and [`Kind`], and says whether a cache flush or the end follows.
//! It keeps its own counts of what it leaves out.
//!
//! ```
//! use heaplab_sim::{drive, Access, AccessSource, Cache, CacheConfig, Kind, Next, Part};
//!
//! /// (address, size, is_store, in_allocator) records from somewhere.
//! struct Records<'a> { recs: &'a [(u64, u32, bool, bool)], at: usize }
//!
//! impl AccessSource for Records<'_> {
//!     type Error = std::convert::Infallible;
//!     fn next_batch(&mut self, buf: &mut Vec<Access>) -> Result<Next, Self::Error> {
//!         buf.clear();
//!         let end = (self.at + 4096).min(self.recs.len());
//!         for &(addr, size, store, alloc) in &self.recs[self.at..end] {
//!             let kind = if store { Kind::Write } else { Kind::Read };
//!             let part = if alloc { Part::Allocator } else { Part::Application };
//!             buf.push(Access::new(addr, size, kind).with_part(part));
//!         }
//!         self.at = end;
//!         Ok(if end == self.recs.len() { Next::End } else { Next::More })
//!     }
//! }
//!
//! let recs = [(0x1000, 8, false, false), (0x1008, 8, true, true), (0x2000, 4, false, false)];
//! let mut cache = Cache::new(CacheConfig::new(4096, 32, 1).unwrap());
//! let seen = drive(&mut Records { recs: &recs, at: 0 }, &mut [&mut cache]).unwrap();
//! assert_eq!(seen.total(), 3);
//! assert_eq!(cache.counts().part_accesses(Part::Allocator), 1);
//! assert_eq!(cache.counts().total_misses(), 2);
//! ```

#![warn(missing_docs)]

pub mod access;
pub mod cache;
pub mod config;
pub mod din;
pub mod gen;
pub mod oracle;
pub mod pages;
pub mod sweep;

pub use access::{
    drive, Access, AccessSource, Class, Counts, IterSource, Kind, Next, Part, Simulator,
    StreamStats, CLASSES,
};
pub use cache::Cache;
pub use config::CacheConfig;
pub use pages::{PageCurve, PageSim};
pub use sweep::{CacheResult, CacheSweep, Mode};
