//! The dump: a trace as text, one line per item (`testdata/vectors/README.md`
//! defines it). `write_dump` prints a trace; `run_script` does the reverse,
//! driving a [`TraceWriter`] from a dump with two extra directives, which is
//! how the test vectors are made:
//!
//! - `writer codec=none|zstd block_events=N` (first line): writer options;
//! - `flush`: end the current events block here;
//! - `raw_block kind=0x11 flags=1 payload=HEX`: a block of another stream.

use crate::error::TraceError;
use crate::model::{hex, End, EndReason, Event, Frame, Kind, Meta, Module, NewEvent};
use crate::reader::{Item, TraceReader};
use crate::writer::{TraceWriter, WriterOptions};
use crate::Codec;
use std::fmt::Write as _;
use std::io::{self, BufRead, Read, Write};

/// Quotes bytes the way the dump does: `\"`, `\\`, `\n`, `\t`, and `\xNN`
/// for every other byte outside printable ASCII.
pub fn quote(b: &[u8]) -> String {
    let mut s = String::with_capacity(b.len() + 2);
    s.push('"');
    for &c in b {
        match c {
            b'"' => s.push_str("\\\""),
            b'\\' => s.push_str("\\\\"),
            b'\n' => s.push_str("\\n"),
            b'\t' => s.push_str("\\t"),
            0x20..=0x7e => s.push(c as char),
            _ => {
                let _ = write!(s, "\\x{c:02x}");
            }
        }
    }
    s.push('"');
    s
}

fn opt_str(s: &Option<Vec<u8>>) -> String {
    quote(s.as_deref().unwrap_or(b""))
}

fn opt_num(n: Option<u64>) -> String {
    n.map_or("-".to_string(), |v| v.to_string())
}

/// The three `meta` lines.
pub fn meta_lines(m: &Meta) -> String {
    let endian = if m.endian == 0 { "little" } else { "big" };
    let argv: Vec<String> = m.argv.iter().map(|a| quote(a)).collect();
    format!(
        "meta pid={} ppid={} start_ns={} pointer_size={} endian={endian} time_unit_ns={} stack_depth={}\n\
         meta argv={}\n\
         meta recorder={} executable={} options={} clock={} parent_pid={}\n",
        m.pid,
        opt_num(m.ppid),
        m.start_ns,
        m.pointer_size,
        m.time_unit_ns,
        m.stack_depth,
        argv.join(" "),
        opt_str(&m.recorder),
        opt_str(&m.executable),
        opt_str(&m.options),
        opt_str(&m.clock),
        opt_num(m.parent_pid),
    )
}

/// One event line (without the newline).
pub fn event_line(e: &Event) -> String {
    let mut s = format!("event {} {} thread={} time={}", e.index, e.kind.name(), e.thread, e.time);
    if e.kind.is_release() {
        let _ = write!(s, " old={}", e.old.unwrap_or(0));
    } else if e.kind == Kind::Realloc {
        match e.old {
            Some(o) => {
                let _ = write!(s, " old={o}");
            }
            None => s.push_str(" old=null"),
        }
    }
    match (e.failed, e.id) {
        (true, _) => s.push_str(" failed"),
        (false, Some(id)) => {
            let _ = write!(s, " id={id}");
        }
        _ => {}
    }
    let _ = write!(s, " size={}", e.size);
    if e.kind.has_align() {
        let _ = write!(s, " align={}", e.align);
    }
    let _ = write!(s, " stack={}", e.stack);
    if e.inherited {
        s.push_str(" inherited");
    }
    for (i, d) in e.after.iter().flatten().enumerate() {
        let _ = write!(s, "{}{}:{}", if i == 0 { " after=" } else { "," }, d.thread, d.steps);
    }
    s
}

/// The `end` line (without the newline); version 2 adds its own fields.
pub fn end_line(e: &End, version: u16) -> String {
    let mut s = format!(
        "end reason={} status={} end_ns={} events={} objects={} unrecorded={} unknown_frees={}",
        e.reason.name(),
        e.status,
        e.end_ns,
        e.events,
        e.objects,
        e.unrecorded,
        e.unknown_frees
    );
    if version >= 2 {
        let _ = write!(s, " lost={} waited_ns={} inflight={}", e.lost, e.waited_ns, e.inflight);
    }
    s
}

fn module_line(m: &Module) -> String {
    format!(
        "module {} base={:#x} size={:#x} path={} build_id={}",
        m.id,
        m.base,
        m.size,
        quote(&m.path),
        hex(&m.build_id)
    )
}

