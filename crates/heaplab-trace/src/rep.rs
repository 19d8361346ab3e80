//! The text formats that allocator courses use, and conversion to and from
//! traces.
//!
//! Both hold operations `a ID SIZE` (allocate), `f ID` (free), `r ID SIZE`
//! (realloc). IDs are the trace file's own names for blocks.
//!
//! - `.rep` (the CS:APP and CMU 15-213 malloc labs): a header of four
//!   integers, then the operations. The four are `heap-size ids ops weight`
//!   (CS:APP, 2002), `weight ids ops ignore-ranges` (15-213, 2016) or `weight
//!   ids ops peak-bytes` (15-213, 2022); in every variant the second is the
//!   number of ids and the third the number of operations, which is all a
//!   reader needs.
//! - `.script`: the same operations with `#` comments (whole-line or
//!   trailing) and no header.
//!
//! The reader reads what the course drivers (`mdriver`) read, and notes
//! where a file deviates instead of refusing it:
//!
//! | the file has | `mdriver` | heaplab |
//! |---|---|---|
//! | more operations than the header says | stops at the header's count | the same, with a note |
//! | fewer operations than the header says | fails an assertion | reads them all, with a note |
//! | `a ID` without a size | `fscanf("%u %u")` leaves the previous size | the previous size, with a note |
//! | `f -1` | `free(NULL)` (15-213) | left out (a trace holds no `free(NULL)`), with a note |
//! | ids at or past the header's id count, sparse ids | indexes its table with them | any id, with a note when past the count |
//! | `r ID 0` on a live block | `realloc(p, 0)`: the block is freed, NULL returned | the same (`realloc_free`) |
//! | `r` on a block that is not allocated | `realloc(NULL, n)` (its table starts NULL) | the same |
//! | `f` on a block that is not allocated | `free(NULL)` or a stale pointer | left out, with a note |
//! | `a` on a live block | overwrites its pointer: the old block leaks | the same, with a note |
//! | an operation word like `alloc` | reads its first letter | the same, with a note |
//! | the header's numbers on one line | `fscanf` reads across lines | the same |
//!
//! Operations and header numbers are read as whitespace-separated words, as
//! `fscanf` reads them; a word longer than [`MAX_WORD`] bytes is an error, so
//! memory stays bounded whatever the input (a converter keeps only the live
//! blocks). Errors name the line and show the offending word, escaped and
//! cut short.

use crate::escape;
use crate::model::{End, EndReason, Kind, Meta, NewEvent};
use crate::reader::TraceReader;
use crate::view::{ResizeOp, ResizeView};
use crate::writer::{TraceWriter, WriterOptions};
use std::collections::{BTreeMap, HashMap};
use std::fmt::{self, Write as _};
use std::io::{BufRead, Read, Write};

/// Which of the two text formats.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TextFormat {
    Rep,
    Script,
}

/// One operation of a text trace.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TextOp {
    Alloc {
        id: u64,
        size: u64,
    },
    Free {
        id: u64,
    },
    /// `f -1`: free(NULL), as the 15-213 driver reads it.
    FreeNull,
    Realloc {
        id: u64,
        size: u64,
    },
}

/// The longest word (operation, id, size, header number) the reader takes.
pub const MAX_WORD: usize = 64;

/// A text trace that cannot be read: where, and what.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TextError {
    /// 1-based line, when the problem has one.
    pub line: Option<u64>,
    pub what: String,
}

impl fmt::Display for TextError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.line {
            Some(l) => write!(f, "line {l}: {}", self.what),
            None => write!(f, "{}", self.what),
        }
    }
}

impl std::error::Error for TextError {}

/// A word of the input as it may be shown: escaped for a terminal, at most
/// 32 characters, in backquotes.
pub fn excerpt(word: &[u8]) -> String {
    let shown = &word[..word.len().min(32)];
    let more = if word.len() > 32 { "…" } else { "" };
    format!("`{}{more}`", escape::terminal(shown))
}

