//! `heaplab sim`: the cache and page simulators of `heaplab-sim` on an
//! address stream given as a file, without the rest of heaplab.

use crate::human;
use anyhow::{Context, Result};
use clap::ValueEnum;
use heaplab_refs::source::RefsSource;
use heaplab_sim::config::{self, fmt_bytes, CacheConfig};
use heaplab_sim::din::{DinSource, DinStats, Fetches};
use heaplab_sim::{
    drive, CacheResult, CacheSweep, Kind, Mode, PageCurve, PageSim, Part, Simulator,
};
use heaplab_trace::refs::RefsReader;
use serde::Serialize;
use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::path::PathBuf;
use std::time::Instant;

/// Simulate caches and page faults on an address stream, in one pass.
///
/// Every cache in --caches is simulated at once (set-associative, LRU,
/// write-allocate), and every page size in --pages gives the page faults of
/// an LRU memory of every size, from one frame to every page touched.
#[derive(clap::Args)]
#[command(after_help = "\
INPUT is DineroIV's `din` text, or a heaplab trace recorded with references
(`heaplab record --refs`; chosen by its first bytes, or by --format).

A heaplab trace stores heap references as (object, offset), so a placement is
needed: `sim` places the objects side by side in allocation order, 16-byte
aligned and never reused (no allocator at all); other references keep their
recorded addresses. To see a real allocator's placement and its own
references, use `heaplab locality`.

