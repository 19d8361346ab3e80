//! The whole protocol of paper 001 on one program, and the figures it gives.
//!
//! ```text
//!   train, threshold, test traces ─▶ objects
//!   thresholds: searched with one predictor (STACK by default), trained on
//!               train and scored on threshold (search.rs); or given
//!   each predictor: trained on train with those thresholds ─▶ table ─▶ libNAME.so
//!   DEFAULT, each predictor, RANDOM: measured on test (evaluate.rs)
//!   ─▶ Table 2 (the runs), Table 3 (pages per segment / DEFAULT), Table 4
//!      (references per page per segment / DEFAULT), Figure 3 (cumulative
//!      references / DEFAULT), Figure 4 (page faults / DEFAULT against memory),
//!      Figure 6 (cache misses / DEFAULT), and precision and recall per class
//! ```

use crate::accuracy::{accuracy, Accuracy};
use crate::classes::{Class, Thresholds};
use crate::evaluate::Measured;
use crate::objects::Profile;
use crate::predictors::{classify, Kind, Predictor};
use crate::runtime::{Costs, WallTimes};
use crate::search::SearchResult;
use serde::{Deserialize, Serialize};

/// Paper 001 Table 2 for one run.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct RunSummary {
    pub role: String,
    pub trace: String,
    pub command: String,
    pub instructions: u64,
    pub total_bytes: u64,
    pub total_objects: u64,
    pub loads: u64,
    pub stores: u64,
    pub max_bytes: u64,
    pub max_objects: u64,
    /// Distinct allocation sites at depth 1 and 3.
    pub sites_depth1: usize,
    pub sites_depth3: usize,
    /// Objects resized by realloc (one object each, §5.1).
    pub reallocated: u64,
    pub has_sp: bool,
}

/// Table 2's row of a run.
pub fn summarize(role: &str, p: &Profile) -> RunSummary {
    let mut ev: Vec<(u64, i64, u64)> = Vec::with_capacity(2 * p.objects.len());
    for o in &p.objects {
        ev.push((o.born, 1, o.max_size));
        if let Some(d) = o.died {
            ev.push((d, -1, o.max_size));
        }
    }
    ev.sort_unstable_by_key(|e| (e.0, e.1));
    let (mut b, mut n, mut mb, mut mn) = (0i64, 0i64, 0i64, 0i64);
    for (_, d, s) in ev {
        b += d * s as i64;
        n += d;
        mb = mb.max(b);
        mn = mn.max(n);
    }
    RunSummary {
        role: role.into(),
        trace: p.path.display().to_string(),
        command: p.command.clone(),
        instructions: p.instructions,
        total_bytes: p.total_bytes(),
        total_objects: p.objects.len() as u64,
        loads: p.objects.iter().map(|o| o.loads).sum(),
        stores: p.objects.iter().map(|o| o.stores).sum(),
        max_bytes: mb as u64,
        max_objects: mn as u64,
        sites_depth1: p.sites(1),
        sites_depth3: p.sites(3),
        reallocated: p.objects.iter().filter(|o| o.reallocs > 0).count() as u64,
        has_sp: p.has_sp,
    }
}

/// One predictor's training and prediction, before measuring.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Trained {
    pub name: String,
    pub kind: Kind,
    pub predictor: Predictor,
    /// Table entries per class (other, SL, HR, not-HR).
    pub entries: [usize; 4],
    /// On the test run: objects predicted into each segment, and how well.
    pub predicted_objects: [u64; 4],
    pub accuracy: Accuracy,
    /// The placement model's score on the test run (search.rs; DEFAULT = 1).
    pub model_score: f64,
    /// On the test run, with the tree: objects decided at each level (the
    /// return address alone first), and those whose last prefix had no node.
    #[serde(default)]
    pub levels: Option<Vec<u64>>,
    #[serde(default)]
    pub unknown: Option<u64>,
}

/// Trains a predictor and checks it against the test run's classes.
pub fn train_and_score(
    kind: Kind,
    train: &Profile,
    test: &Profile,
    t: &Thresholds,
    opt: &crate::predictors::TrainOptions,
    tl: &crate::search::Timeline,
) -> Trained {
    let p = Predictor::train(kind, train, t, opt);
    let actual = classify(test, t);
    let pred = p.predict_all(test);
    let mut n = [0u64; 4];
    for c in &pred {
        n[c.index()] += 1;
    }
    let lv = p.levels_of(test);
    Trained {
        name: kind.name(),
        kind,
        entries: p.entries_per_class(),
        accuracy: accuracy(test, &actual, &pred),
        model_score: tl.score(&pred, 4096),
        predicted_objects: n,
        levels: lv.as_ref().map(|l| l.0.clone()),
        unknown: lv.map(|l| l.1),
        predictor: p,
    }
}

