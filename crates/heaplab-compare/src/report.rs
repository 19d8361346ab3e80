//! `report.html` for a comparison: the papers' figures (002 Figures 4 to 6,
//! 000 Figure 1) drawn from the records, and the table of everything.
//!
//! Every bar chart numbers its allocators (legend and bar tops) and hatches
//! those past the palette's nine colours (heaplab-report), so sixteen stay
//! apart without colour; footprints measured from RSS (glibc and the peers)
//! are drawn outlined, apart from the zoo's exact ones; wall times carry
//! whiskers from the fastest to the slowest of the repeated runs.

use crate::record::Record;
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

/// Sets each bar's error bar and approximate flag from its record.
fn decorate(
    b: &mut Bars,
    records: &[Record],
    range: impl Fn(&Record) -> Option<(f64, f64)>,
    approximate: impl Fn(&Record) -> bool,
) {
    let traces = distinct(records, |r| &r.trace);
    for s in &mut b.series {
        let cell = |t: &String| records.iter().find(|r| &r.trace == t && r.allocator == s.name);
        s.ranges = traces.iter().map(|t| cell(t).and_then(&range)).collect();
        s.approximate = traces.iter().map(|t| cell(t).is_some_and(&approximate)).collect();
    }
}

/// Whether a record's footprint is an estimate (RSS growth), not the
/// allocator's own exact accounting.
pub fn approximate_footprint(r: &Record) -> bool {
    r.footprint_source.as_deref().is_some_and(|s| s != "heaplab_alloc_stats")
}

/// The fastest and the slowest of a record's timing runs, relative to
/// glibc's median on the same trace (the unit of `wall_ratio_glibc`).
pub fn wall_range_vs_glibc(r: &Record) -> Option<(f64, f64)> {
    let (ratio, median) = (r.wall_ratio_glibc?, r.wall_s?);
    if r.wall_runs_s.len() < 2 || median <= 0.0 {
        return None;
    }
    let lo = r.wall_runs_s.iter().copied().fold(f64::INFINITY, f64::min);
    let hi = r.wall_runs_s.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    Some((lo * ratio / median, hi * ratio / median))
}

