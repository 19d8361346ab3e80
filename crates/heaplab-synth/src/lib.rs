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
//!     native_dir: PathBuf::from("native"),
//!     command_line: "heaplab synth ...".into(),
//! })
//! .unwrap();
//! println!("{} lists, unit {}", out.plan.lists.len(), out.plan.unit.chosen);
//! ```
//!
//! Synthesized allocators are found by name through a registry directory
//! (`build/synth` in the checkout, or `$HEAPLAB_SYNTH_REGISTRY`): an entry
//! `NAME` is a symbolic link to the output directory, which holds
//! `libNAME.so`. `heaplab compare` reads it (crates/heaplab-compare,
//! `alloc.rs`).

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
    /// The checkout's `native/` (the zoo's sources).
    pub native_dir: PathBuf,
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
    std::fs::write(path, text).with_context(|| format!("writing {}", path.display()))
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
    let built = build::build(name, &dir, &req.native_dir)?;
    p.outputs = Some(serde_json::json!({
        "header": header, "source": source, "shared_object": built.so, "archive": built.archive,
        "build_commands": built.commands, "build_seconds": built.seconds,
        "command": req.command_line,
    }));
    write(&decisions, &(serde_json::to_string_pretty(&p)? + "\n"))?;
    Ok(Outcome { plan: p, header, source, decisions, built })
}

/// Makes `registry/NAME` point at `dir` (replacing an older entry), so that
/// `heaplab compare --allocators NAME` finds `dir/libNAME.so`.
pub fn register(registry: &Path, name: &str, dir: &Path) -> Result<PathBuf> {
    std::fs::create_dir_all(registry)
        .with_context(|| format!("creating the registry {}", registry.display()))?;
    let dir = dir.canonicalize().with_context(|| format!("{}", dir.display()))?;
    let entry = registry.join(name);
    let tmp = registry.join(format!(".{name}.{}", std::process::id()));
    let _ = std::fs::remove_file(&tmp);
    std::os::unix::fs::symlink(&dir, &tmp)
        .with_context(|| format!("creating {}", tmp.display()))?;
    std::fs::rename(&tmp, &entry).with_context(|| format!("creating {}", entry.display()))?;
    Ok(entry)
}

/// The shared object registered under `name`, if any.
pub fn lookup(registry: &Path, name: &str) -> Option<PathBuf> {
    let so = registry.join(name).join(format!("lib{name}.so"));
    so.exists().then_some(so)
}
