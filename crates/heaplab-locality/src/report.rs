//! The locality study as terminal tables and as an HTML page with figures
//! (`heaplab-report`), laid out as papers 000 and 003 lay theirs out.

use crate::study::{AllocatorResult, Locality};
use heaplab_report::{Bars, Cell, LineSeries, Lines, Report, Series, Table};
use heaplab_sim::config::fmt_bytes;
use std::fmt::Write as _;

/// Cache sizes present for (line, assoc), unified, across allocators.
fn sizes(l: &Locality, line: u32, assoc: u32) -> Vec<u64> {
    let mut v: Vec<u64> = l
        .allocators
        .iter()
        .flat_map(|a| a.caches.iter())
        .filter(|c| c.line == line && c.assoc == assoc && c.mode == "unified")
        .map(|c| c.size)
        .collect();
    v.sort();
    v.dedup();
    v
}

fn miss_rate(a: &AllocatorResult, size: u64, line: u32, assoc: u32) -> Option<f64> {
    a.caches
        .iter()
        .find(|c| c.size == size && c.line == line && c.assoc == assoc && c.mode == "unified")
        .map(|c| 100.0 * c.misses as f64 / c.accesses.max(1) as f64)
}

/// Memory sizes (bytes) at which to show page faults: powers of four from
/// 16 KiB up to the largest footprint.
fn memory_sizes(l: &Locality, page: u64) -> Vec<u64> {
    let most = l
        .allocators
        .iter()
        .flat_map(|a| a.pages.iter())
        .filter(|p| p.page_size == page)
        .map(|p| p.distinct_pages * page)
        .max()
        .unwrap_or(0);
    let mut v = Vec::new();
    let mut m = (16u64 << 10).max(page);
    while m < most * 2 && v.len() < 12 {
        v.push(m);
        m *= 4;
    }
    v
}

fn fault_rate(a: &AllocatorResult, page: u64, memory: u64) -> Option<f64> {
    let p = a.pages.iter().find(|p| p.page_size == page)?;
    let frames = (memory / page).max(1);
    let faults = if frames > p.distinct_pages {
        p.distinct_pages
    } else {
        p.curve.get(frames as usize - 1).map(|x| x[1]).unwrap_or(p.distinct_pages)
    };
    Some(faults as f64 / p.references.max(1) as f64)
}

fn mega(n: u64) -> String {
    format!("{:.2}", n as f64 / 1e6)
}

fn count(n: u64) -> String {
    if n >= 10_000_000_000 {
        format!("{:.2}e9", n as f64 / 1e9)
    } else if n >= 1_000_000 {
        format!("{:.2}M", n as f64 / 1e6)
    } else if n >= 10_000 {
        format!("{:.1}K", n as f64 / 1e3)
    } else {
        n.to_string()
    }
}

/// A text table: first column left-aligned, the rest right-aligned.
fn text_table(out: &mut String, header: &[String], rows: &[Vec<String>]) {
    let n = header.len();
    let mut w = vec![0usize; n];
    for r in std::iter::once(header).chain(rows.iter().map(|r| r.as_slice())) {
        for (i, c) in r.iter().enumerate().take(n) {
            w[i] = w[i].max(c.chars().count());
        }
    }
    for r in std::iter::once(header).chain(rows.iter().map(|r| r.as_slice())) {
        let mut line = String::new();
        for (i, c) in r.iter().enumerate().take(n) {
            if i == 0 {
                let _ = write!(line, "{c:<width$}", width = w[0]);
            } else {
                let _ = write!(line, "  {c:>width$}", width = w[i]);
            }
        }
        out.push_str(line.trim_end());
        out.push('\n');
    }
}

struct Tab {
    title: String,
    header: Vec<String>,
    rows: Vec<Vec<String>>,
    /// Numeric columns as numbers, for HTML (None: text).
    nums: Vec<Vec<Option<f64>>>,
    digits: usize,
}

