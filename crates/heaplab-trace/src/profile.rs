//! The CUSTOMALLOC measurement phase (paper 002 §2.1): what `heaplab stats`
//! prints and what the synthesizer reads.
//!
//! Sizes are rounded up to allocation units of R bytes: a request for B bytes
//! falls in the size class `R * ceil(B / R)` (B = 0 counts as one unit).
//! A realloc is read as CUSTOMALLOC reads it: a free of the old object and an
//! allocation of the new one. For each class the profile keeps:
//!
//! - `allocs`, `frees`;
//! - `max_live` and `mean_live`, the objects of the class in use, sampled at
//!   each allocation of the class (after it);
//! - `mean_free_list`, the paper's mean free-list length: objects of the class
//!   freed and not yet reused by a later allocation of the class, sampled at
//!   each allocation of the class (before it reuses one). "The number of
//!   allocations and releases defines a time order."
//!
//! Several runs merge into one profile ([`Profile::merge`]); see
//! [`Weighting`] for how runs are weighted.

use crate::merge::{AddrHasher, AddrMap, IdMap};
use crate::model::{Event, Frame, Kind};
use serde::Serialize;
use std::collections::{BTreeMap, HashMap};
use std::hash::BuildHasherDefault;

/// A log2 histogram with exact count, mean and maximum.
/// Bucket 0 holds the value 0; bucket k > 0 holds values in [2^(k-1), 2^k).
#[derive(Debug, Clone, Default, Serialize, PartialEq)]
pub struct Histogram {
    pub count: u64,
    pub mean: f64,
    pub max: u64,
    /// `[upper bound of bucket, count]` for every non-empty bucket.
    pub buckets: Vec<(u64, u64)>,
    pub p50: u64,
    pub p90: u64,
    pub p99: u64,
}

#[derive(Debug, Clone)]
struct HistAcc {
    buckets: [f64; 65],
    count: f64,
    sum: f64,
    max: u64,
}

impl Default for HistAcc {
    fn default() -> Self {
        HistAcc { buckets: [0.0; 65], count: 0.0, sum: 0.0, max: 0 }
    }
}

fn bucket(v: u64) -> usize {
    (64 - v.leading_zeros()) as usize
}

fn bucket_upper(k: usize) -> u64 {
    if k == 0 {
        0
    } else if k >= 64 {
        u64::MAX
    } else {
        (1u64 << k) - 1
    }
}

impl HistAcc {
    fn add(&mut self, v: u64, w: f64) {
        self.buckets[bucket(v)] += w;
        self.count += w;
        self.sum += v as f64 * w;
        self.max = self.max.max(v);
    }
    fn merge(&mut self, h: &Histogram, w: f64) {
        for &(ub, c) in &h.buckets {
            self.buckets[bucket(ub)] += c as f64 * w;
        }
        self.count += h.count as f64 * w;
        self.sum += h.mean * h.count as f64 * w;
        self.max = self.max.max(h.max);
    }
    /// The upper bound of the bucket holding the q-quantile.
    fn quantile(&self, q: f64) -> u64 {
        let target = self.count * q;
        let mut acc = 0.0;
        for (k, &c) in self.buckets.iter().enumerate() {
            acc += c;
            if c > 0.0 && acc >= target {
                return bucket_upper(k).min(self.max);
            }
        }
        self.max
    }
    fn finish(&self) -> Histogram {
        Histogram {
            count: self.count.round() as u64,
            mean: if self.count > 0.0 { self.sum / self.count } else { 0.0 },
            max: self.max,
            buckets: self
                .buckets
                .iter()
                .enumerate()
                .filter(|(_, &c)| c > 0.0)
                .map(|(k, &c)| (bucket_upper(k), c.round() as u64))
                .collect(),
            p50: self.quantile(0.5),
            p90: self.quantile(0.9),
            p99: self.quantile(0.99),
        }
    }
}