din is one access per line (`-` reads stdin):
  LABEL ADDRESS [SIZE] [PART] [# comment]
  LABEL    0 read, 1 write, 2 instruction fetch (left out unless --ifetch),
           3 unknown (simulated as a read), 4 cache flush
  ADDRESS  hexadecimal, with or without 0x
  SIZE     decimal bytes (1..4096); without it, 4 bytes at the address aligned
           down to 4, as DineroIV does
  PART     app (default) or alloc: who made the access, for --split

Caches (the Notes in crates/heaplab-sim/src/cache.rs): an access that
straddles lines looks up each line and counts as one access, and one miss if
any line missed; writes allocate; true LRU; caches start empty. Pages: an
access that straddles pages references each; memory starts empty, so
compulsory faults are included at every size.

Examples:
  heaplab sim --caches 16K:32:1,32K:32:1,64K:32:1 --pages 4K trace.din
  heaplab sim --caches sweep --pages 4K,8K --json out.json trace.din
  heaplab sim --caches 32K:32:1,32K:64:1,512:32:1 --split --pages none trace.din
  heaplab sim --caches 32K:32:1 --pages 4K,8K prog.hltrace

Exit status: 0, or 2 on a bad argument or a malformed input line (the error
names the file, the line and what would have been right).")]
pub struct Args {
    /// The address stream (`-` for stdin).
    #[arg(value_name = "INPUT")]
    input: PathBuf,
    /// Caches, as SIZE:LINE:ASSOC,... (e.g. 32K:32:1,256K:64:8), `sweep`
    /// (512 B..1 MB x 32/64-byte lines x 1/2/4/8 ways), `paper000`
    /// (16K..256K:32:1), or `none`.
    #[arg(long, value_name = "SPEC", default_value = "paper000", value_parser = parse_caches)]
    caches: CacheSpec,
    /// Page sizes, as SIZE,... (e.g. 4K,8K), or `none`.
    #[arg(long, value_name = "SPEC", default_value = "4K", value_parser = parse_pages)]
    pages: PageSpec,
    /// Also simulate each cache split in two (paper 003's IMM): the
    /// allocator's accesses (PART `alloc`) in a cache of their own, the
    /// application's in another. Results then come in both modes.
    #[arg(long)]
    split: bool,
    /// Simulate instruction fetches (label 2) too, in the same caches.
    #[arg(long)]
    ifetch: bool,
    /// Write the results as JSON to FILE (no FILE, or -: standard output;
    /// the table then goes to stderr).
    #[arg(long, value_name = "FILE", num_args = 0..=1, default_missing_value = "-")]
    json: Option<PathBuf>,
    /// The input format: din text, a heaplab trace with references, or
    /// auto (a file that starts with a trace's magic bytes is a trace).
    #[arg(long, value_enum, default_value_t = Format::Auto)]
    format: Format,
    /// Memory sizes to show per page size in the table: this many, spread
    /// evenly in log scale (the JSON has every size).
    #[arg(long, default_value_t = 12, value_name = "N")]
    rows: usize,
}

/// Input formats.
#[derive(Clone, Copy, PartialEq, Eq, ValueEnum)]
enum Format {
    /// A trace by its magic bytes, else din.
    Auto,
    /// DineroIV's `din` text.
    Din,
    /// A heaplab trace recorded with `heaplab record --refs`.
    Hltrace,
}

/// Whether the file starts with a heaplab trace's magic bytes.
fn looks_like_trace(path: &std::path::Path) -> bool {
    let mut magic = [0u8; 8];
    std::fs::File::open(path)
        .and_then(|mut f| std::io::Read::read_exact(&mut f, &mut magic))
        .is_ok_and(|()| magic == heaplab_trace::format::FILE_MAGIC)
}

#[derive(Clone)]
struct CacheSpec(Vec<CacheConfig>);

#[derive(Clone)]
struct PageSpec(Vec<u64>);

fn parse_caches(s: &str) -> Result<CacheSpec, String> {
    if s.trim() == "none" {
        return Ok(CacheSpec(Vec::new()));
    }
    config::parse_cache_spec(s).map(CacheSpec).map_err(|e| e.to_string())
}

fn parse_pages(s: &str) -> Result<PageSpec, String> {
    config::parse_page_spec(s).map(PageSpec).map_err(|e| e.to_string())
}

/// An input read once from a pipe (stdin, `<(...)`, a FIFO): its first
/// bytes, already read, and the rest.
struct Stream {
    head: Vec<u8>,
    rest: Box<dyn Read>,
}

fn open_stream(a: &Args, stdin: bool) -> Result<Option<Stream>> {
    let p = a.input.to_string_lossy();
    let ours = ["/dev/stdin", "/dev/fd/", "/proc/self/fd/"].iter().any(|x| p.starts_with(x));
    if !stdin && !ours && !heaplab_plumb::input::is_stream(&a.input) {
        return Ok(None);
    }
    let mut rest: Box<dyn Read> = if stdin {
        Box::new(std::io::stdin())
    } else {
        Box::new(
            std::fs::File::open(&a.input)
                .with_context(|| format!("cannot open {}", a.input.display()))?,
        )
    };
    let mut head = vec![0u8; 8];
    let mut n = 0;
    while n < head.len() {
        match rest.read(&mut head[n..])? {
            0 => break,
            k => n += k,
        }
    }
    head.truncate(n);
    Ok(Some(Stream { head, rest }))
}

pub fn run(a: Args) -> Result<i32> {
    let stdin = a.input.as_os_str() == "-";
    let name = if stdin { "<stdin>".to_string() } else { a.input.display().to_string() };
    let json = crate::cli::dest("json", &a.json, std::slice::from_ref(&a.input))?;
    // A pipe is read once: its first bytes say what it is; a trace is then
    // copied to a private file (its reader seeks), din text streams on.
    let mut stream = open_stream(&a, stdin)?;
    let format = match (a.format, &stream) {
        (Format::Auto, Some(s)) if s.head == heaplab_trace::format::FILE_MAGIC => Format::Hltrace,
        (Format::Auto, None) if looks_like_trace(&a.input) => Format::Hltrace,
        (Format::Auto, _) => Format::Din,
        (f, _) => f,
    };
    let mut spool = None;
    let mut din_src;
    let mut refs_src;
    let src: &mut dyn Input = if format == Format::Hltrace {
        let path = match stream.take() {
            Some(mut s) => {
                let dir = heaplab_plumb::scratch::ScratchDir::new("input")?;
                let mut f = dir.create("trace")?;
                f.write_all(&s.head)?;
                std::io::copy(&mut s.rest, &mut f).with_context(|| format!("reading {name}"))?;
                let p = dir.join("trace");
                spool = Some(dir);
                p
            }
            None => a.input.clone(),
        };
        let refs = RefsReader::open(&path)?;
        if !refs.has_refs() {
            anyhow::bail!(
                "{name} holds no reference stream: record it with `heaplab record --refs`"
            );
        }
        refs_src = TraceInput(RefsSource::new(refs));
        &mut refs_src
    } else {
        let reader: Box<dyn BufRead> = match stream.take() {
            Some(s) => Box::new(BufReader::with_capacity(
                1 << 20,
                std::io::Cursor::new(s.head).chain(s.rest),
            )),
            None => {
                let f =
                    std::fs::File::open(&a.input).with_context(|| format!("cannot open {name}"))?;
                Box::new(BufReader::with_capacity(1 << 20, f))
            }
        };
        let fetches = if a.ifetch { Fetches::Simulate } else { Fetches::Skip };
        din_src = DinInput(DinSource::new(reader, name.clone()).fetches(fetches));
        &mut din_src
    };
    let _spool = spool;

    let modes: &[Mode] = if a.split { &[Mode::Unified, Mode::Split] } else { &[Mode::Unified] };
    let mut sweep = (!a.caches.0.is_empty()).then(|| CacheSweep::new(&a.caches.0, modes));
    let mut pages: Vec<PageSim> = a
        .pages
        .0
        .iter()
        .map(|&p| PageSim::new(p))
        .collect::<Result<_, _>>()
        .map_err(anyhow::Error::msg)?;
    let mut sims: Vec<&mut dyn Simulator> = Vec::new();
    if let Some(s) = sweep.as_mut() {
        sims.push(s);
    }
    for p in pages.iter_mut() {
        sims.push(p);
    }
    let start = Instant::now();
    src.drive(&mut sims)?;
    let secs = start.elapsed().as_secs_f64();
    let stats = src.stats();
    let caches = sweep.as_ref().map(|s| s.results()).unwrap_or_default();
    let curves: Vec<PageCurve> = pages.iter().map(|p| p.curve()).collect();

    if let Some(d) = &json {
        let doc = json_doc(&name, src.format(), &stats, &caches, &curves, a.ifetch);
        d.write(&(serde_json::to_string(&doc)? + "\n"))?;
    }
    let mut text = Vec::new();
    print_tables(&mut text, &name, src.format(), &stats, &caches, &curves, a.rows)?;
    crate::cli::text(crate::cli::any_stdout(&[&json])).write_all(&text)?;
    if secs > 0.0 && stats.accesses > 0 {
        // On stderr: it changes from run to run.
        eprintln!(
            "heaplab sim: read {} {} and simulated {} accesses in {:.2} s ({:.1} M accesses/s)",
            human::count(stats.lines),
            if format == Format::Hltrace { "trace records" } else { "lines" },
            human::count(stats.accesses),
            secs,
            stats.accesses as f64 / secs / 1e6
        );
    }
    Ok(0)
}

/// The JSON document, field order as written (serde derives keep it).
#[derive(Serialize)]
struct Doc<'a> {
    input: InputJson<'a>,
    caches: Vec<CacheJson>,
    pages: Vec<PagesJson>,
}

