//! LEB128 varints, and a cursor that reads them out of a byte slice.

/// Appends `v` as a LEB128 varint (shortest form).
#[inline]
pub fn put(buf: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        buf.push((v as u8) | 0x80);
        v >>= 7;
    }
    buf.push(v as u8);
}

/// Appends a length-prefixed byte string.
pub fn put_bytes(buf: &mut Vec<u8>, b: &[u8]) {
    put(buf, b.len() as u64);
    buf.extend_from_slice(b);
}

/// Reads varints and byte strings from a slice; every failure is a message
/// naming what was being read, which the caller turns into a trace error.
pub struct Cursor<'a> {
    data: &'a [u8],
    pos: usize,
}

impl<'a> Cursor<'a> {
    pub fn new(data: &'a [u8]) -> Self {
        Cursor { data, pos: 0 }
    }

    /// Bytes consumed so far.
    pub fn pos(&self) -> usize {
        self.pos
    }

    pub fn is_empty(&self) -> bool {
        self.pos >= self.data.len()
    }

    pub fn remaining(&self) -> usize {
        self.data.len() - self.pos
    }

    /// The next byte, if any.
    #[inline]
    pub fn byte(&mut self) -> Option<u8> {
        let b = *self.data.get(self.pos)?;
        self.pos += 1;
        Some(b)
    }

    /// The next byte, left unread.
    #[inline]
    pub fn peek(&self) -> Option<u8> {
        self.data.get(self.pos).copied()
    }

    /// One varint of at most 10 bytes whose value fits in 64 bits. Most
    /// are one or two bytes, read here without a loop.
    #[inline]
    pub fn varint(&mut self, what: &str) -> Result<u64, String> {
        if let Some(&b) = self.data.get(self.pos) {
            if b < 0x80 {
                self.pos += 1;
                return Ok(u64::from(b));
            }
            if let Some(&b1) = self.data.get(self.pos + 1) {
                if b1 < 0x80 {
                    self.pos += 2;
                    return Ok(u64::from(b & 0x7f) | u64::from(b1) << 7);
                }
            }
        }
        self.varint_slow(what)
    }

    #[cold]
    fn varint_slow(&mut self, what: &str) -> Result<u64, String> {
        let mut v: u64 = 0;
        let mut shift = 0;
        loop {
            let Some(&b) = self.data.get(self.pos) else {
                return Err(format!("{what}: ran out of bytes inside a varint"));
            };
            self.pos += 1;
            if shift == 63 && b > 1 {
                return Err(format!("{what}: varint longer than 64 bits"));
            }
            v |= u64::from(b & 0x7f) << shift;
            if b & 0x80 == 0 {
                return Ok(v);
            }
            shift += 7;
            if shift > 63 {
                return Err(format!("{what}: varint longer than 10 bytes"));
            }
        }
    }

    /// `n` raw bytes.
    pub fn take(&mut self, n: usize, what: &str) -> Result<&'a [u8], String> {
        if self.remaining() < n {
            return Err(format!("{what}: needs {n} bytes, {} left", self.remaining()));
        }
        let s = &self.data[self.pos..self.pos + n];
        self.pos += n;
        Ok(s)
    }

    /// A varint length followed by that many bytes.
    pub fn bytes(&mut self, what: &str) -> Result<&'a [u8], String> {
        let n = self.varint(what)?;
        if n > self.remaining() as u64 {
            return Err(format!(
                "{what}: length {n} runs past the end ({} bytes left)",
                self.remaining()
            ));
        }
        self.take(n as usize, what)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_edges() {
        for v in [0, 1, 127, 128, 255, 16383, 16384, u32::MAX as u64, u64::MAX - 1, u64::MAX] {
            let mut b = Vec::new();
            put(&mut b, v);
            let mut c = Cursor::new(&b);
            assert_eq!(c.varint("v").unwrap(), v);
            assert!(c.is_empty());
        }
    }

    #[test]
    fn shortest_form_lengths() {
        let len = |v| {
            let mut b = Vec::new();
            put(&mut b, v);
            b.len()
        };
        assert_eq!(len(127), 1);
        assert_eq!(len(128), 2);
        assert_eq!(len(u64::MAX), 10);
    }

    #[test]
    fn rejects_overlong_and_truncated() {
        let eleven = [0x80u8; 10].iter().copied().chain([0x01]).collect::<Vec<_>>();
        assert!(Cursor::new(&eleven).varint("x").unwrap_err().contains("longer"));
        // 10th byte carrying more than the one bit that is left
        let mut too_big = vec![0xffu8; 9];
        too_big.push(0x02);
        assert!(Cursor::new(&too_big).varint("x").unwrap_err().contains("64 bits"));
        assert!(Cursor::new(&[0x80]).varint("x").unwrap_err().contains("ran out"));
    }
}
