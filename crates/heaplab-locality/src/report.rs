//! The locality study as terminal tables and as an HTML page with figures
//! (`heaplab-report`), laid out as papers 000 and 003 lay theirs out.

use crate::study::{AllocatorResult, CacheMode, Locality};
use heaplab_report::num::{millions, short_count};
use heaplab_report::{Bars, Cell, LineSeries, Lines, Report, Series, Table};
use heaplab_sim::config::fmt_bytes;
use heaplab_trace::escape::{terminal_lines, terminal_str};
use std::fmt::Write as _;

/// Cache sizes present for (line, assoc), unified, across allocators.
fn sizes(l: &Locality, line: u32, assoc: u32) -> Vec<u64> {
    let mut v: Vec<u64> = l
        .allocators
        .iter()
        .flat_map(|a| a.caches.iter())
        .filter(|c| c.line == line && c.assoc == assoc && c.mode == CacheMode::Unified)
        .map(|c| c.size)
        .collect();
    v.sort();
    v.dedup();
    v
}

fn miss_rate(a: &AllocatorResult, size: u64, line: u32, assoc: u32) -> Option<f64> {
    a.caches
        .iter()
        .find(|c| {
            c.size == size && c.line == line && c.assoc == assoc && c.mode == CacheMode::Unified
        })
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

/// The study's tables, in the papers' order; the terminal and the HTML page
/// show the same cells.
fn tables(l: &Locality) -> Vec<Table> {
    let mut out = Vec::new();
    let name = |a: &AllocatorResult| Cell::text(a.name.clone());

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
        let rows = l
            .allocators
            .iter()
            .map(|a| {
                let mut r = vec![name(a)];
                r.extend(sz.iter().map(|&s| Cell::opt(miss_rate(a, s, line, assoc), 3)));
                r
            })
            .collect();
        out.push(Table { caption: Some(title.into()), header, rows });
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
        let mega = |n: u64| n as f64 / 1e6;
        let rows = l
            .allocators
            .iter()
            .map(|a| {
                let first = a.time.first();
                let mut r = vec![
                    name(a),
                    Cell::opt(first.map(|t| mega(t.instructions)), 2),
                    Cell::opt(first.map(|t| mega(t.references)), 2),
                ];
                for (c, p) in &caches {
                    r.push(
                        a.time
                            .iter()
                            .find(|t| &t.cache == c && t.penalty == *p)
                            .map(|t| {
                                Cell::text(format!(
                                    "{}/{}",
                                    millions(t.total_cycles),
                                    millions(t.miss_cycles)
                                ))
                            })
                            .unwrap_or_else(Cell::missing),
                    );
                }
                r
            })
            .collect();
        out.push(Table {
            caption: Some(format!(
                "Estimated execution time I + M·P·D, total/miss, in millions of cycles (one cycle per instruction; paper 000 Tables 4-5 use P = {} cycles; P = {} is a miss to DRAM today, about 65 ns at 3 GHz)",
                l.penalty, l.modern_penalty
            )),
            header,
            rows,
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
        let rows = l
            .allocators
            .iter()
            .map(|a| {
                let touched =
                    a.pages.iter().find(|p| p.page_size == page).map(|p| p.distinct_pages as f64);
                let mut r = vec![name(a), Cell::opt(touched, 0)];
                r.extend(mem.iter().map(|&m| Cell::opt_sci(fault_rate(a, page, m), 2)));
                r
            })
            .collect();
        out.push(Table {
            caption: Some(format!(
                "Page faults per reference against memory size, {} pages, LRU (paper 000 Figures 2-3; compulsory faults included)",
                fmt_bytes(page)
            )),
            header,
            rows,
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
                    Cell::text(format!("{} vs {}", t.with_tags, t.allocator)),
                    Cell::text(t.cache.clone()),
                    Cell::Num(t.miss_rate_pct_tags, 3),
                    Cell::Num(t.miss_rate_pct_no_tags, 3),
                    Cell::Num(t.penalty_pct_tags, 2),
                    Cell::Num(t.penalty_pct_no_tags, 2),
                    Cell::Num(t.penalty_due_to_tags_pct, 2),
                ]
            })
            .collect();
        out.push(Table {
            caption: Some(format!(
                "Boundary tags: the same allocator with 8 bytes more per object (paper 000 Table 6; penalties in % of the execution time without tags, P = {})",
                l.penalty
            )),
            header,
            rows,
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
        let own = pcaches.iter().any(|c| c.starts_with("512"));
        let shared: Vec<&String> = pcaches.iter().filter(|c| !c.starts_with("512")).collect();
        let mut header = vec!["allocator".to_string()];
        for c in &shared {
            header.push(format!("{c} Conv-Conf misses"));
            header.push(format!("{c} IMM-App misses"));
            header.push(format!("{c} improvement %"));
        }
        if own {
            header.push("allocator's own misses, 512:32:1".into());
        }
        let rows = l
            .allocators
            .iter()
            .map(|a| {
                let mut r = vec![name(a)];
                for c in &shared {
                    match a.pollution.iter().find(|p| &p.cache == *c) {
                        Some(p) => r.extend([
                            Cell::Count(p.conv_misses),
                            Cell::Count(p.imm_app_misses),
                            Cell::Num(p.improvement_pct, 1),
                        ]),
                        None => r.extend([Cell::missing(), Cell::missing(), Cell::missing()]),
                    }
                }
                if own {
                    r.push(Cell::opt_count(
                        a.pollution
                            .iter()
                            .find(|p| p.cache.starts_with("512"))
                            .map(|p| p.imm_alloc_misses),
                    ));
                }
                r
            })
            .collect();
        out.push(Table {
            caption: Some("Cache pollution by the allocator: misses with the allocator sharing the cache (Conv-Conf) and with the allocator on a cache of its own (IMM), direct-mapped (paper 003 Figures 5-10)".into()),
            header,
            rows,
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
                    name(a),
                    Cell::Count(a.stats.refs()),
                    Cell::Count(a.stats.app_refs()),
                    Cell::Count(a.stats.alloc_refs),
                    Cell::Count(a.stats.alloc_instructions),
                ]
            })
            .collect();
        out.push(Table {
            caption: Some("References per part (paper 003 Tables 2-4)".into()),
            header,
            rows,
        });
    }
    out
}

/// The terminal report.
pub fn text(l: &Locality) -> String {
    let mut o = String::new();
    let _ =
        writeln!(o, "heaplab locality: {} ({})", terminal_str(&l.trace), terminal_str(&l.command));
    if let Some(a) = l.allocators.first() {
        let s = &a.stats;
        let _ = writeln!(
            o,
            "the program: {} instructions, {} references ({} to heap objects), {} events",
            short_count(s.app_instructions),
            short_count(s.app_refs()),
            short_count(s.app_heap_refs),
            short_count(s.events)
        );
    }
    for t in tables(l) {
        o.push('\n');
        o.push_str(&t.to_text());
    }
    for f in &l.failed {
        let _ =
            writeln!(o, "\n{} could not be measured: {}", f.allocator, terminal_lines(&f.error));
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
        page.table(&t);
    }
    for f in &l.failed {
        page.paragraph(&format!("{} could not be measured: {}", f.allocator, f.error));
    }
    page.to_html()
}
