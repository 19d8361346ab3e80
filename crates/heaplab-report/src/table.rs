//! Tables: one value per cell, shown the same way in HTML (right-aligned
//! numbers, missing values marked) and as terminal text (columns aligned,
//! the first left, the rest right).

use crate::axis::fmt_num;
use crate::esc;
use crate::num;
use std::fmt::Write as _;

/// One table cell.
#[derive(Debug, Clone, PartialEq)]
pub enum Cell {
    Text(String),
    /// A number shown with `digits` decimals (right-aligned).
    Num(f64, usize),
    /// A number shown short (3.5K, 1.2M).
    Short(f64),
    /// A number in scientific notation with `digits` decimals (1.20e-3).
    Sci(f64, usize),
    /// A count shown short ([`num::short_count`]: 4321, 12.3K, 1.50M).
    Count(u64),
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
    pub fn text(s: impl Into<String>) -> Cell {
        Cell::Text(s.into())
    }
    /// `Num` for a value, `Missing("—")` for none.
    pub fn opt(v: Option<f64>, digits: usize) -> Cell {
        v.map(|v| Cell::Num(v, digits)).unwrap_or_else(Cell::missing)
    }
    /// `Sci` for a value, `Missing("—")` for none.
    pub fn opt_sci(v: Option<f64>, digits: usize) -> Cell {
        v.map(|v| Cell::Sci(v, digits)).unwrap_or_else(Cell::missing)
    }
    /// `Count` for a value, `Missing("—")` for none.
    pub fn opt_count(v: Option<u64>) -> Cell {
        v.map(Cell::Count).unwrap_or_else(Cell::missing)
    }
    /// A value that is not there: "—".
    pub fn missing() -> Cell {
        Cell::Missing("—".into())
    }

    /// What the cell shows, as plain text (not escaped).
    pub fn shown(&self) -> String {
        match self {
            Cell::Text(t) | Cell::Missing(t) => t.clone(),
            Cell::Num(v, d) => format!("{v:.d$}"),
            Cell::Short(v) => fmt_num(*v),
            Cell::Sci(v, d) => format!("{v:.d$e}"),
            Cell::Count(n) => num::short_count(*n),
            Cell::Bytes(v) => crate::human::bytes(*v),
            Cell::Int(v) => crate::human::count(*v),
            Cell::Nanos(v) => crate::human::ns(*v),
        }
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
    /// Two columns of (label, value) text, no header: a report's provenance.
    pub fn key_values(caption: &str, rows: &[(String, String)]) -> Table {
        Table {
            caption: Some(caption.into()),
            header: vec!["".into(), "".into()],
            rows: rows
                .iter()
                .map(|(k, v)| vec![Cell::text(k.clone()), Cell::text(v.clone())])
                .collect(),
        }
    }

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
                let class = match c {
                    Cell::Text(_) => "",
                    Cell::Missing(_) => " class=\"missing\"",
                    _ => " class=\"num\"",
                };
                // exact values where the text is rounded, so that sorting is by value
                let v = match c {
                    Cell::Bytes(v) | Cell::Int(v) | Cell::Nanos(v) | Cell::Count(v) => {
                        format!(" data-v=\"{v}\"")
                    }
                    _ => String::new(),
                };
                o.push_str(&format!("<td{class}{v}>{}</td>", esc(&c.shown())));
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_aligns_columns_and_shows_cells_as_html_does() {
        let t = Table {
            caption: Some("Caption".into()),
            header: vec!["allocator".into(), "rate".into(), "faults".into(), "refs".into()],
            rows: vec![
                vec![
                    Cell::text("bsd"),
                    Cell::Num(1.5, 3),
                    Cell::Sci(0.0012, 2),
                    Cell::Count(12_345),
                ],
                vec![
                    Cell::text("gnulocal+pad8"),
                    Cell::missing(),
                    Cell::Sci(0.5, 2),
                    Cell::Count(7),
                ],
            ],
        };
        assert_eq!(
            t.to_text(),
            "Caption\n\
             allocator       rate   faults   refs\n\
             bsd            1.500  1.20e-3  12.3K\n\
             gnulocal+pad8      —  5.00e-1      7\n"
        );
        let h = t.to_html();
        assert!(
            h.contains("<td class=\"num\">1.20e-3</td>")
                && h.contains("<td class=\"missing\">—</td>")
        );
    }
}
