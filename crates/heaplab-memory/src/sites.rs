//! Call sites for people: the stacks of an [`Analysis`] symbolized, grouped
//! (by whole stack, by the calling function, or by its source line), summed
//! and sorted.
//!
//! ```text
//!   stack id ─▶ raw frames [(module, offset)] ─▶ each: [SymFrame] (inlined first)
//!            ─▶ the call site: the first frame not in an allocation wrapper
//!               (operator new, --skip FUNCTION) ─▶ group key
//!   group ─▶ Site { figures summed over its stacks, frames of its largest stack }
//! ```

use crate::analyze::{Analysis, StackStats};
use crate::hist::Percentiles;
use crate::symbols::{SymFrame, Symbolizer};
use serde::Serialize;
use std::collections::HashMap;

/// How stacks make sites.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum GroupBy {
    /// Every distinct recorded stack is a site.
    #[default]
    Stack,
    /// Stacks whose call site is in the same function.
    Function,
    /// Stacks whose call site is the same source line.
    Line,
}

/// The order of the sites.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum SortKey {
    /// Bytes live at the program's peak.
    #[default]
    Peak,
    /// Bytes still live at the end.
    Leaked,
    /// Allocation calls.
    Allocs,
    /// Temporary allocations.
    Temporary,
    /// Bytes allocated in all.
    Bytes,
    /// The most bytes the site alone had live.
    Max,
}

impl SortKey {
    pub fn value(self, s: &StackStats) -> u64 {
        match self {
            SortKey::Peak => s.peak_bytes,
            SortKey::Leaked => s.live_bytes,
            SortKey::Allocs => s.allocs,
            SortKey::Temporary => s.temporary,
            SortKey::Bytes => s.bytes,
            SortKey::Max => s.max_bytes,
        }
    }
    pub fn name(self) -> &'static str {
        match self {
            SortKey::Peak => "peak",
            SortKey::Leaked => "leaked",
            SortKey::Allocs => "allocs",
            SortKey::Temporary => "temporary",
            SortKey::Bytes => "bytes",
            SortKey::Max => "max",
        }
    }
}

/// One recorded frame with what it resolved to.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct SiteFrame {
    /// The module's path as recorded ("" for an address in no module).
    pub module: String,
    /// Return address relative to the module (absolute without one).
    pub offset: u64,
    /// Functions at this address, innermost first (inlined ones first).
    pub symbols: Vec<SymFrame>,
}

impl SiteFrame {
    /// One line per function: `make_node  leak.c:4` (or `libc.so.6+0x2718a`).
    pub fn lines(&self) -> Vec<String> {
        let short = self.module.rsplit('/').next().unwrap_or(&self.module);
        if self.symbols.is_empty() {
            return vec![if self.module.is_empty() {
                format!("{:#x}", self.offset)
            } else {
                format!("{short}+{:#x}", self.offset)
            }];
        }
        self.symbols
            .iter()
            .map(|s| {
                let name =
                    s.function.clone().unwrap_or_else(|| format!("{short}+{:#x}", self.offset));
                let loc = s.short_location().map(|l| format!("  {l}")).unwrap_or_default();
                let inl = if s.inlined { "  (inlined)" } else { "" };
                format!("{name}{loc}{inl}")
            })
            .collect()
    }

    /// The function name for flame graphs and keys (`module+0xoff` when unknown).
    pub fn names(&self) -> Vec<String> {
        let short = self.module.rsplit('/').next().unwrap_or(&self.module);
        let fallback = || {
            if self.module.is_empty() {
                format!("{:#x}", self.offset)
            } else {
                format!("{short}+{:#x}", self.offset)
            }
        };
        if self.symbols.is_empty() {
            return vec![fallback()];
        }
        self.symbols.iter().map(|s| s.function.clone().unwrap_or_else(fallback)).collect()
    }
}

/// A call site and what it did.
#[derive(Debug, Clone, Serialize)]
pub struct Site {
    pub rank: usize,
    /// The call site in words: `make_node (leak.c:4)`.
    pub name: String,
    /// Recorded stacks summed into this site.
    pub stacks: usize,
    pub allocs: u64,
    pub bytes: u64,
    pub failed: u64,
    /// Bytes and objects live at the program's peak.
    pub peak_bytes: u64,
    pub peak_objects: u64,
    /// Bytes and objects still live at the end (leaked when the program exited).
    pub leaked_bytes: u64,
    pub leaked_objects: u64,
    /// The most bytes this site alone had live.
    pub max_bytes: u64,
    pub temporary: u64,
    pub temporary_bytes: u64,
    /// Lifetimes of its freed objects, nanoseconds.
    pub lifetime_ns: Percentiles,
    /// The frames of its stack (of its largest stack, when several make it),
    /// innermost first, the allocation wrappers skipped.
    pub frames: Vec<SiteFrame>,
    /// Stack ids of the trace that make this site (to join with the stacks
    /// of other readers: tools/python's frames, the trace dump).
    pub stack_ids: Vec<u32>,
}

/// How sites are made and listed.
#[derive(Debug, Clone, Serialize)]
pub struct SiteOptions {
    pub group_by: GroupBy,
    pub sort: SortKey,
    /// Functions whose frames are allocation wrappers, skipped at the top of
    /// a stack (prefixes of the demangled name).
    pub skip: Vec<String>,
}

impl Default for SiteOptions {
    fn default() -> Self {
        SiteOptions {
            group_by: GroupBy::Stack,
            sort: SortKey::Peak,
            skip: vec!["operator new".into(), "operator new[]".into()],
        }
    }
}