/// One size class of the measurement table.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct SizeClass {
    /// The class: bytes, a multiple of the unit.
    pub size: u64,
    pub allocs: u64,
    pub frees: u64,
    pub max_live: u64,
    pub mean_live: f64,
    pub mean_free_list: f64,
    /// Bytes requested by the allocations of this class.
    pub bytes: u64,
    /// Share of all allocations.
    pub share: f64,
}

/// Lifetimes of the objects freed during the trace.
#[derive(Debug, Clone, Default, Serialize, PartialEq)]
pub struct Lifetimes {
    /// Events between allocation and free.
    pub events: Histogram,
    /// Bytes allocated between allocation and free.
    pub bytes: Histogram,
    /// Nanoseconds between allocation and free.
    pub ns: Histogram,
    /// Objects still live when the trace ended.
    pub never_freed: u64,
}

/// An allocation site: a call stack as (module path, offset) frames, which
/// mean the same in every run.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Site {
    pub frames: Vec<SiteFrame>,
    pub allocs: u64,
    pub bytes: u64,
}

#[derive(Debug, Clone, Serialize, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct SiteFrame {
    /// Path of the module, or "" for an address in no known module.
    pub module: String,
    pub offset: u64,
}

/// How runs count in a merged profile.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Weighting {
    /// Each run weighs the same, however many allocations it made: a run's
    /// counts are scaled by (mean allocations per run) / (its allocations).
    Runs,
    /// Each allocation weighs the same: counts are summed (paper 002 Table 2's
    /// "Input 1&2" rows read this way: a larger input dominates).
    Allocations,
}

/// The measurement profile of one run, or of several merged.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Profile {
    /// Trace files that went into it.
    pub traces: Vec<String>,
    pub runs: usize,
    pub weighting: Weighting,
    /// Allocation unit R in bytes.
    pub unit: u64,
    pub events: u64,
    /// Objects created (realloc counts as an allocation of the new object).
    pub allocations: u64,
    /// Objects released (realloc counts as a free of the old object).
    pub frees: u64,
    /// Successful reallocs of a live object.
    pub reallocs: u64,
    /// Calls that returned NULL.
    pub failed: u64,
    /// Calls by entry point.
    pub calls: BTreeMap<String, u64>,
    pub bytes_allocated: u64,
    pub peak_live_bytes: u64,
    pub peak_live_objects: u64,
    /// By allocation count, most frequent first.
    pub size_classes: Vec<SizeClass>,
    /// Share of allocations covered by the top 1, 2, 4 and 8 classes.
    pub top_coverage: BTreeMap<String, f64>,
    pub lifetimes: Lifetimes,
    /// Most frequent allocation sites first (at most `max_sites`).
    pub sites: Vec<Site>,
    pub threads: u64,
    pub duration_ns: u64,
    /// Figures that reached u64::MAX and stopped there (a sum of sizes such
    /// as two malloc(2^63) would otherwise wrap to a small number): their
    /// names, e.g. `bytes_allocated`; every figure not named is exact.
    pub saturated: Vec<String>,
}

/// `*x += v`, stopping at u64::MAX; true when it stopped there.
fn sadd(x: &mut u64, v: u64) -> bool {
    match x.checked_add(v) {
        Some(s) => {
            *x = s;
            false
        }
        None => {
            *x = u64::MAX;
            true
        }
    }
}

#[derive(Debug, Default, Clone)]
struct ClassAcc {
    size: u64,
    allocs: u64,
    frees: u64,
    live: u64,
    max_live: u64,
    live_sum: f64,
    free_list: u64,
    free_list_sum: f64,
    bytes: u64,
}

#[derive(Clone, Copy, Default)]
struct Obj {
    /// Index in `classes`.
    class: usize,
    size: u64,
    index: u64,
    bytes_before: u64,
    time: u64,
}

/// Size classes of up to this many units are found by a table.
const SMALL: usize = 4096;