fn stack_line(id: u32, frames: &[Frame]) -> String {
    let f: Vec<String> = frames.iter().map(|f| format!("{}:{:#x}", f.module, f.offset)).collect();
    format!("stack {id} frames={}", f.join(" "))
}

/// Writes the dump of a whole trace. On a read error, everything read before
/// it has been written, and the error is returned.
pub fn write_dump<R: Read, W: Write>(r: &mut TraceReader<R>, out: &mut W) -> Result<(), DumpError> {
    let version = r.version();
    writeln!(out, "hltrace {version}")?;
    out.write_all(meta_lines(r.meta()).as_bytes())?;
    loop {
        let item = match r.next_item() {
            Ok(Some(it)) => it,
            Ok(None) => return Ok(()),
            Err(e) => return Err(DumpError::Trace(e)),
        };
        let line = match item {
            Item::Module(m) => module_line(&m),
            Item::Stack(id) => stack_line(id, r.stack(id)),
            Item::Thread(t) => {
                let mut l = format!("thread {} tid={} name={}", t.index, t.tid, quote(&t.name));
                if let Some(d) = t.start {
                    let _ = write!(l, " start={}:{}", d.thread, d.steps);
                }
                l
            }
            Item::Event(e) => event_line(&e),
            Item::End(e) => end_line(&e, version),
            Item::Skipped { kind, bytes } => format!("skipped kind={kind:#04x} bytes={bytes}"),
        };
        writeln!(out, "{line}")?;
    }
}

/// A dump that stopped: a trace problem or an output error.
#[derive(Debug)]
pub enum DumpError {
    Trace(TraceError),
    Io(io::Error),
}

impl From<io::Error> for DumpError {
    fn from(e: io::Error) -> Self {
        DumpError::Io(e)
    }
}

impl std::fmt::Display for DumpError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            DumpError::Trace(e) => e.fmt(f),
            DumpError::Io(e) => e.fmt(f),
        }
    }
}

impl std::error::Error for DumpError {}

// ---------------------------------------------------------------- parsing

/// Splits a line into tokens at spaces outside double quotes; a token is
/// `word` or `key=value`, where a quoted value is unescaped. Bytes, not text:
/// a value may hold any byte, escaped or not.
fn tokens(b: &[u8]) -> Result<Vec<(String, Vec<u8>)>, String> {
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        if b[i] == b' ' {
            i += 1;
            continue;
        }
        let start = i;
        while i < b.len() && b[i] != b' ' && b[i] != b'=' && b[i] != b'"' {
            i += 1;
        }
        let key = String::from_utf8_lossy(&b[start..i]).into_owned();
        if i < b.len() && b[i] == b'=' {
            i += 1;
        }
        let mut val = Vec::new();
        if i < b.len() && b[i] == b'"' {
            i += 1;
            loop {
                let Some(&c) = b.get(i) else { return Err("unterminated string".into()) };
                i += 1;
                match c {
                    b'"' => break,
                    b'\\' => {
                        let Some(&e) = b.get(i) else { return Err("dangling backslash".into()) };
                        i += 1;
                        match e {
                            b'n' => val.push(b'\n'),
                            b't' => val.push(b'\t'),
                            b'x' => {
                                let h = b
                                    .get(i..i + 2)
                                    .and_then(|h| std::str::from_utf8(h).ok())
                                    .ok_or("short \\x escape")?;
                                val.push(u8::from_str_radix(h, 16).map_err(|_| "bad \\x escape")?);
                                i += 2;
                            }
                            other => val.push(other),
                        }
                    }
                    c => val.push(c),
                }
            }
        } else {
            let s = i;
            while i < b.len() && b[i] != b' ' {
                i += 1;
            }
            val.extend_from_slice(&b[s..i]);
        }
        out.push((key, val));
    }
    Ok(out)
}

struct Fields(Vec<(String, Vec<u8>)>);

impl Fields {
    fn get(&self, k: &str) -> Option<&[u8]> {
        self.0.iter().find(|(key, _)| key == k).map(|(_, v)| v.as_slice())
    }
    fn has(&self, k: &str) -> bool {
        self.0.iter().any(|(key, _)| key == k)
    }
    fn bytes(&self, k: &str) -> Result<Vec<u8>, String> {
        Ok(self.get(k).ok_or(format!("missing {k}="))?.to_vec())
    }
    fn str(&self, k: &str) -> Result<String, String> {
        Ok(String::from_utf8_lossy(self.get(k).ok_or(format!("missing {k}="))?).into_owned())
    }
    fn opt_bytes(&self, k: &str) -> Option<Vec<u8>> {
        self.get(k).filter(|v| !v.is_empty()).map(|v| v.to_vec())
    }
    fn num(&self, k: &str) -> Result<u64, String> {
        parse_num(&self.str(k)?).ok_or(format!("{k}= is not a number"))
    }
    fn opt_num(&self, k: &str) -> Result<Option<u64>, String> {
        match self.str(k)?.as_str() {
            "-" => Ok(None),
            s => parse_num(s).map(Some).ok_or(format!("{k}= is not a number")),
        }
    }
}

