//! Tables, figures and text of a study, for one program or several.
//!
//! Every table is built once, from the study's JSON (so that `--combine`
//! can put several programs' JSON files side by side, as the paper's tables
//! do), and rendered twice: as aligned text for the terminal and as HTML
//! with inline SVG figures (`heaplab-report`).

use heaplab_report::{Bars, Cell, LineSeries, Lines, Report, Series, Table};
use serde_json::Value;

/// One program's study, with the label its rows get.
pub struct Entry {
    pub label: String,
    pub study: Value,
}

fn f(v: &Value) -> Option<f64> {
    v.as_f64()
}
fn u(v: &Value) -> u64 {
    v.as_u64().unwrap_or(0)
}
fn s(v: &Value) -> String {
    v.as_str().unwrap_or("").to_string()
}
fn arr(v: &Value) -> &[Value] {
    v.as_array().map(|a| a.as_slice()).unwrap_or(&[])
}

const CLASSES: [&str; 4] = ["other", "SL", "HR", "nonHR"];

/// A short label for a program from its command line.
pub fn label_of(command: &str) -> String {
    let words: Vec<&str> = command.split_whitespace().collect();
    let prog = words.first().map(|w| w.rsplit('/').next().unwrap_or(w)).unwrap_or("?");
    let script = words
        .iter()
        .skip(1)
        .find(|w| !w.starts_with('-'))
        .map(|w| w.rsplit('/').next().unwrap_or(w));
    match script {
        Some(sc) if sc.contains('.') && !sc.ends_with(".txt") => format!("{prog} {sc}"),
        _ => prog.to_string(),
    }
}

/// Table 2 of the paper: the three runs of each program.
pub fn runs(e: &[Entry]) -> Table {
    let mut t = Table {
        caption: Some("Runs (paper 001 Table 2): training, threshold and test inputs".into()),
        header: [
            "program",
            "run",
            "instructions",
            "bytes",
            "objects",
            "loads",
            "stores",
            "max bytes",
            "max objects",
            "sites d1",
            "sites d3",
            "resized",
        ]
        .map(String::from)
        .to_vec(),
        rows: vec![],
    };
    for x in e {
        for r in arr(&x.study["runs"]) {
            t.rows.push(vec![
                Cell::text(&x.label),
                Cell::text(s(&r["role"])),
                Cell::Short(u(&r["instructions"]) as f64),
                Cell::Short(u(&r["total_bytes"]) as f64),
                Cell::Short(u(&r["total_objects"]) as f64),
                Cell::Short(u(&r["loads"]) as f64),
                Cell::Short(u(&r["stores"]) as f64),
                Cell::Short(u(&r["max_bytes"]) as f64),
                Cell::Short(u(&r["max_objects"]) as f64),
                Cell::Num(u(&r["sites_depth1"]) as f64, 0),
                Cell::Num(u(&r["sites_depth3"]) as f64, 0),
                Cell::Num(u(&r["reallocated"]) as f64, 0),
            ]);
        }
    }
    t
}

/// The thresholds chosen for each program.
pub fn thresholds(e: &[Entry]) -> Table {
    let mut t = Table {
        caption: Some("Thresholds (§3), with the test objects each class gets".into()),
        header: [
            "program",
            "SL max age",
            "HR min age",
            "HR min density",
            "nonHR max density",
            "how",
            "candidates",
            "test other",
            "test SL",
            "test HR",
            "test nonHR",
        ]
        .map(String::from)
        .to_vec(),
        rows: vec![],
    };
    for x in e {
        let c = &x.study["thresholds"];
        let th = &c["thresholds"];
        let n = arr(&c["search"]["evaluated"]).len();
        let mut row = vec![
            Cell::text(&x.label),
            Cell::Short(u(&th["sl_max_age"]) as f64),
            Cell::Short(u(&th["hr_min_age"]) as f64),
            Cell::Num(f(&th["hr_min_density"]).unwrap_or(0.0), 3),
            Cell::Num(f(&th["nhr_max_density"]).unwrap_or(0.0), 4),
            Cell::text(s(&c["how"])),
            Cell::Num(n as f64, 0),
        ];
        for i in 0..4 {
            row.push(Cell::Num(u(&x.study["test_classes"][i]) as f64, 0));
        }
        t.rows.push(row);
    }
    t
}

