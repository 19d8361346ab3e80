//! Exports for other tools, each in the format's own words: folded stacks
//! are in `flame.rs`; pprof's protobuf, the Chrome trace event JSON that
//! Perfetto opens, and Valgrind massif's text are here.

pub mod chrome;
pub mod massif;
pub mod pprof;
