//! The fast simulators against the naive ones (`heaplab_sim::oracle`): the
//! counts must be EXACTLY equal, on seeded random streams, on the synthetic
//! heap-like stream, and on a real recorded stream (valgrind's lackey on a
//! small program). Seeded, so a failure repeats; not a benchmark.

use std::process::Command;

use heaplab_sim::config::{parse_cache_spec, sweep_configs, CacheConfig};
use heaplab_sim::gen::{heap_like, uniform, Rng};
use heaplab_sim::oracle::{NaiveCache, NaivePages, NaiveSweep};
use heaplab_sim::{Access, Cache, CacheSweep, Kind, Mode, PageSim, Part, Simulator};

/// Runs `stream` through `a` and `b` in batches of varied sizes, flushing
/// (caches only) at the given positions.
fn feed(stream: &[Access], sims: &mut [&mut dyn Simulator], flush_at: &[usize], rng: &mut Rng) {
    let mut i = 0;
    while i < stream.len() {
        let mut end = (i + 1 + rng.below(3000) as usize).min(stream.len());
        if let Some(&f) = flush_at.iter().find(|&&f| f > i && f < end) {
            end = f;
        }
        for s in sims.iter_mut() {
            s.run(&stream[i..end]);
        }
        if flush_at.contains(&end) {
            for s in sims.iter_mut() {
                s.flush();
            }
        }
        i = end;
    }
}

fn check_cache(cfg: CacheConfig, stream: &[Access], seed: u64) {
    let mut fast = Cache::new(cfg);
    let mut slow = NaiveCache::new(cfg);
    let flushes = [stream.len() / 3];
    feed(stream, &mut [&mut fast, &mut slow], &flushes, &mut Rng::new(seed));
    assert_eq!(fast.counts(), slow.counts(), "Cache {cfg} differs from the oracle (seed {seed})");
    assert!(fast.counts().total_misses() > 0);
}

fn check_sweep(configs: &[CacheConfig], stream: &[Access], seed: u64) {
    let modes = [Mode::Unified, Mode::Split];
    let mut fast = CacheSweep::new(configs, &modes);
    let mut slow = NaiveSweep::new(configs, &modes);
    let flushes = [stream.len() / 2];
    feed(stream, &mut [&mut fast, &mut slow], &flushes, &mut Rng::new(seed));
    let (f, s) = (fast.results(), slow.results());
    assert_eq!(f.len(), s.len());
    for (f, s) in f.iter().zip(&s) {
        assert_eq!((f.config, f.mode), (s.config, s.mode));
        assert_eq!(
            f.counts, s.counts,
            "CacheSweep {} {:?} differs from the oracle (seed {seed})",
            f.config, f.mode
        );
    }
}

fn check_pages(page_size: u64, stream: &[Access], seed: u64) -> u64 {
    let mut fast = PageSim::new(page_size).unwrap();
    let mut slow = NaivePages::new(page_size);
    feed(stream, &mut [&mut fast, &mut slow], &[stream.len() / 2], &mut Rng::new(seed));
    let (f, s) = (fast.curve(), slow.curve());
    assert_eq!(f, s, "PageSim {page_size} differs from the oracle (seed {seed})");
    f.distinct_pages
}

/// A random configuration from small to mid-sized, odd associativities
/// included, so that sets conflict a lot.
fn random_config(r: &mut Rng) -> CacheConfig {
    loop {
        let line = 4u32 << r.below(5); // 4..64
        let assoc = [1, 1, 2, 3, 4, 5, 8, 16][r.below(8) as usize];
        let sets = 1u64 << r.below(8);
        if let Ok(c) = CacheConfig::new(sets * assoc as u64 * line as u64, line, assoc) {
            return c;
        }
    }
}

#[test]
fn single_caches_on_random_streams() {
    for seed in 0..40 {
        let mut r = Rng::new(seed);
        let cfg = random_config(&mut r);
        let span = cfg.size() * (1 + r.below(8));
        let stream = uniform(seed, 20_000, 0x1000 * r.below(100), span);
        check_cache(cfg, &stream, seed);
    }
}