/// Precision and recall per class on the test input (objects).
pub fn accuracy(e: &[Entry]) -> Table {
    let mut header: Vec<String> =
        ["program", "predictor", "entries SL/HR/nonHR", "predicted other/SL/HR/nonHR"]
            .map(String::from)
            .to_vec();
    for c in CLASSES {
        header.push(format!("{c} P"));
        header.push(format!("{c} R"));
    }
    header.push("accuracy".into());
    header.push("accuracy (refs)".into());
    let mut t = Table {
        caption: Some(
            "Prediction on the test input: precision (P) and recall (R) per class, by objects; accuracy by objects and weighted by references"
                .into(),
        ),
        header,
        rows: vec![],
    };
    for x in e {
        for tr in arr(&x.study["trained"]) {
            let ent = &tr["entries"];
            let pr = &tr["predicted_objects"];
            let mut row = vec![
                Cell::text(&x.label),
                Cell::text(s(&tr["name"])),
                Cell::text(format!("{}/{}/{}", u(&ent[1]), u(&ent[2]), u(&ent[3]))),
                Cell::text(format!("{}/{}/{}/{}", u(&pr[0]), u(&pr[1]), u(&pr[2]), u(&pr[3]))),
            ];
            for sc in arr(&tr["accuracy"]["by_objects"]) {
                row.push(Cell::opt(f(&sc["precision"]), 3));
                row.push(Cell::opt(f(&sc["recall"]), 3));
            }
            row.push(Cell::opt(f(&tr["accuracy"]["accuracy_objects"]), 3));
            row.push(Cell::opt(f(&tr["accuracy"]["accuracy_refs"]), 3));
            t.rows.push(row);
        }
    }
    t
}

/// Table 3: 8 KB pages per segment, relative to DEFAULT's total.
pub fn table3(e: &[Entry]) -> Table {
    let mut t = Table {
        caption: Some(
            "Table 3: 8-kilobyte pages per segment, relative to DEFAULT's (absolute for DEFAULT; HR pages in parentheses)"
                .into(),
        ),
        header: ["program", "allocator", "DEFAULT pages", "other", "SL", "HR", "(HR abs.)", "nonHR", "total"]
            .map(String::from)
            .to_vec(),
        rows: vec![],
    };
    for x in e {
        let rows = arr(&x.study["table3"]);
        let def_total = rows.first().map(|r| u(&r["total"])).unwrap_or(0);
        for (i, r) in rows.iter().enumerate() {
            if i == 0 {
                t.rows.push(vec![
                    Cell::text(&x.label),
                    Cell::text(s(&r["name"])),
                    Cell::Num(def_total as f64, 0),
                    Cell::text(""),
                    Cell::text(""),
                    Cell::text(""),
                    Cell::text(""),
                    Cell::text(""),
                    Cell::Num(1.0, 3),
                ]);
                continue;
            }
            let rel = &r["relative"];
            t.rows.push(vec![
                Cell::text(&x.label),
                Cell::text(s(&r["name"])),
                Cell::text(""),
                Cell::opt(f(&rel[0]), 3),
                Cell::opt(f(&rel[1]), 3),
                Cell::opt(f(&rel[2]), 3),
                Cell::text(format!("({})", u(&r["absolute"][2]))),
                Cell::opt(f(&rel[3]), 3),
                Cell::opt(f(&r["total_relative"]), 3),
            ]);
        }
    }
    t
}

