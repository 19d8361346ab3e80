//! What each allocator costs on a recorded program, beside glibc, jemalloc,
//! mimalloc and tcmalloc: the measurement behind `heaplab compare` and
//! `heaplab lab`.
//!
//! Every cell (trace × allocator) is its own process: the replayer
//! (`native/replay`, `heaplab-replay`) with the allocator loaded by
//! `LD_PRELOAD`, as users deploy allocators and as mimalloc-bench compares
//! them. Per cell it measures, after paper 002 §4 and paper 000 §3:
//!
//! - instructions per malloc, per free and per realloc, inclusive of all they
//!   call, counted exactly ([`count`]: heaplab's own Valgrind tool by
//!   default, callgrind as the oracle, or the CPU's counter): these repeat;
//! - the allocator's share of the instructions;
//! - wall time of the replay (median over repeats, run one at a time) and its
//!   ratio to glibc's in the same invocation;
//! - peak footprint: exact bytes from the OS for heaplab's allocators
//!   (`heaplab_alloc_stats`), RSS growth in touch mode for the others; and
//!   that footprint normalized to firstfit's (002 Figure 6);
//! - peak live payload, utilization (peak live / peak footprint) and internal
//!   fragmentation.
//!
//! ```no_run
//! use heaplab_compare::*;
//! let tools = Tools::discover().unwrap();
//! let allocs = alloc::resolve(&["glibc".into(), "firstfit".into()], &tools).unwrap();
//! let opts = Options::default();
//! let traces = vec![std::path::PathBuf::from("perl.hltrace")];
//! let records = compare(&tools, &traces, &allocs, &opts, &heaplab_jobs::run::Quiet).unwrap();
//! println!("{}", serde_json::to_string_pretty(&records).unwrap());
//! ```
//!
//! Each cell's measurements are independent jobs ([`jobs`], on
//! `heaplab-jobs`): a local run runs them here, keeping each outcome as it
//! finishes (`resume`); `heaplab compare --plan DIR` writes them for GNU
//! parallel or Slurm and `--merge DIR` makes the same records from their
//! outcomes.
//!
//! `docs/compare.md` documents the records ([`Record`]) field by field.

pub mod count;
pub mod health;
pub mod jobs;
pub mod lab;
pub mod live;
pub mod measure;
pub mod record;
pub mod replay;
pub mod report;

// The plumbing these modules use lives in heaplab-plumb; the old paths stay.
pub use heaplab_plumb::{alloc, callgrind, tools};

pub use alloc::{Allocator, Source};
pub use measure::{compare, Options};
pub use record::Record;
pub use tools::Tools;

/// Progress of a long run, for a progress bar. Called from worker threads.
pub trait Progress: Sync {
    /// The number of steps the run will take.
    fn start(&self, _steps: u64) {}
    /// One step done, with a word on what.
    fn step(&self, _what: &str) {}
}

/// A [`Progress`] that shows nothing.
pub struct NoProgress;
impl Progress for NoProgress {}

/// Runs `jobs` closures on up to `workers` threads; results in job order.
pub fn parallel<T: Send, F: Fn(usize) -> T + Sync>(n: usize, workers: usize, f: F) -> Vec<T> {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Mutex;
    let next = AtomicUsize::new(0);
    let out: Mutex<Vec<Option<T>>> = Mutex::new((0..n).map(|_| None).collect());
    std::thread::scope(|s| {
        for _ in 0..workers.clamp(1, n.max(1)) {
            s.spawn(|| loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                if i >= n {
                    break;
                }
                let r = f(i);
                out.lock().expect("no worker panics while holding the lock")[i] = Some(r);
            });
        }
    });
    out.into_inner()
        .expect("workers are done")
        .into_iter()
        .map(|r| r.expect("every job ran"))
        .collect()
}

/// The number of CPUs this process may use.
pub fn cores() -> usize {
    std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1)
}
