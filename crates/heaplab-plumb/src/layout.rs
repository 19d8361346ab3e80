//! Where heaplab's native files are: in the checkout `make` built, or in a
//! tree `make install` made. The one place that knows.
//!
//! ```text
//!   a checkout (make build)               an installed tree (make install PREFIX=P)
//!   ROOT/target/release/heaplab           P/bin/heaplab
//!   ROOT/build/lib/        shared objects P/lib/heaplab/        (the agent, the zoo,
//!                                                                valgrind/: the tool)
//!   ROOT/build/bin/        programs       P/libexec/heaplab/    (the replayer, ...)
//!   ROOT/build/zoo-cflags.txt             P/share/heaplab/zoo-cflags.txt
//!   ROOT/native/           C sources      P/share/heaplab/native/   (synth and segregate
//!                                                                    compile against them)
//!   ROOT/workloads/        scripts        P/share/heaplab/workloads/
//! ```
//!
//! The binary finds its tree relative to itself: `$HEAPLAB_HOME` when set
//! (a checkout or a prefix), else the nearest directory above the running
//! executable that is one of the two. Nothing is baked in at build time, so
//! an installed tree still works after it is moved.

use anyhow::{bail, Result};
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

/// Which kind of tree.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Checkout,
    Installed,
}

/// The paths of one tree (see the module docs).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Layout {
    pub kind: Kind,
    /// The checkout root, or the install prefix.
    pub root: PathBuf,
    /// Shared objects: `libheaplab-NAME.so`, the agent, `valgrind/`.
    pub lib: PathBuf,
    /// Programs: `heaplab-replay`, `hltrace-dump`, test programs.
    pub bin: PathBuf,
    /// The C sources synth and segregate compile against (`alloc/`, `common/`, `segregate/`).
    pub native: PathBuf,
    /// The bundled workloads' scripts.
    pub workloads: PathBuf,
    /// The zoo's compiler flags, one per line, written by `make`.
    pub zoo_cflags: PathBuf,
}

const REGISTRY: &str = "alloc/registry.txt";

impl Layout {
    /// A checkout rooted at `root`.
    pub fn checkout(root: &Path) -> Layout {
        Layout {
            kind: Kind::Checkout,
            root: root.to_path_buf(),
            lib: root.join("build/lib"),
            bin: root.join("build/bin"),
            native: root.join("native"),
            workloads: root.join("workloads"),
            zoo_cflags: root.join("build/zoo-cflags.txt"),
        }
    }

    /// A tree installed under `prefix`.
    pub fn installed(prefix: &Path) -> Layout {
        let share = prefix.join("share/heaplab");
        Layout {
            kind: Kind::Installed,
            root: prefix.to_path_buf(),
            lib: prefix.join("lib/heaplab"),
            bin: prefix.join("libexec/heaplab"),
            native: share.join("native"),
            workloads: share.join("workloads"),
            zoo_cflags: share.join("zoo-cflags.txt"),
        }
    }

    /// The tree at `dir`, if it is one.
    pub fn at(dir: &Path) -> Option<Layout> {
        let i = Layout::installed(dir);
        if i.native.join(REGISTRY).is_file() {
            return Some(i);
        }
        let c = Layout::checkout(dir);
        if c.native.join(REGISTRY).is_file() {
            return Some(c);
        }
        None
    }

    /// `$HEAPLAB_HOME`, else the nearest tree above the running executable.
    pub fn discover() -> Result<Layout> {
        if let Some(h) = std::env::var_os("HEAPLAB_HOME").filter(|h| !h.is_empty()) {
            let h = PathBuf::from(h);
            let h = std::fs::canonicalize(&h).unwrap_or(h);
            return match Layout::at(&h) {
                Some(l) => Ok(l),
                None => bail!(
                    "HEAPLAB_HOME={} is neither a heaplab checkout (native/{REGISTRY}) nor an \
                     install prefix (share/heaplab/native/{REGISTRY})",
                    h.display()
                ),
            };
        }
        let exe = std::env::current_exe()?;
        let exe = std::fs::canonicalize(&exe).unwrap_or(exe);
        for dir in exe.ancestors().skip(1) {
            if let Some(l) = Layout::at(dir) {
                return Ok(l);
            }
        }
        bail!(
            "cannot find heaplab's native files near {}: set HEAPLAB_HOME to a heaplab checkout \
             (after `make`) or to the prefix it was installed to",
            exe.display()
        )
    }

