//! `heaplab`: the command.
//!
//! It stays thin: it parses flags, starts processes and prints results. The
//! work lives in the library crates (`heaplab-trace`, ...). Each subcommand is
//! one module under `cmd/`, holding its clap `Args` and a `run` function that
//! returns the process exit code.

mod cli;
mod cmd;
mod human;
mod progress;
mod workloads;

use clap::{CommandFactory, Parser, Subcommand};

/// A laboratory for heap allocators: record what a program asks of malloc,
/// compare allocators on that recording, and synthesize one made for it.
#[derive(Parser)]
#[command(name = "heaplab", version, about, long_about = None, arg_required_else_help = true)]
struct Cli {
    /// Replace a symbolic link found where an output goes (the link itself,
    /// never the file it points to); without it such outputs are refused.
    #[arg(long, global = true)]
    force: bool,
    #[command(subcommand)]
    command: Command,
}

/// Each variant's `about` is the one line `heaplab --help` lists; the doc
/// comment of the subcommand's `Args` struct is its long `--help` text (a doc
/// comment here would replace it).
#[derive(Subcommand)]
enum Command {
    #[command(about = "Run a program under the recording agent and write its trace")]
    Record(cmd::record::Args),
    #[command(
        about = "Where the memory goes and the allocation profile: sites (peak, leaks, temporaries), size classes"
    )]
    Stats(cmd::stats::Args),
    #[command(about = "Convert between .hltrace, .rep, .script and the .txt dump")]
    Convert(cmd::convert::Args),
    #[command(about = "Compare two runs site by site: allocations, bytes at the peak, leaks")]
    Diff(cmd::diff::Args),
    #[command(about = "Export where the memory goes: folded stacks, pprof, Chrome trace, massif")]
    Export(cmd::export::Args),
    #[command(
        about = "Compare allocators on traces (or a live program): instructions, time, footprint"
    )]
    #[command(long_about = cmd::compare::LONG_ABOUT)]
    Compare(cmd::compare::Args),
    #[command(
        about = "Grade allocators on malloc-lab .rep/.script files: correctness, utilization, throughput"
    )]
    #[command(long_about = cmd::lab::LONG_ABOUT)]
    Lab(cmd::lab::Args),
    #[command(about = "The main job: record the bundled workloads and report on them")]
    Demo(cmd::demo::Args),
    #[command(about = "List the bundled workloads; prepare one and show or run its command")]
    Workloads(cmd::workloads::Args),
    #[command(about = "Simulate caches and page faults on an address stream (DineroIV din)")]
    Sim(cmd::sim::Args),
    #[command(
        about = "Cache and page locality of allocators on a trace with references (papers 000, 003)"
    )]
    Locality(cmd::locality::Args),
    #[command(about = "List the allocator zoo: every algorithm, its description and paper")]
    Allocators(cmd::allocators::Args),
    #[command(
        about = "Run a program on one allocator (LD_PRELOAD) and pass its exit status through"
    )]
    Run(cmd::run::Args),
    #[command(
        about = "Segregate heap objects by predicted reference density and lifetime (paper 001)"
    )]
    Segregate(cmd::segregate::Args),
    #[command(
        about = "Synthesize an allocator made for a program from its traces (paper 002, CUSTOMALLOC)"
    )]
    Synth(cmd::synth::Args),
    #[command(about = "Run one job of a plan (a line of DIR/jobs*.txt from compare --plan DIR)")]
    Job(cmd::job::Args),
    #[command(about = "Look after kept job outcomes: `heaplab jobs prune` removes old ones")]
    Jobs(cmd::jobs::Args),
    #[command(about = "Print a shell completion script (bash, zsh, fish, elvish, powershell)")]
    Completions(cmd::completions::Args),
    #[command(
        about = "Write heaplab's man pages (heaplab.1 and one per command) into a directory"
    )]
    Man(cmd::completions::ManArgs),
}

/// The whole command line, for completions and man pages.
pub fn command() -> clap::Command {
    Cli::command()
}

fn main() {
    // Die quietly on a closed pipe (`heaplab stats t | head`), as Unix tools do.
    // SAFETY: restoring the default disposition of SIGPIPE before any thread starts.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
    let cli = Cli::parse();
    heaplab_plumb::output::set_force(cli.force);
    let result = match cli.command {
        Command::Record(a) => cmd::record::run(a),
        Command::Stats(a) => cmd::stats::run(a),
        Command::Convert(a) => cmd::convert::run(a),
        Command::Diff(a) => cmd::diff::run(a),
        Command::Export(a) => cmd::export::run(a),
        Command::Compare(a) => cmd::compare::run(a),
        Command::Lab(a) => cmd::lab::run(a),
        Command::Demo(a) => cmd::demo::run(a),
        Command::Workloads(a) => cmd::workloads::run(a),
        Command::Sim(a) => cmd::sim::run(a),
        Command::Locality(a) => cmd::locality::run(a),
        Command::Allocators(a) => cmd::allocators::run(a),
        Command::Run(a) => cmd::run::run(a),
        Command::Segregate(a) => cmd::segregate::run(a),
        Command::Synth(a) => cmd::synth::run(a),
        Command::Job(a) => cmd::job::run(a),
        Command::Jobs(a) => cmd::jobs::run(a),
        Command::Completions(a) => cmd::completions::run(a),
        Command::Man(a) => cmd::completions::man(a),
    };
    match result {
        Ok(code) => std::process::exit(code),
        Err(e) => {
            // Messages quote paths and input, which may hold any byte.
            eprintln!(
                "heaplab: error: {}",
                heaplab_trace::escape::terminal_lines(&format!("{e:#}"))
            );
            std::process::exit(2)
        }
    }
}
