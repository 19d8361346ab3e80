//! The REFS stream: round trips through the writer and the merged reader,
//! what a reader that does not know REFS sees, per-object profiles, and
//! corruption (each bad trace names its problem and offset).

use heaplab_trace::format::{kind, BLOCK_SKIPPABLE};
use heaplab_trace::refs::*;
use heaplab_trace::varint::{put, put_bytes};
use heaplab_trace::*;

fn meta(refs: bool) -> Meta {
    Meta {
        pid: 7,
        pointer_size: 8,
        time_unit_ns: 1000,
        options: refs.then(|| OPTION.as_bytes().to_vec()),
        ..Meta::default()
    }
}

/// META announcing REFS encoding `version`.
fn meta_v(version: u32) -> Meta {
    Meta { options: Some(format!("refs={version}").into_bytes()), ..meta(true) }
}

/// A small deterministic generator (xorshift), so failures repeat.
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

#[derive(Debug, Clone, PartialEq)]
enum Want {
    Event { kind: Kind, id: Option<u64>, old: Option<u64>, time: u64 },
    Ref(Ref),
    End(u64),
}

/// Writes a random program's events and references; returns the trace and
/// what a reader must yield.
fn random_trace(seed: u64, steps: usize, block_every: u64, codec: Codec) -> (Vec<u8>, Vec<Want>) {
    let mut rng = Rng(seed);
    let opts = WriterOptions { codec, block_events: 37 };
    let mut w = TraceWriter::new(Vec::new(), &meta(true), opts).unwrap();
    let t = w.add_thread(1, "main");
    let mut enc = RefsEncoder::new();
    let mut want = Vec::new();
    let mut live: Vec<(u64, u64)> = Vec::new(); // (id, size)
    let mut time = 0u64;
    let mut addr = 0x7ffd_0000u64;
    for step in 0..steps {
        time += rng.below(4);
        let r = rng.below(100);
        if r < 8 || live.is_empty() {
            let size = [0, 1, 8, 24, 100, 4096, 70000][rng.below(7) as usize];
            let id =
                w.record(&NewEvent::alloc(Kind::Malloc, size).at(t, step as u64)).unwrap().unwrap();
            enc.events(1, 1, time);
            live.push((id, size));
            want.push(Want::Event { kind: Kind::Malloc, id: Some(id), old: None, time });
        } else if r < 12 {
            let i = rng.below(live.len() as u64) as usize;
            let (id, _) = live.swap_remove(i);
            w.record(&NewEvent::free(id).at(t, step as u64)).unwrap();
            enc.events(1, 0, time);
            want.push(Want::Event { kind: Kind::Free, id: None, old: Some(id), time });
        } else if r < 14 {
            let i = rng.below(live.len() as u64) as usize;
            let (old, _) = live.swap_remove(i);
            let size = rng.below(300);
            let id =
                w.record(&NewEvent::realloc(Some(old), size).at(t, step as u64)).unwrap().unwrap();
            enc.events(1, 1, time);
            live.push((id, size));
            want.push(Want::Event { kind: Kind::Realloc, id: Some(id), old: Some(old), time });
        } else if r < 70 {
            // heap: mostly the last few objects
            let n = live.len() as u64;
            let i = if rng.below(4) == 0 { rng.below(n) } else { n - 1 - rng.below(n.min(3)) };
            let (id, size) = live[i as usize];
            let offset = rng.below(usable(size));
            let sz = [1u32, 2, 4, 8, 16, 32, 64, 3, 512][rng.below(9) as usize];
            let write = rng.below(3) == 0;
            enc.heap(id, offset, sz, write, time);
            want.push(Want::Ref(Ref {
                time,
                size: sz,
                write,
                target: Target::Object { id, offset },
            }));
        } else {
            addr = match rng.below(3) {
                0 => addr.wrapping_add(rng.below(64)),
                1 => addr.wrapping_sub(rng.below(64)),
                _ => rng.next() >> rng.below(64),
            };
            let sz = [1u32, 8, 8, 4, 100_000][rng.below(5) as usize];
            let write = rng.below(2) == 0;
            enc.other(addr, sz, write, time);
            want.push(Want::Ref(Ref { time, size: sz, write, target: Target::Other { addr } }));
        }
        if enc.len() >= block_every {
            write_block(&mut w, &mut enc).unwrap();
        }
    }
    time += 5;
    enc.end(time);
    want.push(Want::End(time));
    write_block(&mut w, &mut enc).unwrap();
    let bytes = w.finish(&End::default()).unwrap();
    (bytes, want)
}

