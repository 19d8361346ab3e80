//! How long is left: every job has an expected cost (its weight, in
//! seconds); the runner learns how far off those weights are from the jobs
//! that finished (k = seconds spent / weight, per kind of job, and over all
//! kinds for a kind none of whose jobs has finished yet), and the time left is
//!
//! ```text
//!   k × (weight of the shared jobs left) / workers  +  k × (weight of the alone jobs left)
//! ```
//!
//! where a running job counts only the part of its weight not yet spent.
//! Per group (an allocator), the same sum over its own jobs.

use crate::job::Job;
use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

#[derive(Default)]
struct State {
    /// Per job index: weight, alone, group, done, started at, kind.
    jobs: Vec<(f64, bool, String, bool, Option<Instant>, String)>,
    /// Seconds spent and weight finished, per kind.
    rate: HashMap<String, (f64, f64)>,
    spent: f64,
    weighed: f64,
}

/// The ETA of a run of jobs, shared by the threads that run them.
pub struct Eta {
    state: Mutex<State>,
    index: HashMap<String, usize>,
    workers: usize,
}

impl Eta {
    pub fn new(jobs: &[Job], workers: usize) -> Eta {
        let state = State {
            jobs: jobs
                .iter()
                .map(|j| {
                    (j.weight.max(0.001), j.alone, j.group.clone(), false, None, j.kind.clone())
                })
                .collect(),
            ..State::default()
        };
        Eta {
            index: jobs.iter().enumerate().map(|(i, j)| (j.id.clone(), i)).collect(),
            state: Mutex::new(state),
            workers: workers.max(1),
        }
    }

    fn with<T>(&self, f: impl FnOnce(&mut State) -> T) -> T {
        f(&mut self.state.lock().expect("no panics under the lock"))
    }

    pub fn started(&self, id: &str) {
        if let Some(&i) = self.index.get(id) {
            self.with(|s| s.jobs[i].4 = Some(Instant::now()));
        }
    }

    /// A job ended after `seconds`; `measured`: it ran here (not a result reused).
    pub fn finished(&self, id: &str, seconds: f64, measured: bool) {
        if let Some(&i) = self.index.get(id) {
            self.with(|s| {
                s.jobs[i].3 = true;
                if measured {
                    let w = s.jobs[i].0;
                    s.spent += seconds;
                    s.weighed += w;
                    let r = s.rate.entry(s.jobs[i].5.clone()).or_default();
                    r.0 += seconds;
                    r.1 += w;
                }
            });
        }
    }

    /// Changes a job's expected cost (what another job taught).
    pub fn reweigh(&self, id: &str, weight: f64) {
        if let Some(&i) = self.index.get(id) {
            self.with(|s| s.jobs[i].0 = weight.max(0.001));
        }
    }

    fn left(s: &State, group: Option<&str>, workers: usize) -> Duration {
        let all = if s.weighed > 0.0 { s.spent / s.weighed } else { 1.0 };
        let now = Instant::now();
        let (mut shared, mut alone) = (0.0, 0.0);
        // alone jobs that run at once take turns (compare's round-robin timing
        // runs): each has had its share of the time since it started
        let turns = s.jobs.iter().filter(|j| j.1 && !j.3 && j.4.is_some()).count().max(1) as f64;
        for (w, a, g, done, started, kind) in &s.jobs {
            if *done || group.is_some_and(|x| x != g) {
                continue;
            }
            let k = match s.rate.get(kind) {
                Some((spent, weighed)) if *weighed > 0.0 => spent / weighed,
                _ => all,
            };
            let ran = started.map(|t| now.duration_since(t).as_secs_f64()).unwrap_or(0.0)
                / if *a { turns } else { 1.0 };
            let rest = (w * k - ran).max(0.0);
            if *a {
                alone += rest;
            } else {
                shared += rest;
            }
        }
        let w = if group.is_some() { 1 } else { workers };
        Duration::from_secs_f64(shared / w as f64 + alone)
    }

    /// Time left for the whole run.
    pub fn left_total(&self) -> Duration {
        self.with(|s| Self::left(s, None, self.workers))
    }

    /// Time left for one group's jobs, as if they ran one after another.
    pub fn left_group(&self, group: &str) -> Duration {
        self.with(|s| Self::left(s, Some(group), self.workers))
    }

    /// (finished, all) jobs of a group.
    pub fn group_counts(&self, group: &str) -> (usize, usize) {
        self.with(|s| {
            let mine = s.jobs.iter().filter(|j| j.2 == group);
            let all = mine.clone().count();
            (mine.filter(|j| j.3).count(), all)
        })
    }
}

/// 75 s as `1m15s`, 3700 s as `1h01m`.
pub fn human(d: Duration) -> String {
    let s = d.as_secs();
    if s >= 3600 {
        format!("{}h{:02}m", s / 3600, s % 3600 / 60)
    } else if s >= 60 {
        format!("{}m{:02}s", s / 60, s % 60)
    } else {
        format!("{s}s")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn learns_the_rate_from_finished_jobs() {
        let jobs: Vec<Job> = (0..4)
            .map(|i| {
                Job::new(
                    "t.k",
                    if i < 2 { "a" } else { "b" },
                    "",
                    vec![],
                    vec![("i".into(), i.to_string())],
                    10.0,
                )
            })
            .collect();
        let e = Eta::new(&jobs, 2);
        assert_eq!(e.left_total().as_secs(), 20); // 40 s of weight over 2 workers
        e.finished(&jobs[0].id, 5.0, true); // twice as fast as weighed
        assert_eq!(e.left_total().as_secs(), 7); // 30 × 0.5 / 2
        assert_eq!(e.left_group("b").as_secs(), 10);
        assert_eq!(e.group_counts("a"), (1, 2));
        assert_eq!(human(Duration::from_secs(75)), "1m15s");
    }
}
