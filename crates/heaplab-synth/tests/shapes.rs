//! Every shape of generated allocator compiles (warnings are errors) and
//! passes the zoo's conformance test and random operation sequences: fast and
//! general lists together, tests in order or a size map, only general lists
//! (Table 5's all-general: no front end), only fast lists; and every usable
//! byte is the caller's (tests/c/usable.c). The traces are
//! written here, so each shape is made on purpose. Needs the native build
//! (`make -C native`) for the test programs.

use heaplab_synth::plan::{Allocator, Dispatch, Options, Variant};
use heaplab_synth::{synthesize, Outcome, Request};
use heaplab_trace::{End, Kind, Meta, NewEvent, TraceWriter, WriterOptions};
use std::collections::VecDeque;
use std::path::{Path, PathBuf};
use std::process::Command;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..").canonicalize().unwrap()
}

fn test_bin(name: &str) -> PathBuf {
    let p = root().join("build/bin").join(name);
    assert!(p.exists(), "{} is not built: run `make -C native` first", p.display());
    p
}

struct Tmp(PathBuf);
impl Drop for Tmp {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn tmp(name: &str) -> Tmp {
    let prefix = format!("heaplab-synth-shapes-{name}-");
    Tmp(heaplab_plumb::scratch::mkdtemp(&std::env::temp_dir(), &prefix).unwrap())
}

/// A trace with: many short-lived 24-byte objects (MAKE-like), an episodic
/// 64-byte class (a burst freed at once, then short lives: ESPRESSO), 8-byte
/// objects never freed, and a spread of other sizes (outliers).
fn write_trace(path: &Path, seed: u64) {
    let meta = Meta {
        pid: 1,
        pointer_size: 8,
        time_unit_ns: 1000,
        argv: vec![b"shapes".to_vec()],
        ..Meta::default()
    };
    let f = std::io::BufWriter::new(std::fs::File::create(path).unwrap());
    let mut w = TraceWriter::new(f, &meta, WriterOptions::default()).unwrap();
    let t = w.add_thread(1, "main");
    let mut time = 0;
    let mut alloc = |w: &mut TraceWriter<_>, size: u64| {
        time += 1;
        w.record(&NewEvent::alloc(Kind::Malloc, size).at(t, time)).unwrap().unwrap()
    };
    let free = |w: &mut TraceWriter<_>, id: u64| {
        w.record(&NewEvent::free(id).at(t, 0)).unwrap();
    };
    let mut q = VecDeque::new();
    let mut x = seed | 1;
    for i in 0..60_000u64 {
        q.push_back(alloc(&mut w, 17 + i % 8));
        if q.len() > 3000 {
            let id = q.pop_front().unwrap();
            free(&mut w, id);
        }
        if i % 10 == 0 {
            alloc(&mut w, 8);
        }
        if i % 7 == 0 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let id = alloc(&mut w, 100 + x % 3000);
            free(&mut w, id);
        }
    }
    let burst: Vec<u64> = (0..6000).map(|_| alloc(&mut w, 60)).collect();
    for id in burst {
        free(&mut w, id);
    }
    for _ in 0..30_000 {
        let id = alloc(&mut w, 64);
        free(&mut w, id);
    }
    w.finish(&End::default()).unwrap();
}

fn build(dir: &Path, traces: &[PathBuf], options: Options) -> Outcome {
    synthesize(&Request {
        traces: traces.to_vec(),
        options,
        out_dir: dir.join("out"),
        layout: heaplab_plumb::Layout::checkout(&root()),
        command_line: "heaplab synth (test)".into(),
    })
    .unwrap_or_else(|e| panic!("{e:#}"))
}

