//! Stacked areas over a shared x axis (memory over time: the top call sites
//! stacked, the rest on top), with an optional line drawn over them (the
//! whole program's maximum) and each band labelled directly at its right
//! end where it is tall enough, so colour is never the only key. Overlays
//! are further lines with x values of their own (an allocator's footprint,
//! sampled every N events), each in its own dash pattern and labelled at
//! its right end.
//!
//! ```text
//!   y ▲            ___ line (e.g. max live bytes per interval)
//!     │   ____----/    ┐ "other"
//!     │  /  band 2     ┤ label at the right edge when the band is ≥ 12 px
//!     │ /   band 1     ┘
//!     └──────────────────▶ x
//! ```

use crate::axis::Scale;
use crate::bars::legend_layout;
use crate::{color, esc};
use std::fmt::Write as _;

/// A stacked area chart. Bands are stacked in the order given (the first
/// at the bottom); every band has one value per x.
#[derive(Debug, Clone)]
pub struct StackedArea {
    pub title: String,
    pub x_label: String,
    pub y_label: String,
    pub x: Vec<f64>,
    pub bands: Vec<(String, Vec<f64>)>,
    /// A line over the bands: (name, one value per x).
    pub line: Option<(String, Vec<f64>)>,
    /// Lines with their own x values, drawn over everything.
    pub overlays: Vec<Overlay>,
    pub width: f64,
    pub height: f64,
}

impl Default for StackedArea {
    fn default() -> Self {
        StackedArea {
            title: String::new(),
            x_label: String::new(),
            y_label: String::new(),
            x: Vec::new(),
            bands: Vec::new(),
            line: None,
            overlays: Vec::new(),
            width: 760.0,
            height: 420.0,
        }
    }
}

/// A line with x values of its own (same units as the chart's x).
#[derive(Debug, Clone, Default)]
pub struct Overlay {
    /// In the legend and the tooltip.
    pub name: String,
    /// The direct label at the line's right end (short: it has 150 px).
    pub label: String,
    pub x: Vec<f64>,
    pub y: Vec<f64>,
}

/// Stroke colour and dash pattern of overlay `i`: dark colours from the
/// Okabe-Ito set, and a dash pattern of their own, so that no two overlays
/// differ by colour alone.
fn overlay_style(i: usize) -> (&'static str, &'static str) {
    const COLORS: [&str; 4] = ["#000000", "#d55e00", "#0072b2", "#009e73"];
    const DASHES: [&str; 5] = ["", "8 3", "2 2", "8 3 2 3", "12 2 2 2 2 2"];
    (COLORS[i % COLORS.len()], DASHES[i % DASHES.len()])
}

