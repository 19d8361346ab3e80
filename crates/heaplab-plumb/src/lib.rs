//! heaplab's plumbing: what every study needs from the machine, written once
//! (ripgrep's `grep-cli` is the model).
//!
//! - [`tools`]: where the native builds are (the replayer, the allocators,
//!   the registry, valgrind) and where a comparison's scratch files go;
//! - [`alloc`]: allocator names (`glibc`, `bsd+pad8`, a synthesized
//!   allocator, a path to a `.so`) resolved to what to preload;
//! - [`callgrind`]: reading `callgrind.out` files;
//! - [`vg`]: running a program under heaplab's Valgrind tool with its raw
//!   stream coming back through a FIFO.
//!
//! The study crates (`heaplab-compare`, `heaplab-refs`, `heaplab-segregate`,
//! `heaplab-synth`) depend on this crate, never on each other, for these.
//!
//! ```no_run
//! use heaplab_plumb::{alloc, tools::Tools};
//! let tools = Tools::from_home(std::path::Path::new("."));
//! let a = alloc::resolve(&["bsd+pad8".into()], &tools).unwrap();
//! assert_eq!(a[0].env, vec![("HEAPLAB_PAD".to_string(), "8".to_string())]);
//! ```

pub mod alloc;
pub mod callgrind;
pub mod tools;
pub mod vg;

pub use alloc::{Allocator, Source};
pub use tools::Tools;
