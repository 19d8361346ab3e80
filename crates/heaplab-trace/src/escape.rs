//! Bytes from a trace (command lines, paths, thread and module names) on
//! their way into other languages. A trace is data someone else made: any
//! byte may be in it, so every place that puts trace bytes into C source or
//! onto a terminal goes through one of these functions.
//!
//! | function | output | what it guarantees |
//! |---|---|---|
//! | [`c_string`] | a C string literal, quotes included | the same bytes at run time; only printable ASCII in the source; no trigraph (`?` is `\?`), no `*/`, no line break |
//! | [`c_comment`] | text for `/* ... */` or `//` | printable ASCII only; cannot close or open a comment, splice a line or form a trigraph |
//! | [`terminal`] | text for a terminal or a log | no control character (escape sequences, carriage returns, bells) reaches the terminal; bytes that are not UTF-8 are shown as `\xNN` |
//!
//! HTML has its own escaper beside the report writer (`heaplab_report::esc`).

/// `bytes` as a C string literal: `"..."`. Printable ASCII stands for
/// itself except `"`, `\` and `?` (escaped, so that no trigraph such as
/// `??/` can form); `\n`, `\t` and `\r` use their escapes; every other byte
/// is a three-digit octal escape (octal, not hex, because a hex escape
/// swallows the hex digits that follow it). `*/` cannot appear, because `/`
/// after `*` is written `\057`.
pub fn c_string(bytes: &[u8]) -> String {
    let mut s = String::with_capacity(bytes.len() + 2);
    s.push('"');
    let mut prev = 0u8;
    for &b in bytes {
        match b {
            b'"' => s.push_str("\\\""),
            b'\\' => s.push_str("\\\\"),
            b'?' => s.push_str("\\?"),
            b'\n' => s.push_str("\\n"),
            b'\t' => s.push_str("\\t"),
            b'\r' => s.push_str("\\r"),
            b'/' if prev == b'*' => s.push_str("\\057"),
            0x20..=0x7e => s.push(b as char),
            _ => s.push_str(&format!("\\{b:03o}")),
        }
        prev = b;
    }
    s.push('"');
    s
}

/// `bytes` as text that is safe inside a C comment of either kind, on one
/// line: printable ASCII stands for itself, except that `\` is doubled (so
/// that nothing can end in a line splice), `?` after `?` becomes `\?` (no
/// trigraph), and `/` after `*` or `*` after `/` gets a `\` between them
/// (no `*/` to end the comment, no `/*` to nest one). Every other byte,
/// line breaks included, is `\xNN`.
pub fn c_comment(bytes: &[u8]) -> String {
    let mut s = String::with_capacity(bytes.len());
    let mut prev = 0u8;
    for &b in bytes {
        match b {
            b'\\' => s.push_str("\\\\"),
            b'?' if prev == b'?' => s.push_str("\\?"),
            b'/' if prev == b'*' => s.push_str("\\/"),
            b'*' if prev == b'/' => s.push_str("\\*"),
            0x20..=0x7e => s.push(b as char),
            _ => s.push_str(&format!("\\x{b:02x}")),
        }
        prev = b;
    }
    s
}

/// `bytes` for a terminal: valid UTF-8 text stands for itself, except
/// control characters (C0, DEL and the C1 range, which terminals act on),
/// which become `\n`, `\t`, `\r` or `\xNN` (`\u{NN}` for C1); a byte that is
/// not part of valid UTF-8 becomes `\xNN`. A backslash is left alone.
pub fn terminal(bytes: &[u8]) -> String {
    for_terminal(bytes, false)
}

fn for_terminal(bytes: &[u8], keep_breaks: bool) -> String {
    let mut s = String::with_capacity(bytes.len());
    for chunk in bytes.utf8_chunks() {
        for c in chunk.valid().chars() {
            match c {
                '\n' | '\t' if keep_breaks => s.push(c),
                '\n' => s.push_str("\\n"),
                '\t' => s.push_str("\\t"),
                '\r' => s.push_str("\\r"),
                c if (c as u32) < 0x20 || c as u32 == 0x7f => {
                    s.push_str(&format!("\\x{:02x}", c as u32))
                }
                c if (0x80..0xa0).contains(&(c as u32)) => {
                    s.push_str(&format!("\\u{{{:x}}}", c as u32))
                }
                c => s.push(c),
            }
        }
        for b in chunk.invalid() {
            s.push_str(&format!("\\x{b:02x}"));
        }
    }
    s
}

/// [`terminal`] for a string (a path's display form, an error message).
pub fn terminal_str(s: &str) -> String {
    terminal(s.as_bytes())
}

/// [`terminal`] for a message of several lines: line breaks (and tabs) are
/// kept, every other control character is escaped.
pub fn terminal_lines(s: &str) -> String {
    for_terminal(s.as_bytes(), true)
}

/// [`terminal`] for a path, byte for byte (a path need not be UTF-8).
pub fn terminal_path(p: &std::path::Path) -> String {
    use std::os::unix::ffi::OsStrExt;
    terminal(p.as_os_str().as_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn c_strings_hold_any_byte_and_no_trigraph() {
        assert_eq!(c_string(b"a??/b"), "\"a\\?\\?/b\"");
        assert_eq!(c_string(b"x*/y"), "\"x*\\057y\"");
        assert_eq!(c_string("é\n".as_bytes()), "\"\\303\\251\\n\"");
        assert_eq!(c_string(b"\x001"), "\"\\0001\"");
        assert!(c_string(&(0u8..=255).collect::<Vec<_>>())
            .bytes()
            .all(|b| (0x20..0x7f).contains(&b)));
    }

    #[test]
    fn comments_cannot_be_closed_spliced_or_trigraphed() {
        let c = c_comment(b"a */ b /* c ??/ d \\\n\xff");
        assert!(!c.contains("*/") && !c.contains("/*") && !c.contains("??"), "{c}");
        assert!(!c.ends_with('\\') && !c.contains('\n'), "{c}");
        assert!(c.ends_with("\\x0a\\xff"), "{c}");
    }

    #[test]
    fn terminals_get_no_control_characters() {
        assert_eq!(terminal(b"ok \x1b[31mred\x07"), "ok \\x1b[31mred\\x07");
        assert_eq!(terminal(b"caf\xc3\xa9 \xae"), "café \\xae");
        assert_eq!(terminal("\u{9b}".as_bytes()), "\\u{9b}");
    }
}
