//! The text formats that allocator courses use, and conversion to and from
//! traces.
//!
//! Both hold one operation per line: `a ID SIZE` (allocate), `f ID` (free),
//! `r ID SIZE` (realloc). IDs are the trace file's own names for blocks.
//!
//! - `.rep` (the CS:APP malloc lab): a four-line header of integers, either
//!   `heap-size ids ops weight` or the variant `weight ids ops ignore`. In both
//!   the second line is the number of ids and the third the number of
//!   operations, which is all a reader needs.
//! - `.script`: the same lines with `#` comments (whole-line or trailing) and
//!   no header.
//!
//! Quirks accepted on reading: `r` on an id that is not live means
//! `realloc(NULL, size)`; `a ID` with no size repeats the last size given.

use crate::model::{End, EndReason, Kind, Meta, NewEvent};
use crate::reader::TraceReader;
use crate::view::{ResizeOp, ResizeView};
use crate::writer::{TraceWriter, WriterOptions};
use std::collections::HashMap;
use std::fmt::Write as _;
use std::io::{Read, Write};

/// Which of the two text formats.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TextFormat {
    Rep,
    Script,
}

/// One operation of a text trace.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TextOp {
    Alloc { id: u64, size: u64 },
    Free { id: u64 },
    Realloc { id: u64, size: u64 },
}

/// Parses a `.rep` or `.script` file. Errors name the line.
pub fn parse(text: &str, format: TextFormat) -> Result<Vec<TextOp>, String> {
    let mut ops = Vec::new();
    let mut header: Vec<u64> = Vec::new();
    let mut last_size: Option<u64> = None;
    for (n, raw) in text.lines().enumerate() {
        let lineno = n + 1;
        let line = match format {
            TextFormat::Script => raw.split('#').next().unwrap_or(""),
            TextFormat::Rep => raw,
        }
        .trim();
        if line.is_empty() {
            continue;
        }
        if format == TextFormat::Rep && header.len() < 4 {
            let v = line.parse::<f64>().map_err(|_| {
                format!(
                    "line {lineno}: expected the header's {} number, found {line:?}",
                    ["1st", "2nd", "3rd", "4th"][header.len()]
                )
            })?;
            header.push(v.max(0.0) as u64);
            continue;
        }
        let mut f = line.split_whitespace();
        let op = f.next().unwrap_or("");
        let mut num = |what: &str| -> Result<Option<u64>, String> {
            match f.next() {
                None => Ok(None),
                Some(s) => s
                    .parse::<u64>()
                    .map(Some)
                    .map_err(|_| format!("line {lineno}: {what} {s:?} is not a number")),
            }
        };
        let id = num("id")?.ok_or_else(|| format!("line {lineno}: {op:?} needs an id"))?;
        let o = match op {
            "a" => {
                let size = match num("size")? {
                    Some(s) => s,
                    None => last_size.ok_or_else(|| {
                        format!("line {lineno}: `a {id}` has no size and none came before")
                    })?,
                };
                last_size = Some(size);
                TextOp::Alloc { id, size }
            }
            "r" => {
                let size =
                    num("size")?.ok_or_else(|| format!("line {lineno}: `r {id}` needs a size"))?;
                last_size = Some(size);
                TextOp::Realloc { id, size }
            }
            "f" => TextOp::Free { id },
            _ => {
                return Err(format!("line {lineno}: unknown operation {op:?} (expected a, f or r)"))
            }
        };
        if f.next().is_some() {
            return Err(format!("line {lineno}: extra fields after {line:?}"));
        }
        ops.push(o);
    }
    if format == TextFormat::Rep {
        if header.len() < 4 {
            return Err(format!("the .rep header needs 4 lines, found {}", header.len()));
        }
        if header[2] as usize != ops.len() {
            return Err(format!(
                "the header says {} operations, the file holds {}",
                header[2],
                ops.len()
            ));
        }
        if let Some(bad) = ops
            .iter()
            .map(|o| match *o {
                TextOp::Alloc { id, .. } | TextOp::Free { id } | TextOp::Realloc { id, .. } => id,
            })
            .find(|&id| id >= header[1])
        {
            return Err(format!("id {bad} is not below the header's id count {}", header[1]));
        }
    }
    Ok(ops)
}

