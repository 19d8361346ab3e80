//! One module per subcommand.

pub mod convert;
pub mod demo;
pub mod record;
pub mod sim;
pub mod stats;
pub mod workloads;
