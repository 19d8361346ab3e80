//! `heaplab convert IN OUT`: between heaplab traces and the text formats
//! allocator courses use, chosen by file extension.

use crate::human;
use anyhow::{bail, Context, Result};
use heaplab_plumb::output::OutputFile;
use heaplab_plumb::scratch::ScratchDir;
use heaplab_trace::dump::{run_script_to, write_dump};
use heaplab_trace::rep::{self, TextFormat};
use heaplab_trace::{Codec, Item, NewEvent, TraceReader, TraceWriter, WriterOptions};
use std::fs::File;
use std::io::{BufReader, BufWriter, Write};
use std::path::{Path, PathBuf};

/// An output being written under a temporary name beside it
/// (`heaplab_plumb::output`), buffered; it appears only on `commit`.
struct OutFile(BufWriter<OutputFile>);

impl OutFile {
    fn create(dest: &Path, mode: u32) -> Result<OutFile> {
        Ok(OutFile(BufWriter::with_capacity(1 << 20, OutputFile::create_mode(dest, mode)?)))
    }
    fn writer(&mut self) -> &mut BufWriter<OutputFile> {
        &mut self.0
    }
    fn flush(&mut self) -> Result<()> {
        self.0.flush().context("writing the output")
    }
    fn commit(self) -> Result<()> {
        self.0.into_inner().map_err(|e| e.into_error())?.commit()
    }
}

/// Convert between trace formats, chosen by file extension:
///
///   .hltrace   a heaplab trace (docs/trace-format.md)
///   .rep       malloc-lab trace: 4-line header, then `a id size`, `f id`, `r id size`
///   .script    the same operations with # comments and no header
///   .txt       the dump: every item of a trace as a line of text (and back)
///
/// and from a trace to the exports of `heaplab export`: .folded (folded
/// stacks), .pprof or .pb.gz (pprof), .perfetto.json or .chrome.json (Chrome
/// trace events), massif.out.* (massif), .svg (a flame graph of the peak).
///
/// Bytes are kept exactly through every form (paths, names and arguments
/// that are not UTF-8 included). OUTPUT is written under a temporary name
/// beside it and renamed when complete: after an error nothing is left
/// behind (see --partial).
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
    /// When the input is damaged, still write what was read before the
    /// problem (the exit status is 1 all the same). Without it, OUTPUT is
    /// written whole or not at all.
    #[arg(long)]
    partial: bool,
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
            "cannot tell the format of {} from its extension; use .hltrace, .rep, .script or .txt (from a trace also .folded, .pprof, .pb.gz, .perfetto.json, .svg or massif.out.*)",
            p.display()
        ),
    }
}

/// How a conversion stopped: a problem in the input (what was readable
/// before it is kept only with `--partial`), or any other error.
enum Stop {
    Input(String),
    Other(anyhow::Error),
}

impl<E: Into<anyhow::Error>> From<E> for Stop {
    fn from(e: E) -> Self {
        Stop::Other(e.into())
    }
}

pub fn run(a: Args) -> Result<i32> {
    if crate::cmd::export::format_of(&a.output).is_some() && fmt_of(&a.input)? == Fmt::Trace {
        // where the memory goes, in another tool's format (heaplab export)
        return crate::cmd::export::convert(a.input, a.output);
    }
    let (from, to) = (fmt_of(&a.input)?, fmt_of(&a.output)?);
    let opts = WriterOptions {
        codec: if a.no_compress { Codec::None } else { Codec::Zstd(3) },
        ..WriterOptions::default()
    };
    let input_name = human::escaped(&a.input.display().to_string());
    // a pipe or FIFO is read once, into a private file
    let (input, _spool) = heaplab_plumb::input::prepare_one(&a.input)?;
    // traces hold command lines and paths: 0600
    let mode = if to == Fmt::Trace { 0o600 } else { 0o644 };
    let mut out = OutFile::create(&a.output, mode)?;
    let result = convert(&a, &input, from, to, opts, &mut out);
    match result {
        Ok(()) => {
            out.commit()?;
            Ok(0)
        }
        Err(Stop::Other(e)) => Err(e),
        Err(Stop::Input(msg)) => {
            eprintln!("heaplab convert: {msg}");
            let shown = human::escaped(&a.output.display().to_string());
            if a.partial {
                out.commit()?;
                eprintln!(
                    "heaplab convert: {shown} holds what was read before that point (--partial)"
                );
            } else {
                eprintln!(
                    "heaplab convert: {shown} not written (--partial keeps what {input_name} held before the problem)"
                );
            }
            Ok(1)
        }
    }
}