/// Table 4: references per 8 KB page per segment, relative to DEFAULT's.
pub fn table4(e: &[Entry]) -> Table {
    let mut t = Table {
        caption: Some(
            "Table 4: the program's references per 8-kilobyte page, per segment, relative to DEFAULT's (absolute for DEFAULT, in thousands)"
                .into(),
        ),
        header: ["program", "allocator", "DEFAULT (×10³)", "other", "SL", "HR", "nonHR"].map(String::from).to_vec(),
        rows: vec![],
    };
    for x in e {
        for (i, r) in arr(&x.study["table4"]).iter().enumerate() {
            if i == 0 {
                let a = f(&r["absolute"][0]).unwrap_or(0.0);
                t.rows.push(vec![
                    Cell::text(&x.label),
                    Cell::text(s(&r["name"])),
                    Cell::Num(a / 1000.0, 1),
                    Cell::text(""),
                    Cell::text(""),
                    Cell::text(""),
                    Cell::text(""),
                ]);
                continue;
            }
            let rel = &r["relative"];
            t.rows.push(vec![
                Cell::text(&x.label),
                Cell::text(s(&r["name"])),
                Cell::text(""),
                Cell::Num(f(&rel[0]).unwrap_or(0.0), 3),
                Cell::Num(f(&rel[1]).unwrap_or(0.0), 3),
                Cell::Num(f(&rel[2]).unwrap_or(0.0), 3),
                Cell::Num(f(&rel[3]).unwrap_or(0.0), 3),
            ]);
        }
    }
    t
}

fn value_at(points: &[Value], x: u64) -> Option<f64> {
    // the last point at or before x
    let mut best = None;
    for p in points {
        if u(&p[0]) <= x {
            best = f(&p[1]);
        } else {
            break;
        }
    }
    best
}

const SAMPLE_PAGES: [u64; 9] = [1, 2, 5, 10, 25, 50, 100, 250, 500];

/// Figure 3 as numbers: the relative cumulative references at a few page counts.
pub fn figure3_table(e: &[Entry]) -> Table {
    let mut header: Vec<String> = vec!["program".into(), "allocator".into()];
    header.extend(SAMPLE_PAGES.iter().map(|j| format!("{j} p.")));
    let mut t = Table {
        caption: Some(
            "Figure 3 (sampled): references to the j most referenced 8 KB pages, relative to DEFAULT's j most referenced"
                .into(),
        ),
        header,
        rows: vec![],
    };
    for x in e {
        for fig in arr(&x.study["figure3"]).iter().skip(1) {
            let pts = arr(&fig[1]);
            let mut row = vec![Cell::text(&x.label), Cell::text(s(&fig[0]))];
            for j in SAMPLE_PAGES {
                row.push(if j as usize <= pts.len() {
                    Cell::opt(value_at(pts, j), 3)
                } else {
                    Cell::text("")
                });
            }
            t.rows.push(row);
        }
    }
    t
}

/// Figure 4 as numbers: relative page faults at a few memory sizes.
pub fn figure4_table(e: &[Entry]) -> Table {
    let mut t = Table {
        caption: Some(
            "Figure 4 (sampled): page faults beyond the fill faults, per reference, relative to DEFAULT's, at memories of n 8 KB frames (n as a share of the pages DEFAULT touches), and the mean over every memory size up to DEFAULT's pages"
                .into(),
        ),
        header: ["program", "allocator", "DEFAULT pages", "5%", "10%", "25%", "50%", "75%", "90%", "mean"]
            .map(String::from)
            .to_vec(),
        rows: vec![],
    };
    for x in e {
        let curves = arr(&x.study["fault_curves"]);
        let dn = curves.first().map(|c| arr(&c[1]).len() as u64).unwrap_or(0);
        for fig in arr(&x.study["figure4"]).iter().skip(1) {
            let pts = arr(&fig[1]);
            let mut row =
                vec![Cell::text(&x.label), Cell::text(s(&fig[0])), Cell::Num(dn as f64, 0)];
            for q in [0.05, 0.10, 0.25, 0.5, 0.75, 0.9] {
                let m = ((dn as f64 * q).round() as u64).max(1);
                row.push(Cell::opt(value_at(pts, m), 3));
            }
            // the mean over every memory size up to DEFAULT's pages
            let within: Vec<f64> =
                pts.iter().filter(|p| u(&p[0]) <= dn).filter_map(|p| f(&p[1])).collect();
            row.push(Cell::opt(
                (!within.is_empty()).then(|| within.iter().sum::<f64>() / within.len() as f64),
                3,
            ));
            t.rows.push(row);
        }
    }
    t
}

