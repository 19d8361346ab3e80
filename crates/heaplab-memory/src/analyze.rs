//! Where the memory goes, per call stack, in one pass over a trace: the
//! answers heaptrack gives (peak, leaks, temporaries) from heaplab's events.
//!
//! ```text
//!   event ─▶ keep? (thread, time window, module, function: decided once per
//!            │      stack id / thread, cached)
//!            ├─ release of a tracked object ─▶ its stack: live −, lifetime,
//!            │     temporary when its own thread freed it within N of that
//!            │     thread's events (N = 1: heaptrack's "no other allocation
//!            │     or free between"; counted in the thread's own order, so
//!            │     that other threads' events, merged between by time in a
//!            │     version-2 trace, do not hide a temporary)
//!            │     its thread: freed, or freed by another thread
//!            └─ new object ──────────────────▶ its stack: allocs +, live +;
//!                  whole program: live +, a new peak bumps the peak epoch
//!                  its thread: allocs +, live + (its own high-water mark)
//!
//!   peak at the global peak, without a second pass: each stack keeps the
//!   epoch of its last change; before it changes again, if a peak came in
//!   between (its epoch < the peak epoch), its live bytes then were its
//!   bytes at that peak. At the end the same rule settles every stack.
//! ```
//!
//! Invariants: the stacks' live bytes sum to the program's live bytes
//! (over the objects kept by the filter); their bytes at the peak sum to the
//! peak; leaked = live when the trace ends (for a trace cut short or ended by
//! exec, "leaked" means "still live then", and `end` says which).

use crate::hist::{Hist, Percentiles};
use crate::symbols::Symbolizer;
use crate::timeline::Timeline;
use heaplab_trace::merge::IdMap;
use heaplab_trace::{End, Event, Frame, Meta, Module, ThreadInfo, TraceReader};
use serde::Serialize;
use std::path::Path;

/// Which allocations count.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Filter {
    /// Nanoseconds from the first event: allocations before are not counted.
    pub from_ns: Option<u64>,
    /// Nanoseconds from the first event: allocations after are not counted,
    /// and the peak is searched before it.
    pub to_ns: Option<u64>,
    /// Threads by index, kernel tid or name (any of them).
    pub threads: Vec<String>,
    /// Module paths (substrings): a stack with a frame in one of them.
    pub modules: Vec<String>,
    /// Function names (substrings): a stack with one of them in a frame.
    pub functions: Vec<String>,
}

