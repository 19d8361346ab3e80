//! The predictors on small synthetic traces whose answer is known: objects
//! made at known call sites, with known lifetimes, references and stack
//! depths, written with the trace crate's writer and REFS encoder.

use heaplab_segregate::classes::{Class, Thresholds};
use heaplab_segregate::objects::{self, Profile};
use heaplab_segregate::predictors::{classify, random_class, Kind, Predictor, TrainOptions};
use heaplab_segregate::search::{search, SearchOptions, Timeline};
use heaplab_trace::refs::{write_block, RefsEncoder, OPTION};
use heaplab_trace::sp::SpEncoder;
use heaplab_trace::{Frame, Kind as EvKind, Meta, Module, NewEvent, TraceWriter, WriterOptions};
use std::path::PathBuf;

/// One object to make: its stack (module, offset) innermost first, size,
/// references, lifetime in instructions (None: never freed), stack depth,
/// and how many reallocs continue it.
#[derive(Clone)]
struct O {
    frames: Vec<(u32, u64)>,
    size: u64,
    refs: u64,
    life: Option<u64>,
    sp: u64,
    reallocs: u32,
}

fn o(frames: &[(u32, u64)], size: u64, refs: u64, life: Option<u64>) -> O {
    O { frames: frames.to_vec(), size, refs, life, sp: 0, reallocs: 0 }
}

