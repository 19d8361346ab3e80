//! Measure mode: the program's recorded references, re-issued at the
//! addresses allocator X hands out, interleaved with X's own references.
//!
//! ```text
//!   trace ─▶ events-only copy ─▶ valgrind --tool=heaplab-measure heaplab-replay --vg-marks
//!                                  (X LD_PRELOADed, left alone)        │ FIFO: X's references,
//!                                                                      │ EVENT k marker + block
//!   trace ─▶ RefsReader: Event k │ Ref(object, offset) │ Ref(address) ─┤
//!                                                                      ▼
//!                       MeasureSource (an AccessSource): for Event k, X's references up to
//!                       marker k, then the block k created at address[id]; for a heap
//!                       reference, address[id] + offset; for another, its recorded address
//!                       (moved to bit 46, apart from X's memory) ─▶ caches and pages
//! ```
//!
//! The replayer issues no recorded reference itself: its own code is never
//! streamed (the tool skips the replayer's text), so the simulators see
//! exactly the application's references and the allocator's, in the order
//! they would run. The allocator's part is everything the tool streams while
//! the replayer is calling it, including the libc code it calls (memcpy in
//! realloc, memset in calloc, locks): in a replay nothing else runs.

use crate::raw::{self, ctl, RawReader, Rec};
use crate::vg::{self, Ended, Scratch, VgTools};
use anyhow::{bail, Context, Result};
use heaplab_plumb::Allocator;
use heaplab_sim::config::CacheConfig;
use heaplab_sim::{
    drive, Access, AccessSource, CacheResult, CacheSweep, Kind, Mode, Next, PageCurve, PageSim,
    Simulator,
};
use heaplab_trace::refs::{RefItem, RefsReader, Target};
use heaplab_trace::{Item, TraceReader, TraceWriter, WriterOptions};
use std::fs::File;
use std::io::{BufReader, Read};
use std::path::{Path, PathBuf};
use std::process::Stdio;

/// Where other (non-heap) references of the recorded program go in the
/// measured address space: the recorded address with this bit set, so they
/// keep their cache sets and pages apart from the allocator's memory (no
/// user address has bit 46 set).
pub const OTHER_BIT: u64 = 1 << 46;

/// Counts of one measured stream.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct MeasureStats {
    /// The application's references to heap objects, re-issued.
    pub app_heap_refs: u64,
    /// The application's other references (stack, globals).
    pub app_other_refs: u64,
    /// The allocator's references.
    pub alloc_refs: u64,
    /// Heap references to an object whose allocation returned NULL under
    /// this allocator (left out).
    pub refs_to_null: u64,
    /// Events replayed.
    pub events: u64,
    /// Instructions of the recorded program (its END record).
    pub app_instructions: u64,
    /// Instructions the allocator executed (the tool's count).
    pub alloc_instructions: u64,
}

impl MeasureStats {
    /// Application references.
    pub fn app_refs(&self) -> u64 {
        self.app_heap_refs + self.app_other_refs
    }
    /// Every reference simulated.
    pub fn refs(&self) -> u64 {
        self.app_refs() + self.alloc_refs
    }
}

/// The merged stream, as an [`AccessSource`].
pub struct MeasureSource<T: Read, R: Read> {
    refs: RefsReader<T>,
    items: Vec<RefItem>,
    pos: usize,
    raw: RawReader<R>,
    /// Object id -> address under the allocator (0: NULL).
    addr: Vec<u64>,
    pub stats: MeasureStats,
    hello: bool,
    done: bool,
}

impl<T: Read, R: Read> MeasureSource<T, R> {
    /// Merges the trace's references with the tool's stream `raw`.
    pub fn new(refs: RefsReader<T>, raw: R) -> Self {
        MeasureSource {
            refs,
            items: Vec::new(),
            pos: 0,
            raw: RawReader::new(raw),
            addr: Vec::new(),
            stats: MeasureStats::default(),
            hello: false,
            done: false,
        }
    }

