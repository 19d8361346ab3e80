//! The object profile: what a whole REFS stream says about each heap object
//! (paper 001 §3's "thin" trace: size, lifetime, loads and stores, the
//! allocation's stack), the one place heaplab computes it.
//!
//! ```text
//!   trace (EVENTS + REFS [+ SP]) ─ RefsReader ─▶ events and references in execution order
//!        │ a realloc continues its object (paper 001 §5.1: one object that changes size)
//!        ▼
//!   Object { size at allocation, largest size, born, died (instructions),
//!            loads, stores (count and bytes), allocation stack, SP depth, kind, reallocs }
//! ```
//!
//! Vocabulary: a *load* reads memory, a *store* writes it (the REFS record's
//! WRITE bit); an object's *references* are its loads plus its stores, and
//! its *reference density* is references per byte of its largest size.
//!
//! Invariants: objects are in order of allocation; every trace object id
//! maps to exactly one object ([`ObjectProfile::of_id`]): the allocation's,
//! or for an id made by a realloc, the object that realloc continued. Times
//! are instructions (the REFS stream's clock); an object still live at the
//! end lives until the program's last instruction ([`ObjectProfile::end`]).

use super::{RefItem, RefsReader, RefsStats, Target};
use crate::error::{Problem, TraceError};
use crate::model::Kind;
use std::io::Read;
use std::path::Path;

/// No object (in the id map).
const NONE: u32 = u32::MAX;

/// One heap object, from its allocation to its release, across reallocs.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct Object {
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
    pub load_bytes: u64,
    pub store_bytes: u64,
    /// Stack id of the allocation in the trace (0: none recorded).
    pub stack: u32,
    /// Bytes between the thread's first stack pointer and the caller's stack
    /// pointer at the allocation (the trace's SP stream; 0: not recorded).
    pub sp_depth: u64,
    /// The trace kind code of the allocating call.
    pub kind: u8,
    /// Reallocs that continued it.
    pub reallocs: u32,
}

impl Object {
    /// Lifetime in instructions; `end` is the program's last instruction.
    pub fn lifetime(&self, end: u64) -> u64 {
        self.died.unwrap_or(end).saturating_sub(self.born)
    }
    /// Loads and stores.
    pub fn refs(&self) -> u64 {
        self.loads + self.stores
    }
    /// References per byte of its largest size (paper 001's reference density).
    pub fn density(&self) -> f64 {
        self.refs() as f64 / self.max_size.max(1) as f64
    }
}

/// Every object of a trace.
#[derive(Debug, Clone, Default)]
pub struct ObjectProfile {
    /// In order of allocation.
    pub objects: Vec<Object>,
    /// Instructions at the end (the END record, else the last record's time).
    pub end: u64,
    /// Counts over the whole REFS stream.
    pub stats: RefsStats,
    /// False when the trace holds no REFS stream (counts are then all 0).
    pub has_refs: bool,
    /// Some allocation carries a stack-pointer depth.
    pub has_sp: bool,
    /// Trace object id -> index in `objects` (NONE: no such id).
    of_id: Vec<u32>,
}

impl ObjectProfile {
    /// The object a trace object id belongs to (a realloc's id: the object
    /// it continued).
    pub fn of_id(&self, id: u64) -> Option<&Object> {
        let k = *self.of_id.get(usize::try_from(id).ok()?)?;
        (k != NONE).then(|| &self.objects[k as usize])
    }

    /// Lifetime of an object in this run.
    pub fn lifetime(&self, o: &Object) -> u64 {
        o.lifetime(self.end)
    }
}

/// Reads a whole trace (its SP stream too) and returns every object. Memory
/// is one small record per object.
pub fn object_profile(path: impl AsRef<Path>) -> Result<ObjectProfile, TraceError> {
    let path = path.as_ref();
    let mut r = RefsReader::open(path)?;
    let sp = crate::sp::read_sp(path)
        .map_err(|m| TraceError::new(path, 0, 0, Problem::Malformed(format!("SP stream: {m}"))))?;
    object_profile_from(&mut r, &sp)
}

/// [`object_profile`] over any reader, read to its end (its trace reader
/// then knows every module and stack), with the SP stream's entries (event
/// index, depth) in event order (`crate::sp::read_sp`; empty: none).
pub fn object_profile_from<R: Read>(
    r: &mut RefsReader<R>,
    sp: &[(u64, u64)],
) -> Result<ObjectProfile, TraceError> {
    let mut p = ObjectProfile { has_sp: !sp.is_empty(), ..ObjectProfile::default() };
    let mut sp_at = 0usize; // events come in index order, and so do the SP entries
    let mut end = 0u64;
    let mut buf = Vec::new();
    loop {
        r.next_batch(&mut buf)?;
        if buf.is_empty() {
            break;
        }
        for it in &buf {
            match it {
                RefItem::Ref(x) => {
                    end = x.time;
                    if let Target::Object { id, .. } = x.target {
                        let k = p.of_id.get(id as usize).copied().unwrap_or(NONE);
                        if k != NONE {
                            let o = &mut p.objects[k as usize];
                            if x.write {
                                o.stores += 1;
                                o.store_bytes += u64::from(x.size);
                            } else {
                                o.loads += 1;
                                o.load_bytes += u64::from(x.size);
                            }
                        }
                    }
                }
                RefItem::Event { event: e, time } => {
                    end = end.max(*time);
                    if e.failed {
                        continue;
                    }
                    let continued = match (e.kind, e.old) {
                        (Kind::Free | Kind::ReallocFree, Some(old)) => {
                            if let Some(&k) = p.of_id.get(old as usize) {
                                if k != NONE {
                                    p.objects[k as usize].died = Some(*time);
                                }
                            }
                            None
                        }
                        (Kind::Realloc, Some(old)) => p.of_id.get(old as usize).copied(),
                        _ => None,
                    };
                    let Some(id) = e.id else { continue };
                    if p.of_id.len() <= id as usize {
                        p.of_id.resize(id as usize + 1, NONE);
                    }
                    match continued {
                        Some(k) if k != NONE => {
                            let o = &mut p.objects[k as usize];
                            o.max_size = o.max_size.max(e.size);
                            o.reallocs += 1;
                            p.of_id[id as usize] = k;
                        }
                        _ => {
                            while sp_at < sp.len() && sp[sp_at].0 < e.index {
                                sp_at += 1;
                            }
                            let sp_depth = match sp.get(sp_at) {
                                Some(&(ev, d)) if ev == e.index => d,
                                _ => 0,
                            };
                            p.of_id[id as usize] = p.objects.len() as u32;
                            p.objects.push(Object {
                                id,
                                size: e.size,
                                max_size: e.size,
                                born: *time,
                                stack: e.stack,
                                sp_depth,
                                kind: e.kind.code(),
                                ..Object::default()
                            });
                        }
                    }
                }
                RefItem::End { instructions } => end = *instructions,
            }
        }
    }
    p.end = end;
    p.stats = *r.stats();
    p.has_refs = r.has_refs();
    Ok(p)
}
