//! The SP stream (`0x11`): the depth of the stack at each allocation, in
//! bytes, which paper 001's SP predictor looks up (`docs/trace-format.md`,
//! section SP). Written by the reference recorder (`heaplab record --refs`),
//! always `SKIPPABLE`: any other reader passes it by.
//!
//! ```text
//!   payload: varint n (entries, 1 ..= 1048576)
//!            varint first_event   varint depth
//!            (n - 1) × { varint gap (≥ 1: event index − previous entry's), varint depth }
//! ```
//!
//! ```
//! use heaplab_trace::sp::*;
//! let mut e = SpEncoder::default();
//! e.push(3, 272);
//! e.push(10, 400);
//! let p = e.take_block().unwrap();
//! assert_eq!(decode(&p).unwrap(), vec![(3, 272), (10, 400)]);
//! ```

use crate::block::{checksum, BlockHeader};
use crate::format::{
    codec, kind, BLOCK_HEADER_LEN, BLOCK_MAGIC, FILE_HEADER_LEN, FILE_MAGIC, MAX_BLOCK_LEN,
};
use crate::varint::{put, Cursor};
use std::io::{Read, Seek, SeekFrom};
use std::path::Path;

/// Entries per block at most.
pub const MAX_BLOCK_ENTRIES: u64 = 1 << 20;

/// Builds SP payloads: push (event index, depth) in increasing event order.
#[derive(Debug, Default)]
pub struct SpEncoder {
    buf: Vec<u8>,
    n: u64,
    last: u64,
    /// Entries pushed in all.
    pub entries: u64,
}

impl SpEncoder {
    /// Event `event` (its index in the trace) was made with the stack
    /// `depth` bytes deep; 0 is not stored (unknown).
    pub fn push(&mut self, event: u64, depth: u64) {
        if depth == 0 {
            return;
        }
        if self.n == 0 {
            put(&mut self.buf, event);
        } else {
            put(&mut self.buf, event - self.last);
        }
        put(&mut self.buf, depth);
        self.last = event;
        self.n += 1;
        self.entries += 1;
    }

    /// Whether a block should be written now.
    pub fn is_full(&self) -> bool {
        self.n >= MAX_BLOCK_ENTRIES
    }

    /// The payload of the entries pushed since the last block, if any.
    pub fn take_block(&mut self) -> Option<Vec<u8>> {
        if self.n == 0 {
            return None;
        }
        let mut p = Vec::with_capacity(self.buf.len() + 4);
        put(&mut p, self.n);
        p.extend_from_slice(&self.buf);
        self.buf.clear();
        self.n = 0;
        Some(p)
    }
}

/// The (event index, depth) entries of one payload.
pub fn decode(p: &[u8]) -> Result<Vec<(u64, u64)>, String> {
    let mut c = Cursor::new(p);
    let n = c.varint("entry count")?;
    if n == 0 || n > MAX_BLOCK_ENTRIES {
        return Err(format!("{n} entries in one SP block; 1..={MAX_BLOCK_ENTRIES} allowed"));
    }
    let mut v = Vec::with_capacity(n as usize);
    let mut ev = c.varint("first event")?;
    v.push((ev, c.varint("depth")?));
    for i in 1..n {
        let gap = c.varint("event gap")?;
        if gap == 0 {
            return Err(format!("entry {i}: event gap 0 (events must increase)"));
        }
        ev = ev.checked_add(gap).ok_or_else(|| format!("entry {i}: event index overflows"))?;
        v.push((ev, c.varint("depth")?));
    }
    if !c.is_empty() {
        return Err(format!("{} bytes after the last entry", c.remaining()));
    }
    Ok(v)
}

