//! Which size classes get lists (002 §2.2, §3): the most frequent first,
//! until the kept classes cover the target share of allocations or the cap
//! is reached; classes over `max_class_bytes` are never kept. The rest go to
//! the general allocator as they are.

use super::{Options, Thresholds};
use anyhow::{bail, Result};
use heaplab_trace::profile::{Profile, SizeClass};
use serde::Serialize;

/// Why the selection stopped adding classes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum StoppedBy {
    /// The kept classes reached the coverage target.
    Coverage,
    /// `max_classes` classes were kept.
    Cap,
    /// Every eligible class was kept, short of the target.
    Classes,
}

impl StoppedBy {
    /// The word decisions.json and the generated comments use.
    pub fn as_str(self) -> &'static str {
        match self {
            StoppedBy::Coverage => "coverage",
            StoppedBy::Cap => "cap",
            StoppedBy::Classes => "classes",
        }
    }
}

impl std::fmt::Display for StoppedBy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The classes kept at one unit, most frequent first.
pub struct Selected<'a> {
    pub kept: Vec<&'a SizeClass>,
    /// Frequent classes (≥ 0.1% of allocations) skipped for their size.
    pub too_large: Vec<u64>,
    /// Share of allocations the kept classes cover.
    pub covered: f64,
    pub stopped_by: StoppedBy,
}

/// Keeps classes most frequent first until `opts.coverage` or
/// `opts.max_classes`.
pub fn select<'a>(prof: &'a Profile, opts: &Options, th: &Thresholds) -> Selected<'a> {
    let total_allocs = prof.size_classes.iter().map(|c| c.allocs).sum::<u64>().max(1) as f64;
    let mut kept: Vec<&SizeClass> = Vec::new();
    let mut too_large = Vec::new();
    let mut covered = 0.0;
    let mut stopped_by = StoppedBy::Classes;
    for c in &prof.size_classes {
        if covered >= opts.coverage - 1e-12 {
            stopped_by = StoppedBy::Coverage;
            break;
        }
        if kept.len() == opts.max_classes {
            stopped_by = StoppedBy::Cap;
            break;
        }
        if c.size > th.max_class_bytes {
            if c.allocs as f64 / total_allocs >= 0.001 {
                too_large.push(c.size);
            }
            continue;
        }
        covered += c.allocs as f64 / total_allocs;
        kept.push(c);
    }
    if stopped_by == StoppedBy::Classes && covered >= opts.coverage - 1e-12 {
        stopped_by = StoppedBy::Coverage;
    }
    Selected { kept, too_large, covered, stopped_by }
}

/// `--fast` and `--general` must name kept classes, and not the same one.
pub fn check_overrides(sel: &Selected, unit: u64, opts: &Options) -> Result<()> {
    for (flag, sizes) in [("--fast", &opts.fast), ("--general", &opts.general)] {
        for s in sizes.iter() {
            if !sel.kept.iter().any(|c| c.size == *s) {
                let mut names: Vec<u64> = sel.kept.iter().map(|c| c.size).collect();
                names.sort_unstable();
                bail!(
                    "{flag} {s}: not a kept size class at unit {unit}; the kept classes are {}",
                    names.iter().map(u64::to_string).collect::<Vec<_>>().join(", ")
                );
            }
        }
    }
    if let Some(s) = opts.fast.iter().find(|s| opts.general.contains(s)) {
        bail!("class {s} is given both --fast and --general");
    }
    Ok(())
}
