//! DineroIV's `din` text format as an [`AccessSource`].
//!
//! ```text
//!   LABEL ADDRESS [SIZE] [PART] [# comment]
//!   0 7ffd1230          read 4 bytes at 0x7ffd1230 (the address is aligned down to 4, as DineroIV does)
//!   1 0x55550010 8      write 8 bytes at 0x55550010
//!   0 55550040 16 alloc a 16-byte read by the allocator (heaplab's extension)
//!   2 401000            instruction fetch: counted, not simulated unless asked
//!   4 0                 flush the caches
//!   # a comment line; blank lines are skipped too
//! ```
//!
//! - LABEL (hexadecimal, as DineroIV reads it): 0 data read, 1 data write,
//!   2 instruction fetch, 3 unknown access type (simulated as a read, counted
//!   as `misc`), 4 cache flush (the address is ignored). Anything else is an
//!   error; DineroIII's 5 (context switch) is not supported.
//! - ADDRESS: hexadecimal, with or without `0x`, up to 16 digits.
//! - SIZE: decimal bytes, 1 to 4096. Without it the access is 4 bytes at the
//!   address aligned down to 4, which is what DineroIV does with every `din`
//!   record (it is word-oriented).
//! - PART: `app` / `application` (the default) or `alloc` / `allocator`: who
//!   made the access, for split-cache studies. This is heaplab's extension;
//!   DineroIV itself ignores everything after the address.
//! - Anything else after the address is an error unless it starts with `#`.
//!   (DineroIV treats the rest of the line as a comment; heaplab asks for a
//!   `#` so that a mistyped size or part is not silently ignored.)
//! - Instruction fetches are left out of the stream by default (the papers
//!   simulate data caches and take the instruction cache as perfect) and
//!   counted in [`DinStats::fetches_skipped`]; [`Fetches::Simulate`] keeps
//!   them, as accesses of kind [`Kind::Fetch`].

use std::fmt;
use std::io::{self, BufRead, Read};

use crate::access::{Access, AccessSource, Kind, Next, Part, BATCH};

/// The largest SIZE accepted.
pub const MAX_SIZE: u32 = 4096;

/// The longest line accepted (a record with a long comment fits; a file
/// that is not din text, such as /dev/zero, is refused within this many
/// bytes instead of being read into memory whole).
pub const MAX_LINE: usize = 64 * 1024;

/// What to do with instruction fetches (label 2).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Fetches {
    /// Count them, leave them out of the stream (a data-cache study).
    #[default]
    Skip,
    /// Pass them on as [`Kind::Fetch`] accesses (a unified cache).
    Simulate,
}

/// What the reader met.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DinStats {
    /// Lines read.
    pub lines: u64,
    /// Accesses passed on.
    pub accesses: u64,
    /// Instruction fetches left out.
    pub fetches_skipped: u64,
    /// Cache flushes (label 4).
    pub flushes: u64,
    /// Blank and comment lines.
    pub blank: u64,
    /// Accesses passed on that are marked `alloc`.
    pub allocator: u64,
}

/// A malformed line, or a read error.
#[derive(Debug)]
pub enum DinError {
    /// Line `line` (1-based) of `source` is not a `din` record.
    Syntax {
        /// The file name (or `<stdin>`).
        source: String,
        /// 1-based line number.
        line: u64,
        /// What is wrong and what would be right.
        problem: String,
        /// The line as read (shortened).
        text: String,
    },
    /// Reading failed.
    Io {
        /// The file name (or `<stdin>`).
        source: String,
        /// Lines read before the failure.
        line: u64,
        /// The error.
        error: io::Error,
    },
}

impl fmt::Display for DinError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DinError::Syntax { source, line, problem, text } => {
                write!(f, "{source}:{line}: {problem} (in `{text}`)")
            }
            DinError::Io { source, line, error } => {
                write!(f, "{source}: read error after line {line}: {error}")
            }
        }
    }
}

impl std::error::Error for DinError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            DinError::Io { error, .. } => Some(error),
            DinError::Syntax { .. } => None,
        }
    }
}

/// One parsed line.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Record {
    /// An access (of any kind, fetches included).
    Access(Access),
    /// A cache flush.
    Flush,
    /// A blank or comment line.
    Blank,
}

