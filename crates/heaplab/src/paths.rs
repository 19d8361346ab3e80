//! Where heaplab finds what `make` built: the agent, the allocators, the replayer.
//!
//! `HEAPLAB_HOME` overrides the location; otherwise it is the checkout the
//! binary was built from, so `target/release/heaplab` works without installing.

use std::path::PathBuf;

/// The checkout root (or `$HEAPLAB_HOME`).
pub fn home() -> PathBuf {
    if let Some(h) = std::env::var_os("HEAPLAB_HOME") {
        return PathBuf::from(h);
    }
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..");
    root.canonicalize().unwrap_or(root)
}

/// `build/` under the root: `lib/` holds shared objects, `bin/` programs.
pub fn build_dir() -> PathBuf {
    home().join("build")
}

/// A shared object that `make -C native` puts in `build/lib`.
#[allow(dead_code)]
pub fn lib(name: &str) -> PathBuf {
    build_dir().join("lib").join(name)
}

/// A program that `make -C native` puts in `build/bin`.
#[allow(dead_code)]
pub fn bin(name: &str) -> PathBuf {
    build_dir().join("bin").join(name)
}
