//! `heaplab stats`: the CUSTOMALLOC measurement table (paper 002 §2.1) of one
//! trace, or of several runs merged into one profile; and where the memory
//! goes, per call site (heaplab-memory), from the same pass.

use crate::cli;
use crate::cmd::memargs::{self, MemArgs};
use crate::human;
use anyhow::Result;
use clap::ValueEnum;
use heaplab_memory::analyze::Analysis;
use heaplab_memory::overtime::{self, Footprint, OverTime};
use heaplab_memory::sites::{self, Site};
use heaplab_memory::symbols::Symbolizer;
use heaplab_trace::profile::{Profile, ProfileBuilder, Weighting};
use heaplab_trace::{Meta, TraceReader};
use std::io::Write;
use std::path::{Path, PathBuf};

/// Print the allocation profile of a recorded program: size classes in
/// allocation units, live objects and free-list lengths per class, lifetimes;
/// and where the memory goes, per call site: bytes live at the program's
/// peak, bytes and objects leaked (still live at the end), temporary
/// allocations (heaptrack's definition), lifetimes; symbolized from DWARF
/// (function, file:line, inlined frames). Several traces are merged into
/// one size-class profile; the sites are listed per trace.
#[derive(clap::Args)]
#[command(after_help = "\
Call sites: every recorded stack is one (--group-by function|line sums them),
listed by --sort with every frame (--frames N to limit); --from/--to, --thread,
--module and --function choose which allocations count. Debug information is
read from the module itself, from /usr/lib/debug/.build-id/ by the build-id
the trace recorded (so a trace symbolizes on another machine that has the same
builds or their debug files), or through .gnu_debuglink. An allocation is
temporary when its own thread frees it with no other heap call of that
thread between (heaptrack's definition, in the thread's own order). With
more than one thread, a table per thread follows: what it allocated (live at
the peak, leaked), what it freed, and the frees across threads.

