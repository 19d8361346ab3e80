//! Outcomes on disk: one file per job, `DIR/ID.json`, written under a
//! temporary name in the same directory and renamed (`heaplab_plumb::output`),
//! so a reader never sees half a file and a killed job leaves none.

use crate::job::Job;
use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

/// What a job left: how it went, where, and the study's result.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Outcome {
    pub job: String,
    pub kind: String,
    /// `ok` or `failed`.
    pub status: String,
    pub error: Option<String>,
    /// The machine it ran on (its host name).
    pub host: String,
    /// When it started, seconds since the epoch.
    pub started_unix_s: f64,
    /// How long it ran.
    pub seconds: f64,
    /// The heaplab that ran it.
    pub heaplab: String,
    /// The study's result (null when it failed before making one).
    pub result: serde_json::Value,
}

impl Outcome {
    pub fn ok(&self) -> bool {
        self.status == "ok"
    }
}

/// Where a planned job stands.
#[derive(Debug, Clone, PartialEq)]
pub enum JobState {
    Done(Outcome),
    Failed(Outcome),
    /// No outcome file.
    Missing,
    /// An outcome file that does not read, or belongs to another job.
    Unreadable(String),
}

/// A directory of outcomes.
#[derive(Debug, Clone)]
pub struct Store {
    pub dir: PathBuf,
}

impl Store {
    /// Opens (creating, mode 0700) the directory.
    pub fn open(dir: &Path) -> Result<Store> {
        use std::os::unix::fs::DirBuilderExt;
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir)
            .with_context(|| format!("creating {}", dir.display()))?;
        Ok(Store { dir: dir.to_path_buf() })
    }

    /// Where job `id`'s outcome goes.
    pub fn path(&self, id: &str) -> PathBuf {
        self.dir.join(format!("{id}.json"))
    }

    /// Writes an outcome: a temporary file beside it, then a rename over it
    /// (`heaplab_plumb::output`).
    pub fn put(&self, o: &Outcome) -> Result<()> {
        heaplab_plumb::output::write(&self.path(&o.job), serde_json::to_string_pretty(o)?)
    }

    /// Job `id`'s outcome, if there is one.
    pub fn get(&self, id: &str) -> JobState {
        let p = self.path(id);
        let text = match std::fs::read_to_string(&p) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return JobState::Missing,
            Err(e) => return JobState::Unreadable(format!("{}: {e}", p.display())),
        };
        match serde_json::from_str::<Outcome>(&text) {
            Ok(o) if o.job != id => JobState::Unreadable(format!(
                "{}: holds the outcome of job {}, not {id}",
                p.display(),
                o.job
            )),
            Ok(o) if o.ok() => JobState::Done(o),
            Ok(o) => JobState::Failed(o),
            Err(e) => JobState::Unreadable(format!("{}: not a job outcome: {e}", p.display())),
        }
    }

    /// Every job's state, in order.
    pub fn states(&self, jobs: &[Job]) -> Vec<JobState> {
        jobs.iter().map(|j| self.get(&j.id)).collect()
    }
}

/// How much of a store of outcomes to keep ([`Store::prune`]).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Limits {
    /// Outcomes written longer ago than this go.
    pub max_age: std::time::Duration,
    /// Then the oldest go until the rest take at most this many bytes.
    pub max_bytes: u64,
}

impl Limits {
    /// What a local run keeps in its state directory after it finishes:
    /// 30 days, 256 MiB (an outcome is a few KiB: about 50,000 of them).
    pub const DEFAULT: Limits =
        Limits { max_age: std::time::Duration::from_secs(30 * 86400), max_bytes: 256 << 20 };
}