struct Tmp(PathBuf);
impl Drop for Tmp {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

/// Writes the objects as a trace with references and loads it back.
fn profile(name: &str, objs: &[O]) -> (Profile, Tmp) {
    #[derive(PartialEq, Eq, PartialOrd, Ord)]
    enum A {
        Alloc(usize),
        Realloc(usize, u32),
        Ref(usize, u64),
        Free(usize),
    }
    let mut acts: Vec<(u64, u8, A)> = Vec::new();
    let mut t = 10u64;
    for (i, x) in objs.iter().enumerate() {
        acts.push((t, 0, A::Alloc(i)));
        for r in 0..x.refs {
            acts.push((t + 1 + r, 2, A::Ref(i, r)));
        }
        for k in 0..x.reallocs {
            acts.push((t + 1 + x.refs / 2, 1, A::Realloc(i, k)));
        }
        if let Some(l) = x.life {
            assert!(l > x.refs + 1, "the lifetime must cover the references");
            acts.push((t + l, 3, A::Free(i)));
        }
        t += 7;
    }
    acts.sort();
    let meta = Meta {
        pid: 1,
        pointer_size: 8,
        time_unit_ns: 1000,
        stack_depth: 8,
        options: Some(OPTION.into()),
        ..Meta::default()
    };
    let mut w = TraceWriter::new(Vec::new(), &meta, WriterOptions::default()).unwrap();
    w.add_thread(1, "main");
    w.add_module(&Module {
        id: 1,
        base: 0x1000,
        size: 0x100000,
        path: "/usr/bin/prog".into(),
        build_id: vec![],
    });
    w.add_module(&Module {
        id: 2,
        base: 0x900000,
        size: 0x100000,
        path: "/lib/libc.so.6".into(),
        build_id: vec![],
    });
    let mut enc = RefsEncoder::new();
    let mut sp = SpEncoder::default();
    let mut id = vec![0u64; objs.len()];
    let mut events = 0u64;
    let mut end = 0;
    for (time, _, a) in acts {
        end = time;
        match a {
            A::Alloc(i) => {
                let frames: Vec<Frame> = objs[i]
                    .frames
                    .iter()
                    .map(|&(m, off)| Frame { module: m, offset: off })
                    .collect();
                let s = w.intern_stack(&frames).unwrap();
                id[i] = w
                    .record(&NewEvent::alloc(EvKind::Malloc, objs[i].size).with_stack(s))
                    .unwrap()
                    .unwrap();
                sp.push(events, objs[i].sp);
                events += 1;
                enc.events(1, 1, time);
            }
            A::Realloc(i, k) => {
                let n = w
                    .record(&NewEvent::realloc(Some(id[i]), objs[i].size + 16 * (k as u64 + 1)))
                    .unwrap()
                    .unwrap();
                id[i] = n;
                events += 1;
                enc.events(1, 1, time);
            }
            A::Ref(i, r) => enc.heap(id[i], (r * 8) % objs[i].size.max(8), 8, r % 3 == 0, time),
            A::Free(i) => {
                w.record(&NewEvent::free(id[i])).unwrap();
                events += 1;
                enc.events(1, 0, time);
            }
        }
    }
    enc.end(end + 100);
    write_block(&mut w, &mut enc).unwrap();
    if let Some(p) = sp.take_block() {
        w.write_stream_block(
            heaplab_trace::format::kind::SP,
            heaplab_trace::format::BLOCK_SKIPPABLE,
            &p,
        )
        .unwrap();
    }
    let bytes = w.finish(&heaplab_trace::End::default()).unwrap();
    let path = heaplab_plumb::scratch::process_dir("seg-predictors")
        .unwrap()
        .join(format!("{name}.hltrace"));
    std::fs::write(&path, bytes).unwrap();
    let p = objects::load(&path).unwrap();
    (p, Tmp(path))
}

// Sites: frames (module, offset), innermost first.
const HOT: &[(u32, u64)] = &[(1, 0x100), (1, 0x500), (1, 0x900)];
const TEMP: &[(u32, u64)] = &[(1, 0x110), (1, 0x500), (1, 0x900)];
const COLD: &[(u32, u64)] = &[(1, 0x120), (1, 0x600), (1, 0x900)];
const MIXED: &[(u32, u64)] = &[(1, 0x130), (1, 0x600), (1, 0x900)];

/// Thresholds for these traces: SL lives at most 1000 instructions, HR at
/// least 100000 with 2 references per byte, not-HR at most 0.1.
fn t() -> Thresholds {
    Thresholds::new(1000, 100_000, 2.0, 0.1).unwrap()
}

fn hot() -> O {
    o(HOT, 16, 64, None)
}
fn temp() -> O {
    o(TEMP, 32, 4, Some(200))
}
fn cold() -> O {
    o(COLD, 256, 1, None)
}

/// Many objects of each kind, and a site that makes HR and SL objects alike.
fn run(n: usize) -> Vec<O> {
    let mut v = Vec::new();
    for i in 0..n {
        v.push(hot());
        v.push(temp());
        v.push(temp());
        v.push(cold());
        v.push(if i % 2 == 0 { o(MIXED, 16, 64, None) } else { o(MIXED, 32, 4, Some(200)) });
    }
    // something to make the program last: HR needs 100000 instructions of age
    v.push(o(&[(1, 0x999)], 8, 0, Some(200_000)));
    v
}

fn classes_of(p: &Profile, pred: &Predictor) -> Vec<Class> {
    pred.predict_all(p)
}

#[test]
fn the_objects_get_the_classes_they_were_made_for() {
    let (p, _t) = profile("classes", &run(20));
    let c = classify(&p, &t());
    assert_eq!(c[0], Class::Hr, "{:?}", p.objects[0]);
    assert_eq!(c[1], Class::Sl);
    assert_eq!(c[3], Class::NotHr);
    // reference counts and lifetimes are exact
    assert_eq!(p.objects[0].refs(), 64);
    assert_eq!(p.objects[1].lifetime(p.instructions), 200);
    assert_eq!(p.objects[0].density(), 4.0);
}

#[test]
fn stack_predicts_each_site_and_leaves_the_mixed_one_out() {
    let (train, _a) = profile("stack-train", &run(30));
    let (test, _b) = profile("stack-test", &run(10));
    let pred = Predictor::train(Kind::Stack { depth: 3 }, &train, &t(), &TrainOptions::default());
    let c = classes_of(&test, &pred);
    for i in 0..10 {
        assert_eq!(c[5 * i], Class::Hr);
        assert_eq!(c[5 * i + 1], Class::Sl);
        assert_eq!(c[5 * i + 3], Class::NotHr);
        assert_eq!(
            c[5 * i + 4],
            Class::Other,
            "a site half HR, half SL predicts nothing at purity 0.9"
        );
    }
    // not-HR: the cold site, and the site of the long-lived object with no reference
    assert_eq!(pred.entries_per_class(), [0, 1, 1, 2]);
    // at purity 0.5 the mixed site goes to one of its classes
    let loose =
        Predictor::train(Kind::Stack { depth: 3 }, &train, &t(), &TrainOptions { purity: 0.5 });
    assert_ne!(classes_of(&test, &loose)[4], Class::Other);
}

#[test]
fn the_depth_of_stack_is_configurable() {
    // two sites share their innermost call site (a wrapper), and differ above it
    let a: &[(u32, u64)] = &[(2, 0x40), (1, 0x700), (1, 0x900)];
    let b: &[(u32, u64)] = &[(2, 0x40), (1, 0x710), (1, 0x900)];
    let mut v = Vec::new();
    for _ in 0..20 {
        v.push(o(a, 16, 64, None));
        v.push(o(b, 32, 4, Some(200)));
    }
    v.push(o(&[(1, 0x999)], 8, 0, Some(200_000)));
    let (p, _t) = profile("depth", &v);
    let k1 = Predictor::train(Kind::Stack { depth: 1 }, &p, &t(), &TrainOptions::default());
    let k3 = Predictor::train(Kind::Stack { depth: 3 }, &p, &t(), &TrainOptions::default());
    let (c1, c3) = (classes_of(&p, &k1), classes_of(&p, &k3));
    assert_eq!((c1[0], c1[1]), (Class::Other, Class::Other), "depth 1 sees only the wrapper");
    assert_eq!((c3[0], c3[1]), (Class::Hr, Class::Sl), "depth 3 sees past it");
    assert_eq!(Kind::parse("stack:2", 3).unwrap(), Kind::Stack { depth: 2 });
    assert_eq!(Kind::parse("STACK", 5).unwrap(), Kind::Stack { depth: 5 });
    assert!(Kind::parse("stack:0", 3).is_err());
    assert!(Kind::parse("heap", 3).unwrap_err().to_string().contains("stack+size"));
}

#[test]
fn stack_plus_size_splits_a_site_by_size() {
    // MIXED makes HR objects of 16 bytes and SL objects of 32
    let (train, _a) = profile("size-train", &run(30));
    let (test, _b) = profile("size-test", &run(10));
    let ss = Predictor::train(Kind::StackSize { depth: 3 }, &train, &t(), &TrainOptions::default());
    let c = classes_of(&test, &ss);
    assert_eq!(c[4], Class::Hr);
    assert_eq!(c[9], Class::Sl);
}

#[test]
fn path_finds_the_call_site_below_which_objects_behave_alike() {
    // two allocation sites under one caller p (all HR), one under q (SL)
    let p1: &[(u32, u64)] = &[(1, 0x200), (1, 0x800), (1, 0x900)];
    let p2: &[(u32, u64)] = &[(1, 0x210), (1, 0x800), (1, 0x900)];
    let q1: &[(u32, u64)] = &[(1, 0x220), (1, 0x810), (1, 0x900)];
    let mut v = Vec::new();
    for _ in 0..20 {
        v.push(o(p1, 16, 64, None));
        v.push(o(p2, 16, 64, None));
        v.push(o(q1, 32, 4, Some(200)));
    }
    v.push(o(&[(1, 0x999), (0, 0x7fff_0000)], 8, 0, Some(200_000)));
    let (train, _a) = profile("path-train", &v);
    // the test run reaches p and q through allocation sites training never saw
    let p9: &[(u32, u64)] = &[(1, 0x2f0), (1, 0x800), (1, 0x900)];
    let q9: &[(u32, u64)] = &[(1, 0x2f8), (1, 0x810), (1, 0x900)];
    let (test, _b) = profile(
        "path-test",
        &[o(p9, 16, 64, None), o(q9, 32, 4, Some(200)), o(&[(1, 0x999)], 8, 0, Some(200_000))],
    );
    let path = Predictor::train(Kind::Path, &train, &t(), &TrainOptions::default());
    let stack = Predictor::train(Kind::Stack { depth: 3 }, &train, &t(), &TrainOptions::default());
    assert_eq!(&classes_of(&test, &path)[..2], &[Class::Hr, Class::Sl]);
    assert_eq!(&classes_of(&test, &stack)[..2], &[Class::Other, Class::Other]);
    // main's call site (0x900) is above objects of every class: never a path point;
    // a frame in no module is never one either
    let keys: Vec<u64> = path.table.iter().map(|e| e.0).collect();
    assert!(!keys.contains(&heaplab_segregate::keys::frame_key("/usr/bin/prog", 0x900)));
    assert!(!keys.contains(&heaplab_segregate::keys::frame_key("", 0x7fff_0000)));
    assert!(keys.contains(&heaplab_segregate::keys::frame_key("prog", 0x800)));
}

#[test]
fn sp_predicts_from_the_recorded_stack_depth() {
    let mut v = Vec::new();
    for _ in 0..20 {
        v.push(O { sp: 400, ..o(&[(1, 0x300)], 16, 64, None) });
        v.push(O { sp: 800, ..o(&[(1, 0x300)], 32, 4, Some(200)) });
        v.push(O { sp: 0, ..o(&[(1, 0x300)], 32, 4, Some(200)) }); // depth unknown
    }
    v.push(o(&[(1, 0x999)], 8, 0, Some(200_000)));
    let (p, _t) = profile("sp", &v);
    assert!(p.has_sp);
    assert_eq!(
        (p.objects[0].sp_depth, p.objects[1].sp_depth, p.objects[2].sp_depth),
        (400, 800, 0)
    );
    let sp = Predictor::train(Kind::Sp, &p, &t(), &TrainOptions::default());
    assert_eq!(&classes_of(&p, &sp)[..3], &[Class::Hr, Class::Sl, Class::Other]);
    // one site: STACK cannot tell them apart
    let st = Predictor::train(Kind::Stack { depth: 3 }, &p, &t(), &TrainOptions::default());
    assert_eq!(classes_of(&p, &st)[0], Class::Other);
}

#[test]
fn random_spreads_objects_evenly_and_agrees_with_the_allocator() {
    let mut n = [0u32; 4];
    for i in 0..40_000 {
        n[random_class(7, i).index()] += 1;
    }
    for c in n {
        assert!((9_500..10_500).contains(&c), "{n:?}");
    }
    // hl_seg_random(7, n) in native/segregate/seg.h, printed by a C program
    let c: Vec<usize> = (0..8).map(|i| random_class(7, i).index()).collect();
    assert_eq!(c, vec![1, 2, 3, 2, 2, 1, 1, 0]);
}

#[test]
fn a_realloc_continues_its_object() {
    let mut v = vec![O { reallocs: 3, ..o(HOT, 16, 64, None) }];
    v.push(o(&[(1, 0x999)], 8, 0, Some(200_000)));
    let (p, _t) = profile("realloc", &v);
    assert_eq!(p.objects.len(), 2);
    let x = &p.objects[0];
    assert_eq!((x.reallocs, x.size, x.max_size, x.refs()), (3, 16, 64, 64));
}

#[test]
fn the_search_keeps_to_the_rule_and_improves_on_its_start() {
    let (train, _a) = profile("search-train", &run(30));
    let (thresh, _b) = profile("search-thresh", &run(20));
    // a start that classifies nothing usefully: everything is "other"
    let bad = Thresholds::new(1, 10_000_000, 1000.0, 0.0001).unwrap();
    let opt = SearchOptions { start: Some(bad), ..SearchOptions::default() };
    let r = search(Kind::Stack { depth: 3 }, &train, &thresh, &opt);
    for c in &r.evaluated {
        c.thresholds.validate().unwrap();
    }
    let start = &r.evaluated[0];
    assert_eq!(start.thresholds, bad);
    assert!(r.best.score < start.score, "{} !< {}", r.best.score, start.score);
    assert!(r.best.score < 1.0);
    // DEFAULT scores 1 in the model; RANDOM no better
    let tl = Timeline::new(&thresh);
    assert_eq!(tl.score(&vec![Class::Other; thresh.objects.len()], 4096), 1.0);
}
