//! The two registries of allocator names.
//!
//! - The zoo's, `native/alloc/registry.txt`: one line per allocator,
//!   `name | links | description | reference`; `make -C native` builds
//!   `libheaplab-NAME.so` from each line, `heaplab allocators` lists them.
//! - Synthesized allocators': a per-user directory (XDG:
//!   `$XDG_DATA_HOME/heaplab/synth`, else `~/.local/share/heaplab/synth`, or
//!   `$HEAPLAB_SYNTH_REGISTRY`) where `heaplab synth` makes `NAME` a
//!   symbolic link to its output directory, which holds `libNAME.so`.

use crate::layout::Layout;
use anyhow::{bail, Context, Result};
use std::path::{Path, PathBuf};

/// One line of the zoo's registry: `name | links | description | reference`.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct ZooEntry {
    pub name: String,
    /// Other algorithm files it is built on (quickfit: gnugpp).
    pub links: Vec<String>,
    pub description: String,
    pub reference: String,
}

/// Parses registry text: `name | links | description | reference` per line,
/// `#` comments and blank lines ignored.
pub fn parse_zoo(text: &str) -> Result<Vec<ZooEntry>> {
    let mut out: Vec<ZooEntry> = Vec::new();
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
        out.push(ZooEntry {
            name: name.to_string(),
            links: f[1].split_whitespace().map(String::from).collect(),
            description: f[2].to_string(),
            reference: f[3].to_string(),
        });
    }
    Ok(out)
}

/// The zoo of a tree.
pub fn zoo(layout: &Layout) -> Result<Vec<ZooEntry>> {
    let p = layout.registry();
    let text = std::fs::read_to_string(&p).with_context(|| format!("reading {}", p.display()))?;
    parse_zoo(&text).with_context(|| p.display().to_string())
}

/// Where synthesized allocators are registered (see the module docs).
pub fn synth_dir() -> Result<PathBuf> {
    match std::env::var_os("HEAPLAB_SYNTH_REGISTRY") {
        Some(d) if !d.is_empty() => Ok(PathBuf::from(d)),
        _ => Ok(crate::layout::user_data_dir()?.join("synth")),
    }
}

/// Makes `registry/NAME` point at `dir` (replacing an older entry, which is
/// a link heaplab made), so that `--allocators NAME` finds `dir/libNAME.so`.
pub fn register(registry: &Path, name: &str, dir: &Path) -> Result<PathBuf> {
    std::fs::create_dir_all(registry)
        .with_context(|| format!("creating the registry {}", registry.display()))?;
    let dir = dir.canonicalize().with_context(|| format!("{}", dir.display()))?;
    let entry = registry.join(name);
    if let Ok(m) = std::fs::symlink_metadata(&entry) {
        if !m.file_type().is_symlink() {
            bail!("{} exists and is not a link heaplab made; not replacing it", entry.display());
        }
    }
    for k in 0..100u32 {
        let tmp = registry.join(format!(".{name}.{}.{k}", std::process::id()));
        match std::os::unix::fs::symlink(&dir, &tmp) {
            Ok(()) => {
                return match std::fs::rename(&tmp, &entry) {
                    Ok(()) => Ok(entry),
                    Err(e) => {
                        let _ = std::fs::remove_file(&tmp);
                        Err(e).with_context(|| format!("creating {}", entry.display()))
                    }
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(e).with_context(|| format!("creating {}", tmp.display())),
        }
    }
    bail!("cannot create a temporary link in {}", registry.display())
}

/// The shared object registered under `name` in `registry`, if any.
pub fn lookup(registry: &Path, name: &str) -> Option<PathBuf> {
    let so = registry.join(name).join(format!("lib{name}.so"));
    so.exists().then_some(so)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bad_registry_lines_are_reported_with_their_line() {
        let e = parse_zoo("# c\nok | | d | r\nbad | d | r\n").unwrap_err().to_string();
        assert!(e.contains("line 3") && e.contains("4 fields"), "{e}");
        let e = parse_zoo("Bad | | d | r\n").unwrap_err().to_string();
        assert!(e.contains("[a-z0-9_]+"), "{e}");
        let e = parse_zoo("a | | d | r\na | | d | r\n").unwrap_err().to_string();
        assert!(e.contains("twice"), "{e}");
    }

    #[test]
    fn register_and_lookup() {
        let d = crate::scratch::ScratchDir::new("registry-test").unwrap();
        let out = d.join("out");
        std::fs::create_dir_all(&out).unwrap();
        std::fs::write(out.join("libx.so"), "").unwrap();
        let reg = d.join("reg");
        let e = register(&reg, "x", &out).unwrap();
        assert_eq!(lookup(&reg, "x"), Some(e.join("libx.so")));
        register(&reg, "x", &out).unwrap(); // again: replaces its own link
        assert!(lookup(&reg, "y").is_none());
        std::fs::create_dir_all(reg.join("z")).unwrap();
        assert!(register(&reg, "z", &out).is_err(), "replaced a directory it did not make");
    }
}
