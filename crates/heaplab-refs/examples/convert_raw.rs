//! Converts a raw stream saved to a file (`--hl-out=FILE`) into a trace, and
//! times the phases: parse only, then the whole conversion per codec.
//! A benchmark, not a test:
//!   cargo run --release -p heaplab-refs --example convert_raw -- RAW [none|zstd1|zstd3]
use heaplab_refs::raw::Rec;
use heaplab_refs::record::{Converter, Options};
use heaplab_refs::vg::Ended;
use heaplab_trace::Codec;

/// CPU time of this thread (the machine is shared; wall time is noisy).
struct Instant(f64);
impl Instant {
    fn now() -> Instant {
        let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
        // SAFETY: ts is a valid out-pointer.
        unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
        Instant(ts.tv_sec as f64 + ts.tv_nsec as f64 * 1e-9)
    }
    fn elapsed(&self) -> std::time::Duration {
        std::time::Duration::from_secs_f64(Instant::now().0 - self.0)
    }
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let path = &args[1];
    let t = Instant::now();
    let (mut refs, mut ctl, mut x) = (0u64, 0u64, 0u64);
    let bytes = heaplab_refs::raw::for_each(std::fs::File::open(path).unwrap(), |rec| match rec {
        Rec::Ref(w) | Rec::SRef(w, _) => {
            refs += 1;
            x ^= w;
        }
        Rec::Control { .. } => ctl += 1,
        Rec::Time(_) => {}
    })
    .unwrap();
    let parse = t.elapsed().as_secs_f64();
    println!(
        "parse: {refs} refs, {ctl} control, {:.2} B/ref in the stream, {:.2} s, {:.1} ns/ref ({x})",
        bytes as f64 / refs as f64,
        parse,
        parse * 1e9 / refs as f64
    );
    // parse + attribution only
    {
        use heaplab_refs::heapmap::HeapMap;
        use heaplab_refs::raw::ctl;
        let t = Instant::now();
        let mut m = HeapMap::new();
        let (mut heap, mut next) = (0u64, 0u64);
        heaplab_refs::raw::for_each(std::fs::File::open(path).unwrap(), |rec| match rec {
            Rec::Ref(w) | Rec::SRef(w, _) => {
                heap += m.lookup(heaplab_refs::raw::addr(w)).is_some() as u64
            }
            Rec::Control { kind: ctl::ALLOC, w0, extra } => {
                if extra[3] != 0 && w0 != 0 {
                    m.remove(extra[3]);
                }
                if w0 != 0 {
                    m.insert(w0, extra[1], next);
                    next += 1;
                }
            }
            Rec::Control { kind: ctl::FREE, w0, .. } => {
                m.remove(w0);
            }
            _ => {}
        })
        .unwrap();
        let el = t.elapsed().as_secs_f64();
        println!(
            "parse+lookup: {heap} heap refs, {:.2} s, {:.1} ns/ref",
            el,
            el * 1e9 / refs as f64
        );
    }
    if args.get(2).map(String::as_str) == Some("mem") {
        // the conversion alone, from memory, best of 3 (no file reads)
        let data = std::fs::read(path).unwrap();
        for _ in 0..3 {
            let t = Instant::now();
            let mut conv = Converter::new(
                std::io::sink(),
                vec![b"x".to_vec()],
                None,
                Options { codec: Codec::None, ..Options::default() },
            );
            conv.feed_all(&data[..]).unwrap();
            let (_, s) = conv.finish(Ended::Exit(0)).unwrap();
            let el = t.elapsed().as_secs_f64();
            println!("mem: {:.2} s, {:.1} ns/ref", el, el * 1e9 / s.refs.refs() as f64);
        }
        return;
    }
    if args.get(2).map(String::as_str) == Some("runs") {
        // how many other references repeat the previous reference's 32-byte block
        use heaplab_refs::heapmap::HeapMap;
        use heaplab_refs::raw::{addr, ctl, size, WRITE};
        let mut m = HeapMap::new();
        let (mut next, mut n, mut other, mut same, mut same_kind) = (0u64, 0u64, 0u64, 0u64, 0u64);
        let mut prev: Option<(u64, bool)> = None; // previous ref's block (if non-heap), kind
        heaplab_refs::raw::for_each(std::fs::File::open(path).unwrap(), |rec| match rec {
            Rec::Ref(w) => {
                n += 1;
                let a = addr(w);
                let wr = w & WRITE != 0;
                if m.lookup(a).is_some() {
                    prev = None;
                } else {
                    other += 1;
                    let blk = a >> 5;
                    let inside = (a + size(w) as u64 - 1) >> 5 == blk;
                    if let Some((pb, pk)) = prev {
                        if pb == blk && inside {
                            same += 1;
                            if pk == wr {
                                same_kind += 1;
                            }
                        }
                    }
                    prev = if inside { Some((blk, wr)) } else { None };
                }
            }
            Rec::Control { kind: ctl::ALLOC, w0, extra } => {
                prev = None;
                if extra[3] != 0 && w0 != 0 {
                    m.remove(extra[3]);
                }
                if w0 != 0 {
                    m.insert(w0, extra[1], next);
                    next += 1;
                }
            }
            Rec::Control { kind: ctl::FREE, w0, .. } => {
                prev = None;
                m.remove(w0);
            }
            _ => {}
        })
        .unwrap();
        println!("{n} refs, {other} other, {same} repeat the previous other block, {same_kind} with the same kind");
        return;
    }
    if args.get(2).map(String::as_str) == Some("levels") {
        zstd_levels(path);
        return;
    }
    for codec in args.get(2).map(|s| vec![s.clone()]).unwrap_or(vec![
        "none".into(),
        "zstd1".into(),
        "zstd3".into(),
    ]) {
        let c = match codec.as_str() {
            "none" => Codec::None,
            "zstd1" => Codec::Zstd(1),
            _ => Codec::Zstd(3),
        };
        let t = Instant::now();
        let mut conv = Converter::new(
            std::io::sink(),
            vec![b"x".to_vec()],
            None,
            Options { codec: c, ..Options::default() },
        );
        conv.feed_all(std::fs::File::open(path).unwrap()).unwrap();
        let (_, s) = conv.finish(Ended::Exit(0)).unwrap();
        let el = t.elapsed().as_secs_f64();
        println!(
            "{codec}: {:.2} s, {:.1} ns/ref, raw REFS {:.2} B/ref",
            el,
            el * 1e9 / refs as f64,
            s.refs_raw_bytes as f64 / refs as f64
        );
    }
}

