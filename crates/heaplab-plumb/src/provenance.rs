//! Where a result came from, for reports a user can publish: the machine,
//! its CPU, kernel and C library, heaplab's version and commit, the command
//! and the date. Read from /proc, uname and glibc; the allocators' versions
//! come from the Debian package that installed each library (`dpkg-query`,
//! run from an argument vector), where there is one.

use crate::alloc::{Allocator, Source};
use serde::Serialize;
use std::path::Path;
use std::process::Command;

/// The provenance of a report or JSON document.
#[derive(Debug, Clone, Serialize, serde::Deserialize, PartialEq, Default)]
pub struct Provenance {
    pub heaplab_version: String,
    /// `git describe`-style commit of the build, when it was built from a checkout.
    pub heaplab_commit: Option<String>,
    pub command: Vec<String>,
    /// UTC, ISO 8601.
    pub date: String,
    pub machine: String,
    pub os: String,
    pub kernel: String,
    pub cpu: String,
    pub cpus: usize,
    pub memory_bytes: u64,
    pub libc: String,
    /// The allocators a comparison ran, with their versions (empty elsewhere).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub allocators: Vec<AllocatorVersion>,
}

/// One allocator of a comparison: where it came from and which version ran.
#[derive(Debug, Clone, Serialize, serde::Deserialize, PartialEq, Default)]
pub struct AllocatorVersion {
    pub name: String,
    /// heaplab, glibc, peer (from the distribution) or custom.
    pub source: String,
    /// The shared object preloaded (none for glibc).
    pub library: Option<String>,
    /// The Debian package that installed the library, when one did.
    pub package: Option<String>,
    /// Its version: the package's, glibc's, or heaplab's own for the zoo.
    pub version: Option<String>,
}

/// The Debian package owning `path` (tried as given, then resolved), and
/// its version. None where dpkg is missing or no package owns the file.
fn debian_package(path: &Path) -> Option<(String, String)> {
    let query = |args: &[&std::ffi::OsStr]| -> Option<String> {
        let o = Command::new("dpkg-query")
            .args(args)
            .stderr(std::process::Stdio::null())
            .output()
            .ok()?;
        o.status.success().then(|| String::from_utf8_lossy(&o.stdout).trim().to_string())
    };
    let real = std::fs::canonicalize(path).ok();
    let owner = [Some(path.to_path_buf()), real].into_iter().flatten().find_map(|p| {
        let line = query(&["-S".as_ref(), p.as_os_str()])?;
        // "libmimalloc2.0:amd64: /usr/lib/x86_64-linux-gnu/libmimalloc.so.2.0"
        let pkg = line.lines().next()?.split(": ").next()?.split(", ").next()?.to_string();
        (!pkg.is_empty()).then_some(pkg)
    })?;
    let version = query(&["-W".as_ref(), "-f=${Version}".as_ref(), owner.as_ref()])?;
    Some((owner, version))
}

/// The versions of `allocs` (heaplab's own allocators carry `heaplab`, the
/// version string of this build).
pub fn allocator_versions(allocs: &[Allocator], heaplab: &str) -> Vec<AllocatorVersion> {
    allocs
        .iter()
        .map(|a| {
            let library = a.preload.as_ref().map(|p| p.display().to_string());
            let (package, version) = match a.source {
                Source::Glibc => (None, Some(libc_version())),
                Source::Heaplab => (None, Some(format!("heaplab {heaplab}"))),
                Source::Peer | Source::Custom => {
                    match a.preload.as_deref().and_then(debian_package) {
                        Some((p, v)) => (Some(p), Some(v)),
                        None => (None, None),
                    }
                }
            };
            AllocatorVersion {
                name: a.name.clone(),
                source: a.source.name().to_string(),
                library,
                package,
                version,
            }
        })
        .collect()
}

fn uname() -> (String, String, String) {
    // SAFETY: uname fills the zeroed struct; its fields are NUL-terminated.
    unsafe {
        let mut u: libc::utsname = std::mem::zeroed();
        if libc::uname(&mut u) != 0 {
            return Default::default();
        }
        let s = |f: &[libc::c_char]| {
            std::ffi::CStr::from_ptr(f.as_ptr()).to_string_lossy().into_owned()
        };
        (s(&u.nodename), format!("{} {}", s(&u.sysname), s(&u.release)), s(&u.machine))
    }
}

fn libc_version() -> String {
    extern "C" {
        fn gnu_get_libc_version() -> *const libc::c_char;
    }
    // SAFETY: glibc returns a pointer to a static NUL-terminated string.
    let v = unsafe { std::ffi::CStr::from_ptr(gnu_get_libc_version()) };
    format!("glibc {}", v.to_string_lossy())
}

fn proc_field(file: &str, key: &str) -> Option<String> {
    let text = std::fs::read_to_string(file).ok()?;
    text.lines().find_map(|l| {
        let (k, v) = l.split_once(':').or_else(|| l.split_once('='))?;
        (k.trim() == key).then(|| v.trim().trim_matches('"').to_string())
    })
}

