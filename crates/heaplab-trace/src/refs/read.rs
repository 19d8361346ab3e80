//! The REFS reader: a trace's events and references merged in execution
//! order, every record checked (`docs/trace-format.md`, section REFS).

use super::{refs_version, tag, unzigzag, usable, v2, IdMap, Ref, RefItem, RefsStats, Target};
use super::{MAX_BLOCK_RECORDS, RECENT, VERSIONS};
use crate::error::{Problem, TraceError};
use crate::format::kind;
use crate::model::{Event, Kind};
use crate::reader::{Item, TraceReader};
use crate::varint::Cursor;
use std::collections::VecDeque;
use std::io::Read;
use std::path::Path;

/// A column of varints, read with the one-byte case inline.
struct Col<'a> {
    d: &'a [u8],
    pos: usize,
    what: &'static str,
}

impl<'a> Col<'a> {
    fn new(d: &'a [u8], what: &'static str) -> Self {
        Col { d, pos: 0, what }
    }

    #[inline(always)]
    fn get(&mut self) -> Result<u64, String> {
        if let Some(&b) = self.d.get(self.pos) {
            if b < 0x80 {
                self.pos += 1;
                return Ok(u64::from(b));
            }
        }
        self.get_slow()
    }

    #[cold]
    #[inline(never)]
    fn get_slow(&mut self) -> Result<u64, String> {
        let mut c = Cursor::new(&self.d[self.pos..]);
        let v = c.varint(self.what)?;
        self.pos += c.pos();
        Ok(v)
    }

    fn is_empty(&self) -> bool {
        self.pos >= self.d.len()
    }

    fn remaining(&self) -> usize {
        self.d.len().saturating_sub(self.pos)
    }
}

/// `Vec::push`, inlined (the decoder pushes one item per record).
#[inline(always)]
fn push_item(v: &mut Vec<RefItem>, item: RefItem) {
    if v.len() == v.capacity() {
        v.reserve(4096);
    }
    // SAFETY: there is spare capacity (reserved just above if there was none);
    // the slot is written once, then counted by set_len.
    unsafe {
        v.as_mut_ptr().add(v.len()).write(item);
        v.set_len(v.len() + 1);
    }
}

/// Reads a trace's events and references merged in execution order.
///
/// Memory is bounded by the live objects, one decoded block, and the events
/// read ahead of their place (at most the events blocks before the REFS block
/// that places them).
pub struct RefsReader<R: Read> {
    tr: TraceReader<R>,
    /// Events read from EVENTS blocks, not yet placed.
    pending: VecDeque<Event>,
    /// Decoded items; those before `out_pos` were handed out.
    out: Vec<RefItem>,
    out_pos: usize,
    /// The block's recent-object list: (id, usable size; 0 once freed).
    recent: [(u64, u64); RECENT],
    recent_len: usize,
    /// Live objects at the current place: id -> size.
    live: IdMap,
    next_id: u64,
    placed: u64,
    records: u64,
    time: u64,
    ended: bool,
    saw_refs: bool,
    /// The trace has been read to its end (events left over are placed last).
    drained: bool,
    /// META says the trace has references: events wait for their place.
    expect_refs: bool,
    /// The REFS encoding META announces (`refs=N`).
    version: u32,
    /// A cut-short error, handed out after the good items.
    deferred: Option<TraceError>,
    stats: RefsStats,
}

impl RefsReader<std::io::BufReader<std::fs::File>> {
    /// Opens a trace file.
    pub fn open(path: impl AsRef<Path>) -> Result<Self, TraceError> {
        Ok(RefsReader::new(TraceReader::open(path)?))
    }
}

