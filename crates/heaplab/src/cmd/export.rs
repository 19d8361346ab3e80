//! `heaplab export TRACE --folded F --pprof F --chrome F --massif F`: where
//! the memory goes, in other tools' formats (heaplab-memory's exports).

use crate::cmd::memargs::MemArgs;
use anyhow::{bail, Result};
use heaplab_memory::flame::{self, Weight};
use heaplab_memory::{analyze, export, sites};
use std::path::PathBuf;

/// Write where the memory goes in other tools' formats:
///
///   --folded F   folded stacks ("main;f;g 4096"): FlameGraph, inferno, speedscope
///   --pprof F    pprof's protobuf, gzipped: go tool pprof, Pyroscope, speedscope
///                (sample types alloc_objects/space, peak_objects/space,
///                leaked_objects/space, temporary_objects; default peak_space)
///   --chrome F   Chrome trace event JSON: Perfetto's UI, chrome://tracing
///                (live heap bytes as counters over time, the top sites stacked;
///                each thread's heap calls as a slice on its own track)
///   --massif F   Valgrind massif's format: ms_print, massif-visualizer
///   --flame F    a flame graph, SVG (inferno), of --weight
///
/// Frames are symbolized as `heaplab stats` does; the filters choose the
/// allocations. Each file is written under a temporary name and renamed.
///
/// Examples:
///   heaplab export t.hltrace --pprof t.pb.gz && go tool pprof -top t.pb.gz
///   heaplab export t.hltrace --folded t.folded --weight leaked
///   heaplab export t.hltrace --massif massif.out.1 && ms_print massif.out.1
#[derive(clap::Args)]
#[command(verbatim_doc_comment)]
pub struct Args {
    /// The trace.
    trace: PathBuf,
    /// Folded stacks ("main;f;g 4096", outermost first), weighed by --weight.
    #[arg(long, value_name = "FILE")]
    folded: Option<PathBuf>,
    /// pprof's profile.proto, gzipped, every sample type at once.
    #[arg(long, value_name = "FILE")]
    pprof: Option<PathBuf>,
    /// Chrome trace event JSON (counters over time, a slice per thread).
    #[arg(long, value_name = "FILE")]
    chrome: Option<PathBuf>,
    /// massif's text format (snapshots over time, the peak detailed).
    #[arg(long, value_name = "FILE")]
    massif: Option<PathBuf>,
    /// A flame graph, self-contained SVG, weighed by --weight.
    #[arg(long, value_name = "FILE")]
    flame: Option<PathBuf>,
    /// What folded stacks and the flame graph weigh.
    #[arg(long, value_enum, default_value_t = WeightArg::Peak)]
    weight: WeightArg,
    /// Sites drawn apart in the Chrome trace's counters.
    #[arg(long, default_value_t = 8)]
    top: usize,
    #[command(flatten)]
    mem: MemArgs,
}

#[derive(Clone, Copy, clap::ValueEnum)]
enum WeightArg {
    Allocs,
    Bytes,
    Peak,
    Leaked,
    Temporary,
}

/// The formats `heaplab convert` hands to export, by the output's name.
pub fn format_of(out: &std::path::Path) -> Option<&'static str> {
    let n = out.file_name()?.to_str()?.to_ascii_lowercase();
    if n.ends_with(".folded") || n.ends_with(".collapsed") {
        Some("folded")
    } else if n.ends_with(".pprof") || n.ends_with(".pb.gz") || n.ends_with(".pb") {
        Some("pprof")
    } else if n.ends_with(".perfetto.json")
        || n.ends_with(".chrome.json")
        || n.ends_with(".trace.json")
    {
        Some("chrome")
    } else if n.starts_with("massif.out") || n.ends_with(".massif") {
        Some("massif")
    } else if n.ends_with(".svg") {
        Some("flame")
    } else {
        None
    }
}

/// `heaplab convert TRACE OUT` for an export format.
pub fn convert(input: PathBuf, output: PathBuf) -> Result<i32> {
    let mut a = Args {
        trace: input,
        folded: None,
        pprof: None,
        chrome: None,
        massif: None,
        flame: None,
        weight: WeightArg::Peak,
        top: 8,
        mem: <MemArgs as clap::FromArgMatches>::from_arg_matches(
            &<MemArgs as clap::Args>::augment_args(clap::Command::new("x")).get_matches_from(["x"]),
        )?,
    };
    match format_of(&output) {
        Some("folded") => a.folded = Some(output),
        Some("pprof") => a.pprof = Some(output),
        Some("chrome") => a.chrome = Some(output),
        Some("massif") => a.massif = Some(output),
        Some("flame") => a.flame = Some(output),
        _ => bail!("{}: not an export format", output.display()),
    }
    run(a)
}

pub fn run(a: Args) -> Result<i32> {
    if a.folded.is_none()
        && a.pprof.is_none()
        && a.chrome.is_none()
        && a.massif.is_none()
        && a.flame.is_none()
    {
        bail!("nothing to write: give --folded, --pprof, --chrome, --massif or --flame FILE");
    }
    let inputs = heaplab_plumb::input::prepare(std::slice::from_ref(&a.trace))?;
    let mut sym = a.mem.symbolizer();
    let mut an = analyze::analyze(&inputs.paths[0], &a.mem.options()?, &mut sym, |_| {})?;
    an.trace = a.trace.display().to_string();
    let mut code = 0;
    if let Some(e) = &an.error {
        eprintln!("heaplab export: {}", crate::human::escaped(e));
        eprintln!("heaplab export: the exports cover the events read before that point");
        code = 1;
    }
    let w = match a.weight {
        WeightArg::Allocs => Weight::Allocs,
        WeightArg::Bytes => Weight::Bytes,
        WeightArg::Peak => Weight::Peak,
        WeightArg::Leaked => Weight::Leaked,
        WeightArg::Temporary => Weight::Temporary,
    };
    if let Some(f) = &a.folded {
        heaplab_plumb::output::write(f, flame::folded_text(&flame::folded(&an, w, &mut sym)))?;
    }
    if let Some(f) = &a.flame {
        let svg = flame::svg(&flame::folded(&an, w, &mut sym), w.title(), w.count_name());
        if svg.is_empty() {
            bail!("nothing to draw: no {} in this trace", w.count_name());
        }
        heaplab_plumb::output::write(f, svg)?;
    }
    if let Some(f) = &a.pprof {
        heaplab_plumb::output::write(f, export::pprof::bytes(&an, &mut sym))?;
    }
    if let Some(f) = &a.massif {
        heaplab_plumb::output::write(f, export::massif::massif(&an, &mut sym))?;
    }
    if let Some(f) = &a.chrome {
        let list = sites::sites(&an, &a.mem.site_options(), &mut sym);
        heaplab_plumb::output::write(f, export::chrome::chrome(&an, &list, a.top))?;
    }
    Ok(code)
}
