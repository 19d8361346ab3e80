//! `heaplab segregate` from the command line: a whole study on a small
//! program recorded three times (native/segregate/tests/seg_workload.c), its
//! tables, JSON, report and --combine; and what it says to bad input.
//! Needs `make -C native` (the Valgrind tool, the replayer, the allocator's
//! sources).

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::OnceLock;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..").canonicalize().unwrap()
}

/// This test binary's private directory (mkdtemp'd, removed at exit).
fn dir() -> PathBuf {
    heaplab_plumb::scratch::process_dir("segregate-test").unwrap().to_path_buf()
}

fn heaplab(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_heaplab")).args(args).output().unwrap()
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// seg-workload recorded with references for 12, 10 and 14 rounds.
fn traces() -> &'static [PathBuf; 3] {
    static T: OnceLock<[PathBuf; 3]> = OnceLock::new();
    T.get_or_init(|| {
        let prog = root().join("build/bin/seg-workload");
        assert!(prog.exists(), "{} is not built: run `make -C native` first", prog.display());
        [12, 10, 14].map(|n| {
            let t = dir().join(format!("wl{n}.hltrace"));
            let o = Command::new(env!("CARGO_BIN_EXE_heaplab"))
                .args(["record", "--refs", "-o"])
                .arg(&t)
                .arg("--")
                .arg(&prog)
                .arg(n.to_string())
                .output()
                .unwrap();
            assert!(o.status.success(), "{}", text(&o.stderr));
            t
        })
    })
}

fn p(x: &Path) -> &str {
    x.to_str().unwrap()
}

