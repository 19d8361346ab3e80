//! The locality study of papers 000 (Grunwald, Zorn, Henderson) and 003
//! (Rezaei, Kavi): what each allocator does to a program's cache and page
//! locality, on one trace recorded with references.
//!
//! ```text
//!   trace (EVENTS + REFS) ─┬─ allocator 1 ─ heaplab_refs::measure ─┐
//!                          ├─ allocator 2 ─ heaplab_refs::measure ─┼─▶ study::Locality ─▶ report: text, HTML
//!                          └─ ...                                  │   (typed; JSON through serde)
//! ```
//!
//! The mechanism (re-issuing the recorded references at the addresses an
//! allocator returns, beside its own, into the simulators) lives in
//! `heaplab-refs`; this crate holds the study: which configurations the
//! papers' figures need, the figures derived from each measurement
//! ([`study`]), and their rendering ([`report`]).

pub mod jobs;
pub mod report;
pub mod study;
