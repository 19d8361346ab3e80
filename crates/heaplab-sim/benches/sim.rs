//! Simulator throughput, in references (accesses) per second, with baselines
//! measured in the same invocation: a trivial loop over the same stream, the
//! naive oracles, and a plain Fenwick-tree page probe.
//!
//!   cargo bench -p heaplab-sim --bench sim            # 16 M accesses per stream
//!   cargo bench -p heaplab-sim --bench sim -- --quick # 2 M, for a smoke run
//!   cargo bench -p heaplab-sim --bench sim -- --din FILE.din   # also a recorded stream
//!
//! A recorded stream in din form can be made with valgrind's lackey, e.g.:
//!
//!   valgrind --tool=lackey --trace-mem=yes --log-fd=3 PROGRAM 3>&1 >/dev/null 2>&1 \
//!     | awk '/^ [LSM] /{split($2,a,","); print ($1=="L")?0:1, a[1], a[2]}' > FILE.din
//!
//! Every figure is the best of several runs over an in-memory stream (so it
//! measures the simulator, not parsing); `din parse` measures the text reader
//! apart. Time is the thread's CPU time (CLOCK_THREAD_CPUTIME_ID), not wall
//! time, so that other processes on a shared machine do not count; the wall
//! time of the same runs is printed beside it, with the load average. Goals from issue 5: one direct-mapped configuration >= 300 M refs/s,
//! the exact page curve >= 20 M refs/s.

use std::collections::HashMap;
use std::hint::black_box;
use std::time::Instant;

use heaplab_sim::config::{parse_cache_spec, sweep_configs};
use heaplab_sim::din::{write_din, DinSource};
use heaplab_sim::gen::{heap_like, uniform};
use heaplab_sim::oracle::{NaiveCache, NaivePages, NaiveSweep};
use heaplab_sim::{drive, Access, Cache, CacheSweep, Mode, PageSim, Simulator};

/// This thread's CPU time in seconds.
fn cpu_now() -> f64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: clock_gettime writes one timespec to the pointer we pass, which
    // points to a live local.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    assert_eq!(rc, 0, "clock_gettime(CLOCK_THREAD_CPUTIME_ID) failed");
    ts.tv_sec as f64 + ts.tv_nsec as f64 * 1e-9
}

/// (CPU seconds, wall seconds) of the best of `reps` runs of `f`.
fn best(reps: usize, mut f: impl FnMut()) -> (f64, f64) {
    (0..reps)
        .map(|_| {
            let (c, w) = (cpu_now(), Instant::now());
            f();
            (cpu_now() - c, w.elapsed().as_secs_f64())
        })
        .fold((f64::INFINITY, f64::INFINITY), |a, b| (a.0.min(b.0), a.1.min(b.1)))
}

fn run_sim(sim: &mut dyn Simulator, stream: &[Access]) {
    for chunk in stream.chunks(heaplab_sim::access::BATCH) {
        sim.run(chunk);
    }
}

/// Mattson's stack distances with a Fenwick tree over last-use times and a
/// std HashMap from page to time: no top-of-stack array, no compaction (the
/// tree has one slot per reference). The "plain probe" the issue compares
/// against.
fn plain_fenwick_pages(stream: &[Access], shift: u32) -> Vec<u64> {
    let n = stream.len();
    let mut fen = vec![0u32; n + 1];
    let mut last: HashMap<u64, usize> = HashMap::new();
    let mut hist = vec![0u64; 1];
    let mut marked = 0u32;
    for (t, a) in stream.iter().enumerate() {
        let page = a.addr >> shift;
        if let Some(&t0) = last.get(&page) {
            let mut s = 0u32;
            let mut i = t0;
            while i > 0 {
                s += fen[i];
                i &= i - 1;
            }
            let d = (marked - s) as usize;
            hist[d] += 1;
            let mut i = t0 + 1;
            while i <= n {
                fen[i] -= 1;
                i += i & i.wrapping_neg();
            }
            marked -= 1;
        } else {
            hist.push(0);
        }
        let mut i = t + 1;
        while i <= n {
            fen[i] += 1;
            i += i & i.wrapping_neg();
        }
        marked += 1;
        last.insert(page, t);
    }
    hist
}

struct Row {
    name: String,
    refs: usize,
    cpu: f64,
    wall: f64,
}

impl Row {
    /// References per CPU second.
    fn rate(&self) -> f64 {
        self.refs as f64 / self.cpu
    }
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let quick = args.iter().any(|a| a == "--quick");
    let din = args
        .iter()
        .position(|a| a == "--din")
        .map(|i| args.get(i + 1).expect("--din FILE").clone());
    let n = if quick { 2 << 20 } else { 16 << 20 };
    let reps = if quick { 2 } else { 5 };
    let naive_n = n / 16;

