//! What the command prints and how it exits, on the shared vectors.

use std::process::{Command, Output};

mod common;
use common::{root, text};

fn heaplab(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_heaplab")).current_dir(root()).args(args).output().unwrap()
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
            let scratch = common::tmp("cli-vectors");
            let txt = scratch.join("out.txt");
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
    let tmp_guard = common::tmp("cli");
    let tmp = tmp_guard.0.clone();
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

/// Issue 17, class 7: sizes that add up past 2^64 stop at 2^64-1 and say so;
/// two malloc(2^63) gave `bytes_allocated 0`.
#[test]
fn sums_of_sizes_saturate_and_say_so() {
    use heaplab_trace::{End, Kind, Meta, NewEvent, TraceWriter, WriterOptions};
    let meta = Meta { pid: 1, pointer_size: 8, time_unit_ns: 1, ..Meta::default() };
    let mut w = TraceWriter::new(Vec::new(), &meta, WriterOptions::default()).unwrap();
    let t = w.add_thread(1, "main");
    w.record(&NewEvent::alloc(Kind::Malloc, 1 << 63).at(t, 0)).unwrap();
    w.record(&NewEvent::alloc(Kind::Malloc, 1 << 63).at(t, 1)).unwrap();
    w.record(&NewEvent::alloc(Kind::Malloc, u64::MAX).at(t, 2)).unwrap();
    let dir_guard = common::tmp("cli-sat");
    let dir = dir_guard.0.clone();
    let p = dir.join("big.hltrace");
    std::fs::write(&p, w.finish(&End::default()).unwrap()).unwrap();
    let out = heaplab(&["stats", p.to_str().unwrap(), "--json"]);
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["bytes_allocated"].as_u64(), Some(u64::MAX), "{v}");
    assert_eq!(v["peak_live_bytes"].as_u64(), Some(u64::MAX), "{v}");
    let sat: Vec<&str> =
        v["saturated"].as_array().unwrap().iter().map(|s| s.as_str().unwrap()).collect();
    assert!(sat.contains(&"bytes_allocated") && sat.contains(&"peak_live_bytes"), "{sat:?}");
    assert!(v["size_classes"]
        .as_array()
        .unwrap()
        .iter()
        .all(|c| c["size"].as_u64().unwrap() >= 1 << 63));
    assert!(text(&out.stderr).contains("stopped there"), "{}", text(&out.stderr));
    let out = heaplab(&["stats", p.to_str().unwrap()]);
    assert!(text(&out.stdout).contains("(saturated)"), "{}", text(&out.stdout));
    let _ = std::fs::remove_dir_all(&dir);
}