/// Deviations from the format, each kind said once: how often, and the
/// first line where it happens.
#[derive(Debug, Default, Clone)]
pub struct Notes {
    kinds: BTreeMap<u64, (String, u64, u64)>,
    order: u64,
    by_text: HashMap<&'static str, u64>,
}

impl Notes {
    fn add(&mut self, key: &'static str, line: u64, text: impl FnOnce() -> String) {
        let k = match self.by_text.get(key) {
            Some(&k) => k,
            None => {
                self.order += 1;
                self.by_text.insert(key, self.order);
                self.kinds.insert(self.order, (text(), line, 0));
                self.order
            }
        };
        self.kinds.get_mut(&k).expect("inserted above").2 += 1;
    }

    /// One line per kind of deviation, in the order they were first met.
    pub fn lines(&self) -> Vec<String> {
        self.kinds
            .values()
            .map(|(text, line, n)| {
                if *n > 1 {
                    format!("line {line}: {text} ({n} times; the first is shown)")
                } else {
                    format!("line {line}: {text}")
                }
            })
            .collect()
    }

    pub fn is_empty(&self) -> bool {
        self.kinds.is_empty()
    }
}

struct Word {
    text: Vec<u8>,
    line: u64,
}

/// Reads the operations of a `.rep` or `.script` file one at a time.
pub struct TextReader<R: BufRead> {
    src: R,
    format: TextFormat,
    /// Line of the next unread byte.
    line: u64,
    peeked: Option<Word>,
    header: Option<[u64; 4]>,
    ops: u64,
    last_size: Option<u64>,
    notes: Notes,
    done: bool,
}

fn parse_u64(w: &[u8]) -> Option<u64> {
    if w.is_empty() || !w.iter().all(u8::is_ascii_digit) {
        return None;
    }
    std::str::from_utf8(w).ok()?.parse().ok()
}

impl<R: BufRead> TextReader<R> {
    pub fn new(src: R, format: TextFormat) -> Self {
        TextReader {
            src,
            format,
            line: 1,
            peeked: None,
            header: None,
            ops: 0,
            last_size: None,
            notes: Notes::default(),
            done: false,
        }
    }

    /// The four header numbers of a `.rep` (after the first operation is read).
    pub fn header(&self) -> Option<[u64; 4]> {
        self.header
    }

    /// Operations read so far.
    pub fn ops_read(&self) -> u64 {
        self.ops
    }

    /// The deviations met so far.
    pub fn notes(&self) -> &Notes {
        &self.notes
    }

    fn io(&self, e: std::io::Error) -> TextError {
        TextError { line: Some(self.line), what: format!("read error: {e}") }
    }

    /// The next whitespace-separated word (`#` comments skipped in a script).
    fn word(&mut self) -> Result<Option<Word>, TextError> {
        if let Some(w) = self.peeked.take() {
            return Ok(Some(w));
        }
        let mut text = Vec::new();
        let mut line = self.line;
        let mut comment = false;
        loop {
            let buf = match self.src.fill_buf() {
                Ok(b) => b,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(self.io(e)),
            };
            if buf.is_empty() {
                return Ok((!text.is_empty()).then_some(Word { text, line }));
            }
            let mut used = 0;
            let mut end = false;
            for &b in buf {
                if b == b'\n' {
                    comment = false;
                    if !text.is_empty() {
                        end = true;
                        break;
                    }
                    used += 1;
                    self.line += 1;
                    continue;
                }
                used += 1;
                if comment {
                    continue;
                }
                if b == b'#' && self.format == TextFormat::Script {
                    comment = true;
                    if !text.is_empty() {
                        end = true;
                        break;
                    }
                } else if b.is_ascii_whitespace() {
                    if !text.is_empty() {
                        end = true;
                        break;
                    }
                } else {
                    if text.is_empty() {
                        line = self.line;
                    }
                    if text.len() == MAX_WORD {
                        return Err(TextError {
                            line: Some(line),
                            what: format!(
                                "a word of more than {MAX_WORD} bytes, starting {}",
                                excerpt(&text)
                            ),
                        });
                    }
                    text.push(b);
                }
            }
            self.src.consume(used);
            if end {
                if comment {
                    // The rest of the line is a comment: skip it on the next call.
                    self.skip_comment()?;
                }
                return Ok(Some(Word { text, line }));
            }
        }
    }

