//! The measurement phase as the synthesizer reads it (paper 002 §2.1, §3):
//! every trace is profiled once at each candidate allocation unit, and the
//! runs are merged with each run weighing the same.

use anyhow::{bail, Context, Result};
use heaplab_trace::profile::{Profile, ProfileBuilder, Weighting};
use heaplab_trace::{Event, Kind, TraceReader};
use std::path::{Path, PathBuf};
use std::sync::{mpsc, Arc};

/// The allocation units the synthesizer considers, in bytes (002 §4.3: "a
/// finer storage granularity (eight bytes) ... select an appropriate
/// aggregation size (e.g., 16 or 32 bytes)").
pub const UNITS: [u64; 3] = [8, 16, 32];

/// The profiles of a set of runs.
#[derive(Debug, Clone)]
pub struct Measured {
    /// The traces, as given.
    pub traces: Vec<PathBuf>,
    /// The command line of each run.
    pub commands: Vec<String>,
    /// One merged profile per unit of [`UNITS`], in that order.
    pub by_unit: Vec<Profile>,
}

impl Measured {
    /// The merged profile at `unit` (one of [`UNITS`]).
    pub fn at(&self, unit: u64) -> &Profile {
        let i = UNITS.iter().position(|&u| u == unit).expect("a unit of UNITS");
        &self.by_unit[i]
    }
}

/// Events handed from the reader to the builders at a time.
const BATCH: usize = 1 << 14;

/// What a profile builder reads of an event (`ProfileBuilder::add`): a
/// third of an [`Event`]'s bytes, so that handing a batch over copies little.
#[derive(Clone, Copy)]
struct Slim {
    time: u64,
    size: u64,
    id: Option<u64>,
    old: Option<u64>,
    thread: u32,
    stack: u32,
    kind: Kind,
    failed: bool,
}

impl Slim {
    fn of(e: &Event) -> Slim {
        Slim {
            time: e.time,
            size: e.size,
            id: e.id,
            old: e.old,
            thread: e.thread,
            stack: e.stack,
            kind: e.kind,
            failed: e.failed,
        }
    }

    /// Sets the fields the builder reads in `ev`.
    fn fill(&self, ev: &mut Event) {
        ev.time = self.time;
        ev.size = self.size;
        ev.id = self.id;
        ev.old = self.old;
        ev.thread = self.thread;
        ev.stack = self.stack;
        ev.kind = self.kind;
        ev.failed = self.failed;
    }
}

/// Profiles one trace at every unit of [`UNITS`] in one pass: this thread
/// decodes, and one thread per unit builds that unit's profile from the
/// same batches of events (a 100 M-event trace: decoding and each builder
/// take seconds apiece, so on two cores the pass takes about the longer of
/// them rather than their sum).
pub fn profile_trace(path: &Path) -> Result<(Vec<Profile>, String)> {
    let mut r = TraceReader::open(path)?;
    let time_unit = r.meta().time_unit_ns;
    let command = r.meta().command_line();
    let name = path.display().to_string();
    let builders = std::thread::scope(|scope| -> Result<Vec<ProfileBuilder>> {
        let mut txs = Vec::new();
        let mut handles = Vec::new();
        // the builder done last with a batch hands it back for the next one
        // (a fresh 768 KiB batch every 16 Ki events cost page faults)
        let (back, spare) = mpsc::channel::<Vec<Slim>>();
        for &u in &UNITS {
            let (tx, rx) = mpsc::sync_channel::<Arc<Vec<Slim>>>(4);
            txs.push(tx);
            let back = back.clone();
            handles.push(scope.spawn(move || {
                let mut b = ProfileBuilder::new(u, time_unit);
                let mut ev = Event::default();
                for batch in rx {
                    for s in batch.iter() {
                        s.fill(&mut ev);
                        b.add(&ev);
                    }
                    if let Some(v) = Arc::into_inner(batch) {
                        drop(back.send(v)); // the reader may be gone: then it is freed
                    }
                }
                b
            }));
        }
        drop(back);
        let fresh = || match spare.try_recv() {
            Ok(mut v) => {
                v.clear();
                v
            }
            Err(_) => Vec::with_capacity(BATCH),
        };
        let send = |batch: Vec<Slim>| {
            let batch = Arc::new(batch);
            // A builder that is gone panicked: its join below says so.
            txs.iter().for_each(|tx| drop(tx.send(Arc::clone(&batch))));
        };
        let mut batch = Vec::with_capacity(BATCH);
        let mut failure = None;
        let mut e = Event::default();
        loop {
            match r.read_event(&mut e) {
                Ok(true) => {
                    batch.push(Slim::of(&e));
                    if batch.len() == BATCH {
                        send(std::mem::replace(&mut batch, fresh()));
                    }
                }
                Ok(false) => break,
                Err(e) => {
                    failure = Some(e);
                    break;
                }
            }
        }
        if failure.is_none() && !batch.is_empty() {
            send(batch);
        }
        drop(txs);
        let built: Vec<ProfileBuilder> = handles
            .into_iter()
            .map(|h| h.join().unwrap_or_else(|p| std::panic::resume_unwind(p)))
            .collect();
        if let Some(e) = failure {
            bail!(
                "{e}\n(a profile of part of a run would mislead the synthesizer; \
                 record the run again, or leave this trace out)"
            );
        }
        Ok(built)
    })?;
    let profiles = builders
        .into_iter()
        .map(|b| b.finish(&name, |_| Vec::new(), |_| String::new(), 0))
        .collect();
    Ok((profiles, command))
}

/// Profiles every trace and merges the runs, each run weighing the same
/// ([`Weighting::Runs`], 002 §3).
pub fn measure(traces: &[PathBuf]) -> Result<Measured> {
    if traces.is_empty() {
        bail!("no traces: give at least one .hltrace (heaplab record writes them)");
    }
    let mut per_unit: Vec<Vec<Profile>> = UNITS.iter().map(|_| Vec::new()).collect();
    let mut commands = Vec::new();
    for t in traces {
        let (profiles, command) =
            profile_trace(t).with_context(|| format!("profiling {}", t.display()))?;
        if profiles[0].allocations == 0 {
            bail!(
                "{}: the run made no allocations; there is nothing to synthesize from",
                t.display()
            );
        }
        for (i, p) in profiles.into_iter().enumerate() {
            per_unit[i].push(p);
        }
        commands.push(command);
    }
    let by_unit = per_unit
        .into_iter()
        .map(|runs| {
            if runs.len() == 1 {
                Ok(runs.into_iter().next().expect("one run"))
            } else {
                Profile::merge(&runs, Weighting::Runs, 0).map_err(anyhow::Error::msg)
            }
        })
        .collect::<Result<Vec<_>>>()?;
    Ok(Measured { traces: traces.to_vec(), commands, by_unit })
}
