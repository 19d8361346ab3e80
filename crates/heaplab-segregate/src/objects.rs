//! Per-object data from a trace recorded with references (`heaplab record
//! --refs`): what paper 001 §3 calls the "thin" trace.
//!
//! ```text
//!   trace (EVENTS + REFS) ─ RefsReader ─▶ events and references in execution order
//!        │ a realloc continues its object (§5.1: one object that changes size)
//!        ▼
//!   Obj { size at allocation, largest size, born, died (instructions),
//!         loads, stores, allocation stack (ASLR-stable frame keys), SP depth }
//! ```
//!
//! Times are instructions (the REFS stream's clock); an object still live at
//! the end lives until the program's last instruction. Reference density is
//! references per byte of the object's largest size.

use crate::keys;
use anyhow::{bail, Context, Result};
use heaplab_trace::refs::{RefItem, RefsReader, Target};
use heaplab_trace::{Kind, TraceReader};
use serde::Serialize;
use std::collections::HashSet;
use std::path::{Path, PathBuf};

/// No object (in the id map).
const NONE: u32 = u32::MAX;

/// One heap object, from its allocation to its release, across reallocs.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct Obj {
    /// The trace's id of the allocation that created it.
    pub id: u64,
    /// Bytes requested at allocation (what a predictor sees).
    pub size: u64,
    /// The largest size over its reallocs (what it occupies).
    pub max_size: u64,
    /// Instruction time of the allocation, and of the release (None: live at the end).
    pub born: u64,
    pub died: Option<u64>,
    pub loads: u64,
    pub stores: u64,
    /// Stack id of the allocation in the trace (0: none recorded).
    pub stack: u32,
    /// Bytes between the thread's first stack pointer and the caller's stack
    /// pointer at the allocation (0: not recorded). See `docs/segregate.md`.
    pub sp_depth: u64,
    /// The trace kind code of the allocating call.
    pub kind: u8,
    /// Reallocs that continued it.
    pub reallocs: u32,
}

impl Obj {
    /// Lifetime in instructions; `end` is the program's last instruction.
    pub fn lifetime(&self, end: u64) -> u64 {
        self.died.unwrap_or(end).saturating_sub(self.born)
    }
    /// Loads and stores.
    pub fn refs(&self) -> u64 {
        self.loads + self.stores
    }
    /// References per byte (paper 001's reference density).
    pub fn density(&self) -> f64 {
        self.refs() as f64 / self.max_size.max(1) as f64
    }
}

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
    let mut sp_at = 0usize; // events come in index order, and so do the SP entries
    let mut p = Profile { path: path.to_path_buf(), has_sp: !sp.is_empty(), ..Profile::default() };
    let mut of_id: Vec<u32> = Vec::new();
    let mut buf = Vec::new();
    let mut end = 0u64;
    loop {
        r.next_batch(&mut buf).with_context(|| format!("reading {}", path.display()))?;
        if buf.is_empty() {
            break;
        }
        for it in &buf {
            match it {
                RefItem::Ref(x) => {
                    end = x.time;
                    p.all_refs += 1;
                    if let Target::Object { id, .. } = x.target {
                        p.heap_refs += 1;
                        let k = of_id.get(id as usize).copied().unwrap_or(NONE);
                        if k != NONE {
                            let o = &mut p.objects[k as usize];
                            if x.write {
                                o.stores += 1;
                            } else {
                                o.loads += 1;
                            }
                        }
                    }
                }
                RefItem::Event { event: e, time } => {
                    end = end.max(*time);
                    if e.failed {
                        continue;
                    }
                    let cont = match (e.kind, e.old) {
                        (Kind::Free | Kind::ReallocFree, Some(old)) => {
                            if let Some(&k) = of_id.get(old as usize) {
                                if k != NONE {
                                    p.objects[k as usize].died = Some(*time);
                                }
                            }
                            None
                        }
                        (Kind::Realloc, Some(old)) => of_id.get(old as usize).copied(),
                        _ => None,
                    };
                    if let Some(id) = e.id {
                        if of_id.len() <= id as usize {
                            of_id.resize(id as usize + 1, NONE);
                        }
                        match cont {
                            Some(k) if k != NONE => {
                                let o = &mut p.objects[k as usize];
                                o.max_size = o.max_size.max(e.size);
                                o.reallocs += 1;
                                of_id[id as usize] = k;
                            }
                            _ => {
                                while sp_at < sp.len() && sp[sp_at].0 < e.index {
                                    sp_at += 1;
                                }
                                let sp_depth = match sp.get(sp_at) {
                                    Some(&(ev, d)) if ev == e.index => d,
                                    _ => 0,
                                };
                                of_id[id as usize] = p.objects.len() as u32;
                                p.objects.push(Obj {
                                    id,
                                    size: e.size,
                                    max_size: e.size,
                                    born: *time,
                                    stack: e.stack,
                                    sp_depth,
                                    kind: e.kind.code(),
                                    ..Obj::default()
                                });
                            }
                        }
                    }
                }
                RefItem::End { instructions } => end = *instructions,
            }
        }
    }
    let tr: &TraceReader<_> = r.trace();
    p.instructions = end;
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