    fn skip_comment(&mut self) -> Result<(), TextError> {
        loop {
            let buf = match self.src.fill_buf() {
                Ok(b) => b,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(self.io(e)),
            };
            if buf.is_empty() {
                return Ok(());
            }
            match buf.iter().position(|&b| b == b'\n') {
                Some(i) => {
                    self.src.consume(i);
                    return Ok(());
                }
                None => {
                    let n = buf.len();
                    self.src.consume(n);
                }
            }
        }
    }

    fn read_header(&mut self) -> Result<(), TextError> {
        const NAMES: [&str; 4] = [
            "1st number (heap size or weight)",
            "2nd number (the number of ids)",
            "3rd number (the number of operations)",
            "4th number (weight, or a flag)",
        ];
        let mut h = [0u64; 4];
        for (i, name) in NAMES.iter().enumerate() {
            let Some(w) = self.word()? else {
                return Err(TextError {
                    line: Some(self.line),
                    what: format!(
                        "the .rep header needs 4 numbers; the file ends before its {name}"
                    ),
                });
            };
            h[i] = match parse_u64(&w.text) {
                Some(v) => v,
                None => match std::str::from_utf8(&w.text).ok().and_then(|s| s.parse::<f64>().ok())
                {
                    Some(v) if v.is_finite() && v >= 0.0 => {
                        self.notes.add("header-float", w.line, || {
                            "a header number that is not an integer is read up to its point".into()
                        });
                        v as u64
                    }
                    _ => {
                        return Err(TextError {
                            line: Some(w.line),
                            what: format!(
                                "expected the header's {name}, found {}",
                                excerpt(&w.text)
                            ),
                        })
                    }
                },
            };
        }
        self.header = Some(h);
        Ok(())
    }

    /// The next operation and its line; `None` at the end.
    pub fn next_op(&mut self) -> Result<Option<(TextOp, u64)>, TextError> {
        if self.done {
            return Ok(None);
        }
        if self.format == TextFormat::Rep && self.header.is_none() {
            self.read_header()?;
        }
        if let Some(h) = self.header {
            if self.ops == h[2] {
                self.done = true;
                if let Some(w) = self.word()? {
                    let n = h[2];
                    self.notes.add("ops-more", w.line, || {
                        format!(
                            "the header says {n} operations and the file goes on here; mdriver stops \
                             reading at the header's count, and so does heaplab"
                        )
                    });
                }
                return Ok(None);
            }
        }
        let Some(w) = self.word()? else {
            self.done = true;
            if let Some(h) = self.header {
                let (want, got) = (h[2], self.ops);
                self.notes.add("ops-fewer", self.line, || {
                    format!(
                        "the header says {want} operations, the file holds {got}: all {got} are read \
                         (mdriver would stop at an assertion)"
                    )
                });
            }
            return Ok(None);
        };
        let line = w.line;
        let op = match w.text.first() {
            Some(c @ (b'a' | b'f' | b'r')) => *c,
            _ => {
                return Err(TextError {
                    line: Some(line),
                    what: format!("unknown operation {} (expected a, f or r)", excerpt(&w.text)),
                })
            }
        };
        if w.text.len() > 1 {
            let word = excerpt(&w.text);
            self.notes.add("op-word", line, || {
                format!("operation {word} is read by its first letter, as mdriver reads it")
            });
        }
        let name = op as char;
        let idw = self.word()?.ok_or_else(|| TextError {
            line: Some(line),
            what: format!("`{name}` needs a block id, and the file ends"),
        })?;
        let id = match parse_u64(&idw.text) {
            Some(id) => Some(id),
            None if op == b'f' && idw.text == b"-1" => None,
            None => {
                return Err(TextError {
                    line: Some(idw.line),
                    what: format!(
                        "`{name}` needs a block id (a number{}), found {}",
                        if op == b'f' { ", or -1 for NULL" } else { "" },
                        excerpt(&idw.text)
                    ),
                })
            }
        };
        if let (Some(id), Some(h)) = (id, self.header) {
            if id >= h[1] {
                let n = h[1];
                self.notes.add("id-range", idw.line, || {
                    format!("block id {id} is not below the header's id count {n}; read anyway")
                });
            }
        }
        let size = if op == b'f' {
            0
        } else {
            let next = self.word()?;
            match next.as_ref().and_then(|w| parse_u64(&w.text)) {
                Some(s) => s,
                None => {
                    if let Some(w) = &next {
                        if w.text.first() == Some(&b'-')
                            && w.text[1..].iter().all(u8::is_ascii_digit)
                        {
                            return Err(TextError {
                                line: Some(w.line),
                                what: format!("`{name}` with a negative size {}", excerpt(&w.text)),
                            });
                        }
                    }
                    self.peeked = next;
                    let Some(s) = self.last_size else {
                        return Err(TextError {
                            line: Some(line),
                            what: format!("`{name}` has no size, and no size came before to reuse"),
                        });
                    };
                    self.notes.add("size-reuse", line, || {
                        format!("`{name}` without a size reuses the previous size ({s}), as mdriver does")
                    });
                    s
                }
            }
        };
        if op != b'f' {
            self.last_size = Some(size);
        }
        self.ops += 1;
        let o = match (op, id) {
            (b'a', Some(id)) => TextOp::Alloc { id, size },
            (b'r', Some(id)) => TextOp::Realloc { id, size },
            (_, Some(id)) => TextOp::Free { id },
            (_, None) => {
                self.notes.add("free-null", line, || {
                    "`f -1` frees NULL (the 15-213 driver's reading); a trace holds no free(NULL), \
                     so it is left out"
                        .into()
                });
                TextOp::FreeNull
            }
        };
        Ok(Some((o, line)))
    }
}

