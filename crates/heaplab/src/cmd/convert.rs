//! `heaplab convert IN OUT`: between heaplab traces and the text formats
//! allocator courses use, chosen by file extension.

use anyhow::{bail, Context, Result};
use heaplab_plumb::output::OutputFile;
use heaplab_trace::dump::{run_script, write_dump};
use heaplab_trace::rep::{self, TextFormat};
use heaplab_trace::{Codec, Item, NewEvent, TraceReader, TraceWriter, WriterOptions};
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

/// Convert between trace formats, chosen by file extension:
///
///   .hltrace   a heaplab trace (docs/trace-format.md)
///   .rep       malloc-lab trace: 4-line header, then `a id size`, `f id`, `r id size`
///   .script    the same operations with # comments and no header
///   .txt       the dump: every item of a trace as a line of text (and back)
#[derive(clap::Args)]
#[command(verbatim_doc_comment)]
pub struct Args {
    /// The file to read.
    input: PathBuf,
    /// The file to write.
    output: PathBuf,
    /// Write trace blocks uncompressed (default: zstd).
    #[arg(long)]
    no_compress: bool,
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Fmt {
    Trace,
    Rep,
    Script,
    Dump,
}

fn fmt_of(p: &Path) -> Result<Fmt> {
    match p.extension().and_then(|e| e.to_str()) {
        Some("hltrace") => Ok(Fmt::Trace),
        Some("rep") => Ok(Fmt::Rep),
        Some("script") => Ok(Fmt::Script),
        Some("txt") => Ok(Fmt::Dump),
        _ => bail!(
            "cannot tell the format of {} from its extension; use .hltrace, .rep, .script or .txt",
            p.display()
        ),
    }
}

pub fn run(a: Args) -> Result<i32> {
    let (from, to) = (fmt_of(&a.input)?, fmt_of(&a.output)?);
    let opts = WriterOptions {
        codec: if a.no_compress { Codec::None } else { Codec::Zstd(3) },
        ..WriterOptions::default()
    };
    // a pipe or FIFO is read once, into a private file
    let (input, _spool) = heaplab_plumb::input::prepare_one(&a.input)?;
    let read_text = |p: &Path| {
        std::fs::read_to_string(p).with_context(|| format!("cannot read {}", p.display()))
    };

    // Text inputs become a trace in memory first.
    let trace_bytes: Option<Vec<u8>> = match from {
        Fmt::Trace => None,
        Fmt::Rep | Fmt::Script => {
            let tf = if from == Fmt::Rep { TextFormat::Rep } else { TextFormat::Script };
            let ops = rep::parse(&read_text(&input)?, tf)
                .map_err(|e| anyhow::anyhow!("{}: {e}", a.input.display()))?;
            Some(
                rep::ops_to_trace(&ops, &a.input.display().to_string(), Vec::new(), opts)
                    .map_err(|e| anyhow::anyhow!("{}: {e}", a.input.display()))?,
            )
        }
        Fmt::Dump => Some(
            run_script(&read_text(&input)?)
                .map_err(|e| anyhow::anyhow!("{}: {e}", a.input.display()))?,
        ),
    };
    let code = match &trace_bytes {
        Some(b) => {
            if to == Fmt::Trace {
                heaplab_plumb::output::write(&a.output, b)?;
                0
            } else {
                let mut r = TraceReader::new(&b[..], &a.input)?;
                convert_from_trace(&mut r, to, &a.output, opts)?
            }
        }
        None => {
            let mut r = TraceReader::open(&input)?;
            convert_from_trace(&mut r, to, &a.output, opts)?
        }
    };
    Ok(code)
}

fn convert_from_trace<R: std::io::Read>(
    r: &mut TraceReader<R>,
    to: Fmt,
    out: &Path,
    opts: WriterOptions,
) -> Result<i32> {
    // written beside `out` and renamed into place (never through a link)
    let mut f = BufWriter::new(OutputFile::create(out)?);
    let result = match to {
        Fmt::Dump => write_dump(r, &mut f).map_err(|e| e.to_string()),
        Fmt::Rep | Fmt::Script => {
            let tf = if to == Fmt::Rep { TextFormat::Rep } else { TextFormat::Script };
            match rep::trace_to_text(r, tf) {
                Ok((text, losses)) => {
                    f.write_all(text.as_bytes())?;
                    if losses.kinds_flattened > 0 {
                        eprintln!(
                            "heaplab convert: {} calloc/memalign-family calls written as plain `a` (alignment is lost)",
                            losses.kinds_flattened
                        );
                    }
                    if losses.failed_dropped > 0 {
                        eprintln!(
                            "heaplab convert: {} failed calls dropped (the format cannot say them)",
                            losses.failed_dropped
                        );
                    }
                    if losses.threads > 0 {
                        eprintln!(
                            "heaplab convert: {} threads merged into one sequence",
                            losses.threads + 1
                        );
                    }
                    Ok(())
                }
                Err(e) => Err(e.to_string()),
            }
        }
        Fmt::Trace => rewrite(r, f.get_mut(), opts),
    };
    f.into_inner().map_err(|e| e.into_error())?.commit()?;
    match result {
        Ok(()) => Ok(0),
        Err(e) => {
            eprintln!("heaplab convert: {e}");
            eprintln!("heaplab convert: {} holds what was read before that point", out.display());
            Ok(1)
        }
    }
}

/// Re-encodes a trace (e.g. to compress or uncompress it), item by item.
fn rewrite<R: std::io::Read, W: Write>(
    r: &mut TraceReader<R>,
    out: &mut W,
    opts: WriterOptions,
) -> Result<(), String> {
    let mut w = TraceWriter::new(out, &r.meta().clone(), opts).map_err(|e| e.to_string())?;
    let io = |e: std::io::Error| e.to_string();
    loop {
        match r.next_item() {
            Ok(Some(Item::Module(m))) => {
                w.add_module(&m);
            }
            Ok(Some(Item::Stack(id))) => {
                w.intern_stack(r.stack(id)).map_err(io)?;
            }
            Ok(Some(Item::Thread(t))) => {
                w.add_thread(t.tid, &t.name);
            }
            Ok(Some(Item::Event(e))) => {
                let ne = NewEvent {
                    kind: e.kind,
                    thread: e.thread,
                    time: e.time,
                    size: if e.kind.is_release() { 0 } else { e.size },
                    align: e.align,
                    old: e.old,
                    stack: e.stack,
                    failed: e.failed,
                    inherited: e.inherited,
                };
                w.record(&ne).map_err(io)?;
            }
            Ok(Some(Item::End(e))) => w.write_end(&e).map_err(io)?,
            Ok(Some(Item::Skipped { .. })) => {}
            Ok(None) => {
                w.into_inner_unfinished();
                return Ok(());
            }
            Err(e) => {
                w.flush().map_err(io)?;
                return Err(e.to_string());
            }
        }
    }
}