#[test]
fn a_whole_study_writes_its_tables_json_and_report() {
    let [a, b, c] = traces();
    let d = dir();
    let json = d.join("wl.json");
    let prog = root().join("build/bin/seg-workload");
    let run = format!("{} 14", prog.display());
    let o = heaplab(&[
        "segregate",
        "--train",
        p(a),
        "--threshold",
        p(b),
        "--test",
        p(c),
        "--out",
        p(&d.join("libs")),
        "--json",
        p(&json),
        "--report",
        p(&d.join("report")),
        "--run-test",
        &run,
        "--repeats",
        "1",
    ]);
    let (out, err) = (text(&o.stdout), text(&o.stderr));
    assert!(o.status.success(), "{err}");
    for want in [
        "Table 3: 8-kilobyte pages per segment",
        "Table 4:",
        "Figure 3 (sampled)",
        "Figure 4 (sampled)",
        "Figure 6:",
        "precision (P) and recall (R)",
        "In the real program",
    ] {
        assert!(out.contains(want), "no {want:?} in\n{out}");
    }
    for name in ["DEFAULT", "SP", "PATH", "STACK", "STACK+size", "RANDOM"] {
        assert!(
            out.contains(&format!("  {name} ")) || out.contains(&format!(" {name}\n")),
            "no row for {name}:\n{out}"
        );
    }
    assert!(err.contains("thresholds: searched with STACK"), "{err}");
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    assert_eq!(v["measured"].as_array().unwrap().len(), 6);
    assert_eq!(v["table3"][0]["name"], "DEFAULT");
    assert_eq!(v["table3"][0]["total_relative"], 1.0);
    // the real program's costs: STACK identifies every new object at run time
    let stack = v["costs"]["predictors"].as_array().unwrap().iter().find(|r| r["name"] == "STACK");
    let stack = stack.unwrap_or_else(|| panic!("no STACK costs: {}", v["costs"]));
    assert!(stack["identify_per_object"].as_f64().unwrap() > 0.0, "{stack}");
    assert!(v["costs"]["default"]["per_malloc"].as_f64().unwrap() > 0.0);
    // wall times: glibc, DEFAULT and the predictors (mimalloc where installed)
    let rows = v["wall"]["rows"].as_array().unwrap();
    for name in ["glibc", "DEFAULT", "STACK"] {
        assert!(rows.iter().any(|r| r["name"] == name), "no wall time for {name}: {rows:?}");
    }
    assert!(rows.iter().all(|r| r["same_output"] == true));
    assert!(!v["verdict"]["why"].as_str().unwrap().is_empty(), "{}", v["verdict"]);
    let t = &v["thresholds"]["thresholds"];
    assert!(
        t["sl_max_age"].as_u64().unwrap() < t["hr_min_age"].as_u64().unwrap(),
        "SL and HR overlap: {t}"
    );
    // the emitted library runs the program
    let so = d.join("libs/libstack.so");
    assert!(so.exists());
    assert!(d.join("libs/stack_table.c").exists());
    let html = std::fs::read_to_string(d.join("report/report.html")).unwrap();
    assert!(html.contains("<svg") && html.contains("Figure 4"));
    // --combine puts two studies side by side
    let o =
        heaplab(&["segregate", "--combine", p(&json), p(&json), "--report", p(&d.join("both"))]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    assert!(text(&o.stdout).matches("seg-workload  STACK ").count() >= 2 * 3);
}

#[test]
fn bad_input_is_named() {
    let [a, b, c] = traces();
    let o = heaplab(&[
        "segregate",
        "--train",
        "/nonexistent.hltrace",
        "--threshold",
        p(b),
        "--test",
        p(c),
    ]);
    assert!(!o.status.success());
    assert!(text(&o.stderr).contains("/nonexistent.hltrace: no such file"), "{}", text(&o.stderr));
    let base = ["segregate", "--train", p(a), "--threshold", p(b), "--test", p(c), "--no-measure"];
    let with = |extra: &[&str]| {
        let mut v: Vec<&str> = base.to_vec();
        v.extend_from_slice(extra);
        heaplab(&v)
    };
    let o = with(&["--thresholds", "1,2,3"]);
    assert!(text(&o.stderr).contains("four numbers"), "{}", text(&o.stderr));
    let o = with(&["--thresholds", "5000,100,1,0.01"]);
    assert!(text(&o.stderr).contains("SL and HR would overlap"), "{}", text(&o.stderr));
    let o = with(&["--predictor", "heap"]);
    assert!(text(&o.stderr).contains("stack+size"), "{}", text(&o.stderr));
    let o = with(&["--purity", "2"]);
    assert!(text(&o.stderr).contains("--purity"), "{}", text(&o.stderr));
    // a trace without references
    let v = root().join("testdata/vectors/basic.hltrace");
    let o = heaplab(&[
        "segregate",
        "--train",
        p(&v),
        "--threshold",
        p(b),
        "--test",
        p(c),
        "--no-measure",
    ]);
    assert!(text(&o.stderr).contains("heaplab record --refs"), "{}", text(&o.stderr));
    // --combine of something else
    let o = heaplab(&["segregate", "--combine", p(&v)]);
    assert!(!o.status.success());
    assert!(text(&o.stderr).contains("not JSON"), "{}", text(&o.stderr));
    // the traces are required without --combine
    let o = heaplab(&["segregate", "--train", p(a)]);
    assert!(text(&o.stderr).contains("--threshold"), "{}", text(&o.stderr));
}

/// Issue 17, class 1: the test trace's name (the default output directory
/// comes from it) never reaches a shell: a trace named `t;touch INJECTED;x`
/// runs no `touch`.
#[test]
fn a_hostile_test_trace_name_runs_nothing() {
    let [a, b, c] = traces();
    let d = dir().join("hostile");
    std::fs::create_dir_all(&d).unwrap();
    let evil = d.join("t;touch INJECTED;x.hltrace");
    std::fs::copy(c, &evil).unwrap();
    let prog = root().join("build/bin/seg-workload");
    let o = Command::new(env!("CARGO_BIN_EXE_heaplab"))
        .current_dir(&d)
        .args(["segregate", "--train", p(a), "--threshold", p(b), "--test", p(&evil)])
        .args(["--no-measure", "--predictor", "stack", "--repeats", "0", "--run-test"])
        .arg(format!("{} 14", prog.display()))
        .output()
        .unwrap();
    assert!(!d.join("INJECTED").exists(), "the trace's name ran a command");
    assert!(o.status.success(), "{}", text(&o.stderr));
    // the default output directory is named after the trace, in plain characters
    assert!(d.join("out/segregate/t_touch_INJECTED_x/libstack.so").exists());
}
