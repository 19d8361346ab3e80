//! Record mode: the tool's raw stream becomes a trace with a REFS stream.
//!
//! ```text
//!   raw records ──▶ Converter ──(channel)──▶ writer thread: TraceWriter (events, modules,
//!                      │  HeapMap: address ─▶ (object id, offset)         stacks, threads,
//!                      └▶ RefsEncoder ──▶ REFS payloads ──(channel)──▶     REFS blocks; zstd)
//! ```
//!
//! Reading, attributing and encoding run on one thread, compression and
//! writing on another, so a machine with a core to spare overlaps them with
//! the program running under Valgrind.
//!
//! The tool sends every block it hands out (ALLOC) and takes back (FREE) in
//! execution order, interleaved with the references, so the converter always
//! knows which blocks are live when a reference arrives: attribution is exact,
//! also for blocks freed and then reused at the same address.

use crate::encode::{self, FastEncoder};
use crate::heapmap::HeapMap;
use crate::raw::{self, ctl, RawReader, Rec};
use crate::vg::{self, Ended, Scratch, VgTools};
use anyhow::{bail, Context, Result};
use heaplab_plumb::output::OutputFile;
use heaplab_plumb::scratch::ScratchDir;
use heaplab_trace::format::{kind, BLOCK_SKIPPABLE};
use heaplab_trace::refs::{self, RefsStats};
use heaplab_trace::{
    Codec, End, EndReason, Frame, Kind, Meta, Module, NewEvent, TraceWriter, WriterOptions,
};
use std::ffi::OsString;
use std::fs::File;
use std::io::{BufWriter, Read, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::mpsc::{sync_channel, Receiver, SyncSender};
use std::thread::JoinHandle;

/// How to record.
#[derive(Debug, Clone)]
pub struct Options {
    /// Frames per allocation stack (0: none).
    pub stack_depth: u32,
    /// Stacks for frees too.
    pub free_stacks: bool,
    /// Stream loads and stores (else: events only, timed in instructions).
    pub refs: bool,
    pub codec: Codec,
    /// How REFS blocks are stored: zstd level 1 by default, about twice as
    /// fast as level 3 for a fifth more bytes (references are most of the work).
    pub refs_codec: Codec,
    /// Events per events block.
    pub block_events: usize,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            stack_depth: 8,
            free_stacks: false,
            refs: true,
            codec: Codec::Zstd(3),
            refs_codec: Codec::Zstd(1),
            block_events: 65536,
        }
    }
}

