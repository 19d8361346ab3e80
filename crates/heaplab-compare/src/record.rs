//! One record per (trace, allocator): what `heaplab compare` writes as JSON
//! and CSV and prints as a table. `docs/compare.md` documents every field;
//! a test checks the two agree.

use heaplab_plumb::provenance::Provenance;
use serde::{Deserialize, Serialize};

/// What `--json` writes: the records with where they came from.  Version 1
/// (before 2026-11-27) was the bare array of records.
pub const SCHEMA_VERSION: u32 = 2;

/// The JSON document of a comparison (`schema` "heaplab.compare") or of
/// live runs (`schema` "heaplab.compare.live", records `LiveRecord`).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Document<R> {
    pub schema: String,
    pub schema_version: u32,
    /// The machine, heaplab's version and commit, the command, the date,
    /// and each allocator's version.
    pub provenance: Provenance,
    pub records: Vec<R>,
}

impl<R> Document<R> {
    pub fn new(schema: &str, provenance: Provenance, records: Vec<R>) -> Document<R> {
        Document { schema: schema.into(), schema_version: SCHEMA_VERSION, provenance, records }
    }
}

/// The comparison of one allocator on one trace. Fields that could not be
/// measured are null (the allocator is missing, or a measurement was off or
/// failed), and `status` / `error` say why.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct Record {
    pub trace: String,
    pub trace_name: String,
    pub allocator: String,
    pub source: String,
    pub status: String,
    pub error: Option<String>,
    /// The trace stops early (no END, or a torn last block): every figure
    /// covers only the events before the cut.
    pub truncated: bool,
    pub truncated_at_byte: Option<u64>,
    pub truncated_after_events: Option<u64>,
    /// The reader's message about the cut.
    pub truncation: Option<String>,
    pub events: Option<u64>,
    pub mallocs: Option<u64>,
    pub frees: Option<u64>,
    pub reallocs: Option<u64>,
    pub threads_mode: Option<String>,
    pub replay_threads: Option<u64>,
    /// How the threads of a threaded replay waited for one another (`futex`
    /// or `spin`: `--wait`); null for a serial replay.
    #[serde(default)]
    pub thread_wait: Option<String>,
    /// The zoo shim's one lock in the last timing replay: takes that found
    /// it held, their share of the calls, futex sleeps, and the time waited
    /// (summed over the replay threads). Null where the allocator does not
    /// count it (glibc and the peers).
    #[serde(default)]
    pub lock_contended: Option<u64>,
    #[serde(default)]
    pub lock_contended_share: Option<f64>,
    #[serde(default)]
    pub lock_sleeps: Option<u64>,
    #[serde(default)]
    pub lock_wait_s: Option<f64>,
    pub instr_per_malloc: Option<f64>,
    pub instr_per_free: Option<f64>,
    pub instr_per_realloc: Option<f64>,
    pub alloc_instructions: Option<u64>,
    pub replay_instructions: Option<u64>,
    pub alloc_instr_share: Option<f64>,
    pub share_basis: Option<String>,
    pub counter: Option<String>,
    /// Environment the counted replay had beside the allocator's own
    /// (jemalloc's clock-driven purging off; count.rs's `counting_env`).
    #[serde(default)]
    pub count_env: Option<String>,
    /// Entry points the allocator lacks, emulated by the replayer with its
    /// memalign (e.g. `pvalloc` under Debian's jemalloc), comma-separated.
    #[serde(default)]
    pub emulated: Option<String>,
    /// The timing replays' mode: `plain` (calls only) or `touch` (`--time-mode`).
    #[serde(default)]
    pub time_mode: Option<String>,
    pub wall_s: Option<f64>,
    pub wall_runs_s: Vec<f64>,
    pub wall_ratio_glibc: Option<f64>,
    /// CPU time (every thread's) of the same timed regions: what a loaded
    /// machine disturbs less than wall time.
    pub cpu_s: Option<f64>,
    pub cpu_runs_s: Vec<f64>,
    pub cpu_ratio_glibc: Option<f64>,
    pub ns_per_event: Option<f64>,
    pub peak_footprint_bytes: Option<u64>,
    pub footprint_source: Option<String>,
    pub footprint_vs_firstfit: Option<f64>,
    pub peak_rss_growth_bytes: Option<u64>,
    pub peak_live_bytes: Option<u64>,
    pub peak_live_usable_bytes: Option<u64>,
    pub utilization: Option<f64>,
    pub internal_fragmentation: Option<f64>,
}

