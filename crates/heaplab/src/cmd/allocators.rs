//! `heaplab allocators [--json]`: every allocator of the zoo (`native/alloc`),
//! with its one-line description and the paper section it follows.
//!
//! The list is `native/alloc/registry.txt`, the same file `make -C native`
//! reads to build `build/lib/libheaplab-NAME.so`; it is compiled in with
//! `include_str!`, so adding an allocator is one line there. This module also
//! resolves the allocator names that `heaplab run` accepts.

use anyhow::{bail, Result};
use heaplab_plumb::registry::{self, ZooEntry as Entry};
use heaplab_plumb::{alloc, Layout, Tools};
use serde::Serialize;
use std::path::PathBuf;

/// The papers the zoo follows, by the number the registry's references use:
/// (number, authors, title, where and when).
pub const PAPERS: [(&str, &str, &str, &str); 5] = [
    (
        "000",
        "Dirk Grunwald, Benjamin Zorn, Robert Henderson",
        "Improving the Cache Locality of Memory Allocation",
        "PLDI 1993",
    ),
    (
        "001",
        "Matthew L. Seidl, Benjamin G. Zorn",
        "Segregating Heap Objects by Reference Behavior and Lifetime",
        "ASPLOS 1998",
    ),
    (
        "002",
        "Dirk Grunwald, Benjamin Zorn",
        "CUSTOMALLOC: Efficient Synthesized Memory Allocators",
        "1992",
    ),
    (
        "003",
        "Mehran Rezaei, Krishna M. Kavi",
        "Intelligent memory manager: reducing cache pollution due to memory management functions",
        "2005",
    ),
    (
        "004",
        "a design note for a teaching heap allocator",
        "an implicit free list with next fit",
        "(course material)",
    ),
];

/// A paper cited as authors, *title*, venue.
#[derive(Debug, Clone, Serialize)]
pub struct Paper {
    pub number: &'static str,
    pub authors: &'static str,
    pub title: &'static str,
    pub venue: &'static str,
}

/// The papers a registry reference ("000 §2.1; 002 §4") cites.
pub fn papers_of(reference: &str) -> Vec<Paper> {
    PAPERS
        .iter()
        .filter(|p| reference.split(';').any(|r| r.trim().starts_with(p.0)))
        .map(|&(number, authors, title, venue)| Paper { number, authors, title, venue })
        .collect()
}

/// The allocators of this tree (`native/alloc/registry.txt`).
pub fn registry() -> Result<Vec<Entry>> {
    registry::zoo(Layout::get()?)
}

/// The shared object of a zoo allocator.
pub fn library(name: &str) -> Result<PathBuf> {
    Ok(Layout::get()?.zoo_so(name))
}

/// How to run a program on one allocator.
#[derive(Debug, Clone)]
pub struct Choice {
    /// The name as the user gave it (`gnulocal+pad8`).
    pub name: String,
    /// The shared object to preload; None for glibc.
    pub preload: Option<PathBuf>,
    /// Environment the allocator needs (`HEAPLAB_PAD`).
    pub env: Vec<(String, String)>,
    /// One of heaplab's (the zoo or `heaplab synth`): it exports
    /// `heaplab_alloc_stats`.
    pub heaplab: bool,
}

/// Resolves one allocator name for `heaplab run`, with the same rules as
/// `heaplab compare --allocators` (one resolver, in heaplab-compare): a
/// registry NAME, NAME+padN (the pad layer), glibc, jemalloc, mimalloc,
/// tcmalloc, the name of an allocator `heaplab synth` made, or a path to a
/// shared object. One that is known but cannot run (not built, not
/// installed) is an error that says why.
pub fn resolve(spec: &str) -> Result<Choice> {
    if spec.trim().is_empty() {
        bail!("--allocator needs a name; see `heaplab allocators` (or glibc, jemalloc, mimalloc, tcmalloc, NAME+padN, a path to a .so)");
    }
    if spec.contains(',') || matches!(spec, "all" | "zoo" | "heaplab" | "peers") {
        bail!("--allocator takes one allocator, not the list {spec:?} (`heaplab compare --live --allocators {spec} -- PROG` runs a program on many)");
    }
    let is_path = spec.contains('/') || spec.ends_with(".so") || spec.contains(".so.");
    if is_path && !std::path::Path::new(spec).is_file() {
        bail!("no such shared object: {spec}");
    }
    let tools = Tools::discover()?;
    let mut found = alloc::resolve(&[spec.to_string()], &tools)?;
    let Some(a) = found.pop() else { bail!("no allocator {spec:?}; see `heaplab allocators`") };
    if let Some(why) = &a.missing {
        bail!("allocator {}: {why}", a.name);
    }
    let heaplab = a.source == alloc::Source::Heaplab;
    // The name as given: compare labels a path by its file stem.
    let name = if is_path { spec.to_string() } else { a.name };
    Ok(Choice { name, preload: a.preload, env: a.env, heaplab })
}

