//! Per-object data from a trace recorded with references (`heaplab record
//! --refs`): what paper 001 §3 calls the "thin" trace.
//!
//! ```text
//!   trace ─ heaplab_trace::refs::object_profile ─▶ Obj (heaplab-trace's Object: size, largest
//!        │                                          size, born, died, loads, stores, stack,
//!        │                                          SP depth; a realloc continues its object)
//!        └─ its modules and stacks ─▶ frame keys (ASLR-stable) per stack id
//! ```
//!
//! The objects come from the one object profile (`heaplab_trace::refs`,
//! `objects.rs`), which says what each count means; this file adds what the
//! segregation keys its predictions on.

use crate::keys;
use anyhow::{bail, Context, Result};
use heaplab_trace::refs::{object_profile_from, RefsReader};
use std::collections::HashSet;
use std::path::{Path, PathBuf};

/// One heap object: heaplab-trace's object profile, the one place it is computed.
pub use heaplab_trace::refs::Object as Obj;

/// Everything the segregation needs from one trace.
#[derive(Debug, Clone, Default)]
pub struct Profile {
    pub path: PathBuf,
    /// The recorded command line.
    pub command: String,
    /// Instructions the program ran.
    pub instructions: u64,
    /// In order of allocation.
    pub objects: Vec<Obj>,
    /// Frame keys (innermost first) of each stack id; `stacks[0]` is empty.
    pub stacks: Vec<Vec<u64>>,
    /// Frames per stack the recorder kept at most.
    pub stack_depth: u64,
    /// References into heap objects, and all references.
    pub heap_refs: u64,
    pub all_refs: u64,
    /// Some allocation carries a stack-pointer depth.
    pub has_sp: bool,
    /// Keys of frames in no known module (absolute addresses, not stable
    /// across runs): never a PATH point.
    pub unstable: HashSet<u64>,
}

impl Profile {
    /// Frame keys of an object's allocation stack.
    pub fn frames(&self, o: &Obj) -> &[u64] {
        self.stacks.get(o.stack as usize).map(|v| v.as_slice()).unwrap_or(&[])
    }
    /// Lifetime of an object in this run.
    pub fn lifetime(&self, o: &Obj) -> u64 {
        o.lifetime(self.instructions)
    }
    /// Bytes allocated in all (sizes at allocation).
    pub fn total_bytes(&self) -> u64 {
        self.objects.iter().map(|o| o.size).sum()
    }
    /// Distinct allocation sites at depth k (paper 001 Table 2's Depth 1 and Depth 3).
    pub fn sites(&self, k: usize) -> usize {
        let mut s: Vec<u64> = self
            .objects
            .iter()
            .map(|o| {
                let f = self.frames(o);
                keys::site_hash(&f[..k.min(f.len())])
            })
            .collect();
        s.sort_unstable();
        s.dedup();
        s.len()
    }
}

/// Reads a trace recorded with references.
pub fn load(path: impl AsRef<Path>) -> Result<Profile> {
    let path = path.as_ref();
    let mut r = RefsReader::open(path).with_context(|| format!("reading {}", path.display()))?;
    if !r.has_refs() {
        bail!(
            "{}: this trace has no references (record it with `heaplab record --refs`)",
            path.display()
        );
    }
    let sp = heaplab_trace::sp::read_sp(path).map_err(|m| anyhow::anyhow!("{m}"))?;
    let o =
        object_profile_from(&mut r, &sp).with_context(|| format!("reading {}", path.display()))?;
    let mut p = Profile {
        path: path.to_path_buf(),
        has_sp: o.has_sp,
        instructions: o.end,
        heap_refs: o.stats.heap_refs(),
        all_refs: o.stats.refs(),
        objects: o.objects,
        ..Profile::default()
    };
    // the trace reader, read to its end, knows every module and stack
    let tr = r.trace();
    p.command = tr.meta().command_line();
    p.stack_depth = tr.meta().stack_depth;
    let mut names = vec![keys::module_hash(""); tr.modules().len() + 1];
    for m in tr.modules() {
        if names.len() <= m.id as usize {
            names.resize(m.id as usize + 1, keys::module_hash(""));
        }
        names[m.id as usize] = keys::module_hash(&m.path);
    }
    p.stacks.push(Vec::new());
    for id in 1..=tr.stack_count() as u32 {
        p.stacks.push(
            tr.stack(id)
                .iter()
                .map(|f| {
                    let m = names.get(f.module as usize).copied().unwrap_or(names[0]);
                    let k = m ^ f.offset.wrapping_mul(0x9E37_79B9_7F4A_7C15);
                    if f.module == 0 {
                        p.unstable.insert(k);
                    }
                    k
                })
                .collect(),
        );
    }
    Ok(p)
}
