//! The Rust reader and `heaplab stats` against an independent Python reader
//! (`tools/hltrace.py`), which shares no code with them.

use std::path::{Path, PathBuf};
use std::process::Command;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn python(args: &[&str]) -> String {
    let out = Command::new("python3")
        .arg(root().join("tools/hltrace.py"))
        .args(args)
        .output()
        .expect("python3 runs");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).unwrap()
}

/// Compares `heaplab stats --json` with the Python profile of the same trace.
pub fn assert_profiles_agree(trace: &Path, unit: u64) {
    let out = Command::new(env!("CARGO_BIN_EXE_heaplab"))
        .args(["stats", "--unit", &unit.to_string()])
        .arg(trace)
        .arg("--json")
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let rust: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let py: serde_json::Value = serde_json::from_str(&python(&[
        "profile",
        trace.to_str().unwrap(),
        "--unit",
        &unit.to_string(),
    ]))
    .unwrap();
    for k in ["allocations", "frees", "reallocs", "peak_live_bytes", "peak_live_objects"] {
        assert_eq!(rust[k], py[k], "{k} of {}", trace.display());
    }
    let (rc, pc) =
        (rust["size_classes"].as_array().unwrap(), py["size_classes"].as_array().unwrap());
    assert_eq!(rc.len(), pc.len());
    for (r, p) in rc.iter().zip(pc) {
        for k in ["size", "allocs", "frees", "max_live"] {
            assert_eq!(r[k], p[k], "class {} field {k}", p["size"]);
        }
        for k in ["mean_live", "mean_free_list"] {
            let (a, b) = (r[k].as_f64().unwrap(), p[k].as_f64().unwrap());
            assert!(
                (a - b).abs() <= 1e-9 * b.abs().max(1.0),
                "class {} {k}: {a} vs {b}",
                p["size"]
            );
        }
    }
}

#[test]
fn python_dump_matches_every_good_vector() {
    let dir = root().join("testdata/vectors");
    for (trace, expect) in [
        ("basic", "basic"),
        ("basic-zstd", "basic"),
        ("many-zstd", "many-zstd"),
        ("fork-child", "fork-child"),
        ("exec-continue", "exec-continue"),
        ("skippable", "skippable"),
        ("v2-basic", "v2-basic"),
        ("v2-fork-child", "v2-fork-child"),
        ("v2-exec-continue", "v2-exec-continue"),
        ("v2-inflight", "v2-inflight"),
    ] {
        let got = python(&["dump", dir.join(format!("{trace}.hltrace")).to_str().unwrap()]);
        let want = std::fs::read_to_string(dir.join(format!("{expect}.txt"))).unwrap();
        assert_eq!(got, want, "{trace}");
    }
}

#[test]
fn stats_match_the_python_profile_on_vectors() {
    let dir = root().join("testdata/vectors");
    for unit in [8, 32] {
        assert_profiles_agree(&dir.join("many-zstd.hltrace"), unit);
        assert_profiles_agree(&dir.join("basic.hltrace"), unit);
        assert_profiles_agree(&dir.join("v2-basic.hltrace"), unit);
        assert_profiles_agree(&dir.join("v2-fork-child.hltrace"), unit);
    }
}
