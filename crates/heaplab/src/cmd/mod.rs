//! One module per subcommand.

pub mod allocators;
pub mod compare;
pub mod completions;
pub mod convert;
pub mod demo;
pub mod diff;
pub mod export;
pub mod job;
pub mod jobs;
pub mod lab;
pub mod locality;
pub mod memargs;
pub mod record;
pub mod run;
pub mod segregate;
pub mod sim;
pub mod stats;
pub mod synth;
pub mod workloads;
