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
//! - **measure** ([`measure`]): a trace's references re-issued at the
//!   addresses one allocator returns, beside the allocator's own references
//!   (`--tool=heaplab-measure`), into the cache and page simulators.
//!
//! The raw stream's format is in `native/vgtool/heaplab_vg.h`; [`raw`] reads it.
//! The locality study built on [`measure`] (papers 000 and 003: which
//! configurations, which figures) is the crate `heaplab-locality`.

pub mod heapmap;
pub mod measure;
pub mod raw;
pub mod record;
pub mod source;

/// Running under the Valgrind tool lives in heaplab-plumb; the old path stays.
pub use heaplab_plumb::vg;