/// Parses one line (without its newline). The error is the problem alone.
pub fn parse_line(line: &[u8]) -> Result<Record, String> {
    let mut toks = line.split(|&b| b == b' ' || b == b'\t' || b == b'\r').filter(|t| !t.is_empty());
    let Some(label) = toks.next() else { return Ok(Record::Blank) };
    if label[0] == b'#' {
        return Ok(Record::Blank);
    }
    let label = parse_hex(label).ok_or_else(|| {
        format!("label `{}` is not a number; expected 0 (read), 1 (write), 2 (instruction fetch), 3 (unknown) or 4 (flush)", show(label))
    })?;
    let kind = match label {
        0 => Kind::Read,
        1 => Kind::Write,
        2 => Kind::Fetch,
        3 => Kind::Misc,
        4 => Kind::Read, // flush, below
        n => {
            return Err(format!(
                "label {n:x} is not one of 0 (read), 1 (write), 2 (instruction fetch), 3 (unknown) or 4 (flush)"
            ))
        }
    };
    let Some(addr) = toks.next() else {
        return Err("short line: an address (hexadecimal) must follow the label".to_string());
    };
    if addr[0] == b'#' {
        return Err("short line: an address (hexadecimal) must follow the label".to_string());
    }
    let addr = parse_hex(addr).ok_or_else(|| {
        format!("address `{}` is not a hexadecimal number of at most 16 digits (such as 7ffd1230 or 0x7ffd1230)", show(addr))
    })?;
    let mut size = None;
    let mut part = None;
    for t in toks {
        if t[0] == b'#' {
            break;
        }
        if t[0].is_ascii_digit() && size.is_none() && part.is_none() {
            let s = std::str::from_utf8(t).ok().and_then(|s| s.parse::<u32>().ok());
            match s {
                Some(n) if (1..=MAX_SIZE).contains(&n) => size = Some(n),
                _ => {
                    return Err(format!(
                        "size `{}` is not a decimal number of bytes from 1 to {MAX_SIZE}",
                        show(t)
                    ))
                }
            }
            continue;
        }
        if part.is_none() {
            match t {
                b"app" | b"application" => {
                    part = Some(Part::Application);
                    continue;
                }
                b"alloc" | b"allocator" => {
                    part = Some(Part::Allocator);
                    continue;
                }
                _ => {}
            }
        }
        return Err(format!(
            "unexpected `{}` after the address; expected a decimal size, then `app` or `alloc`, then a `#` comment",
            show(t)
        ));
    }
    if label == 4 {
        return Ok(Record::Flush);
    }
    let a = match size {
        Some(s) => Access::new(addr, s, kind),
        None => Access::new(addr & !3, 4, kind),
    };
    Ok(Record::Access(a.with_part(part.unwrap_or(Part::Application))))
}

/// A piece of the input for a message: at most 40 bytes, control
/// characters and bytes that are not UTF-8 escaped.
fn show(t: &[u8]) -> String {
    let cut = &t[..t.len().min(40)];
    let mut s = String::new();
    for chunk in cut.utf8_chunks() {
        for c in chunk.valid().chars() {
            if c.is_control() {
                s.push_str(&format!("\\x{:02x}", c as u32));
            } else {
                s.push(c);
            }
        }
        for b in chunk.invalid() {
            s.push_str(&format!("\\x{b:02x}"));
        }
    }
    if t.len() > 40 {
        s.push_str("...");
    }
    s
}

fn parse_hex(t: &[u8]) -> Option<u64> {
    let t = match t {
        [b'0', b'x' | b'X', rest @ ..] if !rest.is_empty() => rest,
        _ => t,
    };
    if t.is_empty() || t.len() > 16 {
        return None;
    }
    let mut v = 0u64;
    for &b in t {
        let d = match b {
            b'0'..=b'9' => b - b'0',
            b'a'..=b'f' => b - b'a' + 10,
            b'A'..=b'F' => b - b'A' + 10,
            _ => return None,
        };
        v = (v << 4) | d as u64;
    }
    Some(v)
}

/// Reads `din` text from any `BufRead` (a file, stdin, a byte slice).
///
/// ```
/// use heaplab_sim::{din::DinSource, drive, CacheConfig, Cache};
/// let text = "0 1000\n1 1004 4\n2 401000\n0 2000 8 alloc\n";
/// let mut src = DinSource::new(text.as_bytes(), "example.din");
/// let mut cache = Cache::new(CacheConfig::new(4096, 32, 1).unwrap());
/// drive(&mut src, &mut [&mut cache]).unwrap();
/// assert_eq!(cache.counts().total_accesses(), 3); // the fetch is left out
/// assert_eq!(src.stats().fetches_skipped, 1);
/// ```
pub struct DinSource<R> {
    reader: R,
    name: String,
    fetches: Fetches,
    line: Vec<u8>,
    stats: DinStats,
}

