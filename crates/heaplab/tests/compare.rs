//! `heaplab compare`, `compare --live` and `lab` end to end: the JSON against
//! the schema documented in docs/compare.md, figures whose true answer is
//! known (peak live bytes of a generated trace; the instructions of the bump
//! allocator's malloc and free, counted from its disassembly), a missing peer
//! reported rather than skipped, and the lab's verdicts on broken allocators.
//! Needs the native build (`make -C native`).

use heaplab_trace::{End, Kind, Meta, NewEvent, TraceWriter, WriterOptions};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

mod common;
use common::{root, tmp};

fn built(rel: &str) -> PathBuf {
    let p = root().join(rel);
    assert!(p.exists(), "{} is not built: run `make -C native` first", p.display());
    p
}

fn heaplab(args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut c = Command::new(env!("CARGO_BIN_EXE_heaplab"));
    // compare keeps each measurement's outcome (for --resume) under the cache
    // directory: this process's own, shared by its tests and removed at exit
    c.args(args)
        .env_remove("LD_PRELOAD")
        .env("XDG_CACHE_HOME", common::process_tmp().join("cache"));
    for (k, v) in env {
        c.env(k, v);
    }
    c.output().unwrap()
}

/// (field, type) rows of the table between `<!-- schema:NAME -->` and `<!-- /schema -->`.
fn schema(name: &str) -> Vec<(String, String)> {
    let doc = std::fs::read_to_string(root().join("docs/compare.md")).unwrap();
    let start = doc.find(&format!("<!-- schema:{name} -->")).expect("schema marker");
    let body = &doc[start..];
    let body = &body[..body.find("<!-- /schema -->").unwrap()];
    body.lines()
        .filter(|l| l.starts_with("| `"))
        .map(|l| {
            let cells: Vec<&str> = l.split('|').map(str::trim).collect();
            (cells[1].trim_matches('`').to_string(), cells[2].to_string())
        })
        .collect()
}

fn type_ok(v: &Value, ty: &str) -> bool {
    let (base, nullable) = match ty.strip_suffix(" or null") {
        Some(b) => (b, true),
        None => (ty, false),
    };
    if v.is_null() {
        return nullable;
    }
    match base {
        "string" => v.is_string(),
        "integer" => v.is_u64() || v.is_i64(),
        "number" => v.is_number(),
        "boolean" => v.is_boolean(),
        "array of number" => v.as_array().is_some_and(|a| a.iter().all(Value::is_number)),
        "array of string" => v.as_array().is_some_and(|a| a.iter().all(Value::is_string)),
        t => panic!("docs/compare.md uses an unknown type {t:?}"),
    }
}

/// The keys of each object of a JSON array of objects, in the order the text
/// has them (serde_json's Value sorts them).
fn key_order(text: &str) -> Vec<Vec<String>> {
    let (mut out, mut depth, mut i) = (Vec::new(), 0, 0);
    let b = text.as_bytes();
    while i < b.len() {
        match b[i] {
            b'{' | b'[' => {
                depth += 1;
                if b[i] == b'{' && depth == 2 {
                    out.push(Vec::new());
                }
            }
            b'}' | b']' => depth -= 1,
            b'"' => {
                let start = i + 1;
                i += 1;
                while b[i] != b'"' {
                    i += if b[i] == b'\\' { 2 } else { 1 };
                }
                let mut j = i + 1;
                while b[j] == b' ' {
                    j += 1;
                }
                if depth == 2 && b[j] == b':' {
                    out.last_mut().unwrap().push(text[start..i].to_string());
                }
            }
            _ => {}
        }
        i += 1;
    }
    out
}

/// The text of a compare document's records array (its last field), or the
/// whole text where the output is a bare array (lab's).
fn records_text(text: &str) -> &str {
    match text.find("\n  \"records\": [") {
        Some(i) => &text[text[i..].find('[').unwrap() + i..=text.rfind(']').unwrap()],
        None => text,
    }
}

