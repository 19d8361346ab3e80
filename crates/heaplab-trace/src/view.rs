//! The two readings of `realloc` that the format supports (see
//! `docs/trace-format.md`, "Object ids").
//!
//! ```
//! use heaplab_trace::{Event, Kind, ResizeOp, ResizeView, split};
//! # fn ev(kind: Kind, id: Option<u64>, old: Option<u64>, size: u64, old_size: u64) -> Event {
//! #     Event { kind, size, id, old, old_size, ..Event::default() }
//! # }
//! let a = ev(Kind::Malloc, Some(0), None, 24, 0);
//! let r = ev(Kind::Realloc, Some(1), Some(0), 100, 24);
//! // CUSTOMALLOC's view: a free and a malloc.
//! assert_eq!(split(&r).len(), 2);
//! // Seidl and Zorn's view: object 0 grows from 24 to 100 bytes.
//! let mut v = ResizeView::default();
//! v.apply(&a);
//! assert_eq!(v.apply(&r), Some(ResizeOp::Resize { obj: 0, old_size: 24, new_size: 100 }));
//! ```

use crate::model::{Event, Kind};
use std::collections::HashMap;

/// One step of the free + malloc reading.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SplitOp {
    Alloc { id: u64, size: u64 },
    Free { id: u64, size: u64 },
}

/// Reads an event as frees and mallocs: a moved or resized realloc is a free
/// of the old object followed by a malloc of the new one. Failed calls are nothing.
pub fn split(ev: &Event) -> Vec<SplitOp> {
    let mut v = Vec::with_capacity(2);
    if ev.failed {
        return v;
    }
    if let Some(old) = ev.old {
        v.push(SplitOp::Free { id: old, size: ev.old_size });
    }
    if let Some(id) = ev.id {
        v.push(SplitOp::Alloc { id, size: ev.size });
    }
    v
}

/// One step of the one-object-changes-size reading.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ResizeOp {
    Alloc { obj: u64, size: u64 },
    Resize { obj: u64, old_size: u64, new_size: u64 },
    Free { obj: u64, size: u64 },
}

/// Follows realloc chains: an object keeps the id of the first allocation of
/// its chain. Memory is bounded by the live objects born of a realloc.
#[derive(Debug, Default)]
pub struct ResizeView {
    root: HashMap<u64, u64>,
}

impl ResizeView {
    fn root_of(&mut self, id: u64) -> u64 {
        self.root.remove(&id).unwrap_or(id)
    }

    /// The step this event is in this reading, or None for a failed call.
    pub fn apply(&mut self, ev: &Event) -> Option<ResizeOp> {
        if ev.failed {
            return None;
        }
        match (ev.kind, ev.old, ev.id) {
            (Kind::Free | Kind::ReallocFree, Some(old), _) => {
                Some(ResizeOp::Free { obj: self.root_of(old), size: ev.old_size })
            }
            (Kind::Realloc, Some(old), Some(id)) => {
                let obj = self.root_of(old);
                self.root.insert(id, obj);
                Some(ResizeOp::Resize { obj, old_size: ev.old_size, new_size: ev.size })
            }
            (_, _, Some(id)) => Some(ResizeOp::Alloc { obj: id, size: ev.size }),
            _ => None,
        }
    }

    /// The stable object id for a current id.
    pub fn object(&self, id: u64) -> u64 {
        self.root.get(&id).copied().unwrap_or(id)
    }
}
