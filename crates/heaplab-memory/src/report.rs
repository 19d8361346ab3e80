//! `report.html` of `heaplab stats --report DIR` and `heaplab diff --report
//! DIR`: one self-contained page (heaplab-report) with where it came from,
//! the totals, memory over time (the top sites stacked), flame graphs of the
//! bytes at the peak, of the allocations and of the leaks, and the sites.

use crate::analyze::Analysis;
use crate::diff::Diff;
use crate::flame::{self, Weight};
use crate::overtime::{self, Footprint};
use crate::sites::Site;
use crate::symbols::Symbolizer;
use heaplab_report::human;
use heaplab_report::{Cell, Overlay, Report, StackedArea, Table};

/// The memory-over-time figure: the top sites stacked, the rest as "other",
/// the whole program's maximum per interval as a dashed line, and each
/// replayed allocator's exact footprint as a line of its own.
pub fn timeline_svg(a: &Analysis, sites: &[Site], footprints: &[Footprint]) -> String {
    // every series starts at 0 bytes at time 0, before the first event
    let points = a.timeline.points();
    let x: Vec<f64> =
        std::iter::once(0.0).chain(points.iter().map(|p| p.t_ns as f64 / 1e6)).collect();
    let mut bands: Vec<(String, Vec<f64>)> = Vec::new();
    let mut sum = vec![0.0; points.len()];
    for s in overtime::top_sites(sites, overtime::TOP_SITES) {
        let v: Vec<f64> = a.timeline.sum_of(&s.stack_ids).into_iter().map(|v| v as f64).collect();
        for (t, x) in sum.iter_mut().zip(&v) {
            *t += x;
        }
        bands.push((format!("#{} {}", s.rank, s.name), std::iter::once(0.0).chain(v).collect()));
    }
    let other: Vec<f64> = std::iter::once(0.0)
        .chain(points.iter().zip(&sum).map(|(p, s)| (p.last as f64 - s).max(0.0)))
        .collect();
    bands.push(("other sites".into(), other));
    StackedArea {
        title: "Live heap bytes over time".into(),
        x_label: "milliseconds from the first event".into(),
        y_label: "bytes live".into(),
        x,
        bands,
        line: Some((
            "program, maximum in each interval".into(),
            points.iter().map(|p| p.max as f64).collect(),
        )),
        overlays: footprints
            .iter()
            .map(|f| Overlay {
                name: format!("{} footprint (exact)", f.allocator),
                label: f.allocator.clone(),
                x: std::iter::once(0.0)
                    .chain(f.samples.iter().map(|s| s.t_ns as f64 / 1e6))
                    .collect(),
                y: std::iter::once(0.0)
                    .chain(f.samples.iter().map(|s| s.footprint_peak_bytes as f64))
                    .collect(),
            })
            .collect(),
        ..StackedArea::default()
    }
    .to_svg()
}