/// What a text file gave: its operations and the deviations noted.
#[derive(Debug, Clone)]
pub struct Parsed {
    pub ops: Vec<TextOp>,
    pub header: Option<[u64; 4]>,
    pub notes: Vec<String>,
}

/// Reads a whole `.rep` or `.script` text (for small inputs and tests;
/// [`text_to_trace`] streams).
pub fn parse(text: &[u8], format: TextFormat) -> Result<Parsed, TextError> {
    let mut r = TextReader::new(text, format);
    let mut ops = Vec::new();
    while let Some((o, _)) = r.next_op()? {
        ops.push(o);
    }
    Ok(Parsed { ops, header: r.header(), notes: r.notes().lines() })
}

/// What [`text_to_trace`] made.
#[derive(Debug, Clone, Default)]
pub struct TextSummary {
    /// Operations read from the text.
    pub ops: u64,
    /// Events written to the trace (operations left out are not events).
    pub events: u64,
    pub header: Option<[u64; 4]>,
    /// The deviations from the format, one line per kind.
    pub notes: Vec<String>,
}

/// Converts a text trace to a trace, streaming: memory holds the live blocks
/// only. One thread; the operation's position is its time. `source` names
/// the file in the trace's META (its bytes as they are).
pub fn text_to_trace<R: BufRead, W: Write>(
    src: R,
    format: TextFormat,
    source: &[u8],
    out: W,
    opts: WriterOptions,
) -> Result<(W, TextSummary), TextError> {
    let meta = Meta {
        pid: 0,
        argv: vec![source.to_vec()],
        pointer_size: 8,
        time_unit_ns: 1,
        options: Some([b"converted from ", source, b"; time = operation index"].concat()),
        recorder: Some(concat!("heaplab convert ", env!("CARGO_PKG_VERSION")).as_bytes().to_vec()),
        ..Meta::default()
    };
    let io = |e: std::io::Error| TextError { line: None, what: format!("writing the trace: {e}") };
    let mut w = TraceWriter::new(out, &meta, opts).map_err(io)?;
    let t = w.add_thread(0, "");
    let mut r = TextReader::new(src, format);
    let mut live: HashMap<u64, u64> = HashMap::new(); // text id → trace id
    let mut extra = Notes::default();
    let mut time = 0u64;
    while let Some((op, line)) = r.next_op()? {
        let at = |e: std::io::Error| TextError { line: Some(line), what: e.to_string() };
        time += 1;
        match op {
            TextOp::Alloc { id, size } => {
                if live.contains_key(&id) {
                    extra.add("alloc-live", line, || {
                        format!("`a {id}` while block {id} is allocated: the first block is never freed (mdriver overwrites its pointer)")
                    });
                }
                let new = w.record(&NewEvent::alloc(Kind::Malloc, size).at(t, time)).map_err(at)?;
                live.insert(id, new.expect("malloc creates"));
            }
            TextOp::Free { id } => match live.remove(&id) {
                Some(old) => {
                    w.record(&NewEvent::free(old).at(t, time)).map_err(at)?;
                }
                None => extra.add("free-dead", line, || {
                    format!("`f {id}` frees a block that is not allocated (mdriver frees NULL or a stale pointer); left out")
                }),
            },
            TextOp::FreeNull => {}
            TextOp::Realloc { id, size } => match (live.remove(&id), size) {
                (Some(old), 0) => {
                    // realloc(p, 0) frees p and returns NULL (the 15-213 driver's rule).
                    let ev = NewEvent { old: Some(old), ..NewEvent::alloc(Kind::ReallocFree, 0) };
                    w.record(&ev.at(t, time)).map_err(at)?;
                }
                (None, 0) => extra.add("realloc-null-0", line, || {
                    format!("`r {id} 0` on a block that is not allocated: realloc(NULL, 0); left out")
                }),
                (old, _) => {
                    if old.is_none() {
                        extra.add("realloc-dead", line, || {
                            format!("`r {id}` on a block that is not allocated is realloc(NULL, {size})")
                        });
                    }
                    let new = w.record(&NewEvent::realloc(old, size).at(t, time)).map_err(at)?;
                    live.insert(id, new.expect("realloc creates"));
                }
            },
        }
    }
    let events = w.events();
    let out = w.finish(&End { reason: EndReason::Closed, ..End::default() }).map_err(io)?;
    let mut notes = r.notes().lines();
    notes.extend(extra.lines());
    Ok((out, TextSummary { ops: r.ops_read(), events, header: r.header(), notes }))
}