/// Figure 6 as numbers: miss rates and their ratio to DEFAULT's.
pub fn figure6_table(e: &[Entry]) -> Table {
    let mut t = Table {
        caption: Some(
            "Figure 6: cache miss rates, all references (program and allocator) and the program's heap references alone, relative to DEFAULT"
                .into(),
        ),
        header: ["program", "allocator", "cache", "miss rate (all)", "/ DEFAULT", "miss rate (heap)", "/ DEFAULT"]
            .map(String::from)
            .to_vec(),
        rows: vec![],
    };
    for x in e {
        for r in arr(&x.study["figure6"]) {
            t.rows.push(vec![
                Cell::text(&x.label),
                Cell::text(s(&r["name"])),
                Cell::text(s(&r["config"])),
                Cell::Num(100.0 * f(&r["all_rate"]).unwrap_or(0.0), 3),
                Cell::Num(f(&r["all_relative"]).unwrap_or(0.0), 3),
                Cell::Num(100.0 * f(&r["heap_rate"]).unwrap_or(0.0), 3),
                Cell::Num(f(&r["heap_relative"]).unwrap_or(0.0), 3),
            ]);
        }
    }
    t
}

/// The run-time cost of prediction and the wall time of the real program.
pub fn runtime(e: &[Entry]) -> Table {
    let mut t = Table {
        caption: Some(
            "In the real program, on the test input: the run-time lookup (callgrind) and the wall time (median; output compared with glibc's)"
                .into(),
        ),
        header: [
            "program", "lookups", "instr./lookup", "frames/lookup", "predicted", "instr./malloc", "DEFAULT instr./malloc",
            "share of program", "glibc s", "DEFAULT s", "segmented s", "segmented / DEFAULT", "same output",
        ]
        .map(String::from)
        .to_vec(),
        rows: vec![],
    };
    for x in e {
        let l = &x.study["lookup"];
        let w = &x.study["wall"];
        let rows = arr(&w["rows"]);
        let med = |i: usize| rows.get(i).and_then(|r| f(&r["median"]));
        let same = rows.iter().all(|r| r["same_output"].as_bool().unwrap_or(false));
        let mut row = vec![Cell::text(&x.label)];
        if l.is_null() {
            row.extend((0..7).map(|_| Cell::Missing("—".into())));
        } else {
            row.push(Cell::Short(u(&l["lookups"]) as f64));
            row.push(Cell::Num(f(&l["per_lookup"]).unwrap_or(0.0), 0));
            row.push(Cell::Num(f(&l["frames_per_lookup"]).unwrap_or(0.0), 1));
            row.push(Cell::Short(u(&l["runtime_predicted"]) as f64));
            row.push(Cell::Num(f(&l["per_malloc"]).unwrap_or(0.0), 0));
            row.push(Cell::opt(f(&l["default_per_malloc"]), 0));
            row.push(Cell::Num(100.0 * f(&l["share_of_program"]).unwrap_or(0.0), 2));
        }
        if w.is_null() {
            row.extend((0..5).map(|_| Cell::Missing("—".into())));
        } else {
            row.push(Cell::opt(med(0), 3));
            row.push(Cell::opt(med(1), 3));
            row.push(Cell::opt(med(2), 3));
            row.push(Cell::opt(rows.get(2).and_then(|r| f(&r["vs_default"])), 3));
            row.push(Cell::text(if same { "yes" } else { "NO" }));
        }
        t.rows.push(row);
    }
    t
}

fn cell_text(c: &Cell) -> String {
    match c {
        Cell::Text(s) => s.clone(),
        Cell::Num(v, d) => format!("{v:.*}", *d),
        Cell::Short(v) => short(*v),
        Cell::Missing(s) => s.clone(),
        c => c.shown(),
    }
}

