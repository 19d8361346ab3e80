//! The predictors of paper 001 §3.1: what is known when an object is
//! allocated, mapped to the segment it should go to.
//!
//! ```text
//!   predictor     key of an allocation                         trained entry
//!   ---------     -----------------------------------------    ---------------------------
//!   SP            the stack depth in bytes (16-byte granules)  depth → class
//!   PATH          every call site on the recorded stack        path point → class, when every
//!                                                              object below it behaves alike
//!   STACK (k=3)   the last k call sites, hashed                stack → class
//!   STACK+size    the last k call sites and the size           (stack, size) → class
//!   RANDOM        none: a uniformly random segment (control)
//!   DEFAULT       none: one segment (the baseline allocator)
//! ```
//!
//! Training (§3): classify each training object with the thresholds, attach
//! its class to its key(s), and keep a key when at least `purity` of its
//! objects (0.9 by default; §3.1.3's example "always allocated HR objects" is
//! purity 1) share one class other than "other". Keys not kept, and keys
//! never seen in training, predict "other". PATH looks for the innermost path
//! point on the allocation's stack (the one entered last, which at run time
//! would have set the global prediction last).
//!
//! Everything here works on dense ids so that the threshold search can
//! retrain thousands of times: [`Features`] numbers the training keys once;
//! [`Features::encode`] maps another run's objects onto those numbers.
//!
//! A trained STACK, STACK+size or PATH predictor is then folded into a tree
//! of call-site prefixes ([`crate::tree`]): every training context keeps the
//! class the table gives it, and each prefix that all its contexts agree on
//! becomes a leaf. That tree is what the allocator carries and what
//! [`Predictor::predict_all`] predicts with, so that a context never seen in
//! training gets the class of its deepest known prefix, in the study as in
//! the allocator.

use crate::classes::{Class, Thresholds};
use crate::keys;
use crate::objects::{Obj, Profile};
use crate::tree::{Context, Finish, Tree};
use anyhow::{bail, Result};
use serde::{Deserialize, Serialize};
use std::collections::HashMap;
use std::fmt;

/// Which predictor.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "kind")]
pub enum Kind {
    Default,
    Sp,
    Path,
    Stack { depth: u32 },
    StackSize { depth: u32 },
    Random { seed: u64 },
}

impl Kind {
    /// The paper's name (STACK with a depth other than 3 says so).
    pub fn name(&self) -> String {
        match self {
            Kind::Default => "DEFAULT".into(),
            Kind::Sp => "SP".into(),
            Kind::Path => "PATH".into(),
            Kind::Stack { depth: 3 } => "STACK".into(),
            Kind::Stack { depth } => format!("STACK-{depth}"),
            Kind::StackSize { depth: 3 } => "STACK+size".into(),
            Kind::StackSize { depth } => format!("STACK-{depth}+size"),
            Kind::Random { .. } => "RANDOM".into(),
        }
    }

    /// A file-name-safe name.
    pub fn slug(&self) -> String {
        self.name().to_ascii_lowercase().replace('+', "-")
    }

    /// Whether it is trained (DEFAULT and RANDOM are not).
    pub fn trained(&self) -> bool {
        !matches!(self, Kind::Default | Kind::Random { .. })
    }

    /// The code the emitted table carries (`HL_SEG_*` in segregated.c).
    pub fn code(&self) -> u32 {
        match self {
            Kind::Default => 0,
            Kind::Sp => 1,
            Kind::Path => 2,
            Kind::Stack { .. } => 3,
            Kind::StackSize { .. } => 4,
            Kind::Random { .. } => 5,
        }
    }

    /// The stack depth it looks at (0: none; PATH: every frame recorded).
    pub fn depth(&self) -> u32 {
        match self {
            Kind::Stack { depth } | Kind::StackSize { depth } => *depth,
            _ => 0,
        }
    }

