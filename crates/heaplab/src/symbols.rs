//! Names for call sites: (module path, offset) → `module!function+0xoff`,
//! from the ELF symbol tables (`.symtab`, else `.dynsym`) of the module file.
//! C++ names are demangled. A module that cannot be read gives `module+0xoff`.

use object::{Object, ObjectSymbol, SymbolKind};
use std::collections::HashMap;
use std::path::Path;

struct Table {
    /// (start, end, name), sorted by start.
    syms: Vec<(u64, u64, String)>,
}

/// Caches one symbol table per module.
#[derive(Default)]
pub struct Symbolizer {
    tables: HashMap<String, Option<Table>>,
}

fn load(path: &str) -> Option<Table> {
    let data = std::fs::read(path).ok()?;
    let file = object::File::parse(&*data).ok()?;
    let mut syms: Vec<(u64, u64, String)> = Vec::new();
    for s in file.symbols().chain(file.dynamic_symbols()) {
        if s.kind() != SymbolKind::Text || s.address() == 0 {
            continue;
        }
        if let Ok(n) = s.name() {
            syms.push((s.address(), s.address() + s.size().max(1), demangle(n)));
        }
    }
    syms.sort_by(|a, b| a.0.cmp(&b.0).then(b.1.cmp(&a.1)));
    syms.dedup_by(|a, b| a.0 == b.0);
    Some(Table { syms })
}

fn demangle(n: &str) -> String {
    if n.starts_with("_Z") {
        if let Ok(s) = cpp_demangle::Symbol::new(n) {
            if let Ok(d) = s.demangle(&cpp_demangle::DemangleOptions::default()) {
                return d;
            }
        }
    }
    n.to_string()
}

fn short(path: &str) -> &str {
    Path::new(path).file_name().and_then(|s| s.to_str()).unwrap_or(path)
}

impl Symbolizer {
    /// The function containing the return address `offset` of `module`
    /// (looked up at `offset - 1`, inside the call instruction).
    pub fn function(&mut self, module: &str, offset: u64) -> Option<(String, u64)> {
        if module.is_empty() {
            return None;
        }
        let t = self.tables.entry(module.to_string()).or_insert_with(|| load(module)).as_ref()?;
        let at = offset.saturating_sub(1);
        let i = t.syms.partition_point(|s| s.0 <= at);
        let (start, end, name) = t.syms.get(i.checked_sub(1)?)?;
        // Symbols without a size get a 64 KiB reach at most; beyond that the name is a guess.
        if at < *end || (*end == start + 1 && at - start < 0x10000) {
            Some((name.clone(), offset - start))
        } else {
            None
        }
    }

    /// `module!function+0xoff`, or `module+0xoff`, or `0xaddr` with no module.
    pub fn frame(&mut self, module: &str, offset: u64) -> String {
        if module.is_empty() {
            return format!("{offset:#x}");
        }
        match self.function(module, offset) {
            Some((f, off)) => format!("{}!{f}+{off:#x}", short(module)),
            None => format!("{}+{offset:#x}", short(module)),
        }
    }
}
