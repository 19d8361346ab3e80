//! The raw stream of heaplab's Valgrind tool (`native/vgtool/heaplab_vg.h`
//! is its specification): 64-bit little-endian words; bits 61..63 of a
//! record's first word give its type.
//!
//! ```text
//!   REF   [addr:48 | k:8 | size code:3 | WRITE | ALLOC | 000]       time = last TIME + k
//!   TIME  [instructions:61 | 001]
//!   SREF  [as REF | 010][size]
//!   CTL   [kind:8 | n:32 | 011][w0][extra 0] .. [extra n-1]
//! ```
//!
//! [`RawReader::fill`] hands out the words read so far; [`next`] decodes one
//! record at a time from them (a reference costs a shift and a match), and
//! [`RawReader::consume`] says how far the caller got.

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
pub const PROTOCOL: u64 = 2;
pub const MODE_RECORD: u64 = 1;
pub const MODE_MEASURE: u64 = 2;
pub const EXIT_EXIT: u64 = 1;
pub const EXIT_EXEC: u64 = 2;

pub const T_REF: u64 = 0;
pub const T_TIME: u64 = 1;
pub const T_SREF: u64 = 2;
pub const T_CTL: u64 = 3;
pub const ADDR_MASK: u64 = (1 << 48) - 1;
pub const WRITE: u64 = 1 << 59;
pub const ALLOC: u64 = 1 << 60;
pub const TIME_MASK: u64 = (1 << 61) - 1;

/// The address of a REF or SREF word.
#[inline(always)]
pub fn addr(w: u64) -> u64 {
    w & ADDR_MASK
}
/// Instructions since the last TIME word.
#[inline(always)]
pub fn k(w: u64) -> u64 {
    (w >> 48) & 0xff
}
/// The size of a REF (not an SREF: its size is the next word).
#[inline(always)]
pub fn size(w: u64) -> u32 {
    1 << ((w >> 56) & 7)
}

/// The REFS encoder's access bits (`heaplab_trace::refs::v2::access_bits`)
/// of a REF word, from its size code and WRITE bit (bits 56..59) by table.
#[inline(always)]
pub fn access_bits(w: u64) -> u8 {
    ACCESS_BITS[((w >> 56) & 15) as usize]
}

const ACCESS_BITS: [u8; 16] = {
    let mut t = [0u8; 16];
    let mut i = 0;
    while i < 16 {
        // size code (i & 7): 1 << code bytes; the format codes 8, 4 and 1
        let code: u8 = match i & 7 {
            3 => 0,
            2 => 1,
            0 => 2,
            _ => heaplab_trace::refs::v2::SIZE_EXPLICIT,
        };
        t[i] = code << 1 | (i >> 3) as u8;
        i += 1;
    }
    t
};

/// One record.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Rec<'a> {
    /// A reference of 1 to 64 bytes: see [`addr`], [`k`], [`size`], [`WRITE`], [`ALLOC`].
    Ref(u64),
    /// A reference of `size` bytes (first word as a REF's).
    SRef(u64, u64),
    /// Instructions before the next references' superblock run.
    Time(u64),
    Control {
        kind: u8,
        w0: u64,
        extra: &'a [u64],
    },
}

/// Decodes the record at `*pos`, advancing `pos`; None when `words` ends
/// before the record does (or at its end).
#[inline(always)]
pub fn next<'a>(words: &'a [u64], pos: &mut usize) -> Option<Rec<'a>> {
    let i = *pos;
    let w = *words.get(i)?;
    match w >> 61 {
        T_REF => {
            *pos = i + 1;
            Some(Rec::Ref(w))
        }
        T_TIME => {
            *pos = i + 1;
            Some(Rec::Time(w & TIME_MASK))
        }
        T_SREF => {
            let size = *words.get(i + 1)?;
            *pos = i + 2;
            Some(Rec::SRef(w, size))
        }
        _ => {
            let n = ((w >> 8) & 0xffff_ffff) as usize;
            if i + 2 + n > words.len() {
                return None;
            }
            *pos = i + 2 + n;
            Some(Rec::Control { kind: w as u8, w0: words[i + 1], extra: &words[i + 2..i + 2 + n] })
        }
    }
}

/// Reads the stream in large reads.
pub struct RawReader<R> {
    src: R,
    buf: Vec<u64>,
    /// Bytes of `buf` holding data (whole words and a partial one).
    filled: usize,
    /// Words of `buf` the caller has consumed.
    done: usize,
    eof: bool,
    bytes: u64,
}

/// Words of buffer; a control record is far smaller.
const BUF_WORDS: usize = 1 << 20;

impl<R: Read> RawReader<R> {
    pub fn new(src: R) -> Self {
        RawReader { src, buf: vec![0; BUF_WORDS], filled: 0, done: 0, eof: false, bytes: 0 }
    }

    /// Bytes read so far.
    pub fn bytes(&self) -> u64 {
        self.bytes
    }

