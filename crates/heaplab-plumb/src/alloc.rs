//! Which allocators a comparison runs, and how each is loaded.
//!
//! Names a user may give (`--allocators`, comma-separated):
//!
//! | name | meaning |
//! |---|---|
//! | `all` | every heaplab allocator, then glibc, jemalloc, mimalloc, tcmalloc |
//! | `zoo` | every heaplab allocator (`native/alloc/registry.txt`) |
//! | `peers` | glibc, jemalloc, mimalloc, tcmalloc |
//! | `glibc` | the C library's malloc: nothing preloaded |
//! | `jemalloc`, `mimalloc`, `tcmalloc` | Debian's packages, preloaded |
//! | `NAME` | `build/lib/libheaplab-NAME.so` |
//! | `NAME+padN` | NAME with `HEAPLAB_PAD=N` (the pad layer, paper 000 Table 6) |
//! | `PATH.so` or `LABEL=PATH.so` | any malloc in a shared object (yours) |
//! | `NAME` of a synthesized allocator | `heaplab synth`'s `DIR/libNAME.so`, found through the per-user registry (`~/.local/share/heaplab/synth/NAME`, or `$HEAPLAB_SYNTH_REGISTRY/NAME`), a link to DIR (crate::registry) |
//!
//! A synthesized allocator, by name or by path (a `.so` beside a
//! `decisions.json`), is built on heaplab's shim and platform layer, so it
//! counts as a heaplab allocator: its footprint comes from
//! `heaplab_alloc_stats`.

use crate::tools::Tools;
use anyhow::{bail, Context, Result};
use serde::{Deserialize, Serialize};
use std::path::PathBuf;

/// Where an allocator comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source {
    /// One of heaplab's (`native/alloc`): exports `heaplab_alloc_stats`.
    Heaplab,
    /// The C library's malloc.
    Glibc,
    /// jemalloc, mimalloc or tcmalloc from the distribution.
    Peer,
    /// A shared object the user named.
    Custom,
}

impl Source {
    pub fn name(self) -> &'static str {
        match self {
            Source::Heaplab => "heaplab",
            Source::Glibc => "glibc",
            Source::Peer => "peer",
            Source::Custom => "custom",
        }
    }
}

/// One allocator under test.
#[derive(Debug, Clone)]
pub struct Allocator {
    pub name: String,
    pub source: Source,
    /// The shared object to `LD_PRELOAD` (None: glibc).
    pub preload: Option<PathBuf>,
    /// Environment the allocator needs (e.g. `HEAPLAB_PAD`).
    pub env: Vec<(String, String)>,
    /// Why it cannot run (not installed, not built); its rows say so.
    pub missing: Option<String>,
}

impl Allocator {
    pub fn is_glibc(&self) -> bool {
        self.source == Source::Glibc
    }
}

/// An allocator as a study's plan keeps it: a resolved `Allocator` in a
/// form that serializes (compare's and locality's jobs both keep theirs so).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AllocSpec {
    pub name: String,
    pub source: String,
    pub preload: Option<PathBuf>,
    pub env: Vec<(String, String)>,
    pub missing: Option<String>,
}

impl AllocSpec {
    /// As a job's parameters: allocator, source, then preload and each
    /// `env` VAR=VALUE when there are any (the order a job's id hashes).
    pub fn to_params(&self) -> Vec<(String, String)> {
        let mut v =
            vec![("allocator".into(), self.name.clone()), ("source".into(), self.source.clone())];
        if let Some(p) = &self.preload {
            v.push(("preload".into(), p.display().to_string()));
        }
        v.extend(self.env.iter().map(|(k, x)| ("env".to_string(), format!("{k}={x}"))));
        v
    }

    /// Back from a job's parameters (`to_params`).
    pub fn from_params(params: &[(String, String)]) -> Result<AllocSpec> {
        let get = |key: &str| {
            params
                .iter()
                .find(|(k, _)| k == key)
                .map(|(_, v)| v.clone())
                .with_context(|| format!("no --{key}"))
        };
        let env = params
            .iter()
            .filter(|(k, _)| k == "env")
            .map(|(_, v)| {
                v.split_once('=')
                    .map(|(a, b)| (a.to_string(), b.to_string()))
                    .with_context(|| format!("--env {v:?}: expected VAR=VALUE"))
            })
            .collect::<Result<Vec<_>>>()?;
        Ok(AllocSpec {
            name: get("allocator")?,
            source: get("source")?,
            preload: get("preload").ok().map(PathBuf::from),
            env,
            missing: None,
        })
    }