    /// Reads the tool's stream up to the marker of event `k` (pushing the
    /// allocator's references to `buf`), or to its end when `k` is None.
    /// Returns the marker's (block, created).
    fn tool_until(&mut self, k: Option<u64>, buf: &mut Vec<Access>) -> Result<Option<(u64, bool)>> {
        let stats = &mut self.stats;
        let hello = &mut self.hello;
        loop {
            let Some(words) = self.raw.fill()? else {
                return match k {
                    Some(k) => {
                        bail!("the tool's stream ended before event {k} (did the replay fail?)")
                    }
                    None => Ok(None),
                };
            };
            let mut pos = 0;
            let mut found = None;
            while let Some(rec) = raw::next(words, &mut pos) {
                match rec {
                    Rec::Ref(w) | Rec::SRef(w, _) => {
                        let size = match rec {
                            Rec::SRef(_, s) => s.clamp(1, u64::from(u32::MAX)) as u32,
                            _ => raw::size(w),
                        };
                        let kind = if w & raw::WRITE != 0 { Kind::Write } else { Kind::Read };
                        let part = if w & raw::ALLOC != 0 {
                            heaplab_sim::Part::Allocator
                        } else {
                            heaplab_sim::Part::Application
                        };
                        buf.push(Access::new(raw::addr(w), size, kind).with_part(part));
                        stats.alloc_refs += 1;
                    }
                    Rec::Time(_) => {}
                    Rec::Control { kind: ctl::HELLO, w0, extra } => {
                        if w0 != raw::PROTOCOL || extra.first() != Some(&raw::MODE_MEASURE) {
                            bail!(
                                "the tool's stream is not measure mode of protocol {}",
                                raw::PROTOCOL
                            );
                        }
                        *hello = true;
                    }
                    Rec::Control { kind: ctl::EVENT, w0, extra } if extra.len() >= 3 => {
                        stats.alloc_instructions = extra[2];
                        found = Some((w0, extra[0], extra[1] & 1 != 0));
                        break;
                    }
                    Rec::Control { kind: ctl::EXIT, extra, .. } if extra.len() >= 3 => {
                        stats.alloc_instructions = stats.alloc_instructions.max(extra[2]);
                    }
                    Rec::Control { .. } => {}
                }
            }
            self.raw.consume(pos);
            if let Some((idx, block, created)) = found {
                match k {
                    Some(k) if idx == k => return Ok(Some((block, created))),
                    Some(k) => bail!("the tool marked event {idx} where event {k} was expected"),
                    None => bail!("the tool marked event {idx} after the trace's last event"),
                }
            }
        }
    }
}

impl<T: Read, R: Read> AccessSource for MeasureSource<T, R> {
    type Error = anyhow::Error;

    fn next_batch(&mut self, buf: &mut Vec<Access>) -> Result<Next> {
        buf.clear();
        if self.done {
            return Ok(Next::End);
        }
        let target = buf.capacity().max(4096);
        while buf.len() < target {
            if self.pos == self.items.len() {
                self.refs.next_batch(&mut self.items)?;
                self.pos = 0;
                if self.items.is_empty() {
                    self.tool_until(None, buf)?;
                    if !self.hello {
                        bail!("the tool sent nothing (valgrind could not run the replayer?)");
                    }
                    self.done = true;
                    return Ok(Next::End);
                }
            }
            // take the item out of the batch (the event's box is moved, not cloned)
            let item =
                std::mem::replace(&mut self.items[self.pos], RefItem::End { instructions: 0 });
            self.pos += 1;
            match item {
                RefItem::Ref(r) => {
                    let kind = if r.write { Kind::Write } else { Kind::Read };
                    match r.target {
                        Target::Object { id, offset } => {
                            let base = self.addr.get(id as usize).copied().unwrap_or(0);
                            if base == 0 {
                                self.stats.refs_to_null += 1;
                                continue;
                            }
                            buf.push(Access::new(base + offset, r.size, kind));
                            self.stats.app_heap_refs += 1;
                        }
                        Target::Other { addr } => {
                            buf.push(Access::new(addr | OTHER_BIT, r.size, kind));
                            self.stats.app_other_refs += 1;
                        }
                    }
                }
                RefItem::Event { event, .. } => {
                    let (block, created) = self
                        .tool_until(Some(event.index), buf)?
                        .expect("tool_until returns the marker of an event");
                    self.stats.events += 1;
                    if let Some(id) = event.id {
                        if self.addr.len() <= id as usize {
                            self.addr.resize(id as usize + 1, 0);
                        }
                        self.addr[id as usize] = if created { block } else { 0 };
                    }
                }
                RefItem::End { instructions } => self.stats.app_instructions = instructions,
            }
        }
        Ok(Next::More)
    }
}

