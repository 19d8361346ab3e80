//! A plan directory: the jobs of a study written out for an engine to run.
//!
//! ```text
//! DIR/plan.json          the study, its parameters (what merge needs) and every job
//! DIR/jobs.txt           every job, one command line each: the shared ones, then the alone ones
//!                        (the study's order within each)
//! DIR/jobs-shared.txt    the jobs that may share a machine (run them with any -j)
//! DIR/jobs-alone.txt     the jobs that time something: one at a time, on a quiet machine
//! DIR/slurm.sbatch       a Slurm job array over a jobs file (line = SLURM_ARRAY_TASK_ID)
//! DIR/README.txt         how to run them and merge
//! DIR/results/ID.json    each job's outcome, written by the job
//! ```
//!
//! Every line is self-contained: the absolute path of `heaplab`, the job's
//! inputs with their SHA-256 (a job refuses to run on a file that differs),
//! its parameters, and where its outcome goes. Run on several machines, they
//! need the same paths there (a shared file system, as clusters have, or the
//! files copied to the same place).

use crate::job::Job;
use crate::shell;
use anyhow::{bail, Context, Result};
use heaplab_plumb::output::write;
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

/// The version of plan.json's layout.
pub const PLAN_VERSION: u32 = 1;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Plan {
    pub version: u32,
    /// Which study merges the outcomes (`compare`, `locality`).
    pub study: String,
    /// The study's own parameters, as it wants them back at merge time.
    pub params: serde_json::Value,
    /// The `heaplab` the command lines run.
    pub heaplab: PathBuf,
    pub jobs: Vec<Job>,
}

impl Plan {
    pub fn new(study: &str, params: serde_json::Value, jobs: Vec<Job>, heaplab: PathBuf) -> Plan {
        Plan { version: PLAN_VERSION, study: study.into(), params, heaplab, jobs }
    }

    /// Where a plan's outcomes go.
    pub fn results_dir(dir: &Path) -> PathBuf {
        dir.join("results")
    }

    /// The jobs in the order the job lists have them: the shared ones in the
    /// study's order (it puts first what the others are better off after:
    /// compare's native touch runs decode each trace into the plan's cache
    /// before the counted replays would decode it under Valgrind), then the
    /// alone ones.
    pub fn ordered(&self) -> Vec<&Job> {
        let shared = self.jobs.iter().filter(|j| !j.alone);
        shared.chain(self.jobs.iter().filter(|j| j.alone)).collect()
    }

    /// Writes the plan into `dir`, which must be new or empty (a plan's
    /// outcomes are never mixed with another plan's).
    pub fn write(&self, dir: &Path) -> Result<()> {
        if dir.exists() {
            let mut it =
                std::fs::read_dir(dir).with_context(|| format!("reading {}", dir.display()))?;
            if it.next().is_some() {
                bail!(
                    "{} is not empty: a plan goes into a new or empty directory (merge an old one with --merge)",
                    dir.display()
                );
            }
        }
        let results = Self::results_dir(dir);
        crate::store::Store::open(&results)?;
        let dir = std::fs::canonicalize(dir)?;
        let results = Self::results_dir(&dir);
        let line = |j: &Job| j.command_line(&self.heaplab, &results.join(format!("{}.json", j.id)));
        let list = |jobs: &[&Job]| jobs.iter().map(|j| line(j) + "\n").collect::<String>();
        let all = self.ordered();
        let shared: Vec<&Job> = all.iter().copied().filter(|j| !j.alone).collect();
        let alone: Vec<&Job> = all.iter().copied().filter(|j| j.alone).collect();
        write(&dir.join("plan.json"), serde_json::to_string_pretty(self)?)?;
        write(&dir.join("jobs.txt"), list(&all))?;
        write(&dir.join("jobs-shared.txt"), list(&shared))?;
        write(&dir.join("jobs-alone.txt"), list(&alone))?;
        write(&dir.join("slurm.sbatch"), slurm(&dir))?;
        write(&dir.join("README.txt"), readme(&dir, &self.study, shared.len(), alone.len()))?;
        Ok(())
    }