fn read_all(bytes: &[u8]) -> Result<Vec<Want>, TraceError> {
    let mut r = RefsReader::new(TraceReader::new(bytes, "t.hltrace")?);
    let mut got = Vec::new();
    while let Some(it) = r.next_item()? {
        got.push(match it {
            RefItem::Event { event, time } => {
                Want::Event { kind: event.kind, id: event.id, old: event.old, time }
            }
            RefItem::Ref(x) => Want::Ref(x),
            RefItem::End { instructions } => Want::End(instructions),
        });
    }
    Ok(got)
}

#[test]
fn random_streams_round_trip_in_small_and_large_blocks() {
    for (seed, every, codec) in [
        (1, 7, Codec::None),
        (2, 100, Codec::Zstd(3)),
        (3, 1 << 30, Codec::Zstd(1)),
        (4, 1, Codec::None),
    ] {
        let (bytes, want) = random_trace(seed, 3000, every, codec);
        let got = read_all(&bytes).unwrap();
        assert_eq!(got.len(), want.len(), "seed {seed}");
        for (i, (g, w)) in got.iter().zip(&want).enumerate() {
            assert_eq!(g, w, "seed {seed}, item {i}");
        }
    }
}

#[test]
fn batches_give_the_same_items() {
    let (bytes, want) = random_trace(9, 2000, 50, Codec::None);
    let mut r = RefsReader::new(TraceReader::new(&bytes[..], "t").unwrap());
    let mut buf = Vec::new();
    let mut n = 0;
    loop {
        r.next_batch(&mut buf).unwrap();
        if buf.is_empty() {
            break;
        }
        n += buf.len();
    }
    assert_eq!(n, want.len());
    let s = r.stats();
    let refs = want.iter().filter(|w| matches!(w, Want::Ref(_))).count() as u64;
    assert_eq!(s.refs(), refs);
    assert_eq!(
        s.instructions,
        want.iter().find_map(|w| if let Want::End(t) = w { Some(*t) } else { None })
    );
}

#[test]
fn a_reader_that_does_not_know_refs_skips_them_and_reads_every_event() {
    let (bytes, want) = random_trace(5, 1500, 64, Codec::Zstd(3));
    let mut r = TraceReader::new(&bytes[..], "t").unwrap();
    let (mut events, mut skipped) = (0, 0);
    while let Some(it) = r.next_item().unwrap() {
        match it {
            Item::Event(_) => events += 1,
            Item::Skipped { kind: k, .. } => {
                assert_eq!(k, kind::REFS);
                skipped += 1;
            }
            _ => {}
        }
    }
    assert_eq!(events, want.iter().filter(|w| matches!(w, Want::Event { .. })).count());
    assert!(skipped > 10);
}

