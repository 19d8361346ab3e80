//! How fast the simulators run when fed from a recorded REFS stream (a
//! benchmark, not a test; bench/refs.py runs it). Each line is one pass over
//! the whole stream, in one invocation, so the decode-only pass is the
//! baseline the others compare with:
//!
//!   cargo run --release -p heaplab-refs --example sim_refs -- TRACE [--json FILE]
//!
//! Heap objects are placed side by side (heaplab_refs::source::RefsSource).
use heaplab_refs::source::RefsSource;
use heaplab_sim::config::{sweep_configs, CacheConfig};
use heaplab_sim::{drive, Cache, CacheSweep, Mode, PageSim, Simulator};
use heaplab_trace::refs::RefsReader;

fn cpu() -> f64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: ts is a valid out-pointer.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    ts.tv_sec as f64 + ts.tv_nsec as f64 * 1e-9
}

fn pass(trace: &str, what: &str, sims: &mut [&mut dyn Simulator]) -> serde_json::Value {
    let mut src = RefsSource::new(RefsReader::open(trace).unwrap());
    let (w0, c0) = (std::time::Instant::now(), cpu());
    let st = drive(&mut src, sims).unwrap();
    let (wall, cpu_s) = (w0.elapsed().as_secs_f64(), cpu() - c0);
    let n = st.total();
    println!(
        "{what:<44} {n} refs  {:.2} s cpu ({:.2} s wall)  {:.1} M refs/s (cpu)",
        cpu_s,
        wall,
        n as f64 / cpu_s / 1e6
    );
    serde_json::json!({"pass": what, "refs": n, "cpu_s": cpu_s, "wall_s": wall, "mrefs_per_s_cpu": n as f64 / cpu_s / 1e6})
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let trace = &args[1];
    let mut out = Vec::new();
    out.push(pass(trace, "decode only (baseline)", &mut []));
    if args.iter().any(|a| a == "--decode-only") {
        return;
    }
    let mut dm = Cache::new(CacheConfig::new(32 << 10, 32, 1).unwrap());
    out.push(pass(trace, "one cache, 32K direct-mapped, 32-byte lines", &mut [&mut dm]));
    let configs = sweep_configs();
    let mut sweep = CacheSweep::new(&configs, &[Mode::Unified]);
    out.push(pass(
        trace,
        &format!("sweep: {} caches in one pass", configs.len()),
        &mut [&mut sweep],
    ));
    let mut pages = PageSim::new(4096).unwrap();
    out.push(pass(trace, "exact LRU page curve, 4 KiB pages", &mut [&mut pages]));
    if let Some(i) = args.iter().position(|a| a == "--json") {
        std::fs::write(&args[i + 1], serde_json::to_string_pretty(&out).unwrap()).unwrap();
    }
}