    /// Reads `DIR/plan.json`.
    pub fn load(dir: &Path) -> Result<Plan> {
        let p = dir.join("plan.json");
        let text = std::fs::read_to_string(&p).with_context(|| {
            format!("{}: no plan here (heaplab compare --plan DIR writes one)", p.display())
        })?;
        let plan: Plan = serde_json::from_str(&text)
            .with_context(|| format!("{}: not a heaplab plan", p.display()))?;
        if plan.version != PLAN_VERSION {
            bail!(
                "{}: plan version {}, this heaplab reads {PLAN_VERSION}",
                p.display(),
                plan.version
            );
        }
        Ok(plan)
    }
}

fn slurm(dir: &Path) -> String {
    let d = shell::quote(&dir.display().to_string());
    format!(
        r#"#!/bin/bash
# A Slurm job array over one of this plan's job lists: task N runs line N.
#
#   sbatch --array=1-$(wc -l < {d}/jobs-shared.txt) {d}/slurm.sbatch {d}/jobs-shared.txt
#   sbatch --array=1-$(wc -l < {d}/jobs-alone.txt)%1 --exclusive {d}/slurm.sbatch {d}/jobs-alone.txt
#
# (%1: the timing jobs one at a time; --exclusive: each alone on its node.)
# Then, anywhere that sees the results: heaplab compare --merge {d}
#SBATCH --job-name=heaplab
#SBATCH --cpus-per-task=1
set -euo pipefail
list=${{1:?usage: slurm.sbatch JOBS-FILE}}
line=$(sed -n "${{SLURM_ARRAY_TASK_ID:?run me as an array job}}p" "$list")
[ -n "$line" ] || {{ echo "no line $SLURM_ARRAY_TASK_ID in $list" >&2; exit 1; }}
eval "exec $line"
"#
    )
}

fn readme(dir: &Path, study: &str, shared: usize, alone: usize) -> String {
    let d = shell::quote(&dir.display().to_string());
    format!(
        r#"A heaplab {study} plan: {shared} jobs that may share a machine, {alone} that time something.

Each line of jobs*.txt is one job, self-contained: it checks the SHA-256 of
every file it reads, runs, and writes its outcome to results/ID.json. Run
them with any engine, then merge:

  # here, GNU parallel
  parallel -j"$(nproc)" < {d}/jobs-shared.txt
  parallel -j1 < {d}/jobs-alone.txt          # wall time: one at a time
  heaplab {study} --merge {d}

  # on other machines (the same paths there: a shared file system)
  parallel --sshlogin 8/host1,8/host2 --joblog {d}/joblog < {d}/jobs-shared.txt

  # Slurm: see slurm.sbatch

Jobs that time something (jobs-alone.txt) should run one at a time on a
quiet machine, all on the same one: their ratios to glibc compare runs made
there. A job that fails writes its outcome too (status failed, and why);
merge names every job that is missing or failed. Re-running a line replaces
its outcome.
"#
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::job::Input;

    #[test]
    fn writes_a_plan_and_reads_it_back() {
        let t = heaplab_plumb::scratch::ScratchDir::new("jobs-plan").unwrap();
        let d = t.join("plan");
        let i = Input { path: "/x/t.hltrace".into(), sha256: "sha256:00".into() };
        let jobs = vec![
            Job::new("t.a", "g", "", vec![i.clone()], vec![("n".into(), "1".into())], 1.0),
            Job::new("t.b", "g", "", vec![i.clone()], vec![("n".into(), "2".into())], 5.0),
            Job::new("t.c", "g", "", vec![i], vec![("n".into(), "3".into())], 9.0).alone(),
        ];
        let plan = Plan::new("t", serde_json::json!({"k": 1}), jobs, "/bin/heaplab".into());
        plan.write(&d).unwrap();
        assert_eq!(Plan::load(&d).unwrap(), plan);
        let all = std::fs::read_to_string(d.join("jobs.txt")).unwrap();
        let lines: Vec<&str> = all.lines().collect();
        assert_eq!(lines.len(), 3);
        assert!(
            lines[0].contains(" t.a ") && lines[1].contains(" t.b "),
            "the study's order: {all}"
        );
        assert!(lines[2].contains(" t.c "), "alone last: {all}");
        assert_eq!(std::fs::read_to_string(d.join("jobs-alone.txt")).unwrap().lines().count(), 1);
        assert!(plan.write(&d).is_err(), "a plan does not overwrite another");
    }
}