/// Builds a [`Profile`] from the events of one trace, in order.
pub struct ProfileBuilder {
    unit: u64,
    /// log2(unit) when it is a power of two: a shift instead of a division
    /// (two per malloc cost a tenth of `add`).
    unit_shift: Option<u32>,
    time_unit_ns: u64,
    /// In the order first seen; `small` finds those of up to SMALL units
    /// (index + 1, 0: none yet), `large` the others.
    classes: Vec<ClassAcc>,
    small: Vec<u32>,
    large: AddrMap<usize>,
    /// By id + 1.
    live: IdMap<Obj>,
    live_bytes: u64,
    peak_live_bytes: u64,
    peak_live_objects: u64,
    bytes_allocated: u64,
    allocations: u64,
    frees: u64,
    reallocs: u64,
    failed: u64,
    events: u64,
    /// Calls by kind code (named in `finish`: a String per event cost more
    /// than the rest of `add`).
    calls: [u64; 256],
    life_events: HistAcc,
    life_bytes: HistAcc,
    life_ns: HistAcc,
    sites: HashMap<u32, (u64, u64), BuildHasherDefault<AddrHasher>>,
    threads: u64,
    first_time: Option<u64>,
    last_time: u64,
    saturated: std::collections::BTreeSet<&'static str>,
}

impl ProfileBuilder {
    /// `unit` is R in bytes (8, 16, 32, ...); `time_unit_ns` from the trace's META.
    pub fn new(unit: u64, time_unit_ns: u64) -> Self {
        assert!(unit > 0);
        ProfileBuilder {
            unit,
            unit_shift: unit.is_power_of_two().then(|| unit.trailing_zeros()),
            time_unit_ns,
            classes: Vec::new(),
            small: vec![0; SMALL],
            large: AddrMap::default(),
            live: IdMap::default(),
            live_bytes: 0,
            peak_live_bytes: 0,
            peak_live_objects: 0,
            bytes_allocated: 0,
            allocations: 0,
            frees: 0,
            reallocs: 0,
            failed: 0,
            events: 0,
            calls: [0; 256],
            life_events: HistAcc::default(),
            life_bytes: HistAcc::default(),
            life_ns: HistAcc::default(),
            sites: HashMap::default(),
            threads: 0,
            first_time: None,
            last_time: 0,
            saturated: Default::default(),
        }
    }

    /// The size class of a request (u64::MAX for a request within a unit of it).
    pub fn class_of(&self, size: u64) -> u64 {
        match self.unit_shift {
            Some(s) => {
                let k = ((size.max(1) - 1) >> s) + 1; // size.div_ceil(unit)
                if k > u64::MAX >> s {
                    u64::MAX
                } else {
                    k << s
                }
            }
            None => size.max(1).div_ceil(self.unit).saturating_mul(self.unit),
        }
    }

    fn note(&mut self, saturated: bool, field: &'static str) {
        if saturated {
            self.saturated.insert(field);
        }
    }

    /// The index of `class` in `classes`, made on first use: by a table
    /// for the small ones (a hash lookup per event cost a tenth of `add`).
    #[inline]
    fn class_index(&mut self, class: u64) -> usize {
        let k = match self.unit_shift {
            Some(s) => class >> s,
            None => class / self.unit,
        };
        if k < SMALL as u64 {
            let e = &mut self.small[k as usize];
            if *e == 0 {
                self.classes.push(ClassAcc { size: class, ..ClassAcc::default() });
                *e = self.classes.len() as u32;
            }
            return *e as usize - 1;
        }
        let n = self.classes.len();
        let i = *self.large.entry(class).or_insert(n);
        if i == n {
            self.classes.push(ClassAcc { size: class, ..ClassAcc::default() });
        }
        i
    }