/// Issue 17, class 11: bytes are bytes. Paths, names and arguments that are
/// not UTF-8 (or hold control characters) come back byte for byte after
/// .txt -> .hltrace -> .txt -> .hltrace, and reach the terminal escaped.
#[test]
fn bytes_survive_every_form_and_reach_the_terminal_escaped() {
    let tmp_guard = common::tmp("cli-bytes");
    let tmp = tmp_guard.0.clone();
    let dump = "hltrace 1\n\
        meta pid=7 ppid=- start_ns=0 pointer_size=8 endian=little time_unit_ns=1 stack_depth=0\n\
        meta argv=\"prog\\xae\" \"\\x1b[31mred\\x07\" \"caf\\xc3\\xa9\"\n\
        meta recorder=\"r\\xff\" executable=\"/bin/\\xae\\xff\" options=\"o\\x01\" clock=\"c\\xfe\" parent_pid=-\n\
        module 1 base=0x1000 size=0x1000 path=\"/lib/\\xae\\x1b.so\" build_id=ab\n\
        stack 1 frames=1:0x10\n\
        thread 0 tid=7 name=\"\\xae\\x1bname\"\n\
        event 0 malloc thread=0 time=0 id=0 size=24 stack=1\n\
        event 1 free thread=0 time=1 old=0 size=24 stack=0\n\
        end reason=exit status=0 end_ns=5 events=2 objects=1 unrecorded=0 unknown_frees=0\n";
    let (a, t1, b, t2) =
        (tmp.join("a.txt"), tmp.join("a.hltrace"), tmp.join("b.txt"), tmp.join("b.hltrace"));
    std::fs::write(&a, dump).unwrap();
    for (i, o) in [(&a, &t1), (&t1, &b), (&b, &t2)] {
        let out = heaplab(&["convert", i.to_str().unwrap(), o.to_str().unwrap(), "--no-compress"]);
        assert!(out.status.success(), "{}", text(&out.stderr));
    }
    assert_eq!(std::fs::read_to_string(&b).unwrap(), dump);
    assert_eq!(std::fs::read(&t1).unwrap(), std::fs::read(&t2).unwrap());
    // stats prints the command line: no raw ESC or BEL reaches the terminal.
    let out = heaplab(&["stats", t1.to_str().unwrap()]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let s = text(&out.stdout);
    assert!(!s.contains('\x1b') && !s.contains('\x07'), "{s:?}");
    assert!(s.contains("\\x1b[31mred\\x07"), "{s}");
    let _ = std::fs::remove_dir_all(&tmp);
}

/// Issue 17, class 12: convert leaves nothing behind after an error (the
/// output is written under a temporary name and renamed when whole), unless
/// --partial asks for what was readable.
#[test]
fn convert_leaves_no_partial_output() {
    let tmp_guard = common::tmp("cli-partial");
    let tmp = tmp_guard.0.clone();
    let cut = root().join("testdata/vectors/torn-payload.hltrace");
    let out_txt = tmp.join("out.txt");
    let out = heaplab(&["convert", cut.to_str().unwrap(), out_txt.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
    assert!(text(&out.stderr).contains("not written"), "{}", text(&out.stderr));
    let left: Vec<_> = std::fs::read_dir(&tmp).unwrap().map(|e| e.unwrap().file_name()).collect();
    assert!(left.is_empty(), "left behind: {left:?}");
    // A bad .rep: the same.
    let rep = tmp.join("bad.rep");
    std::fs::write(&rep, "20000\n1\n3\n1\na 0 8\nf 0\nz 1\n").unwrap();
    let out_t = tmp.join("bad.hltrace");
    let out = heaplab(&["convert", rep.to_str().unwrap(), out_t.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1));
    assert!(text(&out.stderr).contains("line 7: unknown operation `z`"), "{}", text(&out.stderr));
    assert!(!out_t.exists());
    // --partial keeps what was readable.
    let out = heaplab(&["convert", cut.to_str().unwrap(), out_txt.to_str().unwrap(), "--partial"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(std::fs::read_to_string(&out_txt).unwrap().starts_with("hltrace 1\n"));
    let left = std::fs::read_dir(&tmp).unwrap().count();
    assert_eq!(left, 2, "bad.rep and out.txt only");
    // A link at the output is not written through.
    let target = tmp.join("target");
    std::fs::write(&target, "keep").unwrap();
    let link = tmp.join("link.txt");
    std::os::unix::fs::symlink(&target, &link).unwrap();
    let good = root().join("testdata/vectors/basic.hltrace");
    let out = heaplab(&["convert", good.to_str().unwrap(), link.to_str().unwrap()]);
    assert_ne!(out.status.code(), Some(0));
    assert_eq!(std::fs::read_to_string(&target).unwrap(), "keep");
    let _ = std::fs::remove_dir_all(&tmp);
}

/// One convention (issue 18): `--json [FILE]` with no FILE, or `-`, is
/// standard output (`compare --json -` used to write a file named `-`); a
/// FILE is written; an input taken for the flag's value is refused, not
/// overwritten.
#[test]
fn json_with_no_file_or_a_dash_goes_to_stdout() {
    let d_guard = common::tmp("cli-json");
    let d = d_guard.0.clone();
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
        assert_eq!(recs["records"][0]["allocator"], "glibc");
        assert_eq!(recs["schema"], "heaplab.compare");
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
    let d_guard = common::tmp("cli-man");
    let d = d_guard.0.clone();
    let d = d.join("man");
    let o = heaplab(&["man", d.to_str().unwrap()]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let page = std::fs::read_to_string(d.join("heaplab-record.1")).unwrap();
    assert!(page.contains(".TH") && page.contains("stack\\-depth"), "{page}");
    assert!(d.join("heaplab.1").exists());
    let _ = std::fs::remove_dir_all(&d);
}