/// List every allocator heaplab builds, with its description and paper.
///
/// References name papers by number and section: 000 Grunwald, Zorn and
/// Henderson, "Improving the Cache Locality of Memory Allocation" (PLDI
/// 1993); 002 Grunwald and Zorn, "CUSTOMALLOC: Efficient Synthesized Memory
/// Allocators" (1992); 003 Rezaei and Kavi, "Intelligent memory manager:
/// reducing cache pollution due to memory management functions" (2005); 004 a
/// teaching allocator's design note. Run a program on one with `heaplab run
/// --allocator NAME -- PROG ARGS...`; the tunables are in docs/allocators.md.
///
/// Examples:
///   heaplab allocators
///   heaplab allocators --json | jq -r '.[].name'
#[derive(clap::Args)]
#[command(verbatim_doc_comment)]
pub struct Args {
    /// Write a JSON array (name, description, reference, papers, links,
    /// library, built) to FILE (no FILE, or -: standard output, instead of the table).
    #[arg(long, value_name = "FILE", num_args = 0..=1, default_missing_value = "-")]
    json: Option<PathBuf>,
}

#[derive(Serialize)]
struct Row<'a> {
    #[serde(flatten)]
    entry: &'a Entry,
    papers: Vec<Paper>,
    library: String,
    built: bool,
}

pub fn run(a: Args) -> Result<i32> {
    let reg = registry()?;
    let mut rows: Vec<Row> = Vec::new();
    for e in &reg {
        let lib = library(&e.name)?;
        rows.push(Row {
            entry: e,
            papers: papers_of(&e.reference),
            built: lib.exists(),
            library: lib.display().to_string(),
        });
    }
    let json = crate::cli::dest("json", &a.json, &[])?;
    if let Some(d) = &json {
        d.write(&(serde_json::to_string_pretty(&rows)? + "\n"))?;
        if d.is_stdout() {
            return Ok(0);
        }
    }
    let w = |f: &dyn Fn(&Row) -> usize| rows.iter().map(f).max().unwrap_or(0);
    let wn = w(&|r| r.entry.name.len()).max(4);
    let wr = w(&|r| r.entry.reference.chars().count()).max(9);
    println!("{:<wn$}  {:<wr$}  DESCRIPTION", "NAME", "REFERENCE");
    for r in &rows {
        let pad = wr - r.entry.reference.chars().count();
        println!(
            "{:<wn$}  {}{}  {}{}",
            r.entry.name,
            r.entry.reference,
            " ".repeat(pad),
            r.entry.description,
            if r.built { "" } else { "  (not built: run `make -C native`)" }
        );
    }
    println!(
        "\n{} allocators, each {}. `heaplab run --allocator X` also \
         takes glibc, jemalloc, mimalloc, tcmalloc,\nNAME+padN (every object padded by N bytes, \
         paper 000 Table 6) and a path to any malloc .so.\n\nPapers:",
        rows.len(),
        library("NAME")?.display()
    );
    for (n, authors, title, venue) in PAPERS {
        println!("  {n}  {authors}, \"{title}\", {venue}");
    }
    Ok(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_registry_parses_and_names_files_that_exist() {
        let reg = registry().unwrap();
        assert!(reg.len() >= 4);
        let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../native/alloc");
        for e in &reg {
            assert!(dir.join(format!("{}.c", e.name)).exists(), "{}.c is missing", e.name);
            for l in &e.links {
                assert!(reg.iter().any(|x| &x.name == l), "{} links unknown {l}", e.name);
            }
            assert!(!e.description.is_empty() && !e.reference.is_empty());
            assert!(!e.description.ends_with('.'), "{}: no trailing period", e.name);
            assert!(
                !papers_of(&e.reference).is_empty(),
                "{}: no paper for {:?}",
                e.name,
                e.reference
            );
        }
        let q = reg.iter().find(|e| e.name == "quickfit").unwrap();
        assert_eq!(q.links, vec!["gnugpp".to_string()]);
    }

    #[test]
    fn names_resolve_or_say_what_is_known() {
        assert!(resolve("glibc").unwrap().preload.is_none());
        let e = resolve("nosuch").unwrap_err().to_string();
        assert!(e.contains("firstfit") && e.contains("glibc"), "{e}");
        let e = resolve("firstfit+padx").unwrap_err().to_string();
        assert!(e.contains("+padN"), "{e}");
        let e = resolve("/no/such/lib.so").unwrap_err().to_string();
        assert!(e.contains("no such shared object"), "{e}");
    }
}