    /// Parses `default`, `sp`, `path`, `stack`, `stack:K`, `stack+size`,
    /// `stack+size:K`, `random`, `random:SEED` (case does not matter).
    pub fn parse(s: &str, default_depth: u32) -> Result<Kind> {
        let l = s.trim().to_ascii_lowercase();
        let (name, arg) = match l.split_once(':') {
            Some((n, a)) => (n, Some(a)),
            None => (l.as_str(), None),
        };
        let depth = |a: Option<&str>| -> Result<u32> {
            match a {
                None => Ok(default_depth),
                Some(a) => match a.parse::<u32>() {
                    Ok(d) if (1..=64).contains(&d) => Ok(d),
                    _ => bail!("predictor {s:?}: the depth must be 1..=64"),
                },
            }
        };
        Ok(match name {
            "default" => Kind::Default,
            "sp" => Kind::Sp,
            "path" => Kind::Path,
            "stack" => Kind::Stack { depth: depth(arg)? },
            "stack+size" | "stack-size" | "stacksize" => Kind::StackSize { depth: depth(arg)? },
            "random" => Kind::Random {
                seed: match arg {
                    None => 1,
                    Some(a) => a.parse().map_err(|_| {
                        anyhow::anyhow!("predictor {s:?}: the seed must be a number")
                    })?,
                },
            },
            _ => bail!(
                "no predictor {s:?}; the predictors are default, sp, path, stack[:K], stack+size[:K], random[:SEED]"
            ),
        })
    }
}

impl fmt::Display for Kind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.name())
    }
}

/// The key(s) of one object for a predictor, innermost first.
pub fn object_keys(kind: Kind, p: &Profile, o: &Obj, out: &mut Vec<u64>) {
    out.clear();
    match kind {
        Kind::Default | Kind::Random { .. } => {}
        Kind::Sp => {
            if o.sp_depth != 0 {
                out.push(keys::sp_key(o.sp_depth));
            }
        }
        Kind::Stack { depth } => {
            let f = p.frames(o);
            if !f.is_empty() {
                out.push(keys::site_hash(&f[..f.len().min(depth as usize)]));
            }
        }
        Kind::StackSize { depth } => {
            let f = p.frames(o);
            if !f.is_empty() {
                out.push(keys::size_key(
                    keys::site_hash(&f[..f.len().min(depth as usize)]),
                    o.size,
                ));
            }
        }
        Kind::Path => {
            for &k in p.frames(o) {
                if !p.unstable.contains(&k) && !out.contains(&k) {
                    out.push(k);
                }
            }
        }
    }
}

/// No id.
pub const NONE: u32 = u32::MAX;

/// The keys of a run's objects as dense ids: object i has
/// `ids[offsets[i]..offsets[i + 1]]`, innermost first.
#[derive(Debug, Clone, Default)]
pub struct ObjFeatures {
    pub offsets: Vec<u32>,
    pub ids: Vec<u32>,
}

impl ObjFeatures {
    pub fn of(&self, i: usize) -> &[u32] {
        &self.ids[self.offsets[i] as usize..self.offsets[i + 1] as usize]
    }
    pub fn len(&self) -> usize {
        self.offsets.len().saturating_sub(1)
    }
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// The training run's keys, numbered.
#[derive(Debug, Clone)]
pub struct Features {
    pub kind: Kind,
    /// Dense id → key.
    pub keys: Vec<u64>,
    index: HashMap<u64, u32>,
    /// The training objects' ids.
    pub train: ObjFeatures,
}

impl Features {
    /// Numbers the keys of the training run.
    pub fn new(kind: Kind, train: &Profile) -> Features {
        let mut f = Features {
            kind,
            keys: Vec::new(),
            index: HashMap::new(),
            train: ObjFeatures::default(),
        };
        let mut tmp = Vec::new();
        let mut of = ObjFeatures { offsets: vec![0], ids: Vec::new() };
        for o in &train.objects {
            object_keys(kind, train, o, &mut tmp);
            for &k in &tmp {
                let n = f.keys.len() as u32;
                let id = *f.index.entry(k).or_insert(n);
                if id == n {
                    f.keys.push(k);
                }
                of.ids.push(id);
            }
            of.offsets.push(of.ids.len() as u32);
        }
        f.train = of;
        f
    }