impl Filter {
    pub fn is_empty(&self) -> bool {
        self.from_ns.is_none()
            && self.to_ns.is_none()
            && self.threads.is_empty()
            && self.modules.is_empty()
            && self.functions.is_empty()
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct Options {
    pub filter: Filter,
    /// A release at most this many events after its allocation makes the
    /// allocation temporary (1 = heaptrack's definition).
    pub temporary_within: u64,
    /// Buckets of the memory-over-time series.
    pub timeline_buckets: usize,
}

impl Default for Options {
    fn default() -> Self {
        Options { filter: Filter::default(), temporary_within: 1, timeline_buckets: 1024 }
    }
}

/// What one call stack did.
#[derive(Debug, Clone, Default)]
pub struct StackStats {
    pub allocs: u64,
    pub bytes: u64,
    pub failed: u64,
    pub live_objects: u64,
    pub live_bytes: u64,
    /// Live at the moment of the program's peak.
    pub peak_objects: u64,
    pub peak_bytes: u64,
    /// The most this stack alone ever had live.
    pub max_bytes: u64,
    pub freed: u64,
    pub temporary: u64,
    pub temporary_bytes: u64,
    /// Lifetimes of the freed objects, in nanoseconds.
    pub lifetime_ns: Hist,
    epoch: u64,
}

impl StackStats {
    fn settle(&mut self, peak_epoch: u64) {
        if self.epoch < peak_epoch {
            self.peak_bytes = self.live_bytes;
            self.peak_objects = self.live_objects;
        }
        self.epoch = peak_epoch;
    }

    /// Adds another stack's figures (a site made of several stacks).
    pub fn add(&mut self, o: &StackStats) {
        self.allocs += o.allocs;
        self.bytes = self.bytes.saturating_add(o.bytes);
        self.failed += o.failed;
        self.live_objects += o.live_objects;
        self.live_bytes += o.live_bytes;
        self.peak_objects += o.peak_objects;
        self.peak_bytes += o.peak_bytes;
        self.max_bytes = self.max_bytes.max(o.max_bytes);
        self.freed += o.freed;
        self.temporary += o.temporary;
        self.temporary_bytes = self.temporary_bytes.saturating_add(o.temporary_bytes);
        self.lifetime_ns.merge(&o.lifetime_ns);
    }
}

/// Totals of the whole (filtered) program.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Totals {
    pub events: u64,
    pub allocations: u64,
    pub bytes_allocated: u64,
    pub frees: u64,
    pub failed: u64,
    pub temporary: u64,
    pub temporary_bytes: u64,
    pub peak_bytes: u64,
    pub peak_objects: u64,
    /// Nanoseconds from the first event to the peak.
    pub peak_ns: u64,
    /// Index of the event that reached the peak.
    pub peak_event: u64,
    pub leaked_bytes: u64,
    pub leaked_objects: u64,
    /// Objects the trace began with (a fork child's inheritance).
    pub inherited: u64,
    /// Allocations the filter left out.
    pub filtered_out: u64,
    pub duration_ns: u64,
    /// Objects freed by another thread than the one that allocated them.
    pub cross_thread_frees: u64,
}

/// What one thread did (by the thread that allocated, for live and leaked
/// bytes; by the thread that freed, for frees).
#[derive(Debug, Clone, Default, Serialize)]
pub struct ThreadStats {
    /// Thread index in the trace (0: the first thread).
    pub index: u32,
    /// Kernel thread id (0 when not recorded).
    pub tid: u64,
    /// The thread's name (lossy UTF-8; escape it before display).
    pub name: String,
    /// The creating thread (version 2 start edge), when recorded.
    pub parent: Option<u32>,
    pub allocations: u64,
    pub bytes_allocated: u64,
    /// Releases this thread made.
    pub frees: u64,
    /// Of them, of objects another thread allocated.
    pub frees_of_others: u64,
    /// Objects this thread allocated that another thread freed.
    pub freed_by_others: u64,
    pub temporary: u64,
    /// The most bytes this thread's allocations had live at once.
    pub max_live_bytes: u64,
    /// Of this thread's allocations, live at the program's peak.
    pub peak_bytes: u64,
    /// Of this thread's allocations, still live at the end.
    pub leaked_bytes: u64,
    pub leaked_objects: u64,
    /// Nanoseconds from the first event to this thread's first and last.
    pub first_ns: u64,
    pub last_ns: u64,
    /// Lifetimes of this thread's freed allocations, in nanoseconds.
    pub lifetime_ns: Percentiles,
    #[serde(skip)]
    lifetimes: Hist,
    #[serde(skip)]
    epoch: u64,
    #[serde(skip)]
    live_bytes: u64,
    #[serde(skip)]
    seen: bool,
}

impl ThreadStats {
    fn settle(&mut self, peak_epoch: u64) {
        if self.epoch < peak_epoch {
            self.peak_bytes = self.live_bytes;
        }
        self.epoch = peak_epoch;
    }
}

/// The analysis of one trace.
pub struct Analysis {
    pub trace: String,
    pub meta: Meta,
    /// How the recording ended; None when it was cut short.
    pub end: Option<End>,
    /// The read error that stopped the analysis early, if any.
    pub error: Option<String>,
    pub totals: Totals,
    /// By stack id (0: allocations without a recorded stack).
    pub stacks: Vec<StackStats>,
    /// Raw frames by stack id.
    pub frames: Vec<Vec<Frame>>,
    pub modules: Vec<Module>,
    pub threads: Vec<ThreadInfo>,
    /// By thread index: the threads that allocated or freed.
    pub thread_stats: Vec<ThreadStats>,
    pub timeline: Timeline,
    /// The first event's time, in nanoseconds of the trace's clock (the
    /// timeline's zero).
    pub first_ns: u64,
    pub options: Options,
}

#[derive(Clone, Copy, Default)]
struct Obj {
    stack: u32,
    /// The allocating thread (u32::MAX: inherited, of no thread).
    thread: u32,
    size: u64,
    /// The allocation's position in its thread's own events.
    seq: u64,
    time: u64,
}

/// Whether a stack passes the module and function filters.
fn stack_matches(
    frames: &[Frame],
    modules: &dyn Fn(u32) -> Option<(Vec<u8>, Vec<u8>)>,
    f: &Filter,
    sym: &mut Symbolizer,
) -> bool {
    let mut ok_mod = f.modules.is_empty();
    let mut ok_fn = f.functions.is_empty();
    for fr in frames {
        let Some((path, build_id)) = modules(fr.module) else { continue };
        if !ok_mod {
            let p = String::from_utf8_lossy(&path);
            ok_mod = f.modules.iter().any(|m| p.contains(m.as_str()));
        }
        if !ok_fn {
            let m = sym.module(&path, &build_id);
            ok_fn = sym.resolve(m, fr.offset).iter().any(|s| {
                s.function.as_deref().is_some_and(|n| f.functions.iter().any(|x| n.contains(x)))
            });
        }
        if ok_mod && ok_fn {
            return true;
        }
    }
    ok_mod && ok_fn
}

fn thread_matches(t: Option<&ThreadInfo>, index: u32, sel: &[String]) -> bool {
    sel.iter().any(|s| {
        if let Ok(n) = s.parse::<u64>() {
            if n == u64::from(index) || t.is_some_and(|t| t.tid == n) {
                return true;
            }
        }
        t.is_some_and(|t| String::from_utf8_lossy(&t.name) == s.as_str())
    })
}

/// Analyzes the trace at `path`. `each` sees every event too (so a caller
/// can build other profiles in the same pass). A read error ends the pass:
/// the analysis covers the events before it and names the error.
pub fn analyze(
    path: &Path,
    opts: &Options,
    sym: &mut Symbolizer,
    mut each: impl FnMut(&Event),
) -> Result<Analysis, heaplab_trace::TraceError> {
    let mut r = TraceReader::open(path)?;
    let time_unit = r.meta().time_unit_ns.max(1);
    let f = &opts.filter;
    let mut stacks: Vec<StackStats> = vec![StackStats::default()];
    // live objects by id + 1 (an id map keeps consecutive ids side by side)
    let mut objs: IdMap<Obj> = IdMap::default();
    let mut stack_ok: Vec<u8> = Vec::new(); // 0 unknown, 1 yes, 2 no
    let mut thread_ok: Vec<u8> = Vec::new();
    let mut ts: Vec<ThreadStats> = Vec::new();
    let thread_at = |ts: &mut Vec<ThreadStats>, i: u32, rel: u64| -> usize {
        let i = i as usize;
        if ts.len() <= i {
            ts.resize(i + 1, ThreadStats::default());
        }
        let x = &mut ts[i];
        if !x.seen {
            x.seen = true;
            x.first_ns = rel;
        }
        x.last_ns = rel;
        i
    };
    let mut t = Totals::default();
    let mut timeline = Timeline::new(opts.timeline_buckets, opts.timeline_buckets * 4096);
    let (mut live, mut live_objs, mut peak_epoch) = (0u64, 0u64, 0u64);
    let mut t0: Option<u64> = None;
    let mut last_ns = 0u64;
    let stack_filter = !f.modules.is_empty() || !f.functions.is_empty();
    let mut ev = heaplab_trace::Event::default();
    let error = loop {
        match r.read_event(&mut ev) {
            Ok(true) => {}
            Ok(false) => break None,
            Err(e) => break Some(e.to_string()),
        };
        each(&ev);
        t.events += 1;
        let ns = ev.time.saturating_mul(time_unit);
        let rel = ns.saturating_sub(*t0.get_or_insert(ns));
        last_ns = rel;
        let b = timeline.bucket(rel);
        if ev.failed {
            t.failed += 1;
            if let Some(s) = stacks.get_mut(ev.stack as usize) {
                s.failed += 1;
            }
            continue;
        }
        if let Some(old) = ev.old {
            if let Some(o) = objs.remove(old.wrapping_add(1)) {
                let st = &mut stacks[o.stack as usize];
                st.settle(peak_epoch);
                st.live_bytes -= o.size;
                st.live_objects -= 1;
                st.freed += 1;
                let life = rel.saturating_sub(o.time);
                st.lifetime_ns.add(life);
                let temporary = o.thread == ev.thread
                    && ev.thread_seq.saturating_sub(o.seq) <= opts.temporary_within;
                if temporary {
                    st.temporary += 1;
                    st.temporary_bytes = st.temporary_bytes.saturating_add(o.size);
                    t.temporary += 1;
                    t.temporary_bytes = t.temporary_bytes.saturating_add(o.size);
                }
                let v = st.live_bytes;
                timeline.set_stack(b, o.stack, v);
                let fi = thread_at(&mut ts, ev.thread, rel);
                ts[fi].frees += 1;
                if o.thread != u32::MAX {
                    let a = &mut ts[o.thread as usize];
                    a.settle(peak_epoch);
                    a.live_bytes -= o.size;
                    a.lifetimes.add(life);
                    if temporary {
                        a.temporary += 1;
                    }
                    if o.thread != ev.thread {
                        a.freed_by_others += 1;
                        ts[fi].frees_of_others += 1;
                        t.cross_thread_frees += 1;
                    }
                }
                live -= o.size;
                live_objs -= 1;
                t.frees += 1;
            }
        }
        if let Some(id) = ev.id {
            let mut keep = f.from_ns.is_none_or(|x| rel >= x) && f.to_ns.is_none_or(|x| rel <= x);
            if keep && !f.threads.is_empty() {
                let i = ev.thread as usize;
                if thread_ok.len() <= i {
                    thread_ok.resize(i + 1, 0);
                }
                if thread_ok[i] == 0 {
                    let ti = r.threads().iter().find(|x| x.index == ev.thread);
                    thread_ok[i] = if thread_matches(ti, ev.thread, &f.threads) { 1 } else { 2 };
                }
                keep = thread_ok[i] == 1;
            }
            if keep && stack_filter {
                let i = ev.stack as usize;
                if stack_ok.len() <= i {
                    stack_ok.resize(i + 1, 0);
                }
                if stack_ok[i] == 0 {
                    let frames = if ev.stack == 0 { &[][..] } else { r.stack(ev.stack) };
                    let mods = |m: u32| r.module(m).map(|m| (m.path.clone(), m.build_id.clone()));
                    stack_ok[i] = if stack_matches(frames, &mods, f, sym) { 1 } else { 2 };
                }
                keep = stack_ok[i] == 1;
            }
            if !keep {
                t.filtered_out += 1;
                continue;
            }
            let owner = if ev.inherited {
                t.inherited += 1;
                u32::MAX
            } else {
                let i = thread_at(&mut ts, ev.thread, rel);
                let x = &mut ts[i];
                x.settle(peak_epoch);
                x.allocations += 1;
                x.bytes_allocated = x.bytes_allocated.saturating_add(ev.size);
                x.live_bytes += ev.size;
                x.max_live_bytes = x.max_live_bytes.max(x.live_bytes);
                ev.thread
            };
            let si = ev.stack as usize;
            if stacks.len() <= si {
                stacks.resize(si + 1, StackStats::default());
            }
            let st = &mut stacks[si];
            st.settle(peak_epoch);
            st.allocs += 1;
            st.bytes = st.bytes.saturating_add(ev.size);
            st.live_bytes += ev.size;
            st.live_objects += 1;
            st.max_bytes = st.max_bytes.max(st.live_bytes);
            let v = st.live_bytes;
            timeline.set_stack(b, ev.stack, v);
            objs.insert(
                id.wrapping_add(1),
                Obj {
                    stack: ev.stack,
                    thread: owner,
                    size: ev.size,
                    seq: ev.thread_seq,
                    time: rel,
                },
            );
            t.allocations += 1;
            t.bytes_allocated = t.bytes_allocated.saturating_add(ev.size);
            live += ev.size;
            live_objs += 1;
            if live > t.peak_bytes && f.to_ns.is_none_or(|x| rel <= x) {
                t.peak_bytes = live;
                t.peak_objects = live_objs;
                t.peak_ns = rel;
                t.peak_event = ev.index;
                peak_epoch += 1;
            }
        }
        timeline.set_global(b, live);
    };
    for s in &mut stacks {
        s.settle(peak_epoch);
    }
    for (_, o) in objs.iter() {
        if let Some(x) = ts.get_mut(o.thread as usize) {
            x.leaked_objects += 1;
        }
    }
    for (i, x) in ts.iter_mut().enumerate() {
        x.settle(peak_epoch);
        x.leaked_bytes = x.live_bytes;
        x.lifetime_ns = x.lifetimes.percentiles();
        x.index = i as u32;
        if let Some(info) = r.threads().iter().find(|t| t.index == i as u32) {
            x.tid = info.tid;
            x.name = String::from_utf8_lossy(&info.name).into_owned();
            x.parent = info.start.map(|d| d.thread);
        }
    }
    let thread_stats = ts.into_iter().filter(|x| x.seen).collect();
    t.leaked_bytes = live;
    t.leaked_objects = live_objs;
    t.duration_ns = last_ns;
    let frames = (0..stacks.len()).map(|i| r.stack(i as u32).to_vec()).collect();
    let end = r.ends().iter().rev().find(|e| e.reason != heaplab_trace::EndReason::Exec).cloned();
    let end = end.or_else(|| if error.is_none() { r.ends().last().cloned() } else { None });
    Ok(Analysis {
        trace: path.display().to_string(),
        meta: r.meta().clone(),
        end,
        error,
        totals: t,
        stacks,
        frames,
        modules: r.modules().to_vec(),
        threads: r.threads().to_vec(),
        thread_stats,
        timeline,
        first_ns: t0.unwrap_or(0),
        options: opts.clone(),
    })
}

impl Analysis {
    /// The module of a frame: (path, build-id), or None for module 0.
    pub fn module_of(&self, id: u32) -> Option<&Module> {
        let m = self.modules.get((id as usize).checked_sub(1)?)?;
        if m.id == id {
            Some(m)
        } else {
            self.modules.iter().find(|m| m.id == id)
        }
    }
}
