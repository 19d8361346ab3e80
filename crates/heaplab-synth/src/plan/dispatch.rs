//! How malloc and free find a list (002 Figures 1 and 3, §4.3; 000 Figure
//! 9), and the reclaim order of the general lists (002 §2.2).
//!
//! malloc tests the lists in allocation-frequency order and free in
//! free-frequency order, unless those tests are estimated (about
//! `COST_MALLOC_TEST` instructions per malloc test and `COST_FREE_TEST` per
//! free test, a miss paying for every test) to cost more than a size-map
//! array (`COST_MALLOC_MAP`, `COST_FREE_MAP`): that is, when many classes are
//! comparably common.

use super::{
    Allocator, Dispatch, DispatchDecision, Estimates, ListPlan, Options, ReclaimDecision,
    COST_FREE_MAP, COST_FREE_TEST, COST_MALLOC_MAP, COST_MALLOC_TEST,
};

/// Ranks the lists for the tests, estimates both dispatches and picks one.
pub fn decide(lists: &mut [ListPlan], unit: u64, opts: &Options) -> DispatchDecision {
    let nfast = lists.iter().filter(|l| l.allocator == Allocator::Fast).count();
    let mut malloc_order: Vec<usize> = (0..lists.len()).collect();
    malloc_order
        .sort_by(|&a, &b| lists[b].malloc_share.total_cmp(&lists[a].malloc_share).then(a.cmp(&b)));
    let by_free = |ids: Vec<usize>| {
        let mut v = ids;
        v.sort_by(|&a, &b| lists[b].free_share.total_cmp(&lists[a].free_share).then(a.cmp(&b)));
        v
    };
    let free_order = by_free((0..nfast).collect());
    let general_free_order = by_free((nfast..lists.len()).collect());
    // The lists tested without the lock: the fast ones, or all when none is.
    let front: Vec<usize> = if nfast > 0 {
        malloc_order.iter().copied().filter(|&i| i < nfast).collect()
    } else {
        malloc_order.clone()
    };
    for (rank, &i) in front.iter().enumerate() {
        lists[i].malloc_rank = rank;
    }
    if nfast == 0 {
        for (rank, &i) in general_free_order.iter().enumerate() {
            lists[i].free_rank = rank;
        }
    } else {
        for (rank, &i) in free_order.iter().enumerate() {
            lists[i].free_rank = rank;
        }
        for (rank, &i) in general_free_order.iter().enumerate() {
            lists[i].free_rank = nfast + rank;
        }
    }
    let tested_free: &[usize] = if nfast > 0 { &free_order } else { &general_free_order };
    let est = Estimates {
        ordered_malloc: ordered_cost(
            front.iter().map(|&i| lists[i].malloc_share),
            COST_MALLOC_TEST,
        ),
        ordered_free: ordered_cost(
            tested_free.iter().map(|&i| lists[i].free_share),
            COST_FREE_TEST,
        ),
        sizemap_malloc: if lists.is_empty() { 0.0 } else { COST_MALLOC_MAP },
        sizemap_free: if lists.is_empty() { 0.0 } else { COST_FREE_MAP },
    };
    let (kind, how) = match opts.dispatch {
        Dispatch::Auto => {
            if est.ordered_malloc + est.ordered_free > est.sizemap_malloc + est.sizemap_free {
                (Dispatch::Sizemap, "profile")
            } else {
                (Dispatch::Ordered, "profile")
            }
        }
        d => (d, "given"),
    };
    let map_max = lists.iter().map(|l| l.range[1]).max().unwrap_or(0);
    DispatchDecision {
        kind,
        how: how.into(),
        rule: format!(
            "size map when the frequency-ordered tests are estimated to cost more than the \
             map ({COST_MALLOC_TEST} instructions per malloc test, {COST_FREE_TEST} per free \
             test; the map {COST_MALLOC_MAP} and {COST_FREE_MAP}); 002 §4.3, 000 Figure 9"
        ),
        estimated_instructions: est,
        malloc_order,
        free_order,
        general_free_order,
        map_max_bytes: map_max,
        map_entries: map_max / unit + 1,
    }
}

/// The general lists in decreasing reclaim priority (002 §2.2).
pub fn reclaim(lists: &[ListPlan]) -> ReclaimDecision {
    let nfast = lists.iter().filter(|l| l.allocator == Allocator::Fast).count();
    let mut order: Vec<usize> = (nfast..lists.len()).collect();
    order.sort_by(|&a, &b| {
        lists[b]
            .reclaim_priority
            .unwrap_or(0.0)
            .total_cmp(&lists[a].reclaim_priority.unwrap_or(0.0))
            .then(a.cmp(&b))
    });
    ReclaimDecision {
        rule: "general lists in decreasing P_f(s)(1 - P_m(s)) s F(s), computed here; \
               reclaimed into gnugpp until twice the request is recovered, when gnugpp \
               would otherwise grow its heap (002 §2.2)"
            .into(),
        order,
    }
}

/// Mean tests until the match: share_i × cost × (i + 1), and a miss pays
/// for every test.
fn ordered_cost(shares: impl Iterator<Item = f64>, per_test: f64) -> f64 {
    let mut cost = 0.0;
    let mut hit = 0.0;
    let mut k = 0.0;
    for s in shares {
        k += 1.0;
        cost += s * per_test * k;
        hit += s;
    }
    cost + (1.0 - hit).max(0.0) * per_test * k
}
