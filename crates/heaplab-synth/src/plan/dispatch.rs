//! How malloc finds a class (002 Figures 1 and 3, §4.3; 000 Figure 9), and
//! the reclaim orders (002 §2.2).
//!
//! The paper tests the lists in allocation-frequency order, about
//! `COST_MALLOC_TEST` instructions a test, a miss paying for every test. The
//! fast core's size map is one byte load from the thread's own map indexed
//! by the request size (`COST_MALLOC_MAP`), which even one test costs more
//! than: the map is taken unless `--dispatch ordered` asks for the tests
//! (then the fast lists are tested in malloc order before the map). Free
//! tests nothing either way: the class is the block's address.

use super::core::CoreLayout;
use super::{
    Allocator, Dispatch, DispatchDecision, Estimates, ListPlan, Options, ReclaimDecision,
    COST_FREE_ADDRESS, COST_MALLOC_MAP, COST_MALLOC_TEST,
};

/// Ranks the lists, estimates both dispatches and picks one.
pub fn decide(lists: &mut [ListPlan], opts: &Options) -> DispatchDecision {
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
    let fast_order: Vec<usize> = malloc_order.iter().copied().filter(|&i| i < nfast).collect();
    for (rank, &i) in malloc_order.iter().enumerate() {
        lists[i].malloc_rank = rank;
    }
    for (rank, &i) in free_order.iter().chain(general_free_order.iter()).enumerate() {
        lists[i].free_rank = rank;
    }
    let est = Estimates {
        ordered_malloc: ordered_cost(
            fast_order.iter().map(|&i| lists[i].malloc_share),
            COST_MALLOC_TEST,
        ),
        sizemap_malloc: COST_MALLOC_MAP,
        free: COST_FREE_ADDRESS,
    };
    let (kind, how) = match opts.dispatch {
        Dispatch::Auto => {
            if est.ordered_malloc > est.sizemap_malloc {
                (Dispatch::Sizemap, "profile")
            } else {
                (Dispatch::Ordered, "profile")
            }
        }
        d => (d, "given"),
    };
    DispatchDecision {
        kind,
        how: how.into(),
        rule: format!(
            "size map when the frequency-ordered tests are estimated to cost more than the \
             map ({COST_MALLOC_TEST} instructions per test, a miss paying for every test and \
             then the map; the map {COST_MALLOC_MAP}); free finds the class from the address \
             ({COST_FREE_ADDRESS}) either way; 002 §4.3, 000 Figure 9"
        ),
        estimated_instructions: est,
        malloc_order,
        free_order,
        general_free_order,
        map_max_bytes: super::core::SF_MAP_MAX,
        map_entries: super::core::SF_MAP_MAX + 1,
    }
}

/// The general lists, and the fast core's classes, in decreasing reclaim
/// priority (002 §2.2).
pub fn reclaim(lists: &[ListPlan], core: &CoreLayout) -> ReclaimDecision {
    let nfast = lists.iter().filter(|l| l.allocator == Allocator::Fast).count();
    let mut order: Vec<usize> = (nfast..lists.len()).collect();
    order.sort_by(|&a, &b| {
        lists[b].reclaim_priority.total_cmp(&lists[a].reclaim_priority).then(a.cmp(&b))
    });
    ReclaimDecision {
        rule: "decreasing P_f(s)(1 - P_m(s)) s F(s), computed here (002 §2.2): general lists are \
               given back to gnugpp until twice the request is recovered, when gnugpp would \
               otherwise grow its heap; the fast core's empty slabs go back to the OS until \
               twice what a thread took in new slabs since it last looked, once that is 1/8 of \
               its footprint (fastcore.h)"
            .into(),
        order,
        core_order: core.reclaim_order.clone(),
    }
}

/// Mean instructions of the ordered tests: share_i × cost × (i + 1), and a
/// miss pays for every test and the map after them.
fn ordered_cost(shares: impl Iterator<Item = f64>, per_test: f64) -> f64 {
    let mut cost = 0.0;
    let mut hit = 0.0;
    let mut k = 0.0;
    for s in shares {
        k += 1.0;
        cost += s * per_test * k;
        hit += s;
    }
    cost + (1.0 - hit).max(0.0) * (per_test * k + COST_MALLOC_MAP)
}