/// Every record has exactly the documented fields, in order, of the documented types.
fn check_schema(text: &str, name: &str) {
    if name != "lab" {
        common::records_of(&serde_json::from_str(text).unwrap());
    }
    let text = records_text(text);
    let fields = schema(name);
    assert!(fields.len() > 5, "schema {name} parsed");
    let want: Vec<String> = fields.iter().map(|f| f.0.clone()).collect();
    for keys in key_order(text) {
        assert_eq!(keys, want, "the {name} record's fields and their order are docs/compare.md's");
    }
    let records: Value = serde_json::from_str(text).unwrap();
    for r in records.as_array().unwrap() {
        let obj = r.as_object().unwrap();
        for (f, ty) in &fields {
            assert!(type_ok(&obj[f], ty), "{name}.{f} = {} is not {ty}", obj[f]);
        }
    }
}

/// Mallocs of 1..=200 bytes, each freed 5 allocations later: the peak of live
/// bytes is the largest sum of 6 consecutive sizes.
fn bump_trace(path: &Path, n: u64) -> u64 {
    let meta = Meta { pid: 1, pointer_size: 8, time_unit_ns: 1, ..Meta::default() };
    let mut w = TraceWriter::new(Vec::new(), &meta, WriterOptions::default()).unwrap();
    let t = w.add_thread(1, "main");
    let mut ids = Vec::new();
    let (mut live, mut peak) = (0u64, 0u64);
    let size = |i: u64| 1 + i % 200;
    for i in 0..n {
        ids.push(w.record(&NewEvent::alloc(Kind::Malloc, size(i)).at(t, i)).unwrap().unwrap());
        live += size(i);
        peak = peak.max(live);
        if i >= 5 {
            w.record(&NewEvent::free(ids[(i - 5) as usize]).at(t, i)).unwrap();
            live -= size(i - 5);
        }
    }
    std::fs::write(path, w.finish(&End::default()).unwrap()).unwrap();
    peak
}

/// Instructions of `func` in `so` from its entry to its first `ret`.
fn objdump_count(so: &Path, func: &str) -> u64 {
    let out = Command::new("objdump").args(["-d", "--no-show-raw-insn"]).arg(so).output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    let body = text.split(&format!("<{func}>:\n")).nth(1).unwrap();
    let mut n = 0;
    for line in body.lines().take_while(|l| !l.trim().is_empty()) {
        n += 1;
        if line.split_whitespace().any(|w| w == "ret") {
            return n;
        }
    }
    panic!("no ret in {func}")
}