/// Table 3's row of one allocator: pages per segment relative to DEFAULT's total.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct PagesRow {
    pub name: String,
    /// Per class, in segment order (other, SL, HR, not-HR); DEFAULT: `all` only.
    pub relative: [f64; 4],
    pub absolute: [u64; 4],
    pub total_relative: f64,
    pub total: u64,
}

/// Table 4's row: references per page per segment relative to DEFAULT's.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct DensityRow {
    pub name: String,
    /// None where the segment has no page.
    pub relative: [Option<f64>; 4],
    pub absolute: [Option<f64>; 4],
}

fn class_slot(class: &str) -> usize {
    match class {
        "SL" => 1,
        "HR" => 2,
        "nonHR" => 3,
        _ => 0,
    }
}

/// Tables 3 and 4 for one allocator against DEFAULT (8 KB pages, as the paper).
pub fn tables(def: &Measured, m: &Measured) -> (PagesRow, DensityRow) {
    let d_pages = def.pages_8k().max(1);
    let d_density = def.app_refs() as f64 / d_pages as f64;
    let mut abs = [0u64; 4];
    let mut refs = [0u64; 4];
    for s in &m.segments {
        let i = class_slot(&s.class);
        abs[i] += s.pages_8k;
        refs[i] += s.app_refs;
    }
    let total: u64 = abs.iter().sum();
    let rel = abs.map(|a| a as f64 / d_pages as f64);
    let dens: [Option<f64>; 4] =
        std::array::from_fn(|i| (abs[i] > 0).then(|| refs[i] as f64 / abs[i] as f64));
    (
        PagesRow {
            name: m.name.clone(),
            relative: rel,
            absolute: abs,
            total_relative: total as f64 / d_pages as f64,
            total,
        },
        DensityRow {
            name: m.name.clone(),
            relative: dens.map(|d| d.map(|d| if d_density > 0.0 { d / d_density } else { 0.0 })),
            absolute: dens,
        },
    )
}

/// Figure 3: the cumulative references of the j most referenced pages,
/// relative to DEFAULT's j most referenced (past DEFAULT's last page, to
/// DEFAULT's total: "we can continue to add pages to default even if it
/// never used those pages"). Points (j, ratio), j from 1.
pub fn cumulative_relative(def: &[u64], m: &[u64]) -> Vec<(u64, f64)> {
    let n = def.len().max(m.len());
    let (mut cd, mut cm) = (0u64, 0u64);
    (0..n)
        .map(|j| {
            cd += def.get(j).copied().unwrap_or(0);
            cm += m.get(j).copied().unwrap_or(0);
            (j as u64 + 1, if cd > 0 { cm as f64 / cd as f64 } else { 1.0 })
        })
        .collect()
}

/// Figure 4: page faults beyond the fill faults (the first touch of each
/// page), per reference, relative to DEFAULT's, for memories of 1 .. n
/// frames. Where DEFAULT has only fill faults left ("drop-down"), the ratio
/// is to DEFAULT's last non-zero value, as the paper does; a predictor's own
/// drop-down gives 0.
pub fn faults_relative(
    def: &heaplab_sim::PageCurve,
    m: &heaplab_sim::PageCurve,
) -> Vec<(u64, f64)> {
    let n = def.distinct_pages.max(m.distinct_pages);
    let rate = |c: &heaplab_sim::PageCurve, f: u64| {
        (c.faults_at(f).saturating_sub(c.distinct_pages)) as f64 / c.references.max(1) as f64
    };
    let mut last_def = None;
    (1..=n)
        .filter_map(|f| {
            let d = rate(def, f);
            if d > 0.0 {
                last_def = Some(d);
            }
            let base = if d > 0.0 { Some(d) } else { last_def };
            base.map(|b| (f, rate(m, f) / b))
        })
        .collect()
}

/// Figure 6: miss rates relative to DEFAULT's, per cache configuration.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct CacheRow {
    pub name: String,
    pub config: String,
    pub all_rate: f64,
    pub heap_rate: f64,
    pub all_relative: f64,
    pub heap_relative: f64,
}