/// What a trace loses on the way to a text format.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Losses {
    /// memalign-family and calloc calls written as plain `a`.
    pub kinds_flattened: u64,
    /// Failed calls, which the text formats cannot say.
    pub failed_dropped: u64,
    /// Threads beyond the first, merged into one sequence.
    pub threads: u64,
}

/// Converts a trace to `.rep` or `.script` text, streaming the operations
/// to `body`; returns the header to put before them (a `.rep` header needs
/// counts only known at the end), and what was lost. Realloc chains keep one
/// text id (the text formats' `r` resizes a block in place of its id), and
/// ids are numbered densely in order of first allocation.
pub fn trace_to_text<R: Read, W: Write>(
    r: &mut TraceReader<R>,
    format: TextFormat,
    body: &mut W,
) -> Result<(String, Losses), crate::dump::DumpError> {
    let mut view = ResizeView::default();
    let mut ids: HashMap<u64, u64> = HashMap::new();
    let mut next = 0u64;
    let mut ops = 0u64;
    let mut losses = Losses::default();
    let (mut live, mut peak) = (0u64, 0u64);
    let mut threads = 0u32;
    let mut line = String::new();
    while let Some(e) = r.next_event().map_err(crate::dump::DumpError::Trace)? {
        threads = threads.max(e.thread.saturating_add(1));
        if e.failed {
            losses.failed_dropped += 1;
            continue;
        }
        if !matches!(e.kind, Kind::Malloc | Kind::Realloc | Kind::Free | Kind::ReallocFree) {
            losses.kinds_flattened += 1;
        }
        line.clear();
        match view.apply(&e) {
            Some(ResizeOp::Alloc { obj, size }) => {
                ids.insert(obj, next);
                next += 1;
                live = live.saturating_add(size);
                let _ = write!(line, "a {} {size}", next - 1);
            }
            Some(ResizeOp::Resize { obj, old_size, new_size }) => {
                live = live.saturating_sub(old_size).saturating_add(new_size);
                let id = *ids.entry(obj).or_insert_with(|| {
                    next += 1;
                    next - 1
                });
                let _ = write!(line, "r {id} {new_size}");
            }
            Some(ResizeOp::Free { obj, size }) => {
                live = live.saturating_sub(size);
                match ids.remove(&obj) {
                    Some(id) => {
                        let _ = write!(line, "f {id}");
                    }
                    None => continue,
                }
            }
            None => continue,
        };
        peak = peak.max(live);
        line.push('\n');
        body.write_all(line.as_bytes())?;
        ops += 1;
    }
    losses.threads = u64::from(threads.saturating_sub(1));
    let mut head = String::new();
    match format {
        TextFormat::Rep => {
            let _ = write!(head, "{}\n{next}\n{ops}\n1\n", peak.max(1));
        }
        TextFormat::Script => {
            use std::os::unix::ffi::OsStrExt;
            let from = escape::terminal(r.path().as_os_str().as_bytes());
            let _ = writeln!(head, "# converted by heaplab from {from}");
            let _ = writeln!(head, "# {next} ids, {ops} operations, peak live {peak} bytes");
        }
    }
    Ok((head, losses))
}

