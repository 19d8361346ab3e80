//! Free lists from the kept classes: kept classes with the same block and
//! allocator share a list (at R = 8 the 16- and 24-byte classes both use
//! 32-byte fast blocks), a list absorbs the unit classes next to it that
//! would use its very block. Then the lists are ordered (fast first, by
//! malloc share), and each gets its reclaim priority. Sizes no list serves
//! are the fast core's ladder classes (`super::core`) or the general
//! allocator's.

use super::kind::Totals;
use super::{fast_block, general_block, Allocator, ClassDecision, ListPlan, Thresholds};
use heaplab_trace::profile::{Profile, SizeClass};

/// Bytes of a block of `a` for requests up to `size`.
pub fn block_of(a: Allocator, size: u64) -> u64 {
    match a {
        Allocator::Fast => fast_block(size),
        Allocator::General => general_block(size),
    }
}

/// A list also serves the unit classes that would use its very block: the
/// same test with a wider range, so they are taken at no cost.
pub fn absorb_neighbours(
    classes: &mut Vec<ClassDecision>,
    prof: &Profile,
    unit: u64,
    t: Totals,
    th: &Thresholds,
) {
    let mut absorbed: Vec<ClassDecision> = Vec::new();
    for c in classes.iter() {
        let b = block_of(c.allocator, c.size);
        for nb in [c.size.checked_sub(unit), Some(c.size + unit)].into_iter().flatten() {
            if nb == 0
                || nb > th.max_class_bytes
                || block_of(c.allocator, nb) != b
                || classes.iter().chain(absorbed.iter()).any(|k| k.size == nb)
            {
                continue;
            }
            let unseen = SizeClass {
                size: nb,
                allocs: 0,
                frees: 0,
                max_live: 0,
                mean_live: 0.0,
                mean_free_list: 0.0,
                bytes: 0,
                share: 0.0,
            };
            let seen = prof.size_classes.iter().find(|x| x.size == nb).unwrap_or(&unseen);
            let mut d = ClassDecision::from_profile(
                seen,
                unit,
                t,
                c.allocator,
                format!(
                    "absorbed: not kept, but it uses the {b}-byte block of the kept {}-byte class",
                    c.size
                ),
            );
            d.absorbed = true;
            absorbed.push(d);
        }
    }
    classes.extend(absorbed);
    // The smallest class takes malloc(0).
    classes.sort_by_key(|c| c.size);
    if let Some(c) = classes.first_mut() {
        if c.range[0] == 1 {
            c.range[0] = 0;
        }
    }
}

/// Lists: classes (sorted by size) with the same allocator and block and
/// adjacent ranges share one. Sets each class's `list`.
pub fn group(classes: &mut [ClassDecision]) -> Vec<ListPlan> {
    let mut lists: Vec<ListPlan> = Vec::new();
    for c in classes.iter_mut() {
        let b = block_of(c.allocator, c.size);
        if let Some(l) = lists.iter_mut().find(|l| {
            l.allocator == c.allocator && l.block_bytes == b && l.range[1] + 1 == c.range[0]
        }) {
            l.classes.push(c.size);
            l.range[1] = c.range[1];
            l.malloc_share += c.p_m;
            l.free_share += c.p_f;
            c.list = l.index;
            continue;
        }
        c.list = lists.len();
        lists.push(ListPlan {
            index: lists.len(),
            allocator: c.allocator,
            classes: vec![c.size],
            range: c.range,
            block_bytes: b,
            malloc_share: c.p_m,
            free_share: c.p_f,
            malloc_rank: 0,
            free_rank: 0,
            reclaim_priority: 0.0,
            core_class: None,
        });
    }
    lists
}

/// Orders the lists, fast first, each group by malloc share, renumbers them
/// and the classes' `list`, and sorts the classes by allocations.
pub fn order(classes: &mut [ClassDecision], lists: Vec<ListPlan>) -> Vec<ListPlan> {
    let mut order: Vec<usize> = (0..lists.len()).collect();
    order.sort_by(|&a, &b| {
        let (la, lb) = (&lists[a], &lists[b]);
        (la.allocator == Allocator::General)
            .cmp(&(lb.allocator == Allocator::General))
            .then(lb.malloc_share.total_cmp(&la.malloc_share))
            .then(la.range[0].cmp(&lb.range[0]))
    });
    let mut renum = vec![0; lists.len()];
    for (new, &old) in order.iter().enumerate() {
        renum[old] = new;
    }
    let mut lists: Vec<ListPlan> = order.iter().map(|&o| lists[o].clone()).collect();
    for (i, l) in lists.iter_mut().enumerate() {
        l.index = i;
    }
    for c in classes.iter_mut() {
        c.list = renum[c.list];
    }
    classes.sort_by(|a, b| b.allocs.cmp(&a.allocs).then(a.size.cmp(&b.size)));
    lists
}

/// The reclaim priority of every list: P_f(s)(1 − P_m(s)) · s · F(s)
/// summed over its classes (002 §2.2).
pub fn priorities(lists: &mut [ListPlan], classes: &[ClassDecision]) {
    for l in lists.iter_mut() {
        l.reclaim_priority = classes
            .iter()
            .filter(|c| c.list == l.index)
            .map(|c| c.p_f * (1.0 - c.p_m) * c.size as f64 * c.mean_free_list)
            .sum();
    }
}
