//! Measure mode end to end on a tiny program: the merged stream holds
//! exactly the recorded references plus the allocator's, every event is
//! marked, and the simulators fed from it agree exactly with the naive
//! oracles. Needs `make -C native`.

use heaplab_plumb::{alloc, Tools};
use heaplab_refs::measure::{events_only, measure_with, Merged};
use heaplab_refs::record::{self, Options};
use heaplab_refs::vg::{Ended, VgTools};
use heaplab_sim::config::CacheConfig;
use heaplab_sim::oracle::{NaivePages, NaiveSweep};
use heaplab_sim::{
    drive, Access, AccessSource, CacheSweep, IterSource, Mode, Next, PageSim, Part, Simulator,
};
use heaplab_trace::refs::object_profile;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

/// This test process's scratch directory, shared by its tests (they share
/// recorded traces), removed at exit.
fn scratch() -> &'static Path {
    heaplab_plumb::scratch::process_dir("measure-test").unwrap()
}

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..").canonicalize().unwrap()
}

fn vg() -> VgTools {
    let t = VgTools::from_lib_dir(&root().join("build/lib"));
    t.check("heaplab").unwrap_or_else(|e| panic!("{e:#}"));
    t.check("heaplab-measure").unwrap_or_else(|e| panic!("{e:#}"));
    t
}

fn dir() -> PathBuf {
    scratch().to_path_buf()
}

/// The counts program recorded once, with its events-only copy.
fn trace() -> &'static (PathBuf, PathBuf) {
    static T: OnceLock<(PathBuf, PathBuf)> = OnceLock::new();
    T.get_or_init(|| {
        let prog = root().join("build/bin/vgtool-test-counts");
        assert!(prog.exists(), "{} is not built: run `make -C native` first", prog.display());
        let t = dir().join("counts.hltrace");
        let (ended, _) = record::record(&vg(), &[prog.into()], &t, &Options::default()).unwrap();
        assert_eq!(ended, Ended::Exit(0));
        let ev = dir().join("counts.events.hltrace");
        events_only(&t, &ev).unwrap();
        (t, ev)
    })
}

/// Every access of the merged stream, and the stream's counts.
fn merged(allocator: &str) -> (heaplab_refs::measure::MeasureStats, Vec<Access>) {
    let tools = Tools::new(&heaplab_plumb::Layout::checkout(&root())).unwrap();
    let a = alloc::resolve(&[allocator.to_string()], &tools).unwrap().remove(0);
    let (t, ev) = trace();
    measure_with(&vg(), &tools.replay, t, ev, &a, |src: &mut Merged| {
        let mut all = Vec::new();
        let mut buf = Vec::with_capacity(4096);
        loop {
            let next = src.next_batch(&mut buf)?;
            all.extend_from_slice(&buf);
            if next == Next::End {
                break;
            }
        }
        Ok((src.stats, all))
    })
    .unwrap_or_else(|e| panic!("{e:#}"))
}

#[test]
fn the_merged_stream_is_the_recording_plus_the_allocator() {
    let (t, _) = trace();
    let p = object_profile(t).unwrap();
    for name in ["glibc", "bsd", "firstfit"] {
        let (s, all) = merged(name);
        assert_eq!(
            s.app_heap_refs,
            p.stats.heap_refs(),
            "{name}: every recorded heap reference, re-issued"
        );
        assert_eq!(s.app_other_refs, p.stats.other_loads + p.stats.other_stores, "{name}");
        assert_eq!(s.refs_to_null, 0);
        let allocations: u64 = p.objects.iter().map(|o| 1 + u64::from(o.reallocs)).sum();
        assert_eq!((allocations, s.events), (8, 8 + 7), "{name}: 8 allocations and 7 frees");
        assert!(s.alloc_refs > 20 && s.alloc_instructions > 50, "{name}: {s:?}");
        assert_eq!(s.app_instructions, p.end);
        let alloc = all.iter().filter(|a| a.part == Part::Allocator).count() as u64;
        assert_eq!(alloc, s.alloc_refs);
        assert_eq!(all.len() as u64, s.refs());
    }
}

#[test]
fn simulators_fed_from_the_merged_stream_match_the_oracle() {
    let (_, all) = merged("bsd");
    let configs: Vec<CacheConfig> =
        [(512, 32, 1), (4096, 32, 2), (16384, 64, 8), (32768, 32, 1), (65536, 64, 4)]
            .iter()
            .map(|&(s, l, a)| CacheConfig::new(s, l, a).unwrap())
            .collect();
    let modes = [Mode::Unified, Mode::Split];
    let mut fast = CacheSweep::new(&configs, &modes);
    let mut naive = NaiveSweep::new(&configs, &modes);
    let mut pages = PageSim::new(4096).unwrap();
    let mut naive_pages = NaivePages::new(4096);
    let sims: &mut [&mut dyn Simulator] =
        &mut [&mut fast, &mut naive, &mut pages, &mut naive_pages];
    drive(&mut IterSource::new(all.iter().copied()), sims).unwrap();
    assert_eq!(fast.results(), naive.results());
    assert_eq!(pages.curve(), naive_pages.curve());
    // the allocator's part misses in split mode come from its own cache
    let r = fast.results();
    let split = r.iter().find(|x| x.mode == Mode::Split && x.config == configs[3]).unwrap();
    assert!(split.counts.part_accesses(Part::Allocator) > 0);
}
