//! Line charts with linear or log axes: miss rate against cache size (paper
//! 000 Figures 6 to 8), page faults against memory size (Figures 2 and 3).

use crate::axis::{fmt_num, Scale};
use crate::bars::legend_layout;
use crate::{color, esc};
use std::fmt::Write as _;

/// One line: points in x order (they are drawn in the order given).
#[derive(Debug, Clone, Default)]
pub struct LineSeries {
    pub name: String,
    pub points: Vec<(f64, f64)>,
}

impl LineSeries {
    pub fn new(name: &str, points: Vec<(f64, f64)>) -> LineSeries {
        LineSeries { name: name.to_string(), points }
    }
}

/// A line chart. Points that a log axis cannot show (<= 0) are left out.
#[derive(Debug, Clone)]
pub struct Lines {
    pub title: String,
    pub x_label: String,
    pub y_label: String,
    pub series: Vec<LineSeries>,
    pub log_x: bool,
    pub log_y: bool,
    pub width: f64,
    pub height: f64,
}

impl Default for Lines {
    fn default() -> Self {
        Lines {
            title: String::new(),
            x_label: String::new(),
            y_label: String::new(),
            series: Vec::new(),
            log_x: false,
            log_y: false,
            width: 720.0,
            height: 420.0,
        }
    }
}

impl Lines {
    /// The chart as an `<svg>` element.
    pub fn to_svg(&self) -> String {
        let names: Vec<&str> = self.series.iter().map(|s| s.name.as_str()).collect();
        let (left, right) = (70.0, 20.0);
        let plot_w = self.width - left - right;
        let (legend, rows) = legend_layout(&names, plot_w);
        let top = 34.0 + rows as f64 * 16.0 + 8.0;
        let bottom = 48.0;
        let plot_h = (self.height - top - bottom).max(60.0);
        let ok = |(x, y): &(f64, f64)| {
            x.is_finite() && y.is_finite() && (!self.log_x || *x > 0.0) && (!self.log_y || *y > 0.0)
        };
        let pts: Vec<(f64, f64)> =
            self.series.iter().flat_map(|s| s.points.iter().copied()).filter(ok).collect();
        let (mut x0, mut x1, mut y0, mut y1) = (f64::MAX, f64::MIN, f64::MAX, f64::MIN);
        for (x, y) in &pts {
            x0 = x0.min(*x);
            x1 = x1.max(*x);
            y0 = y0.min(*y);
            y1 = y1.max(*y);
        }
        if pts.is_empty() {
            (x0, x1, y0, y1) = (1.0, 10.0, 1.0, 10.0);
        }
        let xs = Scale::fit(x0, x1, self.log_x, plot_w);
        let xs = if self.log_x { xs } else { Scale { min: x0.min(xs.max), ..xs } };
        let ys = Scale::fit(y0, y1, self.log_y, plot_h);
        let base = top + plot_h;
        let mut o = String::new();
        let _ = write!(
            o,
            r#"<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" viewBox="0 0 {w} {h}" role="img" aria-label="{t}">"#,
            w = self.width,
            h = top + plot_h + bottom,
            t = esc(&self.title)
        );
        let _ = write!(
            o,
            r#"<text x="{left}" y="20" font-size="15" font-weight="bold">{}</text>"#,
            esc(&self.title)
        );
        for (i, (x, row)) in legend.iter().enumerate() {
            let (lx, ly) = (left + x, 34.0 + *row as f64 * 16.0);
            let _ = write!(
                o,
                r#"<line x1="{lx}" x2="{}" y1="{}" y2="{}" stroke="{}" stroke-width="2"/><text x="{}" y="{ly}" font-size="11">{}</text>"#,
                lx + 12.0,
                ly - 4.0,
                ly - 4.0,
                color(i),
                lx + 16.0,
                esc(names[i])
            );
        }
        let (ymaj, ymin) = ys.ticks();
        let (xmaj, xmin) = xs.ticks();
        for v in ymin {
            let py = base - ys.px(v);
            let _ = write!(
                o,
                r##"<line x1="{left}" x2="{}" y1="{py:.1}" y2="{py:.1}" stroke="#f0f0f0"/>"##,
                left + plot_w
            );
        }
        for v in xmin {
            let px = left + xs.px(v);
            let _ = write!(
                o,
                r##"<line x1="{px:.1}" x2="{px:.1}" y1="{top}" y2="{base}" stroke="#f0f0f0"/>"##
            );
        }
        for (v, label) in &ymaj {
            let py = base - ys.px(*v);
            let _ = write!(
                o,
                r##"<line x1="{left}" x2="{}" y1="{py:.1}" y2="{py:.1}" stroke="#ddd"/><text x="{}" y="{:.1}" font-size="11" text-anchor="end">{}</text>"##,
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
                r##"<line x1="{px:.1}" x2="{px:.1}" y1="{top}" y2="{base}" stroke="#ddd"/><text x="{px:.1}" y="{:.1}" font-size="11" text-anchor="middle">{}</text>"##,
                base + 15.0,
                esc(label)
            );
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
        for (i, s) in self.series.iter().enumerate() {
            let p: Vec<String> = s
                .points
                .iter()
                .filter(|p| ok(p))
                .map(|(x, y)| format!("{:.1},{:.1}", left + xs.px(*x), base - ys.px(*y)))
                .collect();
            if p.is_empty() {
                continue;
            }
            let _ = write!(
                o,
                r#"<polyline fill="none" stroke="{}" stroke-width="2" points="{}"><title>{}</title></polyline>"#,
                color(i),
                p.join(" "),
                esc(&s.name)
            );
            for (pt, (x, y)) in p.iter().zip(s.points.iter().filter(|p| ok(p))) {
                let (cx, cy) = pt.split_once(',').unwrap_or(("0", "0"));
                let _ = write!(
                    o,
                    r#"<circle cx="{cx}" cy="{cy}" r="2.5" fill="{}"><title>{}: ({}, {})</title></circle>"#,
                    color(i),
                    esc(&s.name),
                    fmt_num(*x),
                    fmt_num(*y)
                );
            }
        }
        o.push_str("</svg>");
        o
    }
}
