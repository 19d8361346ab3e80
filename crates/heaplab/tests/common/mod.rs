//! What the job and counter tests share: a scratch directory, running
//! heaplab, and a generated trace that makes every kind of call.

#![allow(dead_code)]

use heaplab_trace::{End, Kind, Meta, NewEvent, TraceWriter, WriterOptions};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

pub fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..").canonicalize().unwrap()
}

/// A fresh private scratch directory (mkdtemp: mode 0700, a name never
/// used before), removed when dropped unless HEAPLAB_KEEP_TEST_DIRS is set.
pub struct Tmp(pub PathBuf);
impl Drop for Tmp {
    fn drop(&mut self) {
        if std::env::var_os("HEAPLAB_KEEP_TEST_DIRS").is_none() {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }
}
impl std::ops::Deref for Tmp {
    type Target = Path;
    fn deref(&self) -> &Path {
        &self.0
    }
}
pub fn tmp(name: &str) -> Tmp {
    let prefix = format!("heaplab-test-{name}-");
    Tmp(heaplab_plumb::scratch::mkdtemp(&std::env::temp_dir(), &prefix).unwrap())
}

/// One scratch directory for the whole test process (what its tests share:
/// a trace recorded once, a cache of kept outcomes), removed at exit.
pub fn process_tmp() -> PathBuf {
    heaplab_plumb::scratch::process_dir("test-process").unwrap().to_path_buf()
}

pub fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// heaplab with `args`, its outcomes kept under `cache` (XDG_CACHE_HOME).
pub fn heaplab_cmd(args: &[&str], cache: &Path) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_heaplab"));
    c.args(args).env_remove("LD_PRELOAD").env("XDG_CACHE_HOME", cache);
    c
}

pub fn heaplab(args: &[&str], cache: &Path) -> Output {
    heaplab_cmd(args, cache).output().unwrap()
}

pub fn show(o: &Output) -> String {
    format!(
        "status {:?}\nstdout:\n{}\nstderr:\n{}",
        o.status.code(),
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

/// A seeded trace of `n` steps with every kind of call: small and large
/// mallocs, callocs (some large enough for memset's string instructions),
/// reallocs that grow, shrink and start from NULL, realloc(p, 0), the
/// memalign family (pvalloc aside), frees, and one allocation that failed.
pub fn all_kinds_trace(path: &Path, n: u64, seed: u64) {
    let meta = Meta { pid: 1, pointer_size: 8, time_unit_ns: 1, ..Meta::default() };
    let mut w = TraceWriter::new(Vec::new(), &meta, WriterOptions::default()).unwrap();
    let t = w.add_thread(1, "main");
    let mut x = seed | 1;
    let mut rnd = move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    let mut live: Vec<(u64, u64)> = Vec::new();
    let ev = |w: &mut TraceWriter<Vec<u8>>, e: NewEvent, i: u64| w.record(&e.at(t, i)).unwrap();
    let mut failed = NewEvent::alloc(Kind::Malloc, 1 << 46);
    failed.failed = true;
    ev(&mut w, failed, 0);
    for i in 0..n {
        let r = rnd() % 100;
        let small = 1 + rnd() % if rnd() % 8 == 0 { 4000 } else { 200 };
        if r < 40 || live.len() < 8 {
            let id = ev(&mut w, NewEvent::alloc(Kind::Malloc, small), i).unwrap();
            live.push((id, small));
        } else if r < 47 {
            let size = 1 + rnd() % if rnd() % 4 == 0 { 20000 } else { 300 };
            let id = ev(&mut w, NewEvent::alloc(Kind::Calloc, size), i).unwrap();
            live.push((id, size));
        } else if r < 55 {
            let k = (rnd() % live.len() as u64) as usize;
            let (old, size) = live.swap_remove(k);
            let new = if rnd() % 2 == 0 { size * 2 + 1 } else { size / 2 + 1 };
            let id = ev(&mut w, NewEvent::realloc(Some(old), new), i).unwrap();
            live.push((id, new));
        } else if r < 56 {
            let id = ev(&mut w, NewEvent::realloc(None, small), i).unwrap();
            live.push((id, small));
        } else if r < 57 {
            let k = (rnd() % live.len() as u64) as usize;
            let (old, _) = live.swap_remove(k);
            ev(&mut w, NewEvent { old: Some(old), ..NewEvent::alloc(Kind::ReallocFree, 0) }, i);
        } else if r < 60 {
            // not pvalloc: Debian's jemalloc does not define it, so glibc's
            // would serve it and jemalloc's free would get glibc's block
            let kind = [Kind::Memalign, Kind::PosixMemalign, Kind::AlignedAlloc, Kind::Valloc]
                [(rnd() % 4) as usize];
            let align = 16u64 << (rnd() % 8);
            let size = if kind == Kind::AlignedAlloc { align * (1 + rnd() % 4) } else { small };
            let align = if kind == Kind::Valloc { 0 } else { align };
            let id = ev(&mut w, NewEvent::alloc(kind, size).with_align(align), i).unwrap();
            live.push((id, size));
        } else {
            let k = (rnd() % live.len() as u64) as usize;
            let (old, _) = live.swap_remove(k);
            ev(&mut w, NewEvent::free(old), i);
        }
    }
    std::fs::write(path, w.finish(&End::default()).unwrap()).unwrap();
}

/// The compare records of a JSON file.
pub fn records(path: &Path) -> Vec<serde_json::Value> {
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    records_of(&v)
}

/// The records of a compare JSON document (`--json`), whose schema and
/// provenance are checked on the way.
pub fn records_of(v: &serde_json::Value) -> Vec<serde_json::Value> {
    assert!(v["schema"].as_str().is_some_and(|s| s.starts_with("heaplab.compare")), "{v}");
    assert_eq!(v["schema_version"], 2, "{v}");
    let p = &v["provenance"];
    assert!(
        p["heaplab_version"].is_string() && p["kernel"].is_string() && p["date"].is_string(),
        "{p}"
    );
    let recs = v["records"].as_array().unwrap().clone();
    // every allocator of the records is named in the provenance, with a version where it has one
    let named: Vec<&str> =
        p["allocators"].as_array().unwrap().iter().map(|a| a["name"].as_str().unwrap()).collect();
    for r in &recs {
        assert!(
            named.contains(&r["allocator"].as_str().unwrap()),
            "{} not in {named:?}",
            r["allocator"]
        );
    }
    recs
}
