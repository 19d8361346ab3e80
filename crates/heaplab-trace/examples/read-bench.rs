//! Benchmark (not a test) of the Rust trace reader: reads a trace to its
//! end with `read_event` (as `heaplab synth` and `stats` do) and prints the events, the CPU time per event and a digest of every
//! field of every event, computed exactly as the C reader's benchmark
//! (`build/bin/hltrace-bench`, native/common/tests/hltrace_bench.c) computes
//! it, so the two readers can be checked against each other on a trace too
//! big for a text dump:
//!
//! ```text
//! cargo run --release -p heaplab-trace --example read-bench -- TRACE [--repeat N]
//! events=N cpu_ns=N ns_per_event=X digest=HEX status=ok|error
//! ```

use heaplab_trace::TraceReader;
use std::time::Instant;

/// CPU time of this thread, in ns (`/proc/thread-self/schedstat`), or wall
/// time where that is missing.
fn cpu_ns(wall: Instant) -> u64 {
    std::fs::read_to_string("/proc/thread-self/schedstat")
        .ok()
        .and_then(|s| s.split_whitespace().next().and_then(|v| v.parse().ok()))
        .unwrap_or_else(|| wall.elapsed().as_nanos() as u64)
}

fn mix(h: u64, v: u64) -> u64 {
    let h = (h ^ v).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    h ^ (h >> 29)
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let mut path = None;
    let mut repeat = 1;
    let mut i = 0;
    while i < args.len() {
        if args[i] == "--repeat" && i + 1 < args.len() {
            repeat = args[i + 1].parse().expect("--repeat N");
            i += 1;
        } else {
            path = Some(args[i].clone());
        }
        i += 1;
    }
    let path = path.expect("usage: read-bench TRACE [--repeat N]");
    for _ in 0..repeat {
        let wall = Instant::now();
        let c0 = cpu_ns(wall);
        let mut r = match TraceReader::open(&path) {
            Ok(r) => r,
            Err(e) => {
                eprintln!("{e}");
                std::process::exit(1);
            }
        };
        let (mut h, mut events) = (0xcbf2_9ce4_8422_2325u64, 0u64);
        let mut e = heaplab_trace::Event::default();
        let status = loop {
            match r.read_event(&mut e) {
                Ok(true) => {
                    events += 1;
                    let n_after = e.after.iter().flatten().count() as u64;
                    let mut x = e.index.wrapping_mul(0xA24B_AED4_963E_E407);
                    x ^= (u64::from(e.kind.code())
                        | u64::from(e.failed) << 8
                        | u64::from(e.inherited) << 16
                        | u64::from(e.id.is_some()) << 24
                        | u64::from(e.old.is_some()) << 32
                        | n_after << 40)
                        .wrapping_mul(0x9FB2_1C65_1E98_DF25);
                    x ^= (u64::from(e.thread) << 32 | u64::from(e.stack))
                        .wrapping_mul(0xC2B2_AE3D_27D4_EB4F);
                    x ^= e.time.wrapping_mul(0x1656_67B1_9E37_79F9);
                    x ^= e.size.wrapping_mul(0xD6E8_FEB8_6659_FD93);
                    x ^= e.align.wrapping_mul(0xFF51_AFD7_ED55_8CCD);
                    x ^= e.id.unwrap_or(0).wrapping_mul(0xC4CE_B9FE_1A85_EC53);
                    let has_old = e.old.is_some();
                    x ^= e.old.unwrap_or(0).wrapping_mul(0x87C3_7B91_1142_53D5);
                    x ^= (if has_old { e.old_size } else { 0 }).wrapping_mul(0x4CF5_AD43_2745_937F);
                    x ^= e.thread_seq.wrapping_mul(0x52DC_E729_DA3E_D0E5);
                    x ^= (if has_old { u64::from(e.old_thread) } else { 0 })
                        .wrapping_mul(0x9E37_79B1_85EB_CA87);
                    x ^= (if has_old { e.old_seq } else { 0 }).wrapping_mul(0xC2B2_AE3D_27D4_EB4F);
                    for (k, d) in e.after.iter().flatten().enumerate() {
                        let k = k as u64;
                        x ^= u64::from(d.thread).wrapping_mul(0x27D4_EB2F_1656_67C5 + k);
                        x ^= d.steps.wrapping_mul(0x94D0_49BB_1331_11EB + k);
                    }
                    h = mix(h, x);
                }
                Ok(false) => break "ok",
                Err(e) => {
                    eprintln!("{e}");
                    break "error";
                }
            }
        };
        let dt = cpu_ns(wall).saturating_sub(c0);
        println!(
            "events={events} cpu_ns={dt} ns_per_event={:.1} digest={h:016x} status={status}",
            if events > 0 { dt as f64 / events as f64 } else { 0.0 }
        );
    }
}
