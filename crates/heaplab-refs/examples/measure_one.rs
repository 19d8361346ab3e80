//! Measures one allocator on one trace (a development aid, not a test):
//!   cargo run --release -p heaplab-refs --example measure_one -- TRACE [ALLOCATOR]
use heaplab_plumb::{alloc, Tools};
use heaplab_refs::measure::{events_only, measure, SimSpec};
use heaplab_refs::vg::VgTools;
use std::path::PathBuf;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..").canonicalize().unwrap();
    let tools = Tools::new(&heaplab_plumb::Layout::checkout(&root)).unwrap();
    let vg = VgTools::from_lib_dir(&root.join("build/lib"));
    let allocs = alloc::resolve(&[args.get(2).cloned().unwrap_or("glibc".into())], &tools).unwrap();
    let trace = PathBuf::from(&args[1]);
    let ev = std::env::temp_dir().join("measure_one.events.hltrace");
    events_only(&trace, &ev).unwrap();
    let spec = SimSpec { caches: heaplab_sim::config::sweep_configs(), page_sizes: vec![4096] };
    for a in &allocs {
        let c = measure(&vg, &tools.replay, &trace, &ev, a, &spec).unwrap();
        println!("{}: {:?} in {:.2} s", a.name, c.stats, c.seconds);
        for r in c
            .caches
            .iter()
            .filter(|r| r.config.assoc() == 1 && r.config.line() == 32 && r.config.size() == 16384)
        {
            println!(
                "  {:?} {}: {} accesses {} misses",
                r.mode,
                r.config.size(),
                r.counts.total_accesses(),
                r.counts.total_misses()
            );
        }
        println!(
            "  pages: {} distinct, faults at 8 frames: {}",
            c.pages[0].distinct_pages,
            c.pages[0].faults_at(8)
        );
    }
}
