//! HTML tables with right-aligned numbers and marked missing values.

use crate::axis::fmt_num;
use crate::esc;

/// One table cell.
#[derive(Debug, Clone)]
pub enum Cell {
    Text(String),
    /// A number shown with `digits` decimals (right-aligned).
    Num(f64, usize),
    /// A number shown short (3.5K, 1.2M).
    Short(f64),
    /// No value, with the reason shown (in red).
    Missing(String),
    /// Bytes with a binary unit ([`crate::human::bytes`]); sorts by value.
    Bytes(u64),
    /// A count with thousands separators ([`crate::human::count`]); sorts by value.
    Int(u64),
    /// Nanoseconds as a duration ([`crate::human::ns`]); sorts by value.
    Nanos(u64),
}

impl Cell {
    /// What the cell shows, as plain text (not escaped).
    pub fn shown(&self) -> String {
        match self {
            Cell::Text(t) | Cell::Missing(t) => t.clone(),
            Cell::Num(v, d) => format!("{v:.d$}"),
            Cell::Short(v) => fmt_num(*v),
            Cell::Bytes(v) => crate::human::bytes(*v),
            Cell::Int(v) => crate::human::count(*v),
            Cell::Nanos(v) => crate::human::ns(*v),
        }
    }

    pub fn text(s: impl Into<String>) -> Cell {
        Cell::Text(s.into())
    }
    /// `Num` for a value, `Missing("—")` for none.
    pub fn opt(v: Option<f64>, digits: usize) -> Cell {
        v.map(|v| Cell::Num(v, digits)).unwrap_or_else(|| Cell::Missing("—".into()))
    }
}

/// A table: header row, then rows of cells.
#[derive(Debug, Clone, Default)]
pub struct Table {
    pub caption: Option<String>,
    pub header: Vec<String>,
    pub rows: Vec<Vec<Cell>>,
}

impl Table {
    pub fn to_html(&self) -> String {
        let mut o = String::from("<table>");
        if let Some(c) = &self.caption {
            o.push_str(&format!("<caption>{}</caption>", esc(c)));
        }
        o.push_str("<thead><tr>");
        for h in &self.header {
            o.push_str(&format!("<th>{}</th>", esc(h)));
        }
        o.push_str("</tr></thead><tbody>\n");
        for r in &self.rows {
            o.push_str("<tr>");
            for c in r {
                match c {
                    Cell::Text(t) => o.push_str(&format!("<td>{}</td>", esc(t))),
                    Cell::Num(v, d) => o.push_str(&format!("<td class=\"num\">{:.*}</td>", d, v)),
                    Cell::Short(v) => {
                        o.push_str(&format!("<td class=\"num\">{}</td>", esc(&fmt_num(*v))))
                    }
                    Cell::Missing(t) => {
                        o.push_str(&format!("<td class=\"missing\">{}</td>", esc(t)))
                    }
                    Cell::Bytes(v) | Cell::Int(v) | Cell::Nanos(v) => o.push_str(&format!(
                        "<td class=\"num\" data-v=\"{v}\">{}</td>",
                        esc(&c.shown())
                    )),
                }
            }
            o.push_str("</tr>\n");
        }
        o.push_str("</tbody></table>");
        o
    }

    /// The table as terminal text: the caption on a line of its own, then
    /// the header and the rows with their columns aligned (the first to the
    /// left, the others to the right, two spaces apart), no trailing spaces.
    /// The caller escapes what it puts in cells that came from a trace.
    pub fn to_text(&self) -> String {
        use std::fmt::Write as _;
        let rows: Vec<Vec<String>> = std::iter::once(self.header.clone())
            .chain(self.rows.iter().map(|r| r.iter().map(Cell::shown).collect()))
            .collect();
        let n = rows.iter().map(Vec::len).max().unwrap_or(0);
        let mut w = vec![0usize; n];
        for r in &rows {
            for (i, c) in r.iter().enumerate() {
                w[i] = w[i].max(c.chars().count());
            }
        }
        let mut out = String::new();
        if let Some(c) = &self.caption {
            out.push_str(c);
            out.push('\n');
        }
        for r in &rows {
            let mut line = String::new();
            for (i, c) in r.iter().enumerate() {
                if i == 0 {
                    let _ = write!(line, "{c:<width$}", width = w[0]);
                } else {
                    let _ = write!(line, "  {c:>width$}", width = w[i]);
                }
            }
            out.push_str(line.trim_end());
            out.push('\n');
        }
        out
    }
}
