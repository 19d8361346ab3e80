//! `heaplab allocators [--json]`: every allocator of the zoo (`native/alloc`),
//! with its one-line description and the paper section it follows.
//!
//! The list is `native/alloc/registry.txt`, the same file `make -C native`
//! reads to build `build/lib/libheaplab-NAME.so`; it is compiled in with
//! `include_str!`, so adding an allocator is one line there. This module also
//! resolves the allocator names that `heaplab run` accepts.

use crate::paths;
use anyhow::{bail, Result};
use serde::Serialize;
use std::path::PathBuf;

/// The registry, as built into this binary.
pub const REGISTRY: &str = include_str!("../../../../native/alloc/registry.txt");

/// One line of the registry.
#[derive(Debug, Clone, Serialize)]
pub struct Entry {
    pub name: String,
    /// Other algorithm files it is built on (quickfit: gnugpp).
    pub links: Vec<String>,
    pub description: String,
    pub reference: String,
}

/// Parses registry text: `name | links | description | reference` per line,
/// `#` comments and blank lines ignored.
pub fn parse(text: &str) -> Result<Vec<Entry>> {
    let mut out: Vec<Entry> = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let l = line.trim();
        if l.is_empty() || l.starts_with('#') {
            continue;
        }
        let f: Vec<&str> = l.split('|').map(str::trim).collect();
        if f.len() != 4 {
            bail!(
                "registry.txt line {}: expected 4 fields separated by '|' \
                 (name | links | description | reference), found {}",
                i + 1,
                f.len()
            );
        }
        let name = f[0];
        if name.is_empty()
            || !name.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_')
        {
            bail!("registry.txt line {}: the name {name:?} must match [a-z0-9_]+", i + 1);
        }
        if out.iter().any(|e| e.name == name) {
            bail!("registry.txt line {}: {name} is listed twice", i + 1);
        }
        out.push(Entry {
            name: name.to_string(),
            links: f[1].split_whitespace().map(String::from).collect(),
            description: f[2].to_string(),
            reference: f[3].to_string(),
        });
    }
    Ok(out)
}

/// The allocators of this build.
pub fn registry() -> Result<Vec<Entry>> {
    parse(REGISTRY)
}

/// The shared object of a zoo allocator.
pub fn library(name: &str) -> PathBuf {
    paths::lib(&format!("libheaplab-{name}.so"))
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
    let tools = heaplab_compare::tools::Tools::from_home(&paths::home());
    let mut found = heaplab_compare::alloc::resolve(&[spec.to_string()], &tools)?;
    let Some(a) = found.pop() else { bail!("no allocator {spec:?}; see `heaplab allocators`") };
    if let Some(why) = &a.missing {
        bail!("allocator {}: {why}", a.name);
    }
    let heaplab = a.source == heaplab_compare::alloc::Source::Heaplab;
    // The name as given: compare labels a path by its file stem.
    let name = if is_path { spec.to_string() } else { a.name };
    Ok(Choice { name, preload: a.preload, env: a.env, heaplab })
}

/// List every allocator heaplab builds, with its description and paper.
///
/// The papers are in `/work/shared/papers` (their README names them): 000
/// Grunwald, Zorn, Henderson 1993; 002 Grunwald and Zorn (CUSTOMALLOC) 1992;
/// 003 Rezaei and Kavi 2005; 004 a teaching allocator's design note. Run a
/// program on one with `heaplab run --allocator NAME -- PROG ARGS...`; the
/// tunables are in docs/allocators.md.
///
/// Examples:
///   heaplab allocators
///   heaplab allocators --json | jq -r '.[].name'
#[derive(clap::Args)]
#[command(verbatim_doc_comment)]
pub struct Args {
    /// Print a JSON array (name, description, reference, links, library, built).
    #[arg(long)]
    json: bool,
}

#[derive(Serialize)]
struct Row<'a> {
    #[serde(flatten)]
    entry: &'a Entry,
    library: String,
    built: bool,
}

pub fn run(a: Args) -> Result<i32> {
    let reg = registry()?;
    let rows: Vec<Row> = reg
        .iter()
        .map(|e| {
            let lib = library(&e.name);
            Row { entry: e, built: lib.exists(), library: lib.display().to_string() }
        })
        .collect();
    if a.json {
        println!("{}", serde_json::to_string_pretty(&rows)?);
        return Ok(0);
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
        "\n{} allocators, each build/lib/libheaplab-NAME.so. `heaplab run --allocator X` also \
         takes glibc, jemalloc, mimalloc, tcmalloc,\nNAME+padN (every object padded by N bytes, \
         paper 000 Table 6) and a path to any malloc .so. Papers: /work/shared/papers.",
        rows.len()
    );
    Ok(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_built_in_registry_parses_and_names_files_that_exist() {
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
        }
        let q = reg.iter().find(|e| e.name == "quickfit").unwrap();
        assert_eq!(q.links, vec!["gnugpp".to_string()]);
    }

    #[test]
    fn bad_registry_lines_are_reported_with_their_line() {
        let e = parse("# c\nok | | d | r\nbad | d | r\n").unwrap_err().to_string();
        assert!(e.contains("line 3") && e.contains("4 fields"), "{e}");
        let e = parse("Bad | | d | r\n").unwrap_err().to_string();
        assert!(e.contains("[a-z0-9_]+"), "{e}");
        let e = parse("a | | d | r\na | | d | r\n").unwrap_err().to_string();
        assert!(e.contains("twice"), "{e}");
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
