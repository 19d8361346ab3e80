//! Instructions per allocator call, by one of three counters that give the
//! same figure (paper 002 §4.1 counted it with QP: every instruction the
//! call executes, inclusive of what it calls):
//!
//! | counter | how | cost (allocation-bound replays) |
//! |---|---|---|
//! | `vgcount` (default) | `valgrind --tool=heaplab-count heaplab-replay --count vgcount`: heaplab's own tool (native/vgtool/hl_count.c) counts guest instructions per superblock, shared out to the call under way | about Valgrind's `none` tool |
//! | `callgrind` | `valgrind --tool=callgrind --instr-atstart=no heaplab-replay --per-call`: the inclusive cost of each `rp_call_*` wrapper's callees | ten times more: a shadow call stack and a cost centre per function |
//! | `perf` | `heaplab-replay --count perf`: the CPU's instruction counter (perf_event_open), read with rdpmc around each call, calibrated | about a native replay, where the machine lends its counters |
//!
//! Callgrind is the oracle: `crates/heaplab/tests/counters.rs` checks that
//! vgcount's counts equal callgrind's within 1% (they are equal to the
//! instruction on deterministic allocators). Every counter reports the same
//! [`Counts`]: per wrapper entry point, calls and instructions.

use crate::alloc::Allocator;
use crate::callgrind::{self, AllocCosts, KindCost, REPLAY_WRAPPERS};
use crate::replay::{self, Outcome};
use crate::tools::Tools;
use anyhow::{bail, Result};
use heaplab_plumb::AllocSpec;
use serde::{Deserialize, Serialize};
use std::path::Path;

/// Which counter counts instructions.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Counter {
    Vgcount,
    Callgrind,
    Perf,
}

impl Counter {
    pub const ALL: [Counter; 3] = [Counter::Vgcount, Counter::Callgrind, Counter::Perf];

    pub fn name(self) -> &'static str {
        match self {
            Counter::Vgcount => "vgcount",
            Counter::Callgrind => "callgrind",
            Counter::Perf => "perf",
        }
    }

    pub fn parse(s: &str) -> Result<Counter> {
        Counter::ALL.into_iter().find(|c| c.name() == s).ok_or_else(|| {
            anyhow::anyhow!(
                "unknown counter {s:?}: the counters are vgcount (default), callgrind and perf"
            )
        })
    }

    /// Roughly how many times slower than a native replay (for estimates).
    pub fn slowdown(self) -> f64 {
        match self {
            Counter::Vgcount => 8.0,
            Counter::Callgrind => 50.0,
            Counter::Perf => 1.5,
        }
    }

    /// Whether it runs under Valgrind (and so gets ten times the time limit).
    pub fn under_valgrind(self) -> bool {
        self != Counter::Perf
    }
}

/// One entry point's calls and the instructions they executed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Entry {
    pub entry: String,
    pub calls: u64,
    pub instructions: u64,
}

/// What a count replay gives.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Counts {
    pub counter: Counter,
    /// Per `rp_call_*` entry point (REPLAY_WRAPPERS' names).
    pub entries: Vec<Entry>,
    /// Every instruction counted in the replay's timed region (the
    /// allocator's and the replayer's loop), when the counter knows it.
    pub replay_instructions: Option<u64>,
    /// Environment the counted replay had beside the allocator's own
    /// ([`counting_env`]), VAR=VALUE; the records' `count_env`.
    #[serde(default)]
    pub env: Vec<String>,
}

/// jemalloc's setting for counted replays: no purging driven by the clock.
pub const JEMALLOC_COUNT_CONF: &str = "dirty_decay_ms:-1,muzzy_decay_ms:-1";

/// Environment a counted replay of `alloc` gets beside the allocator's own,
/// so that its counts depend on the calls alone, whatever the counter.
///
/// jemalloc purges unused dirty pages by the clock (decay over
/// `dirty_decay_ms`, 10 s by default, checked every so many frees), so the
/// work it does in free depends on how fast the replay runs: under callgrind,
/// ten times slower than under vgcount, it purged more, and the two counts of
/// a python trace's frees differed by 2% from run to run. With clock-driven
/// purging off (`MALLOC_CONF=dirty_decay_ms:-1,muzzy_decay_ms:-1`) every
/// counter gives the same count to the instruction. The counts then leave out
/// the purging a native run does at a rate set by wall time; the touch and
/// timing replays keep jemalloc's defaults. A MALLOC_CONF of the user's (in
/// heaplab's environment) comes first, so only the decay is overridden.
pub fn counting_env(alloc: &AllocSpec) -> Vec<(String, String)> {
    if alloc.name != "jemalloc" || alloc.source != "peer" {
        return vec![];
    }
    if alloc.env.iter().any(|(k, _)| k == "MALLOC_CONF") {
        return vec![]; // the user chose it for this allocator
    }
    let conf = match std::env::var("MALLOC_CONF") {
        Ok(user) if !user.is_empty() => format!("{user},{JEMALLOC_COUNT_CONF}"),
        _ => JEMALLOC_COUNT_CONF.to_string(),
    };
    vec![("MALLOC_CONF".into(), conf)]
}