#[test]
fn compare_json_follows_the_schema_and_known_answers_hold() {
    let d = tmp("schema");
    let trace = d.0.join("bump.hltrace");
    let peak = bump_trace(&trace, 3000);
    let bump = built("build/lib/libheaplab-test-bump.so");
    let (json, csv, rep) = (d.0.join("c.json"), d.0.join("c.csv"), d.0.join("report"));
    let out = heaplab(
        &[
            "compare",
            trace.to_str().unwrap(),
            "--allocators",
            &format!("bump={}", bump.display()),
            "--allocators",
            "glibc",
            "--repeat",
            "2",
            "--json",
            json.to_str().unwrap(),
            "--csv",
            csv.to_str().unwrap(),
            "--report",
            rep.to_str().unwrap(),
        ],
        &[],
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}\n{}", String::from_utf8_lossy(&out.stderr));
    let text = std::fs::read_to_string(&json).unwrap();
    check_schema(&text, "compare");
    let v: Value = serde_json::from_str(&text).unwrap();
    let recs = common::records_of(&v);
    let b = recs.iter().find(|r| r["allocator"] == "bump").unwrap();
    let g = recs.iter().find(|r| r["allocator"] == "glibc").unwrap();
    assert_eq!(b["status"], "ok");
    assert_eq!(b["source"], "custom");
    assert_eq!(b["events"], 3000 + 2995);
    assert_eq!(b["mallocs"], 3000);
    assert_eq!(b["frees"], 2995);
    assert_eq!(b["peak_live_bytes"], peak, "peak live bytes of the generated trace");
    assert_eq!(g["peak_live_bytes"], peak);
    // The bump allocator's malloc is straight-line code: callgrind must count
    // exactly its instructions, on every call.
    assert_eq!(b["instr_per_malloc"].as_f64().unwrap(), objdump_count(&bump, "malloc") as f64);
    assert_eq!(b["instr_per_free"].as_f64().unwrap(), objdump_count(&bump, "free") as f64);
    assert_eq!(
        b["alloc_instructions"],
        3000 * objdump_count(&bump, "malloc") + 2995 * objdump_count(&bump, "free")
    );
    assert!(b["instr_per_realloc"].is_null(), "no realloc in the trace");
    assert_eq!(b["share_basis"], "replay");
    let share = b["alloc_instr_share"].as_f64().unwrap();
    assert!(share > 0.0 && share < 1.0);
    assert_eq!(g["wall_ratio_glibc"].as_f64().unwrap(), 1.0);
    assert_eq!(b["wall_runs_s"].as_array().unwrap().len(), 2);
    // CPU time beside each timing run: a one-thread replay's CPU time is at
    // most its wall time (plus a clock tick's rounding)
    let cpu = b["cpu_runs_s"].as_array().unwrap();
    assert_eq!(cpu.len(), 2);
    for (c, w) in cpu.iter().zip(b["wall_runs_s"].as_array().unwrap()) {
        let (c, w) = (c.as_f64().unwrap(), w.as_f64().unwrap());
        assert!(c > 0.0 && c <= w + 1e-3, "cpu {c} s, wall {w} s");
    }
    assert_eq!(g["cpu_ratio_glibc"].as_f64().unwrap(), 1.0);
    // the bump allocator never reuses memory: at least every byte of every block ever allocated
    assert!(b["peak_rss_growth_bytes"].as_u64().unwrap() >= 3000 * 16);
    assert_eq!(b["footprint_source"], "rss_touch");
    let u = b["utilization"].as_f64().unwrap();
    assert!(u > 0.0 && u < 0.5, "bump's utilization is poor: {u}");
    // CSV: the documented fields, in order, as its header
    let csv = std::fs::read_to_string(&csv).unwrap();
    let header: Vec<String> = schema("compare").into_iter().map(|f| f.0).collect();
    assert_eq!(csv.lines().next().unwrap(), header.join(","));
    assert_eq!(csv.lines().count(), 1 + recs.len());
    // the report: one page, figures inline, nothing fetched
    let html = std::fs::read_to_string(rep.join("report.html")).unwrap();
    assert!(html.matches("<svg").count() >= 5, "five figures");
    assert!(html.contains("bump") && html.contains("Instructions per malloc"));
    // inline scripts only (the tables sort); nothing loaded from elsewhere
    assert!(!html.contains("<script src") && !html.contains("src=") && !html.contains("<link"));
    assert!(html.contains("aria-sort"), "sortable tables");
    // the terminal table names both
    assert!(stdout.contains("bump") && stdout.contains("glibc"));
}

#[test]
fn a_missing_peer_is_reported_not_skipped() {
    let d = tmp("missing");
    let trace = d.0.join("t.hltrace");
    bump_trace(&trace, 200);
    let json = d.0.join("c.json");
    let out = heaplab(
        &[
            "compare",
            trace.to_str().unwrap(),
            "--allocators",
            "glibc,jemalloc",
            "--no-instructions",
            "--repeat",
            "1",
            "--json",
            json.to_str().unwrap(),
        ],
        &[("HEAPLAB_PEER_DIRS", "/nonexistent/lib")],
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "a missing peer fails the run: {stdout}");
    assert!(
        stdout.contains("jemalloc")
            && stdout.contains("MISSING")
            && stdout.contains("apt-get install libjemalloc2"),
        "{stdout}"
    );
    let text = std::fs::read_to_string(&json).unwrap();
    check_schema(&text, "compare");
    let v: Value = serde_json::from_str(&text).unwrap();
    let recs = common::records_of(&v);
    let j = recs.iter().find(|r| r["allocator"] == "jemalloc").unwrap();
    assert_eq!(j["status"], "missing");
    assert!(j["wall_s"].is_null() && j["peak_footprint_bytes"].is_null());
    let g = recs.iter().find(|r| r["allocator"] == "glibc").unwrap();
    assert_eq!(g["status"], "ok");
    assert!(g["instr_per_malloc"].is_null(), "--no-instructions");
}

