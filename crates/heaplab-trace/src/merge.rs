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
//!
//! Cost (`examples/read-bench.rs`, the 67 M-event one-thread bignum trace
//! of `bench/compare.py`): about 50 ns an event through
//! [`crate::TraceReader::read_event`], 195 before. Queue entries are one
//! cache line; times are interpolated as each stamp is read, with a running
//! quotient (no 128-bit division per event); the thread that stepped keeps
//! the heap's top while its next head is still the least; live objects sit
//! in an open-addressing map of their own; the event is written in place.

use crate::model::{Dep, Event, Kind};
use crate::varint::Cursor;
use std::collections::{HashMap, VecDeque};
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

/// A decoded event waiting to be merged: one cache line. Its `thread_seq`
/// is not kept (the head of a queue is event `events_done` of its thread),
/// nor its round (a round closes for every block read before the one that
/// closes it, so the events of closed rounds are a thread's first
/// `ready_seq`), nor what its release step took out of the map (the
/// stream's `stash`: only the head is ever half done).
#[derive(Debug, Clone, Copy)]
struct Pend {
    time: u64,
    size: u64,
    addr: u64,
    /// realloc: the old address; the memalign family: the alignment.
    x: u64,
    /// The edges: after that many steps of `e?_thread`; 0: none.
    e1_steps: u64,
    e2_steps: u64,
    e1_thread: u32,
    e2_thread: u32,
    stack: u32,
    kind: Kind,
    two: bool,
    stamped: bool,
}

impl Pend {
    /// The edge the head waits on: the release step's, else the event's.
    fn edge(&self, half_done: bool) -> Option<Dep> {
        let (t, n) = if self.two && !half_done {
            (self.e2_thread, self.e2_steps)
        } else {
            (self.e1_thread, self.e1_steps)
        };
        (n != 0).then_some(Dep { thread: t, steps: n })
    }
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
    /// What the head's release step took out of the map.
    stash: Option<Obj>,
    /// Events of closed rounds: the head may merge while `events_done` is below.
    ready_seq: u64,
    events_done: u64,
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

/// A map from u64 keys (never 0, which marks an empty slot) to small
/// values: open addressing, linear probing from a Fibonacci hash's high
/// bits, deletion by backward shift, grown at 70% full. The merge keeps its
/// live objects by address in one, the profile builder and `heaplab stats`
/// theirs by id + 1 ([`IdMap`]): a general hash map cost a fifth of the
/// reader's time.
///
/// `IDS`: the keys are object ids + 1, dense and made in order. Eight
/// consecutive ids then share a home group of eight slots (one cache line of
/// keys, and neighbouring values), the groups scattered by the hash of
/// `id / 8`: a new object's slot is next to the last one's instead of a
/// cache miss, and a short-lived object is looked up in lines still cached.
/// (Plain `id % capacity` would be as local, but a long-lived band of ids
/// would then lie in the path of every id that comes round to it.)
#[derive(Default)]
pub struct KeyMap<V, const IDS: bool = false> {
    keys: Vec<u64>,
    vals: Vec<V>,
    n: usize,
    shift: u32,
}

/// A [`KeyMap`] keyed by object id + 1.
pub type IdMap<V> = KeyMap<V, true>;

impl<V: Copy + Default, const IDS: bool> KeyMap<V, IDS> {
    #[inline]
    fn home(&self, key: u64) -> usize {
        if IDS {
            // the group of key / 8 (the top bits but three), then key % 8 in it
            let g = (key >> 3).wrapping_mul(0x9E37_79B9_7F4A_7C15) >> (self.shift + 3);
            ((g << 3) | (key & 7)) as usize
        } else {
            (key.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> self.shift) as usize
        }
    }

    /// How many keys it holds.
    pub fn len(&self) -> usize {
        self.n
    }

    /// Whether it holds none.
    pub fn is_empty(&self) -> bool {
        self.n == 0
    }

    #[inline]
    pub fn find(&self, key: u64) -> Option<usize> {
        if self.n == 0 || key == 0 {
            return None;
        }
        let mask = self.keys.len() - 1;
        let mut j = self.home(key);
        loop {
            let k = self.keys[j];
            if k == key {
                return Some(j);
            }
            if k == 0 {
                return None;
            }
            j = (j + 1) & mask;
        }
    }