fn tables(l: &Locality) -> Vec<Tab> {
    let mut out = Vec::new();
    let names: Vec<&str> = l.allocators.iter().map(|a| a.name.as_str()).collect();

    for (line, assoc, title) in [
        (32, 1, "Cache miss rate (%), direct-mapped caches with 32-byte lines, program and allocator sharing the cache (paper 000 Figures 6-8)"),
        (64, 8, "Cache miss rate (%), 8-way caches with 64-byte lines (modern settings)"),
    ] {
        let sz = sizes(l, line, assoc);
        if sz.is_empty() {
            continue;
        }
        let mut header = vec!["allocator".to_string()];
        header.extend(sz.iter().map(|&s| fmt_bytes(s)));
        let mut rows = Vec::new();
        let mut nums = Vec::new();
        for a in &l.allocators {
            let v: Vec<Option<f64>> = sz.iter().map(|&s| miss_rate(a, s, line, assoc)).collect();
            let mut r = vec![a.name.clone()];
            r.extend(v.iter().map(|x| x.map(|x| format!("{x:.3}")).unwrap_or_else(|| "—".into())));
            rows.push(r);
            nums.push(v);
        }
        out.push(Tab { title: title.into(), header, rows, nums, digits: 3 });
    }

    // time model
    let mut caches: Vec<(String, u64)> = Vec::new();
    for a in &l.allocators {
        for t in &a.time {
            if !caches.contains(&(t.cache.clone(), t.penalty)) {
                caches.push((t.cache.clone(), t.penalty));
            }
        }
    }
    if !caches.is_empty() {
        let mut header = vec!["allocator".to_string(), "I (M insns)".into(), "D (M refs)".into()];
        for (c, p) in &caches {
            header.push(format!("{c} P={p} total/miss (Mcycles)"));
        }
        let mut rows = Vec::new();
        for a in &l.allocators {
            let first = a.time.first();
            let mut r = vec![
                a.name.clone(),
                first.map(|t| mega(t.instructions)).unwrap_or_default(),
                first.map(|t| mega(t.references)).unwrap_or_default(),
            ];
            for (c, p) in &caches {
                r.push(
                    a.time
                        .iter()
                        .find(|t| &t.cache == c && t.penalty == *p)
                        .map(|t| format!("{}/{}", mega(t.total_cycles), mega(t.miss_cycles)))
                        .unwrap_or_else(|| "—".into()),
                );
            }
            rows.push(r);
        }
        out.push(Tab {
            title: format!(
                "Estimated execution time I + M·P·D, total/miss, in millions of cycles (one cycle per instruction; paper 000 Tables 4-5 use P = {} cycles; P = {} is a miss to DRAM today, about 65 ns at 3 GHz)",
                l.penalty, l.modern_penalty
            ),
            header,
            nums: vec![],
            rows,
            digits: 2,
        });
    }

    // pages
    let mut page_sizes: Vec<u64> =
        l.allocators.iter().flat_map(|a| a.pages.iter().map(|p| p.page_size)).collect();
    page_sizes.sort();
    page_sizes.dedup();
    for page in page_sizes {
        let mem = memory_sizes(l, page);
        let mut header = vec!["allocator".to_string(), "pages touched".into()];
        header.extend(mem.iter().map(|&m| fmt_bytes(m)));
        let mut rows = Vec::new();
        let mut nums = Vec::new();
        for a in &l.allocators {
            let touched = a.pages.iter().find(|p| p.page_size == page).map(|p| p.distinct_pages);
            let v: Vec<Option<f64>> = mem.iter().map(|&m| fault_rate(a, page, m)).collect();
            let mut r = vec![a.name.clone(), touched.map(|t| t.to_string()).unwrap_or_default()];
            r.extend(v.iter().map(|x| x.map(|x| format!("{x:.2e}")).unwrap_or_else(|| "—".into())));
            rows.push(r);
            let mut nv = vec![touched.map(|t| t as f64)];
            nv.extend(v);
            nums.push(nv);
        }
        out.push(Tab {
            title: format!(
                "Page faults per reference against memory size, {} pages, LRU (paper 000 Figures 2-3; compulsory faults included)",
                fmt_bytes(page)
            ),
            header,
            rows,
            nums,
            digits: 6,
        });
    }

    if !l.boundary_tags.is_empty() {
        let header = vec![
            "allocator".to_string(),
            "cache".into(),
            "miss rate % with tags".into(),
            "miss rate % no tags".into(),
            "miss penalty % with tags".into(),
            "miss penalty % no tags".into(),
            "penalty due to tags %".into(),
        ];
        let rows = l
            .boundary_tags
            .iter()
            .map(|t| {
                vec![
                    format!("{} vs {}", t.with_tags, t.allocator),
                    t.cache.clone(),
                    format!("{:.3}", t.miss_rate_pct_tags),
                    format!("{:.3}", t.miss_rate_pct_no_tags),
                    format!("{:.2}", t.penalty_pct_tags),
                    format!("{:.2}", t.penalty_pct_no_tags),
                    format!("{:.2}", t.penalty_due_to_tags_pct),
                ]
            })
            .collect();
        out.push(Tab {
            title: format!(
                "Boundary tags: the same allocator with 8 bytes more per object (paper 000 Table 6; penalties in % of the execution time without tags, P = {})",
                l.penalty
            ),
            header,
            rows,
            nums: vec![],
            digits: 3,
        });
    }

    // pollution
    let mut pcaches: Vec<String> = Vec::new();
    for a in &l.allocators {
        for p in &a.pollution {
            if !pcaches.contains(&p.cache) {
                pcaches.push(p.cache.clone());
            }
        }
    }
    if !pcaches.is_empty() {
        let mut header = vec!["allocator".to_string()];
        for c in pcaches.iter().filter(|c| !c.starts_with("512")) {
            header.push(format!("{c} Conv-Conf misses"));
            header.push(format!("{c} IMM-App misses"));
            header.push(format!("{c} improvement %"));
        }
        if pcaches.iter().any(|c| c.starts_with("512")) {
            header.push("allocator's own misses, 512:32:1".into());
        }
        let mut rows = Vec::new();
        for a in &l.allocators {
            let mut r = vec![a.name.clone()];
            for c in pcaches.iter().filter(|c| !c.starts_with("512")) {
                match a.pollution.iter().find(|p| &p.cache == c) {
                    Some(p) => {
                        r.push(count(p.conv_misses));
                        r.push(count(p.imm_app_misses));
                        r.push(format!("{:.1}", p.improvement_pct));
                    }
                    None => r.extend(["—".into(), "—".into(), "—".into()]),
                }
            }
            if let Some(p) = a.pollution.iter().find(|p| p.cache.starts_with("512")) {
                r.push(count(p.imm_alloc_misses));
            }
            rows.push(r);
        }
        out.push(Tab {
            title: "Cache pollution by the allocator: misses with the allocator sharing the cache (Conv-Conf) and with the allocator on a cache of its own (IMM), direct-mapped (paper 003 Figures 5-10)".into(),
            header,
            rows,
            nums: vec![],
            digits: 1,
        });
        let header = vec![
            "allocator".to_string(),
            "Conv-Conf references".into(),
            "IMM-Application".into(),
            "IMM-Allocator".into(),
            "allocator instructions".into(),
        ];
        let rows = l
            .allocators
            .iter()
            .map(|a| {
                vec![
                    a.name.clone(),
                    count(a.stats.refs()),
                    count(a.stats.app_refs()),
                    count(a.stats.alloc_refs),
                    count(a.stats.alloc_instructions),
                ]
            })
            .collect();
        out.push(Tab {
            title: "References per part (paper 003 Tables 2-4)".into(),
            header,
            rows,
            nums: vec![],
            digits: 0,
        });
    }
    let _ = names;
    out
}

