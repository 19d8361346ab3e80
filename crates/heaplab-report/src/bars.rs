//! Grouped bar charts: one group per category on the x axis (a program), one
//! bar per series in each group (an allocator), as paper 002 draws its
//! Figures 4, 5 and 6.
//!
//! ```text
//!        3      ┬  error bar: (lo, hi), e.g. the fastest and slowest run
//!   1  ┌──┐2  ┌┼┐   numbers: series i's direct label (the legend says
//!   ┌─┐│  │┌┐ │││   "3 name"), so colour is never the only key
//!   │ ││//││┆┆ │┴│   series 9 and on: the palette again, hatched
//!   └─┘└──┘└┘ └─┘   dashed outline, pale fill: an approximate value
//! ```

use crate::axis::{fmt_num, Scale};
use crate::{esc, swatch, swatch_defs};
use std::fmt::Write as _;

/// One series: a value per group (`None`: no value, drawn as a small cross).
#[derive(Debug, Clone, Default)]
pub struct Series {
    pub name: String,
    pub values: Vec<Option<f64>>,
    /// Per group, an error bar (lo, hi) in the chart's units; empty: none.
    pub ranges: Vec<Option<(f64, f64)>>,
    /// Per group, whether the value is approximate (drawn outlined and
    /// pale); empty: all exact.
    pub approximate: Vec<bool>,
}

impl Series {
    pub fn new(name: &str, values: Vec<Option<f64>>) -> Series {
        Series { name: name.to_string(), values, ..Series::default() }
    }
}

/// A grouped bar chart. With a single group it is a plain bar chart whose
/// bars are labelled by series name.
#[derive(Debug, Clone)]
pub struct Bars {
    pub title: String,
    pub y_label: String,
    pub groups: Vec<String>,
    pub series: Vec<Series>,
    /// A log y axis (decades).
    pub log_y: bool,
    /// A horizontal reference line, e.g. (1.0, "glibc") on a ratio chart.
    pub reference: Option<(f64, String)>,
    /// Values above this are drawn cut at it, with the value written on top
    /// (as paper 002 truncates its largest bars).
    pub clip: Option<f64>,
    /// The legend's words for an outlined (approximate) bar, shown when a
    /// bar is approximate.
    pub approximate_label: String,
    /// The legend's words for an error bar, shown when a bar has one.
    pub range_label: String,
    pub width: f64,
    pub height: f64,
}

impl Default for Bars {
    fn default() -> Self {
        Bars {
            title: String::new(),
            y_label: String::new(),
            groups: Vec::new(),
            series: Vec::new(),
            log_y: false,
            reference: None,
            clip: None,
            approximate_label: "outlined: approximate".into(),
            range_label: "whiskers: range".into(),
            width: 960.0,
            height: 380.0,
        }
    }
}

/// Legend rows for series names within `width` pixels: (x, row) per item.
pub(crate) fn legend_layout(names: &[&str], width: f64) -> (Vec<(f64, usize)>, usize) {
    let mut out = Vec::new();
    let (mut x, mut row) = (0.0, 0usize);
    for n in names {
        let w = 18.0 + 6.6 * n.chars().count() as f64 + 14.0;
        if x > 0.0 && x + w > width {
            x = 0.0;
            row += 1;
        }
        out.push((x, row));
        x += w;
    }
    (out, if names.is_empty() { 0 } else { row + 1 })
}

