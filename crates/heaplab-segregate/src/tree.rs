//! A trained predictor as a tree of call-site prefixes, so that the
//! allocator decides most allocations from the return address alone and
//! walks further up the stack only where it must (the run-time side is
//! `native/segregate/seg_ident.c`; `native/segregate/seg.h` draws the table).
//!
//! ```text
//!   training contexts (the first `depth` frame keys, padded with 0), each with
//!   the class the full predictor gives it (STACK: its context's; PATH: its
//!   innermost path point's; STACK+size: its context's and size's)
//!
//!        k0 = a ─┬─ (a, x, ·) → HR      node(a)       = WALK(1)  they disagree
//!                └─ (a, y, ·) → SL      node(a, x)    = LEAF(HR)
//!                                       node(a, y)    = LEAF(SL)
//!        k0 = b ─── (b, ·, ·) → other   node(b)       = LEAF(other): b alone decides
//!        k0 = c    never seen           no node: "other" (PATH: the innermost
//!                                       path point among the frames)
//! ```
//!
//! A node's key is `heaplab_site_hash` of its prefix; a WALK node says how
//! many more frames the deepest decision below it needs. STACK+size ends in
//! nodes keyed by `size_key(hash of the whole context, size)`. The same
//! function predicts here ([`Tree::predict`]) and in the allocator
//! (`hl_seg_decide`), so the study's figures are about what the allocator
//! does; a context never seen in training is decided by the deepest prefix
//! that was seen ("the class all its contexts share").

use crate::classes::Class;
use crate::keys;
use serde::{Deserialize, Serialize};
use std::collections::HashMap;

/// A WALK node's value: the top bit, and how many more frames are needed.
pub const WALK: u8 = 0x80;

/// How the tree's last level and unknown prefixes are decided.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Finish {
    /// STACK: an unknown prefix is "other".
    Other,
    /// STACK+size: after the last frame, the size decides.
    Size,
    /// PATH: an unknown prefix is decided by the innermost path point.
    PathPoints,
}

/// Nodes and leaves at one level of the tree.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct LevelCount {
    pub leaves: u64,
    pub walks: u64,
}

/// The tree, as the allocator's table holds it.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Tree {
    /// Frames in a context.
    pub depth: u32,
    pub finish: Option<Finish>,
    /// (prefix key, value) sorted by key; a value is a class index or WALK | need.
    #[serde(skip)]
    pub nodes: Vec<(u64, u8)>,
    /// PATH's path points, sorted by key.
    #[serde(skip)]
    pub points: Vec<(u64, Class)>,
    /// Per level (0: the return address), leaves and walks; the size level last
    /// for STACK+size.
    pub levels: Vec<LevelCount>,
    /// Training contexts (distinct), and how many of the training objects
    /// the return address alone decides.
    pub contexts: u64,
    pub objects_at_level: Vec<u64>,
}

/// One training context: its frames (already `depth` long), its size (for
/// STACK+size) and its class.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Context {
    pub frames: Vec<u64>,
    pub size: u64,
    pub class: Class,
}

/// The prefix key of `frames[..l]` padded with 0 (the fold of
/// `keys::site_hash`, before its final mix).
fn fold(h: u64, k: u64) -> u64 {
    (h ^ k).wrapping_mul(0x0000_0100_0000_01b3)
}
const BASIS: u64 = 0xcbf2_9ce4_8422_2325;

/// `frames` cut or padded with 0 to `depth`.
pub fn context_of(frames: &[u64], depth: u32) -> Vec<u64> {
    let d = depth as usize;
    let mut v: Vec<u64> = frames.iter().copied().take(d).collect();
    v.resize(d, 0);
    v
}

impl Tree {
    /// Builds the tree over `contexts`, each with `weight` objects (for the
    /// statistics); `points` for PATH.
    pub fn build(
        depth: u32,
        finish: Finish,
        contexts: Vec<(Context, u64)>,
        points: Vec<(u64, Class)>,
    ) -> Tree {
        let depth = depth.clamp(1, 64);
        // one class per (context, size): merge duplicates (the full predictor
        // is a function of them, so they agree)
        let mut merged: HashMap<(Vec<u64>, u64), (Class, u64)> = HashMap::new();
        for (c, w) in contexts {
            let size = if finish == Finish::Size { c.size } else { 0 };
            let e = merged.entry((context_of(&c.frames, depth), size)).or_insert((c.class, 0));
            e.1 += w;
        }
        let mut ctx: Vec<(Vec<u64>, u64, Class, u64)> =
            merged.into_iter().map(|((f, s), (c, w))| (f, s, c, w)).collect();
        ctx.sort();
        let mut t = Tree {
            depth,
            finish: Some(finish),
            nodes: Vec::new(),
            points,
            levels: vec![
                LevelCount::default();
                depth as usize + usize::from(finish == Finish::Size)
            ],
            contexts: ctx.len() as u64,
            objects_at_level: vec![0; depth as usize + 1],
        };
        t.points.sort_unstable_by_key(|p| p.0);
        t.grow(&ctx, 1, BASIS);
        t.nodes.sort_unstable_by_key(|n| n.0);
        t
    }

