//! The streaming writer. It assigns object ids, interns stacks, and cuts the
//! event stream into blocks; its memory is bounded by the live objects and the
//! distinct stacks, not by the length of the trace.
//!
//! Block policy (the C writer follows the same, which is what lets the test
//! vectors compare bytes): definitions (modules, stacks, threads) wait in
//! memory until the next events block is written, then go out just before it,
//! in that order, one block per kind. An events block is written when it holds
//! `block_events` events, on [`TraceWriter::flush`], and before an END block.

use crate::block::{BlockWriter, Codec};
use crate::format::{
    kind, meta_key, op, FILE_HEADER_LEN, FILE_MAGIC, MAX_BLOCK_EVENTS, MAX_FRAMES, VERSION,
};
use crate::model::{End, Frame, Kind, Meta, Module, NewEvent};
use crate::varint::{put, put_bytes};
use std::collections::{HashMap, HashSet};
use std::io::{self, Write};

/// Writer settings.
#[derive(Debug, Clone, Copy)]
pub struct WriterOptions {
    pub codec: Codec,
    /// Events per block, 1 ..= 2^20.
    pub block_events: usize,
}

impl Default for WriterOptions {
    fn default() -> Self {
        WriterOptions { codec: Codec::Zstd(3), block_events: 65536 }
    }
}

/// The columns of the events block being built.
#[derive(Default)]
struct Columns {
    n: u64,
    first_event: u64,
    first_id: u64,
    base_time: u64,
    ops: Vec<u8>,
    threads: Vec<u8>,
    times: Vec<u8>,
    sizes: Vec<u8>,
    aligns: Vec<u8>,
    refs: Vec<u8>,
    stacks: Vec<u8>,
}

impl Columns {
    fn encode(&self) -> Vec<u8> {
        let mut p = Vec::with_capacity(
            32 + self.ops.len()
                + self.threads.len()
                + self.times.len()
                + self.sizes.len()
                + self.aligns.len()
                + self.refs.len()
                + self.stacks.len(),
        );
        put(&mut p, self.n);
        put(&mut p, self.first_event);
        put(&mut p, self.first_id);
        put(&mut p, self.base_time);
        for c in [
            &self.ops,
            &self.threads,
            &self.times,
            &self.sizes,
            &self.aligns,
            &self.refs,
            &self.stacks,
        ] {
            put_bytes(&mut p, c);
        }
        p
    }

    fn clear(&mut self) {
        self.n = 0;
        for c in [
            &mut self.ops,
            &mut self.threads,
            &mut self.times,
            &mut self.sizes,
            &mut self.aligns,
            &mut self.refs,
            &mut self.stacks,
        ] {
            c.clear();
        }
    }
}

fn invalid(msg: String) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidInput, msg)
}

/// Writes a trace. See the module docs for when blocks are cut.
pub struct TraceWriter<W: Write> {
    out: BlockWriter<W>,
    opts: WriterOptions,
    pend_modules: Vec<u8>,
    pend_stacks: Vec<u8>,
    pend_threads: Vec<u8>,
    n_modules: u32,
    n_threads: u32,
    stacks: HashMap<Vec<Frame>, u32>,
    cols: Columns,
    events: u64,
    next_id: u64,
    last_time: u64,
    live: HashSet<u64>,
}

impl<W: Write> TraceWriter<W> {
    /// Writes the file header and the META block.
    pub fn new(out: W, meta: &Meta, opts: WriterOptions) -> io::Result<Self> {
        if opts.block_events == 0 || opts.block_events as u64 > MAX_BLOCK_EVENTS {
            return Err(invalid(format!("block_events must be 1..={MAX_BLOCK_EVENTS}")));
        }
        if meta.time_unit_ns == 0 {
            return Err(invalid("time_unit_ns must be at least 1".into()));
        }
        let mut out = BlockWriter::new(out);
        let mut h = [0u8; FILE_HEADER_LEN];
        h[..8].copy_from_slice(&FILE_MAGIC);
        h[8..10].copy_from_slice(&VERSION.to_le_bytes());
        h[10..12].copy_from_slice(&(FILE_HEADER_LEN as u16).to_le_bytes());
        out.write_raw(&h)?;
        out.write_block(kind::META, 0, &encode_meta(meta), Codec::None)?;
        Ok(TraceWriter {
            out,
            opts,
            pend_modules: Vec::new(),
            pend_stacks: Vec::new(),
            pend_threads: Vec::new(),
            n_modules: 0,
            n_threads: 0,
            stacks: HashMap::new(),
            cols: Columns::default(),
            events: 0,
            next_id: 0,
            last_time: 0,
            live: HashSet::new(),
        })
    }

    /// Defines a module and returns its id (dense, from 1). `m.id` is ignored.
    pub fn add_module(&mut self, m: &Module) -> u32 {
        self.n_modules += 1;
        let b = &mut self.pend_modules;
        put(b, u64::from(self.n_modules));
        put(b, m.base);
        put(b, m.size);
        put_bytes(b, &m.path);
        put_bytes(b, &m.build_id);
        self.n_modules
    }

