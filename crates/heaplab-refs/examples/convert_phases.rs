//! Where `heaplab record --refs`'s converter spends its time, per reference
//! and phase, on a raw stream saved once from the tool (`valgrind
//! --tool=heaplab --hl-out=RAW PROG`, RAW an existing file). The stream is
//! read into memory first, so no phase pays for reading it; each phase runs
//! `--runs` times (best kept: the machine is shared), in thread CPU time.
//! A benchmark, not a test:
//!   cargo run --release -p heaplab-refs --example convert_phases -- RAW [RUNS] [convert]
//! (`convert`: that phase alone, to profile it).
//!
//! ```text
//!   scan        decode the words, nothing else
//!   attribute   + the heap map: every reference to (object, offset) or not heap
//!   convert     the converter thread as record runs it (+ ids, REFS encoding,
//!               events to the writer thread), REFS blocks kept uncompressed
//!   zstd        compressing the REFS payloads convert made (the writer thread's work)
//! ```
use heaplab_refs::heapmap::HeapMap;
use heaplab_refs::raw::{self, ctl, Rec};
use heaplab_refs::record::{Converter, Options};
use heaplab_refs::vg::Ended;
use heaplab_trace::Codec;
use std::hint::black_box;
use std::io::Read;

fn thread_cpu() -> f64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: ts is a valid out-pointer.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    ts.tv_sec as f64 + ts.tv_nsec as f64 * 1e-9
}

fn best(runs: usize, mut f: impl FnMut() -> u64) -> (f64, u64) {
    let mut b = f64::MAX;
    let mut out = 0;
    for _ in 0..runs {
        let t = thread_cpu();
        out = f();
        b = b.min(thread_cpu() - t);
    }
    (b, out)
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let path = args.get(1).expect("usage: convert_phases RAW [RUNS]");
    let runs: usize = args.get(2).map(|s| s.parse().expect("RUNS")).unwrap_or(3);
    let mut f = std::fs::File::open(path).unwrap();
    let len = f.metadata().unwrap().len() as usize;
    let mut words = vec![0u64; len / 8];
    // SAFETY: viewing the Vec<u64>'s memory as bytes, length matching.
    let bytes =
        unsafe { std::slice::from_raw_parts_mut(words.as_mut_ptr() as *mut u8, words.len() * 8) };
    f.read_exact(bytes).unwrap();
    let words = &words[..];
    let only_convert = args.get(3).map(String::as_str) == Some("convert");

    let (t_scan, refs) = best(if only_convert { 1 } else { runs }, || {
        let (mut pos, mut n, mut x) = (0, 0u64, 0u64);
        while let Some(r) = raw::next(words, &mut pos) {
            if let Rec::Ref(w) | Rec::SRef(w, _) = r {
                n += 1;
                x ^= w;
            }
        }
        black_box(x);
        n
    });
    let (t_attr, heap) = best(if only_convert { 0 } else { runs }, || {
        let mut m = HeapMap::new();
        let (mut pos, mut heap, mut next) = (0, 0u64, 0u64);
        while let Some(r) = raw::next(words, &mut pos) {
            match r {
                Rec::Ref(w) | Rec::SRef(w, _) => {
                    if let Some((id, off)) = m.lookup(raw::addr(w)) {
                        heap += 1;
                        black_box((id, off));
                    }
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
            }
        }
        heap
    });
    let mut payload = 0u64;
    let (t_conv, _) = best(runs, || {
        let mut conv = Converter::new(
            std::io::sink(),
            vec![b"x".to_vec()],
            None,
            Options { refs_codec: Codec::None, ..Options::default() },
        );
        // the ring hands out 4 MiB segments; the file is one long stream
        let mut pos = 0;
        while pos < words.len() {
            let end = (pos + (1 << 19)).min(words.len());
            let used = conv.feed_words(&words[pos..end]).unwrap();
            if used == 0 {
                break; // a record cut at the end of the file
            }
            pos += used;
            conv.flush_if_full().unwrap();
        }
        let (_, s) = conv.finish(Ended::Exit(0)).unwrap();
        payload = s.refs_raw_bytes;
        s.refs.refs()
    });
    if only_convert {
        println!("convert {:.2} s, {:.2} ns/ref", t_conv, t_conv * 1e9 / refs as f64);
        return;
    }
    // the payloads, to time zstd on them alone
    let mut conv = Converter::new(
        Vec::new(),
        vec![b"x".to_vec()],
        None,
        Options { refs_codec: Codec::None, ..Options::default() },
    );
    conv.feed_all(bytes_of(words)).unwrap();
    let (trace, _) = conv.finish(Ended::Exit(0)).unwrap();
    let mut r = heaplab_trace::TraceReader::new(&trace[..], "x").unwrap();
    r.keep_refs(true);
    let mut payloads = Vec::new();
    while let Some(it) = r.next_item().unwrap() {
        if let heaplab_trace::Item::Skipped { .. } = it {
            if let Some((_, p)) = r.take_refs() {
                payloads.push(p);
            }
        }
    }
    // a digest of the payloads: an encoder change must keep it
    let digest = payloads
        .iter()
        .flatten()
        .fold(0xcbf2_9ce4_8422_2325u64, |h, &b| (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3));
    // record's level (Options::default().refs_codec) and faster ones beside it
    let levels: Vec<i32> = std::env::var("ZSTD_LEVELS")
        .ok()
        .map(|v| v.split(',').map(|l| l.trim().parse().expect("ZSTD_LEVELS: integers")).collect())
        .unwrap_or_else(|| vec![1]);
    let zstd_at: Vec<(i32, f64, u64)> = levels
        .iter()
        .map(|&level| {
            let (t, b) = best(runs, || {
                let mut z = zstd::bulk::Compressor::new(level).unwrap();
                payloads.iter().map(|p| z.compress(p).unwrap().len() as u64).sum()
            });
            (level, t, b)
        })
        .collect();
    let ns = |t: f64| t * 1e9 / refs as f64;
    println!(
        "{refs} references ({heap} heap), {} words, best of {runs}, thread CPU; REFS payloads {} bytes, digest {digest:016x}",
        words.len(),
        payloads.iter().map(Vec::len).sum::<usize>()
    );
    println!("  scan       {:6.2} s {:5.2} ns/ref", t_scan, ns(t_scan));
    println!(
        "  attribute  {:6.2} s {:5.2} ns/ref  (+{:.2} over scan)",
        t_attr,
        ns(t_attr),
        ns(t_attr - t_scan)
    );
    println!(
        "  convert    {:6.2} s {:5.2} ns/ref  (+{:.2} over attribute: ids, encoding, events)",
        t_conv,
        ns(t_conv),
        ns(t_conv - t_attr)
    );
    for (level, t_zstd, zbytes) in zstd_at {
        println!(
            "  zstd {level:<3}   {:6.2} s {:5.2} ns/ref  ({:.2} B/ref raw -> {:.3} B/ref)",
            t_zstd,
            ns(t_zstd),
            payload as f64 / refs as f64,
            zbytes as f64 / refs as f64
        );
    }
}

fn bytes_of(w: &[u64]) -> &[u8] {
    // SAFETY: u64 memory viewed as bytes, same length in bytes.
    unsafe { std::slice::from_raw_parts(w.as_ptr() as *const u8, w.len() * 8) }
}
