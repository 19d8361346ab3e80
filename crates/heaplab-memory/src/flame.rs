//! Flame graphs of allocations, of bytes at the peak and of leaks: folded
//! stacks (Brendan Gregg's format, which FlameGraph, inferno and speedscope
//! read) drawn by `inferno` as a self-contained SVG (its own script for
//! zoom and search, nothing fetched).
//!
//! ```text
//!   stack id ─▶ frames outermost first, each raw frame expanded to its
//!               functions (the inlined ones nearer the leaf) ─▶ "main;f;g"
//!   weight (allocs, bytes, peak, leaked, temporary) ─▶ "main;f;g 4096"
//!   equal lines summed, sorted ─▶ inferno::flamegraph ─▶ <svg>
//!   two runs: "stack before after" ─▶ a differential flame graph (red grew)
//! ```

use crate::analyze::{Analysis, StackStats};
use crate::sites::frames_of;
use crate::symbols::Symbolizer;
use serde::Serialize;
use std::collections::BTreeMap;

/// What a flame graph weighs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Weight {
    Allocs,
    Bytes,
    Peak,
    Leaked,
    Temporary,
}

impl Weight {
    pub fn of(self, s: &StackStats) -> u64 {
        match self {
            Weight::Allocs => s.allocs,
            Weight::Bytes => s.bytes,
            Weight::Peak => s.peak_bytes,
            Weight::Leaked => s.live_bytes,
            Weight::Temporary => s.temporary,
        }
    }
    /// The unit inferno names in tooltips.
    pub fn count_name(self) -> &'static str {
        match self {
            Weight::Allocs => "allocations",
            Weight::Temporary => "temporary allocations",
            _ => "bytes",
        }
    }
    pub fn title(self) -> &'static str {
        match self {
            Weight::Allocs => "Allocation calls",
            Weight::Bytes => "Bytes allocated",
            Weight::Peak => "Bytes live at the peak",
            Weight::Leaked => "Bytes leaked (live at the end)",
            Weight::Temporary => "Temporary allocations",
        }
    }
}

/// A frame name safe in the folded format: no `;`, no line breaks or other
/// control characters (a trace may hold any byte).
fn clean(name: &str) -> String {
    name.chars()
        .map(|c| {
            if c == ';' {
                ':'
            } else if c.is_control() {
                '?'
            } else {
                c
            }
        })
        .collect()
}

/// The folded stack of stack `id`: frames outermost first, `;`-separated.
pub fn folded_stack(a: &Analysis, id: u32, sym: &mut Symbolizer) -> String {
    let frames = frames_of(a, id, sym);
    if frames.is_empty() {
        return "[no stack recorded]".into();
    }
    let mut names: Vec<String> = Vec::new();
    for f in frames.iter().rev() {
        for n in f.names().into_iter().rev() {
            names.push(clean(&n));
        }
    }
    names.join(";")
}

/// Folded lines `stack weight`, equal stacks summed, zero weights left out,
/// sorted by stack.
pub fn folded(a: &Analysis, w: Weight, sym: &mut Symbolizer) -> BTreeMap<String, u64> {
    let mut out: BTreeMap<String, u64> = BTreeMap::new();
    for (id, st) in a.stacks.iter().enumerate() {
        let v = w.of(st);
        if v == 0 {
            continue;
        }
        let e = out.entry(folded_stack(a, id as u32, sym)).or_default();
        *e = e.saturating_add(v);
    }
    out
}

/// The folded text (one `stack weight` line each).
pub fn folded_text(lines: &BTreeMap<String, u64>) -> String {
    let mut s = String::new();
    for (k, v) in lines {
        s.push_str(k);
        s.push(' ');
        s.push_str(&v.to_string());
        s.push('\n');
    }
    s
}

fn options(title: &str, count_name: &str) -> inferno::flamegraph::Options<'static> {
    let mut o = inferno::flamegraph::Options::default();
    o.title = title.to_string();
    o.count_name = count_name.to_string();
    o.colors =
        inferno::flamegraph::color::Palette::Basic(inferno::flamegraph::color::BasicPalette::Mem);
    o.hash = true;
    o.deterministic = true;
    o.min_width = 0.1;
    // a fixed drawing width: inferno's "fluid" script measures the SVG
    // before its frame is laid out (and draws nothing); `scalable` then lets
    // the fixed drawing scale to its frame through the viewBox
    o.image_width = Some(1200);
    o
}

/// The SVG scaled to its container's width (its viewBox keeps the drawing).
fn scalable(svg: String) -> String {
    match svg.find("<svg") {
        Some(i) => {
            let (head, rest) = svg.split_at(i);
            format!("{head}{}", rest.replacen(" width=\"1200\"", " width=\"100%\"", 1))
        }
        None => svg,
    }
}

/// An SVG flame graph of folded lines. With no lines, a one-line note.
pub fn svg(lines: &BTreeMap<String, u64>, title: &str, count_name: &str) -> String {
    if lines.is_empty() {
        return String::new();
    }
    let mut o = options(title, count_name);
    let text = folded_text(lines);
    let mut out = Vec::new();
    match inferno::flamegraph::from_lines(&mut o, text.lines(), &mut out) {
        Ok(()) => scalable(String::from_utf8_lossy(&out).into_owned()),
        Err(_) => String::new(),
    }
}

/// A differential flame graph: the shape of `after`, coloured by the change
/// from `before` (red grew, blue shrank), as FlameGraph's difffolded does.
pub fn diff_svg(
    before: &BTreeMap<String, u64>,
    after: &BTreeMap<String, u64>,
    title: &str,
    count_name: &str,
) -> String {
    let mut lines = String::new();
    let keys: std::collections::BTreeSet<&String> = before.keys().chain(after.keys()).collect();
    for k in keys {
        let b = before.get(k).copied().unwrap_or(0);
        let a = after.get(k).copied().unwrap_or(0);
        lines.push_str(&format!("{k} {b} {a}\n"));
    }
    if lines.is_empty() {
        return String::new();
    }
    let mut o = options(title, count_name);
    o.colors = inferno::flamegraph::color::Palette::default();
    let mut out = Vec::new();
    match inferno::flamegraph::from_lines(&mut o, lines.lines(), &mut out) {
        Ok(()) => scalable(String::from_utf8_lossy(&out).into_owned()),
        Err(_) => String::new(),
    }
}

/// The SVG's height (for the frame that shows it in a page).
pub fn svg_height(svg: &str) -> Option<u64> {
    let i = svg.find("<svg")?;
    let rest = &svg[i..];
    let h = rest.find(" height=\"")? + 9;
    let end = rest[h..].find('"')?;
    rest[h..h + end].parse().ok()
}
