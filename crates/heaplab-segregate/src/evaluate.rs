//! Running an emitted allocator on the test trace, and what the run shows.
//!
//! ```text
//!   test trace ─▶ heaplab-replay --vg-marks --site-hints, under valgrind --tool=heaplab-measure,
//!                 with libNAME.so preloaded (HEAPLAB_SEG_REPORT: its segments at exit)
//!        │ heaplab_refs::measure: the recorded references at the addresses it returned,
//!        ▼ interleaved with the allocator's own
//!   each access ──┬─ every one ─────────────────────────────▶ caches ("all")
//!                 ├─ the program's heap references ─────────▶ caches ("heap")
//!                 ├─ heap references + the allocator's ─────▶ LRU pages (4 KB, 8 KB): faults
//!                 └─ per 4 KB page: the program's references, the allocator's
//!   at the end: the report's segment ranges put each page in its segment
//! ```
//!
//! This reuses the locality study's reference replay (`heaplab_refs::measure`):
//! the allocator runs for real, in its own process, and the simulators see
//! the addresses it chose.

use crate::runtime::SegReport;
use anyhow::{bail, Context, Result};
use heaplab_plumb::alloc::Source;
use heaplab_plumb::Allocator;
use heaplab_refs::measure::{measure_with_args, MeasureStats, Merged, OTHER_BIT};
use heaplab_refs::vg::VgTools;
use heaplab_sim::config::CacheConfig;
use heaplab_sim::{AccessSource, CacheResult, CacheSweep, Mode, Next, PageCurve, PageSim, Part};
use serde::{Deserialize, Serialize};
use std::collections::HashMap;
use std::path::{Path, PathBuf};

/// The configurations of paper 001 Figure 6 (direct-mapped, 32-byte lines)
/// and two of a current machine (an L1d and an L2, 64-byte lines, 8 ways).
pub fn default_caches() -> Vec<CacheConfig> {
    heaplab_sim::config::parse_cache_spec("32K:32:1,256K:32:1,32K:64:8,1M:64:8")
        .expect("a valid spec")
}

/// References per 4 KB page.
#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize)]
pub struct PageRefs {
    pub app: u64,
    pub alloc: u64,
}

/// A segment as the allocator reported it.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Segment {
    pub class: String,
    pub first: u64,
    pub end: u64,
    /// Every address range of the segment (its best-fit heap, its fast
    /// core's slots); empty in reports that predate them (then `first..end`).
    #[serde(default)]
    pub ranges: Vec<(u64, u64)>,
    pub objects: u64,
    pub bytes_peak: u64,
    pub grows: u64,
}

/// One segment's pages and references in a measured run.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SegmentUse {
    pub class: String,
    /// Pages touched (by the program or the allocator) of 4 KB and of 8 KB.
    pub pages_4k: u64,
    pub pages_8k: u64,
    /// The program's references to the segment, and the allocator's.
    pub app_refs: u64,
    pub alloc_refs: u64,
    pub objects: u64,
    pub bytes_peak: u64,
    /// 2 MB growths.
    pub grows: u64,
}

/// One cache configuration's misses, for two streams.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct CacheMisses {
    pub config: String,
    pub size: u64,
    pub line: u32,
    pub assoc: u32,
    /// Every reference (program and allocator; one unified cache).
    pub all_accesses: u64,
    pub all_misses: u64,
    /// The program's heap references alone.
    pub heap_accesses: u64,
    pub heap_misses: u64,
}

impl CacheMisses {
    pub fn all_rate(&self) -> f64 {
        self.all_misses as f64 / self.all_accesses.max(1) as f64
    }
    pub fn heap_rate(&self) -> f64 {
        self.heap_misses as f64 / self.heap_accesses.max(1) as f64
    }
}

/// One allocator (DEFAULT or a predictor) measured on the test trace.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Measured {
    pub name: String,
    pub library: PathBuf,
    pub stats: MeasureStats,
    pub segments: Vec<SegmentUse>,
    /// Pages touched outside every segment (the allocator's own data).
    pub outside_pages_4k: u64,
    /// The program's references per 8 KB page of the segments, most first
    /// (Figure 3's input; pages the program never referenced count as 0).
    pub page_refs_8k: Vec<u64>,
    /// LRU page faults against memory size, over the heap references and the
    /// allocator's (4 KB and 8 KB pages).
    #[serde(skip)]
    pub faults: Vec<PageCurve>,
    pub caches: Vec<CacheMisses>,
    /// The allocator's report at the end of the replay.
    pub report: SegReport,
    pub seconds: f64,
}