    /// Asks the CPU to bring `key`'s home slot (its key and its value) into
    /// the cache, for a lookup a few events later: the merge's time goes
    /// mostly to these misses on a large live set. A hint only: the map may
    /// grow before the lookup, and nothing is read here.
    #[inline(always)]
    pub fn prefetch(&self, key: u64) {
        #[cfg(target_arch = "x86_64")]
        if !self.keys.is_empty() {
            let j = self.home(key);
            // SAFETY: j < keys.len() == vals.len() (home's shift keeps it
            // below the power-of-two length), so both pointers are in bounds;
            // _mm_prefetch reads nothing and cannot fault, and SSE (which
            // provides it) is in every x86_64 target's baseline.
            unsafe {
                use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
                _mm_prefetch::<_MM_HINT_T0>(self.keys.as_ptr().add(j) as *const i8);
                _mm_prefetch::<_MM_HINT_T0>(self.vals.as_ptr().add(j) as *const i8);
            }
        }
        #[cfg(not(target_arch = "x86_64"))]
        let _ = key;
    }

    #[inline]
    pub fn get(&self, key: u64) -> Option<&V> {
        self.find(key).map(|j| &self.vals[j])
    }

    #[cold]
    fn grow(&mut self) {
        let cap = (self.keys.len() * 2).max(1024);
        let keys = std::mem::replace(&mut self.keys, vec![0; cap]);
        let vals = std::mem::replace(&mut self.vals, vec![V::default(); cap]);
        self.shift = 64 - cap.trailing_zeros();
        self.n = 0;
        for (k, v) in keys.into_iter().zip(vals) {
            if k != 0 {
                self.insert(k, v);
            }
        }
    }

    /// Sets `key`'s object, replacing one already there.
    #[inline(always)]
    pub fn insert(&mut self, key: u64, v: V) {
        if (self.n + 1) * 10 > self.keys.len() * 7 {
            self.grow();
        }
        let mask = self.keys.len() - 1;
        let mut j = self.home(key);
        while self.keys[j] != 0 && self.keys[j] != key {
            j = (j + 1) & mask;
        }
        if self.keys[j] == 0 {
            self.n += 1;
        }
        self.keys[j] = key;
        self.vals[j] = v;
    }

    #[inline(always)]
    pub fn remove(&mut self, key: u64) -> Option<V> {
        let mut i = self.find(key)?;
        let out = self.vals[i];
        let mask = self.keys.len() - 1;
        let mut j = i;
        loop {
            j = (j + 1) & mask;
            let k = self.keys[j];
            if k == 0 {
                break;
            }
            // move slot j into the hole at i unless its home lies in (i, j]
            let home = self.home(k);
            if (j.wrapping_sub(home) & mask) >= (j.wrapping_sub(i) & mask) {
                self.keys[i] = k;
                self.vals[i] = self.vals[j];
                i = j;
            }
        }
        self.keys[i] = 0;
        self.n -= 1;
        Some(out)
    }

    pub fn iter(&self) -> impl Iterator<Item = (u64, V)> + '_ {
        self.keys.iter().zip(&self.vals).filter(|(&k, _)| k != 0).map(|(&k, &v)| (k, v))
    }
}

/// How far ahead in a thread's queue the merge prefetches the live map's
/// slots (measured on python3's trace: the time per event falls until about
/// this distance).
const PREFETCH_AHEAD: usize = 8;

/// The merge state of a version-2 reader.
#[derive(Default)]
pub struct Merge {
    streams: Vec<Stream>,
    round: Option<u64>,
    /// The ready heads, least (time, thread) first: a binary heap by hand,
    /// so that the thread that stepped can keep the top (`next_event`).
    heap: Vec<(u64, u32)>,
    pending: u64,
    live: KeyMap<Obj>,
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

    /// A block of a later round closes the rounds before it: every block
    /// read so far.
    pub fn close_before(&mut self, round: u64) {
        if let Some(r) = self.round {
            if round > r {
                self.close_all();
            }
        }
    }

