//! The fast core's layout (native/alloc/fastcore.h): every request size up
//! to `fast_max_bytes` gets a fast class, not only the sizes the training
//! runs asked for; the profile decides the layout and the priorities.
//!
//! - **Classes**: the blocks of the fast lists (the kept classes, exact to
//!   16 bytes: no header) and a ladder for every other size (16 to 128 in
//!   steps of 16, then `ladder_steps` per doubling up to `fast_max_bytes`),
//!   at most `SF_NONE` = 63 classes; when there are more, the ladder steps
//!   nearest above a kept block go first. A request of n bytes takes the
//!   smallest block of at least n, unless n falls in a general list's range
//!   (then `SF_NONE`: the general allocator).
//! - **Slabs**: a class's blocks come from slabs ([`slab_of`]): small blocks
//!   `slab_blocks` at a time (more for a class the runs used a lot), large
//!   ones one or two at a time, each slab the smallest multiple of the page
//!   that wastes at most 1/16 of itself at its end. That is a thread's
//!   first slab of the class; the slabs it takes after it double every
//!   `SF_GROW_EVERY` up to [`slab_max_of`], so that a class the test run
//!   uses more than the training runs did takes few slabs all the same.
//! - **Reclaim order** (002 §2.2): decreasing P_f(s)(1 − P_m(s)) · s · F(s),
//!   each class summing the profile classes it serves; classes the runs
//!   never used come last, larger blocks first.

use super::{Allocator, ListPlan, Thresholds};
use heaplab_trace::profile::Profile;
use serde::Serialize;

/// The constants of native/alloc/fastcore.h the plan relies on.
pub const SF_NCLASS: usize = 64;
pub const SF_NONE: u8 = 63;
pub const SF_CLASS_SHIFT: u32 = 27;
pub const SF_SLOT_SHIFT: u32 = SF_CLASS_SHIFT + 6;
pub const SF_MAP_MAX: u64 = 1024;
pub const SF_MAX_SLOTS: u64 = 255;
pub const SF_GROW_EVERY: u64 = 8;
pub const PAGE: u64 = 4096;

/// One class of the fast core.
#[derive(Debug, Clone, Serialize)]
pub struct CoreClass {
    pub index: usize,
    pub block_bytes: u64,
    /// Requests served: `[lo, hi]` (lo 0 for the smallest class: malloc(0)).
    pub range: [u64; 2],
    /// The first slab a thread takes of the class ...
    pub slab_bytes: u64,
    pub blocks_per_slab: u64,
    /// ... and the largest: slabs double every `SF_GROW_EVERY` a thread takes.
    pub slab_max_bytes: u64,
    /// `list` (a fast list's block, its index in `lists`) or `ladder`.
    pub source: String,
    pub list: Option<usize>,
    /// Shares of the profile's allocations and frees it serves (at the unit).
    pub malloc_share: f64,
    pub free_share: f64,
    /// P_f(s)(1 − P_m(s)) · s · F(s), summed over the profile classes it serves.
    pub reclaim_priority: f64,
}

/// The fast core's whole layout, as the generated C has it.
#[derive(Debug, Clone, Serialize)]
pub struct CoreLayout {
    pub classes: Vec<CoreClass>,
    /// Sizes up to this use the per-thread byte map (fastcore.h SF_MAP_MAX).
    pub map_max_bytes: u64,
    /// Sizes up to this have a fast class (unless general).
    pub fast_max_bytes: u64,
    /// The class of each request size 0 ..= map_max_bytes (63: none).
    #[serde(skip)]
    pub map: Vec<u8>,
    /// The class of requests at `(n + 15) >> 4`, for n up to fast_max_bytes.
    #[serde(skip)]
    pub medium: Vec<u8>,
    /// Class indices, first given back first.
    pub reclaim_order: Vec<usize>,
    /// Address space of one class of one thread, and of a thread's slot.
    pub span_bytes: u64,
    pub slot_bytes: u64,
    pub max_slots: u64,
    pub rule: String,
}

/// The ladder of block sizes every program gets.
pub fn ladder(th: &Thresholds) -> Vec<u64> {
    let mut v: Vec<u64> = (1..=8).map(|k| 16 * k).collect();
    let mut base = 128u64;
    while base < th.fast_max_bytes {
        for k in 1..=th.ladder_steps {
            let b = (base + base * k / th.ladder_steps).div_ceil(16) * 16;
            if b <= th.fast_max_bytes {
                v.push(b);
            }
        }
        base *= 2;
    }
    v.sort_unstable();
    v.dedup();
    v
}

