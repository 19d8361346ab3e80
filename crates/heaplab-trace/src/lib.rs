//! The heaplab trace format: what a program asked of its allocator.
//!
//! A trace is a sequence of checksummed blocks: a header (`META`), the
//! definitions of modules, stacks and threads, `EVENTS` blocks and an `END`
//! block. Version 1 holds one columnar event stream in causal order with
//! dense object ids; version 2 (what the recording agent writes) holds one
//! stream per thread, with addresses and cross-thread edges, which the
//! reader merges (`merge`) into the same kind of ordered, id-numbered
//! events, so that every consumer reads both alike. `docs/trace-format.md` is the specification; this crate is its
//! Rust reader and writer, plus the text forms around it (the dump used by the
//! test vectors, and the malloc-lab `.rep` / `.script` formats) and the
//! CUSTOMALLOC measurement profile (`profile`).
//!
//! Write a trace, then read it back:
//!
//! ```
//! use heaplab_trace::*;
//! let meta = Meta { pid: 1, pointer_size: 8, time_unit_ns: 1000, ..Meta::default() };
//! let mut w = TraceWriter::new(Vec::new(), &meta, WriterOptions::default()).unwrap();
//! let t = w.add_thread(1, "main");
//! let p = w.record(&NewEvent::alloc(Kind::Malloc, 24).at(t, 0)).unwrap().unwrap();
//! w.record(&NewEvent::free(p).at(t, 5)).unwrap();
//! let bytes = w.finish(&End::default()).unwrap();
//!
//! let mut r = TraceReader::new(&bytes[..], "example.hltrace").unwrap();
//! let e = r.next_event().unwrap().unwrap();
//! assert_eq!((e.kind, e.size, e.id), (Kind::Malloc, 24, Some(0)));
//! let f = r.next_event().unwrap().unwrap();
//! assert_eq!((f.kind, f.old, f.size), (Kind::Free, Some(0), 24));
//! assert!(r.next_event().unwrap().is_none());
//! ```
//!
//! Readers stream: memory is bounded by the live objects and the distinct
//! stacks, not by the file size. Every problem is a [`TraceError`] naming the
//! file, the byte offset and the number of events read before it.

pub mod block;
pub mod dump;
pub mod error;
pub mod escape;
pub mod format;
pub mod merge;
pub mod model;
pub mod profile;
pub mod reader;
pub mod refs;
pub mod rep;
pub mod sp;
pub mod varint;
pub mod view;
pub mod writer;

pub use block::Codec;
pub use error::{Problem, TraceError};
pub use model::{Dep, End, EndReason, Event, Frame, Kind, Meta, Module, NewEvent, ThreadInfo};
pub use reader::{Item, TraceReader};
pub use view::{split, ResizeOp, ResizeView, SplitOp};
pub use writer::{TraceWriter, WriterOptions};
