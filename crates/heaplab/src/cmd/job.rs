//! `heaplab job KIND ...`: runs one job of a plan (`heaplab compare --plan
//! DIR` writes the lines): checks the SHA-256 of every input, runs the
//! measurement, and writes its outcome to `--out` (a temporary name, then a
//! rename). The exit status is 0 when the job succeeded, 1 when it failed
//! (the outcome says why), 2 when the line itself is wrong.

use anyhow::{bail, Result};
use heaplab_jobs::job::Invocation;
use heaplab_jobs::run::execute;
use std::path::{Path, PathBuf};

/// Run one job of a plan: the lines of DIR/jobs*.txt that `heaplab compare
/// --plan DIR` (or `heaplab locality --plan DIR`, `heaplab segregate --plan
/// DIR`) writes. Each checks the
/// SHA-256 of every file it reads, measures, and writes its outcome
/// (DIR/results/ID.json); `--merge DIR` combines them.
#[derive(clap::Args)]
pub struct Args {
    /// The job's kind: compare.touch, compare.count, compare.time, locality.measure, segregate.measure.
    kind: String,
    /// --id ID --out FILE --input PATH=sha256:HEX ... --KEY VALUE ...
    #[arg(trailing_var_arg = true, allow_hyphen_values = true, value_name = "ARGS")]
    args: Vec<String>,
}

/// A plan's shared cache of decoded traces, when `out` is in a plan's results.
fn plan_ops_cache(out: &Path) -> Option<PathBuf> {
    let results = out.parent()?;
    let plan = results.parent()?;
    (results.file_name()? == "results" && plan.join("plan.json").exists())
        .then(|| plan.join("ops-cache"))
}

pub fn run(a: Args) -> Result<i32> {
    let inv = Invocation::parse(&a.args)?;
    let job = inv.job(&a.kind)?;
    let Some(out) = inv.out.clone() else {
        bail!("a job needs --out FILE, where its outcome goes")
    };
    let ops = plan_ops_cache(&out);
    let outcome = match a.kind.split_once('.').map(|p| p.0) {
        Some("compare") => execute(&job, &|j| heaplab_compare::jobs::run_job(j, ops.as_deref())),
        Some("locality") => execute(&job, &heaplab_locality::jobs::run_job),
        Some("segregate") => execute(&job, &heaplab_segregate::jobs::run_job),
        _ => bail!(
            "unknown job kind {:?} (compare.touch, compare.count, compare.time, locality.measure, segregate.measure)",
            a.kind
        ),
    };
    heaplab_plumb::output::write(&out, serde_json::to_string_pretty(&outcome)?)?;
    if let Some(e) = &outcome.error {
        eprintln!("heaplab job {}: {e}", job.id);
        return Ok(1);
    }
    Ok(0)
}
