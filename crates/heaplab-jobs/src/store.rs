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
        let d = std::env::temp_dir().join(format!("heaplab-jobs-store-{}", std::process::id()));
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
        std::fs::remove_dir_all(&d).unwrap();
    }
}
