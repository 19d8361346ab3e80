//! Regenerates the test vectors in `testdata/vectors/` from the scripts there
//! (and derives the malformed ones from them):
//!
//! ```text
//! cargo run -p heaplab-trace --example gen-vectors -- testdata/vectors
//! ```
//!
//! Expected `.txt` dumps come from the reader; the tests also check each dump
//! against its hand-written script, so this is not circular.

use heaplab_trace::block::{checksum, BlockHeader};
use heaplab_trace::dump::{run_script, write_dump};
use heaplab_trace::format::{kind, BLOCK_HEADER_LEN, FILE_HEADER_LEN};
use heaplab_trace::TraceReader;
use std::fs;
use std::path::Path;

/// Offsets of every block header in a trace.
fn blocks(b: &[u8]) -> Vec<(usize, BlockHeader)> {
    let mut v = Vec::new();
    let mut at = FILE_HEADER_LEN;
    while at + BLOCK_HEADER_LEN <= b.len() {
        let h = BlockHeader::parse(b[at..at + BLOCK_HEADER_LEN].try_into().unwrap());
        v.push((at, h));
        at += BLOCK_HEADER_LEN + h.stored_len as usize;
    }
    v
}

fn write_err(dir: &Path, name: &str, bytes: &[u8], phrase: &str) {
    let p = dir.join(format!("{name}.hltrace"));
    fs::write(&p, bytes).unwrap();
    let e = match TraceReader::new(bytes, &p) {
        Err(e) => e,
        Ok(mut r) => loop {
            match r.next_event() {
                Ok(Some(_)) => {}
                Ok(None) => panic!("{name}: reads without error"),
                Err(e) => break e,
            }
        },
    };
    assert!(e.to_string().contains(phrase), "{name}: {e} lacks {phrase:?}");
    fs::write(
        dir.join(format!("{name}.err")),
        format!("offset={} events={} problem={phrase}\n", e.offset, e.events_read),
    )
    .unwrap();
    println!("{name}: {e}");
}

/// The trace with block `i`'s payload (and flags) replaced, numbers and
/// checksums made good again: a block that is bad only in what it says.
fn with_block(b: &[u8], i: usize, flags: Option<u16>, payload: &[u8]) -> Vec<u8> {
    let mut out = b[..FILE_HEADER_LEN].to_vec();
    for (k, (at, h)) in blocks(b).into_iter().enumerate() {
        let body = &b[at + BLOCK_HEADER_LEN..at + BLOCK_HEADER_LEN + h.stored_len as usize];
        let (p, fl) = if k == i { (payload, flags.unwrap_or(h.flags)) } else { (body, h.flags) };
        let mut nh =
            BlockHeader { flags: fl, stored_len: p.len() as u32, raw_len: p.len() as u32, ..h };
        assert!(h.codec == 0 || k != i, "only stored blocks are rewritten");
        if k == i {
            nh.codec = 0;
        }
        nh.crc = checksum(&nh.to_bytes(), p);
        out.extend_from_slice(&nh.to_bytes());
        out.extend_from_slice(p);
    }
    out
}

/// What a reader prints of a bad trace before its error, for `NAME.txt`
/// beside `NAME.err`: a block is all or nothing, so none of the bad block's
/// items may be there.
fn write_prefix(dir: &Path, name: &str, bytes: &[u8]) {
    let mut r = TraceReader::new(bytes, name).unwrap();
    let mut out = Vec::new();
    assert!(write_dump(&mut r, &mut out).is_err(), "{name} reads without error");
    fs::write(dir.join(format!("{name}.txt")), &out).unwrap();
}

