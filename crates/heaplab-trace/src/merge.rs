//! Version 2 of the format: one EVENTS stream per thread, merged here into
//! the one causal order every reader produces (`docs/trace-format.md`,
//! "EVENTS, version 2" and "The merge"). `reader.rs` feeds it blocks; it
//! hands back events with dense object ids.
//!
//! ```text
//!   EVENTS block of thread T ──decode──► T's queue of steps (a realloc of a
//!        (rows: op byte + fields)        non-NULL pointer, and realloc_free,
//!                                        is two: release, then the event)
//!   round closed ──► heap of ready heads, least (time, thread) first
//!                      ready: its round is closed, its edge's source has
//!                      taken that many steps, and (a first step) its
//!                      thread's start edge holds; a blocked head waits on
//!                      its source's list and comes back when it may
//!                 ──► address map (address → id, size, creator) ──► Event
//! ```
//!
//! Invariants: a thread is in the heap at most once, and only when its head
//! is ready; the order depends on the file alone (rounds close only when a
//! later round, END or the end of the file is read, and the merge then runs
//! until nothing is ready before the next block is read). Memory: the live
//! objects, 64 KiB of recent addresses per thread, and the events not yet
//! merged (at most [`MAX_PENDING`]).

use crate::model::{Dep, Event, Kind};
use crate::varint::Cursor;
use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap, VecDeque};
use std::hash::{BuildHasherDefault, Hasher};

/// Allocations and releases an address code may name (`hltrace_enc.h`).
pub const RING: usize = 4096;
const EDGE_SLOTS: usize = 64;
/// Events decoded but not yet merged, over all threads.
pub const MAX_PENDING: u64 = 4 << 20;
/// Events in one block at most.
pub const MAX_BLOCK_EVENTS: u64 = 1 << 20;

/// A multiplicative hash for addresses (the standard SipHash costs more
/// than the rest of the merge).
#[derive(Default)]
pub struct AddrHasher(u64);

impl Hasher for AddrHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0.rotate_left(8) ^ u64::from(b)).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        }
    }
    fn write_u64(&mut self, v: u64) {
        self.0 = (v ^ (v >> 29)).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    }
}

/// A hash map keyed by addresses or ids.
pub type AddrMap<V> = HashMap<u64, V, BuildHasherDefault<AddrHasher>>;

/// A live object: its id, size, and the event that created it.
#[derive(Debug, Clone, Copy, Default)]
pub struct Obj {
    pub id: u64,
    pub size: u64,
    pub thread: u32,
    pub seq: u64,
    pub stack: u32,
    pub kind: u8,
    pub align: u64,
}

#[derive(Debug, Clone, Copy)]
struct Pend {
    time: u64,
    seq: u64,
    round: u64,
    size: u64,
    align: u64,
    old: u64,
    addr: u64,
    e1: Option<Dep>,
    e2: Option<Dep>,
    stack: u32,
    kind: Kind,
    two: bool,
    stamped: bool,
    stash: Option<Obj>,
}

struct Dec {
    prev: u64,
    nalloc: u64,
    nfree: u64,
    last_tick: u64,
    lsrc: [u32; EDGE_SLOTS],
    ln: [u64; EDGE_SLOTS],
}

impl Default for Dec {
    fn default() -> Self {
        Dec {
            prev: 0,
            nalloc: 0,
            nfree: 0,
            last_tick: 0,
            lsrc: [0; EDGE_SLOTS],
            ln: [0; EDGE_SLOTS],
        }
    }
}

#[derive(Default)]
struct Stream {
    events_dec: u64,
    steps_dec: u64,
    bytes_dec: u64,
    dec: Dec,
    ring: Vec<u64>,
    stamp: Option<(u64, u64)>,
    start: Option<Dep>,
    q: VecDeque<Pend>,
    half_done: bool,
    steps_done: u64,
    in_heap: bool,
    blocked: Option<Dep>,
    waiters: Vec<u32>,
}

/// What the merge leaves when it can do no more at the end of a trace.
pub enum Leftover {
    /// Nothing waits.
    None,
    /// A head waits for a step the trace does not hold.
    Dangling(String),
    /// Heads wait for each other.
    Cycle(String),
}

