//! REFS encoding versions (testdata/refs, README there): a version-1 stream
//! written by heaplab before version 2 existed still reads as it did; the
//! same program encoded in version 2 reads as the same items; the encoder's
//! bytes for it are pinned.

use heaplab_trace::refs::*;
use heaplab_trace::*;
use std::fmt::Write as _;
use std::path::PathBuf;

fn data(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../testdata/refs").join(name)
}

/// One line per item, the form of testdata/refs/*.items.txt.
fn line(it: &RefItem) -> String {
    let mut s = String::new();
    match it {
        RefItem::Event { event: e, time } => {
            let _ = write!(
                s,
                "event time={time} index={} kind={} id={} old={} size={} failed={}",
                e.index,
                e.kind.name(),
                e.id.map_or("-".into(), |x| x.to_string()),
                e.old.map_or("-".into(), |x| x.to_string()),
                e.size,
                u8::from(e.failed)
            );
        }
        RefItem::Ref(r) => {
            let _ = write!(s, "ref time={} size={} store={} ", r.time, r.size, u8::from(r.write));
            match r.target {
                Target::Object { id, offset } => {
                    let _ = write!(s, "object={id} offset={offset}");
                }
                Target::Other { addr } => {
                    let _ = write!(s, "addr={addr:#x}");
                }
            }
        }
        RefItem::End { instructions } => {
            let _ = write!(s, "end instructions={instructions}");
        }
    }
    s
}

fn listing(path: &std::path::Path) -> String {
    let mut r = RefsReader::open(path).unwrap();
    let mut out = String::new();
    while let Some(it) = r.next_item().unwrap() {
        out.push_str(&line(&it));
        out.push('\n');
    }
    out
}

/// FNV-1a 64 of a listing (for vectors whose listing is too long to keep).
fn digest(s: &str) -> u64 {
    s.bytes()
        .fold(0xcbf2_9ce4_8422_2325u64, |h, b| (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3))
}

struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// A random program's events and references through the encoder of the
/// day: every record form (recent and explicit objects, both address
/// registers and far jumps, explicit sizes, event batches past 64, a time
/// that runs backwards, several blocks).
fn random_trace(seed: u64, steps: usize) -> Vec<u8> {
    let mut rng = Rng(seed);
    let meta = Meta {
        pid: 7,
        pointer_size: 8,
        time_unit_ns: 1000,
        options: Some(OPTION.into()),
        ..Meta::default()
    };
    let mut w =
        TraceWriter::new(Vec::new(), &meta, WriterOptions { codec: Codec::None, block_events: 50 })
            .unwrap();
    let t = w.add_thread(1, "main");
    let mut enc = RefsEncoder::new();
    let mut live: Vec<(u64, u64)> = Vec::new();
    let mut time = 1000u64;
    let (mut stack, mut global) = (0x7ffd_1234_5670u64, 0x5555_5555_8000u64);
    for step in 0..steps {
        time += [0, 1, 1, 1, 2, 3, 5, 6, 7, 200][rng.below(10) as usize];
        let r = rng.below(100);
        if r < 6 || live.is_empty() {
            let n = if rng.below(20) == 0 { 70 } else { 1 };
            let mut made = 0;
            for _ in 0..n {
                let size = [0, 1, 8, 24, 100, 4096, 70000][rng.below(7) as usize];
                let id = w
                    .record(&NewEvent::alloc(Kind::Malloc, size).at(t, step as u64))
                    .unwrap()
                    .unwrap();
                live.push((id, size));
                made += 1;
            }
            enc.events(n, made, time);
        } else if r < 9 {
            let i = rng.below(live.len() as u64) as usize;
            let (id, _) = live.swap_remove(i);
            w.record(&NewEvent::free(id).at(t, step as u64)).unwrap();
            enc.events(1, 0, time);
        } else if r < 11 {
            let i = rng.below(live.len() as u64) as usize;
            let (old, _) = live.swap_remove(i);
            let size = rng.below(300);
            let id =
                w.record(&NewEvent::realloc(Some(old), size).at(t, step as u64)).unwrap().unwrap();
            live.push((id, size));
            enc.events(1, 1, time);
        } else if r < 40 {
            let n = live.len() as u64;
            let i = if rng.below(4) == 0 { rng.below(n) } else { n - 1 - rng.below(n.min(3)) };
            let (id, size) = live[i as usize];
            let offset = rng.below(usable(size));
            let sz = [1u32, 2, 4, 8, 8, 8, 16, 32, 3, 128][rng.below(10) as usize];
            enc.heap(id, offset, sz, rng.below(3) == 0, time);
        } else {
            let a = match rng.below(10) {
                0..=5 => {
                    stack = stack.wrapping_add(rng.below(64)).wrapping_sub(32) & !7;
                    stack
                }
                6..=8 => {
                    global = global.wrapping_add(rng.below(4096)).wrapping_sub(2048);
                    global
                }
                _ => rng.next() >> rng.below(64),
            };
            let sz = [1u32, 4, 8, 8, 8, 2, 16, 3][rng.below(8) as usize];
            let t = if rng.below(500) == 0 { time - 3 } else { time }; // runs backwards, raised
            enc.other(a, sz, rng.below(2) == 0, t);
        }
        if enc.len() >= 700 {
            write_block(&mut w, &mut enc).unwrap();
        }
    }
    enc.end(time + 9);
    write_block(&mut w, &mut enc).unwrap();
    w.finish(&End::default()).unwrap()
}