pub fn caches_relative(def: &Measured, m: &Measured) -> Vec<CacheRow> {
    m.caches
        .iter()
        .zip(&def.caches)
        .map(|(c, d)| CacheRow {
            name: m.name.clone(),
            config: c.config.clone(),
            all_rate: c.all_rate(),
            heap_rate: c.heap_rate(),
            all_relative: c.all_rate() / d.all_rate().max(f64::MIN_POSITIVE),
            heap_relative: c.heap_rate() / d.heap_rate().max(f64::MIN_POSITIVE),
        })
        .collect()
}

/// The threshold choice: searched (with its log) or given.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ThresholdChoice {
    pub thresholds: Thresholds,
    /// How: "searched with STACK" or "given".
    pub how: String,
    pub search: Option<SearchResult>,
}

/// A figure's line: (x, ratio) points of one allocator.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Curve {
    pub name: String,
    pub points: Vec<(u64, f64)>,
}

/// Absolute page faults against memory size (frames, faults) of one allocator.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct FaultCurve {
    pub name: String,
    pub points: Vec<(u64, u64)>,
}

/// Whether segregation pays in the real program (the paper could not tell:
/// it never built its predictors), judged first on the predictor with the
/// fewest page faults relative to DEFAULT; when that one does not pay,
/// each other predictor in order of faults is judged too, and the first
/// that pays is the verdict's (with `fewest_faults` naming the first).
/// The others are tried after the fact, so their "faster" needs more
/// rounds: [`ROUNDS_FASTER`] plus log2 of how many are tried (rounded up),
/// so that a false "faster" among them stays as unlikely as for one.
///
/// - faster: the program's wall time with it is below DEFAULT's by more than
///   [`NOISE`] (the medians of interleaved runs), and it ran faster than
///   DEFAULT in every round, with at least [`ROUNDS_FASTER`] rounds (a sign
///   test: five of five by chance is 1 in 32).  On a shared machine single
///   runs scatter by 20-30%, and a ratio of medians alone called noise
///   faster (gawk's SP: 0.93x DEFAULT's median, faster in 2 rounds of 5);
/// - smaller: its mean page faults (Figure 4, every memory size up to
///   DEFAULT's pages) are at most [`FAULTS_SMALLER`] of DEFAULT's, or it
///   touches at most [`PAGES_SMALLER`] of DEFAULT's pages (Table 3), and it
///   is not slower than DEFAULT by more than [`NOISE`];
/// - it pays when the program gets faster or smaller, and every run of it
///   printed what glibc's first run printed and exited as it did.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Verdict {
    pub best: Option<String>,
    pub faults_mean: Option<f64>,
    pub pages_relative: Option<f64>,
    pub wall_vs_default: Option<f64>,
    pub wall_vs_glibc: Option<f64>,
    pub wall_vs_mimalloc: Option<f64>,
    /// Rounds in which the best ran faster than DEFAULT, of the rounds run.
    #[serde(default)]
    pub rounds_faster: Option<(usize, usize)>,
    pub identify_per_object: Option<f64>,
    pub per_malloc_vs_default: Option<f64>,
    /// The whole program's instructions (callgrind) against DEFAULT's: what
    /// a wall-time ratio on a loaded machine can be checked against.
    #[serde(default)]
    pub program_instructions_vs_default: Option<f64>,
    pub level0_share: Option<f64>,
    /// The predictor with the fewest page faults, where the verdict is
    /// another's (it did not pay, the other did); None when it is `best`.
    #[serde(default)]
    pub fewest_faults: Option<String>,
    pub faster: bool,
    pub smaller: bool,
    pub slower: bool,
    pub pays: bool,
    pub why: String,
}

/// Wall-time ratios within this of 1 are noise on a shared machine.
pub const NOISE: f64 = 0.03;
/// Rounds of wall time needed to call a predictor faster (see [`Verdict`]).
pub const ROUNDS_FASTER: usize = 5;
/// Mean page faults at most this share of DEFAULT's: the program is smaller.
pub const FAULTS_SMALLER: f64 = 0.9;
/// Pages touched at most this share of DEFAULT's: the program is smaller.
pub const PAGES_SMALLER: f64 = 0.95;

