//! `heaplab record -o FILE [options] -- PROG ARGS...`: runs a program under
//! the recording agent (`build/lib/libheaplab-record.so`, LD_PRELOAD) and
//! passes its exit status through, the way a shell would.
//!
//! The agent takes its settings from `HEAPLAB_RECORD_*` variables (see
//! `native/record/README.md`); the flags here set them. After the run, the
//! traces written (the program's, and one per fork child or exec'd program)
//! are listed on stderr with their event counts and sizes.

use crate::human;
use anyhow::Result;
use heaplab_plumb::record::{self, Outcome, Request, Settings, Summary};
use heaplab_plumb::Layout;
use std::ffi::OsString;
use std::path::PathBuf;

/// Run a program and record what it asks of malloc.
///
/// The trace of the program goes to FILE. A fork child, or a program the
/// recorded program execs or spawns, writes FILE.PID (FILE.PID.N when an exec
/// keeps the pid). The traces are written in a private directory beside FILE
/// and moved into place when the program ends; the new set is listed. Files
/// already there are never deleted: FILE itself is replaced, and a child's
/// trace whose name is taken gets the next free FILE.PID.N. FILE must not be
/// a symbolic link (unless --force, which replaces the link, not its target)
/// or a device. Traces are created 0600: they hold command lines and paths.
/// The exit status is the program's; a program killed by signal N gives
/// 128+N, one that cannot be found 127, one that cannot be run 126, as in a
/// shell.
///
/// Examples:
///   heaplab record -o wc.hltrace -- perl wc.pl input.txt
///   heaplab record -o py.hltrace --stack-depth 0 -- env PYTHONMALLOC=malloc python3 x.py
#[derive(clap::Args)]
#[command(verbatim_doc_comment)]
pub struct Args {
    /// The trace to write.
    #[arg(short = 'o', long = "output", value_name = "FILE")]
    output: PathBuf,
    /// Frames per call stack; 0 turns stacks off (fastest).
    #[arg(long, default_value_t = 8, value_parser = clap::value_parser!(u32).range(0..=128))]
    stack_depth: u32,
    /// Record a call stack for frees too (allocations only by default).
    #[arg(long)]
    free_stacks: bool,
    /// Ignored: traces of version 2 keep times in nanoseconds, stamped
    /// every 256 bytes of a thread's rows and interpolated between
    /// (docs/trace-format.md, "Time"). Kept for old scripts.
    #[arg(long, value_name = "NS", default_value_t = 1, value_parser = clap::value_parser!(u64).range(1..=1_000_000_000), hide = true)]
    time_unit_ns: u64,
    /// zstd level for the trace's blocks (1-19; higher: smaller traces, a
    /// busier writer thread).
    #[arg(long, value_name = "LEVEL", default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=19))]
    compress: u32,
    /// Store blocks uncompressed.
    #[arg(long, conflicts_with = "compress")]
    no_compress: bool,
    /// Events per block (1..=1048576).
    #[arg(long, value_name = "N", default_value_t = 65536, value_parser = clap::value_parser!(u32).range(1..=1_048_576))]
    block_events: u32,
    /// Write a block at least this often, so a killed program leaves a trace
    /// readable up to its last few hundred milliseconds.
    #[arg(long, value_name = "MS", default_value_t = 200, value_parser = clap::value_parser!(u64).range(1..=3_600_000))]
    flush_ms: u64,
    /// Do not record fork children (they run unrecorded).
    #[arg(long)]
    no_follow_forks: bool,
    /// Which processes to record: every one (fork: fork children and the
    /// programs they run too), the launched process through its execs only
    /// (exec: wrappers such as env or a shell script that execs the real
    /// program, and that program), or its first program alone (none).
    #[arg(long, value_enum, default_value_t = FollowArg::Fork)]
    follow: FollowArg,
    /// KiB of 64 KiB event chunks one thread may fill before it waits for
    /// the writer (an idle thread holds one chunk; the wait is never a loss,
    /// and END records how long the program waited).
    #[arg(long, value_name = "KIB", default_value_t = 8192, value_parser = clap::value_parser!(u64).range(128..=4_194_304))]
    ring_kb: u64,
    /// MiB of event chunks all threads together may hold (each thread gets
    /// two whatever this says).
    #[arg(long, value_name = "MIB", default_value_t = 256, value_parser = clap::value_parser!(u64).range(1..=1_048_576))]
    ring_total_mb: u64,
    /// Do not list the traces written.
    #[arg(short, long)]
    quiet: bool,
    /// Record every load and store too (the REFS stream, for `heaplab
    /// locality`): runs the program under heaplab's Valgrind tool, which
    /// replaces malloc, instead of LD_PRELOADing the agent. Much slower (the
    /// program runs under Valgrind); fork children are not recorded. Event
    /// times stay in microseconds (slowed by Valgrind); the REFS stream
    /// times events and references in instructions.
    #[arg(long)]
    refs: bool,
    /// The program and its arguments.
    #[arg(last = true, required = true, value_name = "PROG ARGS")]
    command: Vec<OsString>,
}