/// The merge state of a version-2 reader.
#[derive(Default)]
pub struct Merge {
    streams: Vec<Stream>,
    round: Option<u64>,
    closed: Option<u64>,
    heap: BinaryHeap<Reverse<(u64, u32)>>,
    pending: u64,
    live: AddrMap<Obj>,
    next_id: u64,
    last_out: u64,
    unknown_frees: u64,
    row_bytes: u64,
    rows: u64,
    saw_events: bool,
}

fn zz_dec(v: u64) -> i64 {
    ((v >> 1) as i64) ^ -((v & 1) as i64)
}

/// Ticks to ns with a block's clock: `ns_ref + (tick - tsc_ref) * mult / 2^32`,
/// signed and floored, clamped to `0..=u64::MAX`.
pub fn clock_ns(tick: u64, tsc_ref: u64, ns_ref: u64, mult: u64) -> u64 {
    let d = i128::from(tick.wrapping_sub(tsc_ref) as i64);
    let v = i128::from(ns_ref) + ((d * i128::from(mult)) >> 32);
    v.clamp(0, i128::from(u64::MAX)) as u64
}

impl Merge {
    /// A thread defined in a THREADS block (version 2), with its start edge.
    pub fn define_thread(&mut self, start: Option<Dep>) {
        self.streams.push(Stream { start, ..Stream::default() });
    }

    /// Threads defined.
    pub fn threads(&self) -> usize {
        self.streams.len()
    }

    /// Objects now live.
    pub fn live(&self) -> usize {
        self.live.len()
    }

    /// Object ids assigned.
    pub fn next_id(&self) -> u64 {
        self.next_id
    }

    /// Frees (and reallocs) of addresses the trace never allocated.
    pub fn unknown_frees(&self) -> u64 {
        self.unknown_frees
    }

    /// Bytes of rows decoded (END's key 11 must say the same).
    pub fn row_bytes(&self) -> u64 {
        self.row_bytes
    }

    /// Rows decoded.
    pub fn rows(&self) -> u64 {
        self.rows
    }

    /// Whether an EVENTS block was read (INHERITED must come before).
    pub fn saw_events(&self) -> bool {
        self.saw_events
    }

    /// The round an EVENTS payload belongs to, if it says.
    pub fn peek_round(p: &[u8]) -> Option<u64> {
        let mut c = Cursor::new(p);
        c.varint("").ok()?;
        c.varint("").ok()
    }

    /// A block of a later round closes the rounds before it.
    pub fn close_before(&mut self, round: u64) {
        if let Some(r) = self.round {
            if round > r {
                self.closed = Some(r);
                self.place_all();
            }
        }
    }

    /// END, an error, or the end of the file: every round may merge.
    pub fn close_all(&mut self) {
        self.closed = Some(self.round.unwrap_or(0));
        self.place_all();
    }

    /// The objects inherited from a fork's parent (an INHERITED block),
    /// as events; `thread 0` must be defined.
    pub fn inherited(&mut self, p: &[u8], n_stacks: usize) -> Result<Vec<Event>, String> {
        if self.saw_events || self.next_id > 0 {
            return Err("it must come before every EVENTS block, once".into());
        }
        if self.streams.is_empty() {
            return Err("thread 0 is not defined".into());
        }
        let mut c = Cursor::new(p);
        let n = c.varint("count")?;
        let time = c.varint("time")?;
        if n > c.remaining() as u64 {
            return Err(format!("{n} entries in {} bytes", c.remaining()));
        }
        let mut out = Vec::with_capacity(n as usize);
        for i in 0..n {
            let at = |m: String| format!("entry {i}: {m}");
            let k = c.varint("kind").map_err(at)?;
            let size = c.varint("size").map_err(at)?;
            let kind = Kind::from_code(k.min(255) as u8)
                .filter(|k| k.creates())
                .ok_or_else(|| at(format!("kind {k} creates no object")))?;
            let align = if kind.has_align() { c.varint("align").map_err(at)? } else { 0 };
            let addr = c.varint("address").map_err(at)?;
            let stack = c.varint("stack").map_err(at)?;
            if addr == 0 {
                return Err(at("address 0".into()));
            }
            if stack > n_stacks as u64 {
                return Err(at(format!("stack {stack} is not defined")));
            }
            if self.live.contains_key(&addr) {
                return Err(at(format!("address {addr:#x} is already live")));
            }
            let id = self.next_id;
            self.next_id += 1;
            self.live.insert(
                addr,
                Obj { id, size, thread: 0, seq: 0, stack: stack as u32, kind: k as u8, align },
            );
            out.push(Event {
                index: 0,
                kind,
                thread: 0,
                time,
                size,
                align,
                id: Some(id),
                old: None,
                old_size: 0,
                stack: stack as u32,
                failed: false,
                inherited: true,
                thread_seq: 0,
                old_thread: 0,
                old_seq: 0,
                after: [None, None],
            });
        }
        if !c.is_empty() {
            return Err(format!("{} bytes after the last entry", c.remaining()));
        }
        self.last_out = time;
        Ok(out)
    }