/// Writes `dst`: `src` without its REFS blocks (what the replayer needs,
/// without making it read the references twice under Valgrind).
pub fn events_only(src: &Path, dst: &Path) -> Result<()> {
    let mut r = TraceReader::open(src)?;
    let out = std::io::BufWriter::new(
        File::create(dst).with_context(|| format!("creating {}", dst.display()))?,
    );
    let mut w = TraceWriter::new(
        out,
        r.meta(),
        WriterOptions { codec: heaplab_trace::Codec::Zstd(1), block_events: 65536 },
    )?;
    loop {
        match r.next_item() {
            Ok(Some(Item::Module(m))) => {
                w.add_module(&m);
            }
            Ok(Some(Item::Stack(id))) => {
                let frames = r.stack(id).to_vec();
                w.intern_stack(&frames)?;
            }
            Ok(Some(Item::Thread(t))) => {
                w.add_thread(t.tid, &t.name);
            }
            Ok(Some(Item::Event(e))) => {
                let ev = heaplab_trace::NewEvent {
                    kind: e.kind,
                    thread: e.thread,
                    time: e.time,
                    size: if e.kind.is_release() { 0 } else { e.size },
                    align: e.align,
                    old: e.old,
                    stack: e.stack,
                    failed: e.failed,
                    inherited: e.inherited,
                };
                w.record(&ev)?;
            }
            Ok(Some(Item::End(e))) => w.write_end(&e)?,
            Ok(Some(Item::Skipped { .. })) => {}
            Ok(None) => break,
            Err(e) if e.is_cut_short() => {
                w.flush()?;
                break;
            }
            Err(e) => bail!("{e}"),
        }
    }
    w.flush()?;
    Ok(())
}

/// What to simulate.
#[derive(Debug, Clone)]
pub struct SimSpec {
    pub caches: Vec<CacheConfig>,
    pub page_sizes: Vec<u64>,
}

/// One allocator measured on one trace.
#[derive(Debug, Clone)]
pub struct Cell {
    pub allocator: String,
    pub stats: MeasureStats,
    /// Every configuration in both modes (unified, split).
    pub caches: Vec<CacheResult>,
    pub pages: Vec<PageCurve>,
    /// Wall time of the measurement.
    pub seconds: f64,
}

/// Runs the replayer under the measure tool with `alloc` preloaded, merges
/// the streams and simulates. `events` is the events-only copy of `trace`.
pub fn measure(
    tools: &VgTools,
    replay: &Path,
    trace: &Path,
    events: &Path,
    alloc: &Allocator,
    sim: &SimSpec,
) -> Result<Cell> {
    let spec = sim.clone();
    let t0 = std::time::Instant::now();
    let (stats, caches, pages) =
        measure_with(tools, replay, trace, events, alloc, move |src| simulate(src, &spec))?;
    Ok(Cell {
        allocator: alloc.name.clone(),
        stats,
        caches,
        pages,
        seconds: t0.elapsed().as_secs_f64(),
    })
}

/// The merged stream of one measurement, as the consumer sees it.
pub type Merged = MeasureSource<BufReader<File>, BufReader<File>>;

/// Runs the replayer under the measure tool with `alloc` preloaded and hands
/// the merged stream to `consume` (on another thread, while the replay runs).
pub fn measure_with<T: Send + 'static>(
    tools: &VgTools,
    replay: &Path,
    trace: &Path,
    events: &Path,
    alloc: &Allocator,
    consume: impl FnOnce(&mut Merged) -> Result<T> + Send + 'static,
) -> Result<T> {
    measure_with_args(tools, replay, trace, events, alloc, &[], consume)
}