impl Measured {
    /// The curve of one page size.
    pub fn curve(&self, page: u64) -> Option<&PageCurve> {
        self.faults.iter().find(|c| c.page_size == page)
    }
    /// Pages of all segments.
    pub fn pages_8k(&self) -> u64 {
        self.segments.iter().map(|s| s.pages_8k).sum()
    }
    pub fn pages_4k(&self) -> u64 {
        self.segments.iter().map(|s| s.pages_4k).sum()
    }
    /// The program's references to the segments.
    pub fn app_refs(&self) -> u64 {
        self.segments.iter().map(|s| s.app_refs).sum()
    }
}

struct Collected {
    kept: Vec<heaplab_sim::Access>,
    stats: MeasureStats,
    pages: HashMap<u64, PageRefs>,
    all: Vec<CacheResult>,
    heap: Vec<CacheResult>,
    faults: Vec<PageCurve>,
}

fn collect(src: &mut Merged, caches: &[CacheConfig], keep: bool) -> Result<Collected> {
    let mut kept = Vec::new();
    let mut all = CacheSweep::new(caches, &[Mode::Unified]);
    let mut heap = CacheSweep::new(caches, &[Mode::Unified]);
    let mut p4 = PageSim::new(4096)?;
    let mut p8 = PageSim::new(8192)?;
    let mut pages: HashMap<u64, PageRefs> = HashMap::new();
    let (mut last_page, mut last) = (u64::MAX, PageRefs::default());
    let mut buf = Vec::with_capacity(1 << 16);
    loop {
        let next = src.next_batch(&mut buf)?;
        if keep {
            kept.extend_from_slice(&buf);
        }
        for a in &buf {
            all.access(a);
            let is_alloc = a.part == Part::Allocator;
            let is_heap = !is_alloc && a.addr & OTHER_BIT == 0;
            if !(is_alloc || is_heap) {
                continue;
            }
            if is_heap {
                heap.access(a);
            }
            p4.access(a);
            p8.access(a);
            let pg = a.addr >> 12;
            if pg != last_page {
                if last_page != u64::MAX {
                    let e = pages.entry(last_page).or_default();
                    e.app += last.app;
                    e.alloc += last.alloc;
                }
                last_page = pg;
                last = PageRefs::default();
            }
            if is_heap {
                last.app += 1;
            } else {
                last.alloc += 1;
            }
        }
        if next == Next::End {
            break;
        }
    }
    if last_page != u64::MAX {
        let e = pages.entry(last_page).or_default();
        e.app += last.app;
        e.alloc += last.alloc;
    }
    Ok(Collected {
        kept,
        stats: src.stats,
        pages,
        all: all.results(),
        heap: heap.results(),
        faults: vec![p4.curve(), p8.curve()],
    })
}

/// Adds each touched 4 KB page to the segment that holds it, and each 8 KB
/// page to the segment of its lower touched half (an 8 KB page may straddle
/// two segments: the pages are taken in address order, not in the hash
/// map's, which differs from run to run). Returns the 4 KB pages in no
/// segment and the program's references to each 8 KB page, most first.
fn page_uses(
    pages: &HashMap<u64, PageRefs>,
    seg_of: impl Fn(u64) -> Option<usize>,
    uses: &mut [SegmentUse],
) -> (u64, Vec<u64>) {
    let mut sorted: Vec<(u64, PageRefs)> = pages.iter().map(|(&pg, &r)| (pg, r)).collect();
    sorted.sort_unstable_by_key(|e| e.0);
    let mut outside = 0u64;
    let mut by8: HashMap<u64, (usize, u64)> = HashMap::new();
    for (pg, r) in sorted {
        match seg_of(pg << 12) {
            Some(i) => {
                uses[i].pages_4k += 1;
                uses[i].app_refs += r.app;
                uses[i].alloc_refs += r.alloc;
                let e = by8.entry(pg >> 1).or_insert((i, 0));
                e.1 += r.app;
            }
            None => outside += 1,
        }
    }
    for (i, _) in by8.values() {
        uses[*i].pages_8k += 1;
    }
    let mut page_refs_8k: Vec<u64> = by8.values().map(|v| v.1).collect();
    page_refs_8k.sort_unstable_by(|a, b| b.cmp(a));
    (outside, page_refs_8k)
}

fn hex(s: &str) -> u64 {
    u64::from_str_radix(s.trim_start_matches("0x"), 16).unwrap_or(0)
}

/// Reads the allocator's report (the last line in the file).
pub fn read_report(path: &Path) -> Result<(SegReport, Vec<Segment>)> {
    let text = std::fs::read_to_string(path).with_context(|| {
        format!(
            "reading {} (the segmented allocator writes it at exit; did the replay finish?)",
            path.display()
        )
    })?;
    let line = text.lines().rev().find(|l| !l.trim().is_empty()).context("an empty report")?;
    let r: SegReport = serde_json::from_str(line)
        .with_context(|| format!("{}: not a segment report: {line}", path.display()))?;
    let segs = r
        .segments
        .iter()
        .map(|s| Segment {
            class: s.class.clone(),
            first: hex(&s.first),
            end: hex(&s.end),
            ranges: s.ranges.iter().map(|[a, b]| (hex(a), hex(b))).collect(),
            objects: s.objects,
            bytes_peak: s.bytes_peak,
            grows: s.grows,
        })
        .collect();
    Ok((r, segs))
}