/// Writes the version-2 vector (the version-1 one is frozen: the encoder
/// that wrote it is gone). Run after a deliberate change of the encoding:
///   cargo test -p heaplab-trace --test refs_versions -- --ignored
#[test]
#[ignore]
fn gen_v2() {
    std::fs::write(data("v2-random.hltrace"), random_trace(0x5eed_0001, 1500)).unwrap();
}

#[test]
fn version_1_vectors_read_as_they_did() {
    assert_eq!(RefsReader::open(data("v1-random.hltrace")).unwrap().refs_version(), 1);
    let want = std::fs::read_to_string(data("random.items.txt")).unwrap();
    let got = listing(&data("v1-random.hltrace"));
    assert!(got == want, "v1-random.hltrace no longer reads as random.items.txt");
    // a real recording (build/bin/vgtool-test-counts under heaplab record --refs)
    let l = listing(&data("v1-counts.hltrace"));
    let want = std::fs::read_to_string(data("v1-counts.digest")).unwrap();
    assert_eq!(format!("{:016x} {} lines\n", digest(&l), l.lines().count()), want);
}

#[test]
fn version_2_encodes_the_same_program_to_the_same_items_and_pinned_bytes() {
    let bytes = random_trace(0x5eed_0001, 1500);
    assert_eq!(
        bytes,
        std::fs::read(data("v2-random.hltrace")).unwrap(),
        "the encoder's bytes changed: if on purpose, regenerate (gen_v2) and say so in docs/trace-format.md"
    );
    let mut r = RefsReader::new(TraceReader::new(&bytes[..], "v2").unwrap());
    assert_eq!(r.refs_version(), 2);
    let mut got = String::new();
    while let Some(it) = r.next_item().unwrap() {
        got.push_str(&line(&it));
        got.push('\n');
    }
    assert!(got == std::fs::read_to_string(data("random.items.txt")).unwrap());
}

#[test]
fn a_recording_read_in_version_1_encodes_to_version_2_and_back() {
    // the counts program's events and references, re-encoded item by item
    let mut r = RefsReader::open(data("v1-counts.hltrace")).unwrap();
    let mut items = Vec::new();
    while let Some(it) = r.next_item().unwrap() {
        items.push(it);
    }
    let meta = Meta { options: Some(OPTION.into()), ..r.trace().meta().clone() };
    let mut w = TraceWriter::new(Vec::new(), &meta, WriterOptions::default()).unwrap();
    let t = w.add_thread(1, "main");
    let mut enc = RefsEncoder::new();
    for it in &items {
        match it {
            RefItem::Event { event: e, time } => {
                let mut ne = NewEvent::alloc(e.kind, e.size).at(t, 0);
                ne.old = e.old;
                ne.align = e.align;
                ne.failed = e.failed;
                w.record(&ne).unwrap();
                enc.events(1, u64::from(e.id.is_some()), *time);
            }
            RefItem::Ref(x) => match x.target {
                Target::Object { id, offset } => enc.heap(id, offset, x.size, x.write, x.time),
                Target::Other { addr } => enc.other(addr, x.size, x.write, x.time),
            },
            RefItem::End { instructions } => enc.end(*instructions),
        }
        if enc.is_full() {
            write_block(&mut w, &mut enc).unwrap();
        }
    }
    write_block(&mut w, &mut enc).unwrap();
    let bytes = w.finish(&End::default()).unwrap();
    let mut r2 = RefsReader::new(TraceReader::new(&bytes[..], "v2").unwrap());
    let mut again = Vec::new();
    while let Some(it) = r2.next_item().unwrap() {
        again.push(it);
    }
    assert_eq!(items.len(), again.len());
    for (i, (a, b)) in items.iter().zip(&again).enumerate() {
        match (a, b) {
            (RefItem::Event { event: x, time: s }, RefItem::Event { event: y, time: u }) => {
                assert_eq!(
                    (x.kind, x.id, x.old, x.size, s),
                    (y.kind, y.id, y.old, y.size, u),
                    "{i}"
                )
            }
            _ => assert_eq!(a, b, "item {i}"),
        }
    }
    assert_eq!(r.stats(), r2.stats());
    assert_eq!(enc.stats(), *r2.stats(), "the encoder's counts are the reader's");
}