impl<R: BufRead> DinSource<R> {
    /// A reader of `reader`, called `name` in error messages. Instruction
    /// fetches are left out.
    pub fn new(reader: R, name: impl Into<String>) -> Self {
        DinSource {
            reader,
            name: name.into(),
            fetches: Fetches::Skip,
            line: Vec::new(),
            stats: DinStats::default(),
        }
    }

    /// The same reader, with instruction fetches handled as `fetches` says.
    pub fn fetches(mut self, fetches: Fetches) -> Self {
        self.fetches = fetches;
        self
    }

    /// What it met so far.
    pub fn stats(&self) -> &DinStats {
        &self.stats
    }
}

impl<R: BufRead> AccessSource for DinSource<R> {
    type Error = DinError;

    fn next_batch(&mut self, buf: &mut Vec<Access>) -> Result<Next, DinError> {
        buf.clear();
        let want = buf.capacity().max(BATCH);
        let io =
            |name: &str, line: u64, error| DinError::Io { source: name.to_string(), line, error };
        while buf.len() < want {
            // Whole lines straight from the reader's buffer.
            let chunk = self.reader.fill_buf().map_err(|e| io(&self.name, self.stats.lines, e))?;
            if chunk.is_empty() {
                return Ok(Next::End);
            }
            let mut pos = 0;
            let mut next = None;
            while pos < chunk.len() && buf.len() < want {
                let rest = &chunk[pos..];
                if let Some((a, used)) = fast_line(rest) {
                    self.stats.lines += 1;
                    pos += used;
                    take(&mut self.stats, self.fetches, a, buf);
                    continue;
                }
                let Some(k) = rest.iter().position(|&c| c == b'\n') else { break };
                self.stats.lines += 1;
                pos += k + 1;
                if let Some(n) = record(&mut self.stats, self.fetches, &self.name, &rest[..k], buf)?
                {
                    next = Some(n);
                    break;
                }
            }
            let partial = next.is_none() && buf.len() < want && pos < chunk.len();
            self.reader.consume(pos);
            if let Some(n) = next {
                return Ok(n);
            }
            if partial {
                // A line that runs past the reader's buffer (or a last line
                // without a newline): read it whole.
                self.line.clear();
                let n = (&mut self.reader)
                    .take(MAX_LINE as u64 + 1)
                    .read_until(b'\n', &mut self.line)
                    .map_err(|e| io(&self.name, self.stats.lines, e))?;
                if n == 0 {
                    return Ok(Next::End);
                }
                self.stats.lines += 1;
                if self.line.len() > MAX_LINE && self.line.last() != Some(&b'\n') {
                    return Err(DinError::Syntax {
                        source: self.name.clone(),
                        line: self.stats.lines,
                        problem: format!(
                            "a line longer than {MAX_LINE} bytes: not din text (a record is a label, an address, a size, a part and a comment)"
                        ),
                        text: show(&self.line),
                    });
                }
                let line = std::mem::take(&mut self.line);
                let text = line.strip_suffix(b"\n").unwrap_or(&line);
                let r = record(&mut self.stats, self.fetches, &self.name, text, buf);
                self.line = line;
                if let Some(n) = r? {
                    return Ok(n);
                }
            }
        }
        Ok(Next::More)
    }
}

/// Passes an access on, or counts it as a fetch left out.
#[inline(always)]
fn take(stats: &mut DinStats, fetches: Fetches, a: Access, buf: &mut Vec<Access>) {
    if a.kind == Kind::Fetch && fetches == Fetches::Skip {
        stats.fetches_skipped += 1;
        return;
    }
    stats.accesses += 1;
    stats.allocator += (a.part == Part::Allocator) as u64;
    buf.push(a);
}

