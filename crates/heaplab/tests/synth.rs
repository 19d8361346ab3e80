//! `heaplab synth` end to end, on three real programs (perl word count,
//! make -n, python3 with PYTHONMALLOC=malloc): record two runs of each,
//! synthesize, then check that each allocator
//!
//! - passes the zoo's whole suite (native/alloc/tests/run.sh: exports,
//!   conformance, random sequences, threads, and six real programs with the
//!   same output as glibc),
//! - runs its own program on the input it never saw (variant 3) with the
//!   same output as glibc,
//! - is accepted by `heaplab compare` by name and by path, with its
//!   footprint read from heaplab_alloc_stats;
//!
//! and that a program can include NAME.h and link NAME.a. Bad input gets a
//! clear error. Needs the native build (`make -C native`).

use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

mod common;
use common::{root, tmp};

fn heaplab(args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut c = Command::new(env!("CARGO_BIN_EXE_heaplab"));
    c.args(args).env_remove("LD_PRELOAD");
    for (k, v) in env {
        c.env(k, v);
    }
    c.output().unwrap()
}

fn ok(o: &Output, what: &str) -> String {
    assert!(
        o.status.success(),
        "{what} failed ({}):\n{}{}",
        o.status,
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8_lossy(&o.stdout).to_string()
}

/// The workload's command line: environment assignments, then argv.
fn workload(name: &str, variant: u32, cache: &Path) -> (Vec<(String, String)>, Vec<String>) {
    let v = variant.to_string();
    let cache = cache.display().to_string();
    let line = ok(
        &heaplab(&["workloads", name, "--variant", &v, "--scale", "0.3", "--cache", &cache], &[]),
        "heaplab workloads",
    );
    let mut env = Vec::new();
    let mut argv = Vec::new();
    for w in line.split_whitespace() {
        match w.split_once('=') {
            Some((k, val))
                if argv.is_empty() && k.chars().all(|c| c.is_ascii_uppercase() || c == '_') =>
            {
                env.push((k.to_string(), val.to_string()))
            }
            _ => argv.push(w.to_string()),
        }
    }
    (env, argv)
}

/// Runs a workload (with a preload or none) and returns its stdout.
fn run_workload(name: &str, variant: u32, cache: &Path, preload: Option<&Path>) -> Vec<u8> {
    let (env, argv) = workload(name, variant, cache);
    let mut c = Command::new(&argv[0]);
    c.args(&argv[1..])
        .envs(env)
        .env_remove("LD_PRELOAD")
        .env_remove("MAKEFLAGS")
        .env_remove("MAKELEVEL");
    if let Some(p) = preload {
        c.env("LD_PRELOAD", p);
    }
    let o = c.output().unwrap();
    assert!(
        o.status.success(),
        "{argv:?} with {preload:?}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    o.stdout
}

fn record(name: &str, variant: u32, cache: &Path, out: &Path) -> PathBuf {
    let (env, argv) = workload(name, variant, cache);
    let trace = out.join(format!("{name}-v{variant}.hltrace"));
    let mut args = vec![
        "record".to_string(),
        "-q".into(),
        "-o".into(),
        trace.display().to_string(),
        "--".into(),
    ];
    args.extend(argv);
    let mut c = Command::new(env!("CARGO_BIN_EXE_heaplab"));
    c.args(&args)
        .envs(env)
        .env_remove("LD_PRELOAD")
        .env_remove("MAKEFLAGS")
        .env_remove("MAKELEVEL");
    ok(&c.output().unwrap(), "heaplab record");
    trace
}

const PROGRAMS: [(&str, &str); 3] =
    [("perl-wc", "t_perl"), ("make-n", "t_make"), ("python", "t_python")];

#[test]
fn three_programs_synthesized_tested_and_compared() {
    let t = tmp("programs");
    let (cache, reg) = (t.0.join("inputs"), t.0.join("registry"));
    let reg_s = reg.display().to_string();
    let env = [("HEAPLAB_SYNTH_REGISTRY", reg_s.as_str())];
    let mut libs = Vec::new();
    for (w, name) in PROGRAMS {
        let traces: Vec<String> =
            (1..=2).map(|v| record(w, v, &cache, &t.0).display().to_string()).collect();
        let dir = t.0.join(name);
        let d = dir.display().to_string();
        let out = ok(
            &heaplab(&["synth", &traces[0], &traces[1], "-o", &d, "--name", name], &env),
            "heaplab synth",
        );
        assert!(out.contains(&format!("registered as {name}")), "{out}");
        let so = dir.join(format!("lib{name}.so"));
        for f in [
            format!("{name}.c"),
            format!("{name}.h"),
            format!("lib{name}.a"),
            "decisions.json".into(),
        ] {
            assert!(dir.join(&f).exists(), "{f} missing");
        }
        let p: Value =
            serde_json::from_str(&std::fs::read_to_string(dir.join("decisions.json")).unwrap())
                .unwrap();
        assert_eq!(p["profile"]["runs"], 2);
        assert!([8, 16, 32].contains(&p["unit"]["chosen"].as_u64().unwrap()));
        assert!(p["selection"]["served_share"].as_f64().unwrap() >= 0.95, "{}", p["selection"]);
        let lists = p["lists"].as_array().unwrap();
        assert!(!lists.is_empty());
        // The most frequent list of these programs is fast (002: "in most
        // applications ... the fast internal allocator was chosen").
        let first = p["dispatch"]["malloc_order"][0].as_u64().unwrap() as usize;
        assert_eq!(lists[first]["allocator"], "fast", "{}", lists[first]);
        // The generated C says why.
        let c = std::fs::read_to_string(dir.join(format!("{name}.c"))).unwrap();
        assert!(c.contains("of mallocs") && c.contains("P_f(s)(1 - P_m(s))"));

        // Its own program, on the input it never saw.
        assert!(
            run_workload(w, 3, &cache, Some(&so)) == run_workload(w, 3, &cache, None),
            "{w} on {name} differs from glibc"
        );
        libs.push(so);
    }

    // The zoo's whole suite on the three.
    let work = t.0.join("alloc-test");
    let list: Vec<String> = libs.iter().map(|p| p.display().to_string()).collect();
    let o = Command::new(root().join("native/alloc/tests/run.sh"))
        .args(["--lib", &root().join("build/lib").display().to_string()])
        .args(["--bin", &root().join("build/bin").display().to_string()])
        .args(["--work", &work.display().to_string()])
        .args(["--registry", &root().join("native/alloc/registry.txt").display().to_string()])
        .args(["--allocators", &list.join(" ")])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success(), "run.sh failed:\n{text}\n{}", String::from_utf8_lossy(&o.stderr));
    for (_, name) in PROGRAMS {
        let row = text
            .lines()
            .find(|l| l.starts_with(name))
            .unwrap_or_else(|| panic!("no row {name}:\n{text}"));
        assert_eq!(row.matches("PASS").count(), 10, "{row}");
    }

    // compare by name and by path.
    let trace = t.0.join("perl-wc-v2.hltrace").display().to_string();
    let json = t.0.join("cmp.json");
    let spec = format!("t_perl,{}", libs[1].display());
    let o = heaplab(
        &[
            "compare",
            &trace,
            "--allocators",
            &spec,
            "--no-instructions",
            "--repeat",
            "1",
            "--json",
            &json.display().to_string(),
        ],
        &env,
    );
    ok(&o, "heaplab compare");
    let recs: Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    for name in ["t_perl", "t_make"] {
        let r =
            recs["records"].as_array().unwrap().iter().find(|r| r["allocator"] == name).unwrap();
        assert_eq!(r["status"], "ok", "{r}");
        assert_eq!(r["source"], "heaplab", "{r}");
        assert_eq!(r["footprint_source"], "heaplab_alloc_stats", "{r}");
        assert!(r["peak_footprint_bytes"].as_u64().unwrap() > 0);
    }
}

#[test]
fn a_program_includes_the_header_and_links_the_archive() {
    let t = tmp("header");
    let cache = t.0.join("inputs");
    let trace = record("perl-wc", 1, &cache, &t.0).display().to_string();
    let dir = t.0.join("out");
    let d = dir.display().to_string();
    // The statistics build: the counts below say the inline paths ran.
    ok(
        &heaplab(
            &["synth", &trace, "-o", &d, "--name", "t_inline", "--no-register", "--count-calls"],
            &[],
        ),
        "synth",
    );
    let p: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("decisions.json")).unwrap())
            .unwrap();
    // A size of the most frequent fast list, known when compiling.
    let l = &p["lists"][p["dispatch"]["malloc_order"][0].as_u64().unwrap() as usize];
    let size = l["range"][1].as_u64().unwrap();
    let src = t.0.join("prog.c");
    std::fs::write(
        &src,
        format!(
            "#include <stdio.h>\n#include \"t_inline.h\"\n#include \"hl_alloc.h\"\n\
             struct node {{ char bytes[{size}]; }};\n\
             int main(void) {{\n\
               void *keep[1000];\n\
               for (int r = 0; r < 3; r++) {{\n\
                 for (int i = 0; i < 1000; i++) {{\n\
                   struct node *n = t_inline_malloc(sizeof(struct node));\n\
                   if (!n) return 1;\n\
                   n->bytes[0] = (char)i; n->bytes[sizeof n->bytes - 1] = (char)i;\n\
                   keep[i] = n;\n\
                 }}\n\
                 for (int i = 0; i < 1000; i++) {{\n\
                   struct node *n = keep[i];\n\
                   if (n->bytes[0] != (char)i || n->bytes[sizeof n->bytes - 1] != (char)i) return 2;\n\
                   if (i % 2) t_inline_free(n); else t_inline_free_sized(n, sizeof(struct node));\n\
                 }}\n\
               }}\n\
               heaplab_alloc_stats_t st;\n\
               heaplab_alloc_stats(&st, sizeof st);\n\
               printf(\"%s %lu %lu\\n\", st.name, (unsigned long)st.mallocs, (unsigned long)st.frees);\n\
               return 0;\n\
             }}\n"
        ),
    )
    .unwrap();
    let exe = t.0.join("prog");
    let o = Command::new("gcc")
        .args(["-O2", "-Wall", "-Werror", "-o"])
        .arg(&exe)
        .arg(&src)
        .arg(format!("-I{}", dir.display()))
        .arg(format!("-I{}", root().join("native/alloc").display()))
        .arg(format!("-I{}", root().join("native/common").display()))
        .arg(dir.join("libt_inline.a"))
        .arg("-lpthread")
        .output()
        .unwrap();
    ok(&o, "gcc with the header and the archive");
    let out = ok(&Command::new(&exe).env_remove("LD_PRELOAD").output().unwrap(), "the program");
    let f: Vec<&str> = out.split_whitespace().collect();
    assert_eq!(f[0], "t_inline", "{out}");
    assert!(f[1].parse::<u64>().unwrap() >= 3000 && f[2].parse::<u64>().unwrap() >= 3000, "{out}");
}

