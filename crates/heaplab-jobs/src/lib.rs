//! A study as a set of independent jobs, so that it can run on one machine
//! with progress and resume, or on many under an engine users already
//! operate (GNU parallel, locally or with `--sshlogin`; a Slurm job array),
//! and come back together as the same result.
//!
//! A **job** ([`Job`]) is a pure function of its inputs: the files it reads,
//! named with their SHA-256 ([`Input`]), and its parameters. Its id hashes
//! all of them, so the same work always has the same id, and a result can be
//! reused wherever the id matches. Run, it writes one JSON **outcome**
//! ([`Outcome`]): its status, where and how long it ran, and the study's
//! result.
//!
//! ```text
//!  study ── jobs ──▶ plan DIR (plan.json, jobs*.txt, slurm.sbatch) ──▶ engine runs each line:
//!                                                                       heaplab job KIND --id ID
//!                                                                         --input PATH=sha256:… --out DIR/results/ID.json …
//!        ◀── merge ── DIR/results/*.json (missing and failed jobs named)
//!
//!  study ── jobs ──▶ Runner (threads here, outcomes kept in a store) ──▶ the same outcomes ──▶ the same merge
//! ```
//!
//! The crate knows nothing of any study: `heaplab compare` builds its jobs
//! and merges its outcomes (`heaplab-compare`'s `jobs.rs`); `heaplab job`
//! dispatches a job's kind to the study that runs it.
//!
//! ```no_run
//! use heaplab_jobs::{Job, Input, Plan, Store};
//! let trace = Input::of(std::path::Path::new("perl.hltrace")).unwrap();
//! let job = Job::new("demo.count", "perl", "count perl", vec![trace], vec![("mode".into(), "plain".into())], 1.0);
//! let plan = Plan::new("demo", serde_json::json!({}), vec![job], "/usr/bin/heaplab".into());
//! plan.write(std::path::Path::new("out/plan")).unwrap();
//! let states = Store::open(&std::path::Path::new("out/plan").join("results")).unwrap().states(&plan.jobs);
//! # let _ = states;
//! ```

pub mod cancel;
pub mod eta;
pub mod hash;
pub mod job;
pub mod plan;
pub mod run;
pub mod shell;
pub mod store;

pub use eta::Eta;
pub use job::{Input, Job};
pub use plan::Plan;
pub use run::{Observer, Runner};
pub use store::{JobState, Limits, Outcome, Pruned, Store};