    fn release(&mut self, id: u64) {
        let Some(o) = self.live.remove(id.wrapping_add(1)) else { return };
        let c = &mut self.classes[o.class];
        c.frees += 1;
        c.live -= 1;
        c.free_list += 1;
        self.frees += 1;
        self.live_bytes = self.live_bytes.saturating_sub(o.size);
        self.life_events.add(self.events - o.index, 1.0);
        self.life_bytes.add(self.bytes_allocated.saturating_sub(o.bytes_before), 1.0);
        let ns = self.last_time.saturating_sub(o.time).checked_mul(self.time_unit_ns);
        self.note(ns.is_none(), "lifetimes.ns");
        self.life_ns.add(ns.unwrap_or(u64::MAX), 1.0);
    }

    fn create(&mut self, id: u64, size: u64, stack: u32) {
        let class = self.class_of(size);
        self.note(class == u64::MAX, "size_classes.size");
        let ci = self.class_index(class);
        let c = &mut self.classes[ci];
        c.allocs += 1;
        c.free_list_sum += c.free_list as f64;
        c.free_list = c.free_list.saturating_sub(1);
        c.live += 1;
        c.max_live = c.max_live.max(c.live);
        c.live_sum += c.live as f64;
        let class_bytes = sadd(&mut c.bytes, size);
        self.note(class_bytes, "size_classes.bytes");
        self.live.insert(
            id.wrapping_add(1),
            Obj {
                class: ci,
                size,
                index: self.events,
                bytes_before: self.bytes_allocated,
                time: self.last_time,
            },
        );
        self.allocations += 1;
        let total = sadd(&mut self.bytes_allocated, size);
        self.note(total, "bytes_allocated");
        let live = sadd(&mut self.live_bytes, size);
        self.note(live, "peak_live_bytes");
        self.peak_live_bytes = self.peak_live_bytes.max(self.live_bytes);
        self.peak_live_objects = self.peak_live_objects.max(self.live.len() as u64);
        let s = self.sites.entry(stack).or_default();
        s.0 += 1;
        let site = sadd(&mut s.1, size);
        self.note(site, "sites.bytes");
    }

    /// Adds one event.
    pub fn add(&mut self, ev: &Event) {
        self.first_time.get_or_insert(ev.time);
        self.last_time = ev.time;
        self.threads = self.threads.max(u64::from(ev.thread) + 1);
        self.calls[ev.kind.code() as usize] += 1;
        if ev.failed {
            self.failed += 1;
        } else {
            if ev.kind == Kind::Realloc && ev.old.is_some() {
                self.reallocs += 1;
            }
            if let Some(old) = ev.old {
                self.release(old);
            }
            if let Some(id) = ev.id {
                self.create(id, ev.size, ev.stack);
            }
        }
        self.events += 1;
    }

    /// The profile. `stack` resolves a stack id to its frames and `module`
    /// a module id to its path (a reader's tables); `max_sites` caps the list.
    pub fn finish(
        mut self,
        trace: &str,
        stack: impl Fn(u32) -> Vec<Frame>,
        module: impl Fn(u32) -> String,
        max_sites: usize,
    ) -> Profile {
        let duration = self
            .last_time
            .saturating_sub(self.first_time.unwrap_or(0))
            .checked_mul(self.time_unit_ns);
        self.note(duration.is_none(), "duration_ns");
        let total = self.allocations.max(1) as f64;
        let mut classes: Vec<SizeClass> = self
            .classes
            .iter()
            .map(|c| SizeClass {
                size: c.size,
                allocs: c.allocs,
                frees: c.frees,
                max_live: c.max_live,
                mean_live: c.live_sum / c.allocs.max(1) as f64,
                mean_free_list: c.free_list_sum / c.allocs.max(1) as f64,
                bytes: c.bytes,
                share: c.allocs as f64 / total,
            })
            .collect();
        sort_classes(&mut classes);
        let mut sites: Vec<Site> = self
            .sites
            .iter()
            .map(|(&id, &(allocs, bytes))| Site {
                frames: stack(id)
                    .into_iter()
                    .map(|f| SiteFrame {
                        module: if f.module == 0 { String::new() } else { module(f.module) },
                        offset: f.offset,
                    })
                    .collect(),
                allocs,
                bytes,
            })
            .collect();
        sort_sites(&mut sites);
        sites.truncate(max_sites);
        Profile {
            traces: vec![trace.to_string()],
            runs: 1,
            weighting: Weighting::Runs,
            unit: self.unit,
            events: self.events,
            allocations: self.allocations,
            frees: self.frees,
            reallocs: self.reallocs,
            failed: self.failed,
            calls: (0..=255u8)
                .filter(|&k| self.calls[k as usize] > 0)
                .filter_map(|k| {
                    Some((Kind::from_code(k)?.name().to_string(), self.calls[k as usize]))
                })
                .collect(),
            bytes_allocated: self.bytes_allocated,
            peak_live_bytes: self.peak_live_bytes,
            peak_live_objects: self.peak_live_objects,
            top_coverage: coverage(&classes),
            size_classes: classes,
            lifetimes: Lifetimes {
                events: self.life_events.finish(),
                bytes: self.life_bytes.finish(),
                ns: self.life_ns.finish(),
                never_freed: self.live.len() as u64,
            },
            sites,
            threads: self.threads,
            duration_ns: duration.unwrap_or(u64::MAX),
            saturated: self.saturated.iter().map(|s| s.to_string()).collect(),
        }
    }
}