/// The page: what was compared, the figures, then every record, then
/// where it came from (`provenance`: (label, value) rows).
pub fn html(
    records: &[Record],
    command: &str,
    notes: &[String],
    provenance: &[(String, String)],
) -> String {
    let mut page = Report::new("heaplab compare: what each allocator costs");
    page.sortable_tables();
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
    let counter =
        records.iter().find_map(|r| r.counter.clone()).unwrap_or_else(|| "vgcount".into());
    page.figure(
        &m.to_svg(),
        &format!(
            "Figure 1a. Mean instructions per call of malloc, calloc and the memalign family, inclusive of \
             everything they call, counted ({counter}) while the replay runs (they repeat exactly)."
        ),
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
    decorate(&mut fp, records, |_| None, approximate_footprint);
    fp.approximate_label = "outlined: approximate (RSS growth, touch mode)".into();
    page.figure(
        &fp.to_svg(),
        "Figure 3. Maximum memory obtained from the OS, over firstfit's on the same trace. heaplab's allocators \
         report it exactly (heaplab_alloc_stats); glibc and the peers are measured as peak RSS growth in touch \
         mode, where every object's bytes are written: those bars are outlined and pale, apart from the exact ones. \
         Bars above 4× are cut, with their value written on top.",
    );
    let mut util = chart(records, "Utilization", "peak live bytes / peak footprint (%)", |r| {
        r.utilization.map(|u| u * 100.0)
    });
    decorate(&mut util, records, |_| None, approximate_footprint);
    util.approximate_label = "outlined: approximate (RSS growth, touch mode)".into();
    page.figure(
        &util.to_svg(),
        "Figure 4. Utilization: the most bytes the program had live, over the peak footprint (outlined: \
         over an RSS-based footprint).",
    );

    page.heading("Wall time");
    let mut w =
        chart(records, "Replay wall time relative to glibc", "× glibc", |r| r.wall_ratio_glibc);
    w.reference = Some((1.0, "glibc".into()));
    w.clip = Some(10.0);
    decorate(&mut w, records, wall_range_vs_glibc, |_| false);
    w.range_label = "whiskers: fastest to slowest run".into();
    page.figure(
        &w.to_svg(),
        "Figure 5. Median wall time of the replay's timed region (decoding excluded) over glibc's, measured in \
         the same invocation, one run at a time; the whiskers span the fastest to the slowest of the repeated runs \
         (--repeat), over the same glibc median. Bars above 10× are cut, with their value written on top.",
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
            "fastest ms",
            "slowest ms",
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
                    Cell::opt(r.wall_runs_s.iter().copied().reduce(f64::min).map(|s| s * 1e3), 2),
                    Cell::opt(r.wall_runs_s.iter().copied().reduce(f64::max).map(|s| s * 1e3), 2),
                    Cell::opt(r.wall_ratio_glibc, 2),
                    r.peak_footprint_bytes.map(Cell::Bytes).unwrap_or(Cell::Missing("—".into())),
                    Cell::text(r.footprint_source.clone().unwrap_or_default()),
                    Cell::opt(r.footprint_vs_firstfit, 2),
                    r.peak_live_bytes.map(Cell::Bytes).unwrap_or(Cell::Missing("—".into())),
                    Cell::opt(r.utilization.map(|u| u * 100.0), 1),
                    Cell::opt(r.internal_fragmentation.map(|u| u * 100.0), 1),
                ]
            })
            .collect(),
    });
    page.heading("Provenance");
    page.table(&Table::key_values("Where these figures came from", provenance));
    page.to_html()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// 16 allocators (12 of the zoo, exact; 4 from RSS) on two traces, each
    /// timed three times.
    fn records() -> Vec<Record> {
        let mut v = Vec::new();
        for t in 0..2 {
            let glibc_median = 0.010 * (t + 1) as f64;
            for a in 0..16 {
                let peer = a >= 12;
                let median = glibc_median * (1.0 + a as f64 / 8.0);
                let runs = vec![median * 0.9, median, median * (1.2 + a as f64 / 100.0)];
                v.push(Record {
                    trace: format!("/t/{t}.hltrace"),
                    trace_name: format!("trace{t}"),
                    allocator: format!("alloc{a:02}"),
                    status: "ok".into(),
                    instr_per_malloc: Some(50.0 + a as f64),
                    instr_per_free: Some(20.0 + a as f64),
                    alloc_instr_share: Some(0.1),
                    wall_s: Some(median),
                    wall_runs_s: runs,
                    wall_ratio_glibc: Some(median / glibc_median),
                    peak_footprint_bytes: Some(1 << 20),
                    footprint_source: Some(
                        if peer { "rss_touch" } else { "heaplab_alloc_stats" }.into(),
                    ),
                    footprint_vs_firstfit: Some(1.0 + a as f64 / 10.0),
                    peak_live_bytes: Some(1 << 19),
                    utilization: Some(0.5),
                    ..Record::default()
                });
            }
        }
        v
    }

    fn attr(tag: &str, name: &str) -> Option<String> {
        let k = format!(" {name}=\"");
        let i = tag.find(&k)? + k.len();
        Some(tag[i..].split('"').next()?.to_string())
    }

    /// The tags `<NAME ...>` (up to the first `>`) whose text has `needle`.
    fn tags<'a>(html: &'a str, name: &str, needle: &str) -> Vec<&'a str> {
        html.split(&format!("<{name} "))
            .skip(1)
            .map(|t| &t[..t.find('>').unwrap_or(t.len())])
            .filter(|t| t.contains(needle))
            .collect()
    }

    #[test]
    fn error_bars_span_the_runs_and_approximate_footprints_are_outlined() {
        let rs = records();
        let html = html(&rs, "heaplab compare", &[], &[("machine".into(), "test".into())]);
        // one error bar per record, spanning its fastest to slowest run over glibc's median
        let bars = tags(&html, "path", "class=\"errbar\"");
        assert_eq!(bars.len(), rs.len());
        for r in &rs {
            let glibc = rs
                .iter()
                .find(|g| g.trace == r.trace && g.allocator == "alloc00")
                .and_then(|g| g.wall_s)
                .unwrap();
            let lo = r.wall_runs_s.iter().copied().fold(f64::INFINITY, f64::min) / glibc;
            let hi = r.wall_runs_s.iter().copied().fold(0.0, f64::max) / glibc;
            let found = bars.iter().any(|b| {
                let (l, h): (f64, f64) = (
                    attr(b, "data-lo").unwrap().parse().unwrap(),
                    attr(b, "data-hi").unwrap().parse().unwrap(),
                );
                (l - lo).abs() < 1e-9 && (h - hi).abs() < 1e-9
            });
            assert!(found, "no error bar {lo}..{hi} for {} on {}", r.allocator, r.trace_name);
        }
        // whiskers go up the page from lo to hi: M x y_lo ... V y_hi with y_hi < y_lo
        for b in &bars {
            let d = attr(b, "d").unwrap();
            let y_lo: f64 =
                d.split_whitespace().nth(1).unwrap().split('h').next().unwrap().parse().unwrap();
            let y_hi: f64 =
                d.split('V').nth(1).unwrap().split('M').next().unwrap().parse().unwrap();
            assert!(y_hi < y_lo, "{d}");
        }
        // approximate footprints: 4 peers × 2 traces in each of the two space figures,
        // plus their legend keys; the rest exact
        let approx = tags(&html, "rect", "class=\"approximate\"");
        assert_eq!(approx.len(), 2 * (4 * 2 + 1), "{approx:#?}");
        assert!(approx.iter().all(|t| t.contains("stroke-dasharray")));
        assert_eq!(html.matches("outlined: approximate (RSS growth, touch mode)").count(), 2);
        // sixteen different fills in a figure: nine colours, then hatched
        let first = &html[..html.find("Instructions per free").unwrap()];
        let fills: std::collections::BTreeSet<String> =
            tags(first, "rect", "class=\"exact\"").iter().filter_map(|t| attr(t, "fill")).collect();
        assert_eq!(fills.len(), 16, "{fills:?}");
        assert_eq!(fills.iter().filter(|f| f.starts_with("url(#")).count(), 7);
        // direct labels: every bar numbered, the legend says which number is which
        assert!(first.contains(">16 alloc15</text>"));
        assert_eq!(tags(first, "text", "class=\"barlabel\"").len(), 32);
        // the tables sort
        assert!(html.contains("aria-sort"));
    }
}