#[test]
fn bad_traces_and_flags_get_clear_errors() {
    let v = root().join("testdata/vectors/bitflip.hltrace");
    let out = heaplab(&["compare", v.to_str().unwrap(), "--allocators", "glibc"], &[]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        err.contains("bitflip.hltrace: byte 444") && err.contains("checksum mismatch"),
        "{err}"
    );
    let out = heaplab(&["compare", v.to_str().unwrap(), "--allocators", "nosuch"], &[]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("no allocator \"nosuch\"") && err.contains("jemalloc"), "{err}");
    let out = heaplab(&["compare", "--live"], &[]);
    assert!(String::from_utf8_lossy(&out.stderr).contains("no program given"));
    let out = heaplab(&["lab", "/no/such.rep"], &[]);
    assert!(String::from_utf8_lossy(&out.stderr).contains("/no/such.rep"));
}

#[test]
fn threads_replay_as_recorded_or_serially() {
    let d = tmp("threads");
    let trace = root().join("testdata/vectors/basic.hltrace"); // events on several threads
    let json = d.0.join("t.json");
    let run = |extra: &[&str]| {
        let mut args = vec![
            "compare",
            trace.to_str().unwrap(),
            "--allocators",
            "glibc,firstfit",
            "--repeat",
            "1",
            "--no-instructions",
            "--json",
            json.to_str().unwrap(),
        ];
        args.extend_from_slice(extra);
        let out = heaplab(&args, &[]);
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        common::records(&json)
    };
    for r in run(&[]) {
        assert_eq!(r["threads_mode"], "recorded", "{r}");
        assert_eq!(r["thread_wait"], "futex", "the replayer's default: {r}");
        assert!(r["replay_threads"].as_u64().unwrap() >= 2, "{r}");
        // the zoo's shim counts its lock's contention (how much depends on
        // the scheduling); glibc does not count it
        if r["allocator"] == "firstfit" {
            let c = r["lock_contended"].as_u64().expect("firstfit counts its lock");
            let sleeps = r["lock_sleeps"].as_u64().expect("and its sleeps");
            let wait = r["lock_wait_s"].as_f64().expect("and the time waited");
            assert!(wait >= 0.0, "{r}");
            if c == 0 {
                assert!(sleeps == 0 && wait == 0.0, "no contention, no sleeps or wait: {r}");
            }
        } else {
            assert!(r["lock_contended"].is_null(), "{r}");
        }
    }
    for r in run(&["--wait", "spin"]) {
        assert_eq!(r["threads_mode"], "recorded", "{r}");
        assert_eq!(r["thread_wait"], "spin", "--wait reaches the replayer: {r}");
    }
    for r in run(&["--threads", "serial"]) {
        assert_eq!(r["threads_mode"], "serial", "{r}");
        assert!(r["thread_wait"].is_null(), "a serial replay waits for nobody: {r}");
        assert_eq!(r["replay_threads"], 1);
        // one thread never finds the lock held
        if r["allocator"] == "firstfit" {
            assert_eq!(r["lock_contended"], 0, "{r}");
            assert_eq!(r["lock_wait_s"], 0.0, "{r}");
        }
    }
    let out = heaplab(&["compare", trace.to_str().unwrap(), "--threads", "sideways"], &[]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("recorded"));
    let out = heaplab(&["compare", trace.to_str().unwrap(), "--wait", "doze"], &[]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("futex") && err.contains("spin"), "{err}");
}