fn run_ok(so: &Path, prog: &str, args: &[&str], env: &[(&str, &str)]) {
    let mut c = Command::new(test_bin(prog));
    c.args(args).env("LD_PRELOAD", so);
    for (k, v) in env {
        c.env(k, v);
    }
    let out = c.output().unwrap();
    assert!(
        out.status.success(),
        "{prog} {args:?} {env:?} on {} failed ({}):\n{}{}",
        so.display(),
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// tests/c/NAME.c, built into `dir` with `libs` after the source.
fn c_prog(dir: &Path, name: &str, libs: &[&str]) -> PathBuf {
    let exe = dir.join(name);
    let src = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(format!("tests/c/{name}.c"));
    let st = Command::new("gcc")
        .args(["-O1", "-fno-builtin", "-Wall", "-o"])
        .arg(&exe)
        .arg(&src)
        .args(libs)
        .status()
        .unwrap();
    assert!(st.success(), "cannot build {}", src.display());
    exe
}

/// tests/c/usable.c, built once per test into `dir`.
fn usable_prog(dir: &Path) -> PathBuf {
    c_prog(dir, "usable", &["-ldl"])
}

/// Another thread's free of a fast block is pushed for its owner; one of a
/// pointer that is no block's start on the 16-byte grain, or that lies above
/// the slabs its class has taken, stops the program with a fatal error.
fn check_remote_frees(so: &Path, prog: &Path) {
    let run = |off: &str| Command::new(prog).arg(off).env("LD_PRELOAD", so).output().unwrap();
    let ok = run("0");
    assert!(
        ok.status.success() && ok.stdout == b"freed\n",
        "a remote free on {}: {}{}",
        so.display(),
        String::from_utf8_lossy(&ok.stdout),
        String::from_utf8_lossy(&ok.stderr)
    );
    for off in ["8", "67108864"] {
        let bad = run(off);
        let err = String::from_utf8_lossy(&bad.stderr);
        assert!(
            !bad.status.success()
                && bad.stdout.is_empty()
                && err.contains("not a block of this allocator"),
            "a remote free of the block's address + {off} on {} was not stopped: {}, {err}",
            so.display(),
            bad.status
        );
    }
}

fn check(o: &Outcome, usable: &Path) {
    let so = &o.built.so;
    let out = Command::new(usable).env("LD_PRELOAD", so).output().unwrap();
    assert!(
        out.status.success(),
        "usable.c on {}: {}{}",
        so.display(),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    run_ok(so, "alloc-conform", &[], &[]);
    run_ok(so, "alloc-random", &["7", "40000", "16"], &[]);
    run_ok(so, "alloc-random", &["8", "5000", "0"], &[("HEAPLAB_CHECK", "1")]);
    run_ok(so, "alloc-random", &["9", "20000", "64"], &[("HEAPLAB_PAD", "8")]);
    run_ok(so, "alloc-threads", &["20000"], &[]);
}

fn shapes_dir(name: &str) -> (Tmp, Vec<PathBuf>) {
    let t = tmp(name);
    let traces: Vec<PathBuf> = (1..=2)
        .map(|i| {
            let p = t.0.join(format!("run{i}.hltrace"));
            write_trace(&p, i);
            p
        })
        .collect();
    (t, traces)
}

#[test]
fn heuristic_with_fast_and_general_lists_in_order_and_as_a_map() {
    let (t, traces) = shapes_dir("heuristic");
    let usable = usable_prog(&t.0);
    for (name, dispatch) in [("ord", Dispatch::Ordered), ("map", Dispatch::Sizemap)] {
        let d = t.0.join(name);
        let o = build(
            &d,
            &traces,
            Options {
                name: format!("shape_{name}"),
                coverage: 1.0,
                dispatch,
                // The paper's rule alone: the cost check would make the hot
                // episodic class fast, and this shape is the mixed one.
                variant: Variant::Paper,
                ..Options::default()
            },
        );
        let p = &o.plan;
        assert_eq!(p.dispatch.kind, dispatch);
        assert!(p.lists.iter().any(|l| l.allocator == Allocator::Fast));
        let episodic = p.classes.iter().find(|c| c.size == 64).expect("the 64-byte class");
        assert_eq!(episodic.allocator, Allocator::General, "{}", episodic.why);
        assert!(o.header.exists() && o.source.exists() && o.built.archive.exists());
        let decisions: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&o.decisions).unwrap()).unwrap();
        assert_eq!(decisions["format"], "heaplab-synth-decisions/2");
        assert!(decisions["outputs"]["shared_object"].as_str().unwrap().ends_with(".so"));
        check(&o, &usable);
    }
}

#[test]
fn all_general_and_all_fast_variants() {
    let (t, traces) = shapes_dir("variants");
    let usable = usable_prog(&t.0);
    for (name, variant, dispatch) in [
        ("gen", Variant::AllGeneral, Dispatch::Ordered),
        ("genmap", Variant::AllGeneral, Dispatch::Sizemap),
        ("fast", Variant::AllFast, Dispatch::Auto),
    ] {
        let o = build(
            &t.0.join(name),
            &traces,
            Options { name: format!("shape_{name}"), variant, dispatch, ..Options::default() },
        );
        let want =
            if variant == Variant::AllGeneral { Allocator::General } else { Allocator::Fast };
        assert!(o.plan.lists.iter().all(|l| l.allocator == want));
        check(&o, &usable);
        if variant == Variant::AllFast {
            check_remote_frees(&o.built.so, &c_prog(&t.0, "remote_free", &["-pthread"]));
        }
    }
}