#[derive(Serialize)]
struct InputJson<'a> {
    path: &'a str,
    format: &'static str,
    lines: u64,
    accesses: u64,
    allocator_accesses: u64,
    fetches_skipped: u64,
    fetches_simulated: bool,
    flushes: u64,
}

#[derive(Serialize)]
struct CountsJson {
    accesses: u64,
    misses: u64,
}

#[derive(Serialize)]
struct CacheJson {
    size: u64,
    line: u32,
    assoc: u32,
    accesses: u64,
    misses: u64,
    mode: &'static str,
    miss_rate: f64,
    /// `application`, `allocator`.
    parts: BTreeMap<&'static str, CountsJson>,
    /// `read`, `write`, `fetch`, `misc`.
    kinds: BTreeMap<&'static str, CountsJson>,
}

#[derive(Serialize)]
struct PagesJson {
    page_size: u64,
    accesses: u64,
    references: u64,
    distinct_pages: u64,
    /// `[frames, faults]` for every memory size from 1 frame to `distinct_pages`.
    curve: Vec<[u64; 2]>,
}

fn json_doc<'a>(
    name: &'a str,
    format: &'static str,
    stats: &DinStats,
    caches: &[CacheResult],
    curves: &[PageCurve],
    ifetch: bool,
) -> Doc<'a> {
    let caches = caches
        .iter()
        .map(|r| {
            let c = &r.counts;
            CacheJson {
                size: r.config.size(),
                line: r.config.line(),
                assoc: r.config.assoc(),
                accesses: c.total_accesses(),
                misses: c.total_misses(),
                mode: r.mode.name(),
                miss_rate: c.miss_rate(),
                parts: Part::ALL
                    .iter()
                    .map(|&p| {
                        (
                            p.name(),
                            CountsJson { accesses: c.part_accesses(p), misses: c.part_misses(p) },
                        )
                    })
                    .collect(),
                kinds: Kind::ALL
                    .iter()
                    .map(|&k| {
                        (
                            k.name(),
                            CountsJson { accesses: c.kind_accesses(k), misses: c.kind_misses(k) },
                        )
                    })
                    .collect(),
            }
        })
        .collect();
    let pages = curves
        .iter()
        .map(|c| PagesJson {
            page_size: c.page_size,
            accesses: c.accesses,
            references: c.references,
            distinct_pages: c.distinct_pages,
            curve: c.points().map(|(m, f)| [m, f]).collect(),
        })
        .collect();
    Doc {
        input: InputJson {
            path: name,
            format,
            lines: stats.lines,
            accesses: stats.accesses,
            allocator_accesses: stats.allocator,
            fetches_skipped: stats.fetches_skipped,
            fetches_simulated: ifetch,
            flushes: stats.flushes,
        },
        caches,
        pages,
    }
}