impl Limits {
    /// [`Limits::DEFAULT`], or what `HEAPLAB_STATE_MAX_DAYS` and
    /// `HEAPLAB_STATE_MAX_MB` say (a value that does not read is an error
    /// that names it).
    pub fn from_env() -> Result<Limits> {
        let mut l = Limits::DEFAULT;
        let num = |var: &str| -> Result<Option<f64>> {
            match std::env::var(var) {
                Ok(v) if !v.is_empty() => {
                    let x: f64 =
                        v.trim().parse().ok().filter(|x: &f64| *x >= 0.0).with_context(|| {
                            format!("{var}={v:?}: expected a number of at least 0")
                        })?;
                    Ok(Some(x))
                }
                _ => Ok(None),
            }
        };
        if let Some(d) = num("HEAPLAB_STATE_MAX_DAYS")? {
            l.max_age = std::time::Duration::from_secs_f64(d * 86400.0);
        }
        if let Some(mb) = num("HEAPLAB_STATE_MAX_MB")? {
            l.max_bytes = (mb * 1048576.0) as u64;
        }
        Ok(l)
    }
}

/// What [`Store::prune`] did (or, dry, would do).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Pruned {
    /// Outcomes kept, and their bytes.
    pub kept: usize,
    pub kept_bytes: u64,
    /// Files removed (outcomes, and temporary files of killed writes), and their bytes.
    pub removed: Vec<PathBuf>,
    pub removed_bytes: u64,
    /// Files in the directory that heaplab did not write (left alone).
    pub foreign: usize,
}

/// Whether `stem` is a job id: `KIND-` (lower case, digits, dashes) then
/// 16 hex digits ([`Job::new`]).
fn is_job_id(stem: &str) -> bool {
    let Some((kind, hex)) = stem.rsplit_once('-') else { return false };
    hex.len() == 16
        && hex.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
        && !kind.is_empty()
        && kind.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
}

/// A temporary file heaplab_plumb::output left beside an outcome when the
/// writer was killed: `.ID.json.heaplab-TAG`.
fn is_our_temporary(name: &str) -> bool {
    name.strip_prefix('.').and_then(|n| n.split_once(".json.heaplab-")).is_some_and(|(id, tag)| {
        is_job_id(id) && !tag.is_empty() && tag.bytes().all(|b| b.is_ascii_hexdigit())
    })
}

impl Store {
    /// Drops outcomes by age, then by size, oldest first (by the time the
    /// file was written), never those of the jobs in `keep` (the run that
    /// is pruning), and temporary files of killed writes older than a day.
    /// Only files heaplab wrote are touched: a regular file named
    /// `ID.json` (a job id) that reads as that job's outcome, or such a
    /// temporary file; links, directories and everything else are counted
    /// as foreign and left alone. `dry`: say what would go, remove nothing.
    pub fn prune(&self, limits: Limits, keep: &[&str], dry: bool) -> Result<Pruned> {
        let now = std::time::SystemTime::now();
        let age = |m: &std::fs::Metadata| {
            m.modified().ok().and_then(|t| now.duration_since(t).ok()).unwrap_or_default()
        };
        let mut out = Pruned::default();
        let mut ours: Vec<(std::time::Duration, u64, PathBuf)> = Vec::new();
        let mut doomed: Vec<(u64, PathBuf)> = Vec::new();
        let rd = std::fs::read_dir(&self.dir)
            .with_context(|| format!("reading {}", self.dir.display()))?;
        for e in rd {
            let e = e.with_context(|| format!("reading {}", self.dir.display()))?;
            let name = e.file_name().to_string_lossy().into_owned();
            // symlink_metadata: a link is never followed, and never ours
            let Ok(m) = std::fs::symlink_metadata(e.path()) else { continue };
            if !m.file_type().is_file() {
                out.foreign += 1;
                continue;
            }
            if is_our_temporary(&name) {
                if age(&m) > std::time::Duration::from_secs(86400) {
                    doomed.push((m.len(), e.path()));
                }
                continue;
            }
            let Some(id) = name.strip_suffix(".json").filter(|id| is_job_id(id)) else {
                out.foreign += 1;
                continue;
            };
            match self.get(id) {
                JobState::Done(_) | JobState::Failed(_) => {}
                _ => {
                    out.foreign += 1; // named like one, but not an outcome heaplab wrote
                    continue;
                }
            }
            if keep.contains(&id) {
                out.kept += 1;
                out.kept_bytes += m.len();
            } else {
                ours.push((age(&m), m.len(), e.path()));
            }
        }
        // newest first; keep while young enough and within the size left
        ours.sort_by(|a, b| a.0.cmp(&b.0).then_with(|| a.2.cmp(&b.2)));
        for (a, len, path) in ours {
            if a <= limits.max_age && out.kept_bytes + len <= limits.max_bytes {
                out.kept += 1;
                out.kept_bytes += len;
            } else {
                doomed.push((len, path));
            }
        }
        for (len, path) in doomed {
            if !dry {
                match std::fs::remove_file(&path) {
                    Ok(()) => {}
                    Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
                    Err(e) => {
                        return Err(e).with_context(|| format!("removing {}", path.display()))
                    }
                }
            }
            out.removed_bytes += len;
            out.removed.push(path);
        }
        out.removed.sort();
        Ok(out)
    }
}