    /// The layout of this process, found once (an error is found again
    /// each time, with its whole chain).
    pub fn get() -> Result<&'static Layout> {
        static L: OnceLock<Layout> = OnceLock::new();
        if let Some(l) = L.get() {
            return Ok(l);
        }
        let l = Layout::discover()?;
        Ok(L.get_or_init(|| l))
    }

    /// A shared object (`libheaplab-record.so`).
    pub fn lib_file(&self, name: &str) -> PathBuf {
        self.lib.join(name)
    }

    /// A program (`heaplab-replay`).
    pub fn bin_file(&self, name: &str) -> PathBuf {
        self.bin.join(name)
    }

    /// A zoo allocator's shared object.
    pub fn zoo_so(&self, name: &str) -> PathBuf {
        self.lib.join(format!("libheaplab-{name}.so"))
    }

    /// `native/alloc/registry.txt`, the one list of the zoo's allocators.
    pub fn registry(&self) -> PathBuf {
        self.native.join(REGISTRY)
    }

    /// The VALGRIND_LIB folder holding heaplab's Valgrind tool.
    pub fn valgrind_lib(&self) -> PathBuf {
        self.lib.join("valgrind")
    }

    /// What to tell a user when something `make` builds is missing.
    pub fn build_hint(&self) -> &'static str {
        match self.kind {
            Kind::Checkout => "run `make -C native` (or `make`) first",
            Kind::Installed => "the installed tree is incomplete; install heaplab again",
        }
    }
}

/// The per-user data directory (XDG): `$XDG_DATA_HOME/heaplab`, else
/// `~/.local/share/heaplab`.
pub fn user_data_dir() -> Result<PathBuf> {
    if let Some(d) = std::env::var_os("XDG_DATA_HOME").filter(|d| !d.is_empty()) {
        let d = PathBuf::from(d);
        if d.is_absolute() {
            return Ok(d.join("heaplab"));
        }
    }
    match std::env::var_os("HOME").filter(|h| !h.is_empty()) {
        Some(h) => Ok(PathBuf::from(h).join(".local/share/heaplab")),
        None => bail!("neither XDG_DATA_HOME nor HOME is set: no per-user data directory"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn recognizes_both_kinds_of_tree() {
        let d = crate::scratch::ScratchDir::new("layout-test").unwrap();
        assert!(Layout::at(&d.dir).is_none());
        let c = d.join("checkout");
        std::fs::create_dir_all(c.join("native/alloc")).unwrap();
        std::fs::write(c.join("native/alloc/registry.txt"), "").unwrap();
        let l = Layout::at(&c).unwrap();
        assert_eq!(l.kind, Kind::Checkout);
        assert_eq!(l.zoo_so("bsd"), c.join("build/lib/libheaplab-bsd.so"));
        let p = d.join("prefix");
        std::fs::create_dir_all(p.join("share/heaplab/native/alloc")).unwrap();
        std::fs::write(p.join("share/heaplab/native/alloc/registry.txt"), "").unwrap();
        let l = Layout::at(&p).unwrap();
        assert_eq!(l.kind, Kind::Installed);
        assert_eq!(l.bin_file("heaplab-replay"), p.join("libexec/heaplab/heaplab-replay"));
        assert_eq!(l.registry(), p.join("share/heaplab/native/alloc/registry.txt"));
    }

    #[test]
    fn the_test_binary_finds_this_checkout() {
        // target/release/deps/heaplab_plumb-... lies inside the checkout
        // (unless CARGO_TARGET_DIR put it elsewhere, or HEAPLAB_HOME is set)
        let here = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..").canonicalize().unwrap();
        let exe = std::env::current_exe().unwrap().canonicalize().unwrap();
        if std::env::var_os("HEAPLAB_HOME").is_none() && exe.starts_with(&here) {
            let l = Layout::discover().unwrap();
            assert_eq!(l.root, here);
            assert_eq!(l.kind, Kind::Checkout);
        }
    }
}