fn print_tables(
    out: &mut impl Write,
    name: &str,
    format: &str,
    stats: &DinStats,
    caches: &[CacheResult],
    curves: &[PageCurve],
    rows: usize,
) -> Result<()> {
    let n = stats.accesses;
    let flushes = stats.flushes;
    let unit = if format == "hltrace" { "trace records" } else { "lines" };
    write!(out, "{name}: {} accesses from {} {unit}", human::count(n), human::count(stats.lines))?;
    if stats.fetches_skipped > 0 {
        write!(
            out,
            ", {} instruction fetches left out (--ifetch keeps them)",
            human::count(stats.fetches_skipped)
        )?;
    }
    if flushes > 0 {
        write!(
            out,
            ", {} cache flush{}",
            human::count(flushes),
            if flushes == 1 { "" } else { "es" }
        )?;
    }
    writeln!(out)?;
    let has_alloc = caches.iter().any(|r| r.counts.part_accesses(Part::Allocator) > 0);
    if !caches.is_empty() {
        writeln!(out)?;
        write!(
            out,
            "{:<12} {:<8} {:>14} {:>12} {:>9}",
            "cache", "mode", "accesses", "misses", "miss rate"
        )?;
        if has_alloc {
            write!(out, " {:>12} {:>12} {:>12}", "app misses", "alloc acc.", "alloc misses")?;
        }
        writeln!(out)?;
        for r in caches {
            let c = &r.counts;
            write!(
                out,
                "{:<12} {:<8} {:>14} {:>12} {:>9}",
                r.config.to_string(),
                r.mode.name(),
                human::count(c.total_accesses()),
                human::count(c.total_misses()),
                format!("{:.3}%", 100.0 * c.miss_rate()),
            )?;
            if has_alloc {
                write!(
                    out,
                    " {:>12} {:>12} {:>12}",
                    human::count(c.part_misses(Part::Application)),
                    human::count(c.part_accesses(Part::Allocator)),
                    human::count(c.part_misses(Part::Allocator))
                )?;
            }
            writeln!(out)?;
        }
        if caches.iter().any(|r| r.mode == Mode::Split) && !has_alloc {
            writeln!(
                out,
                "note: no access is marked `alloc`, so the split caches saw only the application's accesses"
            )?;
        }
    }
    for c in curves {
        writeln!(out)?;
        if c.distinct_pages == 0 {
            writeln!(out, "pages of {}: no page touched", fmt_bytes(c.page_size))?;
            continue;
        }
        writeln!(
            out,
            "pages of {}: {} distinct page{} ({}), {} reference{}; LRU faults by memory size:",
            fmt_bytes(c.page_size),
            human::count(c.distinct_pages),
            plural(c.distinct_pages),
            human::bytes(c.distinct_pages * c.page_size),
            human::count(c.references),
            plural(c.references)
        )?;
        writeln!(
            out,
            "{:>10} {:>12} {:>14} {:>16}",
            "frames", "memory", "faults", "faults/access"
        )?;
        for m in table_frames(c.distinct_pages, rows) {
            let f = c.faults_at(m);
            let per = if c.accesses == 0 { 0.0 } else { f as f64 / c.accesses as f64 };
            writeln!(
                out,
                "{:>10} {:>12} {:>14} {:>16}",
                human::count(m),
                human::bytes(m * c.page_size),
                human::count(f),
                format!("{per:.3e}")
            )?;
        }
    }
    Ok(())
}