impl Counts {
    /// The allocator's cost by kind of call (malloc family, free, realloc).
    pub fn costs(&self) -> AllocCosts {
        let mut c = AllocCosts::default();
        for e in &self.entries {
            let Some((_, kind)) = REPLAY_WRAPPERS.iter().find(|(w, _)| *w == e.entry) else {
                continue;
            };
            let k: &mut KindCost = match *kind {
                "malloc" => &mut c.malloc,
                "free" => &mut c.free,
                _ => &mut c.realloc,
            };
            k.calls += e.calls;
            k.instructions += e.instructions;
            c.total += e.instructions;
        }
        c
    }

    fn from_profile(p: &callgrind::Profile) -> Counts {
        let entries = REPLAY_WRAPPERS
            .iter()
            .map(|(w, _)| {
                let (mut calls, mut instructions) = (0, 0);
                for ((caller, _), a) in &p.arcs {
                    if caller == w {
                        calls += a.calls;
                        instructions += a.inclusive;
                    }
                }
                Entry { entry: w.to_string(), calls, instructions }
            })
            .collect();
        Counts {
            counter: Counter::Callgrind,
            entries,
            replay_instructions: Some(p.total),
            env: vec![],
        }
    }

    /// The `counts` object of the replayer's JSON (`--count vgcount|perf`).
    fn from_replayer(counter: Counter, raw: &serde_json::Value) -> Result<Counts> {
        #[derive(Deserialize)]
        struct C {
            replay_instructions: Option<u64>,
            entries: Vec<Entry>,
        }
        let c: C = serde_json::from_value(raw["counts"].clone()).map_err(|e| {
            anyhow::anyhow!("the replayer's JSON has no counts it can read ({e}); is it older than this heaplab?")
        })?;
        Ok(Counts {
            counter,
            entries: c.entries,
            replay_instructions: c.replay_instructions,
            env: vec![],
        })
    }
}

/// The folder Valgrind loads heaplab's tools from (`build/lib/valgrind`).
pub fn vg_lib(tools: &Tools) -> std::path::PathBuf {
    tools.lib_dir.join("valgrind")
}

/// Fails with what to do when `counter` cannot run here.
pub fn check(tools: &Tools, counter: Counter) -> Result<()> {
    if counter.under_valgrind() && !tools.have_valgrind() {
        bail!(
            "valgrind is not installed, and the {} counter needs it (apt-get install valgrind; or --no-instructions)",
            counter.name()
        );
    }
    if counter == Counter::Vgcount {
        let tool = vg_lib(tools).join("heaplab-count-amd64-linux");
        if !tool.exists() {
            bail!(
                "heaplab's counting tool {} is not built (run `make -C native`; it needs Debian's valgrind package), or count with --counter callgrind",
                tool.display()
            );
        }
    }
    Ok(())
}

/// Replays `trace` under `alloc` with `counter`; the counts when it ran clean.
/// Callgrind's output goes to a private scratch directory, removed after.
pub fn run(
    tools: &Tools,
    alloc: &Allocator,
    trace: &Path,
    counter: Counter,
) -> Result<(Outcome, Option<Counts>)> {
    match counter {
        Counter::Callgrind => {
            let scratch = heaplab_plumb::scratch::ScratchDir::new("callgrind")?;
            let out = scratch.path().join("callgrind.out");
            let (o, p) = replay::run_callgrind(tools, alloc, trace, &out)?;
            let counts = o.failure().is_none().then(|| Counts::from_profile(&p));
            Ok((o, counts))
        }
        Counter::Vgcount | Counter::Perf => {
            let mut c = if counter == Counter::Vgcount {
                let mut c = replay::command(&tools.valgrind, alloc);
                c.env("VALGRIND_LIB", vg_lib(tools))
                    .arg("--tool=heaplab-count")
                    .arg("-q")
                    .arg(&tools.replay);
                c
            } else {
                replay::command(&tools.replay, alloc)
            };
            c.arg("--count").arg(counter.name());
            if let Some(d) = &tools.ops_cache {
                c.arg("--ops-cache").arg(d);
            }
            c.arg(trace);
            let limit =
                if counter.under_valgrind() { tools.callgrind_timeout() } else { tools.timeout };
            let o = replay::finish(&mut c, limit)?;
            let counts = match (&o.raw, o.failure()) {
                (Some(raw), None) => Some(Counts::from_replayer(counter, raw)?),
                _ => None,
            };
            Ok((o, counts))
        }
    }
}