    pub fn of(a: &Allocator) -> AllocSpec {
        AllocSpec {
            name: a.name.clone(),
            source: a.source.name().to_string(),
            preload: a.preload.as_ref().map(|p| std::path::absolute(p).unwrap_or(p.clone())),
            env: a.env.clone(),
            missing: a.missing.clone(),
        }
    }

    /// The allocator again, as `AllocSpec::of` took it.
    pub fn allocator(&self) -> Allocator {
        Allocator {
            name: self.name.clone(),
            source: match self.source.as_str() {
                "heaplab" => Source::Heaplab,
                "glibc" => Source::Glibc,
                "peer" => Source::Peer,
                _ => Source::Custom,
            },
            preload: self.preload.clone(),
            env: self.env.clone(),
            missing: self.missing.clone(),
        }
    }
}

/// The peers: name, shared object, Debian package.
pub const PEERS: [(&str, &str, &str); 3] = [
    ("jemalloc", "libjemalloc.so.2", "libjemalloc2"),
    ("mimalloc", "libmimalloc.so.2", "libmimalloc2.0"),
    ("tcmalloc", "libtcmalloc_minimal.so.4", "libtcmalloc-minimal4"),
];

/// The names in the registry, in its order; if it cannot be read, the
/// `libheaplab-NAME.so` files in the library directory.
pub fn zoo_names(tools: &Tools) -> Vec<String> {
    if let Ok(text) = std::fs::read_to_string(&tools.registry) {
        if let Ok(entries) = crate::registry::parse_zoo(&text) {
            if !entries.is_empty() {
                return entries.into_iter().map(|e| e.name).collect();
            }
        }
    }
    let mut names: Vec<String> = std::fs::read_dir(&tools.lib_dir)
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| {
            let f = e.file_name().to_string_lossy().to_string();
            let n = f.strip_prefix("libheaplab-")?.strip_suffix(".so")?.to_string();
            (!n.starts_with("test-") && n != "record" && n != "count").then_some(n)
        })
        .collect();
    names.sort();
    names
}

fn zoo(name: &str, pad: Option<u64>, tools: &Tools) -> Allocator {
    let so = tools.lib_dir.join(format!("libheaplab-{name}.so"));
    let missing =
        (!so.exists()).then(|| format!("not built: {} (run `make -C native`)", so.display()));
    Allocator {
        name: match pad {
            Some(n) => format!("{name}+pad{n}"),
            None => name.to_string(),
        },
        source: Source::Heaplab,
        preload: Some(so),
        env: pad.map(|n| vec![("HEAPLAB_PAD".to_string(), n.to_string())]).unwrap_or_default(),
        missing,
    }
}

fn glibc() -> Allocator {
    Allocator {
        name: "glibc".into(),
        source: Source::Glibc,
        preload: None,
        env: vec![],
        missing: None,
    }
}

fn peer(name: &str, tools: &Tools) -> Allocator {
    let (_, so, pkg) = PEERS.iter().find(|p| p.0 == name).expect("a peer name");
    let found = tools.peer_dirs.iter().map(|d| d.join(so)).find(|p| p.exists());
    Allocator {
        name: name.to_string(),
        source: Source::Peer,
        missing: found.is_none().then(|| {
            format!(
                "not installed: no {so} in {} (apt-get install {pkg}, or run scripts/setup.sh)",
                tools
                    .peer_dirs
                    .iter()
                    .map(|d| d.display().to_string())
                    .collect::<Vec<_>>()
                    .join(", ")
            )
        }),
        preload: Some(found.unwrap_or_else(|| PathBuf::from(so))),
        env: vec![],
    }
}

/// The synthesized allocator registered as `name`, if any.
fn synthesized(name: &str, tools: &Tools) -> Option<Allocator> {
    let so = crate::registry::lookup(&tools.synth_registry, name)?;
    Some(Allocator {
        name: name.to_string(),
        source: Source::Heaplab,
        preload: Some(std::fs::canonicalize(&so).unwrap_or(so)),
        env: vec![],
        missing: None,
    })
}