    /// Another run's objects on the training ids (keys training never saw are left out).
    pub fn encode(&self, p: &Profile) -> ObjFeatures {
        let mut tmp = Vec::new();
        let mut of =
            ObjFeatures { offsets: Vec::with_capacity(p.objects.len() + 1), ids: Vec::new() };
        of.offsets.push(0);
        for o in &p.objects {
            object_keys(self.kind, p, o, &mut tmp);
            for k in &tmp {
                if let Some(&id) = self.index.get(k) {
                    of.ids.push(id);
                }
            }
            of.offsets.push(of.ids.len() as u32);
        }
        of
    }

    /// The class each key predicts, from the training objects' classes.
    pub fn decide(&self, classes: &[Class], purity: f64) -> Vec<Option<Class>> {
        let mut counts = vec![[0u32; 4]; self.keys.len()];
        for (i, c) in classes.iter().enumerate() {
            for &id in self.train.of(i) {
                counts[id as usize][c.index()] += 1;
            }
        }
        counts
            .iter()
            .map(|n| {
                let total: u32 = n.iter().sum();
                let (best, &m) = n.iter().enumerate().max_by_key(|&(i, &v)| (v, 3 - i)).unwrap();
                let c = Class::from_index(best).unwrap();
                (total > 0 && c != Class::Other && f64::from(m) >= purity * f64::from(total))
                    .then_some(c)
            })
            .collect()
    }
}

/// The predicted class of each object, from its ids and the decisions:
/// the first (innermost) id with a decision wins.
pub fn apply(of: &ObjFeatures, decisions: &[Option<Class>]) -> Vec<Class> {
    (0..of.len())
        .map(|i| of.of(i).iter().find_map(|&id| decisions[id as usize]).unwrap_or(Class::Other))
        .collect()
}

/// RANDOM's class for the n-th allocation (from 0): the same function as
/// `hl_seg_random` in native/segregate/seg.h (the splitmix64 finalizer of a
/// point on a Weyl sequence), so the allocator and this crate agree.
pub fn random_class(seed: u64, n: u64) -> Class {
    let mut z = seed
        .wrapping_mul(0x9E37_79B9_7F4A_7C15)
        .wrapping_add(n.wrapping_add(1).wrapping_mul(0xD1B5_4A32_D192_ED03));
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^= z >> 31;
    Class::from_index((z >> 62) as usize).unwrap()
}

/// How training keeps a key.
#[derive(Debug, Clone, Copy, Serialize, Deserialize)]
pub struct TrainOptions {
    /// Share of a key's training objects that must have its class.
    pub purity: f64,
}

impl Default for TrainOptions {
    fn default() -> Self {
        TrainOptions { purity: 0.9 }
    }
}

/// A trained predictor: what the emitted allocator carries.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Predictor {
    pub kind: Kind,
    pub thresholds: Option<Thresholds>,
    /// Keys that predict a class other than "other", sorted by key (not in
    /// the JSON: the tree is what the allocator carries).
    #[serde(skip)]
    pub table: Vec<(u64, Class)>,
    /// Keys seen in training (kept or not), and kept.
    pub keys_seen: usize,
    #[serde(default)]
    pub keys_kept: usize,
    /// STACK, STACK+size and PATH: the table as a tree of call-site prefixes.
    pub tree: Option<Tree>,
}

impl Predictor {
    /// DEFAULT or RANDOM (no training).
    pub fn untrained(kind: Kind) -> Predictor {
        Predictor {
            kind,
            thresholds: None,
            table: Vec::new(),
            keys_seen: 0,
            keys_kept: 0,
            tree: None,
        }
    }

    /// Trains `kind` on a profile with thresholds.
    pub fn train(kind: Kind, train: &Profile, t: &Thresholds, opt: &TrainOptions) -> Predictor {
        if !kind.trained() {
            return Predictor::untrained(kind);
        }
        let f = Features::new(kind, train);
        let classes = classify(train, t);
        let mut p = Predictor::from_decisions(&f, &f.decide(&classes, opt.purity), Some(*t));
        p.tree = p.build_tree(train);
        p
    }