/// Handles one line the fast path left alone (line number `stats.lines`):
/// says whether a flush follows the batch, or what is wrong.
fn record(
    stats: &mut DinStats,
    fetches: Fetches,
    name: &str,
    text: &[u8],
    buf: &mut Vec<Access>,
) -> Result<Option<Next>, DinError> {
    match parse_line(text) {
        Ok(Record::Access(a)) => take(stats, fetches, a, buf),
        Ok(Record::Flush) => {
            stats.flushes += 1;
            return Ok(Some(Next::Flush));
        }
        Ok(Record::Blank) => stats.blank += 1,
        Err(problem) => {
            return Err(DinError::Syntax {
                source: name.to_string(),
                line: stats.lines,
                problem,
                text: show(text.strip_suffix(b"\r").unwrap_or(text)),
            })
        }
    }
    Ok(None)
}

/// Hex digit values; 0xff for anything else.
const HEX: [u8; 256] = {
    let mut t = [0xffu8; 256];
    let mut i = 0;
    while i < 10 {
        t[b'0' as usize + i] = i as u8;
        i += 1;
    }
    let mut i = 0;
    while i < 6 {
        t[b'a' as usize + i] = 10 + i as u8;
        t[b'A' as usize + i] = 10 + i as u8;
        i += 1;
    }
    t
};

/// The common lines, parsed in one pass up to and including their newline:
/// `L ADDR [SIZE] [app|alloc]` with L in 0..=3 and blanks between fields.
/// Anything else (flushes, comments, blank lines, CRs, errors, a line not
/// ended yet) gives None and goes to [`parse_line`], which has the last word.
#[inline]
fn fast_line(s: &[u8]) -> Option<(Access, usize)> {
    let label = s.first()?.wrapping_sub(b'0');
    if label > 3 || !matches!(s.get(1)?, b' ' | b'\t') {
        return None;
    }
    let mut i = 2;
    while matches!(s.get(i)?, b' ' | b'\t') {
        i += 1;
    }
    if s[i] == b'0' && matches!(s.get(i + 1), Some(b'x' | b'X')) {
        i += 2;
    }
    let start = i;
    let mut addr = 0u64;
    loop {
        let d = HEX[*s.get(i)? as usize];
        if d == 0xff {
            break;
        }
        addr = (addr << 4) | d as u64;
        i += 1;
    }
    if i == start || i - start > 16 {
        return None;
    }
    let mut size: Option<u32> = None;
    let mut part: Option<Part> = None;
    loop {
        match *s.get(i)? {
            b'\n' => break,
            b' ' | b'\t' => i += 1,
            b'0'..=b'9' if size.is_none() && part.is_none() && matches!(s[i - 1], b' ' | b'\t') => {
                let mut n = 0u32;
                let st = i;
                while let c @ b'0'..=b'9' = *s.get(i)? {
                    n = n * 10 + (c - b'0') as u32;
                    i += 1;
                    if i - st > 4 {
                        return None;
                    }
                }
                if n == 0 || n > MAX_SIZE {
                    return None;
                }
                size = Some(n);
            }
            b'a' if part.is_none() && matches!(s[i - 1], b' ' | b'\t') => {
                let word = if s[i..].starts_with(b"alloc") {
                    part = Some(Part::Allocator);
                    5
                } else if s[i..].starts_with(b"app") {
                    part = Some(Part::Application);
                    3
                } else {
                    return None;
                };
                i += word;
            }
            _ => return None,
        }
    }
    let kind = Kind::ALL[label as usize];
    let a = match size {
        Some(n) => Access::new(addr, n, kind),
        None => Access::new(addr & !3, 4, kind),
    };
    Some((a.with_part(part.unwrap_or(Part::Application)), i + 1))
}