    /// The nodes of level `l` (1-based: l frames) for contexts that share
    /// their first l - 1 frames, whose fold is `h`. Returns the deepest level
    /// a leaf below needs.
    fn grow(&mut self, ctx: &[(Vec<u64>, u64, Class, u64)], l: u32, h: u64) -> u32 {
        let i = (l - 1) as usize;
        let mut deepest = l;
        let mut start = 0;
        while start < ctx.len() {
            let k = ctx[start].0[i];
            let end = start + ctx[start..].iter().take_while(|c| c.0[i] == k).count();
            let group = &ctx[start..end];
            let hk = fold(h, k);
            let key = keys::fmix(hk);
            let first = group[0].2;
            if group.iter().all(|c| c.2 == first) {
                self.nodes.push((key, first.index() as u8));
                self.levels[i].leaves += 1;
                self.objects_at_level[i] += group.iter().map(|c| c.3).sum::<u64>();
            } else if l == self.depth {
                // only the size can tell them apart (STACK+size); the others
                // cannot disagree here: one context, one class
                self.levels[i].walks += 1;
                self.nodes.push((key, WALK));
                let mut sizes: Vec<(u64, Class, u64)> =
                    group.iter().map(|c| (c.1, c.2, c.3)).collect();
                sizes.sort();
                sizes.dedup_by_key(|s| s.0);
                for (s, c, _) in &sizes {
                    self.nodes.push((keys::size_key(key, *s), c.index() as u8));
                    if let Some(lc) = self.levels.get_mut(self.depth as usize) {
                        lc.leaves += 1;
                    }
                }
                self.objects_at_level[self.depth as usize] +=
                    group.iter().map(|c| c.3).sum::<u64>();
            } else {
                let at = self.nodes.len();
                self.nodes.push((key, WALK));
                self.levels[i].walks += 1;
                let d = self.grow(group, l + 1, hk);
                self.nodes[at].1 = WALK | (d - l) as u8;
                deepest = deepest.max(d);
            }
            start = end;
        }
        deepest
    }

    fn node(&self, key: u64) -> Option<u8> {
        self.nodes.binary_search_by_key(&key, |n| n.0).ok().map(|i| self.nodes[i].1)
    }

    fn point(&self, key: u64) -> Option<Class> {
        if key == 0 {
            return None;
        }
        self.points.binary_search_by_key(&key, |p| p.0).ok().map(|i| self.points[i].1)
    }

    /// The class of an allocation whose frames (innermost first; fewer than
    /// `depth` means the stack ended) and size are these, and the level that
    /// decided it (frames looked at beyond the first; `None` in the level's
    /// place: no node for the last prefix). `hl_seg_decide` in C.
    pub fn predict(&self, frames: &[u64], size: u64) -> (Class, u32, bool) {
        let mut h = BASIS;
        for l in 1..=self.depth {
            let k = frames.get((l - 1) as usize).copied().unwrap_or(0);
            h = fold(h, k);
            let key = keys::fmix(h);
            match self.node(key) {
                None => {
                    if self.finish == Some(Finish::PathPoints) {
                        let m = frames.len().min(self.depth as usize);
                        for (i, &f) in frames.iter().enumerate().take(m).skip((l - 1) as usize) {
                            if let Some(c) = self.point(f) {
                                return (c, i as u32, true);
                            }
                        }
                        return (Class::Other, m.saturating_sub(1) as u32, true);
                    }
                    return (Class::Other, l - 1, true);
                }
                Some(v) if v & WALK == 0 => {
                    return (Class::from_index(v as usize & 3).unwrap(), l - 1, false)
                }
                Some(_) if l == self.depth => {
                    if self.finish != Some(Finish::Size) {
                        return (Class::Other, l - 1, false);
                    }
                    return match self.node(keys::size_key(key, size)) {
                        Some(v) if v & WALK == 0 => {
                            (Class::from_index(v as usize & 3).unwrap(), l - 1, false)
                        }
                        _ => (Class::Other, l - 1, true),
                    };
                }
                Some(_) => {}
            }
        }
        (Class::Other, self.depth - 1, true)
    }