impl<R: Read> RefsReader<R> {
    /// Merges the streams of a trace whose header was read.
    pub fn new(mut tr: TraceReader<R>) -> Self {
        tr.keep_refs(true);
        let version = refs_version(tr.meta()).unwrap_or(0);
        let expect_refs = version > 0;
        RefsReader {
            tr,
            pending: VecDeque::new(),
            out: Vec::new(),
            out_pos: 0,
            recent: [(0, 0); RECENT],
            recent_len: 0,
            live: IdMap::default(),
            next_id: 0,
            placed: 0,
            records: 0,
            time: 0,
            ended: false,
            saw_refs: false,
            drained: false,
            expect_refs,
            version,
            deferred: None,
            stats: RefsStats::default(),
        }
    }

    /// The underlying trace reader (META, modules, stacks, threads, ENDs).
    pub fn trace(&self) -> &TraceReader<R> {
        &self.tr
    }

    /// The REFS encoding the trace announces (META options `refs=N`; 0: none).
    pub fn refs_version(&self) -> u32 {
        self.version
    }

    /// Whether the trace announces references (META options `refs=N`).
    pub fn has_refs(&self) -> bool {
        self.expect_refs
    }

    /// Counts of everything handed out or queued so far.
    pub fn stats(&self) -> &RefsStats {
        &self.stats
    }

    /// Objects live at the current place, with their sizes.
    pub fn live_objects(&self) -> &IdMap {
        &self.live
    }

    /// The next item; `Ok(None)` at the end. A trace cut short gives its
    /// items, then the error ([`TraceError::is_cut_short`]).
    pub fn next_item(&mut self) -> Result<Option<RefItem>, TraceError> {
        loop {
            if self.out_pos < self.out.len() {
                let it = std::mem::replace(
                    &mut self.out[self.out_pos],
                    RefItem::End { instructions: 0 },
                );
                self.out_pos += 1;
                return Ok(Some(it));
            }
            self.out.clear();
            self.out_pos = 0;
            if !self.fill()? {
                return Ok(None);
            }
        }
    }

    /// Moves every decoded item into `buf` (after clearing it), decoding one
    /// more block if none is ready; an empty `buf` means the end. This is the
    /// fast way to read: one call per block.
    pub fn next_batch(&mut self, buf: &mut Vec<RefItem>) -> Result<(), TraceError> {
        buf.clear();
        if self.out_pos == self.out.len() {
            self.out.clear();
            self.out_pos = 0;
            while self.out.is_empty() {
                if !self.fill()? {
                    return Ok(());
                }
            }
        }
        if self.out_pos == 0 {
            std::mem::swap(buf, &mut self.out); // no copy: the block's items change hands
        } else {
            buf.extend(self.out.drain(self.out_pos..));
            self.out.clear();
        }
        self.out_pos = 0;
        Ok(())
    }

    fn err(&self, offset: u64, what: String) -> TraceError {
        TraceError::new(
            self.tr.path(),
            offset,
            self.tr.events_read(),
            Problem::Malformed(format!("REFS: {what}")),
        )
    }

    /// Places one event: updates liveness, queues it.
    fn place(&mut self, e: Event, time: u64) {
        let releases = e.kind.is_release() || (e.kind == Kind::Realloc && !e.failed);
        if let (true, Some(o)) = (releases, e.old) {
            self.live.remove(&o);
            for r in &mut self.recent[..self.recent_len] {
                if r.0 == o {
                    r.1 = 0;
                }
            }
        }
        if let Some(id) = e.id {
            self.live.insert(id, e.size);
            self.next_id = id + 1;
        }
        self.placed += 1;
        self.out.push(RefItem::Event { event: Box::new(e), time });
    }