    /// The words read and not consumed, holding at least one whole record;
    /// `None` at the end of the stream. A stream that ends inside a record is
    /// an error.
    pub fn fill(&mut self) -> io::Result<Option<&[u64]>> {
        loop {
            let words = self.filled / 8;
            let mut p = self.done;
            if next(&self.buf[..words], &mut p).is_some() {
                return Ok(Some(&self.buf[self.done..words]));
            }
            // keep the unread tail (a partial record) at the front
            if self.done > 0 {
                let from = self.done * 8;
                let n = self.filled - from;
                self.bytes_mut().copy_within(from..from + n, 0);
                self.filled = n;
                self.done = 0;
                continue;
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
                return Err(io::Error::new(
                    io::ErrorKind::InvalidData,
                    "a control record longer than 8 MiB",
                ));
            }
            let filled = self.filled;
            // SAFETY: as in bytes_mut; `src` is a different field, not aliased.
            let b = unsafe {
                std::slice::from_raw_parts_mut(self.buf.as_mut_ptr() as *mut u8, self.buf.len() * 8)
            };
            let r = read_some(&mut self.src, &mut b[filled..]);
            match r {
                Ok(0) => self.eof = true,
                Ok(n) => {
                    self.filled += n;
                    self.bytes += n as u64;
                }
                Err(e) => return Err(e),
            }
        }
    }

    /// The caller decoded `words` words of what [`Self::fill`] returned.
    pub fn consume(&mut self, words: usize) {
        self.done += words;
    }

    fn bytes_mut(&mut self) -> &mut [u8] {
        // SAFETY: buf is a Vec<u64>; viewing its memory as bytes is sound (u8
        // has no alignment or validity requirements) and the length matches.
        unsafe {
            std::slice::from_raw_parts_mut(self.buf.as_mut_ptr() as *mut u8, self.buf.len() * 8)
        }
    }
}

fn read_some<R: Read>(src: &mut R, b: &mut [u8]) -> io::Result<usize> {
    loop {
        match src.read(b) {
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            r => return r,
        }
    }
}

/// A path that a MODULE record carries: `len` bytes in whole words.
pub fn path_of(extra: &[u64]) -> Vec<u8> {
    let len = extra.get(3).copied().unwrap_or(0) as usize;
    let mut b = Vec::with_capacity(len);
    for w in extra.iter().skip(4) {
        b.extend_from_slice(&w.to_le_bytes());
    }
    b.truncate(len);
    b
}

/// Calls `f` on every record of `src` (for tools and tests).
pub fn for_each<R: Read>(src: R, mut f: impl FnMut(Rec<'_>)) -> io::Result<u64> {
    let mut r = RawReader::new(src);
    loop {
        let n = match r.fill()? {
            None => break,
            Some(words) => {
                let mut pos = 0;
                while let Some(rec) = next(words, &mut pos) {
                    f(rec);
                }
                pos
            }
        };
        r.consume(n);
    }
    Ok(r.bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ref_words_carry_the_encoders_access_bits() {
        use heaplab_trace::refs::v2;
        for code in 0..8u64 {
            for write in [false, true] {
                let w = 0x1234 | code << 56 | if write { WRITE } else { 0 };
                assert_eq!(access_bits(w), v2::access_bits(size(w), write), "{code} {write}");
            }
        }
    }

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

    fn sample() -> Vec<u64> {
        vec![
            T_TIME << 61 | 1000,
            0x1000 | 3 << 48 | 3 << 56 | WRITE, // 8-byte store at 0x1000, k = 3
            T_CTL << 61 | ctl::THREAD as u64 | 1 << 8,
            7,
            4242,
            T_SREF << 61 | 0x2000 | ALLOC,
            10,
        ]
    }

    #[test]
    fn records_survive_any_read_boundaries() {
        for step in [1, 3, 7, 8, 13, 1000] {
            let mut got = Vec::new();
            for_each(Trickle { data: bytes(&sample()), pos: 0, step }, |r| {
                got.push(format!("{r:?}"))
            })
            .unwrap();
            assert_eq!(got.len(), 4, "step {step}: {got:?}");
            assert_eq!(got[0], "Time(1000)");
            assert!(got[2].contains("kind: 2") && got[2].contains("4242"), "{got:?}");
        }
        let w = sample()[1];
        assert_eq!((addr(w), k(w), size(w), w & WRITE != 0), (0x1000, 3, 8, true));
    }

    #[test]
    fn a_torn_record_is_an_error() {
        let mut w = sample();
        w.truncate(4); // inside the control record
        let e = for_each(&bytes(&w)[..], |_| {}).unwrap_err();
        assert!(e.to_string().contains("ends inside a record"), "{e}");
        let mut b = bytes(&sample());
        b.pop(); // inside a word
        assert!(for_each(&b[..], |_| {}).is_err());
    }
}