    /// END, an error, or the end of the file: every round read may merge.
    pub fn close_all(&mut self) {
        for s in &mut self.streams {
            s.ready_seq = s.events_dec;
        }
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
            if self.live.find(addr).is_some() {
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

    /// Decodes one version-2 EVENTS payload into its thread's queue. A bad
    /// block leaves the queue as it was.
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
        let queued = s.q.len();
        let r = decode_rows(s, rows, th, n_threads, n_stacks, most, (tsc_ref, ns_ref, mult));
        let n = match r {
            Ok(n) => n,
            Err(e) => {
                s.q.truncate(queued);
                return Err(e);
            }
        };
        s.bytes_dec += rows.len() as u64;
        self.pending += n;
        self.rows += n;
        self.row_bytes += rows.len() as u64;
        self.round = Some(round);
        self.saw_events = true;
        self.place(th as u32);
        Ok(())
    }

    /// What thread `t`'s head waits for: `(true, None)` ready, `(false,
    /// None)` nothing to merge (empty, or a round not yet closed), `(false,
    /// Some(dep))` blocked on `dep`.
    #[inline]
    fn head_state(&self, t: u32) -> (bool, Option<Dep>) {
        let s = &self.streams[t as usize];
        let Some(p) = s.q.front() else { return (false, None) };
        if s.events_done >= s.ready_seq {
            return (false, None);
        }
        if s.steps_done == 0 {
            if let Some(st) = s.start {
                if self.streams[st.thread as usize].steps_done < st.steps {
                    return (false, Some(st));
                }
            }
        }
        if let Some(e) = p.edge(s.half_done) {
            if self.streams[e.thread as usize].steps_done < e.steps {
                return (false, Some(e));
            }
        }
        (true, None)
    }

    fn heap_up(&mut self, mut i: usize) {
        let x = self.heap[i];
        while i > 0 {
            let p = (i - 1) / 2;
            if x >= self.heap[p] {
                break;
            }
            self.heap[i] = self.heap[p];
            i = p;
        }
        self.heap[i] = x;
    }

    fn heap_down(&mut self, mut i: usize) {
        let x = self.heap[i];
        let n = self.heap.len();
        loop {
            let l = 2 * i + 1;
            if l >= n {
                break;
            }
            let m = if l + 1 < n && self.heap[l + 1] < self.heap[l] { l + 1 } else { l };
            if self.heap[m] >= x {
                break;
            }
            self.heap[i] = self.heap[m];
            i = m;
        }
        self.heap[i] = x;
    }

    fn place(&mut self, t: u32) {
        let s = &self.streams[t as usize];
        if s.in_heap || s.blocked.is_some() {
            return;
        }
        match self.head_state(t) {
            (true, _) => {
                let time = self.streams[t as usize].q.front().map_or(0, |p| p.time);
                self.heap.push((time, t));
                self.heap_up(self.heap.len() - 1);
                self.streams[t as usize].in_heap = true;
            }
            (false, Some(dep)) => self.block(t, dep),
            (false, None) => {}
        }
    }

    fn block(&mut self, t: u32, dep: Dep) {
        self.streams[t as usize].blocked = Some(dep);
        self.streams[dep.thread as usize].waiters.push(t);
    }

    fn place_all(&mut self) {
        for t in 0..self.streams.len() as u32 {
            self.place(t);
        }
    }

    fn wake(&mut self, u: u32) {
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
        let mut ev = Event::default();
        self.next_event_into(&mut ev).then_some(ev)
    }

    /// The next event of the merged order into `ev`, if one is ready (every
    /// field set but `index`; false: `ev` is left in any state). The thread
    /// that stepped keeps the heap's top while its next head is ready and
    /// still the least, so a one-thread trace never moves the heap.
    pub fn next_event_into(&mut self, ev: &mut Event) -> bool {
        while let Some(&(_, t)) = self.heap.first() {
            let s = &mut self.streams[t as usize];
            let p = *s.q.front().expect("a thread in the heap has a head");
            // the map slots of this thread's event PREFETCH_AHEAD on
            if let Some(f) = s.q.get(PREFETCH_AHEAD) {
                if !s.half_done {
                    self.live.prefetch(f.addr);
                    if f.kind == Kind::Realloc {
                        self.live.prefetch(f.x);
                    }
                }
            }
            let got = if p.two && !s.half_done {
                let a = if p.kind == Kind::Realloc { p.x } else { p.addr };
                let failed = p.kind == Kind::Realloc && p.addr == 0 && p.size != 0;
                s.stash = if failed { None } else { self.live.remove(a) };
                s.half_done = true;
                s.steps_done += 1;
                false
            } else {
                s.q.pop_front();
                s.half_done = false;
                let seq = s.events_done;
                let stash = if p.two { s.stash.take() } else { None };
                s.events_done += 1;
                s.steps_done += 1;
                self.pending -= 1;
                self.event(t, &p, seq, stash, ev)
            };
            // t's new head may be later, blocked or absent
            match self.head_state(t) {
                (true, _) => {
                    self.heap[0].0 = self.streams[t as usize].q.front().map_or(0, |p| p.time);
                    if self.heap.len() > 1 {
                        self.heap_down(0);
                    }
                }
                (false, dep) => {
                    let last = self.heap.pop().expect("t is in the heap");
                    if !self.heap.is_empty() {
                        self.heap[0] = last;
                        self.heap_down(0);
                    }
                    self.streams[t as usize].in_heap = false;
                    if let Some(dep) = dep {
                        self.block(t, dep);
                    }
                }
            }
            if !self.streams[t as usize].waiters.is_empty() {
                self.wake(t);
            }
            if got {
                return true;
            }
        }
        false
    }

    /// The event step of thread `t`'s head `p` (its `thread_seq` is `seq`;
    /// `stash`, what its release step took out of the map), into `ev`;
    /// false when it yields none (a free of an address never seen).
    #[inline]
    fn event(&mut self, t: u32, p: &Pend, seq: u64, stash: Option<Obj>, ev: &mut Event) -> bool {
        // field by field: building an Event and moving it costs a memcpy
        ev.kind = p.kind;
        ev.thread = t;
        ev.time = p.time.max(self.last_out);
        ev.size = p.size;
        ev.align = if p.kind.has_align() { p.x } else { 0 };
        ev.id = None;
        ev.old = None;
        ev.old_size = 0;
        ev.stack = p.stack;
        ev.failed = false;
        ev.inherited = false;
        ev.thread_seq = seq;
        ev.old_thread = 0;
        ev.old_seq = 0;
        ev.after = [None, None];
        if p.e1_steps | p.e2_steps != 0 {
            let mut k = 0;
            if p.e2_steps != 0 {
                ev.after[k] = Some(Dep { thread: p.e2_thread, steps: p.e2_steps });
                k += 1;
            }
            if p.e1_steps != 0 {
                ev.after[k] = Some(Dep { thread: p.e1_thread, steps: p.e1_steps });
            }
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
                let Some(o) = self.live.remove(p.addr) else {
                    self.unknown_frees += 1;
                    return false;
                };
                from(ev, &o);
                ev.size = o.size;
            }
            Kind::ReallocFree => {
                let Some(o) = stash else {
                    self.unknown_frees += 1;
                    return false;
                };
                from(ev, &o);
                ev.size = o.size;
            }
            Kind::Realloc if !p.two => create = p.addr,
            Kind::Realloc if p.addr == 0 && p.size != 0 => {
                if let Some(o) = self.live.get(p.x).copied() {
                    from(ev, &o);
                }
            }
            Kind::Realloc if p.addr == 0 => {
                // realloc(p, 0) that released p: realloc_free
                ev.kind = Kind::ReallocFree;
                let Some(o) = stash else {
                    self.unknown_frees += 1;
                    return false;
                };
                from(ev, &o);
                ev.size = o.size;
            }
            Kind::Realloc => {
                match stash {
                    Some(o) => from(ev, &o),
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
                // an address already live had its free unrecorded: that
                // object leaves the map as this one takes its place
                self.live.insert(
                    create,
                    Obj {
                        id,
                        size: p.size,
                        thread: t,
                        seq,
                        stack: p.stack,
                        kind: p.kind.code(),
                        align: ev.align,
                    },
                );
                ev.id = Some(id);
            }
        }
        self.last_out = ev.time;
        true
    }

    /// After the merge ran dry at the end of a trace: what is left waiting.
    /// With `drop_dangling` (END says threads were still inside a hook), a
    /// wait for a step the trace does not hold is dropped and the merge may
    /// go on: returns `Leftover::None` then, with the head placed again.
    pub fn leftover(&mut self, drop_dangling: bool) -> Leftover {
        for t in 0..self.streams.len() {
            let s = &self.streams[t];
            if s.q.is_empty() {
                continue;
            }
            let seq = s.events_done;
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
                    p.e2_steps = 0;
                } else {
                    p.e1_steps = 0;
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
        let mut v: Vec<(u64, Obj)> = self.live.iter().collect();
        v.sort_by_key(|(_, o)| o.id);
        v
    }
}

/// The times of the queued events `q[from..to]` (thread positions `seq`,
/// `seq + 1`, ...), which lie between the stamp `(pe, pt)` and the next one
/// `(ne, nt)`: `pt + (nt - pt) * (i - pe) / (ne - pe)`, floored (`pt` when
/// `nt <= pt`). One division per gap, then a running quotient and
/// remainder: no 128-bit division per event.
fn interpolate(
    q: &mut VecDeque<Pend>,
    from: usize,
    to: usize,
    seq: u64,
    prev: (u64, u64),
    ne: u64,
    nt: u64,
) {
    let (pe, pt) = prev;
    if nt <= pt {
        q.range_mut(from..to).for_each(|p| p.time = pt);
        return;
    }
    let (d, den, k0) = (nt - pt, ne - pe, seq - pe); // 0 < k0, k0 + (to - from) <= den
    let (qd, rd) = (d / den, d % den);
    let (mut v, mut rem) = if k0 == 1 {
        (qd, rd)
    } else {
        let x = u128::from(d) * u128::from(k0);
        ((x / u128::from(den)) as u64, (x % u128::from(den)) as u64)
    };
    for p in q.range_mut(from..to) {
        p.time = pt + v;
        v += qd;
        rem += rd;
        if rem >= den {
            v += 1;
            rem -= den;
        }
    }
}

/// The rows of one EVENTS block of stream `s` (thread `th`), onto its
/// queue; returns the events decoded. On an error the caller truncates
/// the queue; nothing else of `s` it keeps has changed (the ring may have).
fn decode_rows(
    s: &mut Stream,
    rows: &[u8],
    th: u64,
    n_threads: u64,
    n_stacks: u32,
    most: u64,
    clock: (u64, u64, u64),
) -> Result<u64, String> {
    let (tsc_ref, ns_ref, mult) = clock;
    let mut d = Cursor::new(rows);
    let mut dec = std::mem::take(&mut s.dec);
    let r = (|| {
        let seq0 = s.events_dec;
        let base = s.q.len();
        let mut steps = s.steps_dec;
        // time stamps: the last one, if any; the events after it in this
        // block, q[base + fill ..], get their times at the next stamp, or
        // its time at the end of the block
        let mut last = s.stamp;
        let mut fill = 0usize;
        let mut n = 0u64;
        while let Some(op) = d.byte() {
            let i = n;
            let seq = seq0 + i;
            let at = |m: String| format!("thread {th} event {seq} (#{i} of the block): {m}");
            if i == most || i == MAX_BLOCK_EVENTS {
                return Err(format!("more than {MAX_BLOCK_EVENTS} events in one block"));
            }
            let kind = Kind::from_code(op & 0x0f)
                .ok_or_else(|| at(format!("reserved kind {}", op & 0x0f)))?;
            let mut pd = Pend {
                time: 0,
                size: 0,
                addr: 0,
                x: 0,
                e1_steps: 0,
                e2_steps: 0,
                e1_thread: 0,
                e2_thread: 0,
                stack: 0,
                kind,
                two: false,
                stamped: false,
            };
            if op & 0x20 != 0 {
                let dt = d.varint("time").map_err(at)?;
                dec.last_tick = dec.last_tick.wrapping_add(dt);
                pd.time = clock_ns(dec.last_tick, tsc_ref, ns_ref, mult);
                pd.stamped = true;
            }
            if op & 0xc0 != 0 {
                if op & 0x80 != 0 {
                    let e = edge(&mut d, &mut dec).map_err(at)?;
                    (pd.e2_thread, pd.e2_steps) = (e.thread, e.steps);
                }
                if op & 0x40 != 0 {
                    let e = edge(&mut d, &mut dec).map_err(at)?;
                    (pd.e1_thread, pd.e1_steps) = (e.thread, e.steps);
                }
            }
            match kind {
                Kind::Realloc => {
                    pd.x = addr(&mut d, &mut dec, &mut s.ring, Role::Old, "old address")
                        .map_err(at)?;
                    pd.size = d.varint("size").map_err(at)?;
                    pd.addr =
                        addr(&mut d, &mut dec, &mut s.ring, Role::New, "address").map_err(at)?;
                    pd.two = pd.x != 0;
                }
                Kind::Free | Kind::ReallocFree => {
                    if d.peek() == Some(0) {
                        return Err(at(format!("{} of NULL", kind.name())));
                    }
                    pd.addr =
                        addr(&mut d, &mut dec, &mut s.ring, Role::Gone, "address").map_err(at)?;
                    pd.two = kind == Kind::ReallocFree;
                }
                _ => {
                    pd.size = d.varint("size").map_err(at)?;
                    if kind.has_align() {
                        pd.x = d.varint("align").map_err(at)?;
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
            if op & 0xc0 != 0 {
                if op & 0x80 != 0 && !pd.two {
                    return Err(at("EDGE2 on a one-step event".into()));
                }
                for (has, t, n) in [
                    (op & 0x40 != 0, pd.e1_thread, pd.e1_steps),
                    (op & 0x80 != 0, pd.e2_thread, pd.e2_steps),
                ] {
                    if !has {
                        continue;
                    }
                    if u64::from(t) >= n_threads {
                        return Err(at(format!("an edge names thread {t}, which is not defined")));
                    }
                    if u64::from(t) == th {
                        return Err(at("an edge to its own thread".into()));
                    }
                    if n == 0 {
                        return Err(at("an edge after 0 steps".into()));
                    }
                }
            }
            steps += if pd.two { 2 } else { 1 };
            s.q.push_back(pd);
            n += 1;
            if pd.stamped {
                if let Some(prev) = last {
                    let k = i as usize;
                    interpolate(
                        &mut s.q,
                        base + fill,
                        base + k,
                        seq0 + fill as u64,
                        prev,
                        seq,
                        pd.time,
                    );
                }
                last = Some((seq, pd.time));
                fill = n as usize;
            }
        }
        // an event before any stamp of its thread has no time
        let Some((_, pt)) = last else {
            return Err(format!("thread {th} event {seq0}: no time stamp before it"));
        };
        if s.stamp.is_none() && !s.q[base].stamped {
            return Err(format!("thread {th} event {seq0}: no time stamp before it"));
        }
        let end = s.q.len();
        s.q.range_mut(base + fill..end).for_each(|p| p.time = pt); // after the last stamp
        s.stamp = last;
        s.events_dec += n;
        s.steps_dec = steps;
        Ok(n)
    })();
    s.dec = dec;
    r
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

#[inline(always)]
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

#[cfg(test)]
mod tests {
    use super::{IdMap, KeyMap};
    use std::collections::HashMap;

    /// Both hashings against std's map as the oracle: random inserts,
    /// replacements and removals, a long-lived band of ids that later ids
    /// come round to, and removals of keys never there; after every step the
    /// sizes agree, and every so often every key's value.
    fn against_oracle<const IDS: bool>(keys: impl Fn(u64) -> u64) {
        let mut m: KeyMap<u64, IDS> = KeyMap::default();
        let mut o: HashMap<u64, u64> = HashMap::new();
        let mut x = 0x2545_F491_4F6C_DD1Du64;
        let mut rnd = || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        for i in 1..=3000u64 {
            m.insert(keys(i), i); // the band: never removed
            o.insert(keys(i), i);
        }
        let mut next = 3001u64;
        for step in 0..200_000u64 {
            let r = rnd();
            match r % 4 {
                0 | 1 => {
                    let k = keys(next);
                    next += 1;
                    m.insert(k, step);
                    o.insert(k, step);
                }
                2 => {
                    // a recent key, or one never there
                    let k = keys(
                        next.saturating_sub(1 + (r >> 8) % 64).max(3001)
                            + (r >> 40) % 2 * 1_000_000_000,
                    );
                    assert_eq!(m.remove(k), o.remove(&k), "remove {k}");
                }
                _ => {
                    let k = keys(3001 + (r >> 8) % (next - 3000));
                    m.insert(k, !step);
                    o.insert(k, !step);
                }
            }
            assert_eq!(m.len(), o.len());
            if step % 20_000 == 0 {
                for (k, v) in &o {
                    assert_eq!(m.get(*k), Some(v), "key {k}");
                }
                assert_eq!(m.iter().count(), o.len());
            }
        }
        for (k, v) in &o {
            assert_eq!(m.remove(*k), Some(*v));
        }
        assert!(m.is_empty());
    }

    #[test]
    fn the_id_map_agrees_with_a_hash_map() {
        against_oracle::<true>(|i| i);
    }

    #[test]
    fn the_address_map_agrees_with_a_hash_map() {
        against_oracle::<false>(|i| 0x7f00_0000_0000 + i * 48);
    }

    #[test]
    fn consecutive_ids_share_a_group_of_slots() {
        let mut m: IdMap<u8> = IdMap::default();
        m.insert(1, 0); // grown to its first capacity
        let g = m.home(8) / 8;
        assert!((8..16).all(|k| m.home(k) == g * 8 + (k as usize & 7)));
        assert!((0..1024).all(|k| m.home(k) < 1024));
    }
}
