//! heaplab-synth: CUSTOMALLOC (paper 002), an allocator synthesized for one
//! program from the profiles of its runs.
//!
//! The steps, each its own module:
//!
//! 1. [`measure`]: read every trace into the measurement profile at units of
//!    8, 16 and 32 bytes, and merge the runs weighting each equally (§3).
//! 2. [`plan`]: decide the unit, the classes, fast or general per class, the
//!    lists, the dispatch and the reclaim order; the [`plan::Plan`] is
//!    `decisions.json`.
//! 3. [`emit`]: write readable C, `NAME.h` (the lock-free front end and the
//!    inlinable fast path) and `NAME.c` (tables, locked paths, runtime).
//! 4. [`build`]: compile it with the zoo's shim, platform layer and gnugpp
//!    into `libNAME.so` and `libNAME.a`.
//!
//! ```no_run
//! use heaplab_synth::{synthesize, plan::Options, Request};
//! use std::path::PathBuf;
//! let out = synthesize(&Request {
//!     traces: vec![PathBuf::from("perl-1.hltrace"), PathBuf::from("perl-2.hltrace")],
//!     options: Options { name: "custom_perl".into(), ..Options::default() },
//!     out_dir: PathBuf::from("out/custom_perl"),
//!     layout: heaplab_plumb::Layout::get().unwrap().clone(),
//!     command_line: "heaplab synth ...".into(),
//! })
//! .unwrap();
//! println!("{} lists, unit {}", out.plan.lists.len(), out.plan.unit.chosen);
//! ```
//!
//! Synthesized allocators are found by name through the per-user registry
//! (`heaplab_plumb::registry`: `~/.local/share/heaplab/synth`, or
//! `$HEAPLAB_SYNTH_REGISTRY`): an entry `NAME` is a symbolic link to the
//! output directory, which holds `libNAME.so`; `heaplab synth` registers it
//! and every allocator name is resolved by `heaplab_plumb::alloc`.

pub mod build;
pub mod emit;
pub mod measure;
pub mod plan;

use anyhow::{Context, Result};
use std::path::{Path, PathBuf};

/// One synthesis.
#[derive(Debug, Clone)]
pub struct Request {
    pub traces: Vec<PathBuf>,
    pub options: plan::Options,
    /// Where NAME.c, NAME.h, libNAME.so, libNAME.a and decisions.json go.
    pub out_dir: PathBuf,
    /// The tree whose zoo sources and flags the allocator is built with.
    pub layout: heaplab_plumb::Layout,
    /// How the user asked (recorded in the comments and decisions.json).
    pub command_line: String,
}

/// What a synthesis made.
#[derive(Debug, Clone)]
pub struct Outcome {
    pub plan: plan::Plan,
    pub header: PathBuf,
    pub source: PathBuf,
    pub decisions: PathBuf,
    pub built: build::Built,
}

fn write(path: &Path, text: &str) -> Result<()> {
    heaplab_plumb::output::write(path, text)
}

/// Measures, plans, writes the C and decisions.json, and builds.
pub fn synthesize(req: &Request) -> Result<Outcome> {
    let m = measure::measure(&req.traces)?;
    let mut p = plan::plan(&m, &req.options)?;
    std::fs::create_dir_all(&req.out_dir)
        .with_context(|| format!("creating {}", req.out_dir.display()))?;
    let dir = req.out_dir.canonicalize().unwrap_or_else(|_| req.out_dir.clone());
    let name = &p.name;
    let header = dir.join(format!("{name}.h"));
    let source = dir.join(format!("{name}.c"));
    write(&header, &emit::header(&p, &req.command_line))?;
    write(&source, &emit::source(&p, &req.command_line))?;
    let decisions = dir.join("decisions.json");
    // Written before the build too, so that a failed build leaves the plan.
    write(&decisions, &serde_json::to_string_pretty(&p)?)?;
    let built = build::build(name, &dir, &req.layout, p.count_calls)?;
    p.outputs = Some(serde_json::json!({
        "header": header, "source": source, "shared_object": built.so, "archive": built.archive,
        "build_commands": built.commands, "build_seconds": built.seconds,
        "command": req.command_line,
    }));
    write(&decisions, &(serde_json::to_string_pretty(&p)? + "\n"))?;
    Ok(Outcome { plan: p, header, source, decisions, built })
}
