//! The Chrome trace event format (JSON) that Perfetto's UI and
//! chrome://tracing open: live heap bytes as counters over time.
//!
//! ```text
//!   {"traceEvents": [
//!     {"ph":"M", "name":"process_name", "pid":P, "args":{"name": command}},
//!     {"ph":"C", "name":"heap", "ts":µs, "pid":P, "args":{"live bytes":N}},        per bucket
//!     {"ph":"C", "name":"heap by site", "ts":µs, "pid":P,
//!      "args":{"#1 make_node (leak.c:4)":N1, ..., "other":N}},                     per bucket
//!     {"ph":"i", "name":"peak", "ts":µs, "pid":P, "s":"p", "args":{"bytes":N}}
//!     {"ph":"X", "name":"heap calls", "ts":µs, "dur":µs, "pid":P, "tid":T,
//!      "args":{"allocations":N, "frees":N, "freed by others":N, ...}}       per thread
//!   ], "displayTimeUnit":"ms", "otherData":{...}}
//! ```
//!
//! Counters are sampled at the end of each bucket of the analysis' timeline
//! ("heap" takes the bucket's maximum, so the peak shows); "heap by site"
//! stacks the top sites and the rest, and sums to the live bytes then. Each
//! thread gets a slice on its own track from its first heap call to its
//! last, carrying what it allocated and freed (a version-2 trace's times are
//! the recorder's, interpolated between its time stamps).

use crate::analyze::Analysis;
use crate::sites::Site;
use serde_json::{json, Map, Value};

/// The trace event JSON of an analysis, with `top` sites drawn apart.
pub fn chrome(a: &Analysis, sites: &[Site], top: usize) -> String {
    let pid = a.meta.pid;
    let mut ev: Vec<Value> = Vec::new();
    let cmd = a.meta.command_line();
    ev.push(json!({"ph": "M", "name": "process_name", "pid": pid, "tid": 0,
                   "args": {"name": if cmd.is_empty() { a.trace.clone() } else { cmd }}}));
    for t in &a.threads {
        ev.push(json!({"ph": "M", "name": "thread_name", "pid": pid, "tid": t.tid,
                       "args": {"name": String::from_utf8_lossy(&t.name)}}));
    }
    let points = a.timeline.points();
    let width = a.timeline.width_ns();
    let shown: Vec<&Site> =
        sites.iter().filter(|s| s.peak_bytes > 0 || s.max_bytes > 0).take(top).collect();
    let series: Vec<Vec<u64>> = shown.iter().map(|s| a.timeline.sum_of(&s.stack_ids)).collect();
    let us = |ns: u64| ns as f64 / 1000.0;
    ev.push(json!({"ph": "C", "name": "heap", "ts": 0.0, "pid": pid, "tid": 0,
                   "args": {"live bytes": 0}}));
    for (b, p) in points.iter().enumerate() {
        let start = b as u64 * width;
        ev.push(json!({"ph": "C", "name": "heap", "ts": us(start), "pid": pid, "tid": 0,
                       "args": {"live bytes": p.max}}));
        let mut args = Map::new();
        let mut sum = 0u64;
        for (s, v) in shown.iter().zip(&series) {
            let x = v.get(b).copied().unwrap_or(0);
            sum += x;
            args.insert(format!("#{} {}", s.rank, s.name), json!(x));
        }
        args.insert("other".into(), json!(p.last.saturating_sub(sum)));
        ev.push(json!({"ph": "C", "name": "heap by site", "ts": us(p.t_ns), "pid": pid,
                       "tid": 0, "args": Value::Object(args)}));
    }
    ev.push(json!({"ph": "i", "name": "peak", "ts": us(a.totals.peak_ns), "pid": pid, "tid": 0,
                   "s": "p", "args": {"bytes": a.totals.peak_bytes, "objects": a.totals.peak_objects}}));
    for t in &a.thread_stats {
        let tid = if t.tid != 0 { t.tid } else { u64::from(t.index) + 1 };
        ev.push(json!({"ph": "X", "name": "heap calls", "ts": us(t.first_ns),
                       "dur": us(t.last_ns.saturating_sub(t.first_ns)), "pid": pid, "tid": tid,
                       "args": {"thread": t.index, "allocations": t.allocations,
                                "bytes allocated": t.bytes_allocated, "frees": t.frees,
                                "frees of others' objects": t.frees_of_others,
                                "freed by others": t.freed_by_others,
                                "max live bytes": t.max_live_bytes,
                                "leaked bytes": t.leaked_bytes}}));
    }
    let doc = json!({
        "traceEvents": ev,
        "displayTimeUnit": "ms",
        "otherData": {
            "producer": format!("heaplab {}", env!("CARGO_PKG_VERSION")),
            "trace": a.trace,
            "peak_bytes": a.totals.peak_bytes,
            "leaked_bytes": a.totals.leaked_bytes,
        }
    });
    serde_json::to_string(&doc).expect("JSON values serialize") + "\n"
}
