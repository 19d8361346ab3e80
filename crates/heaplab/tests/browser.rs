//! report.html in a real headless browser (Debian's `chromium`, installed by
//! scripts/setup.sh): the page with its flame graphs opens with no console
//! error, no exception and no network request, every flame graph's script
//! runs, the page fits a narrow window and its tables sort
//! (tests/browser_check.py drives the browser through the DevTools protocol).
//! The same for a comparison's report.html, drawn from records of sixteen
//! allocators on two traces (exact and RSS footprints, repeated timings).

use std::process::Command;

mod common;

use common::root;

#[test]
fn report_opens_clean_in_chromium() {
    let path = std::env::var_os("PATH").unwrap_or_default();
    let has = |b: &str| std::env::split_paths(&path).any(|d| d.join(b).is_file());
    if !["chromium", "chromium-browser", "google-chrome"].iter().any(|b| has(b)) {
        let allowed = std::env::var("HEAPLAB_ALLOW_SKIPS").unwrap_or_default();
        assert!(
            allowed.split(',').any(|s| s == "browser"),
            "browser: chromium is not installed (scripts/setup.sh installs it); a check that cannot run fails (HEAPLAB_ALLOW_SKIPS=browser skips it)"
        );
        eprintln!("SKIP browser: chromium is not installed (allowed by HEAPLAB_ALLOW_SKIPS)");
        return;
    }
    // fresh and private (mkdtemp, 0700), removed when dropped
    let dir = common::tmp("browser");
    let prog = dir.join("memory");
    let o = Command::new("cc")
        .args(["-g", "-O1", "-fno-builtin", "-o"])
        .arg(&prog)
        .arg(root().join("crates/heaplab/tests/progs/memory.c"))
        .output()
        .unwrap();
    assert!(o.status.success());
    let trace = dir.join("m.hltrace");
    let heaplab = env!("CARGO_BIN_EXE_heaplab");
    let o = Command::new(heaplab)
        .args(["record", "-q", "-o"])
        .arg(&trace)
        .arg("--")
        .arg(&prog)
        .args(["300", "3000"])
        .env_remove("LD_PRELOAD")
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let rep = dir.join("report");
    let o = Command::new(heaplab)
        .arg("stats")
        .arg(&trace)
        .arg("--report")
        .arg(&rep)
        .args(["--footprint", "firstfit"])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    check(&rep.join("report.html"), 3, "stats");
    // a comparison's page: 16 allocators, error bars, both kinds of footprint
    let cmp = dir.join("compare");
    std::fs::create_dir(&cmp).unwrap();
    let prov = heaplab_plumb::provenance::Provenance::collect("test", None, vec!["heaplab".into()]);
    let html = heaplab_compare::report::html(
        &compare_records(),
        "heaplab compare (test)",
        &[],
        &prov.rows(),
    );
    std::fs::write(cmp.join("report.html"), html).unwrap();
    check(&cmp.join("report.html"), 0, "compare");
    drop(dir);
}

/// browser_check.py on `page`, expecting `frames` flame graphs.
fn check(page: &std::path::Path, frames: usize, what: &str) {
    let mut cmd = Command::new("python3");
    cmd.arg(root().join("crates/heaplab/tests/browser_check.py"))
        .arg(page)
        .args(["--frames", &frames.to_string()]);
    if let Ok(shot) = std::env::var("HEAPLAB_SCREENSHOT") {
        cmd.args(["--screenshot", &format!("{shot}.{what}.png")]);
    }
    let o = cmd.output().unwrap();
    assert!(
        o.status.success(),
        "{what}: status {:?}: {}",
        o.status.code(),
        String::from_utf8_lossy(&o.stderr)
    );
}

/// Sixteen allocators on two traces: twelve with exact footprints, four
/// (glibc and the peers) from RSS; three timing runs each.
fn compare_records() -> Vec<heaplab_compare::record::Record> {
    let names = [
        "glibc",
        "firstfit",
        "nextfit",
        "bsd",
        "buddy",
        "quickfit",
        "gnulocal",
        "gnugpp",
        "cartesian",
        "sbt",
        "aobt",
        "segregated",
        "adaptivecache",
        "jemalloc",
        "mimalloc",
        "tcmalloc",
    ];
    let mut v = Vec::new();
    for t in 0..2 {
        let base = 0.004 * (t + 1) as f64;
        for (a, name) in names.iter().enumerate() {
            let rss = a == 0 || a >= 13;
            let median = base * (1.0 + a as f64 / 6.0);
            v.push(heaplab_compare::record::Record {
                trace: format!("/t/{t}.hltrace"),
                trace_name: format!("program{t}"),
                allocator: name.to_string(),
                status: "ok".into(),
                instr_per_malloc: Some(40.0 + 7.0 * a as f64),
                instr_per_free: Some(20.0 + 3.0 * a as f64),
                alloc_instr_share: Some(0.05 + a as f64 / 100.0),
                wall_s: Some(median),
                wall_runs_s: vec![median * 0.93, median, median * 1.15],
                wall_ratio_glibc: Some(median / base),
                peak_footprint_bytes: Some((1 << 20) + a as u64 * 65536),
                footprint_source: Some(
                    if rss { "rss_touch" } else { "heaplab_alloc_stats" }.into(),
                ),
                footprint_vs_firstfit: Some(1.0 + a as f64 / 12.0),
                peak_live_bytes: Some(900_000),
                utilization: Some(0.9 / (1.0 + a as f64 / 12.0)),
                ..Default::default()
            });
        }
    }
    v
}
