//! Memory over time as data: the whole program's live bytes per interval,
//! the top sites' live bytes, and the footprints of zoo allocators replaying
//! the trace (`heaplab-replay --footprint-every N`), for the JSON, the CSV
//! and the report's figure.
//!
//! ```text
//!   timeline (analyze.rs)          ─▶ points: per interval of width_ns,
//!                                      the maximum and the last live bytes
//!   sites (top TOP_SITES by peak)  ─▶ their live bytes at each interval's end
//!   heaplab-replay --footprint-every N under LD_PRELOAD=libheaplab-X.so
//!     rows [events, trace time, live, footprint, peak since last row]
//!                                  ─▶ samples, time made relative to the
//!                                      analysis' first event (same clock)
//! ```
//!
//! Invariants the tests check: a sample's footprint, and its peak since the
//! previous sample, are at least its live bytes (an allocator holds every
//! live byte it was asked for); the replay's live bytes, counted by the C
//! reader, end at the analysis' leaked bytes.

use crate::analyze::Analysis;
use crate::sites::Site;
use crate::timeline::Point;
use serde::Serialize;

/// Sites whose live bytes over time the JSON and CSV carry (the figure draws
/// as many).
pub const TOP_SITES: usize = 8;

/// One footprint sample of a replay.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Sample {
    /// Events replayed so far.
    pub events: u64,
    /// Nanoseconds from the trace's first event to the last one replayed.
    pub t_ns: u64,
    /// Requested bytes live then (from the trace).
    pub live_bytes: u64,
    /// The allocator's footprint (heap + mapped) then.
    pub footprint_bytes: u64,
    /// Its highest footprint since the previous sample.
    pub footprint_peak_bytes: u64,
}

/// An allocator's footprint over a replay of the trace.
#[derive(Debug, Clone, Serialize)]
pub struct Footprint {
    pub allocator: String,
    /// True: from the allocator's own accounting (heaplab_alloc_stats), not RSS.
    pub exact: bool,
    /// Events between samples.
    pub every: u64,
    pub samples: Vec<Sample>,
}

/// A sample every `events / 2048` events (1 to 65536): about two samples per
/// interval of the timeline's 1024.
pub fn every_for(events: u64) -> u64 {
    (events / 2048).clamp(1, 65536)
}

/// The footprint series in a replayer's JSON object (`footprint_series`);
/// `first_ns` is the analysis' first event time and `time_unit_ns` the
/// trace's time unit, so that samples share the timeline's clock.
pub fn from_replay(
    allocator: &str,
    replay: &serde_json::Value,
    first_ns: u64,
    time_unit_ns: u64,
) -> Result<Footprint, String> {
    let rows = match &replay["footprint_series"] {
        serde_json::Value::Array(a) => a,
        serde_json::Value::Null => {
            return Err(format!(
                "{allocator} reports no exact footprint (it exports no heaplab_alloc_stats); \
                 --footprint takes the zoo's allocators (heaplab allocators lists them)"
            ))
        }
        _ => return Err("the replayer's footprint_series is not a list".into()),
    };
    let mut samples = Vec::with_capacity(rows.len());
    for r in rows {
        let v: Vec<u64> =
            r.as_array().map(|a| a.iter().filter_map(|x| x.as_u64()).collect()).unwrap_or_default();
        let [events, t, live, now, peak] = v[..] else {
            return Err(format!("a footprint sample is not five numbers: {r}"));
        };
        samples.push(Sample {
            events,
            t_ns: t.saturating_mul(time_unit_ns.max(1)).saturating_sub(first_ns),
            live_bytes: live,
            footprint_bytes: now,
            footprint_peak_bytes: peak,
        });
    }
    Ok(Footprint {
        allocator: allocator.to_string(),
        exact: true,
        every: replay["footprint_every"].as_u64().unwrap_or(0),
        samples,
    })
}

/// One site's live bytes at the end of each interval.
#[derive(Debug, Clone, Serialize)]
pub struct SiteSeries {
    pub rank: usize,
    pub name: String,
    pub bytes: Vec<u64>,
}

/// Memory over time, as `stats --json` carries it.
#[derive(Debug, Clone, Serialize)]
pub struct OverTime {
    /// Nanoseconds per interval; point i ends at (i + 1) × width_ns.
    pub width_ns: u64,
    pub points: Vec<Point>,
    /// The top sites by bytes at any moment, their live bytes at each
    /// point's end (the rest of `points[i].last` is other sites).
    pub sites: Vec<SiteSeries>,
    pub footprints: Vec<Footprint>,
}

/// The sites drawn apart over time: the first `n` of `sites` that ever had
/// bytes live.
pub fn top_sites(sites: &[Site], n: usize) -> impl Iterator<Item = &Site> {
    sites.iter().filter(|s| s.max_bytes > 0).take(n)
}

pub fn over_time(a: &Analysis, sites: &[Site], footprints: &[Footprint]) -> OverTime {
    OverTime {
        width_ns: a.timeline.width_ns(),
        points: a.timeline.points(),
        sites: top_sites(sites, TOP_SITES)
            .map(|s| SiteSeries {
                rank: s.rank,
                name: s.name.clone(),
                bytes: a.timeline.sum_of(&s.stack_ids),
            })
            .collect(),
        footprints: footprints.to_vec(),
    }
}

/// The same in long form, one value per row, for pandas, R or a spreadsheet:
/// `trace,series,t_ns,bytes,max_bytes` where series is `live` (the whole
/// program; max_bytes the interval's maximum), `site #R NAME` (bytes at the
/// interval's end), or `footprint ALLOCATOR` (a replay sample; max_bytes its
/// peak since the previous sample). With `header`, the header line first.
pub fn csv(trace: &str, o: &OverTime, header: bool) -> String {
    let q = |s: &str| format!("\"{}\"", s.replace('"', "\"\""));
    let mut out = String::new();
    if header {
        out.push_str("trace,series,t_ns,bytes,max_bytes\n");
    }
    let tq = q(trace);
    for p in &o.points {
        out.push_str(&format!("{tq},live,{},{},{}\n", p.t_ns, p.last, p.max));
    }
    for s in &o.sites {
        let name = q(&format!("site #{} {}", s.rank, s.name));
        for (p, b) in o.points.iter().zip(&s.bytes) {
            out.push_str(&format!("{tq},{name},{},{b},\n", p.t_ns));
        }
    }
    for f in &o.footprints {
        let name = q(&format!("footprint {}", f.allocator));
        for s in &f.samples {
            out.push_str(&format!(
                "{tq},{name},{},{},{}\n",
                s.t_ns, s.footprint_bytes, s.footprint_peak_bytes
            ));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replay_rows_become_samples_on_the_analysis_clock() {
        let j: serde_json::Value = serde_json::json!({
            "footprint_every": 2,
            "footprint_series": [[2, 1005, 64, 4096, 8192], [3, 1010, 0, 4096, 4096]]
        });
        let f = from_replay("firstfit", &j, 1000, 1).unwrap();
        assert_eq!(f.every, 2);
        assert_eq!(f.samples[0].t_ns, 5);
        assert_eq!(f.samples[1].footprint_peak_bytes, 4096);
        let none = serde_json::json!({ "footprint_series": null });
        assert!(from_replay("glibc", &none, 0, 1).unwrap_err().contains("zoo"));
        let bad = serde_json::json!({ "footprint_series": [[1, 2, 3]] });
        assert!(from_replay("x", &bad, 0, 1).is_err());
        assert_eq!((every_for(10), every_for(1 << 30)), (1, 65536));
    }
}
