//! The threshold search of paper 001 §3: "selecting an initial position in
//! the threshold space, and then exploring outward from that initial
//! location ... concerned primarily with avoiding bad values".
//!
//! A candidate is scored without running anything: the predictor is trained
//! on the training run with the candidate thresholds, applied to the
//! threshold run, and the placement it gives is scored by a model of paging:
//!
//! ```text
//!   each segment is packed: an object born when its segment holds L live
//!   bytes sits at [L, L + size) of that segment (freed space is reused, as
//!   a compacting allocator would; a segment spans ⌈peak live bytes / page⌉ pages)
//!   an object's references spread evenly over its bytes → references per page
//!   C(m) = references that fall on the m hottest pages
//!   score = Σ_m (R − C_pred(m)) / Σ_m (R − C_default(m))      m = 1 .. most pages
//! ```
//!
//! `R − C(m)` is what a memory of m frames holding the hottest pages misses:
//! the score is the model's page misses summed over every memory size,
//! relative to the same model with one segment (DEFAULT = 1, lower is
//! better). It rewards gathering the referenced objects on few pages, and
//! punishes the pages segments cost. It is a model: the evaluation runs the
//! real allocator.
//!
//! The search walks a grid whose coordinates are powers of two times the
//! start point. Each sweep tries, along each of the four coordinates, the
//! points 2^±k away for k on a ladder from 1 to 20 (outward, so that a
//! plateau where a small step changes nothing does not stop it), moves to
//! the best if it improves, and sweeps again from there, until nothing
//! improves or the budget is spent. Candidates that break the non-overlap
//! rule are skipped. Each evaluation is O(objects).

use crate::classes::{Class, Thresholds};
use crate::objects::Profile;
use crate::predictors::{apply, classify, Features, Kind, ObjFeatures, TrainOptions};
use serde::{Deserialize, Serialize};

/// Births and deaths of a run's objects, in time order (deaths first at a tie).
pub struct Timeline {
    /// (object index << 1) | birth.
    steps: Vec<u64>,
    sizes: Vec<u64>,
    refs: Vec<u64>,
}

impl Timeline {
    pub fn new(p: &Profile) -> Timeline {
        let mut ev: Vec<(u64, u8, u64)> = Vec::with_capacity(2 * p.objects.len());
        for (i, o) in p.objects.iter().enumerate() {
            ev.push((o.born, 1, i as u64));
            if let Some(d) = o.died {
                ev.push((d, 0, i as u64));
            }
        }
        ev.sort_unstable();
        Timeline {
            steps: ev.iter().map(|&(_, b, i)| (i << 1) | u64::from(b)).collect(),
            sizes: p.objects.iter().map(|o| o.max_size).collect(),
            refs: p.objects.iter().map(|o| o.refs()).collect(),
        }
    }

    /// Peak live bytes and references of each segment, for a placement.
    pub fn segments(&self, seg: &[Class]) -> ([u64; 4], [u64; 4]) {
        let mut cur = [0u64; 4];
        let mut peak = [0u64; 4];
        for &s in &self.steps {
            let i = (s >> 1) as usize;
            let c = seg[i].index();
            if s & 1 == 1 {
                cur[c] += self.sizes[i];
                peak[c] = peak[c].max(cur[c]);
            } else {
                cur[c] -= self.sizes[i];
            }
        }
        let mut refs = [0u64; 4];
        for (i, &r) in self.refs.iter().enumerate() {
            refs[seg[i].index()] += r;
        }
        (peak, refs)
    }

