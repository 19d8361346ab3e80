//! Heap references: recording them, and measuring allocators on them.
//!
//! Papers 000, 001 and 003 measure what allocators do to cache and page
//! locality by driving simulators with the address streams of instrumented
//! programs (PIXIE, ATOM). heaplab does it with its own Valgrind tool
//! (`native/vgtool`):
//!
//! - **record** ([`record`]): the program runs under `--tool=heaplab`, which
//!   replaces malloc as DHAT does and streams every allocation and every load
//!   and store; [`record::Converter`] attributes each address to the live
//!   object holding it ([`heapmap`]) and writes the trace with its REFS
//!   stream (`heaplab_trace::refs`).
//!
//! ```text
//!   program ─ valgrind --tool=heaplab ─ FIFO ─▶ raw ─▶ Converter ─▶ trace.hltrace (EVENTS + REFS)
//! ```
//!
//! The raw stream's format is in `native/vgtool/heaplab_vg.h`; [`raw`] reads it.

pub mod encode;
pub mod heapmap;
pub mod jobs;
pub mod measure;
pub mod raw;
pub mod record;
pub mod report;
pub mod source;
pub mod study;

/// Running under the Valgrind tool lives in heaplab-plumb; the old path stays.
pub use heaplab_plumb::vg;
