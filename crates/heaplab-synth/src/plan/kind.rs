//! Fast or general, per kept class (002 §2.2, Table 4): a class whose
//! objects are almost never freed is fast; a class whose mean free-list
//! length exceeds its mean live objects (episodic use, ESPRESSO) and would
//! give back at least `min_reclaim_bytes` is general; every other class is
//! fast (MAKE). `--variant` makes every class one or the other (Table 5);
//! `--fast` / `--general` override one class.
//!
//! The rule judges space only. The cost check ([`cost_check`]) weighs each
//! class it made general against time: a general class's malloc and free
//! cost about `COST_GENERAL` instructions (the shim's lock, gnugpp), a fast
//! one's `COST_FAST`; when that difference, times the class's share of the
//! program's mallocs, exceeds `general_budget_instructions` per malloc, the
//! class is made fast (a hot class that is also episodic: the logic
//! minimizer, prodcons' batches), and `decisions.json`'s `check` says so.
//! The fast core gives empty slabs back in the paper's reclaim order, so such
//! a class still returns the space its episodes free.

use super::{
    fast_block, mean_request, Allocator, ClassDecision, Options, Thresholds, Variant, COST_FAST,
    COST_GENERAL,
};
use heaplab_trace::profile::SizeClass;

/// The shares that turn counts into P_m(s) and P_f(s).
#[derive(Debug, Clone, Copy)]
pub struct Totals {
    pub allocs: f64,
    pub frees: f64,
}

impl Totals {
    pub fn of(classes: &[SizeClass]) -> Totals {
        Totals {
            allocs: classes.iter().map(|c| c.allocs).sum::<u64>().max(1) as f64,
            frees: classes.iter().map(|c| c.frees).sum::<u64>().max(1) as f64,
        }
    }
}

impl ClassDecision {
    /// A class's profile figures with its allocator and the reason for it;
    /// not overridden, not absorbed, list 0 until the lists are made.
    pub fn from_profile(
        c: &SizeClass,
        unit: u64,
        t: Totals,
        allocator: Allocator,
        why: String,
    ) -> ClassDecision {
        ClassDecision {
            size: c.size,
            range: [c.size.saturating_sub(unit) + 1, c.size],
            allocs: c.allocs,
            frees: c.frees,
            p_m: c.allocs as f64 / t.allocs,
            p_f: c.frees as f64 / t.frees,
            mean_live: c.mean_live,
            max_live: c.max_live,
            mean_free_list: c.mean_free_list,
            free_list_to_live: if c.mean_live > 0.0 {
                c.mean_free_list / c.mean_live
            } else {
                -1.0
            },
            mean_request: mean_request(c),
            allocator,
            why,
            overridden: false,
            absorbed: false,
            list: 0,
        }
    }
}

/// The decision for every kept class: the rule, then the variant, then the
/// per-class overrides.
pub fn decide(
    kept: &[&SizeClass],
    unit: u64,
    t: Totals,
    opts: &Options,
    th: &Thresholds,
) -> Vec<ClassDecision> {
    kept.iter()
        .map(|c| {
            let (mut alloc, mut why) = heuristic(c, th);
            match opts.variant {
                Variant::Heuristic | Variant::Paper => {}
                Variant::AllFast => {
                    alloc = Allocator::Fast;
                    why = "variant all-fast (002 Table 5)".into();
                }
                Variant::AllGeneral => {
                    alloc = Allocator::General;
                    why = "variant all-general (002 Table 5)".into();
                }
            }
            let mut overridden = false;
            if opts.fast.contains(&c.size) {
                (alloc, why, overridden) = (Allocator::Fast, "--fast".into(), true);
            }
            if opts.general.contains(&c.size) {
                (alloc, why, overridden) = (Allocator::General, "--general".into(), true);
            }
            let mut d = ClassDecision::from_profile(c, unit, t, alloc, why);
            d.overridden = overridden;
            d
        })
        .collect()
}

/// The heuristic of §2.2 for one class.
pub fn heuristic(c: &SizeClass, th: &Thresholds) -> (Allocator, String) {
    let freed = if c.allocs == 0 { 0.0 } else { c.frees as f64 / c.allocs as f64 };
    if freed < th.never_freed {
        return (
            Allocator::Fast,
            format!(
                "storage almost never returned: {} frees of {} allocations (002 §2.2)",
                c.frees, c.allocs
            ),
        );
    }
    let reclaim = c.mean_free_list * fast_block(c.size) as f64;
    if c.mean_free_list > th.free_list_ratio * c.mean_live {
        if reclaim >= th.min_reclaim_bytes as f64 {
            return (
                Allocator::General,
                format!(
                    "episodic: mean free list {:.1} > {:.1} mean live objects, {:.0} bytes to \
                     reclaim (002 Table 4, ESPRESSO)",
                    c.mean_free_list, c.mean_live, reclaim
                ),
            );
        }
        return (
            Allocator::Fast,
            format!(
                "mean free list {:.1} exceeds {:.1} mean live objects, but holds only {:.0} \
                 bytes (< {}): too little to reclaim",
                c.mean_free_list, c.mean_live, reclaim, th.min_reclaim_bytes
            ),
        );
    }
    (
        Allocator::Fast,
        format!(
            "mean free list {:.1} <= {:.1} mean live objects: little to reclaim (002 Table 4, MAKE)",
            c.mean_free_list, c.mean_live
        ),
    )
}

/// The cost check of the heuristic's general classes (see the module's
/// docs); `--general` and the variants are left as asked. Returns the check
/// for `decisions.json`, or None when the rule made no class general.
pub fn cost_check(
    classes: &mut [ClassDecision],
    opts: &Options,
    th: &Thresholds,
) -> Option<serde_json::Value> {
    if opts.variant != Variant::Heuristic {
        return None;
    }
    let mut rows = Vec::new();
    for c in classes.iter_mut() {
        if c.allocator != Allocator::General || c.overridden {
            continue;
        }
        let extra = c.p_m * (COST_GENERAL - COST_FAST);
        let keep = extra <= th.general_budget_instructions;
        rows.push(serde_json::json!({
            "size": c.size,
            "rule": "general",
            "p_m": c.p_m,
            "estimated_extra_instructions_per_malloc": extra,
            "verdict": if keep { "general" } else { "fast" },
        }));
        if !keep {
            c.allocator = Allocator::Fast;
            c.why = format!(
                "the rule said general ({}); made fast by the cost check: {:.1}% of mallocs x \
                 ({COST_GENERAL} - {COST_FAST}) instructions = {extra:.1} more per malloc > {} \
                 (the fast core gives its empty slabs back too)",
                c.why,
                100.0 * c.p_m,
                th.general_budget_instructions
            );
        }
    }
    if rows.is_empty() {
        return None;
    }
    Some(serde_json::json!({
        "rule": format!(
            "a class the rule makes general stays general only if P_m(s) x (COST_GENERAL {COST_GENERAL} \
             - COST_FAST {COST_FAST}) <= {} instructions per malloc, estimated on the training runs",
            th.general_budget_instructions
        ),
        "budget_instructions_per_malloc": th.general_budget_instructions,
        "classes": rows,
    }))
}
