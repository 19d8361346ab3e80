//! The instruction counters against their oracle: heaplab's counting tool
//! (`--counter vgcount`, the default) must give callgrind's inclusive counts
//! per malloc, free and realloc, within 1%, on small traces: one generated
//! with every kind of call, and perl's word count recorded here. On heaplab's
//! own allocators, whose work depends on the calls alone, they must be equal
//! to the instruction. (The benchmark, bench/compare.py, checks the same on
//! every bundled workload and a 67 M-event trace.) The CPU counter
//! (`--counter perf`) must either agree or say why it cannot run.
//! Needs the native build and valgrind.

mod common;
use common::*;
use std::path::{Path, PathBuf};
use std::process::Command;

// aobt and sbt: their treaps hash node offsets; hashing absolute addresses
// gave each Valgrind tool (whose heaps start at different addresses) a
// different tree shape, and counts 1.8% apart (aobt, generated trace).
const ALLOCATORS: &str =
    "glibc,firstfit,bsd,gnugpp,quickfit,buddy,aobt,sbt,jemalloc,mimalloc,tcmalloc";

fn perl_trace(d: &Path) -> PathBuf {
    let out = heaplab(
        &[
            "workloads",
            "perl-wc",
            "--variant",
            "1",
            "--scale",
            "0.05",
            "--cache",
            d.join("in").to_str().unwrap(),
        ],
        d,
    );
    assert!(out.status.success(), "{}", show(&out));
    let line = String::from_utf8_lossy(&out.stdout).lines().next().unwrap().to_string();
    let words: Vec<&str> = line.split_whitespace().collect();
    let trace = d.join("perl-wc.hltrace");
    let mut args = vec!["record", "-o", trace.to_str().unwrap(), "--"];
    args.extend(words.iter().copied());
    let rec = heaplab_cmd(&args, d).current_dir(root()).output().unwrap();
    assert!(rec.status.success(), "{}", show(&rec));
    trace
}

fn compare(traces: &[&Path], counter: &str, d: &Path) -> Vec<serde_json::Value> {
    let json = d.join(format!("{counter}.json"));
    let mut args = vec![
        "compare",
        "--allocators",
        ALLOCATORS,
        "--counter",
        counter,
        "--no-footprint",
        "--repeat",
        "0",
        "--json",
        json.to_str().unwrap(),
    ];
    for t in traces {
        args.push(t.to_str().unwrap());
    }
    let out = heaplab(&args, d);
    let recs = records(&json);
    for r in &recs {
        assert!(
            r["status"] == "ok" || r["status"] == "missing",
            "{} on {} with {counter}: {}\n{}",
            r["allocator"],
            r["trace_name"],
            r["error"],
            show(&out)
        );
        if r["status"] == "ok" {
            assert_eq!(r["counter"], counter);
        }
    }
    recs
}