    eprintln!("generating streams: {n} accesses each ...");
    let heap = heap_like(42, n, 20_000);
    let random = uniform(43, n, 0x5555_0000_0000, 256 << 20); // 64 Ki pages of 4 KiB
    let mut rows: Vec<Row> = Vec::new();
    let mut push = |name: &str, refs: usize, (cpu, wall): (f64, f64)| {
        let r = Row { name: name.to_string(), refs, cpu, wall };
        eprintln!("  {:<50} {:>9.1} M refs/s", r.name, r.rate() / 1e6);
        rows.push(r);
    };

    // Baseline: a trivial loop that reads every access.
    let t = best(reps, || {
        let mut s = 0u64;
        for a in &heap {
            s = s.wrapping_add(a.addr ^ a.size as u64 ^ a.kind as u64);
        }
        black_box(s);
    });
    push("baseline: trivial loop over the stream", n, t);

    // One direct-mapped configuration.
    let dm = parse_cache_spec("16K:32:1").unwrap()[0];
    let t = best(reps, || run_sim(&mut Cache::new(dm), &heap));
    push("Cache 16K:32:1 (heap-like)", n, t);
    let t = best(reps, || run_sim(&mut Cache::new(dm), &random));
    push("Cache 16K:32:1 (uniform random)", n, t);
    let t = best(reps, || run_sim(&mut NaiveCache::new(dm), &heap[..naive_n]));
    push("oracle NaiveCache 16K:32:1 (heap-like)", naive_n, t);
    let cfg8 = parse_cache_spec("32K:64:8").unwrap()[0];
    let t = best(reps, || run_sim(&mut Cache::new(cfg8), &heap));
    push("Cache 32K:64:8 (heap-like)", n, t);
    let t = best(reps, || run_sim(&mut CacheSweep::new(&[dm], &[Mode::Unified]), &heap));
    push("CacheSweep of 16K:32:1 alone (heap-like)", n, t);

    // The full sweep: 96 configurations in one pass.
    let all = sweep_configs();
    let t = best(reps, || run_sim(&mut CacheSweep::new(&all, &[Mode::Unified]), &heap));
    push("CacheSweep 96 configs, unified (heap-like)", n, t);
    let t =
        best(reps, || run_sim(&mut CacheSweep::new(&all, &[Mode::Unified, Mode::Split]), &heap));
    push("CacheSweep 96 configs, unified+split (heap-like)", n, t);
    let t = best(reps, || run_sim(&mut CacheSweep::new(&all, &[Mode::Unified]), &random));
    push("CacheSweep 96 configs, unified (uniform random)", n, t);
    let quarter = &heap[..n / 4];
    let t = best(1, || {
        for &c in &all {
            let mut one = Cache::new(c);
            run_sim(&mut one, quarter);
            black_box(one.counts());
        }
    });
    push("96 separate Cache passes, one per config (heap-like)", quarter.len(), t);
    let small = &heap[..naive_n / 8];
    let t = best(1, || run_sim(&mut NaiveSweep::new(&all, &[Mode::Unified]), small));
    push("oracle NaiveSweep 96 configs, unified (heap-like)", small.len(), t);

    // The exact page curve for every memory size.
    let t = best(reps, || {
        let mut p = PageSim::new(4096).unwrap();
        run_sim(&mut p, &heap);
        black_box(p.curve());
    });
    push("PageSim 4K, full curve (heap-like)", n, t);
    let t = best(reps, || {
        let mut p = PageSim::new(8192).unwrap();
        run_sim(&mut p, &heap);
        black_box(p.curve());
    });
    push("PageSim 8K, full curve (heap-like)", n, t);
    let t = best(reps, || {
        let mut p = PageSim::new(4096).unwrap();
        run_sim(&mut p, &random);
        black_box(p.curve());
    });
    push("PageSim 4K, full curve (uniform, 64 Ki pages)", n, t);
    let t = best(reps, || {
        black_box(plain_fenwick_pages(&heap, 12));
    });
    push("plain Fenwick probe 4K (heap-like)", n, t);
    let t = best(reps, || {
        black_box(plain_fenwick_pages(&random, 12));
    });
    push("plain Fenwick probe 4K (uniform, 64 Ki pages)", n, t);
    let t = best(1, || {
        let mut p = NaivePages::new(4096);
        run_sim(&mut p, &heap[..naive_n]);
        black_box(p.curve());
    });
    push("oracle NaivePages 4K (heap-like)", naive_n, t);

    // Reading din text (what `heaplab sim` does before simulating).
    let mut text = Vec::new();
    write_din(&mut text, &heap[..n / 4]).unwrap();
    struct Count(u64);
    impl Simulator for Count {
        fn run(&mut self, b: &[Access]) {
            self.0 += b.len() as u64;
        }
        fn flush(&mut self) {}
    }
    let t = best(reps, || {
        let mut src = DinSource::new(&text[..], "bench");
        let mut c = Count(0);
        drive(&mut src, &mut [&mut c]).unwrap();
        black_box(c.0);
    });
    push("din parse alone", n / 4, t);
    let t = best(reps, || {
        let mut src = DinSource::new(&text[..], "bench");
        let mut c = Cache::new(dm);
        drive(&mut src, &mut [&mut c]).unwrap();
        black_box(c.counts());
    });
    push("din parse + Cache 16K:32:1", n / 4, t);