#[test]
fn live_output_check_ignores_timing_lines_and_keeps_the_figures_of_rows_that_differ() {
    use std::os::unix::fs::PermissionsExt;
    let d = tmp("live-check");
    let input = d.0.join("in.txt");
    let text: String = (0..500).map(|i| format!("{}\n", (i * 7919) % 501)).collect();
    std::fs::write(&input, text).unwrap();
    // prints its input sorted, then its own "run time": a different line every run
    let prog = d.0.join("timed.sh");
    std::fs::write(&prog, "#!/bin/sh\nsort \"$1\"\necho \"Time was $$.$$ sec\"\n").unwrap();
    std::fs::set_permissions(&prog, std::fs::Permissions::from_mode(0o755)).unwrap();
    let json = d.0.join("live.json");
    let run = |extra: &[&str]| {
        let mut args = vec![
            "compare",
            "--live",
            "--no-instructions",
            "--allocators",
            "glibc,firstfit",
            "--repeat",
            "1",
            "--json",
            json.to_str().unwrap(),
        ];
        args.extend_from_slice(extra);
        args.extend_from_slice(&["--", prog.to_str().unwrap(), input.to_str().unwrap()]);
        let out = heaplab(&args, &[]);
        let v: Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap_or_default())
            .unwrap_or(Value::Null);
        (out, v)
    };
    // byte for byte: firstfit's row differs, is flagged, and keeps its figures
    let (out, v) = run(&[]);
    assert_eq!(out.status.code(), Some(1));
    check_schema(&std::fs::read_to_string(&json).unwrap(), "live");
    let recs = common::records_of(&v);
    let ff = recs.iter().find(|r| r["allocator"] == "firstfit").unwrap();
    assert_eq!(ff["status"], "output_differs", "{ff}");
    assert_eq!(ff["stdout_matches_glibc"], false);
    assert_eq!(ff["output_check"], "bytes");
    assert!(ff["wall_s"].as_f64().unwrap() > 0.0 && ff["peak_rss_bytes"].as_u64().unwrap() > 0);
    assert!(String::from_utf8_lossy(&out.stdout).contains("OUTPUT DIFFERS"));
    // the timing line ignored: clean
    let (out, v) = run(&["--ignore-lines", "^Time was [0-9.]+ sec$"]);
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    for r in &common::records_of(&v) {
        assert_eq!(r["status"], "ok", "{r}");
        assert_eq!(r["stdout_matches_glibc"], true);
        assert_eq!(r["output_check"], "filtered");
        assert_eq!(r["stdout_lines_ignored"], 1);
    }
    // a regex that matches nothing still differs
    let (out, v) = run(&["--ignore-lines", "^nothing$"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(common::records_of(&v).iter().any(|r| r["status"] == "output_differs"));
    // a filter command (argv, no shell) up to a lone ';'
    let (out, v) = run(&["--output-filter", "sed", "-e", "s/^Time was.*$//", ";"]);
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(common::records_of(&v).iter().all(|r| r["stdout_matches_glibc"] == true));
    // bad input: a clear error
    let (out, _) = run(&["--ignore-lines", "(unclosed"]);
    assert_ne!(out.status.code(), Some(0));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--ignore-lines \"(unclosed\""));
    let (out, _) = run(&["--output-filter", "/nonexistent/filter", ";"]);
    assert_ne!(out.status.code(), Some(0));
    assert!(String::from_utf8_lossy(&out.stderr).contains("cannot run /nonexistent/filter"));
}

#[test]
fn live_runs_the_program_and_compares_stdout() {
    let d = tmp("live");
    let input = d.0.join("in.txt");
    let text: String =
        (0..3000).map(|i| format!("line {} {}\n", (i * 7919) % 3001, "x".repeat(i % 40))).collect();
    std::fs::write(&input, text).unwrap();
    let bump = built("build/lib/libheaplab-test-bump.so");
    let json = d.0.join("live.json");
    let cost = d.0.join("t.hltrace.program.json");
    let out = heaplab(
        &[
            "compare",
            "--live",
            "--allocators",
            &format!("glibc,bump={}", bump.display()),
            "--repeat",
            "1",
            "--json",
            json.to_str().unwrap(),
            "--program-cost",
            cost.to_str().unwrap(),
            "--",
            "sort",
            input.to_str().unwrap(),
        ],
        &[],
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}{}", String::from_utf8_lossy(&out.stderr));
    let text = std::fs::read_to_string(&json).unwrap();
    check_schema(&text, "live");
    let v: Value = serde_json::from_str(&text).unwrap();
    let recs = common::records_of(&v);
    for r in &recs {
        assert_eq!(r["stdout_matches_glibc"], true, "{r}");
        assert_eq!(r["exit_code"], 0);
        let share = r["alloc_instr_share"].as_f64().unwrap();
        assert!(share > 0.0 && share < 1.0, "{share}");
        assert!(r["mallocs"].as_u64().unwrap() > 0);
    }
    let b = recs.iter().find(|r| r["allocator"] == "bump").unwrap();
    assert_eq!(b["instr_per_malloc"].as_f64().unwrap(), objdump_count(&bump, "malloc") as f64);
    // the program cost names glibc's counts, and a trace beside it uses them
    let c: Value = serde_json::from_str(&std::fs::read_to_string(&cost).unwrap()).unwrap();
    let g = recs.iter().find(|r| r["allocator"] == "glibc").unwrap();
    assert_eq!(c["program_instructions"], g["instructions"]);
    assert_eq!(c["alloc_instructions"], g["alloc_instructions"]);
    let trace = d.0.join("t.hltrace");
    bump_trace(&trace, 500);
    let cj = d.0.join("c.json");
    let out = heaplab(
        &[
            "compare",
            trace.to_str().unwrap(),
            "--allocators",
            "glibc",
            "--repeat",
            "1",
            "--no-footprint",
            "--json",
            cj.to_str().unwrap(),
        ],
        &[],
    );
    assert!(out.status.success());
    let v: Value = serde_json::from_str(&std::fs::read_to_string(&cj).unwrap()).unwrap();
    let recs = common::records_of(&v);
    let r = &recs[0];
    assert_eq!(r["share_basis"], "program");
    let a = r["alloc_instructions"].as_f64().unwrap();
    let outside = (c["program_instructions"].as_u64().unwrap()
        - c["alloc_instructions"].as_u64().unwrap()) as f64;
    assert!((r["alloc_instr_share"].as_f64().unwrap() - a / (a + outside)).abs() < 1e-12);
}