fn plural(n: u64) -> &'static str {
    if n == 1 {
        ""
    } else {
        "s"
    }
}

/// About `rows` memory sizes from 1 frame to `distinct`, spread in log scale,
/// always including both ends.
fn table_frames(distinct: u64, rows: usize) -> Vec<u64> {
    if distinct == 0 {
        return Vec::new();
    }
    let rows = rows.max(2) as u64;
    let mut v: Vec<u64> = (0..rows)
        .map(|i| ((distinct as f64).powf(i as f64 / (rows - 1) as f64)).round() as u64)
        .map(|m| m.clamp(1, distinct))
        .collect();
    v.dedup();
    if v.last() != Some(&distinct) {
        v.push(distinct);
    }
    v
}

/// The two inputs, behind one face: run the simulators, then report counts
/// in din's terms (for a trace, "lines" are the records read).
trait Input {
    /// Runs the simulators to the end of the stream.
    fn drive(&mut self, sims: &mut [&mut dyn Simulator]) -> Result<()>;
    fn stats(&self) -> DinStats;
    fn format(&self) -> &'static str;
}

struct DinInput<R: BufRead>(DinSource<R>);

impl<R: BufRead> Input for DinInput<R> {
    fn drive(&mut self, sims: &mut [&mut dyn Simulator]) -> Result<()> {
        drive(&mut self.0, sims)?;
        Ok(())
    }
    fn stats(&self) -> DinStats {
        *self.0.stats()
    }
    fn format(&self) -> &'static str {
        "din"
    }
}

struct TraceInput<R: std::io::Read>(RefsSource<R>);

impl<R: std::io::Read> Input for TraceInput<R> {
    fn drive(&mut self, sims: &mut [&mut dyn Simulator]) -> Result<()> {
        drive(&mut self.0, sims)?;
        Ok(())
    }
    fn stats(&self) -> DinStats {
        let s = self.0.reader().stats();
        DinStats {
            lines: s.heap_loads + s.heap_stores + s.other_loads + s.other_stores + s.events_placed,
            accesses: self.0.accesses,
            ..DinStats::default()
        }
    }
    fn format(&self) -> &'static str {
        "hltrace"
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn frames_cover_both_ends() {
        assert_eq!(super::table_frames(1, 12), vec![1]);
        let v = super::table_frames(1000, 4);
        assert_eq!(v, vec![1, 10, 100, 1000]);
        assert!(super::table_frames(0, 5).is_empty());
    }
}
