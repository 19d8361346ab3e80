//! The raw stream of heaplab's Valgrind tool (`native/vgtool/heaplab_vg.h`
//! is its specification): 64-bit little-endian words, references as two
//! words, control records as two words plus extras.
//!
//! ```text
//!   reference  [address][WRITE | ALLOC<<1 | 0<<2 | size<<3 | time<<13]
//!   control    [w0][4 | kind<<3 | n<<16][extra 0] .. [extra n-1]
//! ```
//!
//! [`RawReader`] reads it in large chunks and hands out [`Rec`]s that borrow
//! the chunk, so a reference costs a match and two loads.

use std::io::{self, Read};

/// Control record kinds.
pub mod ctl {
    pub const HELLO: u8 = 1;
    pub const THREAD: u8 = 2;
    pub const MODULE: u8 = 3;
    pub const ALLOC: u8 = 4;
    pub const FREE: u8 = 5;
    pub const EXIT: u8 = 6;
    pub const EVENT: u8 = 7;
}

/// The protocol version this reader understands (HELLO's w0).
pub const PROTOCOL: u64 = 1;
pub const MODE_RECORD: u64 = 1;
pub const MODE_MEASURE: u64 = 2;
pub const EXIT_EXIT: u64 = 1;
pub const EXIT_EXEC: u64 = 2;

pub const REF_WRITE: u64 = 1;
pub const REF_ALLOC: u64 = 2;
const CONTROL: u64 = 4;

/// The size of a reference (`info` word).
#[inline(always)]
pub fn ref_size(info: u64) -> u32 {
    ((info >> 3) & 1023) as u32
}
/// The instruction time of a reference (record mode).
#[inline(always)]
pub fn ref_time(info: u64) -> u64 {
    info >> 13
}

/// One record of a chunk.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Rec<'a> {
    Ref { addr: u64, info: u64 },
    Control { kind: u8, w0: u64, extra: &'a [u64] },
}

/// Reads the stream in chunks of whole records.
pub struct RawReader<R> {
    src: R,
    buf: Vec<u64>,
    /// Bytes of `buf` holding data (whole words and a partial one).
    filled: usize,
    /// Words of `buf` already handed out.
    done: usize,
    eof: bool,
    bytes: u64,
}

/// Words per read; a control record is far smaller.
const CHUNK_WORDS: usize = 1 << 20;

impl<R: Read> RawReader<R> {
    pub fn new(src: R) -> Self {
        RawReader { src, buf: vec![0; CHUNK_WORDS], filled: 0, done: 0, eof: false, bytes: 0 }
    }

    /// Bytes read so far.
    pub fn bytes(&self) -> u64 {
        self.bytes
    }

    /// The next chunk of whole records; `None` at the end of the stream.
    /// A stream that ends inside a record is an error.
    pub fn chunk(&mut self) -> io::Result<Option<Chunk<'_>>> {
        // keep the unread tail (a partial record) at the front
        let tail_start = self.done * 8;
        if tail_start > 0 {
            let n = self.filled - tail_start;
            // SAFETY: buf is a Vec<u64>; viewing its initialized words as bytes is sound
            // (u8 has no alignment or validity requirements) and the range is in bounds.
            let bytes = unsafe {
                std::slice::from_raw_parts_mut(self.buf.as_mut_ptr() as *mut u8, self.buf.len() * 8)
            };
            bytes.copy_within(tail_start..self.filled, 0);
            self.filled = n;
            self.done = 0;
        }
        loop {
            let words = self.filled / 8;
            let whole = whole_records(&self.buf[..words]);
            if whole > 0 {
                self.done = whole;
                for w in &mut self.buf[..whole] {
                    *w = u64::from_le(*w);
                }
                return Ok(Some(Chunk { words: &self.buf[..whole], pos: 0 }));
            }
            if self.eof {
                if self.filled == 0 {
                    return Ok(None);
                }
                return Err(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    format!(
                        "the tool's stream ends inside a record ({} bytes left over)",
                        self.filled
                    ),
                ));
            }
            if self.filled == self.buf.len() * 8 {
                // a record larger than the buffer: only a corrupt length does this
                return Err(io::Error::new(
                    io::ErrorKind::InvalidData,
                    "a control record longer than 8 MiB",
                ));
            }
            // SAFETY: as above; the slice covers the unfilled part of buf's memory.
            let bytes = unsafe {
                std::slice::from_raw_parts_mut(self.buf.as_mut_ptr() as *mut u8, self.buf.len() * 8)
            };
            match self.src.read(&mut bytes[self.filled..]) {
                Ok(0) => self.eof = true,
                Ok(n) => {
                    self.filled += n;
                    self.bytes += n as u64;
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
    }
}

/// How many words at the start of `w` form whole records.
fn whole_records(w: &[u64]) -> usize {
    let mut i = 0;
    while i + 2 <= w.len() {
        let w1 = u64::from_le(w[i + 1]);
        let len = if w1 & CONTROL != 0 { 2 + ((w1 >> 16) & 0xffff_ffff) as usize } else { 2 };
        if i + len > w.len() {
            break;
        }
        i += len;
    }
    i
}

/// Whole records, in order.
pub struct Chunk<'a> {
    words: &'a [u64],
    pos: usize,
}

