//! Issue 17's classes of unsafe plumbing, one test (or a few) per class, each
//! written to fail on the code the audit found and to pass after the fix:
//!
//! | class | what | tests |
//! |---|---|---|
//! | 1 | no shell strings | `no_shell_strings_in_the_sources` (and, in `segregate.rs`, `a_hostile_test_trace_name_runs_nothing`) |
//! | 2 | private scratch directories | `compare_scratch_is_private_and_fresh`, `run_stats_file_is_private` |
//! | 3 | never delete what heaplab did not write | `record_deletes_nothing_it_did_not_write` |
//! | 4 | outputs through symlinks, trace modes | `record_refuses_a_symlink_at_its_output`, `record_force_replaces_the_link_not_its_target`, `traces_are_private`, `file_outputs_do_not_follow_symlinks` |
//! | 9 | every command can be stopped | `record_to_a_device_finishes` |
//! | 10 | pipes and FIFOs | `compare_and_stats_read_a_pipe`, `lab_and_compare_on_a_fifo_do_not_hang`, `synth_and_sim_read_a_pipe` |
//!
//! Needs the native build (`make -C native`).

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

mod common;
use common::{root, text, tmp};

fn heaplab() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_heaplab"));
    c.env_remove("LD_PRELOAD").stdin(Stdio::null());
    c
}

/// Runs `c` for at most `secs`; None when it had to be killed. The limits
/// only catch hangs: they are minutes, for CI's loaded 2-core machine.
/// Both pipes are read while it runs: a child that filled one would
/// otherwise block on it and look hung.
fn within(mut c: Command, secs: u64) -> Option<Output> {
    use std::io::Read;
    c.stdout(Stdio::piped()).stderr(Stdio::piped());
    let mut child = c.spawn().unwrap();
    fn drain(mut r: impl Read + Send + 'static) -> std::thread::JoinHandle<Vec<u8>> {
        std::thread::spawn(move || {
            let mut v = Vec::new();
            let _ = r.read_to_end(&mut v);
            v
        })
    }
    let out = drain(child.stdout.take().unwrap());
    let err = drain(child.stderr.take().unwrap());
    let t0 = Instant::now();
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            let (stdout, stderr) = (out.join().unwrap(), err.join().unwrap());
            return Some(Output { status, stdout, stderr });
        }
        if t0.elapsed() > Duration::from_secs(secs) {
            let _ = child.kill();
            let _ = child.wait();
            return None;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn mode(p: &Path) -> u32 {
    std::fs::symlink_metadata(p).unwrap().permissions().mode() & 0o7777
}

fn vector(name: &str) -> PathBuf {
    root().join("testdata/vectors").join(name)
}

// ---------------------------------------------------------------- class 1

/// Every child process runs from an argument vector: no `sh -c`, `bash -c`,
/// `system(` or `popen(` in the sources of the workspace's crates or the
/// native rooms (the test scripts and test programs may use a shell: they
/// are not heaplab).
#[test]
fn no_shell_strings_in_the_sources() {
    let mut bad = Vec::new();
    let mut stack = vec![root().join("crates"), root().join("native")];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap().flatten() {
            let p = e.path();
            let name = p.file_name().unwrap().to_string_lossy().to_string();
            if p.is_dir() {
                if name != "tests" && name != "target" && name != "examples" && name != "benches" {
                    stack.push(p);
                }
                continue;
            }
            if !(name.ends_with(".rs") || name.ends_with(".c") || name.ends_with(".h")) {
                continue;
            }
            let src = std::fs::read_to_string(&p).unwrap();
            // unit tests at the end of a Rust file are tests too
            let src = src.split("#[cfg(test)]").next().unwrap();
            for (i, line) in src.lines().enumerate() {
                let l = line.trim_start();
                if l.starts_with("//") || l.starts_with("*") || l.starts_with("/*") {
                    continue;
                }
                let hit = l.contains("Command::new(\"sh\")")
                    || l.contains("Command::new(\"bash\")")
                    || l.contains("Command::new(\"/bin/sh\")")
                    || l.contains("\"sh -c")
                    || l.contains(" sh -c ")
                    || l.contains("bash -c")
                    || (l.contains("system(") && name.ends_with(".c"))
                    || (l.contains("popen(") && name.ends_with(".c"));
                if hit {
                    bad.push(format!("{}:{}: {}", p.display(), i + 1, l));
                }
            }
        }
    }
    assert!(bad.is_empty(), "shell strings in the sources:\n{}", bad.join("\n"));
}