#[test]
fn object_profile_gives_lifetimes_and_counts() {
    let mut w = TraceWriter::new(Vec::new(), &meta(true), WriterOptions::default()).unwrap();
    let t = w.add_thread(1, "main");
    let mut enc = RefsEncoder::new();
    let a = w.record(&NewEvent::alloc(Kind::Malloc, 24).at(t, 0)).unwrap().unwrap();
    enc.events(1, 1, 10);
    enc.heap(a, 0, 8, true, 11);
    enc.heap(a, 8, 8, true, 12);
    let b = w.record(&NewEvent::alloc(Kind::Calloc, 100).at(t, 1)).unwrap().unwrap();
    enc.events(1, 1, 20);
    enc.heap(b, 96, 4, false, 21);
    enc.heap(a, 16, 8, false, 22);
    enc.other(0x1000, 8, false, 23);
    w.record(&NewEvent::free(a).at(t, 2)).unwrap();
    enc.events(1, 0, 30);
    let c = w.record(&NewEvent::realloc(Some(b), 200).at(t, 3)).unwrap().unwrap();
    enc.events(1, 1, 40);
    enc.heap(c, 199, 1, true, 41);
    enc.end(50);
    write_block(&mut w, &mut enc).unwrap();
    let bytes = w.finish(&End::default()).unwrap();

    let mut r = RefsReader::new(TraceReader::new(&bytes[..], "t").unwrap());
    let p = object_profile_from(&mut r, &[]).unwrap();
    assert!(p.has_refs && !p.has_sp);
    assert_eq!(p.end, 50);
    let o = &p.objects;
    assert_eq!(o.len(), 2, "the realloc continues b");
    assert_eq!((o[0].born, o[0].died, o[0].lifetime(p.end)), (10, Some(30), 20));
    assert_eq!((o[0].loads, o[0].stores, o[0].load_bytes, o[0].store_bytes), (1, 2, 8, 16));
    assert!((o[0].density() - 3.0 / 24.0).abs() < 1e-12);
    // b: born a calloc of 100, reallocated to 200 (its store counts), live at the end
    assert_eq!((o[1].born, o[1].died, o[1].lifetime(p.end)), (20, None, 30));
    assert_eq!((o[1].size, o[1].max_size, o[1].reallocs), (100, 200, 1));
    assert_eq!((o[1].loads, o[1].stores, o[1].kind), (1, 1, Kind::Calloc.code()));
    assert!((o[1].density() - 2.0 / 200.0).abs() < 1e-12);
    assert_eq!(p.of_id(c), Some(&o[1]));
    assert_eq!(p.of_id(b), Some(&o[1]));
    assert_eq!(p.of_id(9), None);
    assert_eq!(p.stats.heap_refs(), 5);
    assert_eq!(p.stats.other_loads, 1);
}

#[test]
fn a_trace_without_refs_reads_as_events_only() {
    let mut w = TraceWriter::new(Vec::new(), &meta(false), WriterOptions::default()).unwrap();
    let t = w.add_thread(1, "main");
    let a = w.record(&NewEvent::alloc(Kind::Malloc, 24).at(t, 0)).unwrap().unwrap();
    w.record(&NewEvent::free(a).at(t, 2)).unwrap();
    let bytes = w.finish(&End::default()).unwrap();
    let got = read_all(&bytes).unwrap();
    assert_eq!(got.len(), 2);
    let mut r = RefsReader::new(TraceReader::new(&bytes[..], "t").unwrap());
    let p = object_profile_from(&mut r, &[]).unwrap();
    assert!(!p.has_refs);
    assert_eq!(p.objects.len(), 1);
}

#[test]
fn a_cut_short_trace_gives_its_items_then_the_error() {
    let (bytes, want) = random_trace(6, 800, 40, Codec::None);
    // drop the END block (uncompressed, so its length is known: header + payload)
    let end_at = {
        let mut r = TraceReader::new(&bytes[..], "t").unwrap();
        let mut pos = 0;
        while let Some(it) = r.next_item().unwrap() {
            if !matches!(it, Item::End(_)) {
                pos = r.position();
            }
        }
        pos
    };
    let cut = &bytes[..end_at as usize];
    let mut r = RefsReader::new(TraceReader::new(cut, "t").unwrap());
    let mut n = 0;
    let err = loop {
        match r.next_item() {
            Ok(Some(_)) => n += 1,
            Ok(None) => panic!("a cut-short trace must end with an error"),
            Err(e) => break e,
        }
    };
    assert!(err.is_cut_short(), "{err}");
    assert_eq!(n, want.len());
}

// ---------------------------------------------------------------- corruption

/// A trace whose REFS block has the given raw payload in encoding 1 (after
/// one malloc of 24 bytes, object 0, and a free of it when `free` is set).
fn with_payload(payload: &[u8], flags: u16, free: bool) -> Vec<u8> {
    with_payload_v(1, payload, flags, free)
}

/// [`with_payload`] in encoding `version`.
fn with_payload_v(version: u32, payload: &[u8], flags: u16, free: bool) -> Vec<u8> {
    let mut w = TraceWriter::new(
        Vec::new(),
        &meta_v(version),
        WriterOptions { codec: Codec::None, block_events: 64 },
    )
    .unwrap();
    let t = w.add_thread(1, "main");
    let a = w.record(&NewEvent::alloc(Kind::Malloc, 24).at(t, 0)).unwrap().unwrap();
    if free {
        w.record(&NewEvent::free(a).at(t, 1)).unwrap();
    }
    w.write_stream_block(kind::REFS, flags, payload).unwrap();
    w.finish(&End::default()).unwrap()
}