/// Text inputs become a trace in a scratch file beside the output (removed
/// afterwards) unless a trace is what was asked for; then the trace is read
/// and converted. Everything streams: memory holds the live objects, not the file.
fn convert(
    a: &Args,
    input: &Path,
    from: Fmt,
    to: Fmt,
    opts: WriterOptions,
    out: &mut OutFile,
) -> Result<(), Stop> {
    let open = |p: &Path| -> Result<BufReader<File>, Stop> {
        let f = File::open(p).with_context(|| format!("cannot read {}", p.display()))?;
        Ok(BufReader::with_capacity(1 << 20, f))
    };
    let at =
        |e: String| Stop::Input(format!("{}: {e}", human::escaped(&a.input.display().to_string())));
    let text_format = |f: Fmt| if f == Fmt::Rep { TextFormat::Rep } else { TextFormat::Script };
    match from {
        Fmt::Trace => {
            let mut r = TraceReader::open(input).map_err(|e| Stop::Input(e.to_string()))?;
            convert_from_trace(&mut r, to, out, opts)
        }
        Fmt::Rep | Fmt::Script | Fmt::Dump => {
            // A text to anything but a trace goes through a trace in a
            // private scratch directory first.
            let scratch = if to == Fmt::Trace { None } else { Some(ScratchDir::new("convert")?) };
            let mut mid = match &scratch {
                Some(d) => Some(OutFile::create(&d.join("mid.hltrace"), 0o600)?),
                None => None,
            };
            let sink: &mut OutFile = match mid.as_mut() {
                Some(m) => m,
                None => out,
            };
            match from {
                Fmt::Dump => {
                    let w = run_script_to(open(input)?, sink.writer()).map_err(at)?;
                    w.into_inner_unfinished();
                }
                _ => {
                    use std::os::unix::ffi::OsStrExt;
                    let (_, summary) = rep::text_to_trace(
                        open(input)?,
                        text_format(from),
                        a.input.as_os_str().as_bytes(),
                        sink.writer(),
                        opts,
                    )
                    .map_err(|e| at(e.to_string()))?;
                    for n in &summary.notes {
                        eprintln!(
                            "heaplab convert: {}: note: {n}",
                            human::escaped(&a.input.display().to_string())
                        );
                    }
                }
            }
            sink.flush()?;
            if let (Some(m), Some(d)) = (mid, &scratch) {
                m.commit()?;
                let mut r = TraceReader::open(d.join("mid.hltrace"))
                    .map_err(|e| Stop::Input(e.to_string()))?;
                convert_from_trace(&mut r, to, out, opts)?;
            }
            Ok(())
        }
    }
}

fn convert_from_trace<R: std::io::Read>(
    r: &mut TraceReader<R>,
    to: Fmt,
    out: &mut OutFile,
    opts: WriterOptions,
) -> Result<(), Stop> {
    let result = match to {
        Fmt::Dump => write_dump(r, out.writer()).map_err(|e| e.to_string()),
        Fmt::Rep | Fmt::Script => {
            let tf = if to == Fmt::Rep { TextFormat::Rep } else { TextFormat::Script };
            // A .rep header holds counts known only at the end: the body goes
            // to a scratch file beside the output first.
            let scratch = ScratchDir::new("convert")?;
            let body_path = scratch.join("body");
            let mut body = OutFile::create(&body_path, 0o600)?;
            match rep::trace_to_text(r, tf, body.writer()) {
                Ok((head, losses)) => {
                    body.commit()?;
                    out.writer().write_all(head.as_bytes())?;
                    std::io::copy(&mut File::open(&body_path)?, out.writer())?;
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
                Err(heaplab_trace::dump::DumpError::Io(e)) => return Err(Stop::Other(e.into())),
                Err(e) => Err(e.to_string()),
            }
        }
        Fmt::Trace => rewrite(r, out.writer(), opts),
    };
    out.flush()?;
    result.map_err(Stop::Input)
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