    /// Decodes one version-2 EVENTS payload into its thread's queue.
    pub fn events(&mut self, p: &[u8], n_stacks: u32) -> Result<(), String> {
        let mut c = Cursor::new(p);
        let th = c.varint("thread")?;
        let round = c.varint("round")?;
        let first = c.varint("first_byte")?;
        let tsc_ref = c.varint("clock tsc_ref")?;
        let ns_ref = c.varint("clock ns_ref")?;
        let mult = c.varint("clock mult")?;
        if th >= self.streams.len() as u64 {
            return Err(format!("thread {th} is not defined"));
        }
        if c.is_empty() {
            return Err("no rows".into());
        }
        if let Some(r) = self.round {
            if round < r {
                return Err(format!("round {round} after round {r} (rounds never go back)"));
            }
        }
        let n_threads = self.streams.len() as u64;
        let s = &mut self.streams[th as usize];
        if first != s.bytes_dec {
            return Err(format!(
                "thread {th}'s block starts at byte {first} of its rows, but {} came before it (a block is missing)",
                s.bytes_dec
            ));
        }
        let rows = &p[c.pos()..];
        let most = (rows.len() as u64 / 2 + 1).min(MAX_BLOCK_EVENTS + 1);
        if self.pending + most > MAX_PENDING + MAX_BLOCK_EVENTS {
            return Err(format!(
                "more than {MAX_PENDING} events wait to be merged (edges to events the trace does not deliver?)"
            ));
        }
        if s.ring.is_empty() {
            s.ring = vec![0; 2 * RING];
        }
        let mut d = Cursor::new(rows);
        let mut dec = std::mem::take(&mut s.dec);
        let mut steps = s.steps_dec;
        let mut out: Vec<Pend> = Vec::new();
        while !d.is_empty() {
            let i = out.len() as u64;
            let seq = s.events_dec + i;
            let at = |m: String| format!("thread {th} event {seq} (#{i} of the block): {m}");
            if i == most || i == MAX_BLOCK_EVENTS {
                return Err(format!("more than {MAX_BLOCK_EVENTS} events in one block"));
            }
            let op = d.take(1, "op")?[0];
            let kind = Kind::from_code(op & 0x0f)
                .ok_or_else(|| at(format!("reserved kind {}", op & 0x0f)))?;
            let mut pd = Pend {
                time: 0,
                seq,
                round,
                size: 0,
                align: 0,
                old: 0,
                addr: 0,
                e1: None,
                e2: None,
                stack: 0,
                kind,
                two: false,
                stamped: false,
                stash: None,
            };
            if op & 0x20 != 0 {
                let dt = d.varint("time").map_err(at)?;
                dec.last_tick = dec.last_tick.wrapping_add(dt);
                pd.time = clock_ns(dec.last_tick, tsc_ref, ns_ref, mult);
                pd.stamped = true;
            }
            if op & 0x80 != 0 {
                pd.e2 = Some(edge(&mut d, &mut dec).map_err(at)?);
            }
            if op & 0x40 != 0 {
                pd.e1 = Some(edge(&mut d, &mut dec).map_err(at)?);
            }
            match kind {
                Kind::Realloc => {
                    pd.old = addr(&mut d, &mut dec, &mut s.ring, Role::Old, "old address")
                        .map_err(at)?;
                    pd.size = d.varint("size").map_err(at)?;
                    pd.addr =
                        addr(&mut d, &mut dec, &mut s.ring, Role::New, "address").map_err(at)?;
                    pd.two = pd.old != 0;
                }
                Kind::Free | Kind::ReallocFree => {
                    if rows.get(d.pos()) == Some(&0) {
                        return Err(at(format!("{} of NULL", kind.name())));
                    }
                    pd.addr =
                        addr(&mut d, &mut dec, &mut s.ring, Role::Gone, "address").map_err(at)?;
                    pd.two = kind == Kind::ReallocFree;
                }
                _ => {
                    pd.size = d.varint("size").map_err(at)?;
                    if kind.has_align() {
                        pd.align = d.varint("align").map_err(at)?;
                    }
                    pd.addr =
                        addr(&mut d, &mut dec, &mut s.ring, Role::New, "address").map_err(at)?;
                }
            }
            if op & 0x10 != 0 {
                let st = d.varint("stack").map_err(at)?;
                if st == 0 || st > u64::from(n_stacks) {
                    return Err(at(format!("stack {st} is not defined")));
                }
                pd.stack = st as u32;
            }
            if op & 0x80 != 0 && !pd.two {
                return Err(at("EDGE2 on a one-step event".into()));
            }
            for e in [pd.e1, pd.e2].into_iter().flatten() {
                if u64::from(e.thread) >= n_threads {
                    return Err(at(format!(
                        "an edge names thread {}, which is not defined",
                        e.thread
                    )));
                }
                if u64::from(e.thread) == th {
                    return Err(at("an edge to its own thread".into()));
                }
                if e.steps == 0 {
                    return Err(at("an edge after 0 steps".into()));
                }
            }
            steps += if pd.two { 2 } else { 1 };
            out.push(pd);
        }
        // times between stamps, interpolated by event index
        let mut last = s.stamp;
        let n = out.len();
        let mut next = 0;
        for i in 0..n {
            if out[i].stamped {
                last = Some((out[i].seq, out[i].time));
                continue;
            }
            let Some((pe, pt)) = last else {
                return Err(format!("thread {th} event {}: no time stamp before it", out[i].seq));
            };
            if next <= i {
                next = i + 1;
                while next < n && !out[next].stamped {
                    next += 1;
                }
            }
            out[i].time = if next < n && out[next].time > pt {
                let span = u128::from(out[next].time - pt) * u128::from(out[i].seq - pe);
                pt + (span / u128::from(out[next].seq - pe)) as u64
            } else {
                pt
            };
        }
        s.stamp = last;
        s.dec = dec;
        s.events_dec += n as u64;
        s.steps_dec = steps;
        s.bytes_dec += rows.len() as u64;
        s.q.extend(out);
        self.pending += n as u64;
        self.rows += n as u64;
        self.row_bytes += rows.len() as u64;
        self.round = Some(round);
        self.saw_events = true;
        self.place(th as u32);
        Ok(())
    }

