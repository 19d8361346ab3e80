//! Round trips through the writer and reader, checked against a naive model
//! of the trace that is written independently here, and corruption at every
//! byte of a small trace.

use heaplab_trace::*;

/// xorshift64*: deterministic, no dependencies.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// What the model expects to read back for each event.
#[derive(Debug, PartialEq)]
struct Expect {
    kind: Kind,
    thread: u32,
    time: u64,
    size: u64,
    align: u64,
    id: Option<u64>,
    old: Option<u64>,
    stack: u32,
    failed: bool,
}

fn random_trace(seed: u64, n: usize, opts: WriterOptions) -> (Vec<u8>, Vec<Expect>) {
    let mut rng = Rng(seed | 1);
    let meta =
        Meta { pid: 99, pointer_size: 8, time_unit_ns: 1, stack_depth: 4, ..Meta::default() };
    let mut w = TraceWriter::new(Vec::new(), &meta, opts).unwrap();
    let threads: Vec<u32> = (0..3).map(|t| w.add_thread(100 + t, "")).collect();
    let m = w.add_module(&Module {
        id: 0,
        base: 0x1000,
        size: 0x1000,
        path: "/bin/x".into(),
        build_id: vec![1, 2],
    });
    let mut live: Vec<(u64, u64)> = Vec::new(); // (id, size) in the model
    let mut next_id = 0u64;
    let mut time = 0u64;
    let mut out = Vec::new();
    let mut stacks = vec![0u32];
    for _ in 0..n {
        time += rng.below(3);
        let thread = threads[rng.below(3) as usize];
        if rng.below(10) == 0 {
            let frames: Vec<Frame> = (0..1 + rng.below(4))
                .map(|_| Frame { module: m * rng.below(2) as u32, offset: rng.below(50) })
                .collect();
            stacks.push(w.intern_stack(&frames).unwrap());
        }
        let stack = stacks[rng.below(stacks.len() as u64) as usize];
        let r = rng.below(100);
        let (ev, exp) = if live.is_empty() || r < 45 {
            let kind =
                [Kind::Malloc, Kind::Calloc, Kind::Memalign, Kind::PosixMemalign, Kind::Valloc]
                    [rng.below(5) as usize];
            let size = rng.below(5000);
            let align = if kind.has_align() { 1 << (3 + rng.below(10)) } else { 0 };
            let failed = rng.below(50) == 0;
            let id = (!failed).then_some(next_id);
            let ev = NewEvent {
                kind,
                thread,
                time,
                size,
                align,
                old: None,
                stack,
                failed,
                inherited: false,
            };
            (ev, Expect { kind, thread, time, size, align, id, old: None, stack, failed })
        } else {
            let i = rng.below(live.len() as u64) as usize;
            let (old, old_size) = live[i];
            if r < 75 {
                let ev = NewEvent { old: Some(old), stack, ..NewEvent::free(old).at(thread, time) };
                (
                    ev,
                    Expect {
                        kind: Kind::Free,
                        thread,
                        time,
                        size: old_size,
                        align: 0,
                        id: None,
                        old: Some(old),
                        stack,
                        failed: false,
                    },
                )
            } else {
                let size = rng.below(9000);
                let failed = rng.below(20) == 0;
                let id = (!failed).then_some(next_id);
                let ev = NewEvent {
                    failed,
                    stack,
                    ..NewEvent::realloc(Some(old), size).at(thread, time)
                };
                (
                    ev,
                    Expect {
                        kind: Kind::Realloc,
                        thread,
                        time,
                        size,
                        align: 0,
                        id,
                        old: Some(old),
                        stack,
                        failed,
                    },
                )
            }
        };
        let got = w.record(&ev).unwrap();
        assert_eq!(got, exp.id);
        if exp.kind == Kind::Free || (exp.kind == Kind::Realloc && !exp.failed) {
            live.retain(|&(id, _)| Some(id) != exp.old);
        }
        if let Some(id) = exp.id {
            live.push((id, exp.size));
            next_id += 1;
        }
        out.push(exp);
    }
    (w.finish(&End::default()).unwrap(), out)
}

fn read_all(bytes: &[u8]) -> Result<Vec<Event>, TraceError> {
    let mut r = TraceReader::new(bytes, "mem")?;
    let mut v = Vec::new();
    while let Some(e) = r.next_event()? {
        v.push(e);
    }
    Ok(v)
}

#[test]
fn random_traces_read_back_as_written() {
    for (seed, codec, block) in [
        (1, Codec::None, 7),
        (2, Codec::Zstd(3), 1000),
        (3, Codec::Zstd(1), 65536),
        (4, Codec::None, 1),
    ] {
        let (bytes, exp) = random_trace(seed, 5000, WriterOptions { codec, block_events: block });
        let got = read_all(&bytes).unwrap();
        assert_eq!(got.len(), exp.len());
        for (i, (g, e)) in got.iter().zip(&exp).enumerate() {
            let g2 = Expect {
                kind: g.kind,
                thread: g.thread,
                time: g.time,
                size: g.size,
                align: g.align,
                id: g.id,
                old: g.old,
                stack: g.stack,
                failed: g.failed,
            };
            assert_eq!(&g2, e, "seed {seed} event {i}");
            assert_eq!(g.index, i as u64);
        }
    }
}

#[test]
fn compression_shrinks_a_repetitive_trace() {
    let (raw, _) =
        random_trace(9, 20000, WriterOptions { codec: Codec::None, block_events: 65536 });
    let (z, _) =
        random_trace(9, 20000, WriterOptions { codec: Codec::Zstd(3), block_events: 65536 });
    assert!(z.len() < raw.len(), "{} vs {}", z.len(), raw.len());
}