// ---------------------------------------------------------------- class 2

/// `compare` keeps its scratch files in a fresh private directory: not
/// `$TMPDIR/heaplab-compare-<pid>`, which an attacker can plant before it
/// starts (with a link in it where callgrind's output goes).
#[test]
fn compare_scratch_is_private_and_fresh() {
    let d = tmp("compare-scratch");
    let tmpdir = d.join("tmp");
    std::fs::create_dir(&tmpdir).unwrap();
    let victim = d.join("victim");
    std::fs::write(&victim, "precious\n").unwrap();
    let trace = d.join("t.hltrace");
    std::fs::copy(vector("basic.hltrace"), &trace).unwrap();
    let mut c = heaplab();
    c.args(["compare", "--allocators", "bsd", "--repeat", "1", "--keep-scratch"])
        .arg(&trace)
        .env("TMPDIR", &tmpdir)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let child = c.spawn().unwrap();
    // What an attacker would plant at the predictable name, before heaplab
    // gets to it: the directory, with links where the cells' files go.
    let planted = tmpdir.join(format!("heaplab-compare-{}", child.id()));
    if std::fs::create_dir(&planted).is_ok() {
        for a in ["bsd", "glibc", "firstfit"] {
            let _ =
                std::os::unix::fs::symlink(&victim, planted.join(format!("t.{a}.callgrind.out")));
        }
    }
    let o = child.wait_with_output().unwrap();
    assert!(o.status.success(), "{}", text(&o.stderr));
    assert_eq!(
        std::fs::read_to_string(&victim).unwrap(),
        "precious\n",
        "the victim was overwritten"
    );
    // the kept scratch directory is heaplab's own: fresh, 0700
    let err = text(&o.stderr);
    let kept = err
        .lines()
        .find_map(|l| l.strip_prefix("heaplab compare: scratch files in "))
        .map(|s| PathBuf::from(s.trim()))
        .unwrap_or_else(|| panic!("no scratch directory named in\n{err}"));
    assert_ne!(kept, planted, "the planted directory was used");
    assert_eq!(mode(&kept), 0o700, "{} is not private", kept.display());
}

/// A run killed with SIGKILL cannot remove its scratch directory (a
/// compare's holds the decoded trace); the next run's first scratch
/// directory sweeps those of ended runs, and nothing else.
#[test]
fn killed_runs_scratch_is_swept_by_the_next_run() {
    use std::os::unix::fs::MetadataExt;
    let d = tmp("sweep");
    let tmpdir = d.join("tmp");
    std::fs::create_dir(&tmpdir).unwrap();
    let ns = std::fs::metadata("/proc/self/ns/pid").unwrap().ino();
    let mut gone = Command::new("true").spawn().unwrap();
    let pid = gone.id();
    gone.wait().unwrap();
    let mk = |name: String| {
        let p = tmpdir.join(name);
        std::fs::create_dir(&p).unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o700)).unwrap();
        std::fs::write(p.join("ops"), "decoded ops").unwrap();
        p
    };
    let ended = mk(format!("heaplab-compare-{pid}.{ns}-Ab12Cd"));
    let running = mk(format!("heaplab-compare-{}.{ns}-Ef34Gh", std::process::id()));
    let users = mk("heaplab-compare-mine".to_string());
    let trace = d.join("t.hltrace");
    std::fs::copy(vector("basic.hltrace"), &trace).unwrap();
    let o = heaplab()
        .args(["compare", "--allocators", "bsd", "--repeat", "1"])
        .arg(&trace)
        .env("TMPDIR", &tmpdir)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", text(&o.stderr));
    assert!(!ended.exists(), "the ended run's scratch directory is still there");
    assert!(running.join("ops").exists(), "a running process's directory was removed");
    assert!(users.join("ops").exists(), "a directory heaplab did not name was removed");
    // and the compare's own directory is gone too
    let left: Vec<_> = std::fs::read_dir(&tmpdir)
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(left.len(), 2, "left in TMPDIR: {left:?}");
}