/// A payload: header fields, then the seven columns.
fn payload(hdr: [u64; 5], cols: [&[u8]; 7]) -> Vec<u8> {
    let mut p = Vec::new();
    for h in hdr {
        put(&mut p, h);
    }
    for c in cols {
        put_bytes(&mut p, c);
    }
    p
}

fn varints(v: &[u64]) -> Vec<u8> {
    let mut b = Vec::new();
    for &x in v {
        put(&mut b, x);
    }
    b
}

fn expect_error(bytes: &[u8], words: &str) {
    let err = read_all(bytes).expect_err("a bad trace must not read cleanly");
    let msg = err.to_string();
    assert!(msg.contains(words), "expected {words:?} in: {msg}");
    assert!(err.offset > 16, "the error names the block's offset: {msg}");
}

const EV1: u8 = tag::EVENTS; // one event
const HEAP8_EXPLICIT: u8 = tag::HEAP | (3 << 3) | (tag::OBJ_EXPLICIT << 6);

#[test]
fn a_good_handmade_payload_reads() {
    let p = payload(
        [2, 0, 0, 0, 0],
        [&[EV1, HEAP8_EXPLICIT], &varints(&[1, 1]), &varints(&[0]), &varints(&[16]), &[], &[], &[]],
    );
    let got = read_all(&with_payload(&p, BLOCK_SKIPPABLE, false)).unwrap();
    assert_eq!(
        got[1],
        Want::Ref(Ref {
            time: 2,
            size: 8,
            write: false,
            target: Target::Object { id: 0, offset: 16 }
        })
    );
}

#[test]
fn corrupt_payloads_are_rejected_with_their_reason() {
    let cases: Vec<(Vec<u8>, bool, &str)> = vec![
        // the object was freed by the second event, placed before the ref
        (
            payload(
                [3, 0, 0, 0, 0],
                [
                    &[tag::EVENTS | (1 << 2), HEAP8_EXPLICIT, EV1],
                    &varints(&[1, 1, 1]),
                    &varints(&[0]),
                    &varints(&[0]),
                    &[],
                    &[],
                    &[],
                ],
            ),
            true,
            "which is not live",
        ),
        // offset 32 of a 24-byte object (usable 32)
        (
            payload(
                [2, 0, 0, 0, 0],
                [
                    &[EV1, HEAP8_EXPLICIT],
                    &varints(&[0, 0]),
                    &varints(&[0]),
                    &varints(&[32]),
                    &[],
                    &[],
                    &[],
                ],
            ),
            false,
            "offset 32 in object 0",
        ),
        // object code 1 with an empty recent list
        (
            payload(
                [2, 0, 0, 0, 0],
                [
                    &[EV1, tag::HEAP | (3 << 3) | (1 << 6)],
                    &varints(&[0, 0]),
                    &[],
                    &varints(&[0]),
                    &[],
                    &[],
                    &[],
                ],
            ),
            false,
            "recent-object list holds 0",
        ),
        // places two events, one exists
        (
            payload(
                [1, 0, 0, 0, 0],
                [&[tag::EVENTS | (1 << 2)], &varints(&[0]), &[], &[], &[], &[], &[]],
            ),
            false,
            "places 2 events",
        ),
        // a reserved special record
        (
            payload(
                [1, 0, 0, 0, 0],
                [&[tag::SPECIAL | (5 << 2)], &varints(&[0]), &[], &[], &[], &[], &[]],
            ),
            false,
            "reserved special",
        ),
        // leftover bytes in the offs column
        (
            payload(
                [2, 0, 0, 0, 0],
                [
                    &[EV1, HEAP8_EXPLICIT],
                    &varints(&[0, 0]),
                    &varints(&[0]),
                    &varints(&[0, 5]),
                    &[],
                    &[],
                    &[],
                ],
            ),
            false,
            "unused bytes in the offs column",
        ),
        // a column runs out
        (
            payload(
                [2, 0, 0, 0, 0],
                [
                    &[EV1, HEAP8_EXPLICIT],
                    &varints(&[0]),
                    &varints(&[0]),
                    &varints(&[0]),
                    &[],
                    &[],
                    &[],
                ],
            ),
            false,
            "time",
        ),
        // a missing block: the first block says 5 records came before
        (
            payload([1, 5, 0, 0, 0], [&[EV1], &varints(&[0]), &[], &[], &[], &[], &[]]),
            false,
            "a block is missing",
        ),
        // tags length differs from n
        (
            payload([3, 0, 0, 0, 0], [&[EV1], &varints(&[0]), &[], &[], &[], &[], &[]]),
            false,
            "tags column holds 1 bytes for 3",
        ),
        // a ref to an object not yet created
        (
            payload(
                [1, 0, 0, 0, 0],
                [&[HEAP8_EXPLICIT], &varints(&[0]), &varints(&[0]), &varints(&[0]), &[], &[], &[]],
            ),
            false,
            "points before object 0",
        ),
        // a zero size
        (
            payload(
                [2, 0, 0, 0, 0],
                [
                    &[EV1, tag::OTHER | (tag::SIZE_EXPLICIT << 3)],
                    &varints(&[0, 0]),
                    &[],
                    &[],
                    &varints(&[2]),
                    &varints(&[0]),
                    &[],
                ],
            ),
            false,
            "access size 0",
        ),
        // the reserved bit of an other record
        (
            payload(
                [2, 0, 0, 0, 0],
                [
                    &[EV1, tag::OTHER | (1 << 7)],
                    &varints(&[0, 0]),
                    &[],
                    &[],
                    &varints(&[2]),
                    &[],
                    &[],
                ],
            ),
            false,
            "reserved bit 7",
        ),
    ];
    for (p, free, words) in cases {
        expect_error(&with_payload(&p, BLOCK_SKIPPABLE, free), words);
    }
}