/// Resolves the user's list (see the module docs) into allocators, in the
/// order given, without duplicates. An unknown name is an error that lists
/// the known ones; a known allocator that cannot run is returned with
/// `missing` set, so that its rows can say why.
pub fn resolve(spec: &[String], tools: &Tools) -> Result<Vec<Allocator>> {
    let zoo_list = zoo_names(tools);
    let mut out: Vec<Allocator> = Vec::new();
    let push = |a: Allocator, out: &mut Vec<Allocator>| {
        if !out.iter().any(|b| b.name == a.name) {
            out.push(a);
        }
    };
    let items: Vec<&str> =
        spec.iter().flat_map(|s| s.split(',')).map(str::trim).filter(|s| !s.is_empty()).collect();
    for item in if items.is_empty() { vec!["all"] } else { items } {
        match item {
            "all" | "zoo" | "heaplab" | "peers" => {
                if item != "peers" {
                    for n in &zoo_list {
                        push(zoo(n, None, tools), &mut out);
                    }
                }
                if item == "all" || item == "peers" {
                    push(glibc(), &mut out);
                    for (p, _, _) in PEERS {
                        push(peer(p, tools), &mut out);
                    }
                }
            }
            "glibc" | "system" | "libc" => push(glibc(), &mut out),
            p if PEERS.iter().any(|x| x.0 == p) => push(peer(p, tools), &mut out),
            s if s.ends_with(".so") || s.contains(".so.") || s.contains('/') => {
                let (label, path) = match s.split_once('=') {
                    Some((l, p)) => (l.to_string(), PathBuf::from(p)),
                    None => {
                        let p = PathBuf::from(s);
                        let stem = p
                            .file_name()
                            .map(|f| f.to_string_lossy().to_string())
                            .unwrap_or_default();
                        let stem = stem.split(".so").next().unwrap_or(&stem).to_string();
                        (stem.strip_prefix("lib").unwrap_or(&stem).to_string(), p)
                    }
                };
                let path = std::fs::canonicalize(&path).unwrap_or(path);
                let missing = (!path.exists()).then(|| format!("no such file: {}", path.display()));
                let synth = path.parent().is_some_and(|d| d.join("decisions.json").exists());
                push(
                    Allocator {
                        name: label,
                        source: if synth { Source::Heaplab } else { Source::Custom },
                        preload: Some(path),
                        env: vec![],
                        missing,
                    },
                    &mut out,
                );
            }
            s => {
                let (base, pad) = match s.split_once("+pad") {
                    Some((b, n)) => match n.parse::<u64>() {
                        Ok(n) if n <= 4096 => (b, Some(n)),
                        _ => bail!("{s:?}: the pad is +padN with N from 0 to 4096 bytes, e.g. gnulocal+pad8"),
                    },
                    None => (s, None),
                };
                if pad.is_none() && !zoo_list.iter().any(|n| n == base) {
                    if let Some(a) = synthesized(s, tools) {
                        push(a, &mut out);
                        continue;
                    }
                }
                if !zoo_list.iter().any(|n| n == base) {
                    bail!(
                        "no allocator {s:?}; known: all, zoo, peers, glibc, {}, {} (or NAME+padN, a path to a .so, or the name of an allocator heaplab synth made)",
                        PEERS.iter().map(|p| p.0).collect::<Vec<_>>().join(", "),
                        zoo_list.join(", ")
                    );
                }
                push(zoo(base, pad, tools), &mut out);
            }
        }
    }
    Ok(out)
}