impl Store {
    /// After a local run: prune to [`Limits::from_env`], keeping the
    /// outcomes of `jobs` (the run's own); says on stderr what went, and
    /// warns instead of failing the run.
    pub fn prune_after_run(&self, jobs: &[Job], who: &str) {
        let keep: Vec<&str> = jobs.iter().map(|j| j.id.as_str()).collect();
        match Limits::from_env().and_then(|l| self.prune(l, &keep, false)) {
            Ok(p) if !p.removed.is_empty() => eprintln!(
                "{who}: removed {} old outcomes ({:.1} MiB) from {}, keeping {} ({:.1} MiB; \
                 HEAPLAB_STATE_MAX_DAYS and HEAPLAB_STATE_MAX_MB set the limits)",
                p.removed.len(),
                p.removed_bytes as f64 / 1048576.0,
                self.dir.display(),
                p.kept,
                p.kept_bytes as f64 / 1048576.0
            ),
            Ok(_) => {}
            Err(e) => eprintln!("{who}: warning: pruning {}: {e:#}", self.dir.display()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn outcome(id: &str, status: &str) -> Outcome {
        Outcome {
            job: id.into(),
            kind: "t.k".into(),
            status: status.into(),
            error: None,
            host: "h".into(),
            started_unix_s: 0.0,
            seconds: 1.0,
            heaplab: "0".into(),
            result: serde_json::json!({"x": 1}),
        }
    }

    #[test]
    fn outcomes_round_trip_and_states_say_what_is_missing() {
        let t = heaplab_plumb::scratch::ScratchDir::new("jobs-store").unwrap();
        let d = t.join("results");
        let s = Store::open(&d).unwrap();
        s.put(&outcome("a", "ok")).unwrap();
        s.put(&outcome("b", "failed")).unwrap();
        std::fs::write(s.path("c"), "{").unwrap();
        std::fs::write(s.path("e"), serde_json::to_string(&outcome("a", "ok")).unwrap()).unwrap();
        assert!(matches!(s.get("a"), JobState::Done(o) if o.result["x"] == 1));
        assert!(matches!(s.get("b"), JobState::Failed(_)));
        assert!(matches!(s.get("c"), JobState::Unreadable(_)));
        assert!(matches!(s.get("d"), JobState::Missing));
        assert!(matches!(s.get("e"), JobState::Unreadable(m) if m.contains("not e")));
        std::os::unix::fs::symlink("/etc/passwd", d.join("link.json")).unwrap();
        assert!(s.put(&outcome("link", "ok")).is_err(), "never through a link");
        assert!(std::fs::read_dir(&d).unwrap().all(|e| !e
            .unwrap()
            .file_name()
            .to_string_lossy()
            .contains(".tmp-")));
    }

    fn set_age(p: &Path, days: u64) {
        let t = std::time::SystemTime::now() - std::time::Duration::from_secs(days * 86400 + 60);
        std::fs::File::options().write(true).open(p).unwrap().set_modified(t).unwrap();
    }

    #[test]
    fn prune_drops_old_then_oldest_outcomes_and_nothing_else() {
        let t = heaplab_plumb::scratch::ScratchDir::new("jobs-prune").unwrap();
        let d = t.join("results");
        let s = Store::open(&d).unwrap();
        let id = |n: u32| format!("compare-count-{n:016x}");
        for n in 0..6 {
            s.put(&outcome(&id(n), if n == 3 { "failed" } else { "ok" })).unwrap();
            set_age(&s.path(&id(n)), 10 * n as u64); // 0, 10, ..., 50 days old
        }
        // what heaplab did not write: a user's file, one named like an
        // outcome but not one, a link to an outcome elsewhere, a directory
        let user = d.join("notes.json");
        std::fs::write(&user, "mine").unwrap();
        let fake = d.join(format!("{}.json", id(99)));
        std::fs::write(&fake, "{\"not\": \"an outcome\"}").unwrap();
        set_age(&fake, 400);
        let elsewhere = d.with_extension("victim");
        std::fs::write(&elsewhere, serde_json::to_string(&outcome(&id(98), "ok")).unwrap())
            .unwrap();
        set_age(&elsewhere, 400);
        std::os::unix::fs::symlink(&elsewhere, d.join(format!("{}.json", id(98)))).unwrap();
        std::fs::create_dir(d.join(format!("{}.json", id(97)))).unwrap();
        // a killed write's temporary file, old, and a fresh one (maybe being written)
        let old_tmp = d.join(format!(".{}.json.heaplab-1a2b", id(50)));
        std::fs::write(&old_tmp, "{").unwrap();
        set_age(&old_tmp, 2);
        let new_tmp = d.join(format!(".{}.json.heaplab-1a2c", id(51)));
        std::fs::write(&new_tmp, "{").unwrap();

        let one = std::fs::metadata(s.path(&id(0))).unwrap().len();
        // by age: older than 25 days go (3, 4, 5), but 4 is the running study's
        let keep = id(4);
        let lim =
            Limits { max_age: std::time::Duration::from_secs(25 * 86400), max_bytes: u64::MAX };
        let dry = s.prune(lim, &[&keep], true).unwrap();
        let mut want = vec![s.path(&id(3)), s.path(&id(5)), old_tmp.clone()];
        want.sort();
        assert_eq!(dry.removed, want);
        assert!(s.path(&id(5)).exists() && old_tmp.exists(), "a dry run removes nothing");
        let p = s.prune(lim, &[&keep], false).unwrap();
        assert_eq!(p.removed, dry.removed);
        assert_eq!((p.kept, p.foreign), (4, 4), "{p:?}");
        assert!(!s.path(&id(5)).exists() && !old_tmp.exists() && new_tmp.exists());
        // by size: room for two outcomes beside the kept one: the newest stay
        let lim = Limits { max_age: std::time::Duration::MAX, max_bytes: 3 * one };
        let p = s.prune(lim, &[&keep], false).unwrap();
        assert_eq!(p.removed, vec![s.path(&id(2))], "{p:?}");
        assert!(s.path(&id(0)).exists() && s.path(&id(1)).exists() && s.path(&keep).exists());
        // everything not heaplab's is still there, untouched
        assert_eq!(std::fs::read_to_string(&user).unwrap(), "mine");
        assert!(fake.exists() && elsewhere.exists() && d.join(format!("{}.json", id(97))).is_dir());
        assert!(std::fs::symlink_metadata(d.join(format!("{}.json", id(98)))).is_ok());
    }

    #[test]
    fn job_ids_and_temporaries_are_recognised() {
        assert!(is_job_id("compare-count-0123456789abcdef"));
        assert!(is_job_id("locality-measure-0123456789abcdef"));
        assert!(!is_job_id("compare-count-0123456789ABCDEF"));
        assert!(!is_job_id("0123456789abcdef"));
        assert!(!is_job_id("notes"));
        assert!(is_our_temporary(".compare-time-0123456789abcdef.json.heaplab-3f2a01"));
        assert!(!is_our_temporary(".compare-time-0123456789abcdef.json"));
        assert!(!is_our_temporary(".bashrc.json.heaplab-1"));
    }
}
