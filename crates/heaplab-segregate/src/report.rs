//! Tables, figures and text of a study, for one program or several.
//!
//! Every table is built once, from the typed [`Study`] (so that `--combine`
//! can put several programs' JSON files side by side, as the paper's tables
//! do: a file is read back into the same struct, and a missing or misspelt
//! field is an error there, not a 0 here), and rendered twice: as aligned
//! text for the terminal and as HTML with inline SVG figures
//! (`heaplab-report`).

use crate::classes::Class;
use crate::paper;
use crate::runtime::{RunCost, SegReport};
use crate::study::{Curve, Study, Verdict};
use heaplab_report::{Bars, Cell, LineSeries, Lines, Report, Series, Table};

/// One program's study, with the label its rows get.
pub struct Entry {
    pub label: String,
    pub study: Study,
}

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

fn table(caption: &str, header: &[&str]) -> Table {
    Table {
        caption: Some(caption.to_string()),
        header: header.iter().map(|h| h.to_string()).collect(),
        rows: vec![],
    }
}

fn count(v: u64) -> Cell {
    Cell::Short(v as f64)
}

fn int(v: u64) -> Cell {
    Cell::Num(v as f64, 0)
}

fn pct(v: Option<f64>) -> Cell {
    Cell::opt(v.map(|x| 100.0 * x), 1)
}

/// Table 2 of the paper: the three runs of each program.
pub fn runs(e: &[Entry]) -> Table {
    let mut t = table(
        "Runs (paper 001 Table 2): training, threshold and test inputs",
        &[
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
        ],
    );
    for x in e {
        for r in &x.study.runs {
            t.rows.push(vec![
                Cell::text(&x.label),
                Cell::text(&r.role),
                count(r.instructions),
                count(r.total_bytes),
                count(r.total_objects),
                count(r.loads),
                count(r.stores),
                count(r.max_bytes),
                count(r.max_objects),
                int(r.sites_depth1 as u64),
                int(r.sites_depth3 as u64),
                int(r.reallocated),
            ]);
        }
    }
    t
}

