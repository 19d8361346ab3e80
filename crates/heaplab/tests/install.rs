//! `make install` gives a relocatable tree: install into a temporary prefix
//! (scripts/install.sh, what `make install PREFIX=...` runs), move the tree,
//! and run `heaplab demo --quick` (one workload, two allocators: the test
//! stays short) and `heaplab synth` from there. The binary must find its
//! agent, allocators, replayer, workloads and the zoo's sources and flags
//! relative to itself, not in this checkout. Needs `make -C native`.

use std::path::Path;
use std::process::Command;

mod common;
use common::{root, text, tmp};

fn run(c: &mut Command) -> String {
    let o = c.output().unwrap();
    assert!(o.status.success(), "{c:?}:\n{}{}", text(&o.stdout), text(&o.stderr));
    text(&o.stdout) + &text(&o.stderr)
}

fn heaplab(prefix: &Path, cwd: &Path) -> Command {
    let mut c = Command::new(prefix.join("bin/heaplab"));
    c.current_dir(cwd).env_remove("HEAPLAB_HOME").env_remove("LD_PRELOAD");
    c
}

#[test]
fn an_installed_tree_works_after_it_is_moved() {
    let t = tmp("install");
    let (a, b) = (t.0.join("a"), t.0.join("moved/b"));
    run(Command::new(root().join("scripts/install.sh"))
        .arg(&a)
        .env("HEAPLAB_BIN", env!("CARGO_BIN_EXE_heaplab")));
    std::fs::create_dir_all(b.parent().unwrap()).unwrap();
    std::fs::rename(&a, &b).unwrap();
    for f in [
        "share/man/man1/heaplab.1",
        "share/man/man1/heaplab-record.1",
        "share/bash-completion/completions/heaplab",
        "share/heaplab/zoo-cflags.txt",
        "lib/heaplab/libheaplab-record.so",
        "libexec/heaplab/heaplab-replay",
    ] {
        assert!(b.join(f).exists(), "{f} is not installed");
    }
    let demo = t.0.join("demo");
    let out = run(heaplab(&b, &t.0)
        .args([
            "demo",
            "--quick",
            "--workloads",
            "perl-wc",
            "--allocators",
            "bsd,glibc",
            "--no-instructions",
            "-o",
        ])
        .arg(&demo));
    assert!(demo.join("report/report.html").exists(), "{out}");
    // the workload ran from the moved tree, not from this checkout
    let trace = demo.join("perl-wc.hltrace");
    let r = heaplab_trace::TraceReader::open(&trace).unwrap();
    let argv = r.meta().command_line();
    let moved = b.join("share/heaplab/workloads").display().to_string();
    assert!(argv.contains(&moved), "{argv}");
    assert!(!argv.contains(&root().display().to_string()), "{argv}");
    // synth compiles against the installed sources with the installed flags
    let out = run(heaplab(&b, &t.0)
        .args(["synth", "--no-register", "--name", "custom_t", "-o"])
        .arg(t.0.join("synth"))
        .arg(&trace));
    assert!(t.0.join("synth/libcustom_t.so").exists(), "{out}");
    let d: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(t.0.join("synth/decisions.json")).unwrap())
            .unwrap();
    let cmds = d["outputs"]["build_commands"].to_string();
    assert!(cmds.contains(&b.join("share/heaplab/native/alloc").display().to_string()), "{cmds}");
    assert!(cmds.contains("-fvisibility=hidden"), "{cmds}");
}
