//! Where the memory goes: heaptrack's answers from a heaplab trace.
//!
//! ```text
//!   trace ──▶ analyze (one pass) ──▶ per stack id: allocs, bytes, live at the
//!   │           │                    program's peak, leaked at the end,
//!   │           │                    temporaries, lifetimes; totals; the
//!   │           │                    timeline (live bytes over time, per stack)
//!   │           ▼
//!   │   symbols (addr2line/gimli over the module, its build-id debug file or
//!   │            its .gnu_debuglink; debuginfo.rs finds them) ─▶ function,
//!   │            file:line, inlined frames
//!   │           ▼
//!   ├──▶ sites: grouped (stack, function, line), sorted ─▶ tables, JSON, CSV
//!   ├──▶ flame: folded stacks ─▶ inferno SVG (allocations, peak, leaks; diff)
//!   ├──▶ overtime: live bytes, top sites and zoo footprints (replayed
//!   │             by heaplab-replay --footprint-every) over time
//!   ├──▶ diff: two runs site by site
//!   ├──▶ export: pprof (prost), Chrome trace JSON (Perfetto), massif
//!   └──▶ report: report.html (heaplab-report)
//! ```
//!
//! ```
//! use heaplab_trace::*;
//! use heaplab_memory::{analyze, symbols::Symbolizer};
//! let dir = std::env::temp_dir().join(format!("hm-doc-{}", std::process::id()));
//! std::fs::create_dir_all(&dir).unwrap();
//! let path = dir.join("t.hltrace");
//! let meta = Meta { pid: 1, pointer_size: 8, time_unit_ns: 1, ..Meta::default() };
//! let mut w = TraceWriter::new(std::fs::File::create(&path).unwrap(), &meta,
//!                              WriterOptions::default()).unwrap();
//! let t = w.add_thread(1, "main");
//! let a = w.record(&NewEvent::alloc(Kind::Malloc, 100).at(t, 0)).unwrap().unwrap();
//! let b = w.record(&NewEvent::alloc(Kind::Malloc, 50).at(t, 1)).unwrap().unwrap();
//! w.record(&NewEvent::free(b).at(t, 2)).unwrap();
//! w.finish(&End::default()).unwrap();
//! let mut sym = Symbolizer::default();
//! let r = analyze::analyze(&path, &analyze::Options::default(), &mut sym, |_| {}).unwrap();
//! assert_eq!(r.totals.peak_bytes, 150);
//! assert_eq!((r.totals.leaked_bytes, r.totals.temporary), (100, 1));
//! # let _ = a; std::fs::remove_dir_all(&dir).unwrap();
//! ```

pub mod analyze;
pub mod debuginfo;
pub mod diff;
pub mod export;
pub mod flame;
pub mod hist;
pub mod overtime;
pub mod report;
pub mod sites;
pub mod symbols;
pub mod timeline;