    fn head_state(&self, t: u32) -> (bool, Option<Dep>) {
        let s = &self.streams[t as usize];
        let Some(p) = s.q.front() else { return (false, None) };
        match self.closed {
            Some(c) if p.round <= c => {}
            _ => return (false, None),
        }
        if s.steps_done == 0 {
            if let Some(st) = s.start {
                if self.streams[st.thread as usize].steps_done < st.steps {
                    return (false, Some(st));
                }
            }
        }
        let e = if p.two && !s.half_done { p.e2 } else { p.e1 };
        if let Some(e) = e {
            if self.streams[e.thread as usize].steps_done < e.steps {
                return (false, Some(e));
            }
        }
        (true, None)
    }

    fn place(&mut self, t: u32) {
        let s = &self.streams[t as usize];
        if s.in_heap || s.blocked.is_some() {
            return;
        }
        match self.head_state(t) {
            (true, _) => {
                let time = self.streams[t as usize].q.front().map_or(0, |p| p.time);
                self.heap.push(Reverse((time, t)));
                self.streams[t as usize].in_heap = true;
            }
            (false, Some(dep)) => {
                self.streams[t as usize].blocked = Some(dep);
                self.streams[dep.thread as usize].waiters.push(t);
            }
            (false, None) => {}
        }
    }

    fn place_all(&mut self) {
        for t in 0..self.streams.len() as u32 {
            self.place(t);
        }
    }