/// The terminal report.
pub fn text(l: &Locality) -> String {
    let mut o = String::new();
    let _ = writeln!(o, "heaplab locality: {} ({})", l.trace, l.command);
    if let Some(a) = l.allocators.first() {
        let s = &a.stats;
        let _ = writeln!(
            o,
            "the program: {} instructions, {} references ({} to heap objects), {} events",
            count(s.app_instructions),
            count(s.app_refs()),
            count(s.app_heap_refs),
            count(s.events)
        );
    }
    for t in tables(l) {
        let _ = writeln!(o, "\n{}", t.title);
        text_table(&mut o, &t.header, &t.rows);
    }
    for f in &l.failed {
        let _ = writeln!(o, "\n{} could not be measured: {}", f.allocator, f.error);
    }
    o
}

/// The HTML page: the tables, and the figures of the papers.
pub fn html(l: &Locality) -> String {
    let mut page = Report::new("heaplab locality");
    page.paragraph(&format!("Trace {} of: {}", l.trace, l.command));
    let mut fig = 1;
    for (line, assoc, what) in [
        (32u32, 1u32, "direct-mapped, 32-byte lines (paper 000 Figures 6-8)"),
        (64, 8, "8-way, 64-byte lines"),
    ] {
        let sz = sizes(l, line, assoc);
        if sz.is_empty() {
            continue;
        }
        let series = l
            .allocators
            .iter()
            .map(|a| {
                LineSeries::new(
                    &a.name,
                    sz.iter()
                        .filter_map(|&s| miss_rate(a, s, line, assoc).map(|m| (s as f64, m)))
                        .collect(),
                )
            })
            .collect();
        let chart = Lines {
            title: format!("Data cache miss rate, {what}"),
            x_label: "cache size (bytes)".into(),
            y_label: "miss rate (%)".into(),
            series,
            log_x: true,
            log_y: true,
            ..Lines::default()
        };
        page.figure(&chart.to_svg(), &format!("Figure {fig}: miss rate against cache size, {what}; program and allocator share the cache."));
        fig += 1;
    }
    let mut page_sizes: Vec<u64> =
        l.allocators.iter().flat_map(|a| a.pages.iter().map(|p| p.page_size)).collect();
    page_sizes.sort();
    page_sizes.dedup();
    for ps in page_sizes {
        let series = l
            .allocators
            .iter()
            .filter_map(|a| {
                let p = a.pages.iter().find(|p| p.page_size == ps)?;
                let refs = p.references.max(1) as f64;
                // thin long curves to about 200 points
                let step = (p.curve.len() / 200).max(1);
                let pts = p
                    .curve
                    .iter()
                    .enumerate()
                    .filter(|(i, _)| i % step == 0 || *i + 1 == p.curve.len())
                    .map(|(_, x)| ((x[0] * ps) as f64 / 1024.0, x[1] as f64 / refs))
                    .collect();
                Some(LineSeries::new(&a.name, pts))
            })
            .collect();
        let chart = Lines {
            title: format!("Page-fault rate, {} pages, LRU", fmt_bytes(ps)),
            x_label: "memory (KiB)".into(),
            y_label: "faults per reference".into(),
            series,
            log_x: true,
            log_y: true,
            ..Lines::default()
        };
        page.figure(&chart.to_svg(), &format!("Figure {fig}: page faults per reference against memory size (paper 000 Figures 2-3). The curve ends where every page touched fits."));
        fig += 1;
    }
    // time bars
    let groups: Vec<String> = l.allocators.iter().map(|a| a.name.clone()).collect();
    let mut series = Vec::new();
    for (cache, p) in [
        ("16K:32:1", l.penalty),
        ("64K:32:1", l.penalty),
        ("16K:32:1", l.modern_penalty),
        ("64K:32:1", l.modern_penalty),
    ] {
        let vals = l
            .allocators
            .iter()
            .map(|a| {
                a.time
                    .iter()
                    .find(|t| t.cache == cache && t.penalty == p)
                    .map(|t| t.miss_cycles as f64 / 1e6)
            })
            .collect();
        series.push(Series::new(&format!("{cache} P={p}"), vals));
    }
    let bars = Bars {
        title: "Time waiting for cache misses (M·P·D)".into(),
        y_label: "million cycles".into(),
        groups: groups.clone(),
        series,
        ..Bars::default()
    };
    page.figure(&bars.to_svg(), &format!("Figure {fig}: miss time of the estimate I + M·P·D (paper 000 Tables 4-5), per allocator."));
    fig += 1;
    let mut series = Vec::new();
    for (cache, what) in [
        ("32K:32:1", "Conv-Conf"),
        ("32K:32:1", "IMM-App"),
        ("32K:64:1", "Conv-Conf"),
        ("32K:64:1", "IMM-App"),
    ] {
        let vals = l
            .allocators
            .iter()
            .map(|a| {
                a.pollution.iter().find(|p| p.cache == cache).map(|p| {
                    if what == "Conv-Conf" {
                        p.conv_misses as f64
                    } else {
                        p.imm_app_misses as f64
                    }
                })
            })
            .collect();
        series.push(Series::new(&format!("{cache} {what}"), vals));
    }
    let bars = Bars {
        title: "Cache misses, shared and split".into(),
        y_label: "misses".into(),
        groups: groups.clone(),
        series,
        ..Bars::default()
    };
    page.figure(&bars.to_svg(), &format!("Figure {fig}: misses with the allocator sharing a 32 KB direct-mapped cache (Conv-Conf) and with it on a cache of its own (IMM-App), 32- and 64-byte lines (paper 003 Figures 5, 6, 8, 9)."));
    fig += 1;
    let vals = l
        .allocators
        .iter()
        .map(|a| {
            a.pollution
                .iter()
                .find(|p| p.cache.starts_with("512"))
                .map(|p| p.imm_alloc_misses as f64)
        })
        .collect();
    let bars = Bars {
        title: "The allocator's own misses, 512-byte direct-mapped cache, 32-byte lines".into(),
        y_label: "misses".into(),
        groups,
        series: vec![Series::new("allocator", vals)],
        ..Bars::default()
    };
    page.figure(&bars.to_svg(), &format!("Figure {fig}: paper 003 Figure 10."));
    for t in tables(l) {
        let mut table =
            Table { caption: Some(t.title.clone()), header: t.header.clone(), rows: Vec::new() };
        for (i, r) in t.rows.iter().enumerate() {
            let mut cells = vec![Cell::text(r[0].clone())];
            match t.nums.get(i) {
                Some(nv) if nv.len() + 1 == r.len() => {
                    cells.extend(nv.iter().map(|v| Cell::opt(*v, t.digits)))
                }
                _ => cells.extend(r[1..].iter().map(|c| Cell::text(c.clone()))),
            }
            table.rows.push(cells);
        }
        page.table(&table);
    }
    for f in &l.failed {
        page.paragraph(&format!("{} could not be measured: {}", f.allocator, f.error));
    }
    page.to_html()
}
