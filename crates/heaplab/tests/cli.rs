//! What the command prints and how it exits, on the shared vectors.

use std::path::PathBuf;
use std::process::{Command, Output};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..").canonicalize().unwrap()
}

fn heaplab(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_heaplab")).current_dir(root()).args(args).output().unwrap()
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

#[test]
fn stats_table_matches_the_golden_file() {
    let out = heaplab(&["stats", "testdata/vectors/many-zstd.hltrace"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let golden =
        std::fs::read_to_string(root().join("testdata/golden/stats-many-zstd.txt")).unwrap();
    assert_eq!(text(&out.stdout), golden, "regenerate with: heaplab stats testdata/vectors/many-zstd.hltrace > testdata/golden/stats-many-zstd.txt");
}

#[test]
fn stats_json_has_the_documented_fields() {
    let out = heaplab(&["stats", "testdata/vectors/basic.hltrace", "--json"]);
    assert!(out.status.success());
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    for k in ["allocations", "frees", "reallocs", "peak_live_bytes", "peak_live_objects"] {
        assert!(v[k].is_u64(), "{k}");
    }
    let c = &v["size_classes"][0];
    for k in ["size", "allocs", "frees", "max_live"] {
        assert!(c[k].is_u64(), "{k}");
    }
    for k in ["mean_live", "mean_free_list"] {
        assert!(c[k].is_f64(), "{k}");
    }
    assert_eq!(v["allocations"], 10);
    assert_eq!(v["peak_live_objects"], 6);
}

#[test]
fn every_bad_vector_names_file_offset_and_events_and_exits_nonzero() {
    let dir = root().join("testdata/vectors");
    for e in std::fs::read_dir(&dir).unwrap() {
        let p = e.unwrap().path();
        if p.extension().and_then(|x| x.to_str()) != Some("err") {
            continue;
        }
        let spec = std::fs::read_to_string(&p).unwrap();
        let offset = spec.split_whitespace().find_map(|w| w.strip_prefix("offset=")).unwrap();
        let events = spec.split_whitespace().find_map(|w| w.strip_prefix("events=")).unwrap();
        let trace = p.with_extension("hltrace");
        for cmd in [vec!["stats"], vec!["convert"]] {
            let mut args: Vec<&str> = cmd.clone();
            let t = trace.to_str().unwrap();
            args.push(t);
            let txt = std::env::temp_dir().join("heaplab-cli-test.txt");
            if cmd[0] == "convert" {
                args.push(txt.to_str().unwrap());
            }
            let out = heaplab(&args);
            let err = text(&out.stderr);
            assert!(!out.status.success(), "{} on {}: exit 0", cmd[0], trace.display());
            assert!(
                out.status.code().is_some(),
                "{} on {} died of a signal",
                cmd[0],
                trace.display()
            );
            assert!(err.contains(t), "{} on {}: no file name in {err}", cmd[0], trace.display());
            assert!(err.contains(&format!("byte {offset}:")), "{}: {err}", trace.display());
            assert!(
                err.contains(&format!("({events} events read before this point)")),
                "{}: {err}",
                trace.display()
            );
            assert!(!err.contains("panicked"), "{err}");
        }
    }
}

#[test]
fn convert_round_trips_rep_and_dump() {
    let tmp = std::env::temp_dir().join(format!("heaplab-cli-{}", std::process::id()));
    std::fs::create_dir_all(&tmp).unwrap();
    let rep = tmp.join("a.rep");
    std::fs::write(&rep, "1000\n3\n5\n1\na 0 100\na 1 200\nr 0 300\nf 1\nf 0\n").unwrap();
    let t = tmp.join("a.hltrace");
    let back = tmp.join("b.rep");
    let dump = tmp.join("a.txt");
    let t2 = tmp.join("c.hltrace");
    for args in [
        vec!["convert", rep.to_str().unwrap(), t.to_str().unwrap()],
        vec!["convert", t.to_str().unwrap(), back.to_str().unwrap()],
        vec!["convert", t.to_str().unwrap(), dump.to_str().unwrap()],
        vec!["convert", dump.to_str().unwrap(), t2.to_str().unwrap()],
    ] {
        let out = heaplab(&args);
        assert!(out.status.success(), "{args:?}: {}", text(&out.stderr));
    }
    // The peak live bytes (300 + 200) become the suggested heap size.
    assert_eq!(
        std::fs::read_to_string(&back).unwrap(),
        "500\n2\n5\n1\na 0 100\na 1 200\nr 0 300\nf 1\nf 0\n"
    );
    let a = heaplab(&["stats", t.to_str().unwrap(), "--json"]);
    let c = heaplab(&["stats", t2.to_str().unwrap(), "--json"]);
    assert_eq!(
        text(&a.stdout).replace(t.to_str().unwrap(), ""),
        text(&c.stdout).replace(t2.to_str().unwrap(), "")
    );
}

#[test]
fn bad_flags_say_what_would_have_been_right() {
    let out = heaplab(&["stats", "--unit", "12", "x.hltrace"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out.stderr).contains("power of two"), "{}", text(&out.stderr));
    let out = heaplab(&["convert", "a.foo", "b.rep"]);
    assert!(text(&out.stderr).contains("use .hltrace, .rep, .script or .txt"));
    let out = heaplab(&["stats", "--weighting", "bytes", "x"]);
    assert!(text(&out.stderr).contains("runs") && text(&out.stderr).contains("allocations"));
}

/// One convention (issue 18): `--json [FILE]` with no FILE, or `-`, is
/// standard output (`compare --json -` used to write a file named `-`); a
/// FILE is written; an input taken for the flag's value is refused, not
/// overwritten.
#[test]
fn json_with_no_file_or_a_dash_goes_to_stdout() {
    let d = std::env::temp_dir().join(format!("heaplab-cli-json-{}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    let v = root().join("testdata/vectors/basic.hltrace");
    let v = v.to_str().unwrap();
    let compare = ["compare", "--allocators", "glibc", "--repeat", "0", "--no-instructions"];
    for json in [&["--json"][..], &["--json", "-"][..]] {
        let o = Command::new(env!("CARGO_BIN_EXE_heaplab"))
            .current_dir(&d)
            .args(compare)
            .arg(v)
            .args(json)
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", text(&o.stderr));
        let recs: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
        assert_eq!(recs[0]["allocator"], "glibc");
        // the table went to stderr, and no file named `-` was made
        assert!(text(&o.stderr).contains("glibc"), "{}", text(&o.stderr));
        assert!(!d.join("-").exists());
    }
    let f = d.join("s.json");
    let o = heaplab(&["stats", v, "--json", f.to_str().unwrap()]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    assert!(
        text(&o.stdout).contains("allocations"),
        "the table goes to stdout when JSON goes to a file"
    );
    let _: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&f).unwrap()).unwrap();
    // `stats --json a.hltrace b.hltrace`: clap takes a.hltrace as the FILE
    let before = std::fs::read(v).unwrap();
    let o = heaplab(&["stats", "--json", v, v]);
    assert!(!o.status.success());
    assert!(text(&o.stderr).contains("that is an input"), "{}", text(&o.stderr));
    assert_eq!(std::fs::read(v).unwrap(), before);
    let _ = std::fs::remove_dir_all(&d);
}

/// Completions and man pages come from the command's own flags.
#[test]
fn completions_and_man_pages_are_generated() {
    let o = heaplab(&["completions", "bash"]);
    assert!(o.status.success());
    let s = text(&o.stdout);
    assert!(s.contains("heaplab") && s.contains("--stack-depth"), "{}", &s[..s.len().min(300)]);
    let d = std::env::temp_dir().join(format!("heaplab-cli-man-{}", std::process::id()));
    let o = heaplab(&["man", d.to_str().unwrap()]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let page = std::fs::read_to_string(d.join("heaplab-record.1")).unwrap();
    assert!(page.contains(".TH") && page.contains("stack\\-depth"), "{page}");
    assert!(d.join("heaplab.1").exists());
    let _ = std::fs::remove_dir_all(&d);
}