    fn wake(&mut self, u: u32) {
        if self.streams[u as usize].waiters.is_empty() {
            return; // the common case: nobody waits on u
        }
        let list = std::mem::take(&mut self.streams[u as usize].waiters);
        let done = self.streams[u as usize].steps_done;
        let mut keep = Vec::new();
        for t in list {
            let dep = self.streams[t as usize].blocked.expect("a waiter is blocked");
            if done >= dep.steps {
                self.streams[t as usize].blocked = None;
                self.place(t);
            } else {
                keep.push(t);
            }
        }
        self.streams[u as usize].waiters.extend(keep);
    }

    /// The next event of the merged order, if one is ready. `index` is left
    /// for the reader to set.
    pub fn next_event(&mut self) -> Option<Event> {
        while let Some(Reverse((_, t))) = self.heap.pop() {
            let s = &mut self.streams[t as usize];
            s.in_heap = false;
            let out = {
                let half_done = s.half_done;
                let p = s.q.front_mut().expect("a thread in the heap has a head");
                if p.two && !half_done {
                    let a = if p.kind == Kind::Realloc { p.old } else { p.addr };
                    let failed = p.kind == Kind::Realloc && p.addr == 0 && p.size != 0;
                    if !failed {
                        p.stash = self.live.remove(&a);
                    }
                    s.half_done = true;
                    None
                } else {
                    let p = s.q.pop_front().expect("checked above");
                    s.half_done = false;
                    self.pending -= 1;
                    Some(p)
                }
            };
            self.streams[t as usize].steps_done += 1;
            let ev = out.and_then(|p| self.event(t, &p));
            self.place(t);
            self.wake(t);
            if ev.is_some() {
                return ev;
            }
        }
        None
    }

    fn event(&mut self, t: u32, p: &Pend) -> Option<Event> {
        let mut ev = Event {
            index: 0,
            kind: p.kind,
            thread: t,
            time: p.time.max(self.last_out),
            size: p.size,
            align: p.align,
            id: None,
            old: None,
            old_size: 0,
            stack: p.stack,
            failed: false,
            inherited: false,
            thread_seq: p.seq,
            old_thread: 0,
            old_seq: 0,
            after: [None, None],
        };
        for (k, e) in [p.e2, p.e1].into_iter().flatten().enumerate() {
            ev.after[k] = Some(e);
        }
        let from = |ev: &mut Event, o: &Obj| {
            ev.old = Some(o.id);
            ev.old_size = o.size;
            ev.old_thread = o.thread;
            ev.old_seq = o.seq;
        };
        let mut create = 0;
        match p.kind {
            Kind::Free => {
                let Some(o) = self.live.remove(&p.addr) else {
                    self.unknown_frees += 1;
                    return None;
                };
                from(&mut ev, &o);
                ev.size = o.size;
            }
            Kind::ReallocFree => {
                let Some(o) = p.stash else {
                    self.unknown_frees += 1;
                    return None;
                };
                from(&mut ev, &o);
                ev.size = o.size;
            }
            Kind::Realloc if !p.two => create = p.addr,
            Kind::Realloc if p.addr == 0 && p.size != 0 => {
                if let Some(o) = self.live.get(&p.old).copied() {
                    from(&mut ev, &o);
                }
            }
            Kind::Realloc if p.addr == 0 => {
                // realloc(p, 0) that released p: realloc_free
                ev.kind = Kind::ReallocFree;
                let Some(o) = p.stash else {
                    self.unknown_frees += 1;
                    return None;
                };
                from(&mut ev, &o);
                ev.size = o.size;
            }
            Kind::Realloc => {
                match p.stash {
                    Some(o) => from(&mut ev, &o),
                    None => self.unknown_frees += 1, // realloc of a block never seen
                }
                create = p.addr;
            }
            _ => create = p.addr,
        }
        if ev.kind.creates() {
            if create == 0 {
                ev.failed = true;
            } else {
                let id = self.next_id;
                self.next_id += 1;
                self.live.insert(
                    create,
                    Obj {
                        id,
                        size: p.size,
                        thread: t,
                        seq: p.seq,
                        stack: p.stack,
                        kind: p.kind.code(),
                        align: p.align,
                    },
                );
                ev.id = Some(id);
            }
        }
        self.last_out = ev.time;
        Some(ev)
    }

