//! One input through each of heaplab's readers, for the fuzz targets in
//! `fuzz_targets/` (and for replaying a corpus without libFuzzer). Each
//! function reads everything the input holds, as the commands would, and
//! checks the invariants that hold for any input: no panic (overflow checks
//! are on), memory bounded by the readers' own limits, and what a converter
//! writes reads back.

use heaplab_trace::format::{kind, BLOCK_HEADER_LEN, BLOCK_SKIPPABLE, FILE_HEADER_LEN};
use heaplab_trace::profile::ProfileBuilder;
use heaplab_trace::refs::{object_profile_from, RefsReader, OPTION};
use heaplab_trace::rep::{parse, text_to_trace, trace_to_text, TextFormat};
use heaplab_trace::{
    dump, split, End, Item, Kind, Meta, NewEvent, ResizeView, TraceReader, TraceWriter,
    WriterOptions,
};
use std::io::sink;

/// Items read from one trace at most (an input cannot make a target run long).
const MAX_ITEMS: usize = 1 << 20;

/// Rewrites the block checksums and numbers of a trace in place, so that a
/// mutation inside a payload reaches the decoders instead of stopping at the
/// checksum. Stops at the first block that does not fit.
pub fn repair(b: &mut [u8]) {
    let mut at = FILE_HEADER_LEN;
    let mut number = 0u32;
    while at + BLOCK_HEADER_LEN <= b.len() {
        if &b[at..at + 4] != b"HLBK" {
            return;
        }
        let stored = u32::from_le_bytes(b[at + 8..at + 12].try_into().unwrap()) as usize;
        let end = match (at + BLOCK_HEADER_LEN).checked_add(stored) {
            Some(e) if e <= b.len() => e,
            _ => return,
        };
        b[at + 16..at + 20].copy_from_slice(&number.to_le_bytes());
        let hb: [u8; BLOCK_HEADER_LEN] = b[at..at + BLOCK_HEADER_LEN].try_into().unwrap();
        let crc = heaplab_trace::block::checksum(&hb, &b[at + BLOCK_HEADER_LEN..end]);
        b[at + 20..at + 24].copy_from_slice(&crc.to_le_bytes());
        number = number.wrapping_add(1);
        at = end;
    }
}

/// A trace: every item, the profile (sums of sizes), both readings of
/// realloc, the dump and the `.rep` text.
pub fn trace(data: &[u8]) {
    let (mode, body) = match data.split_first() {
        Some((m, rest)) => (*m, rest),
        None => return,
    };
    let mut owned;
    let bytes: &[u8] = if mode & 1 == 1 {
        owned = body.to_vec();
        repair(&mut owned);
        &owned
    } else {
        body
    };
    if let Ok(mut r) = TraceReader::new(bytes, "fuzz.hltrace") {
        let mut p = ProfileBuilder::new(8 << (mode >> 6), r.meta().time_unit_ns);
        let mut view = ResizeView::default();
        for _ in 0..MAX_ITEMS {
            match r.next_item() {
                Ok(Some(Item::Event(e))) => {
                    p.add(&e);
                    view.apply(&e);
                    split(&e);
                }
                Ok(Some(Item::Stack(id))) => {
                    let _ = r.stack(id).len();
                }
                Ok(Some(_)) => {}
                Ok(None) | Err(_) => break,
            }
        }
        let _ = p.finish("fuzz", |s| r.stack(s).to_vec(), |_| String::new(), 16);
    }
    if let Ok(mut r) = TraceReader::new(bytes, "fuzz.hltrace") {
        let _ = dump::write_dump(&mut r, &mut sink());
    }
    if let Ok(mut r) = TraceReader::new(bytes, "fuzz.hltrace") {
        let _ = trace_to_text(&mut r, TextFormat::Rep, &mut sink());
    }
}

/// A REFS payload, wrapped in a valid trace (META announcing references,
/// `data[0] % 64` mallocs for it to name, the block, END) and decoded, then
/// profiled per object.
pub fn refs(data: &[u8]) {
    let (n, payload) = match data.split_first() {
        Some((n, rest)) => (u64::from(*n % 64), rest),
        None => return,
    };
    let meta = Meta {
        pid: 1,
        pointer_size: 8,
        time_unit_ns: 1,
        options: Some(OPTION.as_bytes().to_vec()),
        ..Meta::default()
    };
    let opts = WriterOptions { codec: heaplab_trace::Codec::None, block_events: 16 };
    let mut w = TraceWriter::new(Vec::new(), &meta, opts).expect("in memory");
    let t = w.add_thread(1, "main");
    for i in 0..n {
        w.record(&NewEvent::alloc(Kind::Malloc, 8 + i).at(t, i)).expect("valid");
    }
    w.write_stream_block(kind::REFS, BLOCK_SKIPPABLE, payload).expect("in memory");
    let bytes = w.finish(&End::default()).expect("in memory");
    let mut r = RefsReader::new(TraceReader::new(&bytes[..], "fuzz.hltrace").expect("valid"));
    let mut buf = Vec::new();
    for _ in 0..MAX_ITEMS {
        buf.clear();
        if r.next_batch(&mut buf).is_err() || buf.is_empty() {
            break;
        }
    }
    let mut r = RefsReader::new(TraceReader::new(&bytes[..], "fuzz.hltrace").expect("valid"));
    let _ = object_profile_from(&mut r, &[]);
}

/// `.rep`, `.script` or dump text (`data[0] % 3` chooses): parsed, converted
/// to a trace, and the trace read back. A text that converts must give a
/// trace that reads to its end.
pub fn text(data: &[u8]) {
    let (which, body) = match data.split_first() {
        Some((w, rest)) => (*w % 3, rest),
        None => return,
    };
    match which {
        0 | 1 => {
            let f = if which == 0 { TextFormat::Rep } else { TextFormat::Script };
            let _ = parse(body, f);
            if let Ok((bytes, _)) =
                text_to_trace(body, f, b"fuzz", Vec::new(), WriterOptions::default())
            {
                let mut r =
                    TraceReader::new(&bytes[..], "converted").expect("a converted trace opens");
                loop {
                    match r.next_item() {
                        Ok(Some(_)) => {}
                        Ok(None) => break,
                        Err(e) => panic!("a converted trace does not read back: {e}"),
                    }
                }
            }
        }
        _ => {
            if let Ok(w) = dump::run_script_to(body, Vec::new()) {
                let bytes = w.into_inner_unfinished();
                if let Ok(mut r) = TraceReader::new(&bytes[..], "script") {
                    for _ in 0..MAX_ITEMS {
                        if !matches!(r.next_item(), Ok(Some(_))) {
                            break;
                        }
                    }
                }
            }
        }
    }
}

/// `din` text, through a small cache and the page simulator.
pub fn din(data: &[u8]) {
    use heaplab_sim::din::{DinSource, Fetches};
    use heaplab_sim::{drive, Cache, CacheConfig, PageSim};
    let (f, body) = match data.split_first() {
        Some((f, rest)) => (if f & 1 == 1 { Fetches::Simulate } else { Fetches::Skip }, rest),
        None => return,
    };
    let mut src = DinSource::new(body, "fuzz.din").fetches(f);
    let mut cache = Cache::new(CacheConfig::new(4096, 32, 2).expect("a valid configuration"));
    let mut pages = PageSim::new(4096).expect("a valid page size");
    let _ = drive(&mut src, &mut [&mut cache, &mut pages]);
    let _ = pages.curve();
}