/// Writes `dst`: `src`'s events without references, for the replayer, where
/// each allocation's stack is replaced by one frame in no module whose offset
/// is the allocation's recorded stack depth (the SP stream). The replayer
/// passes it as the site hint's only frame key, and the segmented allocator
/// with the SP predictor turns the key back into the depth (segregated.c,
/// `seg_sp_of_key`): the site-hint ABI has no stack pointer of its own.
pub fn sp_events(src: &Path, dst: &Path) -> Result<()> {
    use heaplab_trace::{Frame, Item, NewEvent, TraceReader, TraceWriter, WriterOptions};
    let sp: HashMap<u64, u64> =
        heaplab_trace::sp::read_sp(src).map_err(|m| anyhow::anyhow!("{m}"))?.into_iter().collect();
    if sp.is_empty() {
        bail!("{}: no stack depths recorded (the SP stream): record it again with `heaplab record --refs`", src.display());
    }
    let mut r = TraceReader::open(src)?;
    let out = std::io::BufWriter::new(
        std::fs::File::create(dst).with_context(|| format!("creating {}", dst.display()))?,
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
            Ok(Some(Item::Thread(t))) => {
                w.add_thread(t.tid, &t.name);
            }
            Ok(Some(Item::Event(e))) => {
                let stack = match sp.get(&e.index) {
                    Some(&d) if e.kind.creates() => {
                        w.intern_stack(&[Frame { module: 0, offset: d }])?
                    }
                    _ => 0,
                };
                w.record(&NewEvent {
                    kind: e.kind,
                    thread: e.thread,
                    time: e.time,
                    size: if e.kind.is_release() { 0 } else { e.size },
                    align: e.align,
                    old: e.old,
                    stack,
                    failed: e.failed,
                    inherited: e.inherited,
                })?;
            }
            Ok(Some(Item::End(e))) => w.write_end(&e)?,
            Ok(Some(_)) => {}
            Ok(None) => break,
            Err(e) if e.is_cut_short() => break,
            Err(e) => bail!("{e}"),
        }
    }
    w.flush()?;
    Ok(())
}

/// What one measurement needs.
pub struct MeasureJob<'a> {
    pub tools: &'a VgTools,
    pub replay: &'a Path,
    /// The test trace, and its events-only copy (`heaplab_refs::measure::events_only`).
    pub trace: &'a Path,
    pub events: &'a Path,
    /// The copy for the SP predictor ([`sp_events`]), when there is one.
    pub sp_events: Option<&'a Path>,
    pub caches: &'a [CacheConfig],
    /// Where the allocator's report goes.
    pub scratch: &'a Path,
}

/// Measures one emitted allocator on the test trace (`sp`: the SP predictor's).
pub fn measure(job: &MeasureJob, name: &str, library: &Path, sp: bool) -> Result<Measured> {
    Ok(measure_inner(job, name, library, sp, false)?.0)
}

/// [`measure`], also returning every access the simulators saw, in order
/// (for tests that check the figures against a naive computation: small
/// traces only).
pub fn measure_keeping(
    job: &MeasureJob,
    name: &str,
    library: &Path,
    sp: bool,
) -> Result<(Measured, Vec<heaplab_sim::Access>)> {
    measure_inner(job, name, library, sp, true)
}

