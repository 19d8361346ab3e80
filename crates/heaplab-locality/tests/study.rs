//! The study's figures derived from measurements, its JSON, and its
//! rendering, on hand-made measurements whose figures are worked out here.

use heaplab_locality::report;
use heaplab_locality::study::*;
use heaplab_refs::measure::{MeasureStats, SimSpec};

fn cache(size: u64, line: u32, mode: CacheMode, accesses: u64, misses: u64) -> CacheRow {
    CacheRow {
        size,
        line,
        assoc: 1,
        mode,
        accesses,
        misses,
        app_accesses: accesses - 100,
        app_misses: misses / 2,
        alloc_accesses: 100,
        alloc_misses: misses - misses / 2,
    }
}

fn allocator(name: &str, misses_64k: u64) -> AllocatorResult {
    let stats = MeasureStats {
        app_heap_refs: 400,
        app_other_refs: 500,
        alloc_refs: 100,
        refs_to_null: 0,
        events: 10,
        app_instructions: 9_000,
        alloc_instructions: 1_000,
    };
    AllocatorResult {
        name: name.into(),
        stats,
        seconds: 0.5,
        caches: vec![
            cache(16 << 10, 32, CacheMode::Unified, 1000, 80),
            cache(64 << 10, 32, CacheMode::Unified, 1000, misses_64k),
            cache(64 << 10, 32, CacheMode::Split, 1000, misses_64k - 5),
        ],
        pages: vec![PageRow {
            page_size: 4096,
            references: 1000,
            distinct_pages: 3,
            curve: vec![[1, 30], [2, 10], [3, 3]],
        }],
        time: vec![TimeRow {
            cache: "64K:32:1".into(),
            penalty: 25,
            instructions: 10_000,
            references: 1000,
            misses: misses_64k,
            total_cycles: 10_000 + 25 * misses_64k,
            miss_cycles: 25 * misses_64k,
        }],
        pollution: vec![PollutionRow {
            cache: "32K:32:1".into(),
            conv_misses: 200,
            imm_app_misses: 150,
            imm_alloc_misses: 30,
            improvement_pct: 25.0,
        }],
    }
}

fn study() -> Locality {
    let opts = Options {
        allocators: Vec::new(),
        sim: SimSpec { caches: Vec::new(), page_sizes: Vec::new() },
        penalty: 25,
        modern_penalty: 200,
    };
    assemble(
        "t.hltrace",
        "prog \x1b[31m arg",
        &opts,
        vec![allocator("gnulocal", 40), allocator("gnulocal+pad8", 50)],
        vec![Failure { allocator: "jemalloc".into(), error: "not installed".into() }],
    )
}

#[test]
fn boundary_tags_compare_an_allocator_with_its_padded_self() {
    let l = study();
    assert_eq!(l.boundary_tags.len(), 1);
    let t = &l.boundary_tags[0];
    assert_eq!((t.allocator.as_str(), t.with_tags.as_str()), ("gnulocal", "gnulocal+pad8"));
    // 64K direct-mapped: 50 and 40 misses in 1000 accesses
    assert_eq!((t.miss_rate_pct_tags, t.miss_rate_pct_no_tags), (5.0, 4.0));
    // in % of the time without tags: I + M·P·D = 10000 + 40·25 = 11000
    let no_tags = 11_000.0;
    assert!((t.penalty_pct_no_tags - 100.0 * 1000.0 / no_tags).abs() < 1e-9);
    assert!((t.penalty_pct_tags - 100.0 * 1250.0 / no_tags).abs() < 1e-9);
    assert!((t.penalty_due_to_tags_pct - 100.0 * 250.0 / no_tags).abs() < 1e-9);
}

#[test]
fn the_json_reads_back_as_the_same_study() {
    let l = study();
    let j = serde_json::to_string(&l).unwrap();
    assert!(j.contains("\"mode\":\"unified\"") && j.contains("\"mode\":\"split\""), "{j}");
    let back: Locality = serde_json::from_str(&j).unwrap();
    assert_eq!(serde_json::to_string(&back).unwrap(), j);
    assert_eq!(report::text(&back), report::text(&l));
    // a misspelt key is an error, not a zero
    let bad = j.replacen("\"misses\"", "\"misess\"", 1);
    assert!(serde_json::from_str::<Locality>(&bad).is_err());
}

#[test]
fn text_and_html_show_the_same_cells() {
    let l = study();
    let text = report::text(&l);
    assert!(!text.contains('\x1b'), "a control character from the trace reached the terminal");
    assert!(text.contains("prog \\x1b[31m arg"), "{text}");
    // the fault rate at 16K (4 frames: every page fits) is 3 faults in 1000 references
    assert!(text.contains("3.00e-3"), "{text}");
    for words in ["gnulocal+pad8 vs gnulocal", "Conv-Conf", "jemalloc could not be measured"] {
        assert!(text.contains(words), "{words} missing from:\n{text}");
    }
    let html = report::html(&l);
    assert!(html.contains("<td class=\"num\">3.00e-3</td>"), "the same cell in HTML");
    assert!(!html.contains('\x1b'));
}