/// The CSV columns, in order (every field; `wall_runs_s` and `cpu_runs_s`
/// have their runs joined with `;`).
pub const CSV_COLUMNS: [&str; 47] = [
    "trace",
    "trace_name",
    "allocator",
    "source",
    "status",
    "error",
    "truncated",
    "truncated_at_byte",
    "truncated_after_events",
    "truncation",
    "events",
    "mallocs",
    "frees",
    "reallocs",
    "threads_mode",
    "replay_threads",
    "thread_wait",
    "lock_contended",
    "lock_contended_share",
    "lock_sleeps",
    "lock_wait_s",
    "instr_per_malloc",
    "instr_per_free",
    "instr_per_realloc",
    "alloc_instructions",
    "replay_instructions",
    "alloc_instr_share",
    "share_basis",
    "counter",
    "count_env",
    "emulated",
    "time_mode",
    "wall_s",
    "wall_runs_s",
    "wall_ratio_glibc",
    "cpu_s",
    "cpu_runs_s",
    "cpu_ratio_glibc",
    "ns_per_event",
    "peak_footprint_bytes",
    "footprint_source",
    "footprint_vs_firstfit",
    "peak_rss_growth_bytes",
    "peak_live_bytes",
    "peak_live_usable_bytes",
    "utilization",
    "internal_fragmentation",
];

fn csv_field(s: &str) -> String {
    if s.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.to_string()
    }
}

/// The records as CSV, a header line first.
pub fn to_csv(records: &[Record]) -> String {
    let mut o = CSV_COLUMNS.join(",");
    o.push('\n');
    for r in records {
        let v = serde_json::to_value(r).expect("a record serializes");
        let cells: Vec<String> = CSV_COLUMNS
            .iter()
            .map(|c| match &v[*c] {
                serde_json::Value::Null => String::new(),
                serde_json::Value::String(s) => csv_field(s),
                serde_json::Value::Array(a) => {
                    a.iter().map(|x| x.to_string()).collect::<Vec<_>>().join(";")
                }
                x => x.to_string(),
            })
            .collect();
        o.push_str(&cells.join(","));
        o.push('\n');
    }
    o
}

fn opt(v: Option<f64>, digits: usize) -> String {
    v.map(|x| format!("{x:.digits$}")).unwrap_or_else(|| "—".into())
}

/// Bytes as KiB/MiB/GiB, short.
pub fn bytes(b: u64) -> String {
    let b = b as f64;
    if b >= 1024.0 * 1024.0 * 1024.0 {
        format!("{:.2} GiB", b / (1024.0 * 1024.0 * 1024.0))
    } else if b >= 1024.0 * 1024.0 {
        format!("{:.1} MiB", b / (1024.0 * 1024.0))
    } else if b >= 1024.0 {
        format!("{:.1} KiB", b / 1024.0)
    } else {
        format!("{b} B")
    }
}