    /// Decodes more: returns false at the end.
    fn fill(&mut self) -> Result<bool, TraceError> {
        if let Some(e) = self.deferred.take() {
            self.drained = true;
            return Err(e);
        }
        if self.drained {
            return Ok(false);
        }
        loop {
            match self.tr.next_item() {
                Ok(Some(Item::Event(e))) => {
                    if self.expect_refs && !self.ended {
                        self.pending.push_back(e);
                    } else {
                        let t = self.time;
                        self.place(e, t);
                        return Ok(true);
                    }
                }
                Ok(Some(Item::Skipped { kind: k, .. })) if k == kind::REFS => {
                    let at = self.tr.position();
                    if !self.expect_refs {
                        return Err(self.err(
                            at,
                            "a REFS block in a trace whose META options do not say refs=N".into(),
                        ));
                    }
                    let (at, payload) =
                        self.tr.take_refs().ok_or_else(|| self.err(at, "payload lost".into()))?;
                    self.saw_refs = true;
                    self.decode(at, &payload)?;
                    return Ok(true);
                }
                Ok(Some(_)) => {}
                Ok(None) => {
                    // the end: events never placed happened after the last reference
                    self.drained = true;
                    let any = !self.pending.is_empty();
                    self.place_pending();
                    return Ok(any);
                }
                Err(e) if e.is_cut_short() => {
                    // hand out every good item first, then the error
                    self.place_pending();
                    self.deferred = Some(e);
                    return Ok(true);
                }
                Err(e) => return Err(e),
            }
        }
    }

    fn place_pending(&mut self) {
        while let Some(ev) = self.pending.pop_front() {
            let t = self.time;
            self.place(ev, t);
        }
    }

    fn decode(&mut self, at: u64, p: &[u8]) -> Result<(), TraceError> {
        let mut c = Cursor::new(p);
        let hdr = (|| -> Result<[u64; 5], String> {
            Ok([
                c.varint("record count")?,
                c.varint("first_record")?,
                c.varint("first_event")?,
                c.varint("first_id")?,
                c.varint("base_time")?,
            ])
        })()
        .map_err(|m| self.err(at, m))?;
        let [n, first_record, first_event, first_id, base_time] = hdr;
        if n == 0 || n > MAX_BLOCK_RECORDS {
            return Err(
                self.err(at, format!("{n} records in one block; 1..={MAX_BLOCK_RECORDS} allowed"))
            );
        }
        if self.ended {
            return Err(self.err(at, "a REFS block after the END record".into()));
        }
        if first_record != self.records {
            return Err(self.err(
                at,
                format!("block starts at record {first_record}, but {} records came before it (a block is missing)", self.records),
            ));
        }
        if first_event != self.placed || first_id != self.next_id {
            return Err(self.err(
                at,
                format!(
                    "block starts after event {first_event} / object {first_id}, but {} events / {} objects were placed before it",
                    self.placed, self.next_id
                ),
            ));
        }
        if base_time != self.time {
            return Err(self.err(
                at,
                format!(
                    "block base time {base_time}, but the previous record was at {}",
                    self.time
                ),
            ));
        }
        let cols = (|| -> Result<[&[u8]; 7], String> {
            Ok([
                c.bytes("tags column")?,
                c.bytes("times column")?,
                c.bytes("objs column")?,
                c.bytes("offs column")?,
                c.bytes("addrs column")?,
                c.bytes("sizes column")?,
                c.bytes("counts column")?,
            ])
        })()
        .map_err(|m| self.err(at, m))?;
        if !c.is_empty() {
            return Err(self.err(at, format!("{} bytes after the last column", c.remaining())));
        }
        let mut k = Cols {
            times: Col::new(cols[1], "time"),
            objs: Col::new(cols[2], "object"),
            offs: Col::new(cols[3], "offset"),
            addrs: Col::new(cols[4], "address"),
            sizes: Col::new(cols[5], "size"),
            counts: Col::new(cols[6], "event count"),
        };
        self.recent_len = 0;
        self.out.reserve(n as usize);
        let time = match self.version {
            1 => self.records_v1(at, n, cols[0], &mut k)?,
            2 => self.records_v2(at, n, cols[0], &mut k)?,
            v => {
                return Err(self.err(
                    at,
                    format!(
                        "REFS encoding version {v} (META refs={v}); this heaplab reads versions {VERSIONS:?}"
                    ),
                ))
            }
        };
        for (name, cur) in [
            ("times", &k.times),
            ("objs", &k.objs),
            ("offs", &k.offs),
            ("addrs", &k.addrs),
            ("sizes", &k.sizes),
            ("counts", &k.counts),
        ] {
            if !cur.is_empty() {
                return Err(
                    self.err(at, format!("{} unused bytes in the {name} column", cur.remaining()))
                );
            }
        }
        self.records += n;
        self.time = time;
        Ok(())
    }

