//! Call sites as people read them: (module, offset) → function, file:line,
//! and the frames inlined at that address, from DWARF (`addr2line`/`gimli`),
//! else from the module's symbol table.
//!
//! ```text
//!   Symbolizer
//!     modules: (path, build-id) ─▶ slot ─▶ Found (debuginfo.rs) + addr2line::Loader
//!     cache:   (slot, offset)   ─▶ [SymFrame]  innermost first; the last is the
//!                                              function the address is in, the
//!                                              ones before it were inlined into it
//! ```
//!
//! Frames in a trace are return addresses, so an offset is looked up at
//! `offset - 1`, inside the call instruction. Every lookup is cached per
//! module, and a module's debug file is opened once.

use crate::debuginfo::{self, Found};
use serde::Serialize;
use std::collections::HashMap;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::rc::Rc;

/// One function frame at an address.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, PartialOrd, Ord)]
pub struct SymFrame {
    /// Demangled function name; None when neither DWARF nor the symbol
    /// table names the address.
    pub function: Option<String>,
    /// Source file, as the compiler recorded it (absolute when it could be).
    pub file: Option<String>,
    pub line: Option<u32>,
    /// This function was inlined into the next frame at this address.
    pub inlined: bool,
}

impl SymFrame {
    /// `file.c:12` (the file's last component), or None.
    pub fn short_location(&self) -> Option<String> {
        let f = self.file.as_deref()?;
        let name = Path::new(f).file_name().and_then(|s| s.to_str()).unwrap_or(f);
        Some(match self.line {
            Some(l) if l > 0 => format!("{name}:{l}"),
            _ => name.to_string(),
        })
    }
}

/// A module known to the symbolizer.
#[derive(Debug, Clone, Serialize)]
pub struct ModuleReport {
    pub path: String,
    pub build_id: String,
    pub debug: Found,
}

struct ModuleSlot {
    short: String,
    found: Found,
    loader: Option<addr2line::Loader>,
}

/// Resolves (module, offset) pairs, caching per module.
pub struct Symbolizer {
    dirs: Vec<PathBuf>,
    slots: Vec<ModuleSlot>,
    by_key: HashMap<(Vec<u8>, Vec<u8>), usize>,
    cache: HashMap<(usize, u64), Rc<[SymFrame]>>,
    reports: Vec<ModuleReport>,
}

/// A module handle from [`Symbolizer::module`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ModuleId(usize);

impl Default for Symbolizer {
    fn default() -> Self {
        Symbolizer::new(debuginfo::default_debug_dirs())
    }
}

fn short_name(path: &[u8]) -> String {
    let s = String::from_utf8_lossy(path);
    s.rsplit('/').next().unwrap_or(&s).to_string()
}

impl Symbolizer {
    /// Searches `dirs` (each like /usr/lib/debug) for separate debug files.
    pub fn new(dirs: Vec<PathBuf>) -> Symbolizer {
        Symbolizer {
            dirs,
            slots: Vec::new(),
            by_key: HashMap::new(),
            cache: HashMap::new(),
            reports: Vec::new(),
        }
    }

    /// The handle of a module recorded at `path` with `build_id`; its debug
    /// information is found (once) on first use.
    pub fn module(&mut self, path: &[u8], build_id: &[u8]) -> ModuleId {
        let key = (path.to_vec(), build_id.to_vec());
        if let Some(&i) = self.by_key.get(&key) {
            return ModuleId(i);
        }
        let p = Path::new(std::ffi::OsStr::from_bytes(path));
        let found =
            if path.is_empty() { Found::Nothing } else { debuginfo::find(p, build_id, &self.dirs) };
        let loader = found.file().and_then(|f| {
            let sup = if found.has_dwarf() { debuginfo::altlink(f, &self.dirs) } else { None };
            addr2line::Loader::new_with_sup(f, sup.as_deref()).ok()
        });
        let found = if loader.is_none() && found.file().is_some() { Found::Nothing } else { found };
        self.reports.push(ModuleReport {
            path: String::from_utf8_lossy(path).into_owned(),
            build_id: heaplab_trace::model::hex(build_id),
            debug: found.clone(),
        });
        self.slots.push(ModuleSlot { short: short_name(path), found, loader });
        self.by_key.insert(key, self.slots.len() - 1);
        ModuleId(self.slots.len() - 1)
    }

    /// The module's file name (last path component).
    pub fn short(&self, m: ModuleId) -> &str {
        &self.slots[m.0].short
    }

    /// Where the module's debug information came from.
    pub fn found(&self, m: ModuleId) -> &Found {
        &self.slots[m.0].found
    }

    /// Every module looked at so far, with where its debug information is.
    pub fn reports(&self) -> &[ModuleReport] {
        &self.reports
    }

    /// The function frames at return address `offset` of module `m`,
    /// innermost first (inlined ones before the function they are in).
    /// Empty when nothing is known.
    pub fn resolve(&mut self, m: ModuleId, offset: u64) -> Rc<[SymFrame]> {
        if let Some(r) = self.cache.get(&(m.0, offset)) {
            return r.clone();
        }
        let r: Rc<[SymFrame]> = self.lookup(m, offset.saturating_sub(1)).into();
        self.cache.insert((m.0, offset), r.clone());
        r
    }

    fn lookup(&self, m: ModuleId, probe: u64) -> Vec<SymFrame> {
        let Some(loader) = &self.slots[m.0].loader else { return Vec::new() };
        let mut out = Vec::new();
        if let Ok(mut frames) = loader.find_frames(probe) {
            while let Ok(Some(f)) = frames.next() {
                let function =
                    f.function.as_ref().and_then(|n| n.demangle().ok()).map(|s| s.into_owned());
                let (file, line) = match &f.location {
                    Some(l) => (l.file.map(str::to_string), l.line),
                    None => (None, None),
                };
                out.push(SymFrame { function, file, line, inlined: true });
            }
        }
        if let Some(last) = out.last_mut() {
            last.inlined = false;
        }
        let symbol = || {
            loader.find_symbol(probe).map(|s| addr2line::demangle_auto(s.into(), None).into_owned())
        };
        match out.last_mut() {
            Some(last) if last.function.is_none() => last.function = symbol(),
            Some(_) => {}
            None => {
                if let Some(name) = symbol() {
                    out.push(SymFrame {
                        function: Some(name),
                        file: None,
                        line: None,
                        inlined: false,
                    });
                }
            }
        }
        out
    }
}
