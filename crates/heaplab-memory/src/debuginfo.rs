//! Where a module's debug information is: the search GDB and elfutils make.
//!
//! ```text
//!   module (path, build-id from the trace)
//!     │
//!     ├─ the file at `path`, if its build-id is the trace's (or either has none)
//!     │     └─ it has .debug_info ─────────────────────────────▶ Found::InFile
//!     ├─ DEBUGDIR/.build-id/ab/cdef….debug  (build-id from the trace,
//!     │     for each DEBUGDIR; default /usr/lib/debug) ────────▶ Found::BuildId
//!     ├─ .gnu_debuglink NAME (CRC-32 checked) in DIR/NAME,
//!     │     DIR/.debug/NAME, DEBUGDIR/DIR/NAME ────────────────▶ Found::Debuglink
//!     ├─ the file at `path` without DWARF: its symbol table ───▶ Found::Symbols
//!     └─ nothing (file absent, or another build) ──────────────▶ Found::Nothing
//!
//!   a debug file with .gnu_debugaltlink (dwz): the supplementary file by its
//!   path (relative to the debug file) or by its build-id under DEBUGDIR.
//! ```
//!
//! Invariant: a file is used only when its build-id is the one the trace
//! recorded (when both have one), so a trace symbolizes on another machine
//! exactly when the same builds, or their debug files, are there; never
//! with another build's lines.

use object::{Object, ObjectSection};
use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

/// Where the debug information came from.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case", tag = "how", content = "path")]
pub enum Found {
    /// DWARF in the module file itself.
    InFile(PathBuf),
    /// A separate debug file found by build-id.
    BuildId(PathBuf),
    /// A separate debug file named by `.gnu_debuglink`.
    Debuglink(PathBuf),
    /// No DWARF: the module's symbol table only (function names, no lines).
    Symbols(PathBuf),
    /// The module file is a different build from the recorded one, and no
    /// debug file with the recorded build-id was found.
    OtherBuild(PathBuf),
    /// Nothing readable.
    Nothing,
}

impl Found {
    /// The file to read DWARF or symbols from.
    pub fn file(&self) -> Option<&Path> {
        match self {
            Found::InFile(p) | Found::BuildId(p) | Found::Debuglink(p) | Found::Symbols(p) => {
                Some(p)
            }
            Found::OtherBuild(_) | Found::Nothing => None,
        }
    }

    /// Whether file and line numbers can come from it.
    pub fn has_dwarf(&self) -> bool {
        matches!(self, Found::InFile(_) | Found::BuildId(_) | Found::Debuglink(_))
    }

    /// A word for listings: "dwarf", "build-id", "debuglink", "symbols", ...
    pub fn word(&self) -> &'static str {
        match self {
            Found::InFile(_) => "in file",
            Found::BuildId(_) => "build-id",
            Found::Debuglink(_) => "debuglink",
            Found::Symbols(_) => "symbols only",
            Found::OtherBuild(_) => "other build",
            Found::Nothing => "not found",
        }
    }
}

/// The directories searched for separate debug files.
pub fn default_debug_dirs() -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::env::var_os("HEAPLAB_DEBUG_DIRS")
        .map(|s| std::env::split_paths(&s).filter(|p| !p.as_os_str().is_empty()).collect())
        .unwrap_or_default();
    v.push(PathBuf::from("/usr/lib/debug"));
    v
}

fn read(path: &Path) -> Option<Vec<u8>> {
    let m = std::fs::metadata(path).ok()?;
    if !m.is_file() {
        return None;
    }
    std::fs::read(path).ok()
}

fn has_dwarf(file: &object::File) -> bool {
    file.section_by_name(".debug_info").is_some_and(|s| s.size() > 0)
}

fn build_id_path(dir: &Path, id: &[u8]) -> Option<PathBuf> {
    if id.len() < 2 {
        return None;
    }
    let hex = heaplab_trace::model::hex(id);
    Some(dir.join(".build-id").join(&hex[..2]).join(format!("{}.debug", &hex[2..])))
}

/// A debug file under the build-id tree whose own build-id is `id`.
fn by_build_id(dirs: &[PathBuf], id: &[u8]) -> Option<PathBuf> {
    for d in dirs {
        let p = build_id_path(d, id)?;
        if let Some(data) = read(&p) {
            if let Ok(f) = object::File::parse(&*data) {
                if f.build_id().ok().flatten() == Some(id) && has_dwarf(&f) {
                    return Some(p);
                }
            }
        }
    }
    None
}

/// `.gnu_debuglink`'s file, found where GDB looks, with its CRC-32 checked.
fn by_debuglink(dirs: &[PathBuf], module: &Path, name: &[u8], crc: u32) -> Option<PathBuf> {
    let name = Path::new(OsStr::from_bytes(name));
    let dir = module.parent()?;
    let mut candidates = vec![dir.join(name), dir.join(".debug").join(name)];
    for d in dirs {
        // DEBUGDIR/DIR/NAME, DIR taken as a relative path under DEBUGDIR
        let rel = dir.strip_prefix("/").unwrap_or(dir);
        candidates.push(d.join(rel).join(name));
    }
    for c in candidates {
        if c == module {
            continue;
        }
        if let Some(data) = read(&c) {
            if crc32fast::hash(&data) == crc {
                return Some(c);
            }
        }
    }
    None
}

/// Finds the debug information of a module recorded at `path` with
/// `build_id` (empty: none recorded). See the module docs for the order.
pub fn find(path: &Path, build_id: &[u8], dirs: &[PathBuf]) -> Found {
    let data = read(path);
    let parsed = data.as_deref().and_then(|d| object::File::parse(d).ok());
    let Some(file) = parsed else {
        // The file is not here: perhaps its debug file is (another machine).
        return match by_build_id(dirs, build_id) {
            Some(p) => Found::BuildId(p),
            None => Found::Nothing,
        };
    };
    let file_id = file.build_id().ok().flatten();
    let same_build = match (file_id, build_id.is_empty()) {
        (Some(f), false) => f == build_id,
        _ => true,
    };
    if !same_build {
        return match by_build_id(dirs, build_id) {
            Some(p) => Found::BuildId(p),
            None => Found::OtherBuild(path.to_path_buf()),
        };
    }
    if has_dwarf(&file) {
        return Found::InFile(path.to_path_buf());
    }
    let id = if build_id.is_empty() { file_id.unwrap_or(&[]) } else { build_id };
    if let Some(p) = by_build_id(dirs, id) {
        return Found::BuildId(p);
    }
    if let Ok(Some((name, crc))) = file.gnu_debuglink() {
        if let Some(p) = by_debuglink(dirs, path, name, crc) {
            return Found::Debuglink(p);
        }
    }
    Found::Symbols(path.to_path_buf())
}

/// The supplementary (dwz) file a debug file points to with
/// `.gnu_debugaltlink`, if it has one and it is found.
pub fn altlink(debug_file: &Path, dirs: &[PathBuf]) -> Option<PathBuf> {
    let data = read(debug_file)?;
    let file = object::File::parse(&*data).ok()?;
    let (name, id) = file.gnu_debugaltlink().ok()??;
    let name = Path::new(OsStr::from_bytes(name));
    let by_name =
        if name.is_absolute() { name.to_path_buf() } else { debug_file.parent()?.join(name) };
    let ok = |p: &Path| {
        read(p).is_some_and(|d| {
            object::File::parse(&*d).is_ok_and(|f| f.build_id().ok().flatten() == Some(id))
        })
    };
    if ok(&by_name) {
        return Some(by_name);
    }
    dirs.iter().filter_map(|d| build_id_path(d, id)).find(|p| ok(p))
}