/// [`trace_to_text`] into one string, header first.
pub fn trace_to_string<R: Read>(
    r: &mut TraceReader<R>,
    format: TextFormat,
) -> Result<(String, Losses), crate::dump::DumpError> {
    let mut body = Vec::new();
    let (mut head, losses) = trace_to_text(r, format, &mut body)?;
    head.push_str(std::str::from_utf8(&body).expect("the text formats are ASCII"));
    Ok((head, losses))
}

#[cfg(test)]
mod tests {
    use super::*;

    const REP: &[u8] = b"20000\n3\n6\n1\na 0 512\na 1 128\nr 0 640\nf 1\na 2 16\nf 0\n";

    fn to_trace(text: &[u8], f: TextFormat) -> (Vec<u8>, TextSummary) {
        text_to_trace(text, f, b"t.rep", Vec::new(), WriterOptions::default()).unwrap()
    }

    fn events(bytes: &[u8]) -> Vec<crate::Event> {
        let mut r = TraceReader::new(bytes, "t.hltrace").unwrap();
        std::iter::from_fn(|| r.next_event().unwrap()).collect()
    }

    #[test]
    fn rep_round_trip_through_a_trace() {
        let p = parse(REP, TextFormat::Rep).unwrap();
        assert_eq!(p.ops[2], TextOp::Realloc { id: 0, size: 640 });
        assert!(p.notes.is_empty(), "{:?}", p.notes);
        let (bytes, sum) = to_trace(REP, TextFormat::Rep);
        assert_eq!((sum.ops, sum.events), (6, 6));
        let mut r = TraceReader::new(&bytes[..], "t.hltrace").unwrap();
        let (text, losses) = trace_to_string(&mut r, TextFormat::Rep).unwrap();
        assert_eq!(losses, Losses::default());
        // Same operations; the header's heap line is the peak live bytes (640 + 128).
        assert_eq!(text, "768\n3\n6\n1\na 0 512\na 1 128\nr 0 640\nf 1\na 2 16\nf 0\n");
    }

