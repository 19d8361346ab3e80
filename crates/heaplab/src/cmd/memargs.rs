//! The flags `stats`, `diff` and `export` share for the per-site answers
//! (heaplab-memory): filters, grouping, sort key, frames, debug files.

use anyhow::{bail, Result};
use heaplab_memory::analyze::{Filter, Options};
use heaplab_memory::sites::{GroupBy, SiteOptions, SortKey};
use heaplab_memory::symbols::Symbolizer;
use std::path::PathBuf;

#[derive(clap::Args, Clone)]
pub struct MemArgs {
    /// Order of the call sites: bytes live at the program's peak, bytes
    /// leaked (live at the end), allocation calls, temporary allocations,
    /// bytes allocated, or the most the site alone had live.
    #[arg(long, value_enum, default_value_t = SortArg::Peak)]
    pub sort: SortArg,
    /// What makes a site: each distinct recorded stack, or the calling
    /// function, or its source line (stacks summed).
    #[arg(long, value_enum, default_value_t = GroupArg::Stack)]
    pub group_by: GroupArg,
    /// Frames shown per site (default: every frame the trace holds).
    #[arg(long, value_name = "N")]
    pub frames: Option<usize>,
    /// Count only allocations made at or after this time from the first
    /// event (e.g. 1.5s, 200ms, 30us; a bare number is seconds).
    #[arg(long, value_name = "TIME", value_parser = parse_time)]
    pub from: Option<u64>,
    /// Count only allocations made at or before this time; the peak is
    /// searched before it.
    #[arg(long, value_name = "TIME", value_parser = parse_time)]
    pub to: Option<u64>,
    /// Only allocations by this thread (index, kernel tid or name); repeatable.
    #[arg(long, value_name = "THREAD")]
    pub thread: Vec<String>,
    /// Only stacks with a frame in a module whose path contains this; repeatable.
    #[arg(long, value_name = "TEXT")]
    pub module: Vec<String>,
    /// Only stacks with a frame in a function whose name contains this; repeatable.
    #[arg(long, value_name = "TEXT")]
    pub function: Vec<String>,
    /// An allocation its own thread frees within N of that thread's events
    /// is temporary (1: heaptrack's definition, freed with no other
    /// allocation or free in between).
    #[arg(long, value_name = "N", default_value_t = 1)]
    pub temporary_within: u64,
    /// Also look for separate debug files under DIR/.build-id/ (and as
    /// DIR/PATH/NAME for .gnu_debuglink); /usr/lib/debug is always searched.
    /// HEAPLAB_DEBUG_DIRS (colon-separated) adds more.
    #[arg(long, value_name = "DIR")]
    pub debug_dir: Vec<PathBuf>,
    /// Allocation wrappers skipped at the top of a stack (name prefixes;
    /// `operator new` is skipped already); repeatable.
    #[arg(long, value_name = "FUNCTION")]
    pub skip: Vec<String>,
}

#[derive(Clone, Copy, clap::ValueEnum)]
pub enum SortArg {
    Peak,
    Leaked,
    Allocs,
    Temporary,
    Bytes,
    Max,
}

#[derive(Clone, Copy, clap::ValueEnum)]
pub enum GroupArg {
    Stack,
    Function,
    Line,
}

/// "1.5s", "200ms", "30us", "100ns", or seconds → nanoseconds.
pub fn parse_time(s: &str) -> Result<u64, String> {
    let t = s.trim();
    let (num, mul) = if let Some(n) = t.strip_suffix("ns") {
        (n, 1.0)
    } else if let Some(n) = t.strip_suffix("us").or_else(|| t.strip_suffix("µs")) {
        (n, 1e3)
    } else if let Some(n) = t.strip_suffix("ms") {
        (n, 1e6)
    } else if let Some(n) = t.strip_suffix('s') {
        (n, 1e9)
    } else {
        (t, 1e9)
    };
    match num.trim().parse::<f64>() {
        Ok(v) if v >= 0.0 && v.is_finite() => Ok((v * mul).round() as u64),
        _ => Err(format!("{s:?} is not a time; use e.g. 1.5s, 200ms, 30us or 100ns")),
    }
}

impl MemArgs {
    pub fn options(&self) -> Result<Options> {
        if let (Some(a), Some(b)) = (self.from, self.to) {
            if a > b {
                bail!("--from is after --to");
            }
        }
        Ok(Options {
            filter: Filter {
                from_ns: self.from,
                to_ns: self.to,
                threads: self.thread.clone(),
                modules: self.module.clone(),
                functions: self.function.clone(),
            },
            temporary_within: self.temporary_within,
            ..Options::default()
        })
    }

    pub fn site_options(&self) -> SiteOptions {
        let mut o = SiteOptions {
            group_by: match self.group_by {
                GroupArg::Stack => GroupBy::Stack,
                GroupArg::Function => GroupBy::Function,
                GroupArg::Line => GroupBy::Line,
            },
            sort: match self.sort {
                SortArg::Peak => SortKey::Peak,
                SortArg::Leaked => SortKey::Leaked,
                SortArg::Allocs => SortKey::Allocs,
                SortArg::Temporary => SortKey::Temporary,
                SortArg::Bytes => SortKey::Bytes,
                SortArg::Max => SortKey::Max,
            },
            ..SiteOptions::default()
        };
        o.skip.extend(self.skip.iter().cloned());
        o
    }

    pub fn symbolizer(&self) -> Symbolizer {
        let mut dirs = self.debug_dir.clone();
        dirs.extend(heaplab_memory::debuginfo::default_debug_dirs());
        Symbolizer::new(dirs)
    }

    pub fn frames(&self) -> usize {
        self.frames.unwrap_or(usize::MAX)
    }
}

/// This run's provenance, for reports and JSON.
pub fn provenance() -> heaplab_plumb::provenance::Provenance {
    heaplab_plumb::provenance::Provenance::collect(
        env!("CARGO_PKG_VERSION"),
        option_env!("HEAPLAB_COMMIT"),
        std::env::args().collect(),
    )
}