#[test]
fn refs_without_the_skippable_flag_or_unannounced_are_rejected() {
    let p = payload([1, 0, 0, 0, 0], [&[EV1], &varints(&[0]), &[], &[], &[], &[], &[]]);
    expect_error(&with_payload(&p, 0, false), "without the SKIPPABLE flag");
    // a plain v1 reader calls it an unknown stream, as before
    let bytes = with_payload(&p, 0, false);
    let mut r = TraceReader::new(&bytes[..], "t").unwrap();
    let e = loop {
        match r.next_item() {
            Ok(Some(_)) => {}
            Ok(None) => panic!("must fail"),
            Err(e) => break e,
        }
    };
    assert!(e.to_string().contains("unknown stream kind 0x10"), "{e}");

    // META without refs=N
    let mut w = TraceWriter::new(Vec::new(), &meta(false), WriterOptions::default()).unwrap();
    w.add_thread(1, "main");
    w.write_stream_block(kind::REFS, BLOCK_SKIPPABLE, &p).unwrap();
    let bytes = w.finish(&End::default()).unwrap();
    expect_error(&bytes, "do not say refs=N");
}

#[test]
fn a_flipped_bit_in_a_refs_block_fails_its_checksum() {
    let (mut bytes, _) = random_trace(8, 500, 1 << 30, Codec::None);
    // find the REFS block and flip a bit in its payload
    let mut r = TraceReader::new(&bytes[..], "t").unwrap();
    let mut at = None;
    let mut prev = r.position();
    while let Some(it) = r.next_item().unwrap() {
        if let Item::Skipped { kind: k, .. } = it {
            if k == kind::REFS {
                at = Some(prev);
            }
        }
        prev = r.position();
    }
    let at = at.unwrap() as usize;
    bytes[at + 24 + 10] ^= 0x10;
    let err = read_all(&bytes).unwrap_err();
    assert!(err.to_string().contains("checksum mismatch in REFS block"), "{err}");
    assert_eq!(err.offset as usize, at);
    // and a torn REFS block is a truncated tail
    let (bytes, _) = random_trace(8, 500, 1 << 30, Codec::None);
    let torn = &bytes[..at + 24 + 20];
    let mut rr = RefsReader::new(TraceReader::new(torn, "t").unwrap());
    let e = loop {
        match rr.next_item() {
            Ok(Some(_)) => {}
            Ok(None) => panic!("must fail"),
            Err(e) => break e,
        }
    };
    assert!(e.is_cut_short() && e.to_string().contains("truncated"), "{e}");
}