/// Every SP entry of a trace file, by event index (sorted). A trace without
/// an SP stream gives none. Blocks are checked (magic, checksum, codec) as
/// the reader checks them; other blocks are skipped unread.
pub fn read_sp(path: impl AsRef<Path>) -> Result<Vec<(u64, u64)>, String> {
    let path = path.as_ref();
    let name = path.display();
    let mut f = std::fs::File::open(path).map_err(|e| format!("{name}: {e}"))?;
    let mut h = [0u8; FILE_HEADER_LEN];
    f.read_exact(&mut h).map_err(|_| format!("{name}: not a heaplab trace"))?;
    if h[..8] != FILE_MAGIC {
        return Err(format!("{name}: not a heaplab trace"));
    }
    let mut at = FILE_HEADER_LEN as u64;
    let mut out = Vec::new();
    loop {
        let mut hb = [0u8; BLOCK_HEADER_LEN];
        match f.read(&mut hb[..1]) {
            Ok(0) => break,
            Ok(_) => {}
            Err(e) => return Err(format!("{name}: byte {at}: {e}")),
        }
        if f.read_exact(&mut hb[1..]).is_err() {
            break; // a torn tail: the reader reports it; the entries so far stand
        }
        if hb[..4] != BLOCK_MAGIC {
            return Err(format!("{name}: byte {at}: not a block header"));
        }
        let bh = BlockHeader::parse(&hb);
        if bh.stored_len > MAX_BLOCK_LEN || bh.raw_len > MAX_BLOCK_LEN {
            return Err(format!("{name}: byte {at}: absurd block length"));
        }
        if bh.kind != kind::SP {
            f.seek(SeekFrom::Current(i64::from(bh.stored_len)))
                .map_err(|e| format!("{name}: {e}"))?;
            at += (BLOCK_HEADER_LEN as u64) + u64::from(bh.stored_len);
            continue;
        }
        let mut stored = vec![0u8; bh.stored_len as usize];
        if f.read_exact(&mut stored).is_err() {
            break;
        }
        if checksum(&hb, &stored) != bh.crc {
            return Err(format!("{name}: byte {at}: SP block checksum mismatch"));
        }
        let raw = match bh.codec {
            codec::NONE => stored,
            codec::ZSTD => zstd::bulk::decompress(&stored, bh.raw_len as usize)
                .map_err(|e| format!("{name}: byte {at}: SP block: zstd: {e}"))?,
            c => return Err(format!("{name}: byte {at}: SP block with unknown codec {c}")),
        };
        out.extend(decode(&raw).map_err(|m| format!("{name}: byte {at}: SP block: {m}"))?);
        at += (BLOCK_HEADER_LEN as u64) + u64::from(bh.stored_len);
    }
    out.sort_unstable();
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Kind, Meta, NewEvent, TraceReader, TraceWriter, WriterOptions};

    #[test]
    fn round_trips_and_other_readers_skip_it() {
        let meta = Meta { pid: 1, pointer_size: 8, time_unit_ns: 1000, ..Meta::default() };
        let mut w = TraceWriter::new(Vec::new(), &meta, WriterOptions::default()).unwrap();
        let t = w.add_thread(1, "main");
        let mut e = SpEncoder::default();
        for i in 0..5u64 {
            w.record(&NewEvent::alloc(Kind::Malloc, 16).at(t, i)).unwrap();
            e.push(i, if i == 2 { 0 } else { 100 + 16 * i });
        }
        w.write_stream_block(kind::SP, crate::format::BLOCK_SKIPPABLE, &e.take_block().unwrap())
            .unwrap();
        let bytes = w.finish(&crate::End::default()).unwrap();
        let dir = std::env::temp_dir().join(format!("hl-sp-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let p = dir.join("t.hltrace");
        std::fs::write(&p, &bytes).unwrap();
        assert_eq!(read_sp(&p).unwrap(), vec![(0, 100), (1, 116), (3, 148), (4, 164)]);
        let mut r = TraceReader::new(&bytes[..], "t").unwrap();
        let mut n = 0;
        while r.next_event().unwrap().is_some() {
            n += 1;
        }
        assert_eq!(n, 5);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn bad_payloads_say_what_is_wrong() {
        assert!(decode(&[0]).unwrap_err().contains("0 entries"));
        assert!(decode(&[2, 5, 1, 0, 1]).unwrap_err().contains("gap 0"));
        assert!(decode(&[1, 5, 1, 9]).unwrap_err().contains("after the last entry"));
    }
}