#[derive(Clone, Copy, clap::ValueEnum)]
enum FollowArg {
    Fork,
    Exec,
    None,
}

pub fn run(a: Args) -> Result<i32> {
    if a.refs {
        return record_refs(a);
    }
    let settings = Settings {
        stack_depth: a.stack_depth,
        free_stacks: a.free_stacks,
        time_unit_ns: a.time_unit_ns,
        compress: (!a.no_compress).then_some(a.compress),
        block_events: a.block_events,
        flush_ms: a.flush_ms,
        follow_forks: !a.no_follow_forks,
        ring_kb: a.ring_kb,
        ring_total_mb: a.ring_total_mb,
        follow: match a.follow {
            FollowArg::Fork => record::Follow::Fork,
            FollowArg::Exec => record::Follow::Exec,
            FollowArg::None => record::Follow::None,
        },
    };
    let name = record::program_name(&a.command);
    let req = Request {
        output: &a.output,
        settings: &settings,
        command: &a.command,
        env: vec![],
        stdin: None,
        stdout: None,
    };
    let rec = match record::record(Layout::get()?, req)? {
        Outcome::Recorded(r) => r,
        Outcome::NotStarted { message, code } => {
            // what a shell says and returns
            eprintln!("heaplab record: {name}: {message}");
            return Ok(code);
        }
    };
    let code = rec.ended.code();
    if let Some(p) = &rec.left {
        eprintln!(
            "heaplab record: a process still writes its trace in {}; move it out when it ends",
            p.display()
        );
    }
    // A recording that lost events says so, and fails even if the program
    // did not: the agent's END counts what it could not record (it also says
    // so on stderr), and a program that exited without its trace's END lost
    // the end of it (issue 17).
    let summaries: Vec<record::Summary> = rec.traces.iter().map(|p| record::summarize(p)).collect();
    let lost: u64 = summaries.iter().filter_map(|s| s.end.as_ref()).map(|e| e.lost).sum();
    let unfinished = rec.has_main
        && matches!(rec.ended, heaplab_plumb::process::Ended::Exit(_))
        && summaries.first().is_some_and(|s| s.bytes > 0 && s.end.is_none());
    if lost > 0 || unfinished {
        eprintln!(
            "heaplab record: the recording is INCOMPLETE: {}",
            if lost > 0 {
                format!("{lost} events were lost (the agent's messages above say why)")
            } else {
                format!("{} has no END block although the program exited", rec.traces[0].display())
            }
        );
    }
    let code = if (lost > 0 || unfinished) && code == 0 { 1 } else { code };
    if a.quiet {
        return Ok(code);
    }
    let how = rec.ended.describe();
    if rec.traces.is_empty() {
        eprintln!(
            "heaplab record: {name} {how}; no trace was written (a static or setuid program ignores LD_PRELOAD)"
        );
        return Ok(code);
    }
    let wrappers = rec.wrappers.clone();
    let rows: Vec<(PathBuf, Summary)> = rec.traces.into_iter().zip(summaries).collect();
    let plural = if rows.len() == 1 { "" } else { "s" };
    let main = if rec.has_main { "" } else { " (none from the program itself)" };
    eprintln!("heaplab record: {name} {how}; {} trace{plural}{main}:", rows.len());
    if rec.has_main && rows.len() > 1 {
        let exe = |s: &Summary| {
            s.meta.as_ref().and_then(|m| m.argv.first()).map_or(String::new(), |a| {
                let a = String::from_utf8_lossy(a);
                human::escaped(a.rsplit('/').next().unwrap_or(&a))
            })
        };
        let chain: Vec<String> = wrappers
            .iter()
            .filter_map(|w| rows.iter().find(|(p, _)| p == w).map(|(_, s)| exe(s)))
            .chain(std::iter::once(exe(&rows[0].1)))
            .collect();
        let through = if chain.len() > 1 {
            format!(", the launched process after exec ({})", chain.join(" → "))
        } else {
            ", the launched process".to_string()
        };
        eprintln!(
            "  main trace: {}{through}; the others are its wrappers and child processes",
            human::escaped(&rows[0].0.display().to_string())
        );
    }
    let width = rows.iter().map(|(p, _)| p.display().to_string().len()).max().unwrap_or(0);
    for (i, (p, s)) in rows.iter().enumerate() {
        let mark = if i == 0 && rec.has_main {
            "main"
        } else if wrappers.contains(p) {
            "wrapper"
        } else {
            ""
        };
        let per = if s.events > 0 {
            format!("{:.2} B/event", s.bytes as f64 / s.events as f64)
        } else {
            String::new()
        };
        let argv = s.meta.as_ref().map(|m| m.command_line()).unwrap_or_default();
        let argv: String = human::escaped(&argv.chars().take(60).collect::<String>());
        eprintln!(
            "  {:<6} {:<width$}  {:>13} events  {:>10}  {:>13}  {:<10} {}",
            mark,
            human::escaped(&p.display().to_string()),
            human::count(s.events),
            human::bytes(s.bytes),
            per,
            s.how_it_ended(),
            argv
        );
    }
    Ok(code)
}

