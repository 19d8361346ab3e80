//! Segregating heap objects by predicted reference behaviour and lifetime
//! (Seidl and Zorn, "Segregating Heap Objects by Reference Behavior and
//! Lifetime", ASPLOS 1998: paper 001).
//!
//! ```text
//!   training trace ──▶ objects ──┐
//!   threshold trace ─▶ objects ──┼─▶ threshold search (train on the first, score on the second)
//!                                │        │ thresholds
//!                                ▼        ▼
//!                     predictor (SP, PATH, STACK-k, STACK+size; RANDOM, DEFAULT)
//!                                │ table of (key → segment)
//!                                ▼
//!              emitted C + native/segregate ──▶ libheaplab-seg-NAME.so (4 segments)
//!                                │
//!   test trace ── replay with site hints, under the measure tool ──▶ pages, references,
//!                                                                     page faults, caches
//! ```
//!
//! - [`objects`]: per-object lifetime (instructions), loads, stores, density
//!   and ASLR-stable allocation stack, from a trace recorded with references.
//! - [`classes`]: the four segments and the four thresholds, with the rule
//!   that keeps SL and HR apart.
//! - [`predictors`]: training and prediction.
//! - [`tree`]: a trained predictor as a tree of call-site prefixes, as the
//!   allocator decides (the return address alone where it can).
//! - [`search`]: the threshold search, outward from a start point.
//! - [`accuracy`]: precision and recall per class.
//! - [`pipeline`]: the study from end to end; [`jobs`]: its measurements as
//!   independent jobs (run here with `--jobs N`, or planned and merged).
//!
//! ```
//! use heaplab_segregate::classes::{Class, Thresholds};
//! let t = Thresholds::new(10_000, 1_000_000, 2.0, 0.05).unwrap();
//! assert_eq!(t.classify(500, 100.0), Class::Sl);
//! assert_eq!(t.classify(5_000_000, 3.0), Class::Hr);
//! assert_eq!(t.classify(5_000_000, 0.01), Class::NotHr);
//! assert!(Thresholds::new(10, 10, 2.0, 0.05).is_err()); // SL and HR would overlap
//! ```

pub mod accuracy;
pub mod classes;
pub mod emit;
pub mod evaluate;
pub mod jobs;
pub mod keys;
pub mod objects;
pub mod paper;
pub mod pipeline;
pub mod predictors;
pub mod report;
pub mod runtime;
pub mod search;
pub mod study;
pub mod tree;