/// `run --stats` has the allocator write its statistics into a private
/// directory, not to `$TMPDIR/heaplab-run-<pid>.stats`.
#[test]
fn run_stats_file_is_private() {
    let d = tmp("run-stats");
    let o = heaplab()
        .args(["run", "--allocator", "bsd", "--stats", "--", "printenv", "HEAPLAB_STATS"])
        .env("TMPDIR", &*d)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", text(&o.stderr));
    let p = PathBuf::from(text(&o.stdout).trim());
    let parent = p.parent().unwrap();
    assert_ne!(parent, &*d, "the statistics file {} is in $TMPDIR itself", p.display());
    assert!(parent.starts_with(&*d), "{}", p.display());
    assert!(!parent.exists(), "the private directory {} was left behind", parent.display());
    // and the statistics still arrived
    assert!(text(&o.stderr).contains("footprint peak"), "{}", text(&o.stderr));
}

// ---------------------------------------------------------------- class 3

/// `record -o notes` touches no `notes.1`, `notes.2024` or `notes.7.3` that
/// were there before.
#[test]
fn record_deletes_nothing_it_did_not_write() {
    let d = tmp("record-delete");
    let notes = d.join("notes");
    for n in ["notes.1", "notes.2024", "notes.7.3"] {
        std::fs::write(d.join(n), format!("{n} is mine\n")).unwrap();
    }
    let o = heaplab().args(["record", "-o"]).arg(&notes).args(["--", "true"]).output().unwrap();
    assert!(o.status.success(), "{}", text(&o.stderr));
    for n in ["notes.1", "notes.2024", "notes.7.3"] {
        let t = std::fs::read_to_string(d.join(n));
        assert_eq!(t.ok().as_deref(), Some(format!("{n} is mine\n").as_str()), "{n} was touched");
    }
    assert!(std::fs::metadata(&notes).unwrap().len() > 0);
}

// ---------------------------------------------------------------- class 4

/// A symbolic link at `-o` is refused (without --force): the file it points
/// to stays as it was.
#[test]
fn record_refuses_a_symlink_at_its_output() {
    let d = tmp("record-link");
    let victim = d.join("victim");
    std::fs::write(&victim, "precious\n").unwrap();
    let link = d.join("link.hltrace");
    std::os::unix::fs::symlink(&victim, &link).unwrap();
    let o = heaplab().args(["record", "-o"]).arg(&link).args(["--", "true"]).output().unwrap();
    assert_eq!(std::fs::read(&victim).unwrap(), b"precious\n", "the victim was overwritten");
    assert!(!o.status.success(), "a symlink at the output was accepted");
    assert!(text(&o.stderr).contains("symbolic link"), "{}", text(&o.stderr));
    assert!(std::fs::symlink_metadata(&link).unwrap().file_type().is_symlink());
}

/// With --force the link itself is replaced by the trace; its target is untouched.
#[test]
fn record_force_replaces_the_link_not_its_target() {
    let d = tmp("record-force");
    let victim = d.join("victim");
    std::fs::write(&victim, "precious\n").unwrap();
    let link = d.join("link.hltrace");
    std::os::unix::fs::symlink(&victim, &link).unwrap();
    let o = heaplab()
        .args(["record", "--force", "-o"])
        .arg(&link)
        .args(["--", "true"])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", text(&o.stderr));
    assert_eq!(std::fs::read_to_string(&victim).unwrap(), "precious\n");
    let m = std::fs::symlink_metadata(&link).unwrap();
    assert!(m.file_type().is_file() && m.len() > 0);
}