/// Writes accesses as `din` lines (`label address size [alloc]`), which
/// [`DinSource`] reads back exactly. Handy for tests and for feeding other
/// simulators (DineroIV ignores the size and part).
pub fn write_din<W: io::Write>(mut w: W, accesses: &[Access]) -> io::Result<()> {
    for a in accesses {
        let label = match a.kind {
            Kind::Read => 0,
            Kind::Write => 1,
            Kind::Fetch => 2,
            Kind::Misc => 3,
        };
        match a.part {
            Part::Application => writeln!(w, "{label} {:x} {}", a.addr, a.size)?,
            Part::Allocator => writeln!(w, "{label} {:x} {} alloc", a.addr, a.size)?,
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::access::{drive, Simulator};

    /// Counts the bytes taken from the source.
    struct Counting<R>(R, std::rc::Rc<std::cell::Cell<u64>>);
    impl<R: Read> Read for Counting<R> {
        fn read(&mut self, b: &mut [u8]) -> io::Result<usize> {
            let n = self.0.read(b)?;
            self.1.set(self.1.get() + n as u64);
            Ok(n)
        }
    }

    /// Issue 17, class 8: a source that never ends a line (as /dev/zero) is
    /// refused after MAX_LINE bytes, instead of being read into memory.
    #[test]
    fn an_endless_line_is_refused_in_bounded_memory() {
        for byte in [0u8, b'0', b'#'] {
            let used = std::rc::Rc::new(std::cell::Cell::new(0));
            let src = Counting(io::repeat(byte).take(256 << 20), used.clone());
            let mut din = DinSource::new(io::BufReader::with_capacity(1 << 20, src), "zero");
            let mut buf = Vec::with_capacity(BATCH);
            let e = loop {
                match din.next_batch(&mut buf) {
                    Ok(Next::End) => panic!("an endless line read to its end"),
                    Ok(_) => {}
                    Err(e) => break e.to_string(),
                }
            };
            assert!(e.contains("longer than 65536 bytes"), "{e}");
            assert!(e.len() < 400, "{e}");
            assert!(used.get() <= 4 << 20, "read {} bytes of an endless line", used.get());
        }
    }

    fn acc(line: &str) -> Access {
        match parse_line(line.as_bytes()) {
            Ok(Record::Access(a)) => a,
            other => panic!("{line}: {other:?}"),
        }
    }

    #[test]
    fn records() {
        assert_eq!(acc("0 7ffd1232"), Access::new(0x7ffd1230, 4, Kind::Read));
        assert_eq!(acc("1 0x10 8"), Access::new(0x10, 8, Kind::Write));
        assert_eq!(
            acc("\t3  ABC 2 alloc  # hi"),
            Access::new(0xabc, 2, Kind::Misc).with_part(Part::Allocator)
        );
        assert_eq!(acc("0 10 app"), Access::new(0x10, 4, Kind::Read));
        assert_eq!(acc("2 ffffffffffffffff 1\r"), Access::new(u64::MAX, 1, Kind::Fetch));
        assert_eq!(parse_line(b"4 0").unwrap(), Record::Flush);
        assert_eq!(parse_line(b"   ").unwrap(), Record::Blank);
        assert_eq!(parse_line(b"# x").unwrap(), Record::Blank);
    }

    #[test]
    fn errors_say_what_is_right() {
        for (line, want) in [
            ("7 1000", "label 7 is not one of"),
            ("x 1000", "label `x` is not a number"),
            ("0", "short line"),
            ("0 # c", "short line"),
            ("0 12g4", "address `12g4`"),
            ("0 11112222333344445", "at most 16 digits"),
            ("0 1000 0", "size `0`"),
            ("0 1000 5000", "size `5000`"),
            ("0 1000 8 heap", "unexpected `heap`"),
            ("0 1000 alloc 8", "unexpected `8`"),
            ("0 1000 comment", "unexpected `comment`"),
        ] {
            let e = parse_line(line.as_bytes()).unwrap_err();
            assert!(e.contains(want), "{line}: {e}");
        }
    }

    struct Collect(Vec<Access>, u64);
    impl Simulator for Collect {
        fn run(&mut self, b: &[Access]) {
            self.0.extend_from_slice(b)
        }
        fn flush(&mut self) {
            self.1 += 1
        }
    }

    #[test]
    fn source_reports_file_and_line() {
        let text = "0 10\n\n# c\n1 20\nzz 30\n";
        let mut src = DinSource::new(text.as_bytes(), "t.din");
        let mut sink = Collect(Vec::new(), 0);
        let e = drive(&mut src, &mut [&mut sink]).unwrap_err().to_string();
        assert!(e.starts_with("t.din:5: label `zz`"), "{e}");
        assert!(e.contains("(in `zz 30`)"), "{e}");
    }

    /// Random lines, valid and not: whenever the fast path takes a line it
    /// must read it exactly as `parse_line` does.
    #[test]
    fn fast_path_agrees_with_parse_line() {
        let mut r = crate::gen::Rng::new(9);
        let pick = |r: &mut crate::gen::Rng, xs: &[&str]| {
            xs[r.below(xs.len() as u64) as usize].to_string()
        };
        let mut taken = 0;
        for _ in 0..200_000 {
            let mut line = String::new();
            line += &pick(&mut r, &["0", "1", "2", "3", "4", "5", "x", "00", "", "#"]);
            line += &pick(&mut r, &[" ", "\t", "  ", "", " \t"]);
            line += &pick(&mut r, &["", "0x", "0X"]);
            line += &pick(
                &mut r,
                &[
                    "1000",
                    "7ffdAbC0",
                    "ffffffffffffffff",
                    "11112222333344445",
                    "0",
                    "g1",
                    "",
                    "DeadBeef",
                ],
            );
            line += &pick(
                &mut r,
                &["", " ", "\t", " 8", " 4096", " 4097", " 0", " 16 ", " 12345", "8", " 8x"],
            );
            line += &pick(
                &mut r,
                &[
                    "",
                    " alloc",
                    " app",
                    " allocator",
                    " application",
                    " heap",
                    "alloc",
                    " alloc 8",
                    " # c",
                    "#c",
                    "\r",
                ],
            );
            line += &pick(&mut r, &["", " ", " # tail", " x"]);
            let bytes = format!("{line}\n").into_bytes();
            if let Some((a, used)) = fast_line(&bytes) {
                taken += 1;
                assert_eq!(used, bytes.len(), "{line:?}");
                assert_eq!(parse_line(line.as_bytes()), Ok(Record::Access(a)), "{line:?}");
            }
            // Without its newline, a line is never taken by the fast path.
            assert!(fast_line(line.as_bytes()).is_none());
        }
        assert!(taken > 2_000, "{taken}");
    }

    /// Lines cut by the reader's buffer in every place, a last line without
    /// a newline, flushes and comments: the same accesses as line by line.
    #[test]
    fn buffer_boundaries_do_not_matter() {
        let mut text = String::new();
        let mut want = Vec::new();
        let mut r = crate::gen::Rng::new(4);
        for i in 0..3000u64 {
            match r.below(20) {
                0 => text += "4 0\n",
                1 => text += "# comment\n\n",
                _ => {
                    let a = Access::new(
                        r.below(1 << 40),
                        1 + r.below(64) as u32,
                        Kind::ALL[(i % 4) as usize],
                    )
                    .with_part(Part::ALL[r.below(2) as usize]);
                    write_din(string_writer(&mut text), &[a]).unwrap();
                    if a.kind != Kind::Fetch {
                        want.push(a);
                    }
                }
            }
        }
        text += "0 abc 2 alloc"; // no newline at the end
        want.push(Access::new(0xabc, 2, Kind::Read).with_part(Part::Allocator));
        for cap in [1, 7, 64, 1000, 1 << 20] {
            let mut src =
                DinSource::new(std::io::BufReader::with_capacity(cap, text.as_bytes()), "t");
            let mut sink = Collect(Vec::new(), 0);
            drive(&mut src, &mut [&mut sink]).unwrap();
            assert_eq!(sink.0, want, "capacity {cap}");
            assert_eq!(src.stats().lines as usize, text.lines().count());
        }
    }

    /// `write_din` into a String.
    fn string_writer(s: &mut String) -> impl std::io::Write + '_ {
        struct W<'a>(&'a mut String);
        impl std::io::Write for W<'_> {
            fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
                self.0.push_str(std::str::from_utf8(b).unwrap());
                Ok(b.len())
            }
            fn flush(&mut self) -> std::io::Result<()> {
                Ok(())
            }
        }
        W(s)
    }

    #[test]
    fn round_trip_flushes_and_fetches() {
        let stream = vec![
            Access::new(0x1000, 8, Kind::Read),
            Access::new(0x2001, 3, Kind::Write).with_part(Part::Allocator),
            Access::new(0x401000, 16, Kind::Fetch),
            Access::new(0x3000, 1, Kind::Misc),
        ];
        let mut text = Vec::new();
        write_din(&mut text, &stream).unwrap();
        text.extend_from_slice(b"4 0\n0 1000 8\n");
        for (fetches, n) in [(Fetches::Skip, 4), (Fetches::Simulate, 5)] {
            let mut src = DinSource::new(&text[..], "t").fetches(fetches);
            let mut sink = Collect(Vec::new(), 0);
            let st = drive(&mut src, &mut [&mut sink]).unwrap();
            assert_eq!((sink.0.len(), sink.1, st.flushes), (n, 1, 1));
            if fetches == Fetches::Simulate {
                assert_eq!(&sink.0[..4], &stream[..]);
            }
            assert_eq!(src.stats().lines, 6);
        }
    }
}