#[test]
fn every_truncation_reads_a_prefix_and_says_where() {
    let (bytes, exp) = random_trace(5, 60, WriterOptions { codec: Codec::None, block_events: 8 });
    for cut in 0..bytes.len() {
        let mut events = 0u64;
        let err = match TraceReader::new(&bytes[..cut], "t") {
            Err(e) => e,
            Ok(mut r) => loop {
                match r.next_event() {
                    Ok(Some(e)) => {
                        assert_eq!(e.size, exp[events as usize].size);
                        events += 1;
                    }
                    Ok(None) => panic!("cut at {cut} read as complete"),
                    Err(e) => break e,
                }
            },
        };
        assert!(err.offset <= cut as u64, "cut {cut}: offset {}", err.offset);
        assert_eq!(err.events_read, events, "cut {cut}");
        assert!(
            err.is_cut_short() || matches!(err.problem, Problem::NotATrace),
            "cut {cut}: {err}"
        );
    }
}

#[test]
fn every_single_bit_flip_is_an_error() {
    let (bytes, _) = random_trace(6, 40, WriterOptions { codec: Codec::Zstd(3), block_events: 16 });
    let clean = read_all(&bytes).unwrap();
    for i in 0..bytes.len() {
        for bit in [0, 3, 7] {
            let mut b = bytes.clone();
            b[i] ^= 1 << bit;
            match read_all(&b) {
                Err(_) => {}
                Ok(v) => panic!(
                    "flip at byte {i} bit {bit} read silently ({} events, clean {})",
                    v.len(),
                    clean.len()
                ),
            }
        }
    }
}

#[test]
fn reader_memory_follows_live_objects_not_length() {
    // A million events with at most a handful of objects live at once.
    let meta = Meta { pid: 1, pointer_size: 8, time_unit_ns: 1, ..Meta::default() };
    let mut w = TraceWriter::new(Vec::new(), &meta, WriterOptions::default()).unwrap();
    let t = w.add_thread(1, "");
    for i in 0..500_000u64 {
        let id = w.record(&NewEvent::alloc(Kind::Malloc, 16 + i % 64).at(t, i)).unwrap().unwrap();
        w.record(&NewEvent::free(id).at(t, i)).unwrap();
    }
    let bytes = w.finish(&End::default()).unwrap();
    let mut r = TraceReader::new(&bytes[..], "big").unwrap();
    let mut max_live = 0;
    let mut n = 0;
    while r.next_event().unwrap().is_some() {
        max_live = max_live.max(r.live_objects());
        n += 1;
    }
    assert_eq!(n, 1_000_000);
    assert!(max_live <= 1, "{max_live}");
    assert!(bytes.len() < 1_000_000, "a million events took {} bytes", bytes.len());
}

#[test]
fn views_read_realloc_both_ways() {
    let meta = Meta { pid: 1, pointer_size: 8, time_unit_ns: 1, ..Meta::default() };
    let mut w = TraceWriter::new(Vec::new(), &meta, WriterOptions::default()).unwrap();
    let t = w.add_thread(1, "");
    let a = w.record(&NewEvent::alloc(Kind::Malloc, 10).at(t, 0)).unwrap().unwrap();
    let b = w.record(&NewEvent::realloc(Some(a), 20).at(t, 1)).unwrap().unwrap();
    let c = w.record(&NewEvent::realloc(Some(b), 30).at(t, 2)).unwrap().unwrap();
    w.record(&NewEvent::free(c).at(t, 3)).unwrap();
    let bytes = w.finish(&End::default()).unwrap();
    let evs = read_all(&bytes).unwrap();

    let split_ops: Vec<SplitOp> = evs.iter().flat_map(split).collect();
    assert_eq!(
        split_ops,
        vec![
            SplitOp::Alloc { id: 0, size: 10 },
            SplitOp::Free { id: 0, size: 10 },
            SplitOp::Alloc { id: 1, size: 20 },
            SplitOp::Free { id: 1, size: 20 },
            SplitOp::Alloc { id: 2, size: 30 },
            SplitOp::Free { id: 2, size: 30 },
        ]
    );
    let mut v = ResizeView::default();
    let resize_ops: Vec<ResizeOp> = evs.iter().filter_map(|e| v.apply(e)).collect();
    assert_eq!(
        resize_ops,
        vec![
            ResizeOp::Alloc { obj: 0, size: 10 },
            ResizeOp::Resize { obj: 0, old_size: 10, new_size: 20 },
            ResizeOp::Resize { obj: 0, old_size: 20, new_size: 30 },
            ResizeOp::Free { obj: 0, size: 30 },
        ]
    );
}

#[test]
fn writer_rejects_what_the_spec_forbids() {
    let meta = Meta { pid: 1, pointer_size: 8, time_unit_ns: 1, ..Meta::default() };
    let mut w = TraceWriter::new(Vec::new(), &meta, WriterOptions::default()).unwrap();
    let t = w.add_thread(1, "");
    assert!(w.record(&NewEvent::free(3).at(t, 0)).is_err(), "free of a never-allocated object");
    assert!(w.record(&NewEvent::alloc(Kind::Malloc, 1).at(7, 0)).is_err(), "undefined thread");
    assert!(w.record(&NewEvent::alloc(Kind::Malloc, 1).with_stack(5)).is_err(), "undefined stack");
    let mut f = NewEvent::free(0);
    f.failed = true;
    assert!(w.record(&f).is_err(), "a free cannot fail");
}