/// `--refs`: under the Valgrind tool (crates/heaplab-refs does the work).
fn record_refs(a: Args) -> Result<i32> {
    use heaplab_refs::{record as refs, vg};
    let tools = vg::VgTools::new(Layout::get()?);
    let out = record::check_output(&a.output)?;
    let opts = refs::Options {
        stack_depth: a.stack_depth.min(64),
        free_stacks: a.free_stacks,
        refs: true,
        codec: if a.no_compress {
            heaplab_trace::Codec::None
        } else {
            heaplab_trace::Codec::Zstd(a.compress as i32)
        },
        refs_codec: if a.no_compress {
            heaplab_trace::Codec::None
        } else {
            heaplab_trace::Codec::Zstd(1)
        },
        block_events: a.block_events as usize,
    };
    let name = a.command[0].to_string_lossy().into_owned();
    if heaplab_plumb::process::resolve_program(&a.command[0]).is_none() {
        // what a shell says and returns
        let msg =
            if name.contains('/') { "No such file or directory" } else { "command not found" };
        eprintln!("heaplab record: {name}: {msg}");
        return Ok(127);
    }
    // ^C and ^\ reach the program through the terminal; we finish the trace.
    // SAFETY: setting dispositions before the child starts; no handler runs Rust code.
    unsafe {
        libc::signal(libc::SIGINT, libc::SIG_IGN);
        libc::signal(libc::SIGQUIT, libc::SIG_IGN);
    }
    let t0 = std::time::Instant::now();
    let (ended, s) = refs::record(&tools, &a.command, &out, &opts)?;
    if !a.quiet {
        let how = ended.describe();
        let refs = s.refs.refs();
        eprintln!(
            "heaplab record: {name} {how} under valgrind after {:.1} s; {}: {} events, {} references ({} heap), {} instructions, {} ({:.2} B/reference)",
            t0.elapsed().as_secs_f64(),
            out.display(),
            human::count(s.events),
            human::count(refs),
            human::count(s.refs.heap_refs()),
            s.instructions.map(human::count).unwrap_or_else(|| "?".into()),
            human::bytes(s.trace_bytes),
            if refs > 0 { s.trace_bytes as f64 / refs as f64 } else { 0.0 },
        );
    }
    Ok(ended.code())
}