#[test]
fn single_caches_on_heap_like_streams() {
    let stream = heap_like(11, 150_000, 2000);
    for spec in ["16K:32:1", "64K:32:1", "256K:32:1", "512:32:1", "32K:64:8", "8K:16:2", "3K:64:3"]
    {
        for cfg in parse_cache_spec(spec).unwrap() {
            check_cache(cfg, &stream, 11);
        }
    }
}

#[test]
fn sweeps_on_random_streams() {
    for seed in 100..115 {
        let mut r = Rng::new(seed);
        let configs: Vec<CacheConfig> =
            (0..1 + r.below(12)).map(|_| random_config(&mut r)).collect();
        let stream = uniform(seed, 20_000, 0, 1 << (10 + r.below(8)));
        check_sweep(&configs, &stream, seed);
    }
}

#[test]
fn full_sweep_on_a_heap_like_stream() {
    // The 96 configurations, both modes, against 288 naive caches.
    let stream = heap_like(5, 60_000, 3000);
    check_sweep(&sweep_configs(), &stream, 5);
}

#[test]
fn pages_on_random_streams() {
    for seed in 200..220 {
        let mut r = Rng::new(seed);
        let page = 64u64 << r.below(8); // 64 B .. 8 KiB: many pages, deep stacks
        let distinct = 1 + r.below(3000);
        let stream = uniform(seed, 30_000, page * r.below(1 << 20), page * distinct);
        check_pages(page, &stream, seed);
    }
}

#[test]
fn pages_through_many_compactions() {
    // 12 000 distinct pages, revisited in shifting orders: the tree is
    // renumbered several times and distances reach the thousands.
    let mut r = Rng::new(3);
    let mut stream = Vec::new();
    for round in 0..5u64 {
        for i in 0..12_000u64 {
            let p = if r.chance(0.3) { r.below(12_000) } else { (i * 7 + round * 13) % 12_000 };
            stream.push(Access::new(p << 12, 8, Kind::Read));
        }
    }
    assert!(check_pages(4096, &stream, 3) > 11_900);
}

#[test]
fn pages_on_heap_like_streams() {
    let stream = heap_like(8, 200_000, 4000);
    for page in [4096, 8192, 256] {
        check_pages(page, &stream, 8);
    }
}

/// Lackey's `--trace-mem=yes` lines (` L addr,size`, ` S`, ` M`, `I`) as
/// accesses. Pages whose number is a multiple of 5 are marked as the
/// allocator's, so that the split mode sees both parts.
fn lackey_stream(program: &[&str]) -> Vec<Access> {
    let out = Command::new("valgrind")
        .args(["--tool=lackey", "--trace-mem=yes", "--log-fd=1", "-q"])
        .args(program)
        .output()
        .expect("valgrind is needed for this test (scripts/setup.sh installs it)");
    assert!(
        out.status.success(),
        "valgrind lackey failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout);
    let mut v = Vec::new();
    for line in text.lines() {
        let t = line.trim_start();
        let Some((op, rest)) = t.split_once(' ') else { continue };
        let Some((addr, size)) = rest.trim().split_once(',') else { continue };
        let (Ok(addr), Ok(size)) = (u64::from_str_radix(addr, 16), size.parse::<u32>()) else {
            continue;
        };
        let part = if (addr >> 12) % 5 == 0 { Part::Allocator } else { Part::Application };
        let mut push = |kind| v.push(Access { addr, size, kind, part });
        match op {
            "L" => push(Kind::Read),
            "S" => push(Kind::Write),
            "M" => {
                push(Kind::Read);
                push(Kind::Write)
            }
            "I" => push(Kind::Fetch),
            _ => {}
        }
    }
    v
}

#[test]
fn a_real_recorded_stream() {
    let stream = lackey_stream(&["/bin/ls", "-l", "/"]);
    assert!(stream.len() > 100_000, "lackey gave only {} accesses", stream.len());
    let data: Vec<Access> = stream.iter().copied().filter(|a| a.kind != Kind::Fetch).collect();
    let configs = parse_cache_spec("paper000,512:32:1,32K:64:8,32K:32:2,1M:64:4").unwrap();
    check_sweep(&configs, &data, 1);
    check_cache(configs[0], &stream, 1); // instruction fetches too
    for page in [4096, 8192] {
        check_pages(page, &stream, 1);
    }
}
