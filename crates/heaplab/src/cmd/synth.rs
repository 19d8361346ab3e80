//! `heaplab synth`: an allocator synthesized for a program from the traces of
//! its runs (paper 002, CUSTOMALLOC). The work is in `heaplab-synth`.

use crate::cli;
use crate::cmd::allocators;
use anyhow::{Context, Result};
use clap::ValueEnum;
use heaplab_plumb::{registry, Layout};
use heaplab_synth::plan::{Allocator, Dispatch, Options, Variant};
use heaplab_synth::{synthesize, Request};
use std::path::PathBuf;

/// Synthesize an allocator made for a program (paper 002, CUSTOMALLOC) from
/// the traces of its runs: size classes in allocation units, fast or general
/// per class, a fast class for every small size, per-thread lock-free lists
/// compiled into malloc and free.
/// Writes DIR/NAME.c, DIR/NAME.h, DIR/libNAME.so, DIR/libNAME.a and
/// DIR/decisions.json.
#[derive(clap::Args)]
#[command(after_help = "\
How it decides (every figure behind each choice is in DIR/decisions.json, and
the generated C says it in comments):
  runs        merged, each run weighing the same (002 §3)
  unit        8, 16 or 32: of those whose estimated waste in live blocks is
              within 2% of the mean live bytes of the least, the one estimated
              cheapest, the larger on a tie (002 §4.3)
  classes     most frequent first until --coverage of allocations, at most
              --max-classes; a list also takes the unit classes that share its
              block (blocks have no header: the class size rounded to 16)
  allocator   general when the mean free list exceeds the mean live objects and
              holds >= 64 KiB (episodic use); fast otherwise, and always when
              objects are almost never freed (002 §2.2, Table 4)
  fast core   every size up to 32 KiB has a fast class, trained or not: the
              fast lists' blocks and a ladder for the rest; a thread's blocks
              of one class lie in one span of its address space, so free finds
              the class from the address (native/alloc/fastcore.h)
  dispatch    a size map, one load from the thread's own map; or the paper's
              tests in frequency order before it (--dispatch ordered)
  reclaim     general lists, and the fast core's empty slabs, given back in
              decreasing P_f(s)(1-P_m(s)) s F(s), until twice the request is
              recovered (002 §2.2)

Use it:
  LD_PRELOAD=DIR/libNAME.so program ...
  heaplab compare TRACE --allocators NAME,glibc,mimalloc   (or DIR/libNAME.so)
  heaplab compare --live --allocators NAME,glibc -- program ...

Examples:
  heaplab synth perl-1.hltrace perl-2.hltrace -o out/custom_perl
  heaplab synth make.hltrace -o out/m8 --name make8 --unit 8 --variant all-general

