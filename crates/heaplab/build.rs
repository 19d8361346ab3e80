//! Names the commit heaplab is built from (HEAPLAB_COMMIT, for reports'
//! provenance), when it is built in a git checkout; `git` runs from an
//! argument vector. Outside a checkout, or without git, it stays unset.

use std::process::Command;

fn git(args: &[&str]) -> Option<String> {
    let o = Command::new("git").args(args).output().ok()?;
    o.status.success().then(|| String::from_utf8_lossy(&o.stdout).trim().to_string())
}

fn main() {
    if let Some(head) = git(&["rev-parse", "--git-path", "HEAD"]) {
        println!("cargo:rerun-if-changed={head}");
        if let Some(r) = git(&["symbolic-ref", "-q", "HEAD"]) {
            if let Some(p) = git(&["rev-parse", "--git-path", &r]) {
                println!("cargo:rerun-if-changed={p}");
            }
        }
    }
    if let Some(c) = git(&["rev-parse", "--short=12", "HEAD"]) {
        println!("cargo:rustc-env=HEAPLAB_COMMIT={c}");
    }
}