fn parse_num(s: &str) -> Option<u64> {
    match s.strip_prefix("0x") {
        Some(h) => u64::from_str_radix(h, 16).ok(),
        None => s.parse().ok(),
    }
}

fn unhex(s: &str) -> Result<Vec<u8>, String> {
    let b = s.as_bytes();
    if !b.len().is_multiple_of(2) {
        return Err("odd number of hex digits".into());
    }
    b.chunks(2)
        .map(|h| {
            std::str::from_utf8(h)
                .ok()
                .and_then(|h| u8::from_str_radix(h, 16).ok())
                .ok_or_else(|| "bad hex".to_string())
        })
        .collect()
}

/// The longest line a script or dump may have (a command line of 2 MiB,
/// every byte escaped, fits).
pub const MAX_SCRIPT_LINE: usize = 16 << 20;

/// Builds a trace from a script (a dump plus the writer directives) and
/// returns its bytes. Errors name the script line.
pub fn run_script(script: &str) -> Result<Vec<u8>, String> {
    run_script_to(script.as_bytes(), Vec::new()).map(into_bytes)
}

/// [`run_script`] from any source to any sink, line by line: memory holds
/// one line and the writer's state (the live objects), whatever the input.
/// The trace is left unfinished when the script has no `end` line.
pub fn run_script_to<R: BufRead, W: Write>(mut src: R, out: W) -> Result<TraceWriter<W>, String> {
    let mut opts = WriterOptions { codec: Codec::None, block_events: 65536 };
    let mut meta = Meta::default();
    let mut meta_lines_seen = 0;
    let mut w: Option<TraceWriter<W>> = None;
    let mut out = Some(out);
    let mut buf = Vec::new();
    let mut n = 0usize;
    loop {
        buf.clear();
        let got = (&mut src)
            .take(MAX_SCRIPT_LINE as u64 + 1)
            .read_until(b'\n', &mut buf)
            .map_err(|e| format!("script line {}: read error: {e}", n + 1))?;
        if got == 0 {
            break;
        }
        n += 1;
        let ctx = |m: String| format!("script line {n}: {m}");
        if buf.len() > MAX_SCRIPT_LINE {
            return Err(ctx(format!("longer than {MAX_SCRIPT_LINE} bytes")));
        }
        let mut line: &[u8] = &buf;
        while let Some((&last, rest)) = line.split_last() {
            if last.is_ascii_whitespace() {
                line = rest;
            } else {
                break;
            }
        }
        if line.is_empty() || line[0] == b'#' {
            continue;
        }
        let toks = tokens(line).map_err(ctx)?;
        let word = toks[0].0.clone();
        let f = Fields(toks);
        if word == "meta" {
            meta_lines_seen += 1;
            match meta_lines_seen {
                1 => {
                    meta.pid = f.num("pid").map_err(ctx)?;
                    meta.ppid = f.opt_num("ppid").map_err(ctx)?;
                    meta.start_ns = f.num("start_ns").map_err(ctx)?;
                    meta.pointer_size = f.num("pointer_size").map_err(ctx)?;
                    meta.endian = u64::from(f.str("endian").map_err(ctx)? == "big");
                    meta.time_unit_ns = f.num("time_unit_ns").map_err(ctx)?;
                    meta.stack_depth = f.num("stack_depth").map_err(ctx)?;
                }
                2 => {
                    // `meta argv="a" "b"`: the first value is keyed, the rest are bare.
                    meta.argv = if line == b"meta argv=" {
                        Vec::new()
                    } else {
                        f.0.iter().skip(1).map(|(_, v)| v.clone()).collect()
                    };
                }
                _ => {
                    meta.recorder = f.opt_bytes("recorder");
                    meta.executable = f.opt_bytes("executable");
                    meta.options = f.opt_bytes("options");
                    meta.clock = f.opt_bytes("clock");
                    meta.parent_pid = f.opt_num("parent_pid").map_err(ctx)?;
                }
            }
            continue;
        }
        match word.as_str() {
            "hltrace" => continue,
            "writer" => {
                if let Some(c) = f.get("codec") {
                    opts.codec = if c == b"zstd" { Codec::Zstd(3) } else { Codec::None };
                }
                if f.has("block_events") {
                    opts.block_events = f.num("block_events").map_err(ctx)? as usize;
                }
                continue;
            }
            _ => {}
        }
        if w.is_none() {
            let o = out.take().expect("the writer is made once");
            w = Some(TraceWriter::new(o, &meta, opts).map_err(|e| ctx(e.to_string()))?);
        }
        let wr = w.as_mut().expect("created above");
        let io = |e: io::Error| ctx(e.to_string());
        match word.as_str() {
            "module" => {
                let m = Module {
                    id: 0,
                    base: f.num("base").map_err(ctx)?,
                    size: f.num("size").map_err(ctx)?,
                    path: f.bytes("path").map_err(ctx)?,
                    build_id: unhex(&f.str("build_id").map_err(ctx)?).map_err(ctx)?,
                };
                wr.add_module(&m);
            }
            "thread" => {
                wr.add_thread(f.num("tid").map_err(ctx)?, f.bytes("name").map_err(ctx)?);
            }
            "stack" => {
                let mut frames = Vec::new();
                for (k, v) in f.0.iter().skip(2) {
                    let s = if k == "frames" {
                        String::from_utf8_lossy(v).into_owned()
                    } else {
                        k.clone()
                    };
                    let bad = || ctx(format!("bad frame {}", crate::rep::excerpt(s.as_bytes())));
                    let (m, o) = s.split_once(':').ok_or_else(bad)?;
                    frames.push(Frame {
                        module: m.parse().map_err(|_| bad())?,
                        offset: parse_num(o).ok_or_else(bad)?,
                    });
                }
                wr.intern_stack(&frames).map_err(io)?;
            }
            "event" => {
                let kind = Kind::from_name(&f.0.get(2).ok_or_else(|| ctx("no kind".into()))?.0)
                    .ok_or_else(|| ctx("unknown kind".into()))?;
                let old = match f.get("old") {
                    None | Some(b"null") => None,
                    Some(_) => Some(f.num("old").map_err(ctx)?),
                };
                let ev = NewEvent {
                    kind,
                    thread: f.num("thread").map_err(ctx)? as u32,
                    time: f.num("time").map_err(ctx)?,
                    size: if kind.is_release() { 0 } else { f.num("size").map_err(ctx)? },
                    align: if kind.has_align() { f.num("align").map_err(ctx)? } else { 0 },
                    old,
                    stack: f.num("stack").map_err(ctx)? as u32,
                    failed: f.has("failed"),
                    inherited: f.has("inherited"),
                };
                let id = wr.record(&ev).map_err(io)?;
                if f.has("id") && id != Some(f.num("id").map_err(ctx)?) {
                    let got = id.map_or("none".to_string(), |i| i.to_string());
                    return Err(ctx(format!(
                        "the line says id={}, the writer assigned {got}",
                        f.str("id").map_err(ctx)?
                    )));
                }
            }
            "flush" => wr.flush().map_err(io)?,
            "raw_block" => {
                let kind = f.num("kind").map_err(ctx)? as u8;
                let flags = f.num("flags").map_err(ctx)? as u16;
                let payload = unhex(&f.str("payload").map_err(ctx)?).map_err(ctx)?;
                wr.write_raw_block(kind, flags, &payload).map_err(io)?;
            }
            "end" => {
                let reason = match f.str("reason").map_err(ctx)?.as_str() {
                    "exit" => EndReason::Exit,
                    "exec" => EndReason::Exec,
                    "signal" => EndReason::Signal,
                    "closed" => EndReason::Closed,
                    s => EndReason::Other(s.parse().map_err(|_| {
                        ctx(format!("bad reason {}", crate::rep::excerpt(s.as_bytes())))
                    })?),
                };
                let e = End {
                    reason,
                    status: f.num("status").map_err(ctx)?,
                    end_ns: f.num("end_ns").map_err(ctx)?,
                    events: 0,
                    objects: 0,
                    unrecorded: f.num("unrecorded").map_err(ctx)?,
                    unknown_frees: f.num("unknown_frees").map_err(ctx)?,
                    ..End::default()
                };
                wr.write_end(&e).map_err(io)?;
            }
            "skipped" => {}
            other => {
                return Err(ctx(format!(
                    "unknown line kind {}",
                    crate::rep::excerpt(other.as_bytes())
                )))
            }
        }
    }
    let mut w = match w {
        Some(w) => w,
        None => {
            let o = out.take().expect("the writer is made once");
            TraceWriter::new(o, &meta, opts).map_err(|e| e.to_string())?
        }
    };
    w.flush().map_err(|e| e.to_string())?;
    Ok(w)
}

fn into_bytes(w: TraceWriter<Vec<u8>>) -> Vec<u8> {
    w.into_inner_unfinished()
}
