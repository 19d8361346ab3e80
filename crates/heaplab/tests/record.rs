//! `heaplab record`: exit statuses as a shell gives them, the traces written,
//! the flags reaching the agent. Needs the agent built (`make -C native`).

use heaplab_trace::{EndReason, TraceReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

mod common;
use common::{root, text, tmp};

fn record(args: &[&str]) -> Output {
    let agent = root().join("build/lib/libheaplab-record.so");
    assert!(agent.exists(), "{} is not built: run `make -C native` first", agent.display());
    Command::new(env!("CARGO_BIN_EXE_heaplab"))
        .arg("record")
        .args(args)
        .env_remove("LD_PRELOAD")
        .output()
        .unwrap()
}

/// Reads a whole trace; returns (events, END reasons).
fn read(p: &Path) -> (u64, Vec<EndReason>, heaplab_trace::Meta) {
    let mut r = TraceReader::open(p).unwrap_or_else(|e| panic!("{e}"));
    let mut n = 0;
    while r.next_event().unwrap_or_else(|e| panic!("{e}")).is_some() {
        n += 1;
    }
    (n, r.ends().iter().map(|e| e.reason).collect(), r.meta().clone())
}

#[test]
fn exit_status_is_passed_through() {
    let d = tmp("status");
    let t = d.join("t.hltrace");
    let t = t.to_str().unwrap();
    let out = record(&["-o", t, "--", "sh", "-c", "exit 3"]);
    assert_eq!(out.status.code(), Some(3), "{}", text(&out.stderr));
    let (n, ends, meta) = read(Path::new(t));
    assert!(n > 0);
    assert_eq!(ends, vec![EndReason::Exit]);
    assert_eq!(meta.argv[0], b"sh");
    assert!(text(&out.stderr).contains("exited with status 3"), "{}", text(&out.stderr));
}

#[test]
fn a_signal_death_gives_128_plus_n() {
    let d = tmp("signal");
    let t = d.join("t.hltrace");
    let out = record(&["-o", t.to_str().unwrap(), "--", "sh", "-c", "kill -SEGV $$"]);
    assert_eq!(out.status.code(), Some(139), "{}", text(&out.stderr));
    let (_, ends, _) = read(&t);
    assert_eq!(ends, vec![EndReason::Signal]);
    assert!(text(&out.stderr).contains("killed by signal 11"), "{}", text(&out.stderr));
}

#[test]
fn programs_that_cannot_start_get_what_a_shell_gives() {
    let d = tmp("nostart");
    let t = d.join("t.hltrace");
    let t = t.to_str().unwrap();
    let out = record(&["-o", t, "--", "no-such-program-heaplab"]);
    assert_eq!(out.status.code(), Some(127));
    assert!(
        text(&out.stderr).contains("no-such-program-heaplab: command not found"),
        "{}",
        text(&out.stderr)
    );
    let noexec = d.join("script.sh");
    std::fs::write(&noexec, "#!/bin/sh\nexit 0\n").unwrap();
    let out = record(&["-o", t, "--", noexec.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(126));
    assert!(text(&out.stderr).contains("Permission denied"), "{}", text(&out.stderr));
    let out = record(&["-o", t, "--", d.join("missing").to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(127));
}

#[test]
fn children_write_their_own_traces_and_are_listed() {
    let d = tmp("children");
    let t = d.join("t.hltrace");
    // a file of an earlier run (or anyone's) at a child's name is left alone
    std::fs::write(d.join("t.hltrace.99999999"), b"old").unwrap();
    let out = record(&[
        "-o",
        t.to_str().unwrap(),
        "--",
        "sh",
        "-c",
        "ls / >/dev/null; (true; ls /tmp >/dev/null); exit 0",
    ]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let stale = d.join("t.hltrace.99999999");
    assert_eq!(std::fs::read(&stale).unwrap(), b"old");
    assert!(!text(&out.stderr).contains("99999999"), "the old file was listed");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&*d)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| *p != stale)
        .collect();
    files.sort();
    assert!(files.len() >= 3, "{files:?}");
    let err = text(&out.stderr);
    let metas: Vec<_> = files.iter().map(|f| read(f)).collect();
    for (f, (_, ends, meta)) in files.iter().zip(&metas) {
        assert!(!ends.is_empty(), "{}", f.display());
        assert!(err.contains(&f.display().to_string()), "{} not listed:\n{err}", f.display());
        // a fork child's trace names its parent; a program run by a recorded
        // process has a recorded parent, or is the exec'd image of one
        if f != &t {
            let related = metas.iter().any(|(_, e, m)| {
                Some(m.pid) == meta.ppid || (m.pid == meta.pid && e.contains(&EndReason::Exec))
            });
            assert!(meta.parent_pid.is_some() || related, "{}: {meta:?}", f.display());
        }
    }
    assert!(err.contains(&format!("{} traces:", files.len())), "{err}");
}

#[test]
fn flags_reach_the_agent() {
    let d = tmp("flags");
    let t = d.join("t.hltrace");
    let out = record(&[
        "-o",
        t.to_str().unwrap(),
        "--stack-depth",
        "0",
        "--time-unit-ns",
        "1",
        "--no-compress",
        "--block-events",
        "5",
        "--",
        "sh",
        "-c",
        "true",
    ]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let (n, _, meta) = read(&t);
    assert_eq!((meta.stack_depth, meta.time_unit_ns), (0, 1));
    let opts = String::from_utf8(meta.options.unwrap()).unwrap();
    assert!(opts.contains("compress=0") && opts.contains("block_events=5"), "{opts}");
    // uncompressed blocks, all codec 0 (a version-2 agent writes a block per
    // thread and chunk each round; block_events only makes rounds come sooner)
    let b = std::fs::read(&t).unwrap();
    let (mut at, mut events_blocks) = (16, 0);
    while at < b.len() {
        let h = heaplab_trace::block::BlockHeader::parse(b[at..at + 24].try_into().unwrap());
        assert_eq!(h.codec, 0);
        events_blocks += usize::from(h.kind == 5);
        at += 24 + h.stored_len as usize;
    }
    assert!(events_blocks >= 1 && n > 0, "{events_blocks} blocks for {n} events");
}

#[test]
fn an_existing_ld_preload_is_kept() {
    let d = tmp("preload");
    let t = d.join("t.hltrace");
    let counter = root().join("build/lib/libheaplab-count.so");
    let counts = d.join("counts");
    let out = Command::new(env!("CARGO_BIN_EXE_heaplab"))
        .args(["record", "-o", t.to_str().unwrap(), "--", "sh", "-c", "exit 0"])
        .env("LD_PRELOAD", &counter)
        .env("HEAPLAB_COUNT_OUT", &counts)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(read(&t).0 > 0);
    assert!(std::fs::read_to_string(&counts).unwrap().contains("malloc="));
}

#[test]
fn bad_flags_say_what_is_allowed() {
    let out = record(&["-o", "/tmp/x.hltrace", "--stack-depth", "500", "--", "true"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out.stderr).contains("0..=128"), "{}", text(&out.stderr));
    let out = record(&["-o", "/tmp/x.hltrace"]);
    assert_eq!(out.status.code(), Some(2));
}