impl Bars {
    /// The chart as an `<svg>` element.
    pub fn to_svg(&self) -> String {
        let single = self.groups.len() == 1;
        // numbered legend entries: the number is each bar's direct label
        let numbered = !single && self.series.len() > 1;
        let mut labels: Vec<String> = self
            .series
            .iter()
            .enumerate()
            .map(|(i, s)| if numbered { format!("{} {}", i + 1, s.name) } else { s.name.clone() })
            .collect();
        let any_approx = self.series.iter().any(|s| s.approximate.iter().any(|a| *a));
        let any_range = self.series.iter().any(|s| s.ranges.iter().any(|r| r.is_some()));
        let n_series = labels.len();
        if any_approx {
            labels.push(self.approximate_label.clone());
        }
        if any_range {
            labels.push(self.range_label.clone());
        }
        let names: Vec<&str> = labels.iter().map(|s| s.as_str()).collect();
        let (left, right) = (70.0, 20.0);
        let plot_w = self.width - left - right;
        let (legend, rows) = if single && !any_approx && !any_range {
            (Vec::new(), 0)
        } else {
            legend_layout(&names, plot_w)
        };
        let top = 34.0 + rows as f64 * 16.0 + 8.0;
        let bottom = if single { 90.0 } else { 40.0 };
        let plot_h = (self.height - top - bottom).max(60.0);
        let height = top + plot_h + bottom;

        let vals = self.series.iter().flat_map(|s| {
            s.values
                .iter()
                .flatten()
                .copied()
                .chain(s.ranges.iter().flatten().flat_map(|&(a, b)| [a, b]))
        });
        let vals: Vec<f64> = vals.filter(|v| v.is_finite() && (!self.log_y || *v > 0.0)).collect();
        let mut hi = vals.iter().copied().fold(f64::MIN, f64::max);
        let lo = vals.iter().copied().fold(f64::MAX, f64::min);
        if let Some(c) = self.clip {
            hi = hi.min(c);
        }
        if let Some((r, _)) = &self.reference {
            hi = hi.max(*r);
        }
        if vals.is_empty() {
            hi = 1.0;
        }
        let y = Scale::fit(if vals.is_empty() { 1.0 } else { lo }, hi, self.log_y, plot_h);

        let mut o = String::new();
        let _ = write!(
            o,
            r#"<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" viewBox="0 0 {w} {h}" role="img" aria-label="{t}">"#,
            w = self.width,
            h = height,
            t = esc(&self.title)
        );
        let ids = swatch_defs(&mut o, self.series.len());
        let title = match (single, self.groups.first()) {
            (true, Some(g)) if !g.is_empty() => format!("{} — {g}", self.title),
            _ => self.title.clone(),
        };
        let _ = write!(
            o,
            r#"<text x="{}" y="20" font-size="15" font-weight="bold">{}</text>"#,
            left,
            esc(&title)
        );
        for (i, (x, row)) in legend.iter().enumerate() {
            let lx = left + x;
            let ly = 34.0 + *row as f64 * 16.0;
            let mark = if i < n_series {
                format!(
                    r#"<rect x="{lx}" y="{}" width="12" height="12" fill="{}"/>"#,
                    ly - 10.0,
                    swatch(&ids, i)
                )
            } else if any_approx && i == n_series {
                format!(
                    r##"<rect class="approximate" x="{lx}" y="{}" width="11" height="11" fill="#ccc" fill-opacity="0.35" stroke="#333" stroke-width="1.5" stroke-dasharray="3 2"/>"##,
                    ly - 9.5
                )
            } else {
                format!(
                    r##"<path d="M{a} {t}h6M{b} {t}v10M{a} {u}h6" stroke="#222" stroke-width="1.2" fill="none"/>"##,
                    a = lx + 3.0,
                    b = lx + 6.0,
                    t = ly - 10.0,
                    u = ly
                )
            };
            let _ = write!(
                o,
                r#"{mark}<text x="{}" y="{}" font-size="11">{}</text>"#,
                lx + 16.0,
                ly,
                esc(names[i])
            );
        }
        // axes and grid
        let base = top + plot_h;
        let (major, minor) = y.ticks();
        for v in minor {
            let py = base - y.px(v);
            let _ = write!(
                o,
                r##"<line x1="{left}" x2="{}" y1="{py:.1}" y2="{py:.1}" stroke="#f0f0f0"/>"##,
                left + plot_w
            );
        }
        for (v, label) in &major {
            let py = base - y.px(*v);
            let _ = write!(
                o,
                r##"<line x1="{left}" x2="{}" y1="{py:.1}" y2="{py:.1}" stroke="#ddd"/><text x="{}" y="{:.1}" font-size="11" text-anchor="end">{}</text>"##,
                left + plot_w,
                left - 6.0,
                py + 4.0,
                esc(label)
            );
        }
        crate::axis::frame(&mut o, left, top, base, plot_w, plot_h, None, &self.y_label);

        // bars
        let ng = self.groups.len().max(1);
        let ns = self.series.len().max(1);
        let group_w = plot_w / ng as f64;
        let bar_w = (group_w * 0.84 / ns as f64).max(1.0);
        for (g, group) in self.groups.iter().enumerate() {
            let gx = left + g as f64 * group_w + group_w * 0.08;
            for (s, series) in self.series.iter().enumerate() {
                let bx = gx + s as f64 * bar_w;
                let v = series.values.get(g).copied().flatten();
                let tip = format!(
                    "{} — {}: {}",
                    series.name,
                    group,
                    v.map(fmt_num).unwrap_or_else(|| "no value".into())
                );
                match v {
                    Some(v) if v.is_finite() && (!self.log_y || v > 0.0) => {
                        let clipped = self.clip.is_some_and(|c| v > c);
                        let hpx = y.px(v);
                        let approx = series.approximate.get(g).copied().unwrap_or(false);
                        let style = if approx {
                            format!(
                                r#" class="approximate" fill-opacity="0.35" stroke="{}" stroke-width="1.5" stroke-dasharray="3 2""#,
                                crate::color(s)
                            )
                        } else {
                            r#" class="exact""#.to_string()
                        };
                        let _ = write!(
                            o,
                            r#"<rect x="{bx:.1}" y="{:.1}" width="{:.1}" height="{hpx:.1}" fill="{}"{style}><title>{}{}</title></rect>"#,
                            base - hpx,
                            (bar_w - 1.0).max(0.8),
                            swatch(&ids, s),
                            esc(&tip),
                            if approx { " (approximate)" } else { "" }
                        );
                        let mut label_y = base - hpx - if clipped { 13.0 } else { 3.0 };
                        if let Some(Some((lo, hi))) = series.ranges.get(g) {
                            let top = self.clip.map_or(*hi, |c| hi.min(c));
                            let (y1, y2) = (base - y.px(*lo), base - y.px(top));
                            let cx = bx + bar_w / 2.0;
                            let cap = (bar_w * 0.3).clamp(1.0, 4.0);
                            label_y = label_y.min(y2 - 3.0);
                            let _ = write!(
                                o,
                                r##"<path class="errbar" data-lo="{lo}" data-hi="{hi}" d="M{:.1} {y1:.1}h{:.1}M{cx:.1} {y1:.1}V{y2:.1}M{:.1} {y2:.1}h{:.1}" stroke="#222" stroke-width="1.2" fill="none"><title>{}: {} to {}</title></path>"##,
                                cx - cap,
                                2.0 * cap,
                                cx - cap,
                                2.0 * cap,
                                esc(&series.name),
                                fmt_num(*lo),
                                fmt_num(*hi)
                            );
                        }
                        if numbered {
                            // the series' number above its bar (its direct label)
                            let ty = label_y;
                            let _ = if bar_w >= 11.0 {
                                write!(
                                    o,
                                    r#"<text class="barlabel" x="{:.1}" y="{ty:.1}" font-size="9" text-anchor="middle">{}</text>"#,
                                    bx + bar_w / 2.0,
                                    s + 1
                                )
                            } else {
                                write!(
                                    o,
                                    r#"<text class="barlabel" transform="translate({:.1},{ty:.1}) rotate(-90)" font-size="8">{}</text>"#,
                                    bx + bar_w / 2.0 + 3.0,
                                    s + 1
                                )
                            };
                        }
                        if clipped {
                            let _ = write!(
                                o,
                                r##"<path d="M{:.1} {:.1} l{:.1} -4 l{:.1} 4" stroke="#fff" stroke-width="2" fill="none"/><text x="{:.1}" y="{:.1}" font-size="9" text-anchor="middle">{}</text>"##,
                                bx,
                                base - hpx + 12.0,
                                bar_w / 2.0,
                                bar_w / 2.0,
                                bx + bar_w / 2.0,
                                base - hpx - 3.0,
                                esc(&fmt_num(v))
                            );
                        }
                    }
                    _ => {
                        let _ = write!(
                            o,
                            r##"<text x="{:.1}" y="{:.1}" font-size="9" fill="#a00" text-anchor="middle"><title>{}</title>×</text>"##,
                            bx + bar_w / 2.0,
                            base - 3.0,
                            esc(&tip)
                        );
                    }
                }
                if single {
                    let _ = write!(
                        o,
                        r#"<text transform="translate({:.1},{:.1}) rotate(-45)" font-size="11" text-anchor="end">{}</text>"#,
                        bx + bar_w / 2.0 + 3.0,
                        base + 12.0,
                        esc(&series.name)
                    );
                }
            }
            if !single {
                let _ = write!(
                    o,
                    r#"<text x="{:.1}" y="{:.1}" font-size="12" text-anchor="middle">{}</text>"#,
                    left + (g as f64 + 0.5) * group_w,
                    base + 18.0,
                    esc(group)
                );
            }
        }
        if let Some((r, label)) = &self.reference {
            let py = base - y.px(*r);
            let _ = write!(
                o,
                r##"<line x1="{left}" x2="{}" y1="{py:.1}" y2="{py:.1}" stroke="#000" stroke-dasharray="5 3"/><text x="{}" y="{:.1}" font-size="10" text-anchor="end">{}</text>"##,
                left + plot_w,
                left + plot_w,
                py - 3.0,
                esc(label)
            );
        }
        o.push_str("</svg>");
        o
    }
}