/// zstd speed and ratio on REFS payloads (a benchmark of the codec choice).
#[allow(dead_code)]
pub fn zstd_levels(path: &str) {
    let mut conv = Converter::new(
        Vec::new(),
        vec![b"x".to_vec()],
        None,
        Options { codec: Codec::None, ..Options::default() },
    );
    conv.feed_all(std::fs::File::open(path).unwrap()).unwrap();
    let (bytes, _) = conv.finish(Ended::Exit(0)).unwrap();
    let mut r = heaplab_trace::TraceReader::new(&bytes[..], "x").unwrap();
    r.keep_refs(true);
    let mut payloads = Vec::new();
    while let Some(it) = r.next_item().unwrap() {
        if let heaplab_trace::Item::Skipped { .. } = it {
            if let Some((_, p)) = r.take_refs() {
                payloads.push(p);
            }
        }
    }
    let raw: usize = payloads.iter().map(|p| p.len()).sum();
    for level in [-10, -5, -1, 1, 3] {
        let t = Instant::now();
        let mut z = zstd::bulk::Compressor::new(level).unwrap();
        let out: usize = payloads.iter().map(|p| z.compress(p).unwrap().len()).sum();
        let el = t.elapsed().as_secs_f64();
        println!(
            "zstd {level}: {:.0} MB/s, ratio {:.1}",
            raw as f64 / el / 1e6,
            raw as f64 / out as f64
        );
    }
}