/// The terminal table: one line per record, grouped by trace.
pub fn table(records: &[Record]) -> String {
    let mut o = format!(
        "{:<12} {:<14} {:>9} {:>9} {:>7} {:>9} {:>7} {:>11} {:>7} {:>6} {:>6}\n",
        "trace",
        "allocator",
        "ins/mall",
        "ins/free",
        "share",
        "wall ms",
        "×glibc",
        "footprint",
        "×ff",
        "util",
        "intfr"
    );
    let mut last: Option<&str> = None;
    for r in records {
        if last != Some(r.trace.as_str()) {
            if last.is_some() {
                o.push('\n');
            }
            if let (true, Some(at), Some(n)) =
                (r.truncated, r.truncated_at_byte, r.truncated_after_events)
            {
                o.push_str(&format!(
                    "! {}: TRUNCATED at byte {at}: the figures below cover only the {n} events before it\n",
                    esc(&r.trace_name)
                ));
            }
        }
        last = Some(r.trace.as_str());
        if r.status != "ok" {
            o.push_str(&format!(
                "{:<12} {:<14} {}: {}\n",
                trunc(&esc(&r.trace_name), 12),
                trunc(&esc(&r.allocator), 14),
                r.status.to_uppercase(),
                esc(r.error.as_deref().unwrap_or(""))
            ));
            continue;
        }
        o.push_str(&format!(
            "{:<12} {:<14} {:>9} {:>9} {:>7} {:>9} {:>7} {:>11} {:>7} {:>6} {:>6}\n",
            trunc(&esc(&r.trace_name), 12),
            trunc(&esc(&r.allocator), 14),
            opt(r.instr_per_malloc, 1),
            opt(r.instr_per_free, 1),
            r.alloc_instr_share.map(|s| format!("{:.1}%", s * 100.0)).unwrap_or_else(|| "—".into()),
            opt(r.wall_s.map(|s| s * 1e3), 1),
            opt(r.wall_ratio_glibc, 2),
            r.peak_footprint_bytes.map(bytes).unwrap_or_else(|| "—".into())
                + if r.footprint_source.as_deref() == Some("rss_touch") { "*" } else { " " },
            opt(r.footprint_vs_firstfit, 2),
            r.utilization.map(|u| format!("{:.0}%", u * 100.0)).unwrap_or_else(|| "—".into()),
            r.internal_fragmentation
                .map(|u| format!("{:.0}%", u * 100.0))
                .unwrap_or_else(|| "—".into()),
        ));
    }
    o.push_str(&lock_table(records));
    o
}

/// What the zoo's one lock cost in the threaded replays (empty when no
/// record replayed threads as threads with an allocator that counts it).
fn lock_table(records: &[Record]) -> String {
    let rows: Vec<&Record> = records
        .iter()
        .filter(|r| {
            r.status == "ok"
                && r.threads_mode.as_deref() == Some("recorded")
                && r.lock_contended.is_some()
        })
        .collect();
    if rows.is_empty() {
        return String::new();
    }
    let mut o = format!(
        "\nthe one lock of the zoo's shim, threaded replay (last timing run)\n\
         {:<12} {:<14} {:>7} {:>10} {:>9} {:>8} {:>9}\n",
        "trace", "allocator", "threads", "contended", "of calls", "sleeps", "wait ms"
    );
    for r in rows {
        o.push_str(&format!(
            "{:<12} {:<14} {:>7} {:>10} {:>9} {:>8} {:>9}\n",
            trunc(&esc(&r.trace_name), 12),
            trunc(&esc(&r.allocator), 14),
            r.replay_threads.map(|t| t.to_string()).unwrap_or_else(|| "—".into()),
            r.lock_contended.map(|c| c.to_string()).unwrap_or_else(|| "—".into()),
            r.lock_contended_share
                .map(|s| format!("{:.2}%", s * 100.0))
                .unwrap_or_else(|| "—".into()),
            r.lock_sleeps.map(|c| c.to_string()).unwrap_or_else(|| "—".into()),
            opt(r.lock_wait_s.map(|s| s * 1e3), 2),
        ));
    }
    o
}

/// Names and messages quote paths, which may hold any byte.
fn esc(s: &str) -> String {
    heaplab_trace::escape::terminal_str(s)
}

fn trunc(s: &str, n: usize) -> String {
    if s.chars().count() <= n {
        s.to_string()
    } else {
        s.chars().take(n - 1).collect::<String>() + "…"
    }
}
