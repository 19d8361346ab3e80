//! Where the native pieces are (the replayer, the allocators, the registry),
//! and a comparison's private scratch directory.

use crate::layout::Layout;
use crate::scratch::ScratchDir;
use std::path::PathBuf;
use std::sync::Arc;

/// Paths to what `make` built, and to the registry of heaplab's allocators.
#[derive(Debug, Clone)]
pub struct Tools {
    /// `heaplab-replay`.
    pub replay: PathBuf,
    /// The directory that holds `libheaplab-NAME.so`.
    pub lib_dir: PathBuf,
    /// `native/alloc/registry.txt` (the list of heaplab's allocators).
    pub registry: PathBuf,
    /// Where `heaplab synth` registers synthesized allocators by name.
    pub synth_registry: PathBuf,
    /// Directories searched for the peer allocators' shared objects
    /// (`$HEAPLAB_PEER_DIRS`, colon-separated, replaces the default list).
    pub peer_dirs: Vec<PathBuf>,
    /// `valgrind`, found on PATH.
    pub valgrind: PathBuf,
    /// Where scratch files (callgrind output, converted traces) go: a fresh
    /// private directory (mode 0700), removed when the last clone of these
    /// tools is dropped.
    pub work_dir: PathBuf,
    /// The replayer's decoded-ops cache (`--ops-cache`), so that the many runs
    /// of one trace decode it once; None: every run decodes.
    pub ops_cache: Option<PathBuf>,
    /// The longest a native replay may run before it is killed and its cell
    /// marked failed; None: no limit.
    pub timeout: Option<std::time::Duration>,
    /// The same for a replay under callgrind (None: ten times `timeout`).
    pub callgrind_timeout: Option<std::time::Duration>,
    /// The replayer's `--threads` (`recorded`, `serial`); None: its default
    /// (recorded for a trace of more than one thread). Not passed to the
    /// counted replays, which run on one thread.
    pub threads: Option<String>,
    /// The replayer's `--wait` (`futex`, `spin`) for a threaded replay; None:
    /// its default (futex).
    pub wait: Option<String>,
    scratch: Arc<ScratchDir>,
}

impl Tools {
    /// The tools of a tree, with a fresh private scratch directory.
    pub fn new(layout: &Layout) -> anyhow::Result<Tools> {
        let scratch = Arc::new(ScratchDir::new("compare")?);
        let work_dir = scratch.dir.clone();
        Ok(Tools {
            ops_cache: Some(work_dir.join("ops")),
            timeout: None,
            callgrind_timeout: None,
            threads: None,
            wait: None,
            replay: layout.bin_file("heaplab-replay"),
            lib_dir: layout.lib.clone(),
            registry: layout.registry(),
            synth_registry: crate::registry::synth_dir()
                .unwrap_or_else(|_| layout.root.join("build/synth")),
            peer_dirs: match std::env::var_os("HEAPLAB_PEER_DIRS") {
                Some(dirs) => std::env::split_paths(&dirs).collect(),
                None => [
                    "/usr/lib/x86_64-linux-gnu",
                    "/usr/lib/aarch64-linux-gnu",
                    "/usr/lib64",
                    "/usr/lib",
                    "/usr/local/lib",
                ]
                .iter()
                .map(PathBuf::from)
                .collect(),
            },
            valgrind: PathBuf::from("valgrind"),
            work_dir,
            scratch,
        })
    }

    /// The tools of this process's tree (see [`Layout::get`]).
    pub fn discover() -> anyhow::Result<Tools> {
        Tools::new(Layout::get()?)
    }

    /// Fails with a message saying how to build the replayer when it is absent.
    pub fn check_replay(&self) -> anyhow::Result<()> {
        if !self.replay.exists() {
            anyhow::bail!(
                "the replayer {} is not built; run `make -C native` (or `make test`) first",
                self.replay.display()
            );
        }
        Ok(())
    }

    /// The time limit of a callgrind replay.
    pub fn callgrind_timeout(&self) -> Option<std::time::Duration> {
        self.callgrind_timeout.or(self.timeout.map(|t| t * 10))
    }

    /// Empties the work directory (the ops cache included); the directory
    /// itself stays, private, until the tools are dropped.
    pub fn clean(&self) {
        if let Ok(rd) = std::fs::read_dir(&self.work_dir) {
            for e in rd.flatten() {
                let p = e.path();
                let _ = if e.file_type().is_ok_and(|t| t.is_dir()) {
                    std::fs::remove_dir_all(&p)
                } else {
                    std::fs::remove_file(&p)
                };
            }
        }
    }

    /// Leaves the work directory in place after heaplab exits (`--keep-scratch`).
    pub fn keep_scratch(&self) {
        self.scratch.keep();
    }

    /// Whether `valgrind` runs.
    pub fn have_valgrind(&self) -> bool {
        std::process::Command::new(&self.valgrind)
            .arg("--version")
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .status()
            .map(|s| s.success())
            .unwrap_or(false)
    }
}
