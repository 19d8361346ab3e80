//! report.html in a real headless browser (Debian's `chromium`, installed by
//! scripts/setup.sh): the page with its flame graphs opens with no console
//! error, no exception and no network request, every flame graph's script
//! runs, the page fits a narrow window and its tables sort
//! (tests/browser_check.py drives the browser through the DevTools protocol).

use std::process::Command;

mod common;

use common::root;

#[test]
fn report_opens_clean_in_chromium() {
    let path = std::env::var_os("PATH").unwrap_or_default();
    let has = |b: &str| std::env::split_paths(&path).any(|d| d.join(b).is_file());
    if !["chromium", "chromium-browser", "google-chrome"].iter().any(|b| has(b)) {
        let allowed = std::env::var("HEAPLAB_ALLOW_SKIPS").unwrap_or_default();
        assert!(
            allowed.split(',').any(|s| s == "browser"),
            "browser: chromium is not installed (scripts/setup.sh installs it); a check that cannot run fails (HEAPLAB_ALLOW_SKIPS=browser skips it)"
        );
        eprintln!("SKIP browser: chromium is not installed (allowed by HEAPLAB_ALLOW_SKIPS)");
        return;
    }
    // fresh and private (mkdtemp, 0700), removed when dropped
    let dir = common::tmp("browser");
    let prog = dir.join("memory");
    let o = Command::new("cc")
        .args(["-g", "-O1", "-fno-builtin", "-o"])
        .arg(&prog)
        .arg(root().join("crates/heaplab/tests/progs/memory.c"))
        .output()
        .unwrap();
    assert!(o.status.success());
    let trace = dir.join("m.hltrace");
    let heaplab = env!("CARGO_BIN_EXE_heaplab");
    let o = Command::new(heaplab)
        .args(["record", "-q", "-o"])
        .arg(&trace)
        .arg("--")
        .arg(&prog)
        .args(["300", "3000"])
        .env_remove("LD_PRELOAD")
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let rep = dir.join("report");
    let o =
        Command::new(heaplab).arg("stats").arg(&trace).arg("--report").arg(&rep).output().unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let mut cmd = Command::new("python3");
    cmd.arg(root().join("crates/heaplab/tests/browser_check.py"))
        .arg(rep.join("report.html"))
        .args(["--frames", "3"]);
    if let Ok(shot) = std::env::var("HEAPLAB_SCREENSHOT") {
        cmd.args(["--screenshot", &shot]);
    }
    let o = cmd.output().unwrap();
    drop(dir);
    assert!(
        o.status.success(),
        "status {:?}: {}",
        o.status.code(),
        String::from_utf8_lossy(&o.stderr)
    );
}
