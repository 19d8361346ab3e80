//! The Valgrind tool against exact counts: small C programs
//! (`native/vgtool/tests/*.c`) make a known number of heap loads and stores,
//! and the trace must say exactly that, per object, with instruction times.
//! Needs `make -C native` (the tool and the programs); each run is a fraction
//! of a second under Valgrind.

use heaplab_refs::record::{self, Options};
use heaplab_refs::vg::{Ended, VgTools};
use heaplab_trace::refs::{object_profile, RefItem, RefsReader, Target};
use heaplab_trace::Kind;
use std::path::{Path, PathBuf};

/// This test process's scratch directory, shared by its tests (they share
/// recorded traces), removed at exit.
fn scratch() -> &'static Path {
    heaplab_plumb::scratch::process_dir("vgtool-test").unwrap()
}

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..").canonicalize().unwrap()
}

fn tools() -> VgTools {
    let t = VgTools::from_lib_dir(&root().join("build/lib"));
    t.check("heaplab").unwrap_or_else(|e| panic!("{e:#}"));
    t
}

fn program(name: &str) -> PathBuf {
    let p = root().join("build/bin").join(format!("vgtool-test-{name}"));
    assert!(p.exists(), "{} is not built: run `make -C native` first", p.display());
    p
}

fn out(name: &str) -> PathBuf {
    scratch().join(format!("{name}.hltrace"))
}

/// The (offset, size, store) list of trace object `id`'s references, in order.
fn accesses(trace: &std::path::Path, id: u64) -> Vec<(u64, u32, bool)> {
    let mut r = RefsReader::open(trace).unwrap();
    let mut v = Vec::new();
    while let Some(it) = r.next_item().unwrap() {
        if let RefItem::Ref(x) = it {
            if let Target::Object { id: i, offset } = x.target {
                if i == id {
                    v.push((offset, x.size, x.write));
                }
            }
        }
    }
    v
}

#[test]
fn counts_are_exact_per_object() {
    let t = out("counts");
    let (ended, s) =
        record::record(&tools(), &[program("counts").into()], &t, &Options::default()).unwrap();
    assert_eq!(ended, Ended::Exit(0));
    assert!(s.instructions.unwrap() > 10_000);
    let p = object_profile(&t).unwrap();
    assert!(p.has_refs);
    let o = &p.objects;
    // the program's objects, in allocation order (nothing else allocates);
    // b is reallocated to 200 bytes, which continues it (trace object 2)
    let sizes: Vec<(u8, u64, u64)> = o.iter().map(|x| (x.kind, x.size, x.max_size)).collect();
    let m = Kind::Malloc.code();
    assert_eq!(
        sizes,
        vec![
            (m, 100, 100),
            (Kind::Calloc.code(), 80, 200),
            (m, 24, 24),
            (m, 8, 8),
            (m, 8, 8),
            (m, 8, 8),
            (m, 8, 8)
        ]
    );
    assert_eq!((o[1].reallocs, p.of_id(2)), (1, Some(&o[1])));
    // a: 25 stores of 4 B, 1 of 16 B; 10 loads of 1 B, 3 of 8 B, 1 of 16 B
    assert_eq!((o[0].stores, o[0].store_bytes), (26, 25 * 4 + 16));
    assert_eq!((o[0].loads, o[0].load_bytes), (14, 10 + 24 + 16));
    let mut a = accesses(&t, 0);
    a.sort();
    assert!(a.contains(&(16, 16, true)) && a.contains(&(16, 16, false)));
    assert!(a.contains(&(96, 4, true)) && a.contains(&(80, 8, false)));
    // b: 7 stores of 8 B before the realloc, 5 loads of 2 B after it (as
    // trace object 2); the realloc's copy is not the program's
    assert_eq!((o[1].stores, o[1].store_bytes), (7, 56));
    assert_eq!((o[1].loads, o[1].load_bytes), (5, 10));
    let b = accesses(&t, 1);
    assert!(b.len() == 7 && b.iter().all(|x| x.2), "{b:?}");
    let c = accesses(&t, 2);
    assert_eq!(c.iter().map(|x| x.0).collect::<Vec<_>>(), vec![190, 192, 194, 196, 198]);
    // e0..e3: 3 loads each
    for e in &o[3..7] {
        assert_eq!((e.loads, e.load_bytes, e.stores), (3, 24, 0));
    }
    for x in o {
        assert!(x.died.is_some(), "object {} was freed", x.id);
        assert!(x.died.unwrap() > x.born);
    }
}

#[test]
fn instruction_times_are_exact() {
    let t = out("counts-time");
    record::record(&tools(), &[program("counts").into()], &t, &Options::default()).unwrap();
    // d: the store at 0, then exactly 12001 instructions (mov + 1000 × 12), then the store at 8
    let mut r = RefsReader::open(&t).unwrap();
    let mut times = Vec::new();
    while let Some(it) = r.next_item().unwrap() {
        if let RefItem::Ref(x) = it {
            if let Target::Object { id: 3, offset } = x.target {
                times.push((offset, x.time));
            }
        }
    }
    assert_eq!(times.len(), 2, "{times:?}");
    assert_eq!(times[1].1 - times[0].1, 12_002, "{times:?}");
}

