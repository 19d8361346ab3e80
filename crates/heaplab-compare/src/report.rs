//! `report.html` for a comparison: the papers' figures (002 Figures 4 to 6,
//! 000 Figure 1) drawn from the records, and the table of everything.

use crate::record::{bytes, Record};
use heaplab_report::{Bars, Cell, Report, Series, Table};

/// The distinct values of a field, in first-seen order.
fn distinct(records: &[Record], f: impl Fn(&Record) -> &str) -> Vec<String> {
    let mut v: Vec<String> = Vec::new();
    for r in records {
        let s = f(r);
        if !v.iter().any(|x| x == s) {
            v.push(s.to_string());
        }
    }
    v
}

/// A grouped bar chart of one field: a group per trace, a bar per allocator.
fn chart(records: &[Record], title: &str, y: &str, value: impl Fn(&Record) -> Option<f64>) -> Bars {
    let traces = distinct(records, |r| &r.trace);
    let names: Vec<String> = traces
        .iter()
        .map(|t| {
            records.iter().find(|r| &r.trace == t).map(|r| r.trace_name.clone()).unwrap_or_default()
        })
        .collect();
    let allocs = distinct(records, |r| &r.allocator);
    let series = allocs
        .iter()
        .map(|a| {
            let values = traces
                .iter()
                .map(|t| {
                    records.iter().find(|r| &r.trace == t && &r.allocator == a).and_then(&value)
                })
                .collect();
            Series::new(a, values)
        })
        .collect();
    Bars { title: title.into(), y_label: y.into(), groups: names, series, ..Bars::default() }
}

/// The page: what was compared, the figures, then every record.
pub fn html(records: &[Record], command: &str, notes: &[String]) -> String {
    let mut page = Report::new("heaplab compare: what each allocator costs");
    let traces = distinct(records, |r| &r.trace);
    let allocs = distinct(records, |r| &r.allocator);
    page.paragraph(&format!(
        "{} trace(s) × {} allocator(s), each cell replayed in its own process by heaplab-replay \
         with the allocator loaded by LD_PRELOAD. Command: {command}",
        traces.len(),
        allocs.len()
    ));
    for n in notes {
        page.paragraph(n);
    }
    let bad: Vec<&Record> = records.iter().filter(|r| r.status != "ok").collect();
    if !bad.is_empty() {
        page.heading("Allocators that did not run");
        page.table(&Table {
            caption: None,
            header: vec!["trace".into(), "allocator".into(), "status".into(), "why".into()],
            rows: bad
                .iter()
                .map(|r| {
                    vec![
                        Cell::text(&r.trace_name),
                        Cell::text(&r.allocator),
                        Cell::Missing(r.status.clone()),
                        Cell::text(r.error.clone().unwrap_or_default()),
                    ]
                })
                .collect(),
        });
    }

    page.heading("Speed: instructions per call (paper 002, Figure 4)");
    let mut m = chart(records, "Instructions per malloc", "instructions per call (log)", |r| {
        r.instr_per_malloc
    });
    m.log_y = true;
    page.figure(
        &m.to_svg(),
        "Figure 1a. Mean instructions per call of malloc, calloc and the memalign family, inclusive of \
         everything they call, counted by callgrind while the replay runs (they repeat exactly).",
    );
    let mut f = chart(records, "Instructions per free", "instructions per call (log)", |r| {
        r.instr_per_free
    });
    f.log_y = true;
    page.figure(&f.to_svg(), "Figure 1b. Mean instructions per call of free, inclusive.");
    let basis = records.iter().find_map(|r| r.share_basis.clone()).unwrap_or_default();
    let share = chart(records, "Allocator's share of instructions", "percent", |r| {
        r.alloc_instr_share.map(|s| s * 100.0)
    });
    page.figure(
        &share.to_svg(),
        &if basis == "program" {
            "Figure 2. Share of all instructions spent in malloc, free and realloc (paper 002 Figure 5, paper 000 \
             Figure 1): the allocator's instructions in the replay over those plus the program's own instructions \
             outside its allocator (TRACE.program.json, measured once with glibc)."
                .to_string()
        } else {
            "Figure 2. Share of the replay's instructions spent in the allocator (the rest is the replayer's loop). \
             With a TRACE.program.json beside the trace (heaplab compare --live --program-cost) the denominator is \
             the real program's instructions instead, as in paper 002 Figure 5."
                .to_string()
        },
    );

    page.heading("Space: footprint (paper 002, Figure 6)");
    let mut fp = chart(records, "Peak footprint normalized to firstfit", "× firstfit", |r| {
        r.footprint_vs_firstfit
    });
    fp.reference = Some((1.0, "firstfit".into()));
    fp.clip = Some(4.0);
    page.figure(
        &fp.to_svg(),
        "Figure 3. Maximum memory obtained from the OS, over firstfit's on the same trace. heaplab's allocators \
         report it exactly (heaplab_alloc_stats); glibc and the peers are measured as peak RSS growth in touch \
         mode, where every object's bytes are written. Bars above 4× are cut, with their value written on top.",
    );
    let util = chart(records, "Utilization", "peak live bytes / peak footprint (%)", |r| {
        r.utilization.map(|u| u * 100.0)
    });
    page.figure(
        &util.to_svg(),
        "Figure 4. Utilization: the most bytes the program had live, over the peak footprint.",
    );

    page.heading("Wall time");
    let mut w =
        chart(records, "Replay wall time relative to glibc", "× glibc", |r| r.wall_ratio_glibc);
    w.reference = Some((1.0, "glibc".into()));
    w.clip = Some(10.0);
    page.figure(
        &w.to_svg(),
        "Figure 5. Median wall time of the replay's timed region (decoding excluded) over glibc's, measured in \
         the same invocation, one run at a time. Bars above 10× are cut, with their value written on top.",
    );

    page.heading("Every measurement");
    page.table(&Table {
        caption: None,
        header: [
            "trace",
            "allocator",
            "instr/malloc",
            "instr/free",
            "instr/realloc",
            "share %",
            "wall ms",
            "× glibc",
            "footprint",
            "source",
            "× firstfit",
            "peak live",
            "util %",
            "int. frag %",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect(),
        rows: records
            .iter()
            .map(|r| {
                vec![
                    Cell::text(&r.trace_name),
                    Cell::text(&r.allocator),
                    Cell::opt(r.instr_per_malloc, 1),
                    Cell::opt(r.instr_per_free, 1),
                    Cell::opt(r.instr_per_realloc, 1),
                    Cell::opt(r.alloc_instr_share.map(|s| s * 100.0), 2),
                    Cell::opt(r.wall_s.map(|s| s * 1e3), 2),
                    Cell::opt(r.wall_ratio_glibc, 2),
                    r.peak_footprint_bytes
                        .map(|b| Cell::text(bytes(b)))
                        .unwrap_or(Cell::Missing("—".into())),
                    Cell::text(r.footprint_source.clone().unwrap_or_default()),
                    Cell::opt(r.footprint_vs_firstfit, 2),
                    r.peak_live_bytes
                        .map(|b| Cell::text(bytes(b)))
                        .unwrap_or(Cell::Missing("—".into())),
                    Cell::opt(r.utilization.map(|u| u * 100.0), 1),
                    Cell::opt(r.internal_fragmentation.map(|u| u * 100.0), 1),
                ]
            })
            .collect(),
    });
    page.to_html()
}