    /// After the merge ran dry at the end of a trace: what is left waiting.
    /// With `drop_dangling` (END says threads were still inside a hook), a
    /// wait for a step the trace does not hold is dropped and the merge may
    /// go on: returns `Leftover::None` then, with the head placed again.
    pub fn leftover(&mut self, drop_dangling: bool) -> Leftover {
        for t in 0..self.streams.len() {
            let s = &self.streams[t];
            let Some(p) = s.q.front() else { continue };
            let seq = p.seq;
            let Some(dep) = s.blocked else {
                return Leftover::Cycle(format!("thread {t} event {seq} cannot be placed"));
            };
            let dangling = dep.steps > self.streams[dep.thread as usize].steps_dec;
            let what = format!(
                "thread {t} event {seq} waits for step {} of thread {}",
                dep.steps, dep.thread
            );
            if dangling && drop_dangling {
                let w = &mut self.streams[dep.thread as usize].waiters;
                w.retain(|&x| x as usize != t);
                let s = &mut self.streams[t];
                s.blocked = None;
                let start = s.steps_done == 0 && s.start == Some(dep);
                let half = s.half_done;
                let p = s.q.front_mut().expect("checked above");
                if start {
                    s.start = None;
                } else if p.two && !half {
                    p.e2 = None;
                } else {
                    p.e1 = None;
                }
                self.place(t as u32);
                return Leftover::None;
            }
            return if dangling { Leftover::Dangling(what) } else { Leftover::Cycle(what) };
        }
        Leftover::None
    }

    /// Whether events still wait (after `leftover` said what they wait for).
    pub fn waiting(&self) -> bool {
        self.streams.iter().any(|s| !s.q.is_empty())
    }

    /// Every live object, oldest first, with its address.
    pub fn live_objects(&self) -> Vec<(u64, Obj)> {
        let mut v: Vec<(u64, Obj)> = self.live.iter().map(|(&a, &o)| (a, o)).collect();
        v.sort_by_key(|(_, o)| o.id);
        v
    }
}

#[derive(Clone, Copy, PartialEq)]
enum Role {
    New,
    Gone,
    Old,
}

fn edge(d: &mut Cursor<'_>, dec: &mut Dec) -> Result<Dep, String> {
    let src = d.varint("edge thread")?;
    let z = d.varint("edge steps")?;
    let k = (src % EDGE_SLOTS as u64) as usize;
    let base = if u64::from(dec.lsrc[k]) == src + 1 { dec.ln[k] } else { 0 };
    let steps = base.wrapping_add(zz_dec(z) as u64);
    dec.lsrc[k] = (src + 1) as u32;
    dec.ln[k] = steps;
    Ok(Dep { thread: src.min(u64::from(u32::MAX)) as u32, steps })
}

fn addr(
    d: &mut Cursor<'_>,
    dec: &mut Dec,
    ring: &mut [u64],
    role: Role,
    what: &str,
) -> Result<u64, String> {
    let code = d.varint(what)?;
    if code == 0 {
        return Ok(0);
    }
    let v = code - 1;
    let val = v >> 2;
    let a = match v & 3 {
        0 => dec.prev.wrapping_add((zz_dec(val) as u64) << 4),
        t @ (1 | 2) => {
            let n = if t == 1 { dec.nalloc } else { dec.nfree };
            if val >= n || val >= RING as u64 {
                return Err(format!(
                    "{what}: names an allocation or release the thread's stream does not hold"
                ));
            }
            let base = if t == 2 { RING } else { 0 };
            ring[base + ((n - 1 - val) as usize & (RING - 1))]
        }
        _ => {
            if val != 0 {
                return Err(format!(
                    "{what}: names an allocation or release the thread's stream does not hold"
                ));
            }
            let z = d.varint(what)?;
            dec.prev.wrapping_add(zz_dec(z) as u64)
        }
    };
    if a == 0 {
        return Err(format!("{what}: an address of 0 written as a delta"));
    }
    dec.prev = a;
    match role {
        Role::New => {
            ring[dec.nalloc as usize & (RING - 1)] = a;
            dec.nalloc += 1;
        }
        Role::Gone => {
            ring[RING + (dec.nfree as usize & (RING - 1))] = a;
            dec.nfree += 1;
        }
        Role::Old => {}
    }
    Ok(a)
}