impl StackedArea {
    /// The chart as an `<svg>` element (scales to the width of its container).
    pub fn to_svg(&self) -> String {
        let mut names: Vec<&str> = self.bands.iter().map(|b| b.0.as_str()).collect();
        if let Some((n, _)) = &self.line {
            names.push(n);
        }
        for ov in &self.overlays {
            names.push(&ov.name);
        }
        let (left, right) = (70.0, 150.0);
        let plot_w = self.width - left - right;
        let (legend, rows) = legend_layout(&names, plot_w);
        let top = 34.0 + rows as f64 * 16.0 + 8.0;
        let bottom = 48.0;
        let plot_h = (self.height - top - bottom).max(60.0);
        let n = self.x.len();
        let mut cum = vec![vec![0.0f64; n]; self.bands.len() + 1];
        for (i, (_, v)) in self.bands.iter().enumerate() {
            let (below, above) = cum.split_at_mut(i + 1);
            for (j, c) in above[0].iter_mut().enumerate() {
                *c = below[i][j] + v.get(j).copied().unwrap_or(0.0).max(0.0);
            }
        }
        let mut ymax = cum.last().map_or(0.0, |c| c.iter().cloned().fold(0.0, f64::max));
        if let Some((_, l)) = &self.line {
            ymax = l.iter().cloned().fold(ymax, f64::max);
        }
        for ov in &self.overlays {
            ymax = ov.y.iter().cloned().fold(ymax, f64::max);
        }
        let (x0, x1) = match (self.x.first(), self.x.last()) {
            (Some(a), Some(b)) if b > a => (*a, *b),
            (Some(a), _) => (*a, *a + 1.0),
            _ => (0.0, 1.0),
        };
        let xs = Scale::fit(x0, x1, false, plot_w);
        let xs = Scale { min: x0.min(xs.max), ..xs };
        let ys = Scale::fit(0.0, ymax.max(1.0), false, plot_h);
        let ys = Scale { min: 0.0, ..ys };
        let base = top + plot_h;
        let h = top + plot_h + bottom;
        let mut o = String::new();
        let _ = write!(
            o,
            r#"<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" viewBox="0 0 {w} {h}" role="img" aria-label="{t}">"#,
            w = self.width,
            t = esc(&self.title)
        );
        let _ = write!(
            o,
            r#"<text x="{left}" y="20" font-size="15" font-weight="bold">{}</text>"#,
            esc(&self.title)
        );
        for (i, (x, row)) in legend.iter().enumerate() {
            let (lx, ly) = (left + x, 34.0 + *row as f64 * 16.0);
            let is_line = i == self.bands.len() && self.line.is_some();
            let ov = i.checked_sub(self.bands.len() + usize::from(self.line.is_some()));
            let mark = if let Some(k) = ov {
                let (c, d) = overlay_style(k);
                format!(
                    r#"<line x1="{lx}" x2="{}" y1="{}" y2="{}" stroke="{c}" stroke-width="2" stroke-dasharray="{d}"/>"#,
                    lx + 12.0,
                    ly - 4.0,
                    ly - 4.0
                )
            } else if is_line {
                format!(
                    r##"<line x1="{lx}" x2="{}" y1="{}" y2="{}" stroke="#222" stroke-width="1.5" stroke-dasharray="4 2"/>"##,
                    lx + 12.0,
                    ly - 4.0,
                    ly - 4.0
                )
            } else {
                format!(
                    r#"<rect x="{lx}" y="{}" width="12" height="9" fill="{}"/>"#,
                    ly - 9.0,
                    color(i)
                )
            };
            let _ = write!(
                o,
                r#"{mark}<text x="{}" y="{ly}" font-size="11">{}</text>"#,
                lx + 16.0,
                esc(names[i])
            );
        }
        let (ymaj, _) = ys.ticks();
        let (xmaj, _) = xs.ticks();
        for (v, label) in &ymaj {
            let py = base - ys.px(*v);
            let _ = write!(
                o,
                r##"<line x1="{left}" x2="{}" y1="{py:.1}" y2="{py:.1}" stroke="#e4e4e4"/><text x="{}" y="{:.1}" font-size="11" text-anchor="end">{}</text>"##,
                left + plot_w,
                left - 6.0,
                py + 4.0,
                esc(label)
            );
        }
        for (v, label) in &xmaj {
            let px = left + xs.px(*v);
            let _ = write!(
                o,
                r##"<text x="{px:.1}" y="{:.1}" font-size="11" text-anchor="middle">{}</text>"##,
                base + 15.0,
                esc(label)
            );
        }
        let px = |j: usize| left + xs.px(self.x[j]);
        for (i, (name, _)) in self.bands.iter().enumerate() {
            if n == 0 {
                break;
            }
            let mut pts: Vec<String> = (0..n)
                .map(|j| format!("{:.1},{:.1}", px(j), base - ys.px(cum[i + 1][j])))
                .collect();
            pts.extend(
                (0..n).rev().map(|j| format!("{:.1},{:.1}", px(j), base - ys.px(cum[i][j]))),
            );
            let _ = write!(
                o,
                r#"<polygon points="{}" fill="{}" fill-opacity="0.85" stroke="white" stroke-width="0.5"><title>{}</title></polygon>"#,
                pts.join(" "),
                color(i),
                esc(name)
            );
            // direct label at the right end, where the band is tall enough
            let (lo, hi) = (cum[i][n - 1], cum[i + 1][n - 1]);
            if ys.px(hi) - ys.px(lo) >= 12.0 {
                let short: String = name.chars().take(24).collect();
                let _ = write!(
                    o,
                    r#"<text x="{:.1}" y="{:.1}" font-size="10">{}</text>"#,
                    left + plot_w + 4.0,
                    base - ys.px((lo + hi) / 2.0) + 3.0,
                    esc(&short)
                );
            }
        }
        if let Some((name, l)) = &self.line {
            let pts: Vec<String> = (0..n.min(l.len()))
                .map(|j| format!("{:.1},{:.1}", px(j), base - ys.px(l[j])))
                .collect();
            let _ = write!(
                o,
                r##"<polyline fill="none" stroke="#222" stroke-width="1.5" stroke-dasharray="4 2" points="{}"><title>{}</title></polyline>"##,
                pts.join(" "),
                esc(name)
            );
        }
        for (k, ov) in self.overlays.iter().enumerate() {
            let (c, d) = overlay_style(k);
            let m = ov.x.len().min(ov.y.len());
            let pts: Vec<String> = (0..m)
                .map(|j| {
                    format!("{:.1},{:.1}", left + xs.px(ov.x[j]), base - ys.px(ov.y[j].max(0.0)))
                })
                .collect();
            let _ = write!(
                o,
                r#"<polyline class="overlay" fill="none" stroke="{c}" stroke-width="2" stroke-dasharray="{d}" points="{}"><title>{}</title></polyline>"#,
                pts.join(" "),
                esc(&ov.name)
            );
            if m > 0 {
                let short: String = ov.label.chars().take(24).collect();
                let _ = write!(
                    o,
                    r#"<text x="{:.1}" y="{:.1}" font-size="10" fill="{c}">{}</text>"#,
                    left + plot_w + 4.0,
                    base - ys.px(ov.y[m - 1].max(0.0)) - 3.0,
                    esc(&short)
                );
            }
        }
        crate::axis::frame(
            &mut o,
            left,
            top,
            base,
            plot_w,
            plot_h,
            Some(&self.x_label),
            &self.y_label,
        );
        o.push_str("</svg>");
        o
    }
}
