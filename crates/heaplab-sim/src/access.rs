//! One memory access, the counts kept per kind of access, and the streaming
//! plumbing: any [`AccessSource`] feeds any set of [`Simulator`]s.
//!
//! ```text
//!   AccessSource ──next_batch──▶ &[Access] ──run──▶ Simulator (Cache, CacheSweep, PageSim, oracles)
//!   (din text, iterators,                    └─flush─▶ (din label 4)
//!    later heaplab's own reference stream)
//! ```
//!
//! An [`Access`] is 16 bytes: address, size, kind, part. Every simulator keeps
//! its counts per [`Class`] (part × kind), so that a report can give the
//! application's misses apart from the allocator's, and reads apart from writes.

use std::fmt;

/// What an access does. The simulated caches treat every kind alike (see the
/// Notes of each simulator); the kind only selects the counter.
#[repr(u8)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Kind {
    /// A data load (din label 0).
    Read = 0,
    /// A data store (din label 1).
    Write = 1,
    /// An instruction fetch (din label 2).
    Fetch = 2,
    /// An access of unknown type (din label 3), simulated like a read.
    Misc = 3,
}

impl Kind {
    /// Every kind, in counter order.
    pub const ALL: [Kind; 4] = [Kind::Read, Kind::Write, Kind::Fetch, Kind::Misc];

    /// A short lower-case name: `read`, `write`, `fetch`, `misc`.
    pub fn name(self) -> &'static str {
        match self {
            Kind::Read => "read",
            Kind::Write => "write",
            Kind::Fetch => "fetch",
            Kind::Misc => "misc",
        }
    }
}

/// Whose code made an access: paper 003 splits the stream into the
/// application and its memory allocator (IMM-Application / IMM-Allocator).
#[repr(u8)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Part {
    /// Everything but the allocator.
    Application = 0,
    /// The allocator library, or glibc's malloc functions.
    Allocator = 1,
}

impl Part {
    /// Both parts, in counter order.
    pub const ALL: [Part; 2] = [Part::Application, Part::Allocator];

    /// `application` or `allocator`.
    pub fn name(self) -> &'static str {
        match self {
            Part::Application => "application",
            Part::Allocator => "allocator",
        }
    }
}

/// One memory access: `size` bytes at `addr`.
///
/// An access may straddle several cache lines or pages; each simulator's
/// Notes say how that is counted. A `size` of 0 is treated as 1.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Access {
    /// The first byte.
    pub addr: u64,
    /// How many bytes, from `addr` on.
    pub size: u32,
    /// Load, store, instruction fetch or unknown.
    pub kind: Kind,
    /// Application or allocator.
    pub part: Part,
}

impl Access {
    /// An application access.
    #[inline]
    pub fn new(addr: u64, size: u32, kind: Kind) -> Access {
        Access { addr, size, kind, part: Part::Application }
    }

    /// The same access, marked as made by `part`.
    #[inline]
    pub fn with_part(self, part: Part) -> Access {
        Access { part, ..self }
    }

    /// The counter this access goes to.
    #[inline(always)]
    pub fn class(&self) -> Class {
        Class::new(self.part, self.kind)
    }

    /// The last byte touched (saturating at the top of the address space).
    #[inline(always)]
    pub fn last_byte(&self) -> u64 {
        self.addr.saturating_add((self.size.max(1) - 1) as u64)
    }

    /// The first and last block touched, for blocks of `1 << shift` bytes.
    #[inline(always)]
    pub fn blocks(&self, shift: u32) -> (u64, u64) {
        (self.addr >> shift, self.last_byte() >> shift)
    }
}

/// How many [`Class`]es there are.
pub const CLASSES: usize = 8;

/// A counter index: part × kind, `part * 4 + kind`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Class(u8);

impl Class {
    /// The class of `part` and `kind`.
    #[inline(always)]
    pub fn new(part: Part, kind: Kind) -> Class {
        Class(((part as u8) << 2) | kind as u8)
    }
    /// Its index, below [`CLASSES`].
    #[inline(always)]
    pub fn index(self) -> usize {
        self.0 as usize
    }
    /// The part it counts.
    pub fn part(self) -> Part {
        Part::ALL[(self.0 >> 2) as usize]
    }
    /// The kind it counts.
    pub fn kind(self) -> Kind {
        Kind::ALL[(self.0 & 3) as usize]
    }
    /// Every class, in index order.
    pub fn all() -> impl Iterator<Item = Class> {
        (0..CLASSES as u8).map(Class)
    }
}

/// Accesses and misses of one simulated cache, per [`Class`].
///
/// An access is counted once however many lines it touches, and it misses
/// when any of them misses (see the Notes in `cache.rs`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Counts {
    /// Accesses per class index.
    pub accesses: [u64; CLASSES],
    /// Misses per class index.
    pub misses: [u64; CLASSES],
}