/// Traces hold command lines and paths: they are created 0600, the
/// program's and its children's.
#[test]
fn traces_are_private() {
    let d = tmp("record-mode");
    let t = d.join("t.hltrace");
    let o = heaplab()
        .args(["record", "-o"])
        .arg(&t)
        .args(["--", "sh", "-c", "true; /bin/true"])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", text(&o.stderr));
    let mut n = 0;
    for e in std::fs::read_dir(&*d).unwrap().flatten() {
        assert_eq!(mode(&e.path()), 0o600, "{}", e.path().display());
        n += 1;
    }
    assert!(n >= 2, "expected the shell's trace and its child's");
}

/// Files the commands write (convert's output, compare's JSON) replace a
/// symbolic link at their name only with --force, and never write through it.
#[test]
fn file_outputs_do_not_follow_symlinks() {
    let d = tmp("outputs");
    let victim = d.join("victim");
    std::fs::write(&victim, "precious\n").unwrap();
    let link = d.join("out.txt");
    std::os::unix::fs::symlink(&victim, &link).unwrap();
    let o = heaplab().args(["convert"]).arg(vector("basic.hltrace")).arg(&link).output().unwrap();
    assert_eq!(
        std::fs::read_to_string(&victim).unwrap(),
        "precious\n",
        "convert wrote through the link"
    );
    assert!(!o.status.success());
    let json = d.join("c.json");
    std::os::unix::fs::symlink(&victim, &json).unwrap();
    let o = heaplab()
        .args(["compare", "--allocators", "glibc", "--repeat", "0", "--no-instructions", "--json"])
        .arg(&json)
        .arg(vector("basic.hltrace"))
        .output()
        .unwrap();
    assert_eq!(
        std::fs::read_to_string(&victim).unwrap(),
        "precious\n",
        "compare wrote through the link"
    );
    assert!(!o.status.success());
}

// ---------------------------------------------------------------- class 9

/// `record -o /dev/zero` (or `/dev/full`) ends at once with a clear message
/// instead of reading zeros for ever.
#[test]
fn record_to_a_device_finishes() {
    for dev in ["/dev/zero", "/dev/full"] {
        let mut c = heaplab();
        c.args(["record", "-o", dev, "--", "true"]);
        let o = within(c, 300).unwrap_or_else(|| panic!("record -o {dev} did not finish in 300 s"));
        assert!(!o.status.success(), "record -o {dev} claimed success");
        assert!(text(&o.stderr).contains(dev), "{}", text(&o.stderr));
    }
}

// ---------------------------------------------------------------- class 10

fn feed_pipe(c: &mut Command, file: &Path) {
    c.stdin(std::fs::File::open(file).unwrap());
}

/// Connects `c`'s stdin to a pipe that `cat FILE` writes; wait for it after.
fn through_pipe(c: &mut Command, file: &Path) -> std::process::Child {
    let mut cat = Command::new("cat").arg(file).stdout(Stdio::piped()).spawn().unwrap();
    c.stdin(cat.stdout.take().unwrap());
    cat
}

/// A trace on a pipe (`compare <(cat t.hltrace)`) is read as a trace.
#[test]
fn compare_and_stats_read_a_pipe() {
    // a real pipe: stdin of the command, named /dev/stdin
    let mut c = heaplab();
    c.args(["compare", "--allocators", "glibc", "--repeat", "1", "--no-instructions"])
        .arg("/dev/stdin");
    let mut cat = through_pipe(&mut c, &vector("basic.hltrace"));
    let o = within(c, 300).expect("compare on a pipe hung");
    cat.wait().unwrap();
    assert!(o.status.success(), "{}", text(&o.stderr));
    assert!(!text(&o.stderr).contains("bad magic"), "{}", text(&o.stderr));
    let mut c = heaplab();
    c.args(["stats", "/dev/stdin"]);
    feed_pipe(&mut c, &vector("basic.hltrace"));
    let o = within(c, 300).expect("stats on a file as stdin hung");
    assert!(o.status.success(), "{}", text(&o.stderr));
}