/// The slab of a class of `block` bytes whose live blocks the runs held at
/// most `peak_bytes` of: small blocks `slab_blocks` at a time, in at least
/// `min_slab_bytes` (64 KiB when the runs held a MiB or more of them, so
/// that a busy class takes a new slab less often; one page when they held
/// less than `min_slab_bytes`, so that a class the runs hardly used, or
/// never, costs a page, not 16 KiB, in a small program's footprint: a slab
/// counts whole from its first block on); blocks of 2 KiB and up two
/// at a time (one where the runs never held two at once), of 8 KiB and up
/// one at a time (a slab counts in the footprint
/// from its first block on, and a class the runs hardly used should not cost
/// eight large blocks); then the smallest multiple of the page that wastes at
/// most 1/16 of itself.
pub fn slab_of(block: u64, peak_bytes: u64, th: &Thresholds) -> u64 {
    let (blocks, floor) = if block >= 8192 {
        (1, PAGE)
    } else if block >= 2048 {
        // Two at a time, or one where the runs never held two at once.
        (if peak_bytes < 2 * block { 1 } else { 2 }, PAGE)
    } else if peak_bytes >= 1 << 20 {
        (th.slab_blocks, th.min_slab_bytes.max(64 << 10))
    } else if peak_bytes >= th.min_slab_bytes {
        (th.slab_blocks, th.min_slab_bytes)
    } else {
        (th.slab_blocks, PAGE)
    };
    let least = floor.max(block * blocks);
    let mut s = least.div_ceil(PAGE) * PAGE;
    while (s % block) * 16 > s && s < least * 4 {
        s += PAGE;
    }
    if (s % block) * 16 > s {
        s = least.div_ceil(PAGE) * PAGE;
    }
    s
}

/// The largest slab of a class whose first slab is `slab` bytes: `slab`
/// doubled while it stays within `slab_max_bytes` and `slab_max_blocks`
/// blocks (fastcore.h's schedule: slabs double every `SF_GROW_EVERY` a
/// thread takes, so a class a thread keeps refilling takes fewer, larger
/// slabs, and one it hardly uses keeps its small first one).
pub fn slab_max_of(block: u64, slab: u64, th: &Thresholds) -> u64 {
    let cap = th.slab_max_bytes.min(th.slab_max_blocks * block);
    let mut s = slab;
    while s * 2 <= cap {
        s *= 2;
    }
    s
}