/// The rule of [`Verdict`]'s "faster": the ratio of medians below 1 by more
/// than [`NOISE`], and faster in every one of at least [`ROUNDS_FASTER`]
/// rounds.
pub fn is_faster(wall_vs_default: Option<f64>, rounds_faster: Option<(usize, usize)>) -> bool {
    is_faster_in(wall_vs_default, rounds_faster, ROUNDS_FASTER)
}

/// [`is_faster`] with `rounds` rounds needed.
pub fn is_faster_in(
    wall_vs_default: Option<f64>,
    rounds_faster: Option<(usize, usize)>,
    rounds: usize,
) -> bool {
    wall_vs_default.is_some_and(|w| w < 1.0 - NOISE)
        && rounds_faster.is_some_and(|(k, n)| k == n && n >= rounds)
}

/// The rounds needed to call one of `tried` predictors faster after the
/// fact: [`ROUNDS_FASTER`] + ceil(log2(tried)).
pub fn rounds_needed(tried: usize) -> usize {
    ROUNDS_FASTER + tried.max(1).next_power_of_two().trailing_zeros() as usize
}

/// The verdict among predictors in order of mean faults, `judge(name,
/// faults, rounds needed)` judging one: the first's if it pays, else the
/// first of the others that pays (each needing [`rounds_needed`] rounds),
/// else the first's.
fn pick(by_faults: &[(&str, f64)], mut judge: impl FnMut(&str, f64, usize) -> Verdict) -> Verdict {
    let Some(&(first, faults)) = by_faults.first() else {
        return Verdict { why: "nothing measured on the test trace".into(), ..Verdict::default() };
    };
    let v = judge(first, faults, ROUNDS_FASTER);
    if v.pays {
        return v;
    }
    let others = &by_faults[1..];
    let rounds = rounds_needed(others.len());
    for &(name, f) in others {
        let mut w = judge(name, f, rounds);
        if w.pays {
            w.fewest_faults = Some(first.to_string());
            w.why = format!(
                "{} ({first}, with the fewest page faults, does not pay: {}; {name} is judged after it, so its rounds must be {rounds} or more)",
                w.why, v.why
            );
            return w;
        }
    }
    v
}

/// The study of one program, as JSON.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Study {
    pub program: String,
    pub runs: Vec<RunSummary>,
    pub thresholds: ThresholdChoice,
    /// Classes of the test run's objects under the thresholds.
    pub test_classes: [u64; 4],
    pub trained: Vec<Trained>,
    /// DEFAULT first, then each predictor in order.
    pub measured: Vec<Measured>,
    pub table3: Vec<PagesRow>,
    pub table4: Vec<DensityRow>,
    /// 8 KB points.
    pub figure3: Vec<Curve>,
    pub figure4: Vec<Curve>,
    /// Absolute fault curves (frames, faults), 8 KB pages.
    pub fault_curves: Vec<FaultCurve>,
    pub figure6: Vec<CacheRow>,
    /// The real program: the allocators under callgrind, and wall times.
    pub costs: Option<Costs>,
    pub wall: Option<WallTimes>,
    pub verdict: Option<Verdict>,
    pub libraries: Vec<crate::emit::Built>,
    pub notes: Vec<String>,
}

impl Study {
    /// Fills the tables and figures from `measured` (DEFAULT first).
    pub fn derive(&mut self) {
        let Some(def) = self.measured.first().cloned() else {
            return;
        };
        self.table3.clear();
        self.table4.clear();
        self.figure3.clear();
        self.figure4.clear();
        self.figure6.clear();
        self.fault_curves.clear();
        for m in &self.measured {
            let (t3, t4) = tables(&def, m);
            self.table3.push(t3);
            self.table4.push(t4);
            self.figure3.push(Curve {
                name: m.name.clone(),
                points: cumulative_relative(&def.page_refs_8k, &m.page_refs_8k),
            });
            if let (Some(d), Some(c)) = (def.curve(8192), m.curve(8192)) {
                self.figure4.push(Curve { name: m.name.clone(), points: faults_relative(d, c) });
                self.fault_curves
                    .push(FaultCurve { name: m.name.clone(), points: c.points().collect() });
            }
            self.figure6.extend(caches_relative(&def, m));
        }
        self.verdict = Some(self.judge());
    }

    /// DEFAULT's pages (its fault curve's length: one point per frame count).
    pub fn default_pages(&self) -> u64 {
        self.fault_curves.first().map_or(0, |c| c.points.len() as u64)
    }

