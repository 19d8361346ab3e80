//! Record mode: the tool's raw stream becomes a trace with a REFS stream.
//!
//! ```text
//!   raw records ──▶ Converter ──(channel)──▶ writer thread: TraceWriter (events, modules,
//!                      │  HeapMap: address ─▶ (object id, offset)         stacks, threads,
//!                      └▶ RefsEncoder ──▶ REFS payloads ──(channel)──▶     REFS blocks; zstd)
//! ```
//!
//! Reading, attributing and encoding run on one thread, compression and
//! writing on another, so a machine with a core to spare overlaps them with
//! the program running under Valgrind.
//!
//! The tool sends every block it hands out (ALLOC) and takes back (FREE) in
//! execution order, interleaved with the references, so the converter always
//! knows which blocks are live when a reference arrives: attribution is exact,
//! also for blocks freed and then reused at the same address.
//!
//! This file runs the recording (the tool under Valgrind, its stream read
//! from the shared ring, [`record`]); the conversion is `convert.rs`
//! ([`Converter`] and the writer thread), the ring `ring.rs` ([`Ring`]).

mod convert;
mod ring;

pub use convert::Converter;
pub use ring::{Ring, RING_SEGMENTS, RING_SEGMENT_BYTES};

use crate::vg::{self, Ended, Scratch, VgTools};
use anyhow::{bail, Context, Result};
use heaplab_plumb::output::OutputFile;
use heaplab_trace::refs::RefsStats;
use heaplab_trace::Codec;
use std::ffi::OsString;
use std::fs::File;
use std::io::{BufWriter, Read, Write};
use std::path::Path;

/// How to record.
#[derive(Debug, Clone)]
pub struct Options {
    /// Frames per allocation stack (0: none).
    pub stack_depth: u32,
    /// Stacks for frees too.
    pub free_stacks: bool,
    /// Stream loads and stores (else: events only, timed in instructions).
    pub refs: bool,
    pub codec: Codec,
    /// How REFS blocks are stored: zstd level 1 by default, about twice as
    /// fast as level 3 for a fifth more bytes (references are most of the work).
    pub refs_codec: Codec,
    /// Events per events block.
    pub block_events: usize,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            stack_depth: 8,
            free_stacks: false,
            refs: true,
            codec: Codec::Zstd(3),
            refs_codec: Codec::Zstd(1),
            block_events: 65536,
        }
    }
}

/// What a recording produced.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct Summary {
    pub events: u64,
    pub objects: u64,
    pub refs: RefsStats,
    /// Bytes of the trace file.
    pub trace_bytes: u64,
    /// Bytes of REFS payload before compression, and as stored.
    pub refs_raw_bytes: u64,
    /// Bytes the tool sent.
    pub stream_bytes: u64,
    /// Instructions of the program (END record), when it ended normally.
    pub instructions: Option<u64>,
    pub unknown_frees: u64,
    /// The program called execve: the trace ends there.
    pub exec: bool,
    /// Times that ran backwards (none expected) and were raised.
    pub raised_times: u64,
}
/// Runs `command` under the tool and writes its trace with references to
/// `out`. Returns how the program ended and what was recorded.
pub fn record(
    tools: &VgTools,
    command: &[OsString],
    out: &Path,
    opts: &Options,
) -> Result<(Ended, Summary)> {
    if command.is_empty() {
        bail!("no program to record");
    }
    tools.check("heaplab")?;
    let scratch = Scratch::new("record")?;
    let fifo = scratch.fifo("raw")?;
    let ack = scratch.fifo("ack")?;
    let ring = Ring::create(RING_SEGMENTS, RING_SEGMENT_BYTES)?;
    let mut extra = vec![
        format!("--hl-stack-depth={}", opts.stack_depth),
        format!("--hl-free-stacks={}", if opts.free_stacks { "yes" } else { "no" }),
        format!("--hl-refs={}", if opts.refs { "yes" } else { "no" }),
        format!("--hl-ring={}", ring.path.display()),
        format!("--hl-ack={}", ack.display()),
    ];
    if let Ok(e) = std::env::var("HEAPLAB_VALGRIND_OPTS") {
        extra.extend(e.split_whitespace().map(String::from));
    }
    let cmd = vg::command(tools, "heaplab", &fifo, &extra, command);
    // Written beside `out` and renamed into place (never through a link),
    // 0600: a trace holds command lines and paths.
    let file = OutputFile::create_mode(out, 0o600)?;
    let argv: Vec<Vec<u8>> = command.iter().map(|a| a.as_encoded_bytes().to_vec()).collect();
    let exe = vg::resolve_program(&command[0]).map(|p| p.into_os_string().into_encoded_bytes());
    let conv = Converter::new(BufWriter::with_capacity(1 << 20, file), argv, exe, opts.clone());
    let (ended, res) = vg::run_with_fifo(cmd, &fifo, move |f| {
        let mut conv = conv;
        let r = consume_ring(&mut conv, f, &ring, &ack);
        (conv, r)
    })?;
    let (conv, fed) = res;
    if let Err(e) = fed {
        // keep what was written readable up to here
        if let Ok((w, _)) = conv.finish(ended) {
            if let Ok(f) = w.into_inner() {
                let _ = f.commit();
            }
        }
        return Err(e.context("reading the tool's stream"));
    }
    let (w, mut summary) =
        conv.finish(ended).with_context(|| format!("recording {}", vg::show(command)))?;
    w.into_inner().map_err(|e| e.into_error()).context("writing the trace")?.commit()?;
    summary.trace_bytes = std::fs::metadata(out).map(|m| m.len()).unwrap_or(0);
    Ok((ended, summary))
}
/// Reads segment tokens from `tokens`, decodes each segment, acknowledges it.
fn consume_ring<W: Write + Send + 'static>(
    conv: &mut Converter<W>,
    mut tokens: File,
    ring: &Ring,
    ack: &Path,
) -> Result<u64> {
    // read-write, so that this open never waits for the tool (which opens it to read)
    let mut acks = std::fs::OpenOptions::new().read(true).write(true).open(ack)?;
    let mut t = [0u8; 16];
    let mut total = 0u64;
    loop {
        match tokens.read_exact(&mut t) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => break,
            Err(e) => return Err(e.into()),
        }
        let seg = u64::from_le_bytes(t[..8].try_into().expect("8 bytes"));
        let bytes = u64::from_le_bytes(t[8..].try_into().expect("8 bytes"));
        conv.feed_segment(ring.segment(seg, bytes)?)?;
        total += bytes;
        acks.write_all(&seg.to_le_bytes())?;
    }
    Ok(total)
}
