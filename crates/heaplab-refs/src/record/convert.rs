//! The converter: the tool's raw words to trace events and REFS payloads
//! (attribution through the heap map, the REFS encoder's hot loop), and the
//! writer thread that owns the [`TraceWriter`] (stacks, events, zstd).
//!
//! ```text
//!   raw words ─▶ Converter::feed_words ─┬─ REF/TIME: HeapMap lookup ─▶ Hot::heap / Hot::other
//!                                       └─ control: HELLO, THREAD, MODULE, ALLOC, FREE, EXIT
//!                  ──(batches of Msg)──▶ writer_thread: TraceWriter (events, stacks, REFS blocks, zstd)
//!                  ◀─(spare payload buffers)──
//! ```

use super::{Options, Summary};
use crate::heapmap::HeapMap;
use crate::raw::{self, ctl, RawReader, Rec};
use crate::vg::Ended;
use anyhow::{bail, Context, Result};
use heaplab_trace::format::{kind, BLOCK_SKIPPABLE};
use heaplab_trace::refs::{self, v2, RefsEncoder};
use heaplab_trace::{
    Codec, End, EndReason, Frame, Kind, Meta, Module, NewEvent, TraceWriter, WriterOptions,
};
use std::io::{Read, Write};
use std::sync::mpsc::{sync_channel, Receiver, SyncSender};
use std::thread::JoinHandle;

/// What the converter asks of the writer thread, in stream order.
enum Msg {
    Thread(u64),
    Module(Module),
    /// An event, its stack's frames, and the object it must create.
    Event(NewEvent, Vec<Frame>, Option<u64>),
    Refs(Vec<u8>),
    /// An SP block: the stack depth at allocations (heaplab_trace::sp).
    Sp(Vec<u8>),
    /// END (exec: the writer may go on).
    End(End),
}

/// The thread that owns the [`TraceWriter`]: it interns stacks, records
/// events and compresses REFS blocks while the converter reads on.
fn writer_thread<W: Write>(
    mut w: TraceWriter<W>,
    rx: Receiver<Vec<Msg>>,
    spare: SyncSender<Vec<u8>>,
    refs_codec: Codec,
) -> Result<W> {
    for m in rx.into_iter().flatten() {
        match m {
            Msg::Thread(tid) => {
                w.add_thread(tid, "");
            }
            Msg::Module(m) => {
                w.add_module(&m);
            }
            Msg::Event(mut ev, frames, want) => {
                ev.stack = w.intern_stack(&frames)?;
                let id = w.record(&ev)?;
                if id != want {
                    bail!("the writer assigned object {id:?} where {want:?} was expected");
                }
            }
            Msg::Refs(p) => {
                w.write_stream_block_with(kind::REFS, BLOCK_SKIPPABLE, &p, refs_codec)?;
                // back to the converter for its next block (or dropped when it has enough)
                let _ = spare.try_send(p);
            }
            Msg::Sp(p) => w.write_stream_block(kind::SP, BLOCK_SKIPPABLE, &p)?,
            Msg::End(e) => w.write_end(&e)?,
        }
    }
    // the converter is done: its last message was END, or the stream ended
    // after an exec (whose END is written)
    w.flush()?;
    Ok(w.into_inner_unfinished())
}

/// Turns the raw stream into a trace. Feed it the stream, then finish it with
/// how the program ended.
pub struct Converter<W: Write + Send + 'static> {
    out: Option<W>,
    argv: Vec<Vec<u8>>,
    executable: Option<Vec<u8>>,
    opts: Options,
    tx: Option<SyncSender<Vec<Msg>>>,
    /// Messages not sent yet: they go in batches (a channel send per event
    /// would cost more than the event).
    batch: Vec<Msg>,
    thread: Option<JoinHandle<Result<W>>>,
    enc: RefsEncoder,
    /// REFS payload buffers the writer is done with.
    spare: Option<Receiver<Vec<u8>>>,
    /// The stack depths of allocations (the tool's word after the frames).
    sp: heaplab_trace::sp::SpEncoder,
    heap: HeapMap,
    next_id: u64,
    events: u64,
    threads: u64,
    modules: u64,
    exited: Option<(u64, u64)>, // (status, instructions)
    summary: Summary,
    refs_blocks_bytes: u64,
    /// The last TIME word.
    time_base: u64,
}

fn kind_of(code: u64) -> Result<Kind> {
    Kind::from_code(code as u8)
        .filter(|_| code < 16)
        .with_context(|| format!("the tool sent event kind {code}"))
}

