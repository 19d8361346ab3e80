//! `heaplab`: the command.
//!
//! It stays thin: it parses flags, starts processes and prints results. The
//! work lives in the library crates (`heaplab-trace`, ...). Each subcommand is
//! one module under `cmd/`, holding its clap `Args` and a `run` function that
//! returns the process exit code.

mod cmd;
mod paths;

use clap::{Parser, Subcommand};

/// A laboratory for heap allocators: record what a program asks of malloc,
/// compare allocators on that recording, and synthesize one made for it.
#[derive(Parser)]
#[command(name = "heaplab", version, about, long_about = None, arg_required_else_help = true)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {}

fn main() {
    let cli = Cli::parse();
    let code = match cli.command {};
    #[allow(unreachable_code)]
    std::process::exit(code)
}