#[test]
fn lab_grades_correctness_utilization_and_score() {
    let d = tmp("lab");
    // a .rep: 400 blocks, each freed 10 allocations later, then a realloc chain
    let mut ops = Vec::new();
    for i in 0..400 {
        ops.push(format!("a {i} {}", 24 + (i % 5) * 8));
        if i >= 10 {
            ops.push(format!("f {}", i - 10));
        }
    }
    ops.push("r 399 1000".into());
    ops.push("r 399 10".into());
    let rep = d.0.join("t.rep");
    std::fs::write(&rep, format!("0\n400\n{}\n1\n{}\n", ops.len(), ops.join("\n"))).unwrap();
    let lib =
        |n: &str| format!("{n}={}", built(&format!("build/lib/libheaplab-test-{n}.so")).display());
    let out = heaplab(
        &[
            "lab",
            rep.to_str().unwrap(),
            "--allocators",
            &[lib("bump"), lib("overlap"), lib("corrupt"), "glibc".into()].join(","),
            "--repeat",
            "1",
            "--json",
        ],
        &[],
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}{}", String::from_utf8_lossy(&out.stderr));
    check_schema(&stdout, "lab");
    let v: Value = serde_json::from_str(&stdout).unwrap();
    let by = |n: &str| v.as_array().unwrap().iter().find(|r| r["allocator"] == n).unwrap().clone();
    for good in ["bump", "glibc"] {
        let r = by(good);
        assert_eq!(r["correct"], true, "{r}");
        assert_eq!(r["ops"], ops.len());
        let (u, t) = (r["utilization"].as_f64().unwrap(), r["throughput_ops"].as_f64().unwrap());
        assert!(u > 0.0 && u <= 1.0 && t > 0.0);
        let want = 0.6 * u + 0.4 * (t / 600_000.0).min(1.0);
        assert!((r["score"].as_f64().unwrap() - want).abs() < 1e-9, "{r}");
    }
    let o = by("overlap");
    assert_eq!(o["correct"], false);
    assert!(o["problem"].as_str().unwrap().contains("overlaps live object"), "{o}");
    assert_eq!(o["score"].as_f64(), Some(0.0));
    let c = by("corrupt");
    assert_eq!(c["correct"], false);
    assert!(c["problem"].as_str().unwrap().contains("damaged a live block"), "{c}");
    // the table form
    let out = heaplab(
        &["lab", rep.to_str().unwrap(), "--allocators", &lib("overlap"), "--repeat", "1"],
        &[],
    );
    let table = String::from_utf8_lossy(&out.stdout);
    assert!(table.contains("NO") && table.contains("correct 0/1"), "{table}");
}