/// Ensures the baselines a comparison needs are present: glibc (wall-time
/// ratios) and firstfit (footprint normalization, when it is built),
/// appended if absent. Returns the names added.
pub fn add_baselines(allocs: &mut Vec<Allocator>, tools: &Tools) -> Vec<String> {
    let mut added = Vec::new();
    if !allocs.iter().any(|a| a.is_glibc()) {
        allocs.push(glibc());
        added.push("glibc".to_string());
    }
    let ff = zoo("firstfit", None, tools);
    if !allocs.iter().any(|a| a.name == "firstfit") && ff.missing.is_none() {
        allocs.push(ff);
        added.push("firstfit".to_string());
    }
    added
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A fake tree in a scratch directory: a registry of two, firstfit built.
    fn tools(_name: &str) -> (crate::scratch::ScratchDir, Tools) {
        let d = crate::scratch::ScratchDir::new("alloc-test").unwrap();
        let dir = d.dir.clone();
        std::fs::create_dir_all(dir.join("lib")).unwrap();
        std::fs::write(dir.join("registry.txt"), "# c\nfirstfit | | d | r\nbsd | | d | r\n")
            .unwrap();
        std::fs::write(dir.join("lib/libheaplab-firstfit.so"), "").unwrap();
        let mut t = Tools::new(&crate::layout::Layout::checkout(&dir)).unwrap();
        t.registry = dir.join("registry.txt");
        t.lib_dir = dir.join("lib");
        t.synth_registry = dir.join("synth");
        t.peer_dirs = vec![dir.join("nowhere")];
        (d, t)
    }

    #[test]
    fn all_lists_zoo_then_peers_and_marks_what_cannot_run() {
        let (_d, t) = tools("all");
        let a = resolve(&["all".into()], &t).unwrap();
        let names: Vec<&str> = a.iter().map(|a| a.name.as_str()).collect();
        assert_eq!(names, ["firstfit", "bsd", "glibc", "jemalloc", "mimalloc", "tcmalloc"]);
        assert!(a[0].missing.is_none());
        assert!(a[1].missing.as_deref().unwrap().contains("not built"));
        assert!(a[3].missing.as_deref().unwrap().contains("apt-get install libjemalloc2"));
    }

    #[test]
    fn a_spec_goes_through_job_parameters_and_back() {
        let a = AllocSpec {
            name: "firstfit+pad".into(),
            source: "heaplab".into(),
            preload: Some(PathBuf::from("/x/libheaplab-firstfit.so")),
            env: vec![("HEAPLAB_PAD".into(), "8".into()), ("A".into(), "b=c".into())],
            missing: None,
        };
        let p = a.to_params();
        assert_eq!(p[0], ("allocator".into(), "firstfit+pad".into()));
        assert_eq!(p[3], ("env".into(), "HEAPLAB_PAD=8".into()));
        assert_eq!(AllocSpec::from_params(&p).unwrap(), a);
        let glibc = AllocSpec { preload: None, env: vec![], ..a.clone() };
        assert_eq!(AllocSpec::from_params(&glibc.to_params()).unwrap(), glibc);
        let e = AllocSpec::from_params(&p[1..]).unwrap_err().to_string();
        assert_eq!(e, "no --allocator");
        let bad = [p[0].clone(), p[1].clone(), ("env".into(), "NOEQUALS".into())];
        assert!(AllocSpec::from_params(&bad)
            .unwrap_err()
            .to_string()
            .contains("expected VAR=VALUE"));
    }

    #[test]
    fn names_pads_paths_and_errors() {
        let (_d, t) = tools("names");
        let a =
            resolve(&["firstfit+pad8,glibc".into(), "mine=/no/such/libx.so".into()], &t).unwrap();
        assert_eq!(a[0].name, "firstfit+pad8");
        assert_eq!(a[0].env, vec![("HEAPLAB_PAD".to_string(), "8".to_string())]);
        assert_eq!(a[2].name, "mine");
        assert!(a[2].missing.is_some());
        let e = resolve(&["nosuch".into()], &t).unwrap_err().to_string();
        assert!(e.contains("no allocator \"nosuch\"") && e.contains("firstfit, bsd"), "{e}");
        assert!(resolve(&["bsd+padx".into()], &t).is_err());
    }

    #[test]
    fn synthesized_allocators_by_name_and_by_path() {
        let (_d, t) = tools("synth");
        let dir = t.lib_dir.join("../out/custom_x");
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("libcustom_x.so"), "").unwrap();
        std::fs::write(dir.join("decisions.json"), "{}").unwrap();
        let reg = t.synth_registry.clone();
        std::fs::create_dir_all(&reg).unwrap();
        let _ = std::fs::remove_file(reg.join("custom_x"));
        std::os::unix::fs::symlink(dir.canonicalize().unwrap(), reg.join("custom_x")).unwrap();
        let a = resolve(&["custom_x".into()], &t).unwrap();
        assert_eq!((a[0].name.as_str(), a[0].source), ("custom_x", Source::Heaplab));
        let so = dir.join("libcustom_x.so").display().to_string();
        let b = resolve(&[so], &t).unwrap();
        assert_eq!((b[0].name.as_str(), b[0].source), ("custom_x", Source::Heaplab));
        let e = resolve(&["custom_y".into()], &t).unwrap_err().to_string();
        assert!(e.contains("heaplab synth"), "{e}");
    }

    #[test]
    fn baselines_are_added_once() {
        let (_d, t) = tools("baselines");
        let mut a = resolve(&["bsd".into()], &t).unwrap();
        assert_eq!(add_baselines(&mut a, &t), ["glibc", "firstfit"]);
        assert!(add_baselines(&mut a, &t).is_empty());
        // firstfit only when it is built
        std::fs::remove_file(t.lib_dir.join("libheaplab-firstfit.so")).unwrap();
        let mut b = resolve(&["glibc".into()], &t).unwrap();
        assert!(add_baselines(&mut b, &t).is_empty());
    }
}