/// Days since 1970-01-01 to (year, month, day), proleptic Gregorian.
fn civil(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (yoe + era * 400 + i64::from(m <= 2), m, d)
}

/// Seconds since the epoch as `YYYY-MM-DDTHH:MM:SSZ`.
pub fn iso8601(secs: u64) -> String {
    let (y, m, d) = civil((secs / 86_400) as i64);
    let s = secs % 86_400;
    format!("{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}Z", s / 3600, s / 60 % 60, s % 60)
}

impl Provenance {
    /// This machine, now, for heaplab `version` (and `commit`) run as `command`.
    pub fn collect(version: &str, commit: Option<&str>, command: Vec<String>) -> Provenance {
        let (host, kernel, arch) = uname();
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        let mem_kb = proc_field("/proc/meminfo", "MemTotal")
            .and_then(|v| v.split_whitespace().next()?.parse::<u64>().ok())
            .unwrap_or(0);
        Provenance {
            heaplab_version: version.to_string(),
            heaplab_commit: commit.filter(|c| !c.is_empty()).map(str::to_string),
            command,
            date: iso8601(now),
            machine: format!("{host} ({arch})"),
            os: proc_field("/etc/os-release", "PRETTY_NAME").unwrap_or_default(),
            kernel,
            cpu: proc_field("/proc/cpuinfo", "model name").unwrap_or_default(),
            cpus: std::thread::available_parallelism().map_or(1, |n| n.get()),
            memory_bytes: mem_kb * 1024,
            libc: libc_version(),
            allocators: Vec::new(),
        }
    }

    /// The same, naming the allocators a comparison ran and their versions.
    pub fn with_allocators(mut self, allocs: &[Allocator]) -> Provenance {
        let heaplab = match &self.heaplab_commit {
            Some(c) => format!("{} ({c})", self.heaplab_version),
            None => self.heaplab_version.clone(),
        };
        self.allocators = allocator_versions(allocs, &heaplab);
        self
    }

    /// (label, value) rows for a table.
    pub fn rows(&self) -> Vec<(String, String)> {
        let mut v = vec![
            (
                "heaplab".into(),
                match &self.heaplab_commit {
                    Some(c) => format!("{} ({c})", self.heaplab_version),
                    None => self.heaplab_version.clone(),
                },
            ),
            ("command".into(), self.command.join(" ")),
            ("date".into(), self.date.clone()),
            ("machine".into(), self.machine.clone()),
            ("CPU".into(), format!("{} × {}", self.cpus, self.cpu)),
            ("memory".into(), format!("{:.1} GiB", self.memory_bytes as f64 / (1u64 << 30) as f64)),
            ("system".into(), format!("{}, {}", self.os, self.kernel)),
            ("C library".into(), self.libc.clone()),
        ];
        for a in &self.allocators {
            let mut what = a.version.clone().unwrap_or_else(|| "version unknown".into());
            if let Some(p) = &a.package {
                what.push_str(&format!(" (Debian package {p})"));
            }
            if let Some(l) = &a.library {
                what.push_str(&format!(", {l}"));
            }
            v.push((format!("allocator {}", a.name), what));
        }
        v.retain(|(_, x)| !x.is_empty());
        v
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dates_and_this_machine() {
        assert_eq!(iso8601(0), "1970-01-01T00:00:00Z");
        assert_eq!(iso8601(951_782_400), "2000-02-29T00:00:00Z");
        assert_eq!(iso8601(1_700_000_000), "2023-11-14T22:13:20Z");
        let p = Provenance::collect("1.0", Some("abc"), vec!["heaplab".into()]);
        assert!(p.libc.starts_with("glibc 2.") && p.kernel.starts_with("Linux "), "{p:?}");
        assert!(p.cpus >= 1 && p.memory_bytes > 0);
    }

    #[test]
    fn allocator_versions_name_their_source() {
        let glibc = Allocator {
            name: "glibc".into(),
            source: Source::Glibc,
            preload: None,
            env: vec![],
            missing: None,
        };
        // a library no package owns: its version is unknown, not guessed
        let own = Allocator {
            name: "mine".into(),
            source: Source::Custom,
            preload: Some("/nonexistent/libmine.so".into()),
            ..glibc.clone()
        };
        let p = Provenance::collect("1.0", None, vec![]).with_allocators(&[glibc, own]);
        assert_eq!(p.allocators[0].version.as_deref(), Some(p.libc.as_str()));
        assert_eq!(p.allocators[1].library.as_deref(), Some("/nonexistent/libmine.so"));
        assert_eq!(
            (p.allocators[1].package.as_ref(), p.allocators[1].version.as_ref()),
            (None, None)
        );
        assert!(p
            .rows()
            .iter()
            .any(|(k, v)| k == "allocator mine" && v.contains("version unknown")));
    }
}
