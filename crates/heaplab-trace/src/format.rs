//! Constants of the trace format (versions 1 and 2), exactly as
//! `docs/trace-format.md` names them.

/// The first 8 bytes of every trace.
pub const FILE_MAGIC: [u8; 8] = *b"HLTRACE\0";
/// The format version this crate writes (the recording agent writes 2).
pub const VERSION: u16 = 1;
/// The newest version this crate reads (it reads 1 and 2).
pub const VERSION_MAX: u16 = 2;
/// Size of the file header in bytes.
pub const FILE_HEADER_LEN: usize = 16;
/// The first 4 bytes of every block header.
pub const BLOCK_MAGIC: [u8; 4] = *b"HLBK";
/// Size of a block header in bytes.
pub const BLOCK_HEADER_LEN: usize = 24;
/// Largest stored or raw block payload a reader accepts (64 MiB).
pub const MAX_BLOCK_LEN: u32 = 64 << 20;
/// Largest number of events in one events block.
pub const MAX_BLOCK_EVENTS: u64 = 1 << 20;
/// Largest number of frames in one stack.
pub const MAX_FRAMES: u64 = 256;

/// Block flag: a reader that does not know the block's kind may skip it.
pub const BLOCK_SKIPPABLE: u16 = 1;
/// The flags a block may carry; any other bit is a format error.
pub const BLOCK_FLAGS_KNOWN: u16 = BLOCK_SKIPPABLE;

/// Stream kinds (the `kind` byte of a block header).
pub mod kind {
    pub const META: u8 = 0x01;
    pub const MODULES: u8 = 0x02;
    pub const STACKS: u8 = 0x03;
    pub const THREADS: u8 = 0x04;
    pub const EVENTS: u8 = 0x05;
    pub const END: u8 = 0x06;
    /// Version 2: a fork child's objects inherited from its parent.
    pub const INHERITED: u8 = 0x07;
    /// Reserved for the data-reference stream of a later version.
    pub const REFS: u8 = 0x10;
    /// The stack depth at each allocation (`sp.rs`), always skippable.
    pub const SP: u8 = 0x11;

    /// The stream's name, for messages.
    pub fn name(k: u8) -> &'static str {
        match k {
            META => "META",
            MODULES => "MODULES",
            STACKS => "STACKS",
            THREADS => "THREADS",
            EVENTS => "EVENTS",
            END => "END",
            INHERITED => "INHERITED",
            REFS => "REFS",
            SP => "SP",
            _ => "unknown",
        }
    }
}

/// Block codecs.
pub mod codec {
    pub const NONE: u8 = 0;
    pub const ZSTD: u8 = 1;
}

/// Bits of the op byte above the 4-bit kind.
pub mod op {
    pub const KIND_MASK: u8 = 0x0f;
    pub const FAILED: u8 = 0x10;
    pub const OLD_NULL: u8 = 0x20;
    pub const HAS_STACK: u8 = 0x40;
    pub const INHERITED: u8 = 0x80;
}

/// Keys of the META block.
pub mod meta_key {
    pub const PID: u64 = 1;
    pub const PPID: u64 = 2;
    pub const ARGV: u64 = 3;
    pub const START_NS: u64 = 4;
    pub const POINTER_SIZE: u64 = 5;
    pub const ENDIAN: u64 = 6;
    pub const TIME_UNIT_NS: u64 = 7;
    pub const STACK_DEPTH: u64 = 8;
    pub const RECORDER: u64 = 9;
    pub const EXECUTABLE: u64 = 10;
    pub const OPTIONS: u64 = 11;
    pub const PARENT_PID: u64 = 12;
    pub const CLOCK: u64 = 13;
}

/// Keys of the END block.
pub mod end_key {
    pub const REASON: u64 = 1;
    pub const STATUS: u64 = 2;
    pub const END_NS: u64 = 3;
    pub const EVENTS: u64 = 4;
    pub const OBJECTS: u64 = 5;
    pub const UNRECORDED: u64 = 6;
    pub const UNKNOWN_FREES: u64 = 7;
    /// Version 2: events lost, time waited, threads inside a hook, bytes of rows.
    pub const LOST: u64 = 8;
    pub const WAITED_NS: u64 = 9;
    pub const INFLIGHT: u64 = 10;
    pub const ROW_BYTES: u64 = 11;
}