#[test]
fn bad_input_gets_a_clear_error() {
    let t = tmp("errors");
    let d = t.0.join("out").display().to_string();
    let o = heaplab(&["synth", "/no/such.hltrace", "-o", &d], &[]);
    assert_eq!(o.status.code(), Some(2));
    let e = String::from_utf8_lossy(&o.stderr);
    assert!(e.contains("/no/such.hltrace") && e.contains("No such file"), "{e}");
    let junk = t.0.join("junk.hltrace");
    std::fs::write(&junk, b"not a trace at all").unwrap();
    let o = heaplab(&["synth", &junk.display().to_string(), "-o", &d, "--name", "x_y"], &[]);
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("junk.hltrace"));
    let o = heaplab(&["synth", "a.hltrace", "-o", &d, "--unit", "12"], &[]);
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("use 8, 16 or 32"));
    let o = heaplab(&["synth", "a.hltrace", "-o", &d, "--dispatch", "hash"], &[]);
    assert!(String::from_utf8_lossy(&o.stderr).contains("ordered"));
    let cache = t.0.join("inputs");
    let trace = record("make-n", 1, &cache, &t.0).display().to_string();
    let o = heaplab(&["synth", &trace, "-o", &d, "--name", "gnugpp"], &[]);
    assert!(String::from_utf8_lossy(&o.stderr).contains("already means another allocator"));
    let o = heaplab(
        &["synth", &trace, "-o", &d, "--name", "x_y", "--fast", "99999", "--no-register"],
        &[],
    );
    assert_eq!(o.status.code(), Some(2));
    let e = String::from_utf8_lossy(&o.stderr);
    assert!(e.contains("--fast 99999") && e.contains("kept classes are"), "{e}");
}