/// Frame words to frames.
fn frames_of(words: &[u64]) -> Vec<Frame> {
    words
        .iter()
        .map(|&f| Frame { module: (f >> 48) as u32, offset: f & 0xffff_ffff_ffff })
        .collect()
}

impl<W: Write + Send + 'static> Converter<W> {
    /// `argv` and `executable` go into META.
    pub fn new(out: W, argv: Vec<Vec<u8>>, executable: Option<Vec<u8>>, opts: Options) -> Self {
        Converter {
            out: Some(out),
            argv,
            executable,
            opts,
            tx: None,
            batch: Vec::new(),
            thread: None,
            enc: RefsEncoder::new(),
            spare: None,
            sp: heaplab_trace::sp::SpEncoder::default(),
            heap: HeapMap::new(),
            next_id: 0,
            events: 0,
            threads: 0,
            modules: 0,
            exited: None,
            summary: Summary::default(),
            refs_blocks_bytes: 0,
            time_base: 0,
        }
    }

    /// Queues a message; a batch goes out every 4096, and with every REFS block.
    fn send(&mut self, m: Msg) -> Result<()> {
        if self.tx.is_none() {
            bail!("the tool's stream does not start with HELLO");
        }
        let urgent = matches!(m, Msg::Refs(_) | Msg::End(_));
        self.batch.push(m);
        if urgent || self.batch.len() >= 4096 {
            self.send_batch()?;
        }
        Ok(())
    }

    fn send_batch(&mut self) -> Result<()> {
        let tx = self.tx.as_ref().context("the tool's stream does not start with HELLO")?;
        let b = std::mem::take(&mut self.batch);
        if tx.send(b).is_err() {
            // the writer stopped: its error says why
            return Err(match self.join_writer() {
                Err(e) => e,
                Ok(_) => anyhow::anyhow!("the trace writer stopped"),
            });
        }
        Ok(())
    }

    fn join_writer(&mut self) -> Result<W> {
        if self.tx.is_some() && !self.batch.is_empty() {
            let b = std::mem::take(&mut self.batch);
            let _ = self.tx.as_ref().map(|tx| tx.send(b));
        }
        self.tx = None;
        let h = self.thread.take().context("no trace writer")?;
        h.join().map_err(|_| anyhow::anyhow!("the trace writer panicked"))?
    }

    fn flush_refs(&mut self) -> Result<()> {
        let mut p = self.spare.as_ref().and_then(|r| r.try_recv().ok()).unwrap_or_default();
        if self.enc.take_block_into(&mut p) {
            self.refs_blocks_bytes += p.len() as u64;
            self.send(Msg::Refs(p))?;
        }
        if let Some(p) = self.sp.take_block() {
            self.send(Msg::Sp(p))?;
        }
        Ok(())
    }

    /// Reads the whole stream.
    pub fn feed_all<R: Read>(&mut self, src: R) -> Result<u64> {
        let mut r = RawReader::new(src);
        loop {
            let used = match r.fill()? {
                None => break,
                Some(words) => self.feed_words(words)?,
            };
            r.consume(used);
            if self.enc.is_full() {
                self.flush_refs()?;
            }
        }
        self.summary.stream_bytes = r.bytes();
        Ok(r.bytes())
    }

    /// Decodes one segment of the ring, which holds whole records only.
    pub fn feed_segment(&mut self, words: &[u64]) -> Result<()> {
        let used = self.feed_words(words)?;
        if used != words.len() {
            bail!(
                "a record crosses the end of a ring segment ({} of {} words decoded)",
                used,
                words.len()
            );
        }
        self.summary.stream_bytes += 8 * words.len() as u64;
        if self.enc.is_full() {
            self.flush_refs()?;
        }
        Ok(())
    }

    /// Hands the REFS block over to the writer when it is full (after
    /// [`Self::feed_words`]; the other feeds do it themselves).
    pub fn flush_if_full(&mut self) -> Result<()> {
        if self.enc.is_full() {
            self.flush_refs()?;
        }
        Ok(())
    }

    /// Decodes the whole records at the start of `words`; returns how many
    /// words they took. REF and TIME words (nine in ten words are REFs) go
    /// through a tight loop over as many words as the encoder has room for,
    /// with the encoder's state in registers (`heaplab_trace::refs::Hot`); the rest through
    /// [`raw::next`].
    pub fn feed_words(&mut self, words: &[u64]) -> Result<usize> {
        let mut pos = 0;
        let mut base = self.time_base;
        let n = words.len();
        let mut h = self.enc.hot();
        while pos < n {
            if h.room() == 0 {
                self.enc.put_hot(h);
                self.enc.refill();
                h = self.enc.hot();
            }
            // a word makes at most one record
            let start = pos;
            let end = pos + (n - pos).min(h.room());
            for &w in &words[start..end] {
                match w >> 61 {
                    raw::T_REF => {
                        // the word is decoded in each branch, not before the
                        // lookup: fewer values live across it (register spills
                        // were most of this loop's instructions)
                        let a = raw::addr(w);
                        match self.heap.lookup(a) {
                            Some((id, off)) => {
                                h.heap(id, off, raw::access_bits(w), raw::size(w), base + raw::k(w))
                            }
                            None => h.other(a, raw::access_bits(w), raw::size(w), base + raw::k(w)),
                        }
                    }
                    raw::T_TIME => base = w & raw::TIME_MASK,
                    _ => break,
                }
                pos += 1;
            }
            h.used(pos - start);
            if pos == end {
                continue;
            }
            // an SREF or a control record
            if h.room() == 0 {
                self.enc.put_hot(h);
                self.enc.refill();
                h = self.enc.hot();
            }
            let mut p = pos;
            let Some(rec) = raw::next(words, &mut p) else { break };
            pos = p;
            match rec {
                Rec::SRef(w, size) => {
                    let (a, t) = (raw::addr(w), base + raw::k(w));
                    let size = size.clamp(1, u64::from(u32::MAX)) as u32;
                    let bits = v2::access_bits(size, w & raw::WRITE != 0);
                    match self.heap.lookup(a) {
                        Some((id, off)) => h.heap(id, off, bits, size, t),
                        None => h.other(a, bits, size, t),
                    }
                    h.used(1);
                }
                Rec::Control { kind, w0, extra } => {
                    self.enc.put_hot(h);
                    let r = self.control(kind, w0, extra);
                    h = self.enc.hot();
                    r?
                }
                Rec::Ref(_) | Rec::Time(_) => unreachable!("handled above"),
            }
        }
        self.enc.put_hot(h);
        self.time_base = base;
        Ok(pos)
    }

    fn control(&mut self, kind: u8, w0: u64, x: &[u64]) -> Result<()> {
        let need = |n: usize| -> Result<()> {
            if x.len() < n {
                bail!("control record {kind} has {} extra words, needs {n}", x.len());
            }
            Ok(())
        };
        match kind {
            ctl::HELLO => {
                need(5)?;
                if w0 != raw::PROTOCOL {
                    bail!(
                        "the tool speaks protocol {w0}; this heaplab understands {}",
                        raw::PROTOCOL
                    );
                }
                if x[0] != raw::MODE_RECORD {
                    bail!("the tool runs in mode {}, not record", x[0]);
                }
                let mut options = format!("{} stack_depth={}", refs::OPTION, x[3]);
                if self.opts.free_stacks {
                    options.push_str(" free_stacks=1");
                }
                if !self.opts.refs {
                    options = format!("refs=0 stack_depth={}", x[3]);
                }
                let meta = Meta {
                    pid: x[1],
                    ppid: Some(x[2]),
                    argv: self.argv.clone(),
                    start_ns: x[4],
                    pointer_size: 8,
                    endian: 0,
                    time_unit_ns: 1000,
                    stack_depth: x[3],
                    recorder: Some(
                        format!("heaplab-vgtool {}", env!("CARGO_PKG_VERSION")).into_bytes(),
                    ),
                    executable: self.executable.clone(),
                    options: Some(options.into_bytes()),
                    parent_pid: None,
                    clock: Some("CLOCK_MONOTONIC (under valgrind)".into()),
                };
                let out = self.out.take().context("a second HELLO")?;
                let wopts =
                    WriterOptions { codec: self.opts.codec, block_events: self.opts.block_events };
                let w = TraceWriter::new(out, &meta, wopts)?;
                let (tx, rx) = sync_channel(16);
                self.tx = Some(tx);
                let (spare_tx, spare_rx) = sync_channel(4);
                self.spare = Some(spare_rx);
                let rc = self.opts.refs_codec;
                self.thread = Some(std::thread::spawn(move || writer_thread(w, rx, spare_tx, rc)));
            }
            ctl::THREAD => {
                need(1)?;
                if self.threads != w0 {
                    bail!("thread {w0} arrived as the trace's thread {}", self.threads);
                }
                self.threads += 1;
                self.send(Msg::Thread(x[0]))?;
            }
            ctl::MODULE => {
                need(4)?;
                if self.modules + 1 != w0 {
                    bail!("module {w0} arrived as the trace's module {}", self.modules + 1);
                }
                self.modules += 1;
                let path = raw::path_of(x);
                let (bias, lo, size) = (x[0], x[1], x[2]);
                let m = Module {
                    id: 0,
                    base: bias,
                    size: (lo + size).saturating_sub(bias),
                    path,
                    build_id: vec![],
                };
                self.send(Msg::Module(m))?;
            }
            ctl::ALLOC => {
                need(6)?;
                let code = x[0] & 0xff;
                let thread = ((x[0] >> 8) & 0xffff_ffff) as u32;
                let nf = (x[0] >> 40) as usize;
                need(6 + nf)?;
                let (size, align, old_addr, time, wall) = (x[1], x[2], x[3], x[4], x[5]);
                let k = kind_of(code)?;
                let p = w0;
                let old = match k {
                    Kind::Realloc | Kind::ReallocFree if old_addr != 0 => {
                        Some(self.heap.id_at(old_addr).with_context(|| {
                            format!("realloc of {old_addr:#x}, which is not live")
                        })?)
                    }
                    _ => None,
                };
                let failed = p == 0 && k != Kind::ReallocFree;
                let mut ev = NewEvent::alloc(k, size).at(thread, wall / 1000);
                ev.align = if k.has_align() { align } else { 0 };
                ev.old = old;
                ev.failed = failed;
                if k == Kind::ReallocFree {
                    ev.size = 0;
                }
                let id = (k.creates() && !failed).then_some(self.next_id);
                self.send(Msg::Event(ev, frames_of(&x[6..6 + nf]), id))?;
                if let Some(&depth) = x.get(6 + nf) {
                    // the caller's stack depth, after the frames (paper 001's SP)
                    self.sp.push(self.events, depth);
                    if self.sp.is_full() {
                        let p = self.sp.take_block().expect("a full encoder has a block");
                        self.send(Msg::Sp(p))?;
                    }
                }
                self.events += 1;
                if old.is_some() && !failed {
                    self.heap.remove(old_addr);
                }
                if let Some(id) = id {
                    self.next_id += 1;
                    self.heap.insert(p, size, id);
                }
                self.enc.events(1, u64::from(id.is_some()), time);
            }
            ctl::FREE => {
                need(3)?;
                let thread = ((x[0] >> 8) & 0xffff_ffff) as u32;
                let nf = (x[0] >> 40) as usize;
                need(3 + nf)?;
                let id = self
                    .heap
                    .remove(w0)
                    .with_context(|| format!("free of {w0:#x}, which is not live"))?;
                let ev = NewEvent::free(id).at(thread, x[2] / 1000);
                self.send(Msg::Event(ev, frames_of(&x[3..3 + nf]), None))?;
                self.events += 1;
                self.enc.events(1, 0, x[1]);
            }
            ctl::EXIT => {
                need(4)?;
                self.summary.unknown_frees = x[3];
                if x[0] == raw::EXIT_EXEC {
                    // the program execs: its trace ends here (more follows if the exec fails)
                    self.flush_refs()?;
                    let end = End {
                        reason: EndReason::Exec,
                        unknown_frees: x[3],
                        end_ns: now_ns(),
                        ..End::default()
                    };
                    self.send(Msg::End(end))?;
                    self.summary.exec = true;
                } else {
                    self.summary.exec = false;
                    self.exited = Some((w0, x[1]));
                }
            }
            _ => bail!("the tool sent control record {kind}, which record mode does not use"),
        }
        Ok(())
    }

    /// Writes the end: the program's exit status from the tool (or `ended`
    /// when the tool could not say: killed by a signal).
    pub fn finish(mut self, ended: Ended) -> Result<(W, Summary)> {
        if self.tx.is_none() {
            bail!("the tool sent nothing (valgrind could not start the program?)");
        }
        let end = match (self.exited, ended) {
            (Some((status, instructions)), _) => {
                self.enc.end(instructions);
                self.summary.instructions = Some(instructions);
                End { reason: EndReason::Exit, status, ..End::default() }
            }
            (None, Ended::Signal(s)) => {
                End { reason: EndReason::Signal, status: s as u64, ..End::default() }
            }
            (None, Ended::Exit(c)) => {
                End { reason: EndReason::Exit, status: c as u64, ..End::default() }
            }
        };
        self.flush_refs()?;
        let s = &mut self.summary;
        s.events = self.events;
        s.objects = self.next_id;
        s.refs = self.enc.stats();
        s.refs_raw_bytes = self.refs_blocks_bytes;
        s.raised_times = self.enc.raised_times();
        if !(s.exec && self.exited.is_none()) {
            let unknown_frees = s.unknown_frees;
            self.send(Msg::End(End { end_ns: now_ns(), unknown_frees, ..end }))?;
        }
        let out = self.join_writer()?;
        Ok((out, self.summary))
    }
}

fn now_ns() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0)
}