fn main() {
    let dir = std::env::args().nth(1).unwrap_or_else(|| "testdata/vectors".into());
    let dir = Path::new(&dir);
    let mut scripts: Vec<_> = fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.to_string_lossy().ends_with(".script.txt"))
        .collect();
    scripts.sort();
    for s in &scripts {
        let name =
            s.file_name().unwrap().to_string_lossy().trim_end_matches(".script.txt").to_string();
        let bytes =
            run_script(&fs::read_to_string(s).unwrap()).unwrap_or_else(|e| panic!("{name}: {e}"));
        fs::write(dir.join(format!("{name}.hltrace")), &bytes).unwrap();
        let mut r = TraceReader::new(&bytes[..], &name).unwrap();
        let mut out = Vec::new();
        let res = write_dump(&mut r, &mut out);
        if let Err(e) = res {
            // Only the cut-short vectors end without END.
            assert!(name.contains("cut"), "{name}: {e}");
        }
        fs::write(dir.join(format!("{name}.txt")), &out).unwrap();
        println!("{name}: {} bytes", bytes.len());
    }

    // The same content as basic, compressed: decodes to basic.txt.
    let basic_script = fs::read_to_string(dir.join("basic.script.txt")).unwrap();
    let z = run_script(&basic_script.replacen("codec=none", "codec=zstd", 1)).unwrap();
    fs::write(dir.join("basic-zstd.hltrace"), &z).unwrap();

    // Malformed ones, derived from basic.
    let basic = fs::read(dir.join("basic.hltrace")).unwrap();
    let bl = blocks(&basic);
    let events: Vec<_> = bl.iter().filter(|(_, h)| h.kind == kind::EVENTS).collect();
    let (ev2, ev2h) = *events[1];
    let (end_at, _) = *bl.iter().find(|(_, h)| h.kind == kind::END).unwrap();

    write_err(dir, "cut-short", &basic[..end_at], "no END block");
    write_err(
        dir,
        "torn-payload",
        &basic[..ev2 + BLOCK_HEADER_LEN + ev2h.stored_len as usize / 2],
        "truncated",
    );
    write_err(dir, "torn-header", &basic[..ev2 + 10], "truncated");

    let mut flip = basic.clone();
    flip[ev2 + BLOCK_HEADER_LEN + 3] ^= 0x04;
    write_err(dir, "bitflip", &flip, "checksum mismatch");

    // Junk after a complete trace: corruption, not a cut.
    let mut junk = basic.clone();
    junk.extend_from_slice(b"junk after the end\n");
    write_err(dir, "trailing-junk", &junk, "trailing data after the END block");

    let mut v3 = basic.clone();
    v3[8] = 3;
    write_err(dir, "version3", &v3, "version 3");

    write_err(dir, "not-a-trace", b"a b 10\nf 0\n", "not a heaplab trace");

    let mut absurd = basic.clone();
    absurd[ev2 + 8..ev2 + 12].copy_from_slice(&0xffff_fff0u32.to_le_bytes());
    write_err(dir, "absurd-length", &absurd, "absurd length");

    // Cases the C and Rust readers once read differently (issue 17): an END
    // block with no fields (C said reason 0, Rust exit: now neither reads
    // it); reserved flag bits in a block header; a definitions block whose
    // second entry is bad (Rust handed out the first before the error).
    let (end_i, _) = bl.iter().enumerate().find(|(_, (_, h))| h.kind == kind::END).unwrap();
    write_err(
        dir,
        "end-empty",
        &with_block(&basic, end_i, None, b""),
        "lacks the required field reason",
    );
    write_err(
        dir,
        "flags-reserved",
        &with_block(
            &basic,
            1,
            Some(0x8001),
            &basic[bl[1].0 + BLOCK_HEADER_LEN
                ..bl[1].0 + BLOCK_HEADER_LEN + bl[1].1.stored_len as usize],
        ),
        "reserved flag bits",
    );
    let (mod_i, (mod_at, mod_h)) = bl
        .iter()
        .enumerate()
        .find(|(_, (_, h))| h.kind == kind::MODULES)
        .map(|(i, x)| (i, *x))
        .unwrap();
    let mut mods = basic
        [mod_at + BLOCK_HEADER_LEN..mod_at + BLOCK_HEADER_LEN + mod_h.stored_len as usize]
        .to_vec();
    mods.extend_from_slice(&[9, 0, 0, 0, 0]); // module 9 where the next id was expected
    let partial = with_block(&basic, mod_i, None, &mods);
    write_err(dir, "defs-partial", &partial, "where");
    write_prefix(dir, "defs-partial", &partial);

    // An unknown stream, not skippable, after the first events block.
    let mut unknown = basic[..ev2].to_vec();
    let mut h = BlockHeader {
        kind: kind::REFS,
        codec: 0,
        flags: 0,
        stored_len: 2,
        raw_len: 2,
        number: ev2h.number,
        crc: 0,
    };
    h.crc = checksum(&h.to_bytes(), b"zz");
    unknown.extend_from_slice(&h.to_bytes());
    unknown.extend_from_slice(b"zz");
    write_err(dir, "unknown-stream", &unknown, "unknown stream kind 0x10");

    // A free of an object that is not live, with a good checksum: the second
    // events block rewritten so its first ref points at the freed object 0.
    let payload = crafted_bad_ref();
    let mut badref = basic[..FILE_HEADER_LEN].to_vec();
    let (meta_at, meta_h) = bl[0];
    badref.extend_from_slice(
        &basic[meta_at..meta_at + BLOCK_HEADER_LEN + meta_h.stored_len as usize],
    );
    let (thr_at, thr_h) = *bl.iter().find(|(_, h)| h.kind == kind::THREADS).unwrap();
    let mut th = thr_h;
    th.number = 1;
    th.crc = checksum(
        &th.to_bytes(),
        &basic[thr_at + BLOCK_HEADER_LEN..thr_at + BLOCK_HEADER_LEN + thr_h.stored_len as usize],
    );
    badref.extend_from_slice(&th.to_bytes());
    badref.extend_from_slice(
        &basic[thr_at + BLOCK_HEADER_LEN..thr_at + BLOCK_HEADER_LEN + thr_h.stored_len as usize],
    );
    let mut eh = BlockHeader {
        kind: kind::EVENTS,
        codec: 0,
        flags: 0,
        stored_len: payload.len() as u32,
        raw_len: payload.len() as u32,
        number: 2,
        crc: 0,
    };
    eh.crc = checksum(&eh.to_bytes(), &payload);
    badref.extend_from_slice(&eh.to_bytes());
    badref.extend_from_slice(&payload);
    write_err(dir, "bad-ref", &badref, "which is not live");
}

/// malloc (id 0), free 0, free 0 again: the third event is bad.
fn crafted_bad_ref() -> Vec<u8> {
    use heaplab_trace::varint::{put, put_bytes};
    let mut p = Vec::new();
    for v in [3u64, 0, 0, 0] {
        put(&mut p, v);
    }
    put_bytes(&mut p, &[0, 8, 8]); // ops: malloc, free, free
    put_bytes(&mut p, &[0, 0, 0]); // threads
    put_bytes(&mut p, &[0, 1, 1]); // times
    put_bytes(&mut p, &[16]); // sizes
    put_bytes(&mut p, &[]); // aligns
    put_bytes(&mut p, &[0, 0]); // refs: next_id is 1 for both frees, so both name object 0
    put_bytes(&mut p, &[]); // stacks
    p
}