    /// An allocator's mean page faults relative to DEFAULT's (Figure 4) over
    /// every memory size up to DEFAULT's pages.
    pub fn mean_faults(&self, name: &str) -> Option<f64> {
        let dn = self.default_pages();
        let f = self.figure4.iter().find(|c| c.name == name)?;
        let v: Vec<f64> = f.points.iter().filter(|p| p.0 <= dn).map(|p| p.1).collect();
        (!v.is_empty()).then(|| v.iter().sum::<f64>() / v.len() as f64)
    }

    /// Does segregation pay in the real program? (See [`Verdict`].)
    pub fn judge(&self) -> Verdict {
        let trained: Vec<&str> =
            self.trained.iter().filter(|t| t.kind.trained()).map(|t| t.name.as_str()).collect();
        let mut by_faults: Vec<(&str, f64)> =
            trained.iter().filter_map(|n| self.mean_faults(n).map(|f| (*n, f))).collect();
        by_faults.sort_by(|a, b| a.1.total_cmp(&b.1));
        pick(&by_faults, |name, faults, rounds| self.judge_one(name, faults, rounds))
    }

    /// The verdict on one predictor, `rounds` rounds needed to call it faster.
    fn judge_one(&self, best: &str, faults: f64, rounds: usize) -> Verdict {
        let mut v = Verdict {
            best: Some(best.to_string()),
            faults_mean: Some(faults),
            pages_relative: self.table3.iter().find(|r| r.name == best).map(|r| r.total_relative),
            ..Verdict::default()
        };
        if let Some(w) = &self.wall {
            if let Some(r) = w.of(best) {
                v.wall_vs_default = r.vs_default;
                v.wall_vs_glibc = Some(r.vs_glibc);
                v.wall_vs_mimalloc = r.vs_mimalloc;
            }
            v.rounds_faster = w.rounds_faster(best, "DEFAULT");
        }
        if let Some(c) = &self.costs {
            if let Some(r) = c.of(best) {
                v.identify_per_object = r.identify_per_object;
                v.per_malloc_vs_default =
                    (c.default.per_malloc > 0.0).then(|| r.per_malloc / c.default.per_malloc);
                v.program_instructions_vs_default = (c.default.program_instructions > 0)
                    .then(|| r.program_instructions as f64 / c.default.program_instructions as f64);
                v.level0_share = r.report.as_ref().and_then(|r| r.level0_share());
            }
        }
        v.faster = is_faster_in(v.wall_vs_default, v.rounds_faster, rounds);
        v.slower = v.wall_vs_default.is_some_and(|w| w > 1.0 + NOISE);
        v.smaller = (faults <= FAULTS_SMALLER
            || v.pages_relative.is_some_and(|p| p <= PAGES_SMALLER))
            && !v.slower;
        // a library whose runs printed other than glibc's, or exited
        // otherwise, is judged on nothing (a crash can be fast)
        let same = self.wall.as_ref().and_then(|w| w.of(best)).is_none_or(|r| r.same_output);
        v.pays = (v.faster || v.smaller) && same;
        let wall = match (v.wall_vs_default, v.rounds_faster) {
            (Some(w), Some((k, n))) => {
                format!("wall time {w:.2}x DEFAULT's (faster in {k} of {n} rounds)")
            }
            (Some(w), None) => format!("wall time {w:.2}x DEFAULT's"),
            (None, _) => "no wall time measured (--run-test)".into(),
        };
        let pages = v.pages_relative.map_or(String::new(), |p| format!(", {p:.2}x its pages"));
        let wall = match v.program_instructions_vs_default {
            Some(i) => format!("{wall}, {i:.3}x its instructions"),
            None => wall,
        };
        v.why = if !same {
            format!("{best}'s runs did not print what glibc's did, or exited otherwise: not recommended (mean page faults {faults:.2}x DEFAULT's{pages}, {wall})")
        } else if v.pays {
            format!(
                "{best} pays: {}mean page faults {faults:.2}x DEFAULT's{pages}, {wall}",
                if v.faster { "faster; " } else { "" }
            )
        } else if v.slower {
            format!("{best}, the best placement (mean page faults {faults:.2}x DEFAULT's{pages}), costs more than it saves: {wall}")
        } else {
            format!("{best}, the best placement, changes too little: mean page faults {faults:.2}x DEFAULT's{pages}, {wall}")
        };
        v
    }

