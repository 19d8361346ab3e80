//! The streaming reader, for versions 1 and 2. It decodes one block at a
//! time and keeps only what later blocks may refer to: the module, stack and
//! thread tables, the live objects, and (version 2) the events of rounds not
//! yet merged (`merge.rs`). Its memory is therefore bounded by the live
//! objects, the distinct stacks and a round, never by the file size.
//!
//! Version 2 events come out in the merged order; definitions come out as
//! their blocks are read, always before the events that use them. Before an
//! error in a version-2 trace is returned, every event of the good blocks
//! before it that the merge can place is handed out.

use crate::block::{checksum, BlockHeader};
use crate::error::{Problem, TraceError};
use crate::format::{
    codec, end_key, kind, meta_key, op, BLOCK_FLAGS_KNOWN, BLOCK_HEADER_LEN, BLOCK_MAGIC,
    BLOCK_SKIPPABLE, FILE_HEADER_LEN, FILE_MAGIC, MAX_BLOCK_EVENTS, MAX_BLOCK_LEN, MAX_FRAMES,
    VERSION_MAX,
};
use crate::merge::{AddrMap, Leftover, Merge, Obj};
use crate::model::{Dep, End, EndReason, Event, Frame, Kind, Meta, Module, ThreadInfo};
use crate::varint::Cursor;
use std::collections::VecDeque;
use std::fs::File;
use std::io::{self, BufReader, Read};
use std::path::{Path, PathBuf};

/// One thing read from a trace, in file order.
#[derive(Debug, Clone, PartialEq)]
pub enum Item {
    Module(Module),
    /// A stack was defined; its frames are in [`TraceReader::stack`].
    Stack(u32),
    Thread(ThreadInfo),
    Event(Event),
    End(End),
    /// A block of an unknown stream that was marked skippable.
    Skipped {
        kind: u8,
        bytes: u32,
    },
}

/// What a version-2 reader does once the merge runs dry.
enum Wait {
    /// Hand out END (read at this offset).
    End(End, u64),
    /// Report this error (events of good blocks first).
    Error(TraceError),
    /// The file ended at this offset without END.
    Eof(u64),
}

/// Reads a trace item by item or event by event.
pub struct TraceReader<R: Read = BufReader<File>> {
    src: R,
    path: PathBuf,
    version: u16,
    /// Offset of the next block header.
    pos: u64,
    block_no: u32,
    meta: Meta,
    modules: Vec<Module>,
    stacks: Vec<Vec<Frame>>,
    threads: Vec<ThreadInfo>,
    ends: Vec<End>,
    last_was_end: bool,
    /// Events decoded from good blocks (all of them handed out before the next block is read).
    decoded: u64,
    next_id: u64,
    time: u64,
    /// Version 1: live objects by id.
    live: AddrMap<Obj>,
    /// Version 1: events of each thread so far (their `thread_seq`).
    seqs: Vec<u64>,
    /// Version 2: the per-thread streams and their merge.
    merge: Merge,
    wait: Option<Wait>,
    /// Events handed out.
    handed: u64,
    queue: VecDeque<Item>,
    stored: Vec<u8>,
    raw: Vec<u8>,
    zstd: Option<zstd::bulk::Decompressor<'static>>,
    done: bool,
    /// Hand REFS payloads to [`TraceReader::take_refs`] (see `refs.rs`).
    keep_refs: bool,
    /// The payload of the last REFS block read, with its offset.
    refs: Option<(u64, Vec<u8>)>,
}

impl TraceReader<BufReader<File>> {
    /// Opens a trace file and reads its header and META block.
    pub fn open(path: impl AsRef<Path>) -> Result<Self, TraceError> {
        let path = path.as_ref();
        let f = File::open(path).map_err(|e| TraceError::new(path, 0, 0, Problem::Io(e)))?;
        TraceReader::new(BufReader::with_capacity(1 << 20, f), path)
    }
}