Exit status: 0 when the allocator was built; 2 on an error (a trace that cannot
be read, a bad flag, a failed build: the compiler's message is shown).")]
pub struct Args {
    /// Traces of the program's runs (.hltrace); several are merged.
    #[arg(required = true, value_name = "TRACE")]
    traces: Vec<PathBuf>,
    /// The output directory.
    #[arg(short = 'o', long = "output", value_name = "DIR")]
    out: PathBuf,
    /// The allocator's name (a C identifier); default: custom_PROGRAM.
    #[arg(long)]
    name: Option<String>,
    /// Allocation unit in bytes; default: chosen from the profile.
    #[arg(long, value_parser = parse_unit)]
    unit: Option<u64>,
    /// Share of allocations the kept size classes must cover.
    #[arg(long, default_value_t = 0.95)]
    coverage: f64,
    /// The most size classes kept.
    #[arg(long, default_value_t = 16)]
    max_classes: usize,
    /// Classes (bytes) to make fast whatever the heuristic says.
    #[arg(long, value_delimiter = ',', value_name = "CLASS,...")]
    fast: Vec<u64>,
    /// Classes (bytes) to make general whatever the heuristic says.
    #[arg(long, value_delimiter = ',', value_name = "CLASS,...")]
    general: Vec<u64>,
    /// How malloc finds a class: the size map, or the paper's tests in
    /// frequency order before it (auto: the cheaper, always the map today).
    #[arg(long, value_enum, default_value_t = DispatchArg::Auto)]
    dispatch: DispatchArg,
    /// Fast or general per class: the heuristic (002 §2.2) with the cost
    /// check (a hot class it makes general is made fast), the paper's
    /// heuristic alone, or all one way (002 Table 5).
    #[arg(long, value_enum, default_value_t = VariantArg::Heuristic)]
    variant: VariantArg,
    /// The statistics build: malloc and free count every call for
    /// heaplab_alloc_stats (one add each on the hot path). By default they
    /// count nothing and the statistics report mallocs and frees as 0.
    #[arg(long)]
    count_calls: bool,
    /// Also write decisions.json to FILE (no FILE, or -: standard output,
    /// instead of the summary).
    #[arg(long, value_name = "FILE", num_args = 0..=1, default_missing_value = "-")]
    json: Option<PathBuf>,
    /// Do not register NAME for `heaplab compare --allocators NAME` (the
    /// registry is per user: $XDG_DATA_HOME/heaplab/synth, else
    /// ~/.local/share/heaplab/synth, or $HEAPLAB_SYNTH_REGISTRY).
    #[arg(long)]
    no_register: bool,
}

#[derive(Clone, Copy, ValueEnum)]
enum DispatchArg {
    Auto,
    Ordered,
    Sizemap,
}

#[derive(Clone, Copy, ValueEnum)]
enum VariantArg {
    Heuristic,
    Paper,
    AllFast,
    AllGeneral,
}

fn parse_unit(s: &str) -> Result<u64, String> {
    match s.parse::<u64>() {
        Ok(v @ (8 | 16 | 32)) => Ok(v),
        _ => Err(format!("{s:?} is not a unit; use 8, 16 or 32 (bytes)")),
    }
}

/// custom_PROGRAM from the first trace's command line.
fn default_name(trace: &PathBuf) -> Result<String> {
    let r = heaplab_trace::TraceReader::open(trace)?;
    let prog =
        r.meta().argv.first().map(|a| String::from_utf8_lossy(a).to_string()).unwrap_or_default();
    let base = prog.rsplit('/').next().unwrap_or("").to_ascii_lowercase();
    let clean: String =
        base.chars().map(|c| if c.is_ascii_alphanumeric() { c } else { '_' }).take(30).collect();
    Ok(if clean.is_empty() { "custom".into() } else { format!("custom_{clean}") })
}

pub fn run(a: Args) -> Result<i32> {
    let json = cli::dest("json", &a.json, &a.traces)?;
    let inputs = heaplab_plumb::input::prepare(&a.traces)?;
    let name = match a.name {
        Some(n) => n,
        None => default_name(&inputs.paths[0])?,
    };
    let zoo: Vec<String> = allocators::registry()?.into_iter().map(|e| e.name).collect();
    heaplab_synth::plan::check_name(&name, &zoo)?;
    let options = Options {
        name: name.clone(),
        unit: a.unit,
        coverage: a.coverage,
        max_classes: a.max_classes,
        fast: a.fast,
        general: a.general,
        dispatch: match a.dispatch {
            DispatchArg::Auto => Dispatch::Auto,
            DispatchArg::Ordered => Dispatch::Ordered,
            DispatchArg::Sizemap => Dispatch::Sizemap,
        },
        variant: match a.variant {
            VariantArg::Heuristic => Variant::Heuristic,
            VariantArg::Paper => Variant::Paper,
            VariantArg::AllFast => Variant::AllFast,
            VariantArg::AllGeneral => Variant::AllGeneral,
        },
        count_calls: a.count_calls,
    };
    let command_line = std::iter::once("heaplab".to_string())
        .chain(std::env::args().skip(1))
        .collect::<Vec<_>>()
        .join(" ");
    let out = synthesize(&Request {
        traces: inputs.paths.clone(),
        options,
        out_dir: a.out.clone(),
        layout: Layout::get()?.clone(),
        command_line,
    })?;
    let registered = if a.no_register {
        None
    } else {
        let dir = registry::synth_dir()?;
        Some(registry::register(&dir, &name, out.built.so.parent().expect("a directory")).context(
            "registering the name (use --no-register to skip, or set HEAPLAB_SYNTH_REGISTRY)",
        )?)
    };
    if let Some(d) = &json {
        d.write(&(std::fs::read_to_string(&out.decisions)?.trim_end().to_string() + "\n"))?;
        if d.is_stdout() {
            return Ok(0);
        }
    }
    let p = &out.plan;
    println!(
        "{name}: {} run(s), {} allocations, {} frees; unit {} bytes ({}); {} classes cover {:.1}% \
         of allocations, their lists serve {:.1}%",
        p.profile.runs,
        p.profile.allocations,
        p.profile.frees,
        p.unit.chosen,
        if p.unit.how == "given" { "given" } else { "from the profile" },
        p.selection.kept,
        p.selection.covered_share * 100.0,
        p.selection.served_share * 100.0
    );
    println!("\n unit   classes  lists   served  est. waste (live bytes)  est. instr: dispatch  +general");
    for c in &p.unit.candidates {
        println!(
            "{} {:3}  {:8}  {:5}  {:6.1}%  {:14.0} ({:5.1}%)  {:20.1}  {:8.1}",
            if c.unit == p.unit.chosen { "*" } else { " " },
            c.unit,
            c.kept_classes,
            c.lists,
            c.covered_share * 100.0,
            c.wasted_live_bytes,
            c.wasted_share_of_live * 100.0,
            c.dispatch_instructions,
            c.estimated_instructions
        );
    }
    println!("\n list  allocator  requests       block  mallocs  frees   core class  classes");
    for l in &p.lists {
        println!(
            " {:4}  {:9}  {:>5}..{:<6}  {:5}  {:6.1}%  {:5.1}%  {:10}  {}",
            l.index,
            match l.allocator {
                Allocator::Fast => "fast",
                Allocator::General => "general",
            },
            l.range[0],
            l.range[1],
            l.block_bytes,
            l.malloc_share * 100.0,
            l.free_share * 100.0,
            l.core_class.map_or("-".to_string(), |c| c.to_string()),
            l.classes.iter().map(u64::to_string).collect::<Vec<_>>().join(",")
        );
    }
    let e = &p.dispatch.estimated_instructions;
    println!(
        "\nfast core: {} classes for every size up to {} bytes ({} from the lists, the rest a \
         ladder); it serves {:.1}% of allocations, {:.1}% go to gnugpp as they are",
        p.core.classes.len(),
        p.core.fast_max_bytes,
        p.core.classes.iter().filter(|c| c.list.is_some()).count(),
        p.selection.fast_share * 100.0,
        p.selection.outlier_share * 100.0
    );
    println!(
        "dispatch: {} ({}; estimated instructions per malloc: ordered tests {:.1}, size map {:.1}; \
         free {:.1} from the address)",
        match p.dispatch.kind {
            Dispatch::Sizemap => "size map",
            _ => "frequency-ordered tests",
        },
        if p.dispatch.how == "given" { "given" } else { "from the profile" },
        e.ordered_malloc,
        e.sizemap_malloc,
        e.free
    );
    println!("\nwrote {}", out.source.display());
    println!("      {}", out.header.display());
    println!("      {}", out.built.so.display());
    println!("      {}", out.built.archive.display());
    println!("      {}", out.decisions.display());
    println!("built in {:.1} s", out.built.seconds);
    if let Some(r) = registered {
        println!(
            "registered as {name} ({}): heaplab compare --allocators {name},glibc ...",
            r.display()
        );
    }
    Ok(0)
}