    /// Share of the test run's objects in each class.
    pub fn class_counts(test: &Profile, t: &Thresholds) -> [u64; 4] {
        let mut n = [0u64; 4];
        for c in classify(test, t) {
            n[c.index()] += 1;
        }
        n
    }
}

/// A class's name by segment slot.
pub fn slot_name(i: usize) -> &'static str {
    Class::from_index(i).map(|c| c.name()).unwrap_or("?")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::runtime::{WallRow, WallTimes};

    fn row(name: &str, seconds: &[f64]) -> WallRow {
        WallRow {
            name: name.into(),
            library: None,
            seconds: seconds.to_vec(),
            median: 0.0,
            vs_glibc: 1.0,
            vs_default: None,
            vs_mimalloc: None,
            same_output: true,
            exit_status: 0,
        }
    }

    #[test]
    fn faster_needs_every_round_and_enough_of_them() {
        // gawk's SP in out/seg-s25: medians 0.93x DEFAULT's, faster in 2 rounds of 5
        let w = WallTimes {
            command: "x".into(),
            repeats: 5,
            rows: vec![
                row("DEFAULT", &[1.0, 1.0, 1.0, 1.0, 1.0]),
                row("SP", &[1.065, 1.074, 0.967, 1.005, 0.926]),
                row("PATH", &[0.9, 0.8, 0.95, 0.9, 0.85]),
            ],
            load_before: None,
            load_after: None,
        };
        assert_eq!(w.rounds_faster("SP", "DEFAULT"), Some((2, 5)));
        assert_eq!(w.rounds_faster("PATH", "DEFAULT"), Some((5, 5)));
        assert_eq!(w.rounds_faster("STACK", "DEFAULT"), None);
        assert!(!is_faster(Some(0.93), Some((2, 5))));
        assert!(is_faster(Some(0.9), Some((5, 5))));
        assert!(!is_faster(Some(0.9), Some((3, 3))), "three rounds are too few to tell");
        assert!(!is_faster(Some(0.98), Some((5, 5))), "within the noise");
        assert!(!is_faster(None, Some((5, 5))));
        // judged after the fact, among others: more rounds
        assert_eq!(rounds_needed(1), 5);
        assert_eq!(rounds_needed(3), 7);
        assert_eq!(rounds_needed(4), 7);
        assert!(!is_faster_in(Some(0.9), Some((5, 5)), rounds_needed(3)));
        assert!(is_faster_in(Some(0.9), Some((7, 7)), rounds_needed(3)));
    }

    #[test]
    fn a_predictor_with_more_faults_may_pay_after_the_first_does_not() {
        // jsonparse in out/seg-s26all: PATH has the fewest faults and is slower;
        // SP ran faster than DEFAULT in 7 rounds of 7
        let rounds = |name: &str| match name {
            "PATH" => (1, 7),
            "SP" => (7, 7),
            _ => (6, 7),
        };
        let judge = |name: &str, _f: f64, need: usize| {
            let r = rounds(name);
            let faster = is_faster_in(Some(0.9), Some(r), need);
            Verdict {
                best: Some(name.into()),
                faster,
                pays: faster,
                why: name.into(),
                ..Verdict::default()
            }
        };
        let order = [("PATH", 0.69), ("STACK", 0.9), ("SP", 1.2), ("STACK+size", 1.3)];
        let v = pick(&order, judge);
        assert_eq!(v.best.as_deref(), Some("SP"));
        assert_eq!(v.fewest_faults.as_deref(), Some("PATH"));
        assert!(v.why.contains("7 or more"), "{}", v.why);
        // with 5 rounds, a predictor judged after the first cannot be faster
        let five = |name: &str, _f: f64, need: usize| {
            let faster = name != "PATH" && is_faster_in(Some(0.9), Some((5, 5)), need);
            Verdict { best: Some(name.into()), faster, pays: faster, ..Verdict::default() }
        };
        let v = pick(&order, five);
        assert_eq!(v.best.as_deref(), Some("PATH"));
        assert!(!v.pays && v.fewest_faults.is_none());
        // the first pays: it is the verdict, whatever the others do
        let v = pick(&order, |name: &str, _f: f64, _n: usize| Verdict {
            best: Some(name.into()),
            pays: true,
            ..Verdict::default()
        });
        assert_eq!(v.best.as_deref(), Some("PATH"));
        assert!(v.fewest_faults.is_none());
        assert!(pick(&[], judge).best.is_none());
    }
}