/// Writes text operations as a trace: one thread, the operation index as time.
pub fn ops_to_trace<W: Write>(
    ops: &[TextOp],
    source: &str,
    out: W,
    opts: WriterOptions,
) -> Result<W, String> {
    let meta = Meta {
        pid: 0,
        argv: vec![source.as_bytes().to_vec()],
        pointer_size: 8,
        time_unit_ns: 1,
        options: Some(format!("converted from {source}; time = operation index")),
        recorder: Some(concat!("heaplab convert ", env!("CARGO_PKG_VERSION")).to_string()),
        ..Meta::default()
    };
    let io = |e: std::io::Error| e.to_string();
    let mut w = TraceWriter::new(out, &meta, opts).map_err(io)?;
    let t = w.add_thread(0, "");
    let mut live: HashMap<u64, u64> = HashMap::new(); // text id → trace id
    for (i, op) in ops.iter().enumerate() {
        let at = |m: String| format!("operation {} ({op:?}): {m}", i + 1);
        let time = i as u64;
        match *op {
            TextOp::Alloc { id, size } => {
                if live.contains_key(&id) {
                    return Err(at(format!("id {id} is already allocated")));
                }
                let new = w.record(&NewEvent::alloc(Kind::Malloc, size).at(t, time)).map_err(io)?;
                live.insert(id, new.expect("malloc creates"));
            }
            TextOp::Free { id } => {
                let old =
                    live.remove(&id).ok_or_else(|| at(format!("id {id} is not allocated")))?;
                w.record(&NewEvent::free(old).at(t, time)).map_err(io)?;
            }
            TextOp::Realloc { id, size } => {
                let old = live.remove(&id);
                let new = w.record(&NewEvent::realloc(old, size).at(t, time)).map_err(io)?;
                live.insert(id, new.expect("realloc creates"));
            }
        }
    }
    w.finish(&End { reason: EndReason::Closed, ..End::default() }).map_err(io)
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

/// Converts a trace to `.rep` or `.script` text. Realloc chains keep one
/// text id (the text formats' `r` resizes a block in place of its id), and
/// ids are numbered densely in order of first allocation.
pub fn trace_to_text<R: Read>(
    r: &mut TraceReader<R>,
    format: TextFormat,
) -> Result<(String, Losses), crate::TraceError> {
    let mut view = ResizeView::default();
    let mut ids: HashMap<u64, u64> = HashMap::new();
    let mut next = 0u64;
    let mut body = String::new();
    let mut ops = 0u64;
    let mut losses = Losses::default();
    let (mut live, mut peak) = (0u64, 0u64);
    let mut threads = 0u32;
    while let Some(e) = r.next_event()? {
        threads = threads.max(e.thread + 1);
        if e.failed {
            losses.failed_dropped += 1;
            continue;
        }
        if !matches!(e.kind, Kind::Malloc | Kind::Realloc | Kind::Free | Kind::ReallocFree) {
            losses.kinds_flattened += 1;
        }
        let line = match view.apply(&e) {
            Some(ResizeOp::Alloc { obj, size }) => {
                ids.insert(obj, next);
                next += 1;
                live += size;
                format!("a {} {size}", next - 1)
            }
            Some(ResizeOp::Resize { obj, old_size, new_size }) => {
                live = live - old_size + new_size;
                format!("r {} {new_size}", ids[&obj])
            }
            Some(ResizeOp::Free { obj, size }) => {
                live -= size;
                format!("f {}", ids.remove(&obj).expect("a freed object was allocated"))
            }
            None => continue,
        };
        peak = peak.max(live);
        body.push_str(&line);
        body.push('\n');
        ops += 1;
    }
    losses.threads = u64::from(threads.saturating_sub(1));
    let mut out = String::new();
    match format {
        TextFormat::Rep => {
            let _ = write!(out, "{}\n{next}\n{ops}\n1\n", peak.max(1));
        }
        TextFormat::Script => {
            let _ = writeln!(out, "# converted by heaplab from {}", r.path().display());
            let _ = writeln!(out, "# {} ids, {ops} operations, peak live {peak} bytes", next);
        }
    }
    out.push_str(&body);
    Ok((out, losses))
}

#[cfg(test)]
mod tests {
    use super::*;

    const REP: &str = "20000\n3\n6\n1\na 0 512\na 1 128\nr 0 640\nf 1\na 2 16\nf 0\n";

    #[test]
    fn rep_round_trip_through_a_trace() {
        let ops = parse(REP, TextFormat::Rep).unwrap();
        assert_eq!(ops[2], TextOp::Realloc { id: 0, size: 640 });
        let bytes = ops_to_trace(&ops, "t.rep", Vec::new(), WriterOptions::default()).unwrap();
        let mut r = TraceReader::new(&bytes[..], "t.hltrace").unwrap();
        let (text, losses) = trace_to_text(&mut r, TextFormat::Rep).unwrap();
        assert_eq!(losses, Losses::default());
        // Same operations; the header's heap line is the peak live bytes (640 + 128).
        assert_eq!(text, "768\n3\n6\n1\na 0 512\na 1 128\nr 0 640\nf 1\na 2 16\nf 0\n");
    }

    #[test]
    fn variant_header_comments_and_quirks() {
        // weight ids ops ignore; `a 1` repeats the last size; `r 5` on a dead id is realloc(NULL, n).
        let v = parse("1\n6\n3\n0\na 0 24\na 1\nr 5 8\n", TextFormat::Rep).unwrap();
        assert_eq!(v[1], TextOp::Alloc { id: 1, size: 24 });
        let bytes = ops_to_trace(&v, "v.rep", Vec::new(), WriterOptions::default()).unwrap();
        let mut r = TraceReader::new(&bytes[..], "v").unwrap();
        let evs: Vec<_> = std::iter::from_fn(|| r.next_event().unwrap()).collect();
        assert_eq!((evs[2].kind, evs[2].old, evs[2].size), (Kind::Realloc, None, 8));
        let s = parse("# a comment\na 0 10   # trailing\n\nf 0\n", TextFormat::Script).unwrap();
        assert_eq!(s, vec![TextOp::Alloc { id: 0, size: 10 }, TextOp::Free { id: 0 }]);
    }

    #[test]
    fn bad_text_names_the_line() {
        assert!(parse("1\n2\n1\n1\nx 0 1\n", TextFormat::Rep).unwrap_err().contains("line 5"));
        assert!(parse("a zero 1\n", TextFormat::Script).unwrap_err().contains("line 1"));
        assert!(parse("1\n2\n5\n1\na 0 1\n", TextFormat::Rep)
            .unwrap_err()
            .contains("says 5 operations"));
        assert!(parse("a 0\n", TextFormat::Script).unwrap_err().contains("no size"));
        let ops = parse("f 3\n", TextFormat::Script).unwrap();
        assert!(ops_to_trace(&ops, "x", Vec::new(), WriterOptions::default())
            .unwrap_err()
            .contains("not allocated"));
    }
}