/// The symbolized frames of stack `id` of `a`, innermost first.
pub fn frames_of(a: &Analysis, id: u32, sym: &mut Symbolizer) -> Vec<SiteFrame> {
    let Some(raw) = a.frames.get(id as usize) else { return Vec::new() };
    raw.iter()
        .map(|f| match a.module_of(f.module) {
            Some(m) => {
                let h = sym.module(&m.path, &m.build_id);
                SiteFrame {
                    module: String::from_utf8_lossy(&m.path).into_owned(),
                    offset: f.offset,
                    symbols: sym.resolve(h, f.offset).to_vec(),
                }
            }
            None => SiteFrame { module: String::new(), offset: f.offset, symbols: Vec::new() },
        })
        .collect()
}

fn is_wrapper(f: &SiteFrame, skip: &[String]) -> bool {
    !f.symbols.is_empty()
        && f.symbols.iter().all(|s| {
            s.function.as_deref().is_some_and(|n| skip.iter().any(|p| n.starts_with(p.as_str())))
        })
}

/// The frames with leading allocation wrappers removed (all of them kept
/// when every frame is one).
pub fn skip_wrappers(frames: Vec<SiteFrame>, skip: &[String]) -> Vec<SiteFrame> {
    let n = frames.iter().take_while(|f| is_wrapper(f, skip)).count();
    if n == frames.len() {
        frames
    } else {
        frames.into_iter().skip(n).collect()
    }
}

fn site_name(frames: &[SiteFrame]) -> String {
    let Some(f) = frames.first() else { return "(no stack recorded)".into() };
    let short = f.module.rsplit('/').next().unwrap_or(&f.module);
    match f.symbols.first() {
        Some(s) => {
            let name = s.function.clone().unwrap_or_else(|| format!("{short}+{:#x}", f.offset));
            match s.short_location() {
                Some(l) => format!("{name} ({l})"),
                None => format!("{name} ({short})"),
            }
        }
        None => f.lines().remove(0),
    }
}

/// The sites of an analysis, grouped and sorted (all of them; the caller
/// shows as many as it likes).
pub fn sites(a: &Analysis, o: &SiteOptions, sym: &mut Symbolizer) -> Vec<Site> {
    struct Acc {
        stats: StackStats,
        ids: Vec<u32>,
        best: (u64, u32),
        frames: Vec<SiteFrame>,
    }
    let mut groups: HashMap<String, Acc> = HashMap::new();
    for (id, st) in a.stacks.iter().enumerate() {
        if st.allocs == 0 && st.failed == 0 {
            continue;
        }
        let id = id as u32;
        let frames = skip_wrappers(frames_of(a, id, sym), &o.skip);
        let key = match o.group_by {
            GroupBy::Stack => format!("#{id}"),
            GroupBy::Function | GroupBy::Line => match frames.first() {
                None => "(none)".into(),
                Some(f) => {
                    let s = f.symbols.first();
                    let func = s.and_then(|s| s.function.clone());
                    match (func, o.group_by) {
                        (Some(func), GroupBy::Function) => format!("{}\0{func}", f.module),
                        (Some(func), _) => format!(
                            "{}\0{func}\0{}",
                            f.module,
                            s.and_then(|s| s.short_location()).unwrap_or_default()
                        ),
                        (None, _) => format!("{}\0{:#x}", f.module, f.offset),
                    }
                }
            },
        };
        let weight = o.sort.value(st).max(st.bytes);
        let g = groups.entry(key).or_insert_with(|| Acc {
            stats: StackStats::default(),
            ids: Vec::new(),
            best: (0, id),
            frames: Vec::new(),
        });
        g.stats.add(st);
        g.ids.push(id);
        if g.frames.is_empty() && g.ids.len() == 1 || weight > g.best.0 {
            g.best = (weight, id);
            g.frames = frames;
        }
    }
    let mut out: Vec<Site> = groups
        .into_values()
        .map(|g| {
            let mut frames = g.frames;
            if o.group_by != GroupBy::Stack {
                frames.truncate(1);
            }
            Site {
                rank: 0,
                name: site_name(&frames),
                stacks: g.ids.len(),
                allocs: g.stats.allocs,
                bytes: g.stats.bytes,
                failed: g.stats.failed,
                peak_bytes: g.stats.peak_bytes,
                peak_objects: g.stats.peak_objects,
                leaked_bytes: g.stats.live_bytes,
                leaked_objects: g.stats.live_objects,
                max_bytes: g.stats.max_bytes,
                temporary: g.stats.temporary,
                temporary_bytes: g.stats.temporary_bytes,
                lifetime_ns: g.stats.lifetime_ns.percentiles(),
                frames,
                stack_ids: g.ids,
            }
        })
        .collect();
    let key = |s: &Site| match o.sort {
        SortKey::Peak => s.peak_bytes,
        SortKey::Leaked => s.leaked_bytes,
        SortKey::Allocs => s.allocs,
        SortKey::Temporary => s.temporary,
        SortKey::Bytes => s.bytes,
        SortKey::Max => s.max_bytes,
    };
    // ties last by the stacks' ids, so that two runs print the same order
    // (the groups come out of a hash map in an order of its own)
    out.sort_by(|a, b| {
        key(b)
            .cmp(&key(a))
            .then(b.bytes.cmp(&a.bytes))
            .then(a.name.cmp(&b.name))
            .then(a.stack_ids.cmp(&b.stack_ids))
    });
    for (i, s) in out.iter_mut().enumerate() {
        s.rank = i + 1;
    }
    out
}