impl Counts {
    /// All accesses.
    pub fn total_accesses(&self) -> u64 {
        self.accesses.iter().sum()
    }
    /// All misses.
    pub fn total_misses(&self) -> u64 {
        self.misses.iter().sum()
    }
    /// Accesses made by `part`, of every kind.
    pub fn part_accesses(&self, part: Part) -> u64 {
        Kind::ALL.iter().map(|&k| self.accesses[Class::new(part, k).index()]).sum()
    }
    /// Misses of accesses made by `part`, of every kind.
    pub fn part_misses(&self, part: Part) -> u64 {
        Kind::ALL.iter().map(|&k| self.misses[Class::new(part, k).index()]).sum()
    }
    /// Accesses of `kind`, by both parts.
    pub fn kind_accesses(&self, kind: Kind) -> u64 {
        Part::ALL.iter().map(|&p| self.accesses[Class::new(p, kind).index()]).sum()
    }
    /// Misses of `kind`, by both parts.
    pub fn kind_misses(&self, kind: Kind) -> u64 {
        Part::ALL.iter().map(|&p| self.misses[Class::new(p, kind).index()]).sum()
    }
    /// Misses per access, 0 when there was no access.
    pub fn miss_rate(&self) -> f64 {
        let a = self.total_accesses();
        if a == 0 {
            0.0
        } else {
            self.total_misses() as f64 / a as f64
        }
    }
    /// Adds `other` in.
    pub fn add(&mut self, other: &Counts) {
        for i in 0..CLASSES {
            self.accesses[i] += other.accesses[i];
            self.misses[i] += other.misses[i];
        }
    }
}

/// What a simulator does with a stream: the one interface every source feeds.
pub trait Simulator {
    /// Simulates `batch`, in order.
    fn run(&mut self, batch: &[Access]);
    /// A cache flush (din label 4): caches forget every line. Page simulators
    /// ignore it, as a cache flush does not evict pages.
    fn flush(&mut self);
}

/// What follows the accesses a source just put in the batch.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Next {
    /// More accesses may follow.
    More,
    /// A cache flush follows the batch, then possibly more accesses.
    Flush,
    /// The stream ended after this batch (which may be empty).
    End,
}

/// A stream of accesses, read in batches so that the per-access cost of the
/// plumbing is nil. DineroIV's `din` text is one source ([`crate::din`]);
/// heaplab's own reference stream is meant to be another.
///
/// A source decides what to do with accesses the simulators should not see
/// (for example instruction fetches of a data-cache study) and keeps its own
/// counts of them.
pub trait AccessSource {
    /// What goes wrong while reading.
    type Error;
    /// Clears `buf`, puts the next accesses in it (any number, typically a
    /// few thousand; `buf`'s capacity is a good target), and says what follows.
    fn next_batch(&mut self, buf: &mut Vec<Access>) -> Result<Next, Self::Error>;
}

/// An [`AccessSource`] over any iterator of accesses (it never fails).
pub struct IterSource<I> {
    iter: I,
    batch: usize,
}

impl<I: Iterator<Item = Access>> IterSource<I> {
    /// Batches of 4096 accesses from `iter`.
    pub fn new(iter: I) -> Self {
        IterSource { iter, batch: 4096 }
    }
}

impl<I: Iterator<Item = Access>> AccessSource for IterSource<I> {
    type Error = std::convert::Infallible;
    fn next_batch(&mut self, buf: &mut Vec<Access>) -> Result<Next, Self::Error> {
        buf.clear();
        buf.extend(self.iter.by_ref().take(self.batch));
        Ok(if buf.len() < self.batch { Next::End } else { Next::More })
    }
}

/// What [`drive`] saw go by.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct StreamStats {
    /// Accesses handed to the simulators, per [`Class`] index.
    pub accesses: [u64; CLASSES],
    /// Cache flushes handed to the simulators.
    pub flushes: u64,
}

impl StreamStats {
    /// All accesses handed to the simulators.
    pub fn total(&self) -> u64 {
        self.accesses.iter().sum()
    }
}

impl fmt::Display for StreamStats {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} accesses, {} flushes", self.total(), self.flushes)
    }
}

/// How many accesses [`drive`] asks a source for at a time: 16 K accesses are
/// 256 KiB, small enough to stay in L2 while every simulator runs over them.
pub const BATCH: usize = 16 * 1024;

/// Reads `src` to its end and runs every batch through every simulator, in
/// order. Returns what went by, or the source's first error.
pub fn drive<S: AccessSource + ?Sized>(
    src: &mut S,
    sims: &mut [&mut dyn Simulator],
) -> Result<StreamStats, S::Error> {
    let mut buf = Vec::with_capacity(BATCH);
    let mut stats = StreamStats::default();
    loop {
        let next = src.next_batch(&mut buf)?;
        for a in &buf {
            stats.accesses[a.class().index()] += 1;
        }
        for sim in sims.iter_mut() {
            sim.run(&buf);
        }
        match next {
            Next::More => {}
            Next::Flush => {
                stats.flushes += 1;
                for sim in sims.iter_mut() {
                    sim.flush();
                }
            }
            Next::End => return Ok(stats),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn access_is_16_bytes() {
        assert_eq!(std::mem::size_of::<Access>(), 16);
    }

    #[test]
    fn blocks_of_straddling_and_empty_accesses() {
        let a = Access::new(30, 4, Kind::Read);
        assert_eq!(a.blocks(5), (0, 1));
        let b = Access::new(32, 0, Kind::Read);
        assert_eq!(b.blocks(5), (1, 1));
        let c = Access::new(u64::MAX - 1, 8, Kind::Read);
        assert_eq!(c.last_byte(), u64::MAX);
    }

    #[test]
    fn classes_round_trip() {
        for p in Part::ALL {
            for k in Kind::ALL {
                let c = Class::new(p, k);
                assert_eq!((c.part(), c.kind()), (p, k));
            }
        }
        assert_eq!(Class::all().count(), CLASSES);
    }
}