fn measure_inner(
    job: &MeasureJob,
    name: &str,
    library: &Path,
    sp: bool,
    keep: bool,
) -> Result<(Measured, Vec<heaplab_sim::Access>)> {
    let events = match (sp, job.sp_events) {
        (false, _) => job.events,
        (true, Some(e)) => e,
        (true, None) => bail!("{name}: the SP predictor needs the test trace's stack depths"),
    };
    let t0 = std::time::Instant::now();
    let report = job.scratch.join(format!("{name}.report.jsonl"));
    let _ = std::fs::remove_file(&report);
    // The replay's environment is fixed (heaplab_refs::measure) because its
    // stack, whose frames are simulated, starts below the environment's
    // strings: a variable one byte longer can move every stack reference
    // into other cache lines. The report's path is one of those strings, and
    // a scratch directory's name holds heaplab's PID, whose digits vary from
    // run to run (a serial study and a `--jobs 2` one differed by 14 of
    // DEFAULT's 4,900 misses; a longer TMPDIR moves them too). The replay runs
    // in the events file's directory, so the report, when it is there, is
    // named by its file name alone.
    let in_cwd = |d: &Path| {
        let d = if d.as_os_str().is_empty() { Path::new(".") } else { d };
        std::path::absolute(d).ok()
    };
    let report_env = match (report.parent().and_then(in_cwd), events.parent().and_then(in_cwd)) {
        (Some(a), Some(b)) if a == b => format!("{name}.report.jsonl"),
        _ => report.display().to_string(),
    };
    let alloc = Allocator {
        name: name.to_string(),
        source: Source::Heaplab,
        preload: Some(library.to_path_buf()),
        env: vec![("HEAPLAB_SEG_REPORT".into(), report_env)],
        missing: (!library.exists()).then(|| format!("no such file: {}", library.display())),
    };
    let caches = job.caches.to_vec();
    let c = measure_with_args(
        job.tools,
        job.replay,
        job.trace,
        events,
        &alloc,
        &["--site-hints"],
        move |src| collect(src, &caches, keep),
    )?;
    let (raw, segs) = read_report(&report)?;
    if segs.is_empty() {
        bail!("{name}: the allocator reported no segment");
    }
    let seg_of = |addr: u64| {
        segs.iter().position(|s| {
            if s.ranges.is_empty() {
                s.first != 0 && addr >= s.first && addr < s.end
            } else {
                s.ranges.iter().any(|&(a, b)| addr >= a && addr < b)
            }
        })
    };
    let mut uses: Vec<SegmentUse> = segs
        .iter()
        .map(|s| SegmentUse {
            class: s.class.clone(),
            pages_4k: 0,
            pages_8k: 0,
            app_refs: 0,
            alloc_refs: 0,
            objects: s.objects,
            bytes_peak: s.bytes_peak,
            grows: s.grows,
        })
        .collect();
    let (outside, page_refs_8k) = page_uses(&c.pages, seg_of, &mut uses);
    let pick = |v: &[CacheResult]| -> Vec<(u64, u64)> {
        v.iter().map(|r| (r.counts.total_accesses(), r.counts.total_misses())).collect()
    };
    let (a, h) = (pick(&c.all), pick(&c.heap));
    let caches = c
        .all
        .iter()
        .zip(a.iter().zip(&h))
        .map(|(r, (a, h))| CacheMisses {
            config: format!(
                "{}:{}:{}",
                heaplab_sim::config::fmt_bytes(r.config.size()),
                r.config.line(),
                r.config.assoc()
            ),
            size: r.config.size(),
            line: r.config.line(),
            assoc: r.config.assoc(),
            all_accesses: a.0,
            all_misses: a.1,
            heap_accesses: h.0,
            heap_misses: h.1,
        })
        .collect();
    let measured = Measured {
        name: name.to_string(),
        library: library.to_path_buf(),
        stats: c.stats,
        segments: uses,
        outside_pages_4k: outside,
        page_refs_8k,
        faults: c.faults,
        caches,
        report: raw,
        seconds: t0.elapsed().as_secs_f64(),
    };
    Ok((measured, c.kept))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn seg(class: &str) -> SegmentUse {
        SegmentUse {
            class: class.to_string(),
            pages_4k: 0,
            pages_8k: 0,
            app_refs: 0,
            alloc_refs: 0,
            objects: 0,
            bytes_peak: 0,
            grows: 0,
        }
    }

    /// An 8 KB page whose halves lie in two segments counts for the lower
    /// half's, whatever order the page map (a new hash seed each time) holds.
    #[test]
    fn a_straddling_8k_page_goes_to_its_lower_half() {
        // segment 0 ends at 0x11000, segment 1 starts there: 8 KB page 0x8
        // is 4 KB pages 0x10 (segment 0) and 0x11 (segment 1)
        let seg_of = |a: u64| match a {
            0x4000..=0x10fff => Some(0),
            0x11000..=0x20fff => Some(1),
            _ => None,
        };
        for _ in 0..32 {
            let mut pages = HashMap::new();
            for (pg, app) in [(0x10, 3), (0x11, 5), (0x4, 1), (0x20, 2), (0x30, 7)] {
                pages.insert(pg, PageRefs { app, alloc: 1 });
            }
            let mut uses = vec![seg("SL"), seg("HR")];
            let (outside, refs) = page_uses(&pages, seg_of, &mut uses);
            assert_eq!(outside, 1);
            assert_eq!(refs, vec![8, 2, 1]);
            assert_eq!((uses[0].pages_4k, uses[0].pages_8k, uses[0].app_refs), (2, 2, 4));
            assert_eq!((uses[1].pages_4k, uses[1].pages_8k, uses[1].app_refs), (2, 1, 7));
        }
    }
}