    /// References per page of each segment under the packing model, hottest
    /// first over all segments.
    pub fn page_refs(&self, seg: &[Class], page: u64) -> Vec<f64> {
        let mut cur = [0u64; 4];
        let mut peak = [0u64; 4];
        let mut addr = vec![0u64; self.sizes.len()];
        for &s in &self.steps {
            let i = (s >> 1) as usize;
            let c = seg[i].index();
            if s & 1 == 1 {
                addr[i] = cur[c];
                cur[c] += self.sizes[i];
                peak[c] = peak[c].max(cur[c]);
            } else {
                cur[c] -= self.sizes[i];
            }
        }
        let mut pages: Vec<Vec<f64>> =
            (0..4).map(|c| vec![0.0; peak[c].div_ceil(page) as usize + 1]).collect();
        for (i, &r) in self.refs.iter().enumerate() {
            if r == 0 {
                continue;
            }
            let (lo, n) = (addr[i], self.sizes[i].max(1));
            let per_byte = r as f64 / n as f64;
            let v = &mut pages[seg[i].index()];
            let (first, last) = (lo / page, (lo + n - 1) / page);
            for pg in first..=last {
                let a = (pg * page).max(lo);
                let b = ((pg + 1) * page).min(lo + n);
                v[pg as usize] += per_byte * (b - a) as f64;
            }
        }
        let mut all: Vec<f64> = pages
            .into_iter()
            .zip(peak)
            .flat_map(|(v, p)| v.into_iter().take(p.div_ceil(page) as usize))
            .collect();
        all.sort_by(|a, b| b.total_cmp(a));
        all
    }

    /// The paging model's score of a placement (DEFAULT = 1, lower is better).
    pub fn score(&self, seg: &[Class], page: u64) -> f64 {
        let pred = self.page_refs(seg, page);
        let def = self.page_refs(&vec![Class::Other; seg.len()], page);
        let r: f64 = def.iter().sum();
        let n = pred.len().max(def.len());
        let (mut cp, mut cd, mut miss_p, mut miss_d) = (0.0, 0.0, 0.0, 0.0);
        for m in 0..n {
            cp += pred.get(m).copied().unwrap_or(0.0);
            cd += def.get(m).copied().unwrap_or(0.0);
            miss_p += (r - cp).max(0.0);
            miss_d += (r - cd).max(0.0);
        }
        if miss_d <= 1e-9 {
            if miss_p <= 1e-9 {
                1.0
            } else {
                f64::INFINITY
            }
        } else {
            miss_p / miss_d
        }
    }
}

/// One candidate the search evaluated.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Candidate {
    pub thresholds: Thresholds,
    pub score: f64,
    /// Objects of the threshold run predicted into each segment.
    pub predicted: [u64; 4],
}

/// What the search found, and how.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SearchResult {
    pub predictor: String,
    pub start: Thresholds,
    pub best: Candidate,
    /// Every candidate evaluated, in order.
    pub evaluated: Vec<Candidate>,
    /// Candidates skipped because they broke the non-overlap rule.
    pub skipped_overlap: usize,
    pub page_size: u64,
}

/// How to search.
#[derive(Debug, Clone, Copy)]
pub struct SearchOptions {
    pub train: TrainOptions,
    /// Page size of the paging model.
    pub page_size: u64,
    /// The most candidates to evaluate.
    pub budget: usize,
    /// Start here instead of at the quantiles of the threshold run.
    pub start: Option<Thresholds>,
}

impl Default for SearchOptions {
    fn default() -> Self {
        SearchOptions { train: TrainOptions::default(), page_size: 4096, budget: 400, start: None }
    }
}

fn quantile(v: &mut [f64], q: f64) -> f64 {
    if v.is_empty() {
        return 0.0;
    }
    v.sort_by(|a, b| a.total_cmp(b));
    v[((v.len() - 1) as f64 * q).round() as usize]
}

/// The start point: quantiles of the threshold run's objects (the maximum SL
/// age at the 25th percentile of lifetimes, the minimum HR age at the median,
/// the minimum HR density at the 90th percentile of densities, the maximum
/// not-HR density at the 25th), nudged to obey the non-overlap rule.
pub fn start_point(p: &Profile) -> Thresholds {
    let mut life: Vec<f64> = p.objects.iter().map(|o| p.lifetime(o) as f64).collect();
    let mut dens: Vec<f64> = p.objects.iter().map(|o| o.density()).collect();
    let sl = quantile(&mut life, 0.25).max(1.0) as u64;
    let hr_age = (quantile(&mut life, 0.5) as u64).max(sl * 2);
    let hr_d = quantile(&mut dens, 0.9).max(1.0 / 64.0);
    let mut nhr = quantile(&mut dens, 0.25).max(1.0 / 1024.0);
    if nhr >= hr_d {
        nhr = hr_d / 4.0;
    }
    Thresholds { sl_max_age: sl, hr_min_age: hr_age, hr_min_density: hr_d, nhr_max_density: nhr }
}