    // A recorded stream, if one was given: read once, then simulated from memory.
    if let Some(path) = &din {
        struct Keep(Vec<Access>);
        impl Simulator for Keep {
            fn run(&mut self, b: &[Access]) {
                self.0.extend_from_slice(b);
            }
            fn flush(&mut self) {}
        }
        let f = std::io::BufReader::with_capacity(
            1 << 20,
            std::fs::File::open(path).expect("--din FILE"),
        );
        let mut keep = Keep(Vec::new());
        let mut src = DinSource::new(f, path.clone());
        let t = best(1, || {
            drive(&mut src, &mut [&mut keep]).expect("a readable din file");
        });
        let rec = keep.0;
        let m = rec.len();
        eprintln!("recorded stream {path}: {m} accesses");
        push("recorded: din parse into memory (file)", m, t);
        let t = best(reps, || run_sim(&mut Cache::new(dm), &rec));
        push("recorded: Cache 16K:32:1", m, t);
        let t = best(reps, || run_sim(&mut CacheSweep::new(&all, &[Mode::Unified]), &rec));
        push("recorded: CacheSweep 96 configs, unified", m, t);
        let t = best(reps, || {
            let mut p = PageSim::new(4096).unwrap();
            run_sim(&mut p, &rec);
            black_box(p.curve());
        });
        push("recorded: PageSim 4K, full curve", m, t);
        let t = best(1, || {
            black_box(plain_fenwick_pages(&rec, 12));
        });
        push("recorded: plain Fenwick probe 4K", m, t);
    }

    let rate = |name: &str| rows.iter().find(|r| r.name.starts_with(name)).map(Row::rate).unwrap();
    let base = rate("baseline");
    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    println!();
    println!(
        "{} accesses per stream, best of {reps}; load average at the end: {}",
        n,
        load.split_whitespace().take(3).collect::<Vec<_>>().join(" ")
    );
    println!(
        "{:<50} {:>10} {:>12} {:>14}",
        "simulator (stream)", "M refs/s", "(wall M/s)", "x trivial loop"
    );
    for r in &rows {
        println!(
            "{:<50} {:>10.1} {:>12.1} {:>14.3}",
            r.name,
            r.rate() / 1e6,
            r.refs as f64 / r.wall / 1e6,
            r.rate() / base
        );
    }
    println!();
    println!("ratios within this run:");
    println!(
        "  Cache 16K:32:1 / NaiveCache                 {:>8.1}x",
        rate("Cache 16K:32:1 (heap") / rate("oracle NaiveCache")
    );
    println!(
        "  CacheSweep 96 / NaiveSweep 96               {:>8.1}x",
        rate("CacheSweep 96 configs, unified (heap") / rate("oracle NaiveSweep")
    );
    println!(
        "  CacheSweep 96 / 96 separate Cache passes    {:>8.1}x",
        rate("CacheSweep 96 configs, unified (heap") / rate("96 separate Cache passes")
    );
    println!(
        "  PageSim 4K / plain Fenwick probe (heap)     {:>8.1}x",
        rate("PageSim 4K, full curve (heap") / rate("plain Fenwick probe 4K (heap")
    );
    println!(
        "  PageSim 4K / plain Fenwick probe (uniform)  {:>8.1}x",
        rate("PageSim 4K, full curve (uniform") / rate("plain Fenwick probe 4K (uniform")
    );
    println!(
        "  PageSim 4K / NaivePages                     {:>8.1}x",
        rate("PageSim 4K, full curve (heap") / rate("oracle NaivePages")
    );
    if din.is_some() {
        println!(
            "  recorded: PageSim 4K / plain Fenwick probe  {:>8.1}x",
            rate("recorded: PageSim") / rate("recorded: plain Fenwick")
        );
        println!(
            "  recorded: CacheSweep 96 / Cache 16K:32:1    {:>8.3}x (96 configs for the price of {:.0})",
            rate("recorded: CacheSweep") / rate("recorded: Cache 16K"),
            rate("recorded: Cache 16K") / rate("recorded: CacheSweep")
        );
    }
    println!();
    let dm_rate = rate("Cache 16K:32:1 (heap") / 1e6;
    let pg_rate = rate("PageSim 4K, full curve (heap") / 1e6;
    println!(
        "goals: one direct-mapped config {:.0} M refs/s (goal >= 300: {}); page curve {:.0} M refs/s (goal >= 20: {})",
        dm_rate,
        if dm_rate >= 300.0 { "met" } else { "NOT met" },
        pg_rate,
        if pg_rate >= 20.0 { "met" } else { "NOT met" }
    );
}
