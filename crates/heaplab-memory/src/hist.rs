//! A log-linear histogram for lifetimes: exact below 8, then four buckets per
//! power of two, so a percentile read from it is within 25% of the truth.
//!
//! ```text
//!   value   0 1 .. 7 │ [8,10) [10,12) [12,14) [14,16) │ [16,20) ... │ ...
//!   bucket  0 1 .. 7 │   8      9      10      11    │   12    ... │ up to 251
//! ```
//!
//! Counts live in a vector grown to the largest bucket used, so a site whose
//! objects all die young costs a few bytes.

use serde::Serialize;

#[derive(Debug, Clone, Default)]
pub struct Hist {
    counts: Vec<u64>,
    pub count: u64,
    pub max: u64,
    sum: u128,
}

fn bucket(v: u64) -> usize {
    if v < 8 {
        v as usize
    } else {
        let e = 63 - v.leading_zeros() as usize;
        let sub = ((v >> (e - 2)) & 3) as usize;
        8 + (e - 3) * 4 + sub
    }
}

/// The largest value bucket `i` holds.
fn upper(i: usize) -> u64 {
    if i < 8 {
        return i as u64;
    }
    let e = (i - 8) / 4 + 3;
    let sub = ((i - 8) % 4) as u64;
    let low = (4 + sub) << (e - 2);
    low.saturating_add((1u64 << (e - 2)) - 1)
}

/// Percentiles of a histogram: each is the upper bound of its bucket
/// (never above the maximum seen).
#[derive(Debug, Clone, Copy, Default, Serialize, PartialEq)]
pub struct Percentiles {
    pub count: u64,
    pub p50: u64,
    pub p90: u64,
    pub p99: u64,
    pub max: u64,
    pub mean: f64,
}

impl Hist {
    pub fn add(&mut self, v: u64) {
        let b = bucket(v);
        if self.counts.len() <= b {
            self.counts.resize(b + 1, 0);
        }
        self.counts[b] += 1;
        self.count += 1;
        self.max = self.max.max(v);
        self.sum += u128::from(v);
    }

    pub fn merge(&mut self, o: &Hist) {
        if self.counts.len() < o.counts.len() {
            self.counts.resize(o.counts.len(), 0);
        }
        for (a, b) in self.counts.iter_mut().zip(&o.counts) {
            *a += b;
        }
        self.count += o.count;
        self.max = self.max.max(o.max);
        self.sum += o.sum;
    }

    /// The upper bound of the bucket holding the q-quantile.
    pub fn quantile(&self, q: f64) -> u64 {
        if self.count == 0 {
            return 0;
        }
        let target = ((self.count as f64) * q).ceil().max(1.0) as u64;
        let mut acc = 0;
        for (i, &c) in self.counts.iter().enumerate() {
            acc += c;
            if acc >= target {
                return upper(i).min(self.max);
            }
        }
        self.max
    }

    pub fn percentiles(&self) -> Percentiles {
        Percentiles {
            count: self.count,
            p50: self.quantile(0.5),
            p90: self.quantile(0.9),
            p99: self.quantile(0.99),
            max: self.max,
            mean: if self.count == 0 { 0.0 } else { self.sum as f64 / self.count as f64 },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_cover_every_value_in_order() {
        let mut last = 0;
        for v in (0..5000u64).chain([u64::MAX / 2, u64::MAX]) {
            let b = bucket(v);
            assert!(v <= upper(b), "{v} above its bucket {b}'s bound {}", upper(b));
            assert!(b == 0 || v > upper(b - 1), "{v} belongs to an earlier bucket");
            assert!(b >= last || v > 4999);
            last = b;
        }
        assert_eq!(upper(bucket(u64::MAX)), u64::MAX);
    }

    #[test]
    fn percentiles_are_within_a_quarter() {
        let mut h = Hist::default();
        for v in 1..=1000u64 {
            h.add(v);
        }
        let p = h.percentiles();
        assert!(p.p50 >= 500 && p.p50 <= 625, "{p:?}");
        assert!(p.p90 >= 900 && p.p90 <= 1000, "{p:?}");
        assert_eq!(p.max, 1000);
        assert!((p.mean - 500.5).abs() < 1e-9);
    }
}