    /// Defines a thread and returns its index (dense, from 0).
    pub fn add_thread(&mut self, tid: u64, name: impl AsRef<[u8]>) -> u32 {
        let idx = self.n_threads;
        self.n_threads += 1;
        put(&mut self.pend_threads, u64::from(idx));
        put(&mut self.pend_threads, tid);
        put_bytes(&mut self.pend_threads, name.as_ref());
        idx
    }

    /// Returns the id of this stack, defining it on first sight (dense, from 1).
    /// An empty stack is id 0, "none".
    pub fn intern_stack(&mut self, frames: &[Frame]) -> io::Result<u32> {
        if frames.is_empty() {
            return Ok(0);
        }
        if frames.len() as u64 > MAX_FRAMES {
            return Err(invalid(format!(
                "a stack has {} frames; at most {MAX_FRAMES}",
                frames.len()
            )));
        }
        if let Some(&id) = self.stacks.get(frames) {
            return Ok(id);
        }
        if let Some(f) = frames.iter().find(|f| f.module > self.n_modules) {
            return Err(invalid(format!("frame names module {}, which is not defined", f.module)));
        }
        let id = self.stacks.len() as u32 + 1;
        self.stacks.insert(frames.to_vec(), id);
        let b = &mut self.pend_stacks;
        put(b, u64::from(id));
        put(b, frames.len() as u64);
        for f in frames {
            put(b, u64::from(f.module));
            put(b, f.offset);
        }
        Ok(id)
    }

    /// Records one event and returns the id of the object it creates, if any.
    pub fn record(&mut self, ev: &NewEvent) -> io::Result<Option<u64>> {
        let k = ev.kind;
        let old_null = k == Kind::Realloc && ev.old.is_none();
        if k.is_release() && ev.failed {
            return Err(invalid(format!("{} cannot fail", k.name())));
        }
        if ev.inherited && (ev.failed || !k.creates()) {
            return Err(invalid("only a successful allocation can be inherited".into()));
        }
        if ev.thread >= self.n_threads {
            return Err(invalid(format!("thread {} is not defined", ev.thread)));
        }
        if ev.stack as usize > self.stacks.len() {
            return Err(invalid(format!("stack {} is not defined", ev.stack)));
        }
        let needs_ref = k.is_release() || (k == Kind::Realloc && !old_null);
        if needs_ref {
            let old = ev.old.ok_or_else(|| invalid(format!("{} needs an object", k.name())))?;
            if !self.live.contains(&old) {
                return Err(invalid(format!("{} of object {old}, which is not live", k.name())));
            }
        } else if ev.old.is_some() {
            return Err(invalid(format!("{} takes no object", k.name())));
        }

        if self.cols.n == 0 {
            self.cols.first_event = self.events;
            self.cols.first_id = self.next_id;
            self.cols.base_time = self.last_time;
        }
        let time = ev.time.max(self.last_time);
        let mut opb = k.code();
        if ev.failed {
            opb |= op::FAILED;
        }
        if old_null {
            opb |= op::OLD_NULL;
        }
        if ev.stack != 0 {
            opb |= op::HAS_STACK;
        }
        if ev.inherited {
            opb |= op::INHERITED;
        }
        let c = &mut self.cols;
        c.ops.push(opb);
        put(&mut c.threads, u64::from(ev.thread));
        put(&mut c.times, time - self.last_time);
        if k.has_size() {
            put(&mut c.sizes, ev.size);
        }
        if k.has_align() {
            put(&mut c.aligns, ev.align);
        }
        if needs_ref {
            let old = ev.old.expect("checked above");
            put(&mut c.refs, self.next_id - 1 - old);
        }
        if ev.stack != 0 {
            put(&mut c.stacks, u64::from(ev.stack));
        }
        c.n += 1;
        self.last_time = time;
        self.events += 1;

        let released =
            if k.is_release() || (k == Kind::Realloc && !ev.failed) { ev.old } else { None };
        if let Some(old) = released {
            self.live.remove(&old);
        }
        let id = if k.creates() && !ev.failed {
            let id = self.next_id;
            self.next_id += 1;
            self.live.insert(id);
            Some(id)
        } else {
            None
        };
        if self.cols.n as usize >= self.opts.block_events {
            self.flush_blocks()?;
        }
        Ok(id)
    }

    /// Writes pending definitions, then the events block being built.
    fn flush_blocks(&mut self) -> io::Result<()> {
        let codec = self.opts.codec;
        for (k, buf) in [
            (kind::MODULES, &mut self.pend_modules),
            (kind::STACKS, &mut self.pend_stacks),
            (kind::THREADS, &mut self.pend_threads),
        ] {
            if !buf.is_empty() {
                self.out.write_block(k, 0, buf, codec)?;
                buf.clear();
            }
        }
        if self.cols.n > 0 {
            let payload = self.cols.encode();
            self.out.write_block(kind::EVENTS, 0, &payload, codec)?;
            self.cols.clear();
        }
        Ok(())
    }

    /// Ends the current events block (and writes pending definitions), then
    /// flushes the underlying writer.
    pub fn flush(&mut self) -> io::Result<()> {
        self.flush_blocks()?;
        self.out.flush()
    }

