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
}

impl Cell {
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
                }
            }
            o.push_str("</tr>\n");
        }
        o.push_str("</tbody></table>");
        o
    }
}