#[test]
fn demo_records_then_compares() {
    let d = tmp("demo");
    let out = heaplab(
        &[
            "demo",
            "--out",
            d.0.to_str().unwrap(),
            "--workloads",
            "sqlite",
            "--scale",
            "0.05",
            "--allocators",
            "bsd,glibc",
            "--repeat",
            "1",
            "--no-instructions",
        ],
        &[],
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}{}", String::from_utf8_lossy(&out.stderr));
    assert!(
        stdout.contains("what each workload asks of malloc") && stdout.contains("every allocator"),
        "{stdout}"
    );
    let text = std::fs::read_to_string(d.0.join("compare.json")).unwrap();
    check_schema(&text, "compare");
    let recs = common::records_of(&serde_json::from_str(&text).unwrap());
    let names: Vec<&str> = recs.iter().map(|r| r["allocator"].as_str().unwrap()).collect();
    assert!(names.starts_with(&["bsd", "glibc"]), "{names:?}");
    assert!(recs.iter().all(|r| r["trace_name"] == "sqlite" && r["status"] == "ok"));
    assert!(d.0.join("traces/sqlite.hltrace").exists());
    assert!(std::fs::read_to_string(d.0.join("report/report.html")).unwrap().contains("<svg"));
}

#[test]
fn live_peak_rss_is_the_programs_own() {
    // 96 MiB touched by the program; wait4 would also count the pre-exec copy of heaplab
    let d = tmp("rss");
    let json = d.0.join("r.json");
    let out = heaplab(
        &[
            "compare",
            "--live",
            "--allocators",
            "glibc",
            "--no-instructions",
            "--repeat",
            "1",
            "--json",
            json.to_str().unwrap(),
            "--",
            "/usr/bin/python3",
            "-c",
            "b = bytearray(96 << 20); print(len(b))",
        ],
        &[],
    );
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    let v: Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let rss = v["records"][0]["peak_rss_bytes"].as_u64().unwrap();
    assert!(rss > 96 << 20 && rss < 160 << 20, "{rss}");
    // A program that touches almost nothing: wait4 would report heaplab's
    // own RSS at the spawn (about 5 MiB), the reporter about 1 MiB.
    let out = heaplab(
        &[
            "compare",
            "--live",
            "--allocators",
            "glibc",
            "--no-instructions",
            "--repeat",
            "1",
            "--json",
            json.to_str().unwrap(),
            "--",
            "/bin/true",
        ],
        &[],
    );
    assert_eq!(out.status.code(), Some(0));
    let v: Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let rss = v["records"][0]["peak_rss_bytes"].as_u64().unwrap();
    assert!(rss < 3 << 20, "/bin/true's own peak RSS, not heaplab's: {rss}");
}

