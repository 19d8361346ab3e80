//! Per-object results of a whole REFS stream: lifetimes in instructions and
//! reference counts.

use super::{RefItem, RefsReader, RefsStats, Target};
use crate::error::TraceError;
use crate::model::Kind;
use std::io::Read;
use std::path::Path;

/// What the references say about one object: the input of paper 001's
/// segregation (reference density, lifetime).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct ObjectRefs {
    pub id: u64,
    /// Requested size in bytes.
    pub size: u64,
    /// Stack id of the allocation (0: none recorded).
    pub stack: u32,
    pub kind_code: u8,
    /// Instruction time of the allocation.
    pub born: u64,
    /// Instruction time of the free (or the realloc that replaced it); None
    /// while still live at the end.
    pub died: Option<u64>,
    pub reads: u64,
    pub writes: u64,
    pub read_bytes: u64,
    pub write_bytes: u64,
}

impl ObjectRefs {
    /// Lifetime in instructions; an object live at the end lives until `end`.
    pub fn lifetime(&self, end: u64) -> u64 {
        self.died.unwrap_or(end).saturating_sub(self.born)
    }
    /// Loads and stores.
    pub fn refs(&self) -> u64 {
        self.reads + self.writes
    }
    /// References per byte (paper 001's reference density).
    pub fn density(&self) -> f64 {
        self.refs() as f64 / self.size.max(1) as f64
    }
}

/// Per-object results of a whole trace.
#[derive(Debug, Clone, Default)]
pub struct ObjectProfile {
    /// Indexed by object id.
    pub objects: Vec<ObjectRefs>,
    /// Instructions at the end (END record, else the last record's time).
    pub end: u64,
    pub stats: RefsStats,
    /// False when the trace holds no REFS stream (counts are then all 0).
    pub has_refs: bool,
}

/// Reads a whole trace and returns every object's lifetime (instructions)
/// and reference counts. Memory is one small record per object.
pub fn object_refs(path: impl AsRef<Path>) -> Result<ObjectProfile, TraceError> {
    object_refs_from(RefsReader::open(path)?)
}

/// [`object_refs`] over any reader.
pub fn object_refs_from<R: Read>(mut r: RefsReader<R>) -> Result<ObjectProfile, TraceError> {
    let mut objects: Vec<ObjectRefs> = Vec::new();
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
                        let o = &mut objects[id as usize];
                        if x.write {
                            o.writes += 1;
                            o.write_bytes += u64::from(x.size);
                        } else {
                            o.reads += 1;
                            o.read_bytes += u64::from(x.size);
                        }
                    }
                }
                RefItem::Event { event, time } => {
                    end = end.max(*time);
                    let releases =
                        event.kind.is_release() || (event.kind == Kind::Realloc && !event.failed);
                    if let (true, Some(old)) = (releases, event.old) {
                        if let Some(o) = objects.get_mut(old as usize) {
                            o.died = Some(*time);
                        }
                    }
                    if let Some(id) = event.id {
                        if objects.len() <= id as usize {
                            objects.resize(id as usize + 1, ObjectRefs::default());
                        }
                        objects[id as usize] = ObjectRefs {
                            id,
                            size: event.size,
                            stack: event.stack,
                            kind_code: event.kind.code(),
                            born: *time,
                            ..ObjectRefs::default()
                        };
                    }
                }
                RefItem::End { instructions } => end = *instructions,
            }
        }
    }
    Ok(ObjectProfile { objects, end, stats: *r.stats(), has_refs: r.has_refs() })
}