/// The distances (powers of two) tried along each coordinate, outward.
const LADDER: [i32; 10] = [1, 2, 3, 4, 6, 8, 10, 13, 16, 20];

fn at(start: &Thresholds, e: [i32; 4]) -> Thresholds {
    let f = |x: f64, k: i32| x * 2f64.powi(k);
    Thresholds {
        sl_max_age: f(start.sl_max_age as f64, e[0]).round().max(0.0) as u64,
        hr_min_age: f(start.hr_min_age as f64, e[1]).round().max(1.0) as u64,
        hr_min_density: f(start.hr_min_density, e[2]),
        nhr_max_density: f(start.nhr_max_density, e[3]),
    }
}

/// Searches thresholds for `kind`: trained on `train`, scored on `thresh`.
pub fn search(kind: Kind, train: &Profile, thresh: &Profile, opt: &SearchOptions) -> SearchResult {
    let start = opt.start.unwrap_or_else(|| start_point(thresh));
    let feats = Features::new(kind, train);
    let enc: ObjFeatures = feats.encode(thresh);
    let tl = Timeline::new(thresh);
    let mut evaluated: Vec<Candidate> = Vec::new();
    let mut seen = std::collections::HashMap::new();
    let mut skipped = 0usize;
    let mut eval = |e: [i32; 4], evaluated: &mut Vec<Candidate>| -> Option<f64> {
        if let Some(&s) = seen.get(&e) {
            return s;
        }
        let t = at(&start, e);
        let s = if t.validate().is_err() || evaluated.len() >= opt.budget {
            if t.validate().is_err() {
                skipped += 1;
            }
            None
        } else {
            let classes = classify(train, &t);
            let placed = if kind.trained() {
                apply(&enc, &feats.decide(&classes, opt.train.purity))
            } else {
                crate::predictors::Predictor::untrained(kind).predict_all(thresh)
            };
            let score = tl.score(&placed, opt.page_size);
            let mut predicted = [0u64; 4];
            for c in &placed {
                predicted[c.index()] += 1;
            }
            evaluated.push(Candidate { thresholds: t, score, predicted });
            Some(score)
        };
        seen.insert(e, s);
        s
    };
    // Outward from the start: along each coordinate, every distance of the
    // ladder in both directions (so that a plateau, where a small step changes
    // nothing, does not stop the search); move to the best candidate of the
    // sweep if it improves, and sweep again from there.
    let mut cur = [0i32; 4];
    let mut cur_s = eval(cur, &mut evaluated).unwrap_or(f64::INFINITY);
    loop {
        let mut best: Option<([i32; 4], f64)> = None;
        for d in 0..4 {
            for step in LADDER {
                for sign in [-1, 1] {
                    let mut e = cur;
                    e[d] += sign * step;
                    if let Some(s) = eval(e, &mut evaluated) {
                        if s < best.map_or(cur_s, |b| b.1) {
                            best = Some((e, s));
                        }
                    }
                }
            }
        }
        match best {
            Some((e, s)) if s < cur_s - 1e-12 => {
                cur = e;
                cur_s = s;
            }
            _ => break,
        }
        if evaluated.len() >= opt.budget {
            break;
        }
    }
    let best = evaluated
        .iter()
        .min_by(|a, b| a.score.total_cmp(&b.score))
        .cloned()
        .unwrap_or(Candidate { thresholds: start, score: f64::INFINITY, predicted: [0; 4] });
    SearchResult {
        predictor: kind.name(),
        start,
        best,
        evaluated,
        skipped_overlap: skipped,
        page_size: opt.page_size,
    }
}
