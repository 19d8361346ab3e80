//! Valgrind massif's output format (`ms_print`, massif-visualizer): heap
//! snapshots over time, detailed ones with the allocation tree.
//!
//! ```text
//!   desc: heaplab TRACE
//!   cmd: PROG ARGS
//!   time_unit: ms
//!   #-----------
//!   snapshot=N            up to 100, evenly over the run, plus the peak
//!   #-----------
//!   time=MS
//!   mem_heap_B=LIVE       (useful heap: requested bytes)
//!   mem_heap_extra_B=0
//!   mem_stacks_B=0
//!   heap_tree=empty|detailed|peak      every 10th detailed, the peak "peak"
//!   n2: TOTAL (heap allocation functions) malloc/new/new[], --alloc-fns, etc.
//!    n1: BYTES 0xADDR: make_node (leak.c:4)     callers of the allocator
//!     n0: BYTES 0xADDR: main (leak.c:20)        their callers, one space deeper
//!    n0: BYTES in K places, all below massif's threshold (1.00%)
//! ```
//!
//! The peak snapshot's tree uses each stack's bytes at the peak (exact); the
//! others the timeline's per-stack values at their bucket's end.

use crate::analyze::Analysis;
use crate::sites::{frames_of, SiteFrame};
use crate::symbols::Symbolizer;
use std::collections::{BTreeMap, HashMap};
use std::fmt::Write as _;

#[derive(Default)]
struct Node {
    bytes: u64,
    label: String,
    children: BTreeMap<(String, u64), Node>,
}

fn label(f: &SiteFrame, base: u64) -> String {
    let addr = base.wrapping_add(f.offset);
    let clean =
        |s: &str| s.chars().map(|c| if c.is_control() { '?' } else { c }).collect::<String>();
    match f.symbols.first() {
        Some(s) => {
            let name = clean(s.function.as_deref().unwrap_or("???"));
            match s.short_location() {
                Some(l) => format!("0x{addr:X}: {name} ({})", clean(&l)),
                None => format!("0x{addr:X}: {name} (in {})", clean(&f.module)),
            }
        }
        None if f.module.is_empty() => format!("0x{addr:X}: ???"),
        None => format!("0x{addr:X}: ??? (in {})", clean(&f.module)),
    }
}

fn write_node(o: &mut String, n: &Node, depth: usize, total: u64) {
    let threshold = total / 100; // 1%
    let (big, small): (Vec<&Node>, Vec<&Node>) =
        n.children.values().filter(|c| c.bytes > 0).partition(|c| c.bytes >= threshold.max(1));
    let mut big = big;
    big.sort_by(|a, b| b.bytes.cmp(&a.bytes).then(a.label.cmp(&b.label)));
    let kids = big.len() + usize::from(!small.is_empty());
    let _ = writeln!(o, "{}n{}: {} {}", " ".repeat(depth), kids, n.bytes, n.label);
    for c in big {
        write_node(o, c, depth + 1, total);
    }
    if !small.is_empty() {
        let b: u64 = small.iter().map(|c| c.bytes).sum();
        let _ = writeln!(
            o,
            "{}n0: {} in {} place{}, all below massif's threshold (1.00%)",
            " ".repeat(depth + 1),
            b,
            small.len(),
            if small.len() == 1 { "" } else { "s" }
        );
    }
}

/// The massif file of an analysis.
pub fn massif(a: &Analysis, sym: &mut Symbolizer) -> String {
    let mut frames_cache: HashMap<u32, Vec<(SiteFrame, u64)>> = HashMap::new();
    let mut tree = |values: &[(u32, u64)], sym: &mut Symbolizer| -> Node {
        let mut root = Node {
            label: "(heap allocation functions) malloc/new/new[], --alloc-fns, etc.".into(),
            ..Node::default()
        };
        for &(id, bytes) in values {
            if bytes == 0 {
                continue;
            }
            root.bytes += bytes;
            let frames = frames_cache.entry(id).or_insert_with(|| {
                frames_of(a, id, sym)
                    .into_iter()
                    .zip(a.frames.get(id as usize).into_iter().flatten())
                    .map(|(f, raw)| {
                        let base = a.module_of(raw.module).map_or(0, |m| m.base);
                        (f, base)
                    })
                    .collect()
            });
            let mut node = &mut root;
            for (f, base) in frames.iter() {
                node = node
                    .children
                    .entry((f.module.clone(), f.offset))
                    .or_insert_with(|| Node { label: label(f, *base), ..Node::default() });
                node.bytes += bytes;
            }
        }
        root
    };
    let points = a.timeline.points();
    let width = a.timeline.width_ns();
    let ms = |ns: u64| ns / 1_000_000;
    let mut o = String::new();
    let _ =
        writeln!(o, "desc: heaplab {} {}", env!("CARGO_PKG_VERSION"), a.trace.replace('\n', " "));
    let cmd: String =
        a.meta.command_line().chars().map(|c| if c.is_control() { ' ' } else { c }).collect();
    let _ = writeln!(o, "cmd: {}", if cmd.is_empty() { "(unknown)".into() } else { cmd });
    let _ = writeln!(o, "time_unit: ms");
    // Buckets to show, evenly spaced; the peak goes in at its time.
    let n = points.len();
    let step = n.div_ceil(99).max(1);
    let mut picks: Vec<usize> = (0..n).step_by(step).collect();
    if n > 0 && picks.last() != Some(&(n - 1)) {
        picks.push(n - 1);
    }
    let peak_bucket = (a.totals.peak_ns / width.max(1)) as usize;
    let mut snaps: Vec<(u64, u64, Option<Node>, bool)> = Vec::new();
    snaps.push((0, 0, None, false));
    let mut peak_done = a.totals.peak_bytes == 0;
    for (k, &b) in picks.iter().enumerate() {
        let t = points[b].t_ns.min(a.totals.duration_ns.max(b as u64 * width));
        if !peak_done && b >= peak_bucket {
            let values: Vec<(u32, u64)> =
                a.stacks.iter().enumerate().map(|(i, s)| (i as u32, s.peak_bytes)).collect();
            snaps.push((a.totals.peak_ns, a.totals.peak_bytes, Some(tree(&values, sym)), true));
            peak_done = true;
        }
        let detailed = k % 10 == 9;
        let node = detailed.then(|| tree(&a.timeline.stacks_at(b), sym));
        snaps.push((t.max(snaps.last().map_or(0, |s| s.0)), points[b].last, node, false));
    }
    for (i, (t, bytes, node, peak)) in snaps.iter().enumerate() {
        let _ = writeln!(o, "#-----------\nsnapshot={i}\n#-----------");
        let _ = writeln!(o, "time={}", ms(*t));
        let _ = writeln!(o, "mem_heap_B={bytes}\nmem_heap_extra_B=0\nmem_stacks_B=0");
        match node {
            None => {
                let _ = writeln!(o, "heap_tree=empty");
            }
            Some(n) => {
                let _ = writeln!(o, "heap_tree={}", if *peak { "peak" } else { "detailed" });
                write_node(&mut o, n, 0, *bytes);
            }
        }
    }
    o
}