/// What a recording produced.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct Summary {
    pub events: u64,
    pub objects: u64,
    pub refs: RefsStats,
    /// Bytes of the trace file.
    pub trace_bytes: u64,
    /// Bytes of REFS payload before compression, and as stored.
    pub refs_raw_bytes: u64,
    /// Bytes the tool sent.
    pub stream_bytes: u64,
    /// Instructions of the program (END record), when it ended normally.
    pub instructions: Option<u64>,
    pub unknown_frees: u64,
    /// The program called execve: the trace ends there.
    pub exec: bool,
    /// Times that ran backwards (none expected) and were raised.
    pub raised_times: u64,
}

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
                w.write_stream_block_with(kind::REFS, BLOCK_SKIPPABLE, &p, refs_codec)?
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
    enc: FastEncoder,
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
            enc: FastEncoder::new(),
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
        if let Some(p) = self.enc.take_block() {
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
    /// with the encoder's state in registers (`encode.rs`); the rest through
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
            while pos < end {
                let w = words[pos];
                match w >> 61 {
                    raw::T_REF => {
                        let (a, t) = (raw::addr(w), base + raw::k(w));
                        let (bits, size) = (encode::ref_bits(w), raw::size(w));
                        match self.heap.lookup(a) {
                            Some((id, off)) => h.heap(id, off, bits, size, t),
                            None => h.other(a, bits, size, t),
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
                    let bits = encode::bits_of(size, w & raw::WRITE != 0);
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
                let rc = self.opts.refs_codec;
                self.thread = Some(std::thread::spawn(move || writer_thread(w, rx, rc)));
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

/// Runs `command` under the tool and writes its trace with references to
/// `out`. Returns how the program ended and what was recorded.
pub fn record(
    tools: &VgTools,
    command: &[OsString],
    out: &Path,
    opts: &Options,
) -> Result<(Ended, Summary)> {
    if command.is_empty() {
        bail!("no program to record");
    }
    tools.check("heaplab")?;
    let scratch = Scratch::new("record")?;
    let fifo = scratch.fifo("raw")?;
    let ack = scratch.fifo("ack")?;
    let ring = Ring::create(RING_SEGMENTS, RING_SEGMENT_BYTES)?;
    let mut extra = vec![
        format!("--hl-stack-depth={}", opts.stack_depth),
        format!("--hl-free-stacks={}", if opts.free_stacks { "yes" } else { "no" }),
        format!("--hl-refs={}", if opts.refs { "yes" } else { "no" }),
        format!("--hl-ring={}", ring.path.display()),
        format!("--hl-ack={}", ack.display()),
    ];
    if let Ok(e) = std::env::var("HEAPLAB_VALGRIND_OPTS") {
        extra.extend(e.split_whitespace().map(String::from));
    }
    let cmd = vg::command(tools, "heaplab", &fifo, &extra, command);
    // Written beside `out` and renamed into place (never through a link),
    // 0600: a trace holds command lines and paths.
    let file = OutputFile::create_mode(out, 0o600)?;
    let argv: Vec<Vec<u8>> = command.iter().map(|a| a.as_encoded_bytes().to_vec()).collect();
    let exe = vg::resolve_program(&command[0]).map(|p| p.into_os_string().into_encoded_bytes());
    let conv = Converter::new(BufWriter::with_capacity(1 << 20, file), argv, exe, opts.clone());
    let (ended, res) = vg::run_with_fifo(cmd, &fifo, move |f| {
        let mut conv = conv;
        let r = consume_ring(&mut conv, f, &ring, &ack);
        (conv, r)
    })?;
    let (conv, fed) = res;
    if let Err(e) = fed {
        // keep what was written readable up to here
        if let Ok((w, _)) = conv.finish(ended) {
            if let Ok(f) = w.into_inner() {
                let _ = f.commit();
            }
        }
        return Err(e.context("reading the tool's stream"));
    }
    let (w, mut summary) =
        conv.finish(ended).with_context(|| format!("recording {}", vg::show(command)))?;
    w.into_inner().map_err(|e| e.into_error()).context("writing the trace")?.commit()?;
    summary.trace_bytes = std::fs::metadata(out).map(|m| m.len()).unwrap_or(0);
    Ok((ended, summary))
}

/// Segments of the ring, and their size: 16 × 4 MiB in /dev/shm.
pub const RING_SEGMENTS: u64 = 16;
pub const RING_SEGMENT_BYTES: u64 = 4 << 20;

/// The shared file the tool writes its records into (see `hl_flush` in
/// native/vgtool/hl_tool.c): a header page, then segments. heaplab maps it
/// read-only; the tool sends (segment, bytes) tokens through the FIFO and
/// heaplab acknowledges each segment once decoded, so nothing but tokens
/// crosses the kernel.
pub struct Ring {
    pub path: PathBuf,
    /// The private directory holding the file, removed after it.
    _dir: ScratchDir,
    base: *const u8,
    len: usize,
    seg_bytes: u64,
    segs: u64,
}

// SAFETY: the mapping is read-only on this side and stays mapped until the
// Ring is dropped; whoever holds the Ring may read it from any thread.
unsafe impl Send for Ring {}

impl Ring {
    /// Makes the file (in /dev/shm when there is one) and maps it.
    pub fn create(segs: u64, seg_bytes: u64) -> Result<Ring> {
        use std::os::unix::io::AsRawFd;
        use std::sync::atomic::{AtomicU64, Ordering};
        static N: AtomicU64 = AtomicU64::new(0);
        let parent = if Path::new("/dev/shm").is_dir() {
            PathBuf::from("/dev/shm")
        } else {
            std::env::temp_dir()
        };
        // A private directory (mkdtemp, 0700) holds the file, created
        // exclusively: nothing planted at a predictable name is followed.
        let dir = ScratchDir::new_in(&parent, "heaplab-ring-")?;
        let path = dir.join(&format!("ring-{}", N.fetch_add(1, Ordering::Relaxed)));
        let len = 4096 + segs * seg_bytes;
        let mut f = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&path)
            .with_context(|| format!("creating {}", path.display()))?;
        let mut hdr = Vec::with_capacity(24);
        hdr.extend_from_slice(b"HLRING\0\0");
        hdr.extend_from_slice(&segs.to_le_bytes());
        hdr.extend_from_slice(&seg_bytes.to_le_bytes());
        f.write_all(&hdr)?;
        f.set_len(len).with_context(|| format!("sizing {}", path.display()))?;
        // SAFETY: mapping a file we just sized to `len` bytes, read-only and
        // shared; the result is checked against MAP_FAILED.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len as usize,
                libc::PROT_READ,
                libc::MAP_SHARED,
                f.as_raw_fd(),
                0,
            )
        };
        if p == libc::MAP_FAILED {
            let e = std::io::Error::last_os_error();
            let _ = std::fs::remove_file(&path);
            return Err(e).with_context(|| format!("mapping {}", path.display()));
        }
        Ok(Ring { path, _dir: dir, base: p as *const u8, len: len as usize, seg_bytes, segs })
    }

    /// The first `bytes` of segment `i`, as words.
    pub fn segment(&self, i: u64, bytes: u64) -> Result<&[u64]> {
        if i >= self.segs || bytes > self.seg_bytes || !bytes.is_multiple_of(8) {
            bail!("the tool sent a bad segment token ({i}, {bytes} bytes)");
        }
        // SAFETY: the range lies inside the mapping (checked above), which is
        // page-aligned so the offset 4096 + i * seg_bytes (a multiple of 8)
        // is 8-aligned; the tool finished writing the segment before it sent
        // the token (the FIFO syscalls order the writes before our reads),
        // and it does not touch the segment again until we acknowledge it.
        Ok(unsafe {
            std::slice::from_raw_parts(
                self.base.add(4096 + (i * self.seg_bytes) as usize) as *const u64,
                (bytes / 8) as usize,
            )
        })
    }
}

impl Drop for Ring {
    fn drop(&mut self) {
        // SAFETY: unmapping exactly what create mapped; no slice outlives the Ring.
        unsafe {
            libc::munmap(self.base as *mut libc::c_void, self.len);
        }
        let _ = std::fs::remove_file(&self.path);
    }
}

/// Reads segment tokens from `tokens`, decodes each segment, acknowledges it.
fn consume_ring<W: Write + Send + 'static>(
    conv: &mut Converter<W>,
    mut tokens: File,
    ring: &Ring,
    ack: &Path,
) -> Result<u64> {
    // read-write, so that this open never waits for the tool (which opens it to read)
    let mut acks = std::fs::OpenOptions::new().read(true).write(true).open(ack)?;
    let mut t = [0u8; 16];
    let mut total = 0u64;
    loop {
        match tokens.read_exact(&mut t) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => break,
            Err(e) => return Err(e.into()),
        }
        let seg = u64::from_le_bytes(t[..8].try_into().expect("8 bytes"));
        let bytes = u64::from_le_bytes(t[8..].try_into().expect("8 bytes"));
        conv.feed_segment(ring.segment(seg, bytes)?)?;
        total += bytes;
        acks.write_all(&seg.to_le_bytes())?;
    }
    Ok(total)
}