    /// Nodes at the first level that walk (the allocator's report shows it).
    pub fn root_walks(&self) -> u64 {
        self.levels.first().map_or(0, |l| l.walks)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn c(frames: &[u64], size: u64, class: Class) -> (Context, u64) {
        (Context { frames: frames.to_vec(), size, class }, 1)
    }

    #[test]
    fn the_return_address_decides_where_its_contexts_agree() {
        let t = Tree::build(
            3,
            Finish::Other,
            vec![
                c(&[1, 2, 3], 0, Class::Hr),
                c(&[1, 5, 6], 0, Class::Hr),
                c(&[7, 8, 9], 0, Class::Sl),
                c(&[7, 10, 9], 0, Class::NotHr),
                c(&[11, 12, 13], 0, Class::Sl),
                c(&[11, 12, 14], 0, Class::Other),
            ],
            vec![],
        );
        assert_eq!(t.predict(&[1, 2, 3], 0), (Class::Hr, 0, false));
        assert_eq!(t.predict(&[1, 99, 98], 0), (Class::Hr, 0, false), "unseen callers of 1");
        assert_eq!(t.predict(&[7, 8, 9], 0), (Class::Sl, 1, false));
        assert_eq!(t.predict(&[7, 10, 0], 0), (Class::NotHr, 1, false));
        assert_eq!(t.predict(&[7, 99, 9], 0), (Class::Other, 1, true), "an unseen caller of 7");
        assert_eq!(t.predict(&[11, 12, 13], 0), (Class::Sl, 2, false));
        assert_eq!(t.predict(&[11, 12, 14], 0), (Class::Other, 2, false));
        assert_eq!(t.predict(&[42], 0), (Class::Other, 0, true));
        // node(7) walks one frame, node(11) two
        let n7 = t.node(keys::site_hash(&[7])).unwrap();
        let n11 = t.node(keys::site_hash(&[11])).unwrap();
        assert_eq!((n7, n11), (WALK | 1, WALK | 2));
        assert_eq!(t.levels[0], LevelCount { leaves: 1, walks: 2 });
        assert_eq!(t.objects_at_level, vec![2, 2, 2, 0]);
    }

    #[test]
    fn keys_are_the_site_hashes_of_prefixes() {
        let t = Tree::build(3, Finish::Other, vec![c(&[1, 2, 3], 0, Class::Hr)], vec![]);
        assert_eq!(t.nodes, vec![(keys::site_hash(&[1]), Class::Hr.index() as u8)]);
    }

    #[test]
    fn short_stacks_are_padded_with_zero() {
        let t = Tree::build(
            3,
            Finish::Other,
            vec![c(&[1, 2], 0, Class::Hr), c(&[1, 2, 3], 0, Class::Sl)],
            vec![],
        );
        assert_eq!(t.predict(&[1, 2], 0).0, Class::Hr);
        assert_eq!(t.predict(&[1, 2, 0], 0).0, Class::Hr);
        assert_eq!(t.predict(&[1, 2, 3], 0).0, Class::Sl);
        assert!(t.nodes.iter().any(|n| n.0 == keys::site_hash(&[1, 2, 0])));
    }

    #[test]
    fn the_size_decides_after_the_last_frame() {
        let t = Tree::build(
            2,
            Finish::Size,
            vec![c(&[1, 2], 24, Class::Hr), c(&[1, 2], 40, Class::Sl), c(&[3, 4], 8, Class::Sl)],
            vec![],
        );
        assert_eq!(t.predict(&[1, 2], 24), (Class::Hr, 1, false));
        assert_eq!(t.predict(&[1, 2], 40), (Class::Sl, 1, false));
        assert_eq!(t.predict(&[1, 2], 41), (Class::Other, 1, true));
        assert_eq!(t.predict(&[3, 4], 999), (Class::Sl, 0, false));
        let h = keys::site_hash(&[1, 2]);
        assert!(t.nodes.contains(&(keys::size_key(h, 24), Class::Hr.index() as u8)));
    }

    #[test]
    fn path_points_decide_unknown_prefixes() {
        let t = Tree::build(
            4,
            Finish::PathPoints,
            vec![c(&[1, 2, 3, 4], 0, Class::Hr), c(&[1, 5, 3, 4], 0, Class::Sl)],
            vec![(3, Class::NotHr), (6, Class::Sl)],
        );
        assert_eq!(t.predict(&[1, 2, 3, 4], 0).0, Class::Hr);
        assert_eq!(t.predict(&[9, 8, 6, 3], 0), (Class::Sl, 2, true), "innermost point of 9..");
        assert_eq!(t.predict(&[1, 7, 3, 4], 0), (Class::NotHr, 2, true));
        assert_eq!(t.predict(&[9, 8, 7], 0), (Class::Other, 2, true));
    }
}
