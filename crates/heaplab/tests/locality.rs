//! `heaplab record --refs` and `heaplab locality` from the command line, on
//! a tiny C program (native/vgtool/tests/counts.c): the tables and the JSON.
//! Needs `make -C native` (the Valgrind tool, the replayer, the allocators).

use std::path::PathBuf;
use std::process::Command;
use std::sync::OnceLock;

mod common;
use common::root;

/// This process's scratch directory (the tests share one recorded trace).
fn dir() -> PathBuf {
    common::process_tmp()
}

/// The counts program recorded once with `heaplab record --refs`.
fn trace() -> PathBuf {
    static T: OnceLock<PathBuf> = OnceLock::new();
    T.get_or_init(|| {
        let prog = root().join("build/bin/vgtool-test-counts");
        assert!(prog.exists(), "{} is not built: run `make -C native` first", prog.display());
        let t = dir().join("counts.hltrace");
        let o = Command::new(env!("CARGO_BIN_EXE_heaplab"))
            .args(["record", "--refs", "-o"])
            .arg(&t)
            .arg("--")
            .arg(&prog)
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(o.status.success(), "{err}");
        assert!(err.contains("8 references") || err.contains("references ("), "{err}");
        t
    })
    .clone()
}

#[test]
fn record_refs_reports_what_it_wrote_and_passes_the_status_through() {
    let t = dir().join("false.hltrace");
    let o = Command::new(env!("CARGO_BIN_EXE_heaplab"))
        .args(["record", "--refs", "-o"])
        .arg(&t)
        .args(["--", "false"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(1), "{}", String::from_utf8_lossy(&o.stderr));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("exited with status 1") && err.contains("B/reference"), "{err}");
    let r = heaplab_trace::refs::object_profile(&t).unwrap();
    assert!(r.has_refs && r.stats.refs() > 1000 && r.stats.instructions.is_some());
}

#[test]
fn heaplab_locality_writes_tables_and_json() {
    let t = &trace();
    let json = dir().join("loc.json");
    let report = dir().join("report");
    let heaplab = env!("CARGO_BIN_EXE_heaplab");
    let o = std::process::Command::new(heaplab)
        .args([
            "locality",
            "--quiet",
            "--allocators",
            "bsd,gnulocal,gnulocal+pad8",
            "--caches",
            "16K:32:1,256K:64:8",
            "--pages",
            "4K",
        ])
        .arg("--json")
        .arg(&json)
        .arg("--report")
        .arg(&report)
        .arg(t)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success(), "{text}\n{}", String::from_utf8_lossy(&o.stderr));
    for words in [
        "paper 000 Figures 6-8",
        "I + M·P·D",
        "Page faults per reference",
        "Table 6",
        "Conv-Conf",
        "Tables 2-4",
    ] {
        assert!(text.contains(words), "missing {words:?} in:\n{text}");
    }
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let allocs = v["allocators"].as_array().unwrap();
    assert_eq!(allocs.len(), 3);
    for a in allocs {
        // the required configurations are there beside the asked ones
        let caches = a["caches"].as_array().unwrap();
        for (size, line) in [(16384, 32), (65536, 32), (32768, 64), (512, 32)] {
            assert!(caches
                .iter()
                .any(|c| c["size"] == size && c["line"] == line && c["mode"] == "split"));
        }
        for c in caches {
            assert_eq!(
                c["accesses"].as_u64().unwrap(),
                c["app_accesses"].as_u64().unwrap() + c["alloc_accesses"].as_u64().unwrap()
            );
            assert!(c["misses"].as_u64().unwrap() <= c["accesses"].as_u64().unwrap());
        }
        let curve = a["pages"][0]["curve"].as_array().unwrap();
        assert_eq!(curve.last().unwrap()[1], a["pages"][0]["distinct_pages"]);
    }
    assert_eq!(v["boundary_tags"].as_array().unwrap().len(), 1);
    assert!(std::fs::read_to_string(report.join("report.html")).unwrap().contains("<svg"));
}

#[test]
fn a_trace_without_references_is_refused_with_the_way_out() {
    let t = root().join("testdata/vectors/basic.hltrace");
    let o = std::process::Command::new(env!("CARGO_BIN_EXE_heaplab"))
        .args(["locality"])
        .arg(&t)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("has no references") && err.contains("heaplab record --refs"), "{err}");
}