    /// Writes an END block. `events` and `objects` are filled in by the writer.
    /// With reason `exec` the writer may go on afterwards (a failed exec).
    pub fn write_end(&mut self, end: &End) -> io::Result<()> {
        self.flush_blocks()?;
        let mut e = end.clone();
        e.events = self.events;
        e.objects = self.next_id;
        self.out.write_block(kind::END, 0, &encode_end(&e), Codec::None)?;
        self.out.flush()
    }

    /// Writes the END block and returns the underlying writer.
    pub fn finish(mut self, end: &End) -> io::Result<W> {
        self.write_end(end)?;
        Ok(self.out.into_inner())
    }

    /// Writes a block of a stream this version does not define (for tests of
    /// readers, and for later versions' streams).
    pub fn write_raw_block(&mut self, kind: u8, flags: u16, payload: &[u8]) -> io::Result<()> {
        self.flush_blocks()?;
        self.out.write_block(kind, flags, payload, Codec::None)
    }

    /// Writes a block of another stream (REFS, say) with the writer's codec,
    /// after the pending definitions and the events block being built, so
    /// that every event recorded so far is in the file before it.
    pub fn write_stream_block(&mut self, kind: u8, flags: u16, payload: &[u8]) -> io::Result<()> {
        let codec = self.opts.codec;
        self.write_stream_block_with(kind, flags, payload, codec)
    }

    /// [`Self::write_stream_block`] with a codec of its own (a large stream
    /// may want a faster level than the events).
    pub fn write_stream_block_with(
        &mut self,
        kind: u8,
        flags: u16,
        payload: &[u8],
        codec: Codec,
    ) -> io::Result<()> {
        self.flush_blocks()?;
        self.out.write_block(kind, flags, payload, codec)
    }

    /// Events recorded so far.
    pub fn events(&self) -> u64 {
        self.events
    }

    /// Bytes written so far (pending data not included).
    pub fn bytes_written(&self) -> u64 {
        self.out.bytes()
    }

    /// The next object id the writer will assign.
    pub fn next_id(&self) -> u64 {
        self.next_id
    }

    /// Number of objects now live.
    pub fn live_objects(&self) -> usize {
        self.live.len()
    }

    /// Ids of the objects now live, in no order.
    pub fn live_ids(&self) -> impl Iterator<Item = u64> + '_ {
        self.live.iter().copied()
    }
}

fn field(b: &mut Vec<u8>, key: u64, value: &[u8]) {
    put(b, key);
    put_bytes(b, value);
}

fn field_int(b: &mut Vec<u8>, key: u64, v: u64) {
    let mut tmp = Vec::with_capacity(10);
    put(&mut tmp, v);
    field(b, key, &tmp);
}

/// The META payload, fields in key order (argv in argument order).
pub fn encode_meta(m: &Meta) -> Vec<u8> {
    let mut b = Vec::new();
    field_int(&mut b, meta_key::PID, m.pid);
    if let Some(p) = m.ppid {
        field_int(&mut b, meta_key::PPID, p);
    }
    for a in &m.argv {
        field(&mut b, meta_key::ARGV, a);
    }
    field_int(&mut b, meta_key::START_NS, m.start_ns);
    field_int(&mut b, meta_key::POINTER_SIZE, m.pointer_size);
    field_int(&mut b, meta_key::ENDIAN, m.endian);
    field_int(&mut b, meta_key::TIME_UNIT_NS, m.time_unit_ns);
    field_int(&mut b, meta_key::STACK_DEPTH, m.stack_depth);
    for (k, v) in [
        (meta_key::RECORDER, &m.recorder),
        (meta_key::EXECUTABLE, &m.executable),
        (meta_key::OPTIONS, &m.options),
    ] {
        if let Some(s) = v {
            field(&mut b, k, s);
        }
    }
    if let Some(p) = m.parent_pid {
        field_int(&mut b, meta_key::PARENT_PID, p);
    }
    if let Some(c) = &m.clock {
        field(&mut b, meta_key::CLOCK, c);
    }
    b
}

/// The END payload, fields in key order.
pub fn encode_end(e: &End) -> Vec<u8> {
    use crate::format::end_key as k;
    let mut b = Vec::new();
    field_int(&mut b, k::REASON, e.reason.code());
    field_int(&mut b, k::STATUS, e.status);
    field_int(&mut b, k::END_NS, e.end_ns);
    field_int(&mut b, k::EVENTS, e.events);
    field_int(&mut b, k::OBJECTS, e.objects);
    field_int(&mut b, k::UNRECORDED, e.unrecorded);
    field_int(&mut b, k::UNKNOWN_FREES, e.unknown_frees);
    b
}

impl<W: Write> TraceWriter<W> {
    /// Returns the underlying writer without writing an END block (after
    /// [`TraceWriter::flush`], the result is a trace that was cut short, or one
    /// whose END was already written with [`TraceWriter::write_end`]).
    pub fn into_inner_unfinished(self) -> W {
        self.out.into_inner()
    }
}