/// 1234567 as 1.23M.
pub fn short(v: f64) -> String {
    let a = v.abs();
    if a >= 1e9 {
        format!("{:.2}G", v / 1e9)
    } else if a >= 1e6 {
        format!("{:.2}M", v / 1e6)
    } else if a >= 1e4 {
        format!("{:.1}K", v / 1e3)
    } else {
        format!("{v:.0}")
    }
}

/// A table as aligned text.
pub fn text(t: &Table) -> String {
    let cells: Vec<Vec<String>> =
        t.rows.iter().map(|r| r.iter().map(cell_text).collect()).collect();
    let n = t.header.len();
    let mut w: Vec<usize> = t.header.iter().map(|h| h.chars().count()).collect();
    for r in &cells {
        for (i, c) in r.iter().enumerate().take(n) {
            w[i] = w[i].max(c.chars().count());
        }
    }
    let mut o = String::new();
    if let Some(c) = &t.caption {
        o.push_str(c);
        o.push('\n');
    }
    let line = |cols: &[String], o: &mut String| {
        for (i, c) in cols.iter().enumerate().take(n) {
            let pad = w[i] - c.chars().count();
            if i < 2 {
                o.push_str(c);
                o.push_str(&" ".repeat(pad));
            } else {
                o.push_str(&" ".repeat(pad));
                o.push_str(c);
            }
            o.push_str("  ");
        }
        o.truncate(o.trim_end().len());
        o.push('\n');
    };
    line(&t.header, &mut o);
    for r in &cells {
        line(r, &mut o);
    }
    o
}

/// Every table, as text.
pub fn text_report(e: &[Entry]) -> String {
    let mut o = String::new();
    for t in [
        runs(e),
        thresholds(e),
        accuracy(e),
        table3(e),
        table4(e),
        figure3_table(e),
        figure4_table(e),
        figure6_table(e),
        runtime(e),
    ] {
        o.push_str(&text(&t));
        o.push('\n');
    }
    for x in e {
        for n in arr(&x.study["notes"]) {
            o.push_str(&format!("note ({}): {}\n", x.label, s(n)));
        }
    }
    o
}

/// One line of a stored figure, `[name, [[x, ratio], ...]]` (a missing ratio
/// reads 0), thinned to at most 400 points (`log`: evenly on a log x axis).
fn ratio_series(fig: &Value, log: bool) -> LineSeries {
    let points = arr(&fig[1]).iter().map(|p| (u(&p[0]) as f64, f(&p[1]).unwrap_or(0.0))).collect();
    LineSeries::new(&s(&fig[0]), thin(points, 400, log))
}

/// At most about `max` of the points, spread evenly along x (on a log scale
/// when `log`), the first and the last kept: a figure needs no more.
fn thin(points: Vec<(f64, f64)>, max: usize, log: bool) -> Vec<(f64, f64)> {
    if points.len() <= max {
        return points;
    }
    let pos = |x: f64| if log { x.max(1e-9).ln() } else { x };
    let (lo, hi) = (pos(points[0].0), pos(points[points.len() - 1].0));
    let mut out = Vec::with_capacity(max + 1);
    let mut next = lo;
    let step = (hi - lo) / max as f64;
    for (i, p) in points.iter().enumerate() {
        if pos(p.0) >= next || i + 1 == points.len() {
            out.push(*p);
            next = pos(p.0) + step;
        }
    }
    out
}