    /// The table from decisions over `f`'s keys.
    pub fn from_decisions(f: &Features, d: &[Option<Class>], t: Option<Thresholds>) -> Predictor {
        let mut table: Vec<(u64, Class)> =
            f.keys.iter().zip(d).filter_map(|(&k, c)| c.map(|c| (k, c))).collect();
        table.sort_unstable_by_key(|e| e.0);
        Predictor {
            kind: f.kind,
            thresholds: t,
            keys_kept: table.len(),
            table,
            keys_seen: f.keys.len(),
            tree: None,
        }
    }

    /// The frames a context of this predictor holds (PATH: every frame the
    /// recording kept).
    pub fn tree_depth(kind: Kind, recorded_depth: u64) -> u32 {
        match kind {
            Kind::Stack { depth } | Kind::StackSize { depth } => depth,
            _ => recorded_depth.clamp(1, 64) as u32,
        }
    }

    /// The table's class of one training object (the full predictor).
    fn table_class(&self, map: &HashMap<u64, Class>, p: &Profile, o: &Obj) -> Class {
        let mut tmp = Vec::new();
        object_keys(self.kind, p, o, &mut tmp);
        tmp.iter().find_map(|k| map.get(k).copied()).unwrap_or(Class::Other)
    }

    /// STACK, STACK+size, PATH: the tree over the training contexts, each
    /// with the class the table gives it.
    pub fn build_tree(&self, train: &Profile) -> Option<Tree> {
        let finish = match self.kind {
            Kind::Stack { .. } => Finish::Other,
            Kind::StackSize { .. } => Finish::Size,
            Kind::Path => Finish::PathPoints,
            _ => return None,
        };
        let depth = Predictor::tree_depth(self.kind, train.stack_depth);
        let map: HashMap<u64, Class> = self.table.iter().copied().collect();
        let contexts = train
            .objects
            .iter()
            .map(|o| {
                let class = self.table_class(&map, train, o);
                (Context { frames: train.frames(o).to_vec(), size: o.size, class }, 1)
            })
            .collect();
        let points = if finish == Finish::PathPoints { self.table.clone() } else { Vec::new() };
        Some(Tree::build(depth, finish, contexts, points))
    }

    /// The class of each object of a run.
    pub fn predict_all(&self, p: &Profile) -> Vec<Class> {
        match self.kind {
            Kind::Default => vec![Class::Other; p.objects.len()],
            Kind::Random { seed } => {
                (0..p.objects.len() as u64).map(|n| random_class(seed, n)).collect()
            }
            _ => {
                if let Some(t) = &self.tree {
                    return p.objects.iter().map(|o| t.predict(p.frames(o), o.size).0).collect();
                }
                let map: HashMap<u64, Class> = self.table.iter().copied().collect();
                p.objects.iter().map(|o| self.table_class(&map, p, o)).collect()
            }
        }
    }

    /// Objects of a run decided at each level of the tree (the return
    /// address alone first), and those whose last prefix had no node; None
    /// for a predictor without a tree.
    pub fn levels_of(&self, p: &Profile) -> Option<(Vec<u64>, u64)> {
        let t = self.tree.as_ref()?;
        let n = t.depth as usize;
        let mut levels = vec![0u64; n];
        let mut unknown = 0;
        for o in &p.objects {
            let (_, l, u) = t.predict(p.frames(o), o.size);
            levels[(l as usize).min(n - 1)] += 1;
            unknown += u64::from(u);
        }
        Some((levels, unknown))
    }

    /// Table entries per class.
    pub fn entries_per_class(&self) -> [usize; 4] {
        let mut n = [0; 4];
        for (_, c) in &self.table {
            n[c.index()] += 1;
        }
        n
    }

    /// The nodes the allocator's table holds: the tree's, or (SP) the
    /// table's, as (key, value).
    pub fn nodes(&self) -> Vec<(u64, u8)> {
        match &self.tree {
            Some(t) => t.nodes.clone(),
            None => self.table.iter().map(|&(k, c)| (k, c.index() as u8)).collect(),
        }
    }
}

/// The class of every object of a run under thresholds.
pub fn classify(p: &Profile, t: &Thresholds) -> Vec<Class> {
    p.objects.iter().map(|o| t.classify(p.lifetime(o), o.density())).collect()
}