/// Issue 17, class 6: a trace cut short, torn or followed by junk never gives
/// a clean-looking result: the rows say so (table, JSON, CSV), stderr says so,
/// and the exit status is not 0 unless the cut is accepted explicitly; a
/// trace with trailing junk is refused; one with no events gets no figures.
#[test]
fn cut_torn_and_junk_traces_never_look_clean() {
    let d = tmp("cut");
    let whole = d.0.join("whole.hltrace");
    bump_trace(&whole, 3000);
    let bytes = std::fs::read(&whole).unwrap();
    let write = |name: &str, b: &[u8]| {
        let p = d.0.join(name);
        std::fs::write(&p, b).unwrap();
        p.to_str().unwrap().to_string()
    };
    let torn = write("torn.hltrace", &bytes[..bytes.len() - 7]);
    let head = write("head.hltrace", &bytes[..200]);
    let mut j = bytes.clone();
    j.extend_from_slice(b"junk after the end\n");
    let junk = write("junk.hltrace", &j);
    let (json, csv) = (d.0.join("t.json"), d.0.join("t.csv"));
    let run = |trace: &str, extra: &[&str]| {
        let mut args = vec![
            "compare",
            trace,
            "--allocators",
            "glibc",
            "--no-instructions",
            "--repeat",
            "1",
            "--json",
            json.to_str().unwrap(),
            "--csv",
            csv.to_str().unwrap(),
        ];
        args.extend_from_slice(extra);
        heaplab(&args, &[])
    };

    let out = run(&torn, &[]);
    let (table, err) = (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert_eq!(out.status.code(), Some(1), "{table}{err}");
    assert!(table.contains("TRUNCATED at byte"), "{table}");
    assert!(err.contains("stop early") && err.contains("--allow-truncated"), "{err}");
    let v: Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let r = &v["records"][0];
    assert_eq!(r["truncated"], true, "{r}");
    let at = r["truncated_at_byte"].as_u64().unwrap();
    assert!(at > 16 && at < bytes.len() as u64, "{r}");
    assert_eq!(r["truncated_after_events"], r["events"], "{r}");
    assert!(r["events"].as_u64().unwrap() > 0);
    assert!(r["truncation"].as_str().unwrap().contains("truncated"), "{r}");
    let c = std::fs::read_to_string(&csv).unwrap();
    let head_row: Vec<&str> = c.lines().next().unwrap().split(',').collect();
    let col = head_row.iter().position(|h| *h == "truncated").unwrap();
    assert_eq!(c.lines().nth(1).unwrap().split(',').nth(col), Some("true"), "{c}");
    // Accepted explicitly: exit 0, and still marked.
    let out = run(&torn, &["--allow-truncated"]);
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    let v: Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    assert_eq!(v["records"][0]["truncated"], true);

    // Cut before the first event: no figures at all.
    let out = run(&head, &["--allow-truncated"]);
    assert_ne!(out.status.code(), Some(0));
    let v: Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    assert_eq!(v["records"][0]["status"], "empty", "{}", v["records"][0]);
    assert!(
        v["records"][0]["wall_s"].is_null() && v["records"][0]["utilization"].is_null(),
        "{}",
        v["records"][0]
    );

    // Junk after END is corruption, not a cut.
    let out = run(&junk, &["--allow-truncated"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("trailing data after the END block"), "{err}");

    // The course driver: the same rules, and every file reported.
    let rep0 = write("zero.rep", b"20000\n0\n0\n1\n");
    let bad = write("bad.rep", b"20000\n1\n1\n1\nq 0 8\n");
    let out = heaplab(
        &["lab", &torn, &rep0, &bad, &junk, "--allocators", "glibc", "--repeat", "1", "--json"],
        &[],
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{stdout}{}", String::from_utf8_lossy(&out.stderr));
    check_schema(&stdout, "lab");
    let v: Value = serde_json::from_str(&stdout).unwrap();
    let recs = v.as_array().unwrap();
    assert_eq!(recs.len(), 4, "{stdout}");
    assert_eq!(recs[0]["truncated"], true);
    assert!(recs[0]["score"].as_f64().is_some());
    assert!(
        recs[1]["score"].is_null() && recs[1]["error"].as_str().unwrap().contains("no operations")
    );
    assert_eq!(recs[2]["readable"], false);
    assert!(
        recs[2]["error"].as_str().unwrap().contains("line 5: unknown operation `q`"),
        "{}",
        recs[2]
    );
    assert_eq!(recs[3]["readable"], false);
    for r in recs {
        let t = r["throughput_ops"].as_f64().unwrap_or(0.0);
        assert!(t < 1e9, "an absurd throughput: {r}");
    }
}

/// Issue 17, class 12: the conventions of the CS:APP and 15-213 drivers are
/// read (with notes), not refused.
#[test]
fn lab_reads_course_files_as_mdriver_does() {
    let d = tmp("mdriver");
    let rep = d.0.join("c.rep");
    // 15-213 header (weight ids ops ignore-ranges) claiming 9 ops for 7, an `a`
    // without a size, `f -1`, a sparse id past the header's count.
    std::fs::write(&rep, "1\n2\n9\n0\na 0 64\na 5\nf -1\nf 0\na 9 16\nf 5\nf 9\n").unwrap();
    let out = heaplab(
        &["lab", rep.to_str().unwrap(), "--allocators", "glibc", "--repeat", "1", "--json"],
        &[],
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}{}", String::from_utf8_lossy(&out.stderr));
    let v: Value = serde_json::from_str(&stdout).unwrap();
    let r = &v[0];
    assert_eq!(r["correct"], true, "{r}");
    assert_eq!(r["ops"], 6, "{r}"); // f -1 is not an event
    let notes: Vec<&str> =
        r["notes"].as_array().unwrap().iter().map(|n| n.as_str().unwrap()).collect();
    assert!(notes.iter().any(|n| n.contains("previous size")), "{notes:?}");
    assert!(notes.iter().any(|n| n.contains("frees NULL")), "{notes:?}");
    assert!(notes.iter().any(|n| n.contains("says 9 operations")), "{notes:?}");
    assert!(notes.iter().any(|n| n.contains("id 5 is not below")), "{notes:?}");
}