/// The thresholds chosen for each program.
pub fn thresholds(e: &[Entry]) -> Table {
    let mut t = table(
        "Thresholds (§3), with the test objects each class gets",
        &[
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
        ],
    );
    for x in e {
        let c = &x.study.thresholds;
        let th = &c.thresholds;
        let mut row = vec![
            Cell::text(&x.label),
            count(th.sl_max_age),
            count(th.hr_min_age),
            Cell::Num(th.hr_min_density, 3),
            Cell::Num(th.nhr_max_density, 4),
            Cell::text(&c.how),
            int(c.search.as_ref().map_or(0, |s| s.evaluated.len() as u64)),
        ];
        row.extend(x.study.test_classes.iter().map(|&n| int(n)));
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
    for c in Class::ALL {
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
        for tr in &x.study.trained {
            let (ent, pr) = (&tr.entries, &tr.predicted_objects);
            let mut row = vec![
                Cell::text(&x.label),
                Cell::text(&tr.name),
                Cell::text(format!("{}/{}/{}", ent[1], ent[2], ent[3])),
                Cell::text(format!("{}/{}/{}/{}", pr[0], pr[1], pr[2], pr[3])),
            ];
            for sc in &tr.accuracy.by_objects {
                row.push(Cell::opt(sc.precision, 3));
                row.push(Cell::opt(sc.recall, 3));
            }
            row.push(Cell::Num(tr.accuracy.accuracy_objects, 3));
            row.push(Cell::Num(tr.accuracy.accuracy_refs, 3));
            t.rows.push(row);
        }
    }
    t
}

/// Table 3: 8 KB pages per segment, relative to DEFAULT's total.
pub fn table3(e: &[Entry]) -> Table {
    let mut t = table(
        "Table 3: 8-kilobyte pages per segment, relative to DEFAULT's (absolute for DEFAULT; HR pages in parentheses)",
        &["program", "allocator", "DEFAULT pages", "other", "SL", "HR", "(HR abs.)", "nonHR", "total"],
    );
    for x in e {
        let rows = &x.study.table3;
        let def_total = rows.first().map_or(0, |r| r.total);
        for (i, r) in rows.iter().enumerate() {
            if i == 0 {
                let mut row = vec![Cell::text(&x.label), Cell::text(&r.name), int(def_total)];
                row.extend((0..5).map(|_| Cell::text("")));
                row.push(Cell::Num(1.0, 3));
                t.rows.push(row);
                continue;
            }
            t.rows.push(vec![
                Cell::text(&x.label),
                Cell::text(&r.name),
                Cell::text(""),
                Cell::Num(r.relative[0], 3),
                Cell::Num(r.relative[1], 3),
                Cell::Num(r.relative[2], 3),
                Cell::text(format!("({})", r.absolute[2])),
                Cell::Num(r.relative[3], 3),
                Cell::Num(r.total_relative, 3),
            ]);
        }
    }
    t
}

/// Table 4: references per 8 KB page per segment, relative to DEFAULT's.
pub fn table4(e: &[Entry]) -> Table {
    let mut t = table(
        "Table 4: the program's references per 8-kilobyte page, per segment, relative to DEFAULT's (absolute for DEFAULT, in thousands; — where a segment has no page)",
        &["program", "allocator", "DEFAULT (×10³)", "other", "SL", "HR", "nonHR"],
    );
    for x in e {
        for (i, r) in x.study.table4.iter().enumerate() {
            if i == 0 {
                let mut row = vec![
                    Cell::text(&x.label),
                    Cell::text(&r.name),
                    Cell::Num(r.absolute[0].unwrap_or(0.0) / 1000.0, 1),
                ];
                row.extend((0..4).map(|_| Cell::text("")));
                t.rows.push(row);
                continue;
            }
            let mut row = vec![Cell::text(&x.label), Cell::text(&r.name), Cell::text("")];
            row.extend(r.relative.iter().map(|v| Cell::opt(*v, 3)));
            t.rows.push(row);
        }
    }
    t
}

/// The last point of a curve at or before x.
fn value_at(points: &[(u64, f64)], x: u64) -> Option<f64> {
    points.iter().take_while(|p| p.0 <= x).last().map(|p| p.1)
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
        for fig in x.study.figure3.iter().skip(1) {
            let mut row = vec![Cell::text(&x.label), Cell::text(&fig.name)];
            for j in SAMPLE_PAGES {
                row.push(if j as usize <= fig.points.len() {
                    Cell::opt(value_at(&fig.points, j), 3)
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
    let mut t = table(
        "Figure 4 (sampled): page faults beyond the fill faults, per reference, relative to DEFAULT's, at memories of n 8 KB frames (n as a share of the pages DEFAULT touches), and the mean over every memory size up to DEFAULT's pages",
        &["program", "allocator", "DEFAULT pages", "5%", "10%", "25%", "50%", "75%", "90%", "mean"],
    );
    for x in e {
        let dn = x.study.default_pages();
        for fig in x.study.figure4.iter().skip(1) {
            let mut row = vec![Cell::text(&x.label), Cell::text(&fig.name), int(dn)];
            for q in [0.05, 0.10, 0.25, 0.5, 0.75, 0.9] {
                let m = ((dn as f64 * q).round() as u64).max(1);
                row.push(Cell::opt(value_at(&fig.points, m), 3));
            }
            row.push(Cell::opt(x.study.mean_faults(&fig.name), 3));
            t.rows.push(row);
        }
    }
    t
}

/// Figure 6 as numbers: miss rates and their ratio to DEFAULT's.
pub fn figure6_table(e: &[Entry]) -> Table {
    let mut t = table(
        "Figure 6: cache miss rates, all references (program and allocator) and the program's heap references alone, relative to DEFAULT",
        &["program", "allocator", "cache", "miss rate (all) %", "/ DEFAULT", "miss rate (heap) %", "/ DEFAULT"],
    );
    for x in e {
        for r in &x.study.figure6 {
            t.rows.push(vec![
                Cell::text(&x.label),
                Cell::text(&r.name),
                Cell::text(&r.config),
                Cell::Num(100.0 * r.all_rate, 3),
                Cell::Num(r.all_relative, 3),
                Cell::Num(100.0 * r.heap_rate, 3),
                Cell::Num(r.heap_relative, 3),
            ]);
        }
    }
    t
}

fn levels_shares(levels: &[u64], total: u64) -> (Option<f64>, Option<f64>, Option<f64>) {
    let share = |n: u64| (total > 0).then(|| n as f64 / total as f64);
    let l0 = levels.first().copied().unwrap_or(0);
    let l1 = levels.get(1).copied().unwrap_or(0);
    let deeper: u64 = levels.iter().skip(2).sum();
    (share(l0), share(l1), share(deeper))
}

/// The tree each predictor carries, and where the test trace's allocations
/// are decided with it.
pub fn tree_table(e: &[Entry]) -> Table {
    let mut t = table(
        "The predictors as trees of call-site prefixes: return addresses that decide alone and that walk further, and where the test trace's allocations are decided (the return address alone, one more frame, more), offline",
        &["program", "predictor", "nodes", "decide alone", "walk", "return address %", "+1 frame %", "deeper %", "no node %"],
    );
    for x in e {
        for tr in &x.study.trained {
            let Some(tree) = &tr.predictor.tree else { continue };
            let lv = tr.levels.clone().unwrap_or_default();
            let total: u64 = lv.iter().sum();
            let (a, b, c) = levels_shares(&lv, total);
            let nodes: u64 = tree.levels.iter().map(|l| l.leaves + l.walks).sum();
            let first = tree.levels.first().copied().unwrap_or_default();
            t.rows.push(vec![
                Cell::text(&x.label),
                Cell::text(&tr.name),
                int(nodes),
                int(first.leaves),
                int(first.walks),
                pct(a),
                pct(b),
                pct(c),
                pct(tr.unknown.map(|u| u as f64 / total.max(1) as f64)),
            ]);
        }
    }
    t
}

fn report_of(r: &RunCost) -> Option<&SegReport> {
    r.report.as_ref()
}

/// The real program under callgrind: the identification and the allocator.
pub fn identification(e: &[Entry]) -> Table {
    let mut t = table(
        "In the real program (callgrind): the identification of the call site per new object (hl_seg_identify, inclusive), where it was decided, and the allocator's instructions per malloc and per free against DEFAULT's",
        &[
            "program", "allocator", "new objects", "identify instr.", "return address %", "+1 frame %",
            "deeper %", "no node %", "frames/walk", "instr./malloc", "/ DEFAULT", "instr./free", "from cache %",
            "identify share %",
        ],
    );
    for x in e {
        let Some(c) = &x.study.costs else { continue };
        let d = c.default.per_malloc;
        for r in std::iter::once(&c.default).chain(&c.predictors) {
            let rep = report_of(r);
            let calls = rep.map_or(0, |r| r.runtime_lookups);
            let (a, b, cc) = levels_shares(rep.map_or(&[][..], |r| &r.levels[..]), calls);
            let walks: u64 = rep.map_or(0, |r| r.levels.iter().skip(1).sum());
            let ident = r.identify_per_object.is_some();
            let opt = |v: Option<f64>| if ident { pct(v) } else { Cell::text("") };
            t.rows.push(vec![
                Cell::text(&x.label),
                Cell::text(&r.name),
                count(rep.map_or(0, |r| r.segments.iter().map(|s| s.objects).sum())),
                Cell::opt(r.identify_per_object, 1),
                opt(a),
                opt(b),
                opt(cc),
                opt(rep.map(|r| r.unknown as f64 / r.runtime_lookups.max(1) as f64)),
                if ident {
                    Cell::opt(
                        (walks > 0)
                            .then(|| rep.map_or(0, |r| r.runtime_frames) as f64 / walks as f64),
                        1,
                    )
                } else {
                    Cell::text("")
                },
                Cell::Num(r.per_malloc, 1),
                Cell::opt((d > 0.0).then(|| r.per_malloc / d), 2),
                Cell::Num(r.per_free, 1),
                pct(rep.map(|p| {
                    p.cache_mallocs as f64
                        / p.segments.iter().map(|s| s.objects).sum::<u64>().max(1) as f64
                })),
                Cell::Num(100.0 * r.identify_share, 2),
            ]);
        }
    }
    t
}

/// The real program's wall time with each allocator.
pub fn wall(e: &[Entry]) -> Table {
    let mut t = table(
        "In the real program: wall time (median of interleaved runs; the load average before and after, the machine may be shared), ratios to glibc, mimalloc and DEFAULT, and whether every run printed what glibc's did",
        &["program", "allocator", "median s", "/ glibc", "/ mimalloc", "/ DEFAULT", "same output", "load"],
    );
    for x in e {
        let Some(w) = &x.study.wall else { continue };
        let load = format!(
            "{} → {}",
            w.load_before.as_deref().unwrap_or("?"),
            w.load_after.as_deref().unwrap_or("?")
        );
        for r in &w.rows {
            t.rows.push(vec![
                Cell::text(&x.label),
                Cell::text(&r.name),
                Cell::Num(r.median, 3),
                Cell::Num(r.vs_glibc, 3),
                Cell::opt(r.vs_mimalloc, 3),
                Cell::opt(r.vs_default, 3),
                Cell::text(if r.same_output { "yes" } else { "NO" }),
                Cell::text(&load),
            ]);
        }
    }
    t
}

fn verdict_row(label: &str, v: &Verdict) -> Vec<Cell> {
    vec![
        Cell::text(label),
        Cell::text(v.best.clone().unwrap_or_default()),
        Cell::opt(v.faults_mean, 3),
        Cell::opt(v.pages_relative, 3),
        Cell::opt(v.identify_per_object, 1),
        pct(v.level0_share),
        Cell::opt(v.per_malloc_vs_default, 2),
        Cell::opt(v.wall_vs_default, 3),
        Cell::opt(v.wall_vs_glibc, 3),
        Cell::opt(v.wall_vs_mimalloc, 3),
        Cell::text(if v.pays { "yes" } else { "no" }),
        Cell::text(&v.why),
    ]
}

/// What pays, program by program, as the paper's §5.3 goes program by program.
pub fn verdicts(e: &[Entry]) -> Table {
    let mut t = table(
        "What pays: the predictor with the fewest page faults (Figure 4's mean), or, where it does not pay, the first that does in order of faults (judged on more rounds), and what it costs in the real program; segregation is recommended only where the whole program gets faster, or smaller without getting slower (see docs/segregate.md)",
        &[
            "program", "best", "faults / DEFAULT", "pages / DEFAULT", "identify instr.", "return address %",
            "instr./malloc / DEFAULT", "wall / DEFAULT", "/ glibc", "/ mimalloc", "recommend", "why",
        ],
    );
    for x in e {
        if let Some(v) = &x.study.verdict {
            t.rows.push(verdict_row(&x.label, v));
        }
    }
    t
}

/// Table 3 beside the paper: PATH and STACK, the paper's programs (1998)
/// and heaplab's (today).
pub fn paper_table3(e: &[Entry]) -> Table {
    let mut t = table(
        "Beside the paper, Table 3: 8 KB pages per segment relative to DEFAULT's, PATH and STACK; the paper's six programs as printed (1998), heaplab's measured on the test input",
        &["program", "source", "predictor", "DEFAULT pages", "other", "SL", "HR", "(HR abs.)", "nonHR", "total"],
    );
    for r in paper::TABLES {
        for (name, seg, abs, total) in [
            ("PATH", r.path_pages, r.path_hr_pages, r.path_total),
            ("STACK", r.stack_pages, r.stack_hr_pages, r.stack_total),
        ] {
            let mut row = vec![
                Cell::text(r.program),
                Cell::text("paper 1998"),
                Cell::text(name),
                int(r.default_pages),
            ];
            row.extend(seg[..3].iter().map(|v| Cell::Num(*v, 3)));
            row.push(Cell::text(format!("({abs})")));
            row.push(Cell::Num(seg[3], 3));
            row.push(Cell::Num(total, 3));
            t.rows.push(row);
        }
    }
    for x in e {
        let def = x.study.table3.first().map_or(0, |r| r.total);
        for r in x.study.table3.iter().filter(|r| r.name == "PATH" || r.name == "STACK") {
            let mut row =
                vec![Cell::text(&x.label), Cell::text("heaplab"), Cell::text(&r.name), int(def)];
            row.extend(r.relative[..3].iter().map(|v| Cell::Num(*v, 3)));
            row.push(Cell::text(format!("({})", r.absolute[2])));
            row.push(Cell::Num(r.relative[3], 3));
            row.push(Cell::Num(r.total_relative, 3));
            t.rows.push(row);
        }
    }
    t
}

/// Table 4 beside the paper.
pub fn paper_table4(e: &[Entry]) -> Table {
    let mut t = table(
        "Beside the paper, Table 4: references per 8 KB page per segment relative to DEFAULT's, PATH and STACK (the paper prints 0.000 where heaplab shows —: a segment with no page)",
        &["program", "source", "predictor", "DEFAULT (×10³)", "other", "SL", "HR", "nonHR"],
    );
    for r in paper::TABLES {
        for (name, d) in [("PATH", r.path_density), ("STACK", r.stack_density)] {
            let mut row = vec![
                Cell::text(r.program),
                Cell::text("paper 1998"),
                Cell::text(name),
                Cell::Num(r.default_refs_k, 1),
            ];
            row.extend(d.iter().map(|v| Cell::Num(*v, 3)));
            t.rows.push(row);
        }
    }
    for x in e {
        let def = x.study.table4.first().and_then(|r| r.absolute[0]).unwrap_or(0.0);
        for r in x.study.table4.iter().filter(|r| r.name == "PATH" || r.name == "STACK") {
            let mut row = vec![
                Cell::text(&x.label),
                Cell::text("heaplab"),
                Cell::text(&r.name),
                Cell::Num(def / 1000.0, 1),
            ];
            row.extend(r.relative.iter().map(|v| Cell::opt(*v, 3)));
            t.rows.push(row);
        }
    }
    t
}

/// The largest reduction of a relative curve's values up to x (1 - its minimum).
fn largest_reduction(c: &Curve, upto: u64) -> Option<f64> {
    c.points.iter().filter(|p| p.0 <= upto).map(|p| 1.0 - p.1).reduce(f64::max)
}

/// Figures 3, 4 and 6 beside the paper: the numbers its text states, and
/// heaplab's of the same kind.
pub fn paper_figures(e: &[Entry]) -> Table {
    let mut t = table(
        "Beside the paper, Figures 3, 4 and 6: what the paper's text states (its figures are curves) and heaplab's numbers of the same kind, STACK and the best predictor",
        &["figure", "program", "source", "predictor", "what", "value", "where"],
    );
    for s in paper::STATED {
        t.rows.push(vec![
            Cell::text(format!("{}", s.figure)),
            Cell::text(s.program),
            Cell::text("paper 1998"),
            Cell::text(s.predictor),
            Cell::text(s.what),
            if s.value.is_nan() { Cell::text("(in words)") } else { Cell::Num(s.value, 2) },
            Cell::text(s.said),
        ]);
    }
    for x in e {
        let st = &x.study;
        let best = st.verdict.as_ref().and_then(|v| v.best.clone());
        let mut names = vec!["STACK".to_string()];
        if let Some(b) = &best {
            if b != "STACK" {
                names.push(b.clone());
            }
        }
        let dn = st.default_pages();
        for n in &names {
            let row = |fig: &str, what: String, v: Option<f64>| {
                vec![
                    Cell::text(fig),
                    Cell::text(&x.label),
                    Cell::text("heaplab"),
                    Cell::text(n),
                    Cell::text(what),
                    Cell::opt(v, 2),
                    Cell::text("measured"),
                ]
            };
            if let Some(f) = st.figure3.iter().find(|c| &c.name == n) {
                t.rows.push(row(
                    "3",
                    "references to the most referenced page / DEFAULT's".into(),
                    value_at(&f.points, 1),
                ));
                t.rows.push(row(
                    "3",
                    "references to the 25 most referenced pages / DEFAULT's".into(),
                    value_at(&f.points, 25),
                ));
                t.rows.push(row(
                    "3",
                    "references to the most referenced pages / DEFAULT's, at most".into(),
                    f.points.iter().map(|p| p.1).reduce(f64::max),
                ));
            }
            if let Some(f) = st.figure4.iter().find(|c| &c.name == n) {
                t.rows.push(row(
                    "4",
                    format!("largest page-fault reduction (up to {dn} pages)"),
                    largest_reduction(f, dn),
                ));
                t.rows.push(row("4", "mean page faults / DEFAULT's".into(), st.mean_faults(n)));
            }
            for cfg in ["32K:32:1", "256K:32:1"] {
                if let Some(c) = st.figure6.iter().find(|c| &c.name == n && c.config == cfg) {
                    t.rows.push(row(
                        "6",
                        format!("{cfg} misses / DEFAULT's (all references)"),
                        Some(c.all_relative),
                    ));
                }
            }
        }
    }
    t
}

/// Where the 1998 result holds today, program by program: the paper's
/// claim is that placement by predicted behaviour puts more references on
/// the hottest pages and cuts page faults under memory pressure (§5.2, §6).
pub fn holds(e: &[Entry]) -> Vec<String> {
    e.iter()
        .map(|x| {
            let st = &x.study;
            let v = st.verdict.clone().unwrap_or_default();
            let best = v.best.clone().unwrap_or_else(|| "?".into());
            let dn = st.default_pages();
            let red = st.figure4.iter().find(|c| c.name == best).and_then(|c| largest_reduction(c, dn));
            let hot = st
                .figure3
                .iter()
                .find(|c| c.name == best)
                .and_then(|c| c.points.iter().map(|p| p.1).reduce(f64::max));
            let held = v.faults_mean.is_some_and(|f| f <= 0.9) && red.is_some_and(|r| r >= 0.2);
            format!(
                "{}: the 1998 result {} — {best} packs up to {}x DEFAULT's references on the hottest pages, cuts page faults by up to {} and to {} on average; {}.",
                x.label,
                if held { "holds" } else { "does not hold" },
                hot.map_or("?".into(), |h| format!("{h:.2}")),
                red.map_or("?".into(), |r| format!("{:.0}%", 100.0 * r)),
                v.faults_mean.map_or("?".into(), |f| format!("{f:.2}x")),
                if v.pays {
                    "in the real program it pays".to_string()
                } else {
                    format!("in the real program it does not pay ({})", v.why)
                }
            )
        })
        .collect()
}

/// A table as aligned text (the first two columns to the left).
pub fn text(t: &Table) -> String {
    let cells: Vec<Vec<String>> = t.rows.iter().map(|r| r.iter().map(shown).collect()).collect();
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

/// What a cell shows, as the HTML page shows it.
fn shown(c: &Cell) -> String {
    c.shown()
}

fn all_tables(e: &[Entry]) -> Vec<Table> {
    vec![
        runs(e),
        thresholds(e),
        accuracy(e),
        table3(e),
        table4(e),
        figure3_table(e),
        figure4_table(e),
        figure6_table(e),
        tree_table(e),
        identification(e),
        wall(e),
        verdicts(e),
        paper_table3(e),
        paper_table4(e),
        paper_figures(e),
    ]
}

/// Every table, as text.
pub fn text_report(e: &[Entry]) -> String {
    let mut o = String::new();
    for t in all_tables(e) {
        if t.rows.is_empty() {
            continue;
        }
        o.push_str(&text(&t));
        o.push('\n');
    }
    for line in holds(e) {
        o.push_str(&line);
        o.push('\n');
    }
    for x in e {
        for n in &x.study.notes {
            o.push_str(&format!("note ({}): {}\n", x.label, n));
        }
    }
    o
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

fn ratio_series(c: &Curve, log: bool) -> LineSeries {
    LineSeries::new(&c.name, thin(c.points.iter().map(|p| (p.0 as f64, p.1)).collect(), 400, log))
}

/// The HTML page: the tables, and the figures drawn.
pub fn html(e: &[Entry], title: &str, command: &str) -> String {
    let mut r = Report::new(title);
    r.paragraph(&format!(
        "Seidl and Zorn, Segregating Heap Objects by Reference Behavior and Lifetime (ASPLOS 1998), reproduced by heaplab: trained on one input, thresholds chosen on a second, measured on a third. Command: {command}"
    ));
    r.heading("What pays");
    r.table(&verdicts(e));
    for line in holds(e) {
        r.paragraph(&line);
    }
    r.heading("The runs");
    r.table(&runs(e));
    r.table(&thresholds(e));
    r.heading("Prediction");
    r.table(&accuracy(e));
    r.table(&tree_table(e));
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
        for fig in &x.study.figure3 {
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
        for fig in &x.study.figure4 {
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
        for c in &x.study.fault_curves {
            a.series.push(LineSeries::new(
                &c.name,
                thin(c.points.iter().map(|p| (p.0 as f64, p.1 as f64)).collect(), 400, false),
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
    let mut configs: Vec<String> = Vec::new();
    for x in e {
        for c in &x.study.figure6 {
            if !configs.contains(&c.config) {
                configs.push(c.config.clone());
            }
        }
    }
    let mut names: Vec<String> = Vec::new();
    for x in e {
        for c in &x.study.figure6 {
            if c.name != "DEFAULT" && !names.contains(&c.name) {
                names.push(c.name.clone());
            }
        }
    }
    for cfg in &configs {
        let series = names
            .iter()
            .map(|n| {
                Series::new(
                    n,
                    e.iter()
                        .map(|x| {
                            x.study
                                .figure6
                                .iter()
                                .find(|c| &c.name == n && &c.config == cfg)
                                .map(|c| c.all_relative)
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
    r.heading("The real program: identification, the allocator, wall time");
    r.table(&identification(e));
    r.table(&wall(e));
    r.heading("Beside the paper");
    r.table(&paper_table3(e));
    r.table(&paper_table4(e));
    r.table(&paper_figures(e));
    for x in e {
        for n in &x.study.notes {
            r.paragraph(&format!("Note ({}): {}", x.label, n));
        }
    }
    r.to_html()
}