    #[test]
    fn variant_header_comments_and_quirks() {
        // weight ids ops ignore; `a 1` repeats the last size; `r 5` on a dead id is realloc(NULL, n).
        let v = parse(b"1\n6\n3\n0\na 0 24\na 1\nr 5 8\n", TextFormat::Rep).unwrap();
        assert_eq!(v.ops[1], TextOp::Alloc { id: 1, size: 24 });
        assert!(v.notes.iter().any(|n| n.starts_with("line 6:") && n.contains("previous size")));
        let (bytes, _) = to_trace(b"1\n6\n3\n0\na 0 24\na 1\nr 5 8\n", TextFormat::Rep);
        let evs = events(&bytes);
        assert_eq!((evs[2].kind, evs[2].old, evs[2].size), (Kind::Realloc, None, 8));
        let s = parse(b"# a comment\na 0 10   # trailing\n\nf 0#x\n", TextFormat::Script).unwrap();
        assert_eq!(s.ops, vec![TextOp::Alloc { id: 0, size: 10 }, TextOp::Free { id: 0 }]);
    }

    #[test]
    fn mdriver_conventions_are_read_with_notes() {
        // The header's count is below the body's: mdriver stops at the count.
        let p = parse(b"0 3 2 0\na 0 8\nf 0\na 1 8\n", TextFormat::Rep).unwrap();
        assert_eq!(p.ops.len(), 2);
        assert!(p.notes[0].starts_with("line 4:") && p.notes[0].contains("stops"), "{:?}", p.notes);
        // Above it: every operation there is, and a note.
        let p = parse(b"20000\n3\n9\n1\na 0 8\nf 0\n", TextFormat::Rep).unwrap();
        assert_eq!(p.ops.len(), 2);
        assert!(p.notes[0].contains("says 9 operations, the file holds 2"), "{:?}", p.notes);
        // 15-213: f -1 frees NULL; sparse ids past the count; r ID 0 frees.
        let text = b"1\n2\n6\n0\na 0 16\nf -1\na 7 32\nr 0 0\nf 7\nf 0\n";
        let p = parse(text, TextFormat::Rep).unwrap();
        assert_eq!(p.ops[1], TextOp::FreeNull);
        assert!(p.notes.iter().any(|n| n.contains("frees NULL")));
        assert!(p.notes.iter().any(|n| n.contains("block id 7 is not below")));
        let (bytes, sum) = to_trace(text, TextFormat::Rep);
        let kinds: Vec<Kind> = events(&bytes).iter().map(|e| e.kind).collect();
        assert_eq!(kinds, [Kind::Malloc, Kind::Malloc, Kind::ReallocFree, Kind::Free]);
        assert_eq!((sum.ops, sum.events), (6, 4));
        assert!(sum.notes.iter().any(|n| n.contains("`f 0` frees a block that is not allocated")));
        // The header's four numbers on one line, as fscanf reads them.
        assert_eq!(parse(b"20000 1 1 1\na 0 5\n", TextFormat::Rep).unwrap().ops.len(), 1);
    }

    #[test]
    fn bad_text_names_the_line_with_a_short_excerpt() {
        let e = parse(b"1\n2\n1\n1\nx 0 1\n", TextFormat::Rep).unwrap_err();
        assert_eq!(e.to_string(), "line 5: unknown operation `x` (expected a, f or r)");
        let e = parse(b"a zero 1\n", TextFormat::Script).unwrap_err();
        assert_eq!(e.to_string(), "line 1: `a` needs a block id (a number), found `zero`");
        assert!(parse(b"a 0\n", TextFormat::Script).unwrap_err().to_string().contains("no size"));
        // A 10 MB line is not shown; control bytes are escaped.
        let mut long = b"a 0 1\nf 0\n".to_vec();
        long.extend(std::iter::repeat_n(b'z', 10 << 20));
        let e = parse(&long, TextFormat::Script).unwrap_err().to_string();
        assert!(e.starts_with("line 3: a word of more than 64 bytes") && e.len() < 200, "{e}");
        let e = parse(b"a 0 1\n\x1b[2J 0\n", TextFormat::Script).unwrap_err().to_string();
        assert!(e.contains("`\\x1b[2J`") && !e.contains('\x1b'), "{e}");
        assert!(parse(b"1 2", TextFormat::Rep)
            .unwrap_err()
            .to_string()
            .contains("needs 4 numbers"));
    }
}