/// Reads until `buf` is full or the source ends; returns the bytes read.
fn read_full<R: Read>(r: &mut R, buf: &mut [u8]) -> io::Result<usize> {
    let mut n = 0;
    while n < buf.len() {
        match r.read(&mut buf[n..]) {
            Ok(0) => break,
            Ok(k) => n += k,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(n)
}

impl<R: Read> TraceReader<R> {
    /// Reads a trace from any byte source; `path` is used in messages.
    pub fn new(mut src: R, path: impl AsRef<Path>) -> Result<Self, TraceError> {
        let path = path.as_ref().to_path_buf();
        let mut h = [0u8; FILE_HEADER_LEN];
        let n = read_full(&mut src, &mut h)
            .map_err(|e| TraceError::new(&path, 0, 0, Problem::Io(e)))?;
        if n < 8 || h[..8] != FILE_MAGIC {
            return Err(TraceError::new(&path, 0, 0, Problem::NotATrace));
        }
        if n < FILE_HEADER_LEN {
            return Err(TraceError::new(
                &path,
                n as u64,
                0,
                Problem::Truncated(format!("file header: {n} of {FILE_HEADER_LEN} bytes")),
            ));
        }
        let version = u16::from_le_bytes([h[8], h[9]]);
        if version == 0 || version > VERSION_MAX {
            return Err(TraceError::new(&path, 8, 0, Problem::Version(version)));
        }
        let hlen = u16::from_le_bytes([h[10], h[11]]);
        let flags = u32::from_le_bytes([h[12], h[13], h[14], h[15]]);
        if hlen as usize != FILE_HEADER_LEN || flags != 0 {
            return Err(TraceError::new(
                &path,
                10,
                0,
                Problem::Malformed(format!(
                    "file header size {hlen} / flags {flags:#x}; v{version} has 16 / 0"
                )),
            ));
        }
        let mut r = TraceReader {
            src,
            path,
            version,
            pos: FILE_HEADER_LEN as u64,
            block_no: 0,
            meta: Meta::default(),
            modules: Vec::new(),
            stacks: Vec::new(),
            threads: Vec::new(),
            ends: Vec::new(),
            last_was_end: false,
            decoded: 0,
            next_id: 0,
            time: 0,
            live: AddrMap::default(),
            seqs: Vec::new(),
            merge: Merge::default(),
            wait: None,
            handed: 0,
            queue: VecDeque::new(),
            stored: Vec::new(),
            raw: Vec::new(),
            zstd: None,
            done: false,
            keep_refs: false,
            refs: None,
        };
        match r.read_block()? {
            Some(h) if h.kind == kind::META => {
                let raw = std::mem::take(&mut r.raw);
                r.meta = parse_meta(&raw)
                    .map_err(|m| r.err_at(FILE_HEADER_LEN as u64, Problem::Malformed(m)))?;
                r.raw = raw;
            }
            Some(h) => {
                return Err(r.err_at(
                    FILE_HEADER_LEN as u64,
                    Problem::Malformed(format!("first block is {}, not META", kind::name(h.kind))),
                ))
            }
            None => return Err(r.err_at(FILE_HEADER_LEN as u64, Problem::CutShort)),
        }
        Ok(r)
    }

    /// The header fields.
    pub fn meta(&self) -> &Meta {
        &self.meta
    }

    /// The file's format version (1 or 2).
    pub fn version(&self) -> u16 {
        self.version
    }

    /// The file name used in messages.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Modules defined so far (id `i` is at index `i - 1`).
    pub fn modules(&self) -> &[Module] {
        &self.modules
    }

    /// A module by id.
    pub fn module(&self, id: u32) -> Option<&Module> {
        id.checked_sub(1).and_then(|i| self.modules.get(i as usize))
    }

    /// The frames of a stack defined so far (id 0 and unknown ids: empty).
    pub fn stack(&self, id: u32) -> &[Frame] {
        id.checked_sub(1).and_then(|i| self.stacks.get(i as usize)).map_or(&[], |v| v.as_slice())
    }

    /// Number of stacks defined so far.
    pub fn stack_count(&self) -> usize {
        self.stacks.len()
    }

    /// Threads defined so far.
    pub fn threads(&self) -> &[ThreadInfo] {
        &self.threads
    }

    /// END blocks read so far (more than one after a failed exec).
    pub fn ends(&self) -> &[End] {
        &self.ends
    }

    /// Events handed out so far.
    pub fn events_read(&self) -> u64 {
        self.handed
    }

    /// How many objects are live now.
    pub fn live_objects(&self) -> usize {
        if self.version >= 2 {
            self.merge.live()
        } else {
            self.live.len()
        }
    }

    /// Version 2: the live objects with their addresses, oldest first (what
    /// a fork child inherits).
    pub fn live_addresses(&self) -> Vec<(u64, Obj)> {
        self.merge.live_objects()
    }

    /// Version 2: frees of addresses the trace never allocated (not events).
    pub fn unknown_frees(&self) -> u64 {
        self.merge.unknown_frees()
    }

    /// Byte offset of the next unread block.
    pub fn position(&self) -> u64 {
        self.pos
    }

    /// Keep the payload of each REFS block for [`Self::take_refs`]. Without
    /// this a REFS block reads as [`Item::Skipped`], as in any v1 reader;
    /// with it, it still does, and its payload waits to be taken.
    /// [`crate::refs::RefsReader`] does this.
    pub fn keep_refs(&mut self, keep: bool) {
        self.keep_refs = keep;
    }

    /// The payload of the REFS block just skipped (its `Item::Skipped` was the
    /// last item handed out), with the block's byte offset.
    pub fn take_refs(&mut self) -> Option<(u64, Vec<u8>)> {
        self.refs.take()
    }

    fn err_at(&self, offset: u64, problem: Problem) -> TraceError {
        let n = if self.version >= 2 { self.handed } else { self.decoded };
        TraceError::new(&self.path, offset, n, problem)
    }

    /// The next item, `Ok(None)` at a clean end. A trace without END gives
    /// `Err` with [`Problem::CutShort`] after its last item.
    pub fn next_item(&mut self) -> Result<Option<Item>, TraceError> {
        loop {
            if let Some(mut it) = self.queue.pop_front() {
                if let Item::Event(e) = &mut it {
                    e.index = self.handed;
                    self.handed += 1;
                }
                return Ok(Some(it));
            }
            if self.version >= 2 {
                if let Some(mut e) = self.merge.next_event() {
                    e.index = self.handed;
                    self.handed += 1;
                    return Ok(Some(Item::Event(e)));
                }
                if self.wait.is_some() {
                    if let Some(r) = self.settle() {
                        return r;
                    }
                    continue;
                }
            }
            if self.done {
                return Ok(None);
            }
            let at = self.pos;
            let r = match self.read_block() {
                Ok(Some(h)) => self.decode_block(h, at),
                Ok(None) if self.version >= 2 && !self.last_was_end => {
                    self.wait = Some(Wait::Eof(at));
                    self.merge.close_all();
                    continue;
                }
                Ok(None) => {
                    self.done = true;
                    if self.last_was_end {
                        return Ok(None);
                    }
                    return Err(self.err_at(at, Problem::CutShort));
                }
                Err(e) => Err(e),
            };
            if let Err(e) = r {
                if self.version < 2 {
                    return Err(e);
                }
                // hand out what the good blocks hold, then the error
                self.wait = Some(Wait::Error(e));
                self.merge.close_all();
            }
        }
    }

    /// Version 2: the merge ran dry with an END, an error or the end of the
    /// file waiting. None: merge on (a dangling wait was dropped); else what
    /// next_item returns.
    fn settle(&mut self) -> Option<Result<Option<Item>, TraceError>> {
        let drop = matches!(&self.wait, Some(Wait::End(e, _)) if e.inflight > 0);
        let left = self.merge.leftover(drop);
        if matches!(left, Leftover::None) && self.merge.waiting() && drop {
            return None;
        }
        match self.wait.take().expect("called with a wait") {
            Wait::End(mut e, at) => {
                let what = match left {
                    Leftover::Dangling(w) => Some(format!("{w}, which the trace does not hold")),
                    Leftover::Cycle(w) => Some(format!("the edges form a cycle ({w})")),
                    Leftover::None => None,
                };
                if let Some(w) = what {
                    self.done = true;
                    return Some(Err(self.err_at(at, Problem::Malformed(format!("END: {w}")))));
                }
                e.events = self.handed;
                e.objects = self.merge.next_id();
                e.unknown_frees = self.merge.unknown_frees();
                self.ends.push(e.clone());
                Some(Ok(Some(Item::End(e))))
            }
            Wait::Error(mut err) => {
                self.done = true;
                err.events_read = self.handed;
                Some(Err(err))
            }
            Wait::Eof(at) => {
                self.done = true;
                Some(Err(self.err_at(at, Problem::CutShort)))
            }
        }
    }

    /// The next event, skipping definitions. Same end rules as [`Self::next_item`].
    pub fn next_event(&mut self) -> Result<Option<Event>, TraceError> {
        let mut e = Event::default();
        Ok(self.read_event(&mut e)?.then_some(e))
    }

    /// The next event into `ev`, skipping definitions: `Ok(true)` when one
    /// was read, `Ok(false)` at a clean end (`ev` then in any state). Same
    /// end rules as [`Self::next_item`]. The fastest way through a trace:
    /// the event is written in place, never moved.
    #[inline]
    pub fn read_event(&mut self, ev: &mut Event) -> Result<bool, TraceError> {
        loop {
            // version 2's common case, as next_item begins, without the
            // event going into an Item and out again
            if self.version >= 2 && self.queue.is_empty() && self.merge.next_event_into(ev) {
                ev.index = self.handed;
                self.handed += 1;
                return Ok(true);
            }
            match self.next_item()? {
                Some(Item::Event(e)) => {
                    *ev = e;
                    return Ok(true);
                }
                Some(_) => {}
                None => return Ok(false),
            }
        }
    }

    /// Reads one block into `self.raw`; `None` at end of file on a block boundary.
    fn read_block(&mut self) -> Result<Option<BlockHeader>, TraceError> {
        let at = self.pos;
        let mut hb = [0u8; BLOCK_HEADER_LEN];
        let n = read_full(&mut self.src, &mut hb).map_err(|e| self.err_at(at, Problem::Io(e)))?;
        if n == 0 {
            return Ok(None);
        }
        if self.last_was_end && self.end_reason_now().is_some_and(|r| r != EndReason::Exec) {
            // Not a cut: the recording ended, and something else follows.
            return Err(self.err_at(
                at,
                Problem::Malformed(format!(
                    "trailing data after the END block ({n}{} bytes)",
                    if n == BLOCK_HEADER_LEN { " or more" } else { "" }
                )),
            ));
        }
        if n < BLOCK_HEADER_LEN {
            return Err(self.err_at(
                at,
                Problem::Truncated(format!("block header: {n} of {BLOCK_HEADER_LEN} bytes")),
            ));
        }
        if hb[..4] != BLOCK_MAGIC {
            return Err(self.err_at(at, Problem::BadBlockMagic));
        }
        let h = BlockHeader::parse(&hb);
        if h.stored_len > MAX_BLOCK_LEN || h.raw_len > MAX_BLOCK_LEN {
            return Err(self.err_at(
                at,
                Problem::AbsurdLength(format!(
                    "block claims {} stored / {} raw bytes; the limit is {MAX_BLOCK_LEN}",
                    h.stored_len, h.raw_len
                )),
            ));
        }
        self.stored.clear();
        let got = (&mut self.src)
            .take(u64::from(h.stored_len))
            .read_to_end(&mut self.stored)
            .map_err(|e| self.err_at(at, Problem::Io(e)))?;
        if got < h.stored_len as usize {
            return Err(self.err_at(
                at,
                Problem::Truncated(format!(
                    "{} block: header says {} payload bytes, only {got} remain",
                    kind::name(h.kind),
                    h.stored_len
                )),
            ));
        }
        self.pos += (BLOCK_HEADER_LEN + got) as u64;
        let crc = checksum(&hb, &self.stored);
        if crc != h.crc {
            return Err(
                self.err_at(at, Problem::Checksum { kind: h.kind, stored: h.crc, computed: crc })
            );
        }
        if h.number != self.block_no {
            return Err(self.err_at(
                at,
                Problem::Malformed(format!(
                    "block number {} where {} was expected (a block is missing or out of order)",
                    h.number, self.block_no
                )),
            ));
        }
        if h.flags & !BLOCK_FLAGS_KNOWN != 0 {
            return Err(self.err_at(
                at,
                Problem::Malformed(format!(
                    "{} block has reserved flag bits set (flags {:#06x})",
                    kind::name(h.kind),
                    h.flags
                )),
            ));
        }
        self.block_no += 1;
        match h.codec {
            codec::NONE => {
                if h.raw_len != h.stored_len {
                    return Err(self.err_at(
                        at,
                        Problem::Malformed("stored block with raw length ≠ stored length".into()),
                    ));
                }
                std::mem::swap(&mut self.raw, &mut self.stored);
            }
            codec::ZSTD => {
                if self.zstd.is_none() {
                    self.zstd = Some(
                        zstd::bulk::Decompressor::new()
                            .map_err(|e| self.err_at(at, Problem::Io(e)))?,
                    );
                }
                self.raw.clear();
                self.raw.reserve(h.raw_len as usize);
                let z = self.zstd.as_mut().expect("created above");
                let n = z.decompress_to_buffer(&self.stored[..], &mut self.raw).map_err(|e| {
                    TraceError::new(
                        &self.path,
                        at,
                        self.decoded,
                        Problem::Malformed(format!("zstd: {e}")),
                    )
                })?;
                if n != h.raw_len as usize {
                    return Err(self.err_at(
                        at,
                        Problem::Malformed(format!(
                            "zstd payload decodes to {n} bytes, header says {}",
                            h.raw_len
                        )),
                    ));
                }
            }
            c => return Err(self.err_at(at, Problem::Malformed(format!("unknown codec {c}")))),
        }
        Ok(Some(h))
    }

    /// The reason of the last END read (version 2: it may wait in the merge).
    fn end_reason_now(&self) -> Option<EndReason> {
        match &self.wait {
            Some(Wait::End(e, _)) => Some(e.reason),
            _ => self.ends.last().map(|e| e.reason),
        }
    }

    fn decode_block(&mut self, h: BlockHeader, at: u64) -> Result<(), TraceError> {
        // read_block refused what follows an END that is not an exec's
        self.last_was_end = false;
        let raw = std::mem::take(&mut self.raw);
        let v2 = self.version >= 2;
        let r = match h.kind {
            kind::META => Err("a second META block".to_string()),
            // a block is all or nothing: none of a bad block's definitions
            // is handed out (as the C reader does)
            kind::MODULES | kind::STACKS | kind::THREADS => {
                let queued = self.queue.len();
                let r = match h.kind {
                    kind::MODULES => self.decode_modules(&raw),
                    kind::STACKS => self.decode_stacks(&raw),
                    _ => self.decode_threads(&raw),
                };
                if r.is_err() {
                    self.queue.truncate(queued);
                }
                r
            }
            kind::EVENTS if v2 => {
                if let Some(round) = Merge::peek_round(&raw) {
                    self.merge.close_before(round);
                }
                self.merge.events(&raw, self.stacks.len() as u32)
            }
            kind::EVENTS => self.decode_events(&raw),
            kind::INHERITED if v2 => self.merge.inherited(&raw, self.stacks.len()).map(|evs| {
                self.queue.extend(evs.into_iter().map(Item::Event));
            }),
            kind::END if v2 => parse_end(&raw).and_then(|e| {
                // a thread inside a hook at the end may have counted a row
                // it did not publish; the bytes of rows are exact either way
                if e.events != self.merge.rows() && e.inflight == 0 {
                    return Err(format!(
                        "END counts {} events, the trace holds {}",
                        e.events,
                        self.merge.rows()
                    ));
                }
                let bytes =
                    end_row_bytes(&raw).ok_or("END lacks the required field row bytes (key 11)")?;
                if bytes != self.merge.row_bytes() {
                    return Err(format!(
                        "END counts {bytes} bytes of rows, the trace holds {}",
                        self.merge.row_bytes()
                    ));
                }
                let e = End { objects: 0, unknown_frees: 0, ..e };
                self.last_was_end = true;
                self.merge.close_all();
                self.wait = Some(Wait::End(e, at));
                Ok(())
            }),
            kind::END => {
                let e = parse_end(&raw).and_then(|e| {
                    if e.events == self.decoded {
                        Ok(e)
                    } else {
                        Err(format!(
                            "END counts {} events, the trace holds {}",
                            e.events, self.decoded
                        ))
                    }
                });
                if let Ok(e) = &e {
                    self.ends.push(e.clone());
                    self.queue.push_back(Item::End(e.clone()));
                    self.last_was_end = true;
                }
                e.map(|_| ())
            }
            kind::REFS if self.keep_refs && h.flags & BLOCK_SKIPPABLE == 0 => {
                Err("a REFS block without the SKIPPABLE flag".to_string())
            }
            k if h.flags & BLOCK_SKIPPABLE != 0 => {
                if k == kind::REFS && self.keep_refs {
                    self.refs = Some((at, raw.clone()));
                }
                self.queue.push_back(Item::Skipped { kind: k, bytes: h.raw_len });
                Ok(())
            }
            k => {
                self.raw = raw;
                return Err(self.err_at(at, Problem::UnknownStream(k)));
            }
        };
        self.raw = raw;
        r.map_err(|m| self.err_at(at, Problem::Malformed(format!("{}: {m}", kind::name(h.kind)))))
    }

    fn decode_modules(&mut self, p: &[u8]) -> Result<(), String> {
        let mut c = Cursor::new(p);
        while !c.is_empty() {
            let id = c.varint("module id")?;
            if id != self.modules.len() as u64 + 1 {
                return Err(format!(
                    "module id {id} where {} was expected",
                    self.modules.len() + 1
                ));
            }
            let base = c.varint("module base")?;
            let size = c.varint("module size")?;
            let path = c.bytes("module path")?.to_vec();
            let build_id = c.bytes("module build-id")?.to_vec();
            let m = Module { id: id as u32, base, size, path, build_id };
            self.modules.push(m.clone());
            self.queue.push_back(Item::Module(m));
        }
        Ok(())
    }

    fn decode_stacks(&mut self, p: &[u8]) -> Result<(), String> {
        let mut c = Cursor::new(p);
        while !c.is_empty() {
            let id = c.varint("stack id")?;
            if id != self.stacks.len() as u64 + 1 {
                return Err(format!("stack id {id} where {} was expected", self.stacks.len() + 1));
            }
            let n = c.varint("frame count")?;
            if n == 0 || n > MAX_FRAMES {
                return Err(format!("stack {id} has {n} frames; 1..={MAX_FRAMES} allowed"));
            }
            let mut frames = Vec::with_capacity(n as usize);
            for _ in 0..n {
                let module = c.varint("frame module")?;
                if module > self.modules.len() as u64 {
                    return Err(format!("stack {id} names module {module}, which is not defined"));
                }
                frames.push(Frame { module: module as u32, offset: c.varint("frame offset")? });
            }
            self.stacks.push(frames);
            self.queue.push_back(Item::Stack(id as u32));
        }
        Ok(())
    }

    fn decode_threads(&mut self, p: &[u8]) -> Result<(), String> {
        let mut c = Cursor::new(p);
        while !c.is_empty() {
            let idx = c.varint("thread index")?;
            if idx != self.threads.len() as u64 {
                return Err(format!(
                    "thread index {idx} where {} was expected",
                    self.threads.len()
                ));
            }
            let tid = c.varint("thread tid")?;
            let name = c.bytes("thread name")?.to_vec();
            let mut start = None;
            if self.version >= 2 {
                let st = c.varint("thread start")?;
                if st != 0 {
                    let steps = c.varint("thread start steps")?;
                    if st > idx || steps == 0 {
                        return Err(format!(
                            "thread {idx} starts after {steps} steps of thread {}, which is not an earlier thread",
                            st - 1
                        ));
                    }
                    start = Some(Dep { thread: (st - 1) as u32, steps });
                }
                self.merge.define_thread(start);
            }
            self.seqs.push(0);
            let t = ThreadInfo { index: idx as u32, tid, name, start };
            self.threads.push(t.clone());
            self.queue.push_back(Item::Thread(t));
        }
        Ok(())
    }

    fn decode_events(&mut self, p: &[u8]) -> Result<(), String> {
        let mut c = Cursor::new(p);
        let n = c.varint("event count")?;
        if n == 0 || n > MAX_BLOCK_EVENTS {
            return Err(format!("{n} events in one block; 1..={MAX_BLOCK_EVENTS} allowed"));
        }
        let first_event = c.varint("first_event")?;
        let first_id = c.varint("first_id")?;
        let base_time = c.varint("base_time")?;
        if first_event != self.decoded {
            return Err(format!(
                "block starts at event {first_event}, but {} events came before it (a block is missing)",
                self.decoded
            ));
        }
        if first_id != self.next_id {
            return Err(format!(
                "block starts at object {first_id}, but {} objects came before it",
                self.next_id
            ));
        }
        if base_time != self.time {
            return Err(format!(
                "block base time {base_time}, but the previous event was at {}",
                self.time
            ));
        }
        let ops = c.bytes("ops column")?;
        let mut threads = Cursor::new(c.bytes("threads column")?);
        let mut times = Cursor::new(c.bytes("times column")?);
        let mut sizes = Cursor::new(c.bytes("sizes column")?);
        let mut aligns = Cursor::new(c.bytes("aligns column")?);
        let mut refs = Cursor::new(c.bytes("refs column")?);
        let mut stacks = Cursor::new(c.bytes("stacks column")?);
        if !c.is_empty() {
            return Err(format!("{} bytes after the last column", c.remaining()));
        }
        if ops.len() as u64 != n {
            return Err(format!("ops column holds {} bytes for {n} events", ops.len()));
        }
        let mut out = Vec::with_capacity(n as usize);
        let (mut next_id, mut time) = (self.next_id, self.time);
        let base = self.decoded;
        for (i, &opb) in ops.iter().enumerate() {
            let at = |m: String| format!("event {} (#{i} of the block): {m}", base + i as u64);
            let k = Kind::from_code(opb & op::KIND_MASK)
                .ok_or_else(|| at(format!("reserved kind {}", opb & op::KIND_MASK)))?;
            let failed = opb & op::FAILED != 0;
            let old_null = opb & op::OLD_NULL != 0;
            let inherited = opb & op::INHERITED != 0;
            if old_null && k != Kind::Realloc {
                return Err(at(format!("OLD_NULL on {}", k.name())));
            }
            if failed && k.is_release() {
                return Err(at(format!("FAILED on {}", k.name())));
            }
            if inherited && (failed || !k.creates()) {
                return Err(at("INHERITED on an event that creates no object".into()));
            }
            let thread = threads.varint("thread").map_err(at)?;
            if thread >= self.threads.len() as u64 {
                return Err(at(format!("thread {thread} is not defined")));
            }
            time = time
                .checked_add(times.varint("time").map_err(at)?)
                .ok_or_else(|| at("time overflows".into()))?;
            let size = if k.has_size() { sizes.varint("size").map_err(at)? } else { 0 };
            let align = if k.has_align() { aligns.varint("align").map_err(at)? } else { 0 };
            let (old, old_size) = if k.is_release() || (k == Kind::Realloc && !old_null) {
                let r = refs.varint("ref").map_err(at)?;
                if r >= next_id {
                    return Err(at(format!("ref {r} points before object 0")));
                }
                let id = next_id - 1 - r;
                let Some(&o) = self.live.get(&id) else {
                    return Err(at(format!("{} of object {id}, which is not live", k.name())));
                };
                (Some(id), o)
            } else {
                (None, Obj::default())
            };
            let stack = if opb & op::HAS_STACK != 0 {
                let s = stacks.varint("stack").map_err(at)?;
                if s == 0 || s > self.stacks.len() as u64 {
                    return Err(at(format!("stack {s} is not defined")));
                }
                s as u32
            } else {
                0
            };
            if let (Some(o), true) = (old, k.is_release() || !failed) {
                self.live.remove(&o);
            }
            let thread_seq = self.seqs[thread as usize];
            self.seqs[thread as usize] += 1;
            let id = if k.creates() && !failed {
                let o = Obj {
                    id: next_id,
                    size,
                    thread: thread as u32,
                    seq: thread_seq,
                    ..Obj::default()
                };
                self.live.insert(next_id, o);
                next_id += 1;
                Some(next_id - 1)
            } else {
                None
            };
            out.push(Event {
                index: base + i as u64,
                kind: k,
                thread: thread as u32,
                time,
                size: if k.is_release() { old_size.size } else { size },
                align,
                id,
                old,
                old_size: old_size.size,
                stack,
                failed,
                inherited,
                thread_seq,
                old_thread: old_size.thread,
                old_seq: old_size.seq,
                after: [None, None],
            });
        }
        for (name, cur) in [
            ("threads", &threads),
            ("times", &times),
            ("sizes", &sizes),
            ("aligns", &aligns),
            ("refs", &refs),
            ("stacks", &stacks),
        ] {
            if !cur.is_empty() {
                return Err(format!("{} unused bytes in the {name} column", cur.remaining()));
            }
        }
        self.next_id = next_id;
        self.time = time;
        self.decoded += n;
        self.queue.extend(out.into_iter().map(Item::Event));
        Ok(())
    }
}

fn int_field(v: &[u8], what: &str) -> Result<u64, String> {
    let mut c = Cursor::new(v);
    let x = c.varint(what)?;
    if !c.is_empty() {
        return Err(format!("{what}: trailing bytes in the field"));
    }
    Ok(x)
}

/// Parses a META payload.
pub fn parse_meta(p: &[u8]) -> Result<Meta, String> {
    let mut m = Meta::default();
    let mut c = Cursor::new(p);
    let mut seen = [false; 14];
    while !c.is_empty() {
        let key = c.varint("META key")?;
        let v = c.bytes("META value")?;
        if (key as usize) < seen.len() {
            seen[key as usize] = true;
        }
        match key {
            meta_key::PID => m.pid = int_field(v, "pid")?,
            meta_key::PPID => m.ppid = Some(int_field(v, "ppid")?),
            meta_key::ARGV => m.argv.push(v.to_vec()),
            meta_key::START_NS => m.start_ns = int_field(v, "start time")?,
            meta_key::POINTER_SIZE => m.pointer_size = int_field(v, "pointer size")?,
            meta_key::ENDIAN => m.endian = int_field(v, "endianness")?,
            meta_key::TIME_UNIT_NS => m.time_unit_ns = int_field(v, "time unit")?,
            meta_key::STACK_DEPTH => m.stack_depth = int_field(v, "stack depth")?,
            meta_key::RECORDER => m.recorder = Some(v.to_vec()),
            meta_key::EXECUTABLE => m.executable = Some(v.to_vec()),
            meta_key::OPTIONS => m.options = Some(v.to_vec()),
            meta_key::PARENT_PID => m.parent_pid = Some(int_field(v, "parent pid")?),
            meta_key::CLOCK => m.clock = Some(v.to_vec()),
            _ => {} // a later version's field
        }
    }
    for (key, name) in [
        (meta_key::PID, "pid"),
        (meta_key::START_NS, "start time"),
        (meta_key::POINTER_SIZE, "pointer size"),
        (meta_key::ENDIAN, "endianness"),
        (meta_key::TIME_UNIT_NS, "time unit"),
        (meta_key::STACK_DEPTH, "stack depth"),
    ] {
        if !seen[key as usize] {
            return Err(format!("META lacks the required field {name} (key {key})"));
        }
    }
    if m.time_unit_ns == 0 {
        return Err("META time unit is 0".into());
    }
    Ok(m)
}

/// Parses an END payload (either version): reason (key 1) and events
/// (key 4: version 1, the events; version 2, the rows written) are required.
pub fn parse_end(p: &[u8]) -> Result<End, String> {
    let mut e = End::default();
    let mut c = Cursor::new(p);
    let (mut reason, mut events) = (false, false);
    while !c.is_empty() {
        let key = c.varint("END key")?;
        let v = c.bytes("END value")?;
        match key {
            end_key::REASON => {
                e.reason = EndReason::from_code(int_field(v, "reason")?);
                reason = true;
            }
            end_key::STATUS => e.status = int_field(v, "status")?,
            end_key::END_NS => e.end_ns = int_field(v, "end time")?,
            end_key::EVENTS => {
                e.events = int_field(v, "events")?;
                events = true;
            }
            end_key::OBJECTS => e.objects = int_field(v, "objects")?,
            end_key::UNRECORDED => e.unrecorded = int_field(v, "unrecorded")?,
            end_key::UNKNOWN_FREES => e.unknown_frees = int_field(v, "unknown frees")?,
            end_key::LOST => e.lost = int_field(v, "lost")?,
            end_key::WAITED_NS => e.waited_ns = int_field(v, "waited ns")?,
            end_key::INFLIGHT => e.inflight = int_field(v, "inflight")?,
            end_key::ROW_BYTES => {
                int_field(v, "row bytes")?;
            }
            _ => {}
        }
    }
    if !reason {
        return Err("END lacks the required field reason (key 1)".into());
    }
    if !events {
        return Err("END lacks the required field events (key 4)".into());
    }
    Ok(e)
}

/// Version 2: the bytes of rows an END payload counts (key 11), if any.
pub fn end_row_bytes(p: &[u8]) -> Option<u64> {
    let mut c = Cursor::new(p);
    let mut found = None;
    while !c.is_empty() {
        let key = c.varint("").ok()?;
        let v = c.bytes("").ok()?;
        if key == end_key::ROW_BYTES {
            found = Some(int_field(v, "").ok()?);
        }
    }
    found
}