/// Lays out the fast core for the planned lists.
pub fn layout(lists: &[ListPlan], prof: &Profile, th: &Thresholds) -> CoreLayout {
    let general: Vec<[u64; 2]> =
        lists.iter().filter(|l| l.allocator == Allocator::General).map(|l| l.range).collect();
    let kept: Vec<(u64, usize)> = lists
        .iter()
        .filter(|l| l.allocator == Allocator::Fast)
        .map(|l| (l.block_bytes, l.index))
        .collect();
    let mut ladder = ladder(th);
    ladder.retain(|b| !kept.iter().any(|(k, _)| k == b));
    // At most SF_NONE classes: drop the ladder steps nearest above a kept
    // block (they serve the fewest sizes the kept one does not), then the largest.
    let room = SF_NONE as usize;
    while kept.len() + ladder.len() > room {
        let near = ladder
            .iter()
            .enumerate()
            .filter_map(|(i, &b)| {
                let below = kept.iter().map(|k| k.0).filter(|&k| k < b).max()?;
                Some((b - below, i))
            })
            .min();
        match near {
            Some((gap, i)) if gap * 4 <= ladder[i] => {
                ladder.remove(i);
            }
            _ => {
                ladder.pop();
            }
        }
    }
    let mut blocks: Vec<(u64, Option<usize>)> =
        kept.iter().map(|&(b, l)| (b, Some(l))).chain(ladder.iter().map(|&b| (b, None))).collect();
    blocks.sort_by_key(|b| b.0);
    let fast_max = blocks.last().map_or(0, |b| b.0);
    let in_general = |n: u64| general.iter().any(|r| n >= r[0] && n <= r[1]);
    let class_of = |n: u64| -> u8 {
        if in_general(n.max(1)) {
            return SF_NONE;
        }
        blocks.iter().position(|b| b.0 >= n.max(1)).map_or(SF_NONE, |i| i as u8)
    };
    let map: Vec<u8> = (0..=SF_MAP_MAX).map(class_of).collect();
    // medium[k] serves requests of 16k - 15 .. 16k bytes: blocks are multiples
    // of 16, so the class of 16k serves them all (general ranges end on a
    // unit boundary of at least 8 bytes; a range inside the 16 is taken whole).
    let medium: Vec<u8> = (0..=fast_max / 16)
        .map(|k| {
            let (lo, hi) = ((16 * k).saturating_sub(15), 16 * k);
            if (lo..=hi).any(in_general) {
                SF_NONE
            } else {
                class_of(hi)
            }
        })
        .collect();
    let mut classes: Vec<CoreClass> = blocks
        .iter()
        .enumerate()
        .map(|(i, &(b, list))| {
            let lo = if i == 0 { 0 } else { blocks[i - 1].0 + 1 };
            // The most live bytes the runs held in the sizes this class serves.
            let peak: u64 = prof
                .size_classes
                .iter()
                .filter(|sc| sc.size.max(1) >= lo.max(1) && sc.size <= b)
                .map(|sc| sc.max_live * b)
                .sum();
            let slab = slab_of(b, peak, th);
            CoreClass {
                index: i,
                block_bytes: b,
                range: [lo, b],
                slab_bytes: slab,
                blocks_per_slab: slab / b,
                slab_max_bytes: slab_max_of(b, slab, th),
                source: if list.is_some() { "list".into() } else { "ladder".into() },
                list,
                malloc_share: 0.0,
                free_share: 0.0,
                reclaim_priority: 0.0,
            }
        })
        .collect();
    // What the runs asked of each class, and its reclaim priority.
    let ta = prof.size_classes.iter().map(|c| c.allocs).sum::<u64>().max(1) as f64;
    let tf = prof.size_classes.iter().map(|c| c.frees).sum::<u64>().max(1) as f64;
    for sc in &prof.size_classes {
        let c = if sc.size <= SF_MAP_MAX {
            map[sc.size as usize]
        } else if sc.size <= fast_max {
            medium[sc.size.div_ceil(16) as usize]
        } else {
            SF_NONE
        };
        if c == SF_NONE {
            continue;
        }
        let k = &mut classes[c as usize];
        let (pm, pf) = (sc.allocs as f64 / ta, sc.frees as f64 / tf);
        k.malloc_share += pm;
        k.free_share += pf;
        k.reclaim_priority += pf * (1.0 - pm) * sc.size as f64 * sc.mean_free_list;
    }
    let mut reclaim_order: Vec<usize> = (0..classes.len()).collect();
    reclaim_order.sort_by(|&a, &b| {
        classes[b]
            .reclaim_priority
            .total_cmp(&classes[a].reclaim_priority)
            .then(classes[b].block_bytes.cmp(&classes[a].block_bytes))
    });
    CoreLayout {
        classes,
        map_max_bytes: SF_MAP_MAX,
        fast_max_bytes: fast_max,
        map,
        medium,
        reclaim_order,
        span_bytes: 1 << SF_CLASS_SHIFT,
        slot_bytes: 1 << SF_SLOT_SHIFT,
        max_slots: SF_MAX_SLOTS,
        rule: format!(
            "every size up to {fast_max} bytes has a fast class: the fast lists' blocks (exact to \
             16 bytes) and a ladder (16..128 by 16, then {} steps per doubling); a request takes \
             the smallest block that holds it, unless a general list serves it; a thread's first \
             slab of a class holds {} blocks and at least {} bytes (a page for a class the runs \
             held less of at their peak), wasting at most 1/16; its slabs double every {} it \
             takes, up to {} bytes and {} blocks; empty slabs given back in decreasing \
             P_f(s)(1 - P_m(s)) s F(s) (002 §2.2)",
            th.ladder_steps,
            th.slab_blocks,
            th.min_slab_bytes,
            SF_GROW_EVERY,
            th.slab_max_bytes,
            th.slab_max_blocks
        ),
    }
}
