//! Where the native pieces are: the replayer, the allocators, the registry.

use std::path::{Path, PathBuf};

/// Paths to what `make` built, and to the registry of heaplab's allocators.
#[derive(Debug, Clone)]
pub struct Tools {
    /// `build/bin/heaplab-replay`.
    pub replay: PathBuf,
    /// `build/lib`, which holds `libheaplab-NAME.so`.
    pub lib_dir: PathBuf,
    /// `native/alloc/registry.txt` (the list of heaplab's allocators).
    pub registry: PathBuf,
    /// Directories searched for the peer allocators' shared objects
    /// (`$HEAPLAB_PEER_DIRS`, colon-separated, replaces the default list).
    pub peer_dirs: Vec<PathBuf>,
    /// `valgrind`, found on PATH.
    pub valgrind: PathBuf,
    /// Where scratch files (callgrind output, converted traces) go.
    pub work_dir: PathBuf,
    /// The replayer's decoded-ops cache (`--ops-cache`), so that the many runs
    /// of one trace decode it once; None: every run decodes.
    pub ops_cache: Option<PathBuf>,
    /// The longest a native replay may run before it is killed and its cell
    /// marked failed; None: no limit.
    pub timeout: Option<std::time::Duration>,
    /// The same for a replay under callgrind (None: ten times `timeout`).
    pub callgrind_timeout: Option<std::time::Duration>,
}

impl Tools {
    /// The layout of a checkout (or `$HEAPLAB_HOME`) rooted at `home`.
    pub fn from_home(home: &Path) -> Tools {
        let work_dir = std::env::temp_dir().join(format!("heaplab-compare-{}", std::process::id()));
        Tools {
            ops_cache: Some(work_dir.join("ops")),
            timeout: None,
            callgrind_timeout: None,
            replay: home.join("build/bin/heaplab-replay"),
            lib_dir: home.join("build/lib"),
            registry: home.join("native/alloc/registry.txt"),
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
        }
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

    /// Removes the work directory and everything in it (the ops cache included).
    pub fn clean(&self) {
        let _ = std::fs::remove_dir_all(&self.work_dir);
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
