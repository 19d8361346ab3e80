//! `heaplab allocators` and `heaplab run`: the registry as the command shows
//! it, exit statuses as a shell gives them, the allocator really loaded, and
//! its statistics. Needs the allocators built (`make -C native`).

use std::path::PathBuf;
use std::process::{Command, Output};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..").canonicalize().unwrap()
}

fn heaplab(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_heaplab"))
        .args(args)
        .env_remove("LD_PRELOAD")
        .output()
        .unwrap()
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

fn need(name: &str) {
    let so = root().join(format!("build/lib/libheaplab-{name}.so"));
    assert!(so.exists(), "{} is not built: run `make -C native` first", so.display());
}

#[test]
fn allocators_json_lists_the_registry_with_papers() {
    let o = heaplab(&["allocators", "--json"]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let rows = v.as_array().unwrap();
    let registry = std::fs::read_to_string(root().join("native/alloc/registry.txt")).unwrap();
    let names: Vec<&str> = registry
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .map(|l| l.split('|').next().unwrap().trim())
        .collect();
    assert_eq!(rows.iter().map(|r| r["name"].as_str().unwrap()).collect::<Vec<_>>(), names);
    let ff = rows.iter().find(|r| r["name"] == "firstfit").unwrap();
    assert_eq!(ff["reference"], "000 §2.1; 002 §4");
    assert!(ff["description"].as_str().unwrap().contains("first fit"));
    let table = text(&heaplab(&["allocators"]).stdout);
    for n in names {
        assert!(table.contains(n), "{n} missing from the table:\n{table}");
    }
}

#[test]
fn run_passes_the_exit_status_through_and_loads_the_allocator() {
    need("bsd");
    // the program sees the allocator: heaplab_alloc_info is found in itself
    let o = heaplab(&[
        "run",
        "--allocator",
        "bsd",
        "--",
        "perl",
        "-e",
        "print qq{$ENV{LD_PRELOAD}\\n}; exit 7",
    ]);
    assert_eq!(o.status.code(), Some(7), "{}", text(&o.stderr));
    assert!(text(&o.stdout).contains("libheaplab-bsd.so"));
    let o = heaplab(&["run", "-a", "bsd", "--", "sh", "-c", "kill -TERM $$"]);
    assert_eq!(o.status.code(), Some(143));
    let o = heaplab(&["run", "-a", "bsd", "--", "no-such-program-here"]);
    assert_eq!(o.status.code(), Some(127));
    assert!(text(&o.stderr).contains("command not found"));
    let o = heaplab(&["run", "-a", "bsd", "--", "/etc/passwd"]);
    assert_eq!(o.status.code(), Some(126));
    assert!(text(&o.stderr).contains("Permission denied"));
    let o = heaplab(&["run", "-a", "glibc", "--", "true"]);
    assert_eq!(o.status.code(), Some(0));
}

#[test]
fn run_rejects_unknown_allocators_naming_the_known_ones() {
    let o = heaplab(&["run", "-a", "nosuch", "--", "true"]);
    assert_eq!(o.status.code(), Some(2));
    let e = text(&o.stderr);
    assert!(e.contains("no allocator \"nosuch\"") && e.contains("firstfit"), "{e}");
    let o = heaplab(&["run", "-a", "bsd+pad-1", "--", "true"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(text(&o.stderr).contains("+padN"));
}

#[test]
fn run_stats_report_the_allocators_own_counters() {
    need("quickfit");
    let o = heaplab(&[
        "run",
        "-a",
        "quickfit+pad8",
        "--stats",
        "--json",
        "--",
        "perl",
        "-e",
        "my @a = map { 'x' x 100 } 1 .. 20000; print scalar(@a), qq{\\n}",
    ]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    // --json with no FILE: standard output, after the program's own output
    let out = text(&o.stdout);
    let (program, line) = out.split_once('\n').unwrap();
    assert_eq!(program, "20000");
    let v: serde_json::Value = serde_json::from_str(line.trim()).unwrap();
    let h = &v["heaplab"];
    assert_eq!(h["allocator"], "quickfit");
    assert_eq!(h["pad"], 8);
    // 20000 strings of 100 bytes are live at once: the footprint holds them
    assert!(h["footprint_peak_bytes"].as_u64().unwrap() > 2_000_000, "{h}");
    assert!(h["mallocs"].as_u64().unwrap() > 20000, "{h}");
    assert!(v["wall_seconds"].as_f64().unwrap() > 0.0);
}
