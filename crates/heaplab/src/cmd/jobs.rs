//! `heaplab jobs prune`: keeps the store of kept outcomes (`compare` and
//! `locality` keep every measurement there as it finishes, for `--resume`)
//! from growing without end. A local run prunes it too, when it finishes,
//! to `HEAPLAB_STATE_MAX_DAYS` (30) and `HEAPLAB_STATE_MAX_MB` (256).

use anyhow::{bail, Result};
use heaplab_jobs::store::{Limits, Store};
use std::path::PathBuf;

/// Look after the outcomes that compare and locality keep (--state DIR,
/// by default ~/.cache/heaplab/outcomes).
///
/// `heaplab jobs prune` removes outcomes written longer ago than --max-days,
/// then the oldest until the rest fit in --max-mb. It removes only files
/// heaplab wrote: ID.json files that read as that job's outcome, and
/// temporary files of killed writes older than a day; links, directories
/// and anything else in DIR are left alone (and counted). Every local
/// compare and locality run does the same when it finishes, with the limits
/// in HEAPLAB_STATE_MAX_DAYS (default 30) and HEAPLAB_STATE_MAX_MB (default
/// 256), keeping its own outcomes.
///
///   heaplab jobs prune --dry-run              what would go, nothing removed
///   heaplab jobs prune --max-days 7 --max-mb 64
///   heaplab jobs prune --state out/state --max-mb 0   empty a state directory
#[derive(clap::Args)]
pub struct Args {
    #[command(subcommand)]
    what: What,
}

#[derive(clap::Subcommand)]
enum What {
    #[command(about = "Remove old kept outcomes: by age, then the oldest beyond a size")]
    Prune(PruneArgs),
}

#[derive(clap::Args)]
struct PruneArgs {
    /// The state directory (default: compare's and locality's,
    /// $XDG_CACHE_HOME/heaplab/outcomes or ~/.cache/heaplab/outcomes).
    #[arg(long, value_name = "DIR")]
    state: Option<PathBuf>,
    /// Remove outcomes written more than this many days ago (default:
    /// HEAPLAB_STATE_MAX_DAYS, else 30).
    #[arg(long, value_name = "DAYS")]
    max_days: Option<f64>,
    /// Then remove the oldest until the rest take at most this many MiB
    /// (default: HEAPLAB_STATE_MAX_MB, else 256).
    #[arg(long, value_name = "MIB")]
    max_mb: Option<f64>,
    /// Say what would be removed; remove nothing.
    #[arg(long)]
    dry_run: bool,
    /// Name every file removed.
    #[arg(long, short)]
    verbose: bool,
}

pub fn run(a: Args) -> Result<i32> {
    let What::Prune(p) = a.what;
    let dir = p.state.clone().unwrap_or_else(heaplab_compare::measure::default_state_dir);
    if !dir.is_dir() {
        if std::fs::symlink_metadata(&dir).is_ok() {
            bail!(
                "{}: not a directory (--state names the directory of kept outcomes)",
                dir.display()
            );
        }
        println!("{}: no kept outcomes (the directory does not exist)", dir.display());
        return Ok(0);
    }
    let mut limits = Limits::from_env()?;
    for (v, flag) in [(p.max_days, "--max-days"), (p.max_mb, "--max-mb")] {
        if v.is_some_and(|x| !(x >= 0.0 && x.is_finite())) {
            bail!("{flag} takes a number of at least 0, not {}", v.unwrap());
        }
    }
    if let Some(d) = p.max_days {
        limits.max_age = std::time::Duration::from_secs_f64(d * 86400.0);
    }
    if let Some(mb) = p.max_mb {
        limits.max_bytes = (mb * 1048576.0) as u64;
    }
    let store = Store { dir: dir.clone() };
    let r = store.prune(limits, &[], p.dry_run)?;
    if p.verbose || p.dry_run {
        for f in &r.removed {
            println!("{} {}", if p.dry_run { "would remove" } else { "removed" }, f.display());
        }
    }
    let mib = |b: u64| b as f64 / 1048576.0;
    println!(
        "{}: {} {} files ({:.2} MiB); kept {} outcomes ({:.2} MiB){}",
        dir.display(),
        if p.dry_run { "would remove" } else { "removed" },
        r.removed.len(),
        mib(r.removed_bytes),
        r.kept,
        mib(r.kept_bytes),
        if r.foreign > 0 {
            format!("; left alone {} entries heaplab did not write", r.foreign)
        } else {
            String::new()
        }
    );
    Ok(0)
}