fn fifo(p: &Path) {
    let st = Command::new("mkfifo").arg(p).status().unwrap();
    assert!(st.success());
}

/// `lab` and `compare` on a FIFO read it once and do not hang in the
/// replayer's open.
#[test]
fn lab_and_compare_on_a_fifo_do_not_hang() {
    let d = tmp("fifo");
    for cmd in [
        vec!["lab", "--allocators", "glibc"],
        vec!["compare", "--allocators", "glibc", "--repeat", "1", "--no-instructions"],
    ] {
        let f = d.join(format!("{}.fifo", cmd[0]));
        fifo(&f);
        let f2 = f.clone();
        let writer = std::thread::spawn(move || {
            let bytes = std::fs::read(vector("basic.hltrace")).unwrap();
            // blocks until the reader opens the FIFO
            let _ = std::fs::write(&f2, bytes);
        });
        let mut c = heaplab();
        c.args(&cmd).arg(&f);
        let o = within(c, 300);
        // unblock the writer if nobody opened the FIFO
        let _ = std::fs::OpenOptions::new().read(true).custom_flags_nonblock().open(&f);
        let _ = writer.join();
        let o = o.unwrap_or_else(|| panic!("{} on a FIFO hung", cmd[0]));
        assert!(o.status.success(), "{}: {}", cmd[0], text(&o.stderr));
    }
}

trait NonBlock {
    fn custom_flags_nonblock(&mut self) -> &mut Self;
}
impl NonBlock for std::fs::OpenOptions {
    fn custom_flags_nonblock(&mut self) -> &mut Self {
        use std::os::unix::fs::OpenOptionsExt;
        self.custom_flags(libc_o_nonblock())
    }
}
fn libc_o_nonblock() -> i32 {
    0o4000 // O_NONBLOCK on Linux
}

/// `synth` and `sim` read a trace on a pipe instead of saying `bad magic`.
#[test]
fn synth_and_sim_read_a_pipe() {
    let d = tmp("synth-pipe");
    let mut c = heaplab();
    c.args(["synth", "--no-register", "-o"]).arg(d.join("s")).arg("/dev/stdin");
    let mut cat = through_pipe(&mut c, &vector("many-zstd.hltrace"));
    let o = within(c, 300).expect("synth on a pipe hung");
    cat.wait().unwrap();
    assert!(!text(&o.stderr).contains("bad magic"), "{}", text(&o.stderr));
    assert!(o.status.success(), "{}", text(&o.stderr));
    let din = root().join("testdata/sim");
    let din = std::fs::read_dir(&din)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .find(|p| p.extension().is_some_and(|x| x == "din"))
        .expect("a .din file in testdata/sim");
    let mut c = heaplab();
    c.args(["sim", "--caches", "1K:32:1", "/dev/stdin"]);
    let mut cat = through_pipe(&mut c, &din);
    let o = within(c, 300).expect("sim on a pipe hung");
    cat.wait().unwrap();
    assert!(o.status.success(), "{}", text(&o.stderr));
    let mut c = heaplab();
    c.args(["sim", "--caches", "1K:32:1", "/dev/stdin"]);
    let mut cat = through_pipe(&mut c, &vector("basic.hltrace"));
    let o = within(c, 300).expect("sim on a pipe hung");
    cat.wait().unwrap();
    // read as a trace (one without references), not as din text or `bad magic`
    assert!(text(&o.stderr).contains("holds no reference stream"), "{}", text(&o.stderr));
}