Examples:
  heaplab stats t.hltrace --sort leaked --sites 5
  heaplab stats t.hltrace --group-by line --function parse --from 2s --to 3s
  heaplab stats t.hltrace --report out/mem     (report.html: flame graphs, memory over time)
  heaplab stats t.hltrace --json t.json --sites-csv sites.csv
  heaplab stats t.hltrace --footprint firstfit,bsd --report out/mem --timeline-csv t.csv
                        (memory over time with two zoo allocators' exact footprints)

Columns, per size class (a request for B bytes is in class R*ceil(B/R)):
  allocs, frees     calls, a realloc counting as a free and an allocation
  max live, mean    objects of the class in use; the mean is sampled at each
                    allocation of the class
  mean free list    objects of the class freed and not yet reused, sampled at
                    each allocation of the class (the paper's mean free-list length)

Exit status: 0; 1 when a trace could not be read to its end (the table then
covers what was readable, and the error names the file, byte offset and the
events read before it).")]
pub struct Args {
    /// Trace files (.hltrace); several are merged into one profile.
    #[arg(required = true, value_name = "TRACE")]
    traces: Vec<PathBuf>,
    /// Allocation unit R in bytes (8, 16 or 32 in the paper; any power of two).
    #[arg(long, default_value_t = 8, value_parser = parse_unit)]
    unit: u64,
    /// Write the profile as JSON to FILE (no FILE, or -: standard output,
    /// instead of the table).
    #[arg(long, value_name = "FILE", num_args = 0..=1, default_missing_value = "-")]
    json: Option<PathBuf>,
    /// Also write the size-class table as CSV to FILE (no FILE, or -: standard output).
    #[arg(long, value_name = "FILE", num_args = 0..=1, default_missing_value = "-")]
    csv: Option<PathBuf>,
    /// How merged runs count: each run equally, or each allocation equally.
    #[arg(long, value_enum, default_value_t = WeightArg::Runs)]
    weighting: WeightArg,
    /// Size classes to show in the table (the JSON has them all).
    #[arg(long, default_value_t = 16)]
    classes: usize,
    /// Call sites to list (the JSON has at least 1000).
    #[arg(long, default_value_t = 10)]
    sites: usize,
    /// Write the call sites as CSV to FILE (no FILE, or -: standard output).
    #[arg(long, value_name = "FILE", num_args = 0..=1, default_missing_value = "-")]
    sites_csv: Option<PathBuf>,
    /// Write DIR/report.html: memory over time, flame graphs (bytes at the
    /// peak, allocations, leaks) and the sites, one self-contained page.
    #[arg(long, value_name = "DIR")]
    report: Option<PathBuf>,
    /// Replay the trace under these zoo allocators (comma-separated names,
    /// as `heaplab allocators` lists them) and add each one's exact
    /// footprint over time (heap + mapped bytes, from its own accounting,
    /// sampled about 2048 times) to the memory over time in the JSON, the
    /// CSV and the report.
    #[arg(long, value_name = "ALLOCATORS", value_delimiter = ',')]
    footprint: Vec<String>,
    /// Write memory over time as CSV to FILE (no FILE, or -: standard
    /// output), one value a row: trace,series,t_ns,bytes,max_bytes with
    /// series `live`, `site #R NAME` or `footprint ALLOCATOR`.
    #[arg(long, value_name = "FILE", num_args = 0..=1, default_missing_value = "-")]
    timeline_csv: Option<PathBuf>,
    #[command(flatten)]
    mem: MemArgs,
}

/// The JSON schema version of `heaplab stats --json` (2: `memory` added;
/// 3: `memory[].over_time` added).
pub const SCHEMA_VERSION: u32 = 3;

#[derive(Clone, Copy, ValueEnum)]
enum WeightArg {
    Runs,
    Allocations,
}

fn parse_unit(s: &str) -> Result<u64, String> {
    match s.parse::<u64>() {
        Ok(v) if v.is_power_of_two() && v <= 4096 => Ok(v),
        _ => Err(format!("{s:?} is not a unit; use a power of two such as 8, 16 or 32")),
    }
}

/// Reads one trace into a profile. On a read error the profile covers the
/// events before it, and the error comes back beside it.
pub fn profile_trace(
    path: &Path,
    unit: u64,
    max_sites: usize,
) -> Result<(Profile, Meta, Option<String>)> {
    let mut r = TraceReader::open(path)?;
    let mut b = ProfileBuilder::new(unit, r.meta().time_unit_ns);
    let mut e = heaplab_trace::Event::default();
    let err = loop {
        match r.read_event(&mut e) {
            Ok(true) => b.add(&e),
            Ok(false) => break None,
            Err(e) => break Some(e.to_string()),
        }
    };
    let p = b.finish(
        &path.display().to_string(),
        |s| r.stack(s).to_vec(),
        |m| r.module(m).map(|m| String::from_utf8_lossy(&m.path).into_owned()).unwrap_or_default(),
        max_sites,
    );
    Ok((p, r.meta().clone(), err))
}

/// One trace's per-site answers, as the JSON carries them.
#[derive(serde::Serialize)]
struct MemoryJson<'a> {
    trace: &'a str,
    /// Other traces of the same recording (wrappers, child processes).
    siblings: Vec<String>,
    end: Option<&'a heaplab_trace::End>,
    complete: bool,
    error: Option<&'a str>,
    totals: &'a heaplab_memory::analyze::Totals,
    /// Per thread: what it allocated (live at the peak, leaked) and freed.
    threads: &'a [heaplab_memory::analyze::ThreadStats],
    options: &'a heaplab_memory::analyze::Options,
    sites_options: &'a heaplab_memory::sites::SiteOptions,
    modules: &'a [heaplab_memory::symbols::ModuleReport],
    sites: &'a [Site],
    /// Live bytes per interval, the top sites' and the replayed footprints.
    over_time: &'a heaplab_memory::overtime::OverTime,
}

/// Replays `path` under each allocator of `spec` with `heaplab-replay
/// --footprint-every`, for its exact footprint over time.
fn footprints(spec: &[String], path: &Path, an: &Analysis) -> Result<Vec<Footprint>> {
    if spec.is_empty() {
        return Ok(Vec::new());
    }
    let tools = heaplab_plumb::tools::Tools::discover()?;
    tools.check_replay()?;
    let every = overtime::every_for(an.totals.events);
    let allocs = heaplab_plumb::alloc::resolve(spec, &tools)?;
    // every name checked before the first replay
    for al in &allocs {
        if let Some(why) = &al.missing {
            anyhow::bail!("--footprint {}: {why}", al.name);
        }
        use heaplab_plumb::alloc::Source;
        if al.preload.is_none() || matches!(al.source, Source::Glibc | Source::Peer) {
            anyhow::bail!(
                "--footprint {}: only the zoo's allocators report an exact footprint \
                 (heaplab compare measures the others' from RSS)",
                al.name
            );
        }
    }
    let mut out = Vec::new();
    for al in allocs {
        eprintln!("heaplab stats: replaying {} under {} for its footprint", an.trace, al.name);
        let mut c = std::process::Command::new(&tools.replay);
        c.env_remove("LD_PRELOAD").env_remove("HEAPLAB_STATS").env_remove("HEAPLAB_CHECK");
        if let Some(p) = &al.preload {
            c.env("LD_PRELOAD", p);
        }
        for (k, v) in &al.env {
            c.env(k, v);
        }
        c.stdin(std::process::Stdio::null());
        c.args(["--footprint-every", &every.to_string(), "--threads", "serial"]).arg(path);
        let o = heaplab_plumb::process::capture_until(&mut c, tools.timeout, None)?;
        let stdout = String::from_utf8_lossy(&o.stdout);
        let line = stdout.lines().find(|l| l.starts_with('{'));
        let Some(j) = line.and_then(|l| serde_json::from_str::<serde_json::Value>(l).ok()) else {
            anyhow::bail!(
                "--footprint {}: the replay printed no result ({}): {}",
                al.name,
                o.status,
                String::from_utf8_lossy(&o.stderr).trim()
            );
        };
        let f = overtime::from_replay(&al.name, &j, an.first_ns, an.meta.time_unit_ns)
            .map_err(|e| anyhow::anyhow!("--footprint {}: {e}", al.name))?;
        out.push(f);
    }
    Ok(out)
}

pub fn run(a: Args) -> Result<i32> {
    let json = cli::dest("json", &a.json, &a.traces)?;
    let csv = cli::dest("csv", &a.csv, &a.traces)?;
    let sites_csv = cli::dest("sites-csv", &a.sites_csv, &a.traces)?;
    let timeline_csv = cli::dest("timeline-csv", &a.timeline_csv, &a.traces)?;
    if [&json, &csv, &sites_csv, &timeline_csv].iter().filter(|d| cli::any_stdout(&[d])).count() > 1
    {
        anyhow::bail!(
            "only one of --json, --csv, --sites-csv and --timeline-csv can go to standard output"
        );
    }
    let opts = a.mem.options()?;
    let site_opts = a.mem.site_options();
    let inputs = heaplab_plumb::input::prepare(&a.traces)?;
    let mut profiles = Vec::new();
    let mut code = 0;
    let mut headers = Vec::new();
    let mut analyses: Vec<(Analysis, Vec<Site>, Vec<PathBuf>, Symbolizer)> = Vec::new();
    let mut over: Vec<(OverTime, Vec<Footprint>)> = Vec::new();
    for (t, path) in a.traces.iter().zip(&inputs.paths) {
        let m = TraceReader::open(path)?.meta().clone();
        let mut b = ProfileBuilder::new(a.unit, m.time_unit_ns);
        let mut sym = a.mem.symbolizer();
        let mut an = heaplab_memory::analyze::analyze(path, &opts, &mut sym, |e| b.add(e))?;
        an.trace = t.display().to_string();
        // the profile's site list (raw frames), from the reader's tables
        let stack = |s: u32| an.frames.get(s as usize).cloned().unwrap_or_default();
        let module = |m: u32| {
            an.module_of(m)
                .map(|m| String::from_utf8_lossy(&m.path).into_owned())
                .unwrap_or_default()
        };
        let p = b.finish(&t.display().to_string(), stack, module, a.sites.max(64));
        if let Some(e) = &an.error {
            eprintln!("heaplab stats: {}", human::escaped(e));
            eprintln!(
                "heaplab stats: the profile covers the {} events read before that point",
                human::count(p.events)
            );
            code = 1;
        }
        headers.push(format!(
            "{}: {} (pid {})",
            human::escaped(&t.display().to_string()),
            m.argv.iter().map(|a| heaplab_trace::escape::terminal(a)).collect::<Vec<_>>().join(" "),
            m.pid
        ));
        let siblings = heaplab_plumb::record::siblings(t);
        let list = sites::sites(&an, &site_opts, &mut sym);
        let foot = footprints(&a.footprint, path, &an)?;
        over.push((overtime::over_time(&an, &list, &foot), foot));
        profiles.push(p);
        analyses.push((an, list, siblings, sym));
    }
    let weighting = match a.weighting {
        WeightArg::Runs => Weighting::Runs,
        WeightArg::Allocations => Weighting::Allocations,
    };
    let p = if profiles.len() == 1 {
        profiles.pop().expect("one")
    } else {
        Profile::merge(&profiles, weighting, a.sites.max(64)).map_err(anyhow::Error::msg)?
    };
    if !p.saturated.is_empty() {
        eprintln!(
            "heaplab stats: {} reached 2^64-1 and stopped there: the true values are larger",
            p.saturated.join(", ")
        );
    }
    for (an, _, sib, _) in &analyses {
        if !sib.is_empty() {
            eprintln!("heaplab stats: {}", human::escaped(&sibling_note(&an.trace, sib)));
        }
    }
    if let Some(d) = &csv {
        let mut v = Vec::new();
        write_csv(&p, &mut v)?;
        d.write(&String::from_utf8_lossy(&v))?;
    }
    if let Some(d) = &sites_csv {
        let mut v = String::new();
        for (i, (an, list, _, _)) in analyses.iter().enumerate() {
            v.push_str(&sites_csv_text(an, list, i == 0, a.mem.frames()));
        }
        d.write(&v)?;
    }
    if let Some(d) = &timeline_csv {
        let mut v = String::new();
        for (i, ((an, ..), (o, _))) in analyses.iter().zip(&over).enumerate() {
            v.push_str(&overtime::csv(&an.trace, o, i == 0));
        }
        d.write(&v)?;
    }
    if let Some(d) = &json {
        let mut doc = serde_json::to_value(&p)?;
        let memory: Vec<serde_json::Value> = analyses
            .iter()
            .zip(&over)
            .map(|((an, list, sib, sym), (o, _))| {
                serde_json::to_value(MemoryJson {
                    trace: &an.trace,
                    siblings: sib.iter().map(|s| s.display().to_string()).collect(),
                    end: an.end.as_ref(),
                    complete: an.error.is_none() && an.end.is_some(),
                    error: an.error.as_deref(),
                    totals: &an.totals,
                    threads: &an.thread_stats,
                    options: &an.options,
                    sites_options: &site_opts,
                    modules: sym.reports(),
                    sites: &list[..list.len().min(a.sites.max(1000))],
                    over_time: o,
                })
            })
            .collect::<Result<_, _>>()?;
        if let serde_json::Value::Object(o) = &mut doc {
            o.insert("schema_version".into(), SCHEMA_VERSION.into());
            o.insert("provenance".into(), serde_json::to_value(memargs::provenance())?);
            o.insert("memory".into(), memory.into());
        }
        d.write(&(serde_json::to_string_pretty(&doc)? + "\n"))?;
    }
    if let Some(dir) = &a.report {
        let prov = memargs::provenance().rows();
        let (an, list, _, sym) = analyses.first_mut().expect("at least one trace");
        let foot = &over[0].1;
        let page = heaplab_memory::report::page(an, list, sym, &prov, a.mem.frames(), foot);
        let path = cli::write_report(dir, &page)?;
        let mut err = std::io::stderr();
        writeln!(err, "report: {}", path.display())?;
    }
    if !cli::any_stdout(&[&json, &csv, &sites_csv, &timeline_csv]) {
        let stdout = std::io::stdout();
        let mut out = stdout.lock();
        print_table(&mut out, &p, &headers, a.classes)?;
        for (an, list, sib, _) in &analyses {
            print_sites(&mut out, an, list, sib, a.sites, a.mem.frames(), analyses_len(&headers))?;
        }
    }
    Ok(code)
}

fn analyses_len(h: &[String]) -> bool {
    h.len() > 1
}

/// "t.hltrace: 3 more traces of the same recording: ...".
fn sibling_note(trace: &str, sib: &[PathBuf]) -> String {
    let list: Vec<String> = sib
        .iter()
        .take(6)
        .map(|p| {
            let s = heaplab_plumb::record::summarize(p);
            let name = p.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
            let what = s
                .meta
                .as_ref()
                .and_then(|m| m.argv.first())
                .map(|a| String::from_utf8_lossy(a).rsplit('/').next().unwrap_or("").to_string())
                .unwrap_or_default();
            format!("{name} ({what}, {} events)", human::count(s.events))
        })
        .collect();
    let more = if sib.len() > 6 { format!(" and {} more", sib.len() - 6) } else { String::new() };
    format!(
        "{trace} has {} sibling trace{} from the same recording (wrappers it exec'd through, child processes): {}{more}",
        sib.len(),
        if sib.len() == 1 { "" } else { "s" },
        list.join(", ")
    )
}

fn sites_csv_text(an: &Analysis, list: &[Site], header: bool, frames: usize) -> String {
    let q = |s: &str| format!("\"{}\"", s.replace('"', "\"\""));
    let mut o = String::new();
    if header {
        o.push_str("trace,rank,site,peak_bytes,peak_objects,leaked_bytes,leaked_objects,allocs,bytes,temporary,temporary_bytes,max_bytes,lifetime_p50_ns,lifetime_p90_ns,lifetime_p99_ns,function,file,line,module,offset,stack\n");
    }
    for s in list {
        let f = s.frames.first();
        let sym = f.and_then(|f| f.symbols.first());
        let stack: Vec<String> = s.frames.iter().take(frames).flat_map(|f| f.lines()).collect();
        o.push_str(&format!(
            "{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{}\n",
            q(&an.trace),
            s.rank,
            q(&s.name),
            s.peak_bytes,
            s.peak_objects,
            s.leaked_bytes,
            s.leaked_objects,
            s.allocs,
            s.bytes,
            s.temporary,
            s.temporary_bytes,
            s.max_bytes,
            s.lifetime_ns.p50,
            s.lifetime_ns.p90,
            s.lifetime_ns.p99,
            q(sym.and_then(|x| x.function.as_deref()).unwrap_or("")),
            q(sym.and_then(|x| x.file.as_deref()).unwrap_or("")),
            sym.and_then(|x| x.line).map(|l| l.to_string()).unwrap_or_default(),
            q(f.map(|f| f.module.as_str()).unwrap_or("")),
            f.map(|f| f.offset.to_string()).unwrap_or_default(),
            q(&stack.join(" <- ")),
        ));
    }
    o
}

fn print_sites(
    out: &mut impl Write,
    an: &Analysis,
    list: &[Site],
    sib: &[PathBuf],
    n: usize,
    frames: usize,
    several: bool,
) -> Result<()> {
    let t = &an.totals;
    writeln!(out)?;
    if several {
        writeln!(out, "{}:", human::escaped(&an.trace))?;
    }
    if !sib.is_empty() {
        writeln!(
            out,
            "note: {} other trace{} of this recording lie beside it (see stderr; `heaplab record` names the main one FILE)",
            sib.len(),
            if sib.len() == 1 { "" } else { "s" }
        )?;
    }
    let ended = match (&an.end, &an.error) {
        (_, Some(_)) => " (the trace was read only up to an error)".to_string(),
        (Some(e), None) if e.reason == heaplab_trace::EndReason::Exit => String::new(),
        (Some(e), None) => {
            format!(" (the recording ended by {}: \"leaked\" means live then)", e.reason.name())
        }
        (None, None) => " (the recording was cut short: \"leaked\" means live at its end)".into(),
    };
    writeln!(
        out,
        "where the memory goes: peak {} in {} objects at {} (event {}); leaked {} in {} objects{ended}; temporary {} of {} allocations ({})",
        human::bytes(t.peak_bytes),
        human::count(t.peak_objects),
        human::ns(t.peak_ns),
        human::count(t.peak_event),
        human::bytes(t.leaked_bytes),
        human::count(t.leaked_objects),
        human::count(t.temporary),
        human::count(t.allocations),
        human::pct(t.temporary as f64 / t.allocations.max(1) as f64),
    )?;
    if an.thread_stats.len() > 1 {
        print_threads(out, an)?;
    }
    if !an.options.filter.is_empty() {
        writeln!(
            out,
            "filter: {}; {} allocations left out",
            human::escaped(&serde_json::to_string(&an.options.filter)?),
            human::count(t.filtered_out)
        )?;
    }
    if n == 0 || list.is_empty() {
        return Ok(());
    }
    let shown =
        if frames == usize::MAX { "every frame".to_string() } else { format!("{frames} frames") };
    writeln!(
        out,
        "call sites ({} of {}), {shown} each, innermost first:",
        n.min(list.len()),
        list.len()
    )?;
    let pct = |x: u64, of: u64| {
        if of == 0 {
            String::new()
        } else {
            format!(" ({})", human::pct(x as f64 / of as f64))
        }
    };
    for s in list.iter().take(n) {
        writeln!(
            out,
            "#{:<3} peak {}{}  leaked {} in {}  allocs {}  temporary {}  allocated {}  lifetime p50 ≤ {}{}",
            s.rank,
            human::bytes(s.peak_bytes),
            pct(s.peak_bytes, t.peak_bytes),
            human::bytes(s.leaked_bytes),
            human::count(s.leaked_objects),
            human::count(s.allocs),
            human::count(s.temporary),
            human::bytes(s.bytes),
            human::ns(s.lifetime_ns.p50),
            if s.stacks > 1 { format!("  ({} stacks)", s.stacks) } else { String::new() }
        )?;
        if s.frames.is_empty() {
            writeln!(out, "      (no stack recorded)")?;
        }
        for f in s.frames.iter().take(frames) {
            let short = f.module.rsplit('/').next().unwrap_or(&f.module);
            for (k, l) in f.lines().iter().enumerate() {
                let m = if k == 0 && !f.symbols.is_empty() {
                    format!("  [{short}]")
                } else {
                    String::new()
                };
                // names, files and paths come from the trace and the binaries: escaped
                writeln!(out, "      {}{}", human::escaped(l), human::escaped(&m))?;
            }
        }
        if s.frames.len() > frames {
            writeln!(out, "      ... {} more frames (--frames)", s.frames.len() - frames)?;
        }
    }
    Ok(())
}

/// One line per thread (the allocating thread's live, peak and leaked bytes;
/// the freeing thread's frees), the 16 busiest by allocations.
fn print_threads(out: &mut impl Write, an: &Analysis) -> Result<()> {
    let mut ts: Vec<_> = an.thread_stats.iter().collect();
    ts.sort_by(|a, b| b.allocations.cmp(&a.allocations).then(a.index.cmp(&b.index)));
    writeln!(
        out,
        "threads: {} ({} objects freed by another thread than their own)",
        ts.len(),
        human::count(an.totals.cross_thread_frees)
    )?;
    let head = [
        "thread",
        "tid",
        "name",
        "allocs",
        "allocated",
        "frees",
        "of others'",
        "freed by others",
        "temporary",
        "max live",
        "at peak",
        "leaked",
        "lifetime p50 ≤",
    ];
    let mut rows: Vec<Vec<String>> = vec![head.iter().map(|s| s.to_string()).collect()];
    for t in ts.iter().take(16) {
        rows.push(vec![
            format!("#{}", t.index),
            t.tid.to_string(),
            human::escaped(&t.name),
            human::count(t.allocations),
            human::bytes(t.bytes_allocated),
            human::count(t.frees),
            human::count(t.frees_of_others),
            human::count(t.freed_by_others),
            human::count(t.temporary),
            human::bytes(t.max_live_bytes),
            human::bytes(t.peak_bytes),
            human::bytes(t.leaked_bytes),
            if t.allocations > t.leaked_objects {
                human::ns(t.lifetime_ns.p50)
            } else {
                "-".into()
            },
        ]);
    }
    let w: Vec<usize> = (0..head.len())
        .map(|c| rows.iter().map(|r| r[c].chars().count()).max().unwrap_or(0))
        .collect();
    for r in &rows {
        let cells: Vec<String> = r
            .iter()
            .enumerate()
            .map(|(c, x)| {
                let pad = " ".repeat(w[c] - x.chars().count());
                if c == 2 {
                    format!("{x}{pad}")
                } else {
                    format!("{pad}{x}")
                }
            })
            .collect();
        writeln!(out, "  {}", cells.join("  "))?;
    }
    if ts.len() > 16 {
        writeln!(out, "  ... {} more threads (--json has them all)", ts.len() - 16)?;
    }
    Ok(())
}

fn write_csv(p: &Profile, f: &mut impl Write) -> Result<()> {
    writeln!(f, "size,allocs,share,frees,max_live,mean_live,mean_free_list,bytes")?;
    for c in &p.size_classes {
        writeln!(
            f,
            "{},{},{:.6},{},{},{:.3},{:.3},{}",
            c.size, c.allocs, c.share, c.frees, c.max_live, c.mean_live, c.mean_free_list, c.bytes
        )?;
    }
    Ok(())
}

fn print_table(
    out: &mut impl Write,
    p: &Profile,
    headers: &[String],
    classes: usize,
) -> Result<()> {
    for h in headers {
        writeln!(out, "{h}")?;
    }
    if p.runs > 1 {
        let w = match p.weighting {
            Weighting::Runs => "each run weighs the same",
            Weighting::Allocations => "each allocation weighs the same",
        };
        writeln!(out, "{} runs merged; {w}", p.runs)?;
    }
    writeln!(
        out,
        "events {}   allocations {}   frees {}   reallocs {}   failed {}   threads {}   duration {}",
        human::count(p.events),
        human::count(p.allocations),
        human::count(p.frees),
        human::count(p.reallocs),
        human::count(p.failed),
        p.threads,
        human::ns(p.duration_ns)
    )?;
    let sat = |field: &str, text: String| {
        if p.saturated.iter().any(|s| s == field) {
            format!("≥ {text} (saturated)")
        } else {
            text
        }
    };
    writeln!(
        out,
        "bytes allocated {}   peak live {} in {} objects",
        sat("bytes_allocated", human::bytes(p.bytes_allocated)),
        sat("peak_live_bytes", human::bytes(p.peak_live_bytes)),
        human::count(p.peak_live_objects)
    )?;
    if !p.saturated.is_empty() {
        writeln!(
            out,
            "saturated: {} reached 2^64-1 and stopped there (the true values are larger)",
            p.saturated.join(", ")
        )?;
    }
    let cov: Vec<String> = ["1", "2", "4", "8"]
        .iter()
        .map(|k| format!("top {k}: {}", human::pct(p.top_coverage[*k])))
        .collect();
    writeln!(out, "share of allocations in the most frequent classes: {}", cov.join("   "))?;
    writeln!(out)?;
    writeln!(
        out,
        "{:>10} {:>12} {:>7} {:>12} {:>10} {:>11} {:>14}",
        format!("class(R={})", p.unit),
        "allocs",
        "share",
        "frees",
        "max live",
        "mean live",
        "mean free list"
    )?;
    for c in p.size_classes.iter().take(classes) {
        writeln!(
            out,
            "{:>10} {:>12} {:>7} {:>12} {:>10} {:>11.1} {:>14.1}",
            c.size,
            human::count(c.allocs),
            human::pct(c.share),
            human::count(c.frees),
            human::count(c.max_live),
            c.mean_live,
            c.mean_free_list
        )?;
    }
    if p.size_classes.len() > classes {
        let rest: u64 = p.size_classes.iter().skip(classes).map(|c| c.allocs).sum();
        writeln!(
            out,
            "{:>10} {:>12}   ({} more classes)",
            "...",
            human::count(rest),
            p.size_classes.len() - classes
        )?;
    }
    writeln!(out)?;
    let l = &p.lifetimes;
    writeln!(
        out,
        "lifetimes of freed objects ({} freed, {} never freed)",
        human::count(l.events.count),
        human::count(l.never_freed)
    )?;
    writeln!(
        out,
        "{:>16} {:>12} {:>12} {:>12} {:>12} {:>12}",
        "", "p50 ≤", "p90 ≤", "p99 ≤", "max", "mean"
    )?;
    writeln!(
        out,
        "{:>16} {:>12} {:>12} {:>12} {:>12} {:>12}",
        "events",
        human::count(l.events.p50),
        human::count(l.events.p90),
        human::count(l.events.p99),
        human::count(l.events.max),
        format!("{:.1}", l.events.mean)
    )?;
    writeln!(
        out,
        "{:>16} {:>12} {:>12} {:>12} {:>12} {:>12}",
        "bytes allocated",
        human::bytes(l.bytes.p50),
        human::bytes(l.bytes.p90),
        human::bytes(l.bytes.p99),
        human::bytes(l.bytes.max),
        human::bytes(l.bytes.mean as u64)
    )?;
    writeln!(
        out,
        "{:>16} {:>12} {:>12} {:>12} {:>12} {:>12}",
        "time",
        human::ns(l.ns.p50),
        human::ns(l.ns.p90),
        human::ns(l.ns.p99),
        human::ns(l.ns.max),
        human::ns(l.ns.mean as u64)
    )?;
    Ok(())
}
