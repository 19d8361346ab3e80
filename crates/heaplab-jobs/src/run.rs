//! Running jobs: one ([`execute`], what `heaplab job` does: check every
//! input's hash, run, time, wrap the result in an [`Outcome`]), or many on
//! threads ([`Runner`]: outcomes kept in a store as they finish, reused with
//! `resume`, an interruption honoured between jobs).

use crate::cancel;
use crate::eta::Eta;
use crate::job::Job;
use crate::store::{JobState, Outcome, Store};
use anyhow::Result;
use serde_json::Value;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::{Instant, SystemTime, UNIX_EPOCH};

/// The work behind a job kind: parameters and inputs in, a JSON result out.
pub type Work<'a> = dyn Fn(&Job) -> Result<Value> + Sync + 'a;

/// What a run shows as it goes (progress bars, log lines). Called from the
/// worker threads.
pub trait Observer: Sync {
    /// The run will take these jobs.
    fn begin(&self, _jobs: &[Job]) {}
    fn started(&self, _job: &Job) {}
    /// `reused`: the outcome came from the store (`resume`), not from running.
    fn finished(&self, _job: &Job, _outcome: &Outcome, _reused: bool) {}
    /// The job's expected cost changed (what other jobs taught).
    fn reweigh(&self, _job: &Job) {}
}

/// An [`Observer`] that shows nothing.
pub struct Quiet;
impl Observer for Quiet {}

/// This machine's name.
pub fn host() -> String {
    let mut buf = [0u8; 256];
    // SAFETY: gethostname writes at most buf.len() bytes into buf.
    let rc = unsafe { libc::gethostname(buf.as_mut_ptr().cast(), buf.len()) };
    if rc != 0 {
        return "unknown".into();
    }
    let n = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
    String::from_utf8_lossy(&buf[..n]).into_owned()
}

/// Seconds since the epoch, now.
pub fn now_unix() -> f64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_secs_f64()).unwrap_or(0.0)
}

/// Wraps what a job's work gave (a failure included) in its outcome.
pub fn outcome(job: &Job, r: Result<Value>, started_unix_s: f64, seconds: f64) -> Outcome {
    let (status, error, result) = match r {
        Ok(v) => ("ok", None, v),
        Err(e) => ("failed", Some(format!("{e:#}")), Value::Null),
    };
    Outcome {
        job: job.id.clone(),
        kind: job.kind.clone(),
        status: status.into(),
        error,
        host: host(),
        started_unix_s,
        seconds,
        heaplab: env!("CARGO_PKG_VERSION").into(),
        result,
    }
}

/// Runs one job here: checks its inputs against their hashes, runs `work`,
/// and wraps what came out (a failure included) in an outcome.
pub fn execute(job: &Job, work: &Work) -> Outcome {
    let started = now_unix();
    let t0 = Instant::now();
    let r = job.inputs.iter().try_for_each(|i| i.verify()).and_then(|_| work(job));
    outcome(job, r, started, t0.elapsed().as_secs_f64())
}

/// Runs many jobs on threads.
pub struct Runner<'a> {
    /// Jobs at a time (jobs marked `alone` always run one at a time).
    pub workers: usize,
    /// Where outcomes go as they finish (and come from, with `resume`).
    pub store: Option<&'a Store>,
    /// Reuse an outcome already in the store instead of running its job again.
    pub resume: bool,
    pub observer: &'a dyn Observer,
    pub eta: Option<&'a Eta>,
}

impl Runner<'_> {
    /// Runs `jobs` and returns their states in order. A job not run because
    /// of an interruption is `Missing`; so is one that failed while the
    /// interruption ended it (its outcome is not kept, so resume runs it).
    pub fn run(&self, jobs: &[Job], work: &Work) -> Vec<JobState> {
        let workers = if jobs.iter().all(|j| j.alone) { 1 } else { self.workers.max(1) };
        let next = AtomicUsize::new(0);
        let out: Mutex<Vec<JobState>> = Mutex::new(vec![JobState::Missing; jobs.len()]);
        let alone = Mutex::new(());
        std::thread::scope(|s| {
            for _ in 0..workers.min(jobs.len().max(1)) {
                s.spawn(|| loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    if i >= jobs.len() || cancel::requested() {
                        break;
                    }
                    let state = self.one(&jobs[i], work, &alone);
                    out.lock().expect("no panics under the lock")[i] = state;
                });
            }
        });
        out.into_inner().expect("workers are done")
    }

    fn one(&self, job: &Job, work: &Work, alone: &Mutex<()>) -> JobState {
        if self.resume {
            if let Some(JobState::Done(o)) = self.store.map(|s| s.get(&job.id)) {
                self.observer.finished(job, &o, true);
                if let Some(e) = self.eta {
                    e.finished(&job.id, o.seconds, false);
                }
                return JobState::Done(o);
            }
        }
        let _guard = job.alone.then(|| alone.lock().expect("no panics under the lock"));
        if cancel::requested() {
            return JobState::Missing;
        }
        self.observer.started(job);
        if let Some(e) = self.eta {
            e.started(&job.id);
        }
        let o = execute(job, work);
        if !o.ok() && cancel::requested() {
            return JobState::Missing;
        }
        if let Some(s) = self.store {
            if let Err(e) = s.put(&o) {
                eprintln!("heaplab: could not keep the outcome of job {}: {e:#}", job.id);
            }
        }
        if let Some(e) = self.eta {
            e.finished(&job.id, o.seconds, true);
        }
        self.observer.finished(job, &o, false);
        if o.ok() {
            JobState::Done(o)
        } else {
            JobState::Failed(o)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::job::Input;

    #[test]
    fn runs_keeps_and_resumes() {
        let t = heaplab_plumb::scratch::ScratchDir::new("jobs-run").unwrap();
        let d = t.path();
        let store = Store::open(&d.join("results")).unwrap();
        let f = d.join("input");
        std::fs::write(&f, b"1").unwrap();
        let input = Input::of(&f).unwrap();
        let jobs: Vec<Job> = (0..5)
            .map(|i| {
                Job::new(
                    "t.sq",
                    "g",
                    "",
                    vec![input.clone()],
                    vec![("n".into(), i.to_string())],
                    1.0,
                )
            })
            .collect();
        let calls = AtomicUsize::new(0);
        let work = |j: &Job| -> Result<Value> {
            calls.fetch_add(1, Ordering::Relaxed);
            let n: u64 = j.param("n").unwrap().parse()?;
            if n == 3 {
                anyhow::bail!("three is bad");
            }
            Ok(serde_json::json!(n * n))
        };
        let r =
            Runner { workers: 2, store: Some(&store), resume: true, observer: &Quiet, eta: None };
        let states = r.run(&jobs, &work);
        assert!(matches!(&states[2], JobState::Done(o) if o.result == 4));
        assert!(
            matches!(&states[3], JobState::Failed(o) if o.error.as_deref() == Some("three is bad"))
        );
        assert_eq!(calls.load(Ordering::Relaxed), 5);
        // resume: only the failed job runs again
        let again = r.run(&jobs, &work);
        assert_eq!(calls.load(Ordering::Relaxed), 6);
        assert!(
            matches!((&again[4], &states[4]), (JobState::Done(a), JobState::Done(b)) if a.result == b.result && a.started_unix_s == b.started_unix_s)
        );
        // an input that changed fails every job that reads it, naming it
        std::fs::write(&f, b"2").unwrap();
        let o = execute(&jobs[0], &work);
        assert!(o.error.unwrap().contains("changed since the job was planned"));
    }
}