    /// The object a heap record names (object code `code`: an entry of the
    /// recent-object list, or 3: the `objs` column), checked live and
    /// `offset` inside it.
    #[inline(always)]
    fn heap_target(&mut self, code: usize, objs: &mut Col, offset: u64) -> Result<Target, String> {
        let (id, us) = if code < RECENT {
            if code >= self.recent_len {
                return Err(format!(
                    "object code {code}, but the recent-object list holds {}",
                    self.recent_len
                ));
            }
            let e = self.recent[code];
            self.recent.copy_within(0..code, 1);
            self.recent[0] = e;
            e
        } else {
            let d = objs.get()?;
            if d >= self.next_id {
                return Err(format!("object ref {d} points before object 0"));
            }
            let id = self.next_id - 1 - d;
            let us = self.live.get(&id).map_or(0, |&s| usable(s));
            self.recent.copy_within(0..RECENT - 1, 1);
            self.recent[0] = (id, us);
            self.recent_len = (self.recent_len + 1).min(RECENT);
            (id, us)
        };
        if us == 0 {
            return Err(format!("reference to object {id}, which is not live"));
        }
        if offset >= us {
            let osize = self.live.get(&id).copied().unwrap_or(0);
            return Err(format!("offset {offset} in object {id} of {osize} bytes (usable {us})"));
        }
        Ok(Target::Object { id, offset })
    }

    /// An EVENTS record: the next `k` events happened at `time`.
    fn place_events(&mut self, k: u64, time: u64) -> Result<(), String> {
        if (self.pending.len() as u64) < k {
            return Err(format!(
                "places {k} events from event {}, but only {} were read before this block",
                self.placed,
                self.pending.len()
            ));
        }
        for _ in 0..k {
            let ev = self.pending.pop_front().expect("counted above");
            self.place(ev, time);
        }
        self.stats.events_placed += k;
        Ok(())
    }

    /// The END record, at `time`.
    fn end_record(&mut self, sub: u8, end: u8, time: u64) -> Result<(), String> {
        if sub != end {
            return Err(format!("reserved special record {sub}"));
        }
        self.ended = true;
        self.stats.instructions = Some(time);
        self.out.push(RefItem::End { instructions: time });
        Ok(())
    }

    /// Version 1's records (a tag byte each, varints in the columns).
    /// Returns the time of the last record.
    fn records_v1(
        &mut self,
        at: u64,
        n: u64,
        tags: &[u8],
        k: &mut Cols,
    ) -> Result<u64, TraceError> {
        if tags.len() as u64 != n {
            return Err(
                self.err(at, format!("tags column holds {} bytes for {n} records", tags.len()))
            );
        }
        let mut last_addr = [0u64; 2];
        let mut time = self.time;
        let base = self.records;
        for (i, &t) in tags.iter().enumerate() {
            let at_rec = |m: String| format!("record {} (#{i} of the block): {m}", base + i as u64);
            let r = (|| -> Result<(), String> {
                if self.ended {
                    return Err("a record after the END record".into());
                }
                let dt = k.times.get()?;
                time = time.checked_add(dt).ok_or("time overflows")?;
                match t & 3 {
                    tag::HEAP | tag::OTHER => {
                        let sc = (t >> 3) & 7;
                        let size = if sc == tag::SIZE_EXPLICIT {
                            explicit_size(k.sizes.get()?)?
                        } else {
                            1u32 << sc
                        };
                        let write = t & tag::WRITE != 0;
                        let target = if t & 3 == tag::HEAP {
                            let offset = k.offs.get()?;
                            self.heap_target((t >> 6) as usize, &mut k.objs, offset)?
                        } else {
                            if t >> 7 != 0 {
                                return Err(format!(
                                    "reserved bit 7 in an other record ({t:#04x})"
                                ));
                            }
                            let r = ((t >> 6) & 1) as usize;
                            let z = k.addrs.get()?;
                            last_addr[r] = last_addr[r].wrapping_add(unzigzag(z));
                            Target::Other { addr: last_addr[r] }
                        };
                        let r = Ref { time, size, write, target };
                        self.stats.count(&r);
                        push_item(&mut self.out, RefItem::Ref(r));
                    }
                    tag::EVENTS => {
                        let c6 = t >> 2;
                        let n = if c6 == tag::COUNT_EXPLICIT {
                            64 + k.counts.get()?
                        } else {
                            u64::from(c6) + 1
                        };
                        self.place_events(n, time)?;
                    }
                    _ => self.end_record(t >> 2, tag::END, time)?,
                }
                Ok(())
            })();
            r.map_err(|m| self.err(at, at_rec(m)))?;
        }
        Ok(time)
    }