// ---------------------------------------------------------------- version 2, by hand

const V2_EV1: u8 = v2::EVENTS; // one event, its time in `times`
/// A load of 8 bytes from the object in `objs`, 1 instruction later (in the tag).
const V2_HEAP8_EXPLICIT_T1: u8 = v2::HEAP | v2::OBJ_EXPLICIT << 5 | v2::HEAP_TIME1;
/// An 8-byte load through register 0, `dt` (1..3, or 0: a `times` entry) later.
fn v2_other(dt: u8) -> u8 {
    v2::OTHER | dt << 6
}

#[test]
fn a_good_handmade_version_2_payload_reads() {
    let p = payload(
        [4, 0, 0, 0, 0],
        [
            &[V2_EV1, V2_HEAP8_EXPLICIT_T1, v2_other(3), v2_other(0) | v2::REGISTER | v2::STORE],
            &varints(&[1, 9]), // the event's time, then the last record's
            &varints(&[0]),    // object 0
            &varints(&[16]),   // its offset
            &varints(&[0x41, 0x20]),
            &[],
            &[],
        ],
    );
    let got = read_all(&with_payload_v(2, &p, BLOCK_SKIPPABLE, false)).unwrap();
    assert_eq!(
        got[1..],
        [
            Want::Ref(Ref {
                time: 2,
                size: 8,
                write: false,
                target: Target::Object { id: 0, offset: 16 }
            }),
            Want::Ref(Ref {
                time: 5,
                size: 8,
                write: false,
                target: Target::Other { addr: 0u64.wrapping_sub(33) }
            }),
            Want::Ref(Ref { time: 14, size: 8, write: true, target: Target::Other { addr: 16 } }),
        ]
    );
}

#[test]
fn corrupt_version_2_payloads_are_rejected_with_their_reason() {
    let h = V2_HEAP8_EXPLICIT_T1;
    let cases: Vec<(Vec<u8>, &str)> = vec![
        (
            payload(
                [2, 0, 0, 0, 0],
                [&[V2_EV1, h], &varints(&[0]), &varints(&[0]), &varints(&[32]), &[], &[], &[]],
            ),
            "offset 32 in object 0",
        ),
        (
            payload(
                [2, 0, 0, 0, 0],
                [&[V2_EV1, v2_other(0)], &varints(&[0]), &[], &[], &varints(&[4]), &[], &[]],
            ),
            "time",
        ),
        (
            payload(
                [2, 0, 0, 0, 0],
                [&[V2_EV1, v2_other(1)], &varints(&[0, 5]), &[], &[], &varints(&[4]), &[], &[]],
            ),
            "unused bytes in the times column",
        ),
        (
            payload(
                [2, 0, 0, 0, 0],
                [
                    &[V2_EV1, v2_other(1) | v2::SIZE_EXPLICIT << 3],
                    &varints(&[0]),
                    &[],
                    &[],
                    &varints(&[4]),
                    &varints(&[0]),
                    &[],
                ],
            ),
            "access size 0",
        ),
        (
            payload(
                [1, 0, 0, 0, 0],
                [&[v2::SPECIAL | 3 << 2], &varints(&[0]), &[], &[], &[], &[], &[]],
            ),
            "reserved special",
        ),
        (
            payload([3, 0, 0, 0, 0], [&[V2_EV1], &varints(&[0]), &[], &[], &[], &[], &[]]),
            "tags column holds 1 bytes for 3",
        ),
    ];
    for (p, words) in cases {
        expect_error(&with_payload_v(2, &p, BLOCK_SKIPPABLE, false), words);
    }
}

#[test]
fn an_unknown_encoding_version_is_named() {
    let p = payload([1, 0, 0, 0, 0], [&[V2_EV1], &varints(&[0]), &[], &[], &[], &[], &[]]);
    expect_error(&with_payload_v(3, &p, BLOCK_SKIPPABLE, false), "REFS encoding version 3");
    let bytes = with_payload_v(0, &p, BLOCK_SKIPPABLE, false);
    expect_error(&bytes, "do not say refs=N");
}
