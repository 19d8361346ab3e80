//! `heaplab sim` on heaplab's own reference stream: a program recorded with
//! `heaplab record --refs`, simulated by the command and, independently, by
//! the naive oracles of heaplab-sim fed from the same trace.

use heaplab_refs::source::RefsSource;
use heaplab_sim::config::CacheConfig;
use heaplab_sim::oracle::{NaiveCache, NaivePages};
use heaplab_sim::{drive, Simulator};
use heaplab_trace::refs::RefsReader;
use std::process::Command;

mod common;
use common::root;

#[test]
fn sim_reads_a_trace_with_references_like_the_naive_oracles() {
    let dir = common::tmp("sim-trace");
    let t = dir.join("perl.hltrace");
    // A small program with a few thousand heap objects and their references.
    let o = Command::new(env!("CARGO_BIN_EXE_heaplab"))
        .args(["record", "--refs", "-q", "-o"])
        .arg(&t)
        .args([
            "--",
            "perl",
            "-e",
            "my %h; $h{$_} = [$_ x 3] for 1..2000; print scalar(keys %h), qq(\n);",
        ])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));

    let out = Command::new(env!("CARGO_BIN_EXE_heaplab"))
        .args(["sim", "--caches", "1K:32:1,4K:64:2", "--pages", "4K", "--json", "-"])
        .arg(&t)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(doc["input"]["format"], "hltrace");

    let configs = [CacheConfig::new(1024, 32, 1).unwrap(), CacheConfig::new(4096, 64, 2).unwrap()];
    let mut caches: Vec<NaiveCache> = configs.iter().map(|&c| NaiveCache::new(c)).collect();
    let mut pages = NaivePages::new(4096);
    {
        let mut sims: Vec<&mut dyn Simulator> =
            caches.iter_mut().map(|c| c as &mut dyn Simulator).collect();
        sims.push(&mut pages);
        let mut src = RefsSource::new(RefsReader::open(&t).unwrap());
        drive(&mut src, &mut sims).unwrap();
        assert!(src.accesses > 10_000, "only {} accesses recorded", src.accesses);
        assert_eq!(doc["input"]["accesses"], src.accesses);
    }
    for (i, c) in caches.iter().enumerate() {
        assert_eq!(doc["caches"][i]["accesses"], c.counts().total_accesses(), "cache {i}");
        assert_eq!(doc["caches"][i]["misses"], c.counts().total_misses(), "cache {i}");
    }
    let curve: Vec<[u64; 2]> = pages.curve().points().map(|(m, f)| [m, f]).collect();
    let got: Vec<[u64; 2]> = serde_json::from_value(doc["pages"][0]["curve"].clone()).unwrap();
    assert_eq!(got, curve);

    // A trace without references is refused with the way out.
    let plain = root().join("testdata/vectors/basic.hltrace");
    let o = Command::new(env!("CARGO_BIN_EXE_heaplab")).arg("sim").arg(&plain).output().unwrap();
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("heaplab record --refs"));
    drop(dir);
}
