//! Two runs compared site by site (before and after a change): heaptrack's
//! `--diff`, over heaplab traces.
//!
//! ```text
//!   run A, run B ─▶ each stack as its function path ("main;f;g", no
//!                   offsets or lines, which move between builds) ─▶ sum
//!   key in A or B ─▶ Row { before, after } ─▶ sorted by |Δ peak|, then |Δ allocs|
//! ```

use crate::analyze::{Analysis, StackStats};
use crate::flame::folded_stack;
use crate::symbols::Symbolizer;
use serde::Serialize;
use std::collections::BTreeMap;

/// A site's figures in one run.
#[derive(Debug, Clone, Copy, Default, Serialize, PartialEq)]
pub struct Figures {
    pub allocs: u64,
    pub bytes: u64,
    pub peak_bytes: u64,
    pub leaked_bytes: u64,
    pub leaked_objects: u64,
    pub temporary: u64,
}

impl Figures {
    fn add(&mut self, s: &StackStats) {
        self.allocs += s.allocs;
        self.bytes = self.bytes.saturating_add(s.bytes);
        self.peak_bytes += s.peak_bytes;
        self.leaked_bytes += s.live_bytes;
        self.leaked_objects += s.live_objects;
        self.temporary += s.temporary;
    }
}

/// One site in both runs.
#[derive(Debug, Clone, Serialize)]
pub struct Row {
    /// The innermost function of the site, then its callers (`g ← f ← main`).
    pub name: String,
    /// The function path, outermost first, as in folded stacks.
    pub stack: String,
    pub before: Figures,
    pub after: Figures,
    pub delta_allocs: i128,
    pub delta_peak_bytes: i128,
    pub delta_leaked_bytes: i128,
    pub delta_temporary: i128,
}

/// The comparison.
#[derive(Debug, Clone, Serialize)]
pub struct Diff {
    pub before: String,
    pub after: String,
    pub totals_before: Figures,
    pub totals_after: Figures,
    pub rows: Vec<Row>,
}

fn by_path(a: &Analysis, sym: &mut Symbolizer) -> BTreeMap<String, Figures> {
    let mut m: BTreeMap<String, Figures> = BTreeMap::new();
    for (id, s) in a.stacks.iter().enumerate() {
        if s.allocs == 0 {
            continue;
        }
        m.entry(folded_stack(a, id as u32, sym)).or_default().add(s);
    }
    m
}

fn name_of(stack: &str) -> String {
    let mut parts: Vec<&str> = stack.split(';').collect();
    parts.reverse();
    parts.truncate(4);
    parts.join(" ← ")
}

/// Compares `before` with `after`.
pub fn diff(before: &Analysis, after: &Analysis, sym: &mut Symbolizer) -> Diff {
    let a = by_path(before, sym);
    let b = by_path(after, sym);
    let keys: std::collections::BTreeSet<&String> = a.keys().chain(b.keys()).collect();
    let d = |x: u64, y: u64| i128::from(y) - i128::from(x);
    let mut rows: Vec<Row> = keys
        .into_iter()
        .map(|k| {
            let x = a.get(k).copied().unwrap_or_default();
            let y = b.get(k).copied().unwrap_or_default();
            Row {
                name: name_of(k),
                stack: k.clone(),
                before: x,
                after: y,
                delta_allocs: d(x.allocs, y.allocs),
                delta_peak_bytes: d(x.peak_bytes, y.peak_bytes),
                delta_leaked_bytes: d(x.leaked_bytes, y.leaked_bytes),
                delta_temporary: d(x.temporary, y.temporary),
            }
        })
        .filter(|r| r.before != r.after)
        .collect();
    rows.sort_by(|p, q| {
        q.delta_peak_bytes
            .abs()
            .cmp(&p.delta_peak_bytes.abs())
            .then(q.delta_leaked_bytes.abs().cmp(&p.delta_leaked_bytes.abs()))
            .then(q.delta_allocs.abs().cmp(&p.delta_allocs.abs()))
            .then(p.stack.cmp(&q.stack))
    });
    let total = |x: &Analysis| Figures {
        allocs: x.totals.allocations,
        bytes: x.totals.bytes_allocated,
        peak_bytes: x.totals.peak_bytes,
        leaked_bytes: x.totals.leaked_bytes,
        leaked_objects: x.totals.leaked_objects,
        temporary: x.totals.temporary,
    };
    Diff {
        before: before.trace.clone(),
        after: after.trace.clone(),
        totals_before: total(before),
        totals_after: total(after),
        rows,
    }
}
