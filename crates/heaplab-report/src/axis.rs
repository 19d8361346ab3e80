//! Axes: mapping values to pixels on a linear or log scale, and the ticks.

/// A scale from data values to pixel offsets along one axis.
#[derive(Debug, Clone, Copy)]
pub struct Scale {
    pub min: f64,
    pub max: f64,
    pub log: bool,
    /// Pixels from the low end to the high end.
    pub length: f64,
}

impl Scale {
    /// A scale that covers `lo..=hi` with round ends: decades on a log scale,
    /// a multiple of the tick step on a linear one (whose low end is 0 when
    /// every value is positive). Non-positive values are ignored on a log scale.
    pub fn fit(lo: f64, hi: f64, log: bool, length: f64) -> Scale {
        if log {
            let lo = if lo > 0.0 { lo } else { hi.max(1.0) / 10.0 };
            let hi = if hi > lo { hi } else { lo * 10.0 };
            let min = 10f64.powf(lo.log10().floor());
            let max = 10f64.powf(hi.log10().ceil()).max(min * 10.0);
            Scale { min, max, log, length }
        } else {
            let lo = lo.min(0.0);
            let hi = if hi > lo { hi } else { lo + 1.0 };
            let step = nice_step((hi - lo) / 5.0);
            Scale { min: (lo / step).floor() * step, max: (hi / step).ceil() * step, log, length }
        }
    }

    /// Pixels from the low end for value v (clamped to the axis).
    pub fn px(&self, v: f64) -> f64 {
        let f = if self.log {
            let v = v.max(self.min);
            (v.log10() - self.min.log10()) / (self.max.log10() - self.min.log10())
        } else {
            (v - self.min) / (self.max - self.min)
        };
        f.clamp(0.0, 1.0) * self.length
    }

    /// Major ticks (value, label) and minor tick values.
    pub fn ticks(&self) -> (Vec<(f64, String)>, Vec<f64>) {
        let mut major = Vec::new();
        let mut minor = Vec::new();
        if self.log {
            let mut d = self.min;
            while d <= self.max * 1.0001 {
                major.push((d, fmt_num(d)));
                for m in [2.0, 5.0] {
                    if d * m < self.max {
                        minor.push(d * m);
                    }
                }
                d *= 10.0;
            }
        } else {
            let step = nice_step((self.max - self.min) / 5.0);
            let mut v = self.min;
            while v <= self.max + step * 1e-9 {
                major.push((v, fmt_num(v)));
                v += step;
            }
        }
        (major, minor)
    }
}

/// 1, 2 or 5 times a power of ten, at least x.
fn nice_step(x: f64) -> f64 {
    if x.is_nan() || x <= 0.0 || !x.is_finite() {
        return 1.0;
    }
    let p = 10f64.powf(x.log10().floor());
    for m in [1.0, 2.0, 5.0, 10.0] {
        if m * p >= x * 0.999 {
            return m * p;
        }
    }
    10.0 * p
}

/// A short label for a number: 0.25, 12, 3.5K, 1.2M, 4G.
pub fn fmt_num(v: f64) -> String {
    let a = v.abs();
    let (x, suffix) = if a >= 1e9 {
        (v / 1e9, "G")
    } else if a >= 1e6 {
        (v / 1e6, "M")
    } else if a >= 1e4 {
        (v / 1e3, "K")
    } else {
        (v, "")
    };
    let ax = x.abs();
    let s = if ax == 0.0 {
        "0".to_string()
    } else if ax >= 100.0 || (ax - ax.round()).abs() < 1e-9 {
        format!("{:.0}", x)
    } else if ax >= 10.0 {
        format!("{:.1}", x)
    } else if ax >= 0.1 {
        format!("{:.2}", x)
    } else {
        format!("{:.2e}", x)
    };
    let s = if s.contains('.') && !s.contains('e') {
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    } else {
        s
    };
    format!("{s}{suffix}")
}

/// The plot's frame, as every chart draws it: the y and x axis lines, the
/// x axis's title under the plot (when there is one) and the y axis's,
/// turned, at the left.
#[allow(clippy::too_many_arguments)]
pub(crate) fn frame(
    o: &mut String,
    left: f64,
    top: f64,
    base: f64,
    plot_w: f64,
    plot_h: f64,
    x_label: Option<&str>,
    y_label: &str,
) {
    use std::fmt::Write as _;
    let _ = write!(
        o,
        r##"<line x1="{left}" x2="{left}" y1="{top}" y2="{base}" stroke="#333"/><line x1="{left}" x2="{}" y1="{base}" y2="{base}" stroke="#333"/>"##,
        left + plot_w
    );
    if let Some(x) = x_label {
        let _ = write!(
            o,
            r#"<text x="{:.1}" y="{:.1}" font-size="12" text-anchor="middle">{}</text>"#,
            left + plot_w / 2.0,
            base + 36.0,
            crate::esc(x)
        );
    }
    let _ = write!(
        o,
        r#"<text transform="translate(16,{:.1}) rotate(-90)" font-size="12" text-anchor="middle">{}</text>"#,
        top + plot_h / 2.0,
        crate::esc(y_label)
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn log_scale_spans_decades() {
        let s = Scale::fit(3.0, 420.0, true, 100.0);
        assert_eq!((s.min, s.max), (1.0, 1000.0));
        assert!((s.px(10.0) - 100.0 / 3.0).abs() < 1e-9);
        let (major, minor) = s.ticks();
        assert_eq!(
            major.iter().map(|t| t.1.as_str()).collect::<Vec<_>>(),
            ["1", "10", "100", "1000"]
        );
        assert!(minor.contains(&20.0) && minor.contains(&500.0));
    }

    #[test]
    fn linear_scale_has_round_ends() {
        let s = Scale::fit(0.3, 87.0, false, 200.0);
        assert_eq!((s.min, s.max), (0.0, 100.0));
        assert_eq!(s.px(50.0), 100.0);
        assert_eq!(s.px(1e9), 200.0, "clamped");
        let labels: Vec<String> = s.ticks().0.into_iter().map(|t| t.1).collect();
        assert_eq!(labels, ["0", "20", "40", "60", "80", "100"]);
    }

    #[test]
    fn numbers_are_short() {
        assert_eq!(fmt_num(0.0), "0");
        assert_eq!(fmt_num(0.25), "0.25");
        assert_eq!(fmt_num(12.0), "12");
        assert_eq!(fmt_num(12.34), "12.3");
        assert_eq!(fmt_num(35_000.0), "35K");
        assert_eq!(fmt_num(1_250_000.0), "1.25M");
        assert_eq!(fmt_num(4e9), "4G");
    }
}