/// Each replayed allocator's footprint against the live bytes.
fn footprint_table(a: &Analysis, footprints: &[Footprint]) -> Table {
    Table {
        caption: Some("Exact footprints from replay (click a header to sort)".into()),
        header: [
            "allocator",
            "samples",
            "every N events",
            "peak footprint",
            "peak live",
            "footprint / live at the peaks",
            "footprint at the end",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect(),
        rows: footprints
            .iter()
            .map(|f| {
                let peak = f.samples.iter().map(|s| s.footprint_peak_bytes).max().unwrap_or(0);
                let live = a.totals.peak_bytes;
                vec![
                    Cell::text(f.allocator.clone()),
                    Cell::Int(f.samples.len() as u64),
                    Cell::Int(f.every),
                    Cell::Bytes(peak),
                    Cell::Bytes(live),
                    Cell::Num(if live == 0 { 0.0 } else { peak as f64 / live as f64 }, 3),
                    Cell::Bytes(f.samples.last().map_or(0, |s| s.footprint_bytes)),
                ]
            })
            .collect(),
    }
}

/// The sites as a table (at most `n`).
pub fn sites_table(sites: &[Site], n: usize, frames: usize) -> Table {
    Table {
        caption: Some(format!(
            "Call sites (the first {} of {}; click a header to sort)",
            n.min(sites.len()),
            sites.len()
        )),
        header: [
            "#",
            "site",
            "peak",
            "leaked",
            "leaked objects",
            "allocations",
            "temporary",
            "allocated",
            "lifetime p50 ≤",
            "lifetime p99 ≤",
            "call stack, innermost first",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect(),
        rows: sites
            .iter()
            .take(n)
            .map(|s| {
                let stack: Vec<String> =
                    s.frames.iter().take(frames).flat_map(|f| f.lines()).collect();
                vec![
                    Cell::Int(s.rank as u64),
                    Cell::text(s.name.clone()),
                    Cell::Bytes(s.peak_bytes),
                    Cell::Bytes(s.leaked_bytes),
                    Cell::Int(s.leaked_objects),
                    Cell::Int(s.allocs),
                    Cell::Int(s.temporary),
                    Cell::Bytes(s.bytes),
                    Cell::Nanos(s.lifetime_ns.p50),
                    Cell::Nanos(s.lifetime_ns.p99),
                    Cell::text(stack.join(" ← ")),
                ]
            })
            .collect(),
    }
}

/// The page of one analysis.
pub fn page(
    a: &Analysis,
    sites: &[Site],
    sym: &mut Symbolizer,
    provenance: &[(String, String)],
    frames: usize,
    footprints: &[Footprint],
) -> String {
    let mut r = Report::new(&format!("Where the memory goes: {}", a.trace));
    r.sortable_tables();
    r.table(&Table::key_values("Provenance", provenance));
    let t = &a.totals;
    let ended = match (&a.end, &a.error) {
        (_, Some(e)) => format!("read stopped early: {e}"),
        (Some(e), None) => format!("{} (status {})", e.reason.name(), e.status),
        (None, None) => "cut short (no END block)".into(),
    };
    r.table(&Table {
        caption: Some("Totals".into()),
        header: vec!["".into(), "".into()],
        rows: vec![
            vec![Cell::text("events"), Cell::Int(t.events)],
            vec![Cell::text("allocations"), Cell::Int(t.allocations)],
            vec![Cell::text("bytes allocated"), Cell::Bytes(t.bytes_allocated)],
            vec![Cell::text("peak live bytes"), Cell::Bytes(t.peak_bytes)],
            vec![Cell::text("peak at"), Cell::Nanos(t.peak_ns)],
            vec![Cell::text("leaked bytes (live at the end)"), Cell::Bytes(t.leaked_bytes)],
            vec![Cell::text("leaked objects"), Cell::Int(t.leaked_objects)],
            vec![
                Cell::text(format!(
                    "temporary allocations (freed within {} event(s))",
                    a.options.temporary_within
                )),
                Cell::Int(t.temporary),
            ],
            vec![Cell::text("duration"), Cell::Nanos(t.duration_ns)],
            vec![Cell::text("how the recording ended"), Cell::text(ended)],
        ],
    });
    if !a.options.filter.is_empty() {
        r.paragraph(&format!(
            "Filtered: {} allocations left out by {}.",
            human::count(t.filtered_out),
            serde_json::to_string(&a.options.filter).unwrap_or_default()
        ));
    }
    r.heading("Memory over time");
    r.figure(
        &timeline_svg(a, sites, footprints),
        &format!(
            "Live heap bytes (requested sizes): the sites with the most bytes at the peak \
             stacked, sampled at the end of each interval; the dashed line is the program's \
             maximum within each interval, so it reaches the peak.{}",
            if footprints.is_empty() {
                " (heaplab stats --footprint ALLOCATOR adds a zoo allocator's exact footprint \
                 from a replay of the trace.)"
                    .to_string()
            } else {
                format!(
                    " The other lines are the exact footprints (heap + mapped bytes, from the \
                     allocator's own accounting) of {} replaying this trace, the highest in \
                     each sampling interval; the gap above the live bytes is what the allocator \
                     costs in space.",
                    footprints.iter().map(|f| f.allocator.as_str()).collect::<Vec<_>>().join(", ")
                )
            }
        ),
    );
    if !footprints.is_empty() {
        r.table(&footprint_table(a, footprints));
    }
    r.heading("Flame graphs");
    for (w, what) in [
        (Weight::Peak, "bytes live at the program's peak"),
        (Weight::Allocs, "allocation calls"),
        (Weight::Leaked, "bytes still live at the end (leaks)"),
    ] {
        let lines = flame::folded(a, w, sym);
        let svg = flame::svg(&lines, w.title(), w.count_name());
        if svg.is_empty() {
            r.paragraph(&format!("No {what} to draw."));
            continue;
        }
        let h = flame::svg_height(&svg).unwrap_or(600);
        r.document(
            &svg,
            h,
            &format!(
                "Flame graph of {what}: callers below, the allocating function on top; click to \
                 zoom, Ctrl-F to search."
            ),
        );
    }
    r.heading("Call sites");
    r.table(&sites_table(sites, 50, frames));
    r.heading("Debug information");
    r.table(&Table {
        caption: Some("Where each module's symbols came from".into()),
        header: vec!["module".into(), "build-id".into(), "debug information".into(), "file".into()],
        rows: sym
            .reports()
            .iter()
            .map(|m| {
                vec![
                    Cell::text(m.path.clone()),
                    Cell::text(m.build_id.clone()),
                    Cell::text(m.debug.word()),
                    Cell::text(m.debug.file().map(|p| p.display().to_string()).unwrap_or_default()),
                ]
            })
            .collect(),
    });
    r.to_html()
}

/// The page of a comparison, with its differential flame graph.
pub fn diff_page(
    d: &Diff,
    before: &Analysis,
    after: &Analysis,
    sym: &mut Symbolizer,
    provenance: &[(String, String)],
) -> String {
    let mut r = Report::new(&format!("Before and after: {} → {}", d.before, d.after));
    r.sortable_tables();
    r.table(&Table::key_values("Provenance", provenance));
    r.table(&diff_table(d, 100));
    r.heading("Differential flame graphs");
    for w in [Weight::Peak, Weight::Allocs] {
        let a = flame::folded(before, w, sym);
        let b = flame::folded(after, w, sym);
        let svg = flame::diff_svg(
            &a,
            &b,
            &format!("{} (red: grew, blue: shrank)", w.title()),
            w.count_name(),
        );
        if svg.is_empty() {
            continue;
        }
        let h = flame::svg_height(&svg).unwrap_or(600);
        r.document(
            &svg,
            h,
            &format!(
                "{}: the shape of the second run, coloured by the change from the first.",
                w.title()
            ),
        );
    }
    r.to_html()
}

/// The comparison as a table (at most `n` rows).
pub fn diff_table(d: &Diff, n: usize) -> Table {
    let mut rows = vec![vec![
        Cell::text("(whole program)"),
        Cell::Int(d.totals_before.allocs),
        Cell::Int(d.totals_after.allocs),
        Cell::text(human::signed(
            i128::from(d.totals_after.allocs) - i128::from(d.totals_before.allocs),
        )),
        Cell::Bytes(d.totals_before.peak_bytes),
        Cell::Bytes(d.totals_after.peak_bytes),
        Cell::text(human::signed_bytes(
            i128::from(d.totals_after.peak_bytes) - i128::from(d.totals_before.peak_bytes),
        )),
        Cell::Bytes(d.totals_before.leaked_bytes),
        Cell::Bytes(d.totals_after.leaked_bytes),
        Cell::text(human::signed_bytes(
            i128::from(d.totals_after.leaked_bytes) - i128::from(d.totals_before.leaked_bytes),
        )),
        Cell::text(human::signed(
            i128::from(d.totals_after.temporary) - i128::from(d.totals_before.temporary),
        )),
    ]];
    rows.extend(d.rows.iter().take(n).map(|x| {
        vec![
            Cell::text(x.name.clone()),
            Cell::Int(x.before.allocs),
            Cell::Int(x.after.allocs),
            Cell::text(human::signed(x.delta_allocs)),
            Cell::Bytes(x.before.peak_bytes),
            Cell::Bytes(x.after.peak_bytes),
            Cell::text(human::signed_bytes(x.delta_peak_bytes)),
            Cell::Bytes(x.before.leaked_bytes),
            Cell::Bytes(x.after.leaked_bytes),
            Cell::text(human::signed_bytes(x.delta_leaked_bytes)),
            Cell::text(human::signed(x.delta_temporary)),
        ]
    }));
    Table {
        caption: Some(format!(
            "Sites that changed ({} of {}), by the change in bytes at the peak",
            n.min(d.rows.len()),
            d.rows.len()
        )),
        header: [
            "site (innermost first)",
            "allocs A",
            "allocs B",
            "Δ allocs",
            "peak A",
            "peak B",
            "Δ peak",
            "leaked A",
            "leaked B",
            "Δ leaked",
            "Δ temporary",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect(),
        rows,
    }
}