impl<'a> Iterator for Chunk<'a> {
    type Item = Rec<'a>;
    #[inline]
    fn next(&mut self) -> Option<Rec<'a>> {
        let w = self.words;
        let i = self.pos;
        if i + 2 > w.len() {
            return None;
        }
        let (w0, w1) = (w[i], w[i + 1]);
        if w1 & CONTROL == 0 {
            self.pos = i + 2;
            return Some(Rec::Ref { addr: w0, info: w1 });
        }
        let n = ((w1 >> 16) & 0xffff_ffff) as usize;
        self.pos = i + 2 + n;
        Some(Rec::Control { kind: ((w1 >> 3) & 0xff) as u8, w0, extra: &w[i + 2..i + 2 + n] })
    }
}

/// A path that a MODULE record carries: `len` bytes in whole words.
pub fn path_of(extra: &[u64]) -> String {
    let len = extra.get(3).copied().unwrap_or(0) as usize;
    let mut b = Vec::with_capacity(len);
    for w in extra.iter().skip(4) {
        b.extend_from_slice(&w.to_le_bytes());
    }
    b.truncate(len);
    String::from_utf8_lossy(&b).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bytes(words: &[u64]) -> Vec<u8> {
        words.iter().flat_map(|w| w.to_le_bytes()).collect()
    }

    /// A reader that hands out `step` bytes at a time.
    struct Trickle {
        data: Vec<u8>,
        pos: usize,
        step: usize,
    }
    impl Read for Trickle {
        fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
            let n = self.step.min(buf.len()).min(self.data.len() - self.pos);
            buf[..n].copy_from_slice(&self.data[self.pos..self.pos + n]);
            self.pos += n;
            Ok(n)
        }
    }

    #[test]
    fn records_survive_any_read_boundaries() {
        let words = [
            0x1000,
            8 << 3 | 1 | 5 << 13,
            7,
            4 | (ctl::THREAD as u64) << 3 | 1 << 16,
            4242,
            0x2000,
            4 << 3,
        ];
        for step in [1, 3, 7, 8, 13, 1000] {
            let mut r = RawReader::new(Trickle { data: bytes(&words), pos: 0, step });
            let mut got = Vec::new();
            while let Some(c) = r.chunk().unwrap() {
                for rec in c {
                    got.push(format!("{rec:?}"));
                }
            }
            assert_eq!(got.len(), 3, "step {step}");
            assert!(got[1].contains("kind: 2") && got[1].contains("4242"), "{got:?}");
        }
    }

    #[test]
    fn a_torn_record_is_an_error() {
        let words = [0x1000u64, 8 << 3, 7];
        let data = bytes(&words);
        let mut r = RawReader::new(&data[..]);
        let mut err = None;
        loop {
            match r.chunk() {
                Ok(Some(c)) => assert_eq!(c.count(), 1),
                Ok(None) => break,
                Err(e) => {
                    err = Some(e);
                    break;
                }
            }
        }
        assert!(err.unwrap().to_string().contains("ends inside a record"));
    }
}
