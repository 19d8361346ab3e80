//! heaplab's plumbing: what every study needs from the machine, written once
//! (ripgrep's `grep-cli` is the model).
//!
//! - [`cmdline`]: a program given as one string, split into words as a shell
//!   would, run without one;
//! - [`input`]: inputs that are pipes or FIFOs copied to private files first;
//! - [`layout`]: where the native builds and installed files are (a checkout
//!   or an installed tree, found relative to the running binary);
//! - [`tools`]: the replayer, the allocators, the registry, valgrind, and a
//!   comparison's private scratch directory;
//! - [`registry`]: the zoo's registry and the per-user registry of
//!   synthesized allocators;
//! - [`alloc`]: allocator names (`glibc`, `bsd+pad8`, a synthesized
//!   allocator, a path to a `.so`) resolved to what to preload;
//! - [`callgrind`]: reading `callgrind.out` files;
//! - [`cbuild`]: compiling C with the zoo's flags (from the one file `make`
//!   writes), for what synth and segregate build at run time;
//! - [`vg`]: running a program under heaplab's Valgrind tool with its raw
//!   stream coming back through a FIFO;
//! - [`process`]: child processes from argument vectors, with time limits,
//!   stderr in errors, and the foreground run with signal forwarding that
//!   `record` and `run` share;
//! - [`record`]: the recording driver behind `heaplab record` (the agent's
//!   settings, the traces moved into place, their listing);
//! - [`scratch`]: private scratch directories (mkdtemp, 0700);
//! - [`output`]: output files written to a temporary name, then renamed,
//!   never through a symbolic link.
//!
//! The study crates (`heaplab-compare`, `heaplab-refs`, `heaplab-locality`,
//! `heaplab-segregate`, `heaplab-synth`) depend on this crate, never on each other, for these.
//!
//! ```no_run
//! use heaplab_plumb::{alloc, Layout, Tools};
//! let tools = Tools::new(Layout::get().unwrap()).unwrap();
//! let a = alloc::resolve(&["bsd+pad8".into()], &tools).unwrap();
//! assert_eq!(a[0].env, vec![("HEAPLAB_PAD".to_string(), "8".to_string())]);
//! ```

pub mod alloc;
pub mod callgrind;
pub mod cbuild;
pub mod cmdline;
pub mod input;
pub mod layout;
pub mod output;
pub mod process;
pub mod provenance;
pub mod record;
pub mod registry;
pub mod rounds;
pub mod scratch;
pub mod tools;
pub mod vg;

pub use alloc::{AllocSpec, Allocator, Source};
pub use layout::Layout;
pub use tools::Tools;