#[test]
fn vgcount_equals_callgrind_on_small_traces() {
    let d = tmp("counters");
    let gen = d.0.join("all-kinds.hltrace");
    all_kinds_trace(&gen, 20_000, 7);
    let perl = perl_trace(&d.0);
    let vg = compare(&[&gen, &perl], "vgcount", &d.0);
    let cg = compare(&[&gen, &perl], "callgrind", &d.0);
    assert_eq!(vg.len(), cg.len());
    let mut checked = 0;
    for (a, b) in vg.iter().zip(&cg) {
        assert_eq!((&a["trace"], &a["allocator"]), (&b["trace"], &b["allocator"]));
        if a["status"] != "ok" {
            continue;
        }
        let cell = format!("{} on {}", a["allocator"], a["trace_name"]);
        for f in ["mallocs", "frees", "reallocs"] {
            assert_eq!(a[f], b[f], "{cell}: {f}");
        }
        for f in ["instr_per_malloc", "instr_per_free", "instr_per_realloc", "alloc_instructions"] {
            let (x, y) = (a[f].as_f64().unwrap(), b[f].as_f64().unwrap());
            assert!(y > 0.0, "{cell}: callgrind counted no {f}");
            let rel = (x - y).abs() / y;
            assert!(
                rel <= 0.01,
                "{cell}: {f} vgcount {x} vs callgrind {y} ({:+.3}%)",
                100.0 * (x - y) / y
            );
            if a["source"] == "heaplab" {
                assert_eq!(x, y, "{cell}: {f}: this allocator's count depends on the calls alone");
            }
            // jemalloc's clock-driven purging is off in counted replays (with
            // it on, frees differed by up to 2.6% on python). What is left
            // depends on where the kernel and the Valgrind tool put its
            // mappings: its rtree lookup cache is keyed by address bits and its
            // extent heaps are ordered by address, so two tools can differ by
            // a few instructions in ten thousand (CI saw 0.009% on all-kinds,
            // this VM 0). Within 0.1%, ten times tighter than the other peers.
            if a["allocator"] == "jemalloc" {
                assert!(
                    rel <= 0.001,
                    "{cell}: {f}: jemalloc vgcount {x} vs callgrind {y} ({:+.4}%)",
                    100.0 * (x - y) / y
                );
            }
        }
        let want_env = (a["allocator"] == "jemalloc")
            .then_some("MALLOC_CONF=dirty_decay_ms:-1,muzzy_decay_ms:-1");
        for r in [a, b] {
            assert_eq!(r["count_env"].as_str(), want_env, "{cell}: count_env");
        }
        checked += 1;
    }
    assert!(checked >= 12, "at least heaplab's allocators and glibc on both traces ({checked})");
}

#[test]
fn perf_counts_or_says_why_not() {
    let d = tmp("perf");
    let gen = d.0.join("all-kinds.hltrace");
    all_kinds_trace(&gen, 5_000, 11);
    let replay = root().join("build/bin/heaplab-replay");
    let out = Command::new(&replay).args(["--count", "perf"]).arg(&gen).output().unwrap();
    let json = d.0.join("perf.json");
    let cmp = heaplab(
        &[
            "compare",
            gen.to_str().unwrap(),
            "--allocators",
            "glibc,firstfit",
            "--counter",
            "perf",
            "--no-footprint",
            "--repeat",
            "0",
            "--json",
            json.to_str().unwrap(),
        ],
        &d.0,
    );
    let recs = records(&json);
    if out.status.code() == Some(5) {
        // No counter on this machine (this VM): a clear reason, in the replayer's
        // words and in every cell of the comparison.
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            err.contains("--count perf")
                && (err.contains("perf_event_open") || err.contains("rdpmc")),
            "{err}"
        );
        assert!(err.contains("--count vgcount"), "it says what to use instead: {err}");
        assert_eq!(cmp.status.code(), Some(1), "{}", show(&cmp));
        for r in recs.iter().filter(|r| r["status"] != "missing") {
            assert_eq!(r["status"], "failed");
            assert!(
                r["error"].as_str().unwrap().contains("perf_event_open")
                    || r["error"].as_str().unwrap().contains("rdpmc"),
                "{r}"
            );
        }
        return;
    }
    // A machine that lends its counter: the counts come near callgrind's. A
    // CPU counts a rep-prefixed string instruction once, Valgrind once per
    // iteration, hence the wider margin.
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let cg = d.0.join("cg.json");
    let o = heaplab(
        &[
            "compare",
            gen.to_str().unwrap(),
            "--allocators",
            "glibc,firstfit",
            "--counter",
            "callgrind",
            "--no-footprint",
            "--repeat",
            "0",
            "--json",
            cg.to_str().unwrap(),
        ],
        &d.0,
    );
    assert!(o.status.success(), "{}", show(&o));
    for (a, b) in recs.iter().zip(records(&cg)) {
        for f in ["instr_per_malloc", "instr_per_free"] {
            let (x, y) = (a[f].as_f64().unwrap(), b[f].as_f64().unwrap());
            assert!((x - y).abs() / y <= 0.05, "{} {f}: perf {x} vs callgrind {y}", a["allocator"]);
        }
    }
}