/// [`measure_with`], with more options for the replayer (`heaplab segregate`
/// passes `--site-hints`, so that its allocator sees the recorded call sites).
pub fn measure_with_args<T: Send + 'static>(
    tools: &VgTools,
    replay: &Path,
    trace: &Path,
    events: &Path,
    alloc: &Allocator,
    replay_args: &[&str],
    consume: impl FnOnce(&mut Merged) -> Result<T> + Send + 'static,
) -> Result<T> {
    if let Some(why) = &alloc.missing {
        bail!("{}: {why}", alloc.name);
    }
    tools.check("heaplab-measure")?;
    let scratch = Scratch::new("measure")?;
    let fifo = scratch.fifo("raw")?;
    let err_path = scratch.dir.join("replay.err");
    let extra = vec!["--hl-start=no".to_string()];
    // The same bytes above the replayer's stack wherever it runs: its frames
    // are among the references simulated, and its stack starts below argv
    // and the environment. So the replayer gets a fixed environment and
    // argument list: no variable of the shell or engine that started heaplab
    // (GNU parallel sets several), and the events file by its name alone, in
    // its directory, wherever the scratch directory is.
    let (events_dir, events_name) = (
        events.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(Path::new(".")),
        events.file_name().context("the events file has no name")?,
    );
    let mut cmd = vg::command(
        tools,
        "heaplab-measure",
        &fifo,
        &extra,
        &[std::path::absolute(replay)?.into(), std::ffi::OsString::from("--vg-marks")]
            .into_iter()
            .chain(replay_args.iter().map(std::ffi::OsString::from))
            .chain([events_name.into()])
            .collect::<Vec<std::ffi::OsString>>(),
    );
    // PWD too: where `valgrind` is a shell script (Debian's wrapper, which
    // execs valgrind.bin), the shell exports PWD, and the directory's path
    // (a scratch directory's, with heaplab's PID and TMPDIR in it) would
    // move the stack with its length. A shell keeps a PWD that names its
    // working directory, and /proc/self/cwd names every process's own.
    cmd.env_clear()
        .env("PATH", "/usr/local/bin:/usr/bin:/bin")
        .env("PWD", "/proc/self/cwd")
        .env("VALGRIND_LIB", std::path::absolute(&tools.lib)?)
        .current_dir(events_dir);
    if let Some(p) = &alloc.preload {
        cmd.env("LD_PRELOAD", p);
    }
    for (k, v) in &alloc.env {
        cmd.env(k, v);
    }
    cmd.stdout(Stdio::null()).stderr(File::create(&err_path)?);
    let trace_path = trace.to_path_buf();
    let (ended, res) = vg::run_with_fifo(cmd, &fifo, move |f| -> Result<T> {
        let refs = RefsReader::open(&trace_path)?;
        if !refs.has_refs() {
            bail!(
                "{} holds no references: record it with `heaplab record --refs`",
                trace_path.display()
            );
        }
        let mut src = MeasureSource::new(refs, BufReader::with_capacity(1 << 20, f));
        consume(&mut src)
    })?;
    let stderr = std::fs::read_to_string(&err_path).unwrap_or_default();
    let tail: String = stderr
        .lines()
        .rev()
        .take(6)
        .collect::<Vec<_>>()
        .into_iter()
        .rev()
        .collect::<Vec<_>>()
        .join("\n");
    match (res, ended) {
        (Ok(v), Ended::Exit(0)) => Ok(v),
        (Ok(_), e) => {
            bail!("the replay under {} ended with status {}: {}", alloc.name, e.code(), tail)
        }
        (Err(e), Ended::Exit(0)) => Err(e.context(format!("measuring {}", alloc.name))),
        (Err(e), end) => Err(e.context(format!(
            "measuring {}: the replay ended with status {}: {tail}",
            alloc.name,
            end.code()
        ))),
    }
}

type Simulated = (MeasureStats, Vec<CacheResult>, Vec<PageCurve>);

/// The consumer side: simulate the merged stream.
fn simulate(src: &mut Merged, spec: &SimSpec) -> Result<Simulated> {
    let mut sweep = (!spec.caches.is_empty())
        .then(|| CacheSweep::new(&spec.caches, &[Mode::Unified, Mode::Split]));
    let mut pages: Vec<PageSim> =
        spec.page_sizes.iter().map(|&p| PageSim::new(p)).collect::<Result<_, _>>()?;
    let mut sims: Vec<&mut dyn Simulator> = Vec::new();
    if let Some(s) = sweep.as_mut() {
        sims.push(s);
    }
    for p in pages.iter_mut() {
        sims.push(p);
    }
    drive(src, &mut sims)?;
    let caches = sweep.map(|s| s.results()).unwrap_or_default();
    Ok((src.stats, caches, pages.iter().map(|p| p.curve()).collect()))
}

/// The replayer `make` built.
pub fn replay_path(bin_dir: &Path) -> PathBuf {
    bin_dir.join("heaplab-replay")
}
