//! The measurement phase as the synthesizer reads it (paper 002 §2.1, §3):
//! every trace is profiled once at each candidate allocation unit, and the
//! runs are merged with each run weighing the same.

use anyhow::{bail, Context, Result};
use heaplab_trace::profile::{Profile, ProfileBuilder, Weighting};
use heaplab_trace::TraceReader;
use std::path::{Path, PathBuf};

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

/// Profiles one trace at every unit of [`UNITS`] in one pass.
pub fn profile_trace(path: &Path) -> Result<(Vec<Profile>, String)> {
    let mut r = TraceReader::open(path)?;
    let time_unit = r.meta().time_unit_ns;
    let command = r.meta().command_line();
    let mut builders: Vec<ProfileBuilder> =
        UNITS.iter().map(|&u| ProfileBuilder::new(u, time_unit)).collect();
    loop {
        match r.next_event() {
            Ok(Some(e)) => builders.iter_mut().for_each(|b| b.add(&e)),
            Ok(None) => break,
            Err(e) => bail!(
                "{e}\n(a profile of part of a run would mislead the synthesizer; \
                 record the run again, or leave this trace out)"
            ),
        }
    }
    let name = path.display().to_string();
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