    /// Version 2's records (version 1's, with small time deltas in the
    /// tag). Returns the time of the last record.
    fn records_v2(
        &mut self,
        at: u64,
        n: u64,
        tags: &[u8],
        k: &mut Cols,
    ) -> Result<u64, TraceError> {
        if tags.len() as u64 != n {
            return Err(
                self.err(at, format!("tags column holds {} bytes for {n} records", tags.len()))
            );
        }
        let mut reg = [0u64; 2];
        let mut time = self.time;
        let base = self.records;
        for (i, &t) in tags.iter().enumerate() {
            let at_rec = |m: String| format!("record {} (#{i} of the block): {m}", base + i as u64);
            let r = (|| -> Result<(), String> {
                if self.ended {
                    return Err("a record after the END record".into());
                }
                let ty = t & 3;
                let dt = match ty {
                    v2::HEAP if t & v2::HEAP_TIME1 != 0 => 1,
                    v2::OTHER if t >> 6 != 0 => u64::from(t >> 6),
                    _ => k.times.get()?,
                };
                time = time.checked_add(dt).ok_or("time overflows")?;
                match ty {
                    v2::HEAP | v2::OTHER => {
                        let size = match v2::SIZE_OF_CODE.get(usize::from(t >> 3 & 3)) {
                            Some(&s) => s,
                            None => explicit_size(k.sizes.get()?)?,
                        };
                        let target = if ty == v2::HEAP {
                            let offset = k.offs.get()?;
                            self.heap_target(usize::from(t >> 5 & 3), &mut k.objs, offset)?
                        } else {
                            let r = usize::from(t & v2::REGISTER != 0);
                            reg[r] = reg[r].wrapping_add(unzigzag(k.addrs.get()?));
                            Target::Other { addr: reg[r] }
                        };
                        let r = Ref { time, size, write: t & v2::STORE != 0, target };
                        self.stats.count(&r);
                        push_item(&mut self.out, RefItem::Ref(r));
                    }
                    v2::EVENTS => {
                        let c6 = t >> 2;
                        let n = if c6 == v2::COUNT_EXPLICIT {
                            64 + k.counts.get()?
                        } else {
                            u64::from(c6) + 1
                        };
                        self.place_events(n, time)?;
                    }
                    _ => self.end_record(t >> 2, v2::END, time)?,
                }
                Ok(())
            })();
            r.map_err(|m| self.err(at, at_rec(m)))?;
        }
        Ok(time)
    }
}

/// The columns of a block after its tags.
struct Cols<'a> {
    times: Col<'a>,
    objs: Col<'a>,
    offs: Col<'a>,
    addrs: Col<'a>,
    sizes: Col<'a>,
    counts: Col<'a>,
}

/// An explicit size, checked.
fn explicit_size(s: u64) -> Result<u32, String> {
    if s == 0 || s > u64::from(u32::MAX) {
        return Err(format!("access size {s}"));
    }
    Ok(s as u32)
}
