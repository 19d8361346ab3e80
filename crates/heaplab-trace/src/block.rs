//! Blocks: the 24-byte header, the checksum and the codec. Everything above
//! this module works on decoded payloads.

use crate::format::{codec, BLOCK_HEADER_LEN, BLOCK_MAGIC};
use std::io::{self, Write};

/// A parsed block header.
#[derive(Debug, Clone, Copy)]
pub struct BlockHeader {
    pub kind: u8,
    pub codec: u8,
    pub flags: u16,
    pub stored_len: u32,
    pub raw_len: u32,
    pub number: u32,
    pub crc: u32,
}

impl BlockHeader {
    /// Parses the 24 header bytes; the magic is checked by the caller.
    pub fn parse(b: &[u8; BLOCK_HEADER_LEN]) -> BlockHeader {
        let u32_at = |o: usize| u32::from_le_bytes([b[o], b[o + 1], b[o + 2], b[o + 3]]);
        BlockHeader {
            kind: b[4],
            codec: b[5],
            flags: u16::from_le_bytes([b[6], b[7]]),
            stored_len: u32_at(8),
            raw_len: u32_at(12),
            number: u32_at(16),
            crc: u32_at(20),
        }
    }

    /// The header bytes with the checksum field as given.
    pub fn to_bytes(&self) -> [u8; BLOCK_HEADER_LEN] {
        let mut b = [0u8; BLOCK_HEADER_LEN];
        b[0..4].copy_from_slice(&BLOCK_MAGIC);
        b[4] = self.kind;
        b[5] = self.codec;
        b[6..8].copy_from_slice(&self.flags.to_le_bytes());
        b[8..12].copy_from_slice(&self.stored_len.to_le_bytes());
        b[12..16].copy_from_slice(&self.raw_len.to_le_bytes());
        b[16..20].copy_from_slice(&self.number.to_le_bytes());
        b[20..24].copy_from_slice(&self.crc.to_le_bytes());
        b
    }
}

/// CRC-32C of the first 20 header bytes followed by the stored payload.
pub fn checksum(header: &[u8; BLOCK_HEADER_LEN], stored: &[u8]) -> u32 {
    let c = crc32c::crc32c(&header[..20]);
    crc32c::crc32c_append(c, stored)
}

/// How a writer encodes payloads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Codec {
    /// Stored as is.
    None,
    /// One zstd frame at this level.
    Zstd(i32),
}

/// Encodes and writes blocks, numbering them.
pub struct BlockWriter<W: Write> {
    out: W,
    number: u32,
    bytes: u64,
    zstd: Option<zstd::bulk::Compressor<'static>>,
}

impl<W: Write> BlockWriter<W> {
    pub fn new(out: W) -> Self {
        BlockWriter { out, number: 0, bytes: 0, zstd: None }
    }

    /// Writes raw bytes that are not a block (the file header).
    pub fn write_raw(&mut self, b: &[u8]) -> io::Result<()> {
        self.out.write_all(b)?;
        self.bytes += b.len() as u64;
        Ok(())
    }

    /// Writes one block. With `Codec::Zstd` a payload that does not shrink is stored as is.
    pub fn write_block(
        &mut self,
        kind: u8,
        flags: u16,
        payload: &[u8],
        how: Codec,
    ) -> io::Result<()> {
        let compressed;
        let (codec_id, stored): (u8, &[u8]) = match how {
            Codec::None => (codec::NONE, payload),
            Codec::Zstd(level) => {
                if self.zstd.is_none() {
                    self.zstd = Some(zstd::bulk::Compressor::new(level)?);
                }
                let z = self.zstd.as_mut().expect("created above");
                z.set_compression_level(level)?;
                compressed = z.compress(payload)?;
                if compressed.len() < payload.len() {
                    (codec::ZSTD, &compressed)
                } else {
                    (codec::NONE, payload)
                }
            }
        };
        let len = |n: usize| {
            u32::try_from(n).ok().filter(|&n| n <= crate::format::MAX_BLOCK_LEN).ok_or_else(|| {
                io::Error::new(io::ErrorKind::InvalidInput, "block payload over 64 MiB")
            })
        };
        let mut h = BlockHeader {
            kind,
            codec: codec_id,
            flags,
            stored_len: len(stored.len())?,
            raw_len: len(payload.len())?,
            number: self.number,
            crc: 0,
        };
        h.crc = checksum(&h.to_bytes(), stored);
        self.out.write_all(&h.to_bytes())?;
        self.out.write_all(stored)?;
        self.number += 1;
        self.bytes += (BLOCK_HEADER_LEN + stored.len()) as u64;
        Ok(())
    }

    /// Bytes written so far.
    pub fn bytes(&self) -> u64 {
        self.bytes
    }

    pub fn flush(&mut self) -> io::Result<()> {
        self.out.flush()
    }

    pub fn get_mut(&mut self) -> &mut W {
        &mut self.out
    }

    pub fn into_inner(self) -> W {
        self.out
    }
}