fn sort_classes(c: &mut [SizeClass]) {
    c.sort_by(|a, b| b.allocs.cmp(&a.allocs).then(a.size.cmp(&b.size)));
}

fn sort_sites(s: &mut [Site]) {
    s.sort_by(|a, b| {
        b.allocs.cmp(&a.allocs).then(b.bytes.cmp(&a.bytes)).then(a.frames.cmp(&b.frames))
    });
}

fn coverage(classes: &[SizeClass]) -> BTreeMap<String, f64> {
    let total: u64 = classes.iter().map(|c| c.allocs).sum();
    [1usize, 2, 4, 8]
        .iter()
        .map(|&k| {
            let top: u64 = classes.iter().take(k).map(|c| c.allocs).sum();
            (k.to_string(), if total == 0 { 0.0 } else { top as f64 / total as f64 })
        })
        .collect()
}

impl Profile {
    /// Merges the profiles of several runs, which must share the unit.
    pub fn merge(
        runs: &[Profile],
        weighting: Weighting,
        max_sites: usize,
    ) -> Result<Profile, String> {
        let Some(first) = runs.first() else { return Err("no profiles to merge".into()) };
        if let Some(p) = runs.iter().find(|p| p.unit != first.unit) {
            return Err(format!("profiles use units {} and {}", first.unit, p.unit));
        }
        let mean_allocs =
            runs.iter().map(|p| p.allocations as f64).sum::<f64>() / runs.len() as f64;
        let weight = |p: &Profile| match weighting {
            Weighting::Allocations => 1.0,
            Weighting::Runs if p.allocations == 0 => 0.0,
            Weighting::Runs => mean_allocs / p.allocations as f64,
        };
        let round = |x: f64| x.round() as u64;
        let mut classes: BTreeMap<u64, (f64, f64, u64, f64, f64, f64)> = BTreeMap::new();
        let sum =
            |f: &dyn Fn(&Profile) -> u64| round(runs.iter().map(|p| f(p) as f64 * weight(p)).sum());
        let allocations = sum(&|p| p.allocations);
        let frees = sum(&|p| p.frees);
        let reallocs = sum(&|p| p.reallocs);
        let failed = sum(&|p| p.failed);
        let events = sum(&|p| p.events);
        let bytes_allocated = sum(&|p| p.bytes_allocated);
        let mut calls: BTreeMap<String, f64> = BTreeMap::new();
        let mut sites: HashMap<Vec<SiteFrame>, (f64, f64)> = HashMap::new();
        let (mut le, mut lb, mut ln) = (HistAcc::default(), HistAcc::default(), HistAcc::default());
        let mut never = 0.0;
        for p in runs {
            let w = weight(p);
            for c in &p.size_classes {
                let e = classes.entry(c.size).or_default();
                let a = c.allocs as f64 * w;
                e.0 += a;
                e.1 += c.frees as f64 * w;
                e.2 = e.2.max(c.max_live);
                e.3 += c.mean_live * a;
                e.4 += c.mean_free_list * a;
                e.5 += c.bytes as f64 * w;
            }
            for (k, v) in &p.calls {
                *calls.entry(k.clone()).or_default() += *v as f64 * w;
            }
            for s in &p.sites {
                let e = sites.entry(s.frames.clone()).or_default();
                e.0 += s.allocs as f64 * w;
                e.1 += s.bytes as f64 * w;
            }
            le.merge(&p.lifetimes.events, w);
            lb.merge(&p.lifetimes.bytes, w);
            ln.merge(&p.lifetimes.ns, w);
            never += p.lifetimes.never_freed as f64 * w;
        }
        let total: f64 = classes.values().map(|c| c.0).sum::<f64>().max(1.0);
        let mut size_classes: Vec<SizeClass> = classes
            .into_iter()
            .map(|(size, (a, f, max_live, ml, mf, b))| SizeClass {
                size,
                allocs: round(a),
                frees: round(f),
                max_live,
                mean_live: if a > 0.0 { ml / a } else { 0.0 },
                mean_free_list: if a > 0.0 { mf / a } else { 0.0 },
                bytes: round(b),
                share: a / total,
            })
            .collect();
        sort_classes(&mut size_classes);
        let mut sites: Vec<Site> = sites
            .into_iter()
            .map(|(frames, (a, b))| Site { frames, allocs: round(a), bytes: round(b) })
            .collect();
        sort_sites(&mut sites);
        sites.truncate(max_sites);
        Ok(Profile {
            traces: runs.iter().flat_map(|p| p.traces.clone()).collect(),
            runs: runs.iter().map(|p| p.runs).sum(),
            weighting,
            unit: first.unit,
            events,
            allocations,
            frees,
            reallocs,
            failed,
            calls: calls.into_iter().map(|(k, v)| (k, round(v))).collect(),
            bytes_allocated,
            peak_live_bytes: runs.iter().map(|p| p.peak_live_bytes).max().unwrap_or(0),
            peak_live_objects: runs.iter().map(|p| p.peak_live_objects).max().unwrap_or(0),
            top_coverage: coverage(&size_classes),
            size_classes,
            lifetimes: Lifetimes {
                events: le.finish(),
                bytes: lb.finish(),
                ns: ln.finish(),
                never_freed: round(never),
            },
            sites,
            threads: runs.iter().map(|p| p.threads).max().unwrap_or(0),
            duration_ns: runs.iter().fold(0u64, |a, p| a.saturating_add(p.duration_ns)),
            saturated: {
                // A run's saturated figure stays saturated; a weighted sum
                // that reaches u64::MAX (f64 to u64 stops there) is one too.
                let mut s: std::collections::BTreeSet<String> =
                    runs.iter().flat_map(|p| p.saturated.iter().cloned()).collect();
                if bytes_allocated == u64::MAX {
                    s.insert("bytes_allocated".into());
                }
                if runs.iter().fold(0u64, |a, p| a.saturating_add(p.duration_ns)) == u64::MAX {
                    s.insert("duration_ns".into());
                }
                s.into_iter().collect()
            },
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ev(kind: Kind, id: Option<u64>, old: Option<u64>, size: u64, time: u64) -> Event {
        Event {
            index: 0,
            kind,
            thread: 0,
            time,
            size,
            align: 0,
            id,
            old,
            old_size: 0,
            stack: 0,
            failed: false,
            inherited: false,
            ..Event::default()
        }
    }

    fn profile(evs: &[Event], unit: u64) -> Profile {
        let mut b = ProfileBuilder::new(unit, 1);
        for e in evs {
            b.add(e);
        }
        b.finish("t", |_| Vec::new(), |_| String::new(), 10)
    }

    fn class(p: &Profile, size: u64) -> &SizeClass {
        p.size_classes.iter().find(|c| c.size == size).unwrap()
    }

    #[test]
    fn class_of_shifts_as_it_divides() {
        for unit in [1u64, 8, 16, 24, 32, 4096] {
            let b = ProfileBuilder::new(unit, 1);
            let sizes = (0..300u64).chain([
                u64::MAX,
                u64::MAX - 1,
                u64::MAX - unit,
                1 << 63,
                (1 << 63) + 1,
            ]);
            for size in sizes {
                let want = size.max(1).div_ceil(unit).saturating_mul(unit);
                assert_eq!(b.class_of(size), want, "unit {unit}, size {size}");
            }
        }
    }

    #[test]
    fn hand_computed_table() {
        let evs = [
            ev(Kind::Malloc, Some(0), None, 10, 0),
            ev(Kind::Malloc, Some(1), None, 12, 1),
            ev(Kind::Free, None, Some(0), 0, 2),
            ev(Kind::Free, None, Some(1), 0, 3),
            ev(Kind::Malloc, Some(2), None, 16, 4),
            ev(Kind::Malloc, Some(3), None, 100, 5),
            ev(Kind::Realloc, Some(4), Some(2), 40, 9),
        ];
        let p = profile(&evs, 8);
        let c16 = class(&p, 16);
        assert_eq!((c16.allocs, c16.frees, c16.max_live), (3, 3, 2));
        assert!((c16.mean_live - 4.0 / 3.0).abs() < 1e-12);
        assert!((c16.mean_free_list - 2.0 / 3.0).abs() < 1e-12);
        assert_eq!(class(&p, 104).allocs, 1);
        assert_eq!(class(&p, 40).allocs, 1);
        assert_eq!((p.allocations, p.frees, p.reallocs), (5, 3, 1));
        assert_eq!((p.peak_live_bytes, p.peak_live_objects), (140, 2));
        assert_eq!(p.size_classes[0].size, 16, "most frequent first");
        assert!((p.top_coverage["1"] - 0.6).abs() < 1e-12);
        assert_eq!(p.top_coverage["4"], 1.0);
        // Lifetimes of the three freed objects, in events: 2, 2, 2 (0→2, 1→3, 4→6).
        assert_eq!(p.lifetimes.events.count, 3);
        assert_eq!(p.lifetimes.events.max, 2);
        assert_eq!(p.lifetimes.ns.max, 5, "object 2 lived from t=4 to t=9");
        assert_eq!(p.lifetimes.never_freed, 2);
        // With a 32-byte unit everything up to 32 bytes is one class.
        let p32 = profile(&evs, 32);
        assert_eq!(p32.size_classes[0].size, 32);
        assert_eq!(p32.size_classes[0].allocs, 3, "40 bytes is a 64-byte class");
    }

    #[test]
    fn merge_weights_runs_or_allocations() {
        let run = |n: u64, size: u64| {
            let evs: Vec<Event> =
                (0..n).map(|i| ev(Kind::Malloc, Some(i), None, size, i)).collect();
            profile(&evs, 8)
        };
        let (a, b) = (run(100, 16), run(300, 32));
        let by_run = Profile::merge(&[a.clone(), b.clone()], Weighting::Runs, 10).unwrap();
        assert!((class(&by_run, 16).share - 0.5).abs() < 1e-9);
        assert_eq!(class(&by_run, 16).allocs, 200);
        let by_alloc = Profile::merge(&[a, b], Weighting::Allocations, 10).unwrap();
        assert!((class(&by_alloc, 32).share - 0.75).abs() < 1e-9);
        assert_eq!(by_alloc.allocations, 400);
        assert_eq!(by_alloc.runs, 2);
    }
}