/// Issue 17, class 5: a trace's bytes cannot break the generated C. The
/// command line below holds a trigraph (`??/`), a comment end, quotes,
/// backslashes, a newline, an escape sequence and bytes that are not UTF-8;
/// the allocator must still build (with -Werror), and its sources must be
/// plain printable ASCII.
#[test]
fn hostile_command_lines_build() {
    use heaplab_trace::{End, Kind, Meta, NewEvent, TraceWriter, WriterOptions};
    let d = tmp("hostile");
    let argv: Vec<Vec<u8>> = vec![
        b"./prog??/".to_vec(),
        b"*/ #include <evil.h> /*".to_vec(),
        b"\"q\" \\ \\\n??= ??' ??( \x1b[2J".to_vec(),
        "caf\u{e9} \u{263a}".as_bytes().to_vec(),
        vec![0xae, 0xff, 0x00, b'?', b'?', b'/'],
    ];
    let meta = Meta { pid: 1, pointer_size: 8, time_unit_ns: 1, argv, ..Meta::default() };
    let mut w = TraceWriter::new(Vec::new(), &meta, WriterOptions::default()).unwrap();
    let t = w.add_thread(1, "??/");
    let mut live = Vec::new();
    for i in 0..4000u64 {
        let size = [16, 24, 32, 48, 64, 100][(i % 6) as usize];
        live.push(w.record(&NewEvent::alloc(Kind::Malloc, size).at(t, i)).unwrap().unwrap());
        if live.len() > 50 {
            let id = live.remove((i as usize * 7) % live.len());
            w.record(&NewEvent::free(id).at(t, i)).unwrap();
        }
    }
    let trace = d.0.join("hostile??!.hltrace");
    std::fs::write(&trace, w.finish(&End::default()).unwrap()).unwrap();
    let out = d.0.join("out");
    let o = heaplab(
        &["synth", trace.to_str().unwrap(), "-o", out.to_str().unwrap(), "--name", "hostile_test"],
        &[],
    );
    ok(&o, "synth from a trace with a hostile command line");
    let mut sources = 0;
    for e in std::fs::read_dir(&out).unwrap() {
        let p = e.unwrap().path();
        if matches!(p.extension().and_then(|x| x.to_str()), Some("c" | "h")) {
            // heaplab's own comments may hold UTF-8 (§); nothing of the trace's may.
            let s = String::from_utf8(std::fs::read(&p).unwrap()).unwrap();
            let raw =
                s.chars().find(|&c| (c.is_control() && c != '\n') || "é☺\u{fffd}".contains(c));
            assert_eq!(raw, None, "{} holds a byte of the trace unescaped", p.display());
            assert!(!s.contains("??/") && !s.contains("*/ #include"), "{}", p.display());
            sources += 1;
        }
    }
    // NAME.c and NAME.h, and the zoo's fastcore.h and hl_alloc.h copied beside them.
    assert_eq!(sources, 4, "NAME.c, NAME.h, fastcore.h, hl_alloc.h");
    assert!(std::fs::read_dir(&out).unwrap().any(|e| e
        .unwrap()
        .file_name()
        .to_string_lossy()
        .ends_with(".so")));
}