#[test]
fn blocks_reused_at_the_same_address_are_told_apart() {
    let t = out("reuse");
    let (ended, _) =
        record::record(&tools(), &[program("reuse").into()], &t, &Options::default()).unwrap();
    assert_eq!(ended, Ended::Exit(0), "exit 3: the second block did not land where the first was");
    let p = object_profile(&t).unwrap();
    let o = &p.objects;
    assert_eq!(o.len(), 2);
    assert_eq!(
        (o[0].stores, o[0].loads),
        (2, 0),
        "p: two stores; the read after the free is not p's"
    );
    assert_eq!((o[1].stores, o[1].loads, o[1].load_bytes), (0, 3, 24));
    // the read after the free is an other reference, between p's death and q's birth
    let mut r = RefsReader::open(&t).unwrap();
    let (mut after_free, mut between) = (false, 0);
    while let Some(it) = r.next_item().unwrap() {
        match it {
            RefItem::Event { event, .. } if event.kind == Kind::Free && event.old == Some(0) => {
                after_free = true
            }
            RefItem::Event { event, .. } if event.id == Some(1) => after_free = false,
            RefItem::Ref(x) if after_free && x.size == 8 && !x.write => {
                if let Target::Other { addr } = x.target {
                    if addr < 0x1_0000_0000 {
                        between += 1; // heap addresses are low under valgrind; the stack is not
                    }
                }
            }
            _ => {}
        }
    }
    assert!(between >= 1, "the load after the free is kept, as an other reference");
}

#[test]
fn event_times_lie_between_the_programs_own_clock_readings() {
    // the tool reads the clock now and then and interpolates with the TSC
    // between readings; the program reads CLOCK_MONOTONIC around each malloc
    let t = out("clock");
    let readings = t.with_extension("txt");
    let cmd = [program("clock").into_os_string(), readings.clone().into_os_string()];
    let (ended, _) = record::record(&tools(), &cmd, &t, &Options::default()).unwrap();
    assert_eq!(ended, Ended::Exit(0));
    let around: Vec<(u64, u64)> = std::fs::read_to_string(&readings)
        .unwrap()
        .lines()
        .map(|l| {
            let (a, b) = l.split_once(' ').unwrap();
            (a.parse().unwrap(), b.parse().unwrap())
        })
        .collect();
    assert_eq!(around.len(), 80);
    let mut r = heaplab_trace::TraceReader::open(&t).unwrap();
    assert_eq!(r.meta().time_unit_ns, 1000);
    let mut mallocs = Vec::new();
    while let Some(e) = r.next_event().unwrap() {
        if e.kind == Kind::Malloc {
            mallocs.push(e.time);
        }
    }
    assert_eq!(mallocs.len(), around.len(), "the program's mallocs only");
    // microseconds, truncated; the slack is for the interpolation (the rate
    // is measured over milliseconds: nanoseconds of error) and the clamp that
    // keeps times from running backwards
    for (i, (&us, &(before, after))) in mallocs.iter().zip(&around).enumerate() {
        assert!(
            before / 1000 <= us + 20 && us <= after / 1000 + 20,
            "malloc {i}: the trace says {us} us, the program read {before} and {after} ns around it"
        );
    }
}

#[test]
fn threads_that_come_and_go_are_each_one_trace_thread() {
    // bench/progs/spawnjoin: 3 rounds of 2 threads (Valgrind reuses their
    // ThreadIds); the tool asks the kernel whose thread it is only after a
    // thread was made or went, and the main thread's last frees (after the
    // exit hooks ran) stay the main thread's
    let p = root().join("build/bin/record-spawnjoin");
    assert!(p.exists(), "{} is not built: run `make -C native` first", p.display());
    let t = out("spawnjoin");
    let cmd = [p.into_os_string(), "3".into(), "200".into()];
    let (ended, s) = record::record(&tools(), &cmd, &t, &Options::default()).unwrap();
    assert_eq!(ended, Ended::Exit(0));
    let mut r = heaplab_trace::TraceReader::open(&t).unwrap();
    let mut per_thread = std::collections::BTreeMap::<u32, u64>::new();
    while let Some(e) = r.next_event().unwrap() {
        *per_thread.entry(e.thread).or_default() += 1;
    }
    let tids: Vec<u64> = r.threads().iter().map(|t| t.tid).collect();
    assert_eq!(tids.len(), 7, "the main thread and 3 x 2: {tids:?}");
    let mut distinct = tids.clone();
    distinct.sort();
    distinct.dedup();
    assert_eq!(distinct.len(), 7, "a kernel thread is one trace thread: {tids:?}");
    assert_eq!(per_thread.len(), 7, "{per_thread:?}");
    assert_eq!(per_thread.values().sum::<u64>(), s.events);
}