/// The HTML page: the tables, and the figures drawn.
pub fn html(e: &[Entry], title: &str, command: &str) -> String {
    let mut r = Report::new(title);
    r.paragraph(&format!(
        "Seidl and Zorn, Segregating Heap Objects by Reference Behavior and Lifetime (ASPLOS 1998), reproduced by heaplab: trained on one input, thresholds chosen on a second, measured on a third. Command: {command}"
    ));
    r.heading("The runs");
    r.table(&runs(e));
    r.table(&thresholds(e));
    r.heading("Prediction");
    r.table(&accuracy(e));
    r.heading("Placing objects into segments (§5.1)");
    r.table(&table3(e));
    r.table(&table4(e));
    r.heading("Virtual memory (§5.2)");
    for x in e {
        let mut l = Lines {
            title: format!("{}: cumulative references relative to DEFAULT", x.label),
            x_label: "most referenced 8 KB pages".into(),
            y_label: "references / DEFAULT's".into(),
            log_x: true,
            ..Lines::default()
        };
        for fig in arr(&x.study["figure3"]) {
            l.series.push(ratio_series(fig, true));
        }
        r.figure(&l.to_svg(), &format!("Figure 3 ({}): the references to the j most referenced pages, relative to DEFAULT's j most referenced.", x.label));
    }
    r.table(&figure3_table(e));
    for x in e {
        let mut l = Lines {
            title: format!("{}: page faults relative to DEFAULT", x.label),
            x_label: "memory (8 KB frames)".into(),
            y_label: "faults / DEFAULT's".into(),
            ..Lines::default()
        };
        for fig in arr(&x.study["figure4"]) {
            l.series.push(ratio_series(fig, false));
        }
        r.figure(&l.to_svg(), &format!("Figure 4 ({}): page faults beyond the fill faults, per reference, relative to DEFAULT's; after DEFAULT's drop-down, relative to its last non-zero value.", x.label));
        let mut a = Lines {
            title: format!("{}: page faults", x.label),
            x_label: "memory (8 KB frames)".into(),
            y_label: "faults".into(),
            log_y: true,
            ..Lines::default()
        };
        for c in arr(&x.study["fault_curves"]) {
            a.series.push(LineSeries::new(
                &s(&c[0]),
                thin(
                    arr(&c[1]).iter().map(|p| (u(&p[0]) as f64, u(&p[1]) as f64)).collect(),
                    400,
                    false,
                ),
            ));
        }
        r.figure(
            &a.to_svg(),
            &format!(
                "Page faults against memory size ({}), absolute, fill faults included.",
                x.label
            ),
        );
    }
    r.table(&figure4_table(e));
    r.heading("Caches (§5.4)");
    let configs: Vec<String> = e
        .first()
        .map(|x| {
            let mut v: Vec<String> =
                arr(&x.study["figure6"]).iter().map(|r| s(&r["config"])).collect();
            v.dedup();
            let mut seen = Vec::new();
            v.retain(|c| {
                let new = !seen.contains(c);
                seen.push(c.clone());
                new
            });
            v
        })
        .unwrap_or_default();
    for cfg in &configs {
        let names: Vec<String> = {
            let mut v: Vec<String> = Vec::new();
            for x in e {
                for r in arr(&x.study["figure6"]) {
                    let n = s(&r["name"]);
                    if n != "DEFAULT" && !v.contains(&n) {
                        v.push(n);
                    }
                }
            }
            v
        };
        let series = names
            .iter()
            .map(|n| {
                Series::new(
                    n,
                    e.iter()
                        .map(|x| {
                            arr(&x.study["figure6"])
                                .iter()
                                .find(|r| s(&r["name"]) == *n && s(&r["config"]) == *cfg)
                                .and_then(|r| f(&r["all_relative"]))
                        })
                        .collect(),
                )
            })
            .collect();
        let b = Bars {
            title: format!("{cfg}: miss rate relative to DEFAULT"),
            y_label: "misses / DEFAULT's".into(),
            groups: e.iter().map(|x| x.label.clone()).collect(),
            series,
            reference: Some((1.0, "DEFAULT".into())),
            ..Bars::default()
        };
        r.figure(
            &b.to_svg(),
            &format!("Figure 6 ({cfg}, all references): miss rate relative to DEFAULT."),
        );
    }
    r.table(&figure6_table(e));
    r.heading("The cost of predicting at run time, and the real program");
    r.table(&runtime(e));
    for x in e {
        for n in arr(&x.study["notes"]) {
            r.paragraph(&format!("Note ({}): {}", x.label, s(n)));
        }
    }
    r.to_html()
}
