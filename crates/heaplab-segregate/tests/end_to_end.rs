//! heaplab segregate end to end, on a small real program whose objects fall
//! into the classes by construction (`native/segregate/tests/seg_workload.c`):
//! record it under heaplab's Valgrind tool on three inputs, train, emit the
//! segmented allocator, and then
//!
//! - run the program itself with the STACK library: the run-time lookups,
//!   which unwind the program's own stack, must put exactly the objects the
//!   offline prediction puts in each segment, and the output must be glibc's;
//! - replay the test trace with site hints under the measure tool: again the
//!   same objects per segment (the hint path, and the replayer's hints);
//! - check every figure of the measurement (pages per segment, references
//!   per page, the sorted page references, the page-fault curve, cache misses)
//!   against a naive computation over the very accesses the simulators saw,
//!   and the relative figures against direct definitions.
//!
//! Needs `make -C native` (the tool, the allocator's sources and the
//! program); the runs take a few seconds under Valgrind.

use heaplab_plumb::scratch::mkdtemp;
use heaplab_refs::record::{self, Options as RecOptions};
use heaplab_refs::vg::{Ended, VgTools};
use heaplab_segregate::classes::{Class, Thresholds};
use heaplab_segregate::emit::{self, Builder};
use heaplab_segregate::evaluate::{self, MeasureJob, Measured};
use heaplab_segregate::objects::{self, Profile};
use heaplab_segregate::predictors::{classify, Kind, Predictor, TrainOptions};
use heaplab_segregate::runtime::SegReport;
use heaplab_segregate::study;
use heaplab_sim::oracle::{NaiveCache, NaivePages};
use heaplab_sim::{Access, CacheConfig, Part};
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..").canonicalize().unwrap()
}

fn built(p: &Path) -> PathBuf {
    assert!(p.exists(), "{} is not built: run `make -C native` first", p.display());
    p.to_path_buf()
}

struct Dir(PathBuf);
impl Drop for Dir {
    fn drop(&mut self) {
        if !std::thread::panicking() {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }
}

fn record(tools: &VgTools, dir: &Path, rounds: u32) -> (PathBuf, Profile) {
    let out = dir.join(format!("wl{rounds}.hltrace"));
    let prog = built(&root().join("build/bin/seg-workload"));
    let (ended, _) = record::record(
        tools,
        &[prog.into(), rounds.to_string().into()],
        &out,
        // twelve frames, as bench/segregate-study.sh records: PATH's scan
        // for the unseen objects' path point reads eleven (seg_workload.c)
        &RecOptions { stack_depth: 12, ..RecOptions::default() },
    )
    .unwrap_or_else(|e| panic!("recording seg-workload: {e:#}"));
    assert_eq!(ended, Ended::Exit(0));
    let p = objects::load(&out).unwrap();
    (out, p)
}

/// Hot objects live the whole run with ~25 references per byte; temporary
/// ones live a few hundred instructions; cold ones get one store in 256 bytes.
fn thresholds() -> Thresholds {
    Thresholds::new(5_000, 100_000, 1.0, 0.01).unwrap()
}

fn counts(c: &[Class]) -> [u64; 4] {
    let mut n = [0u64; 4];
    for x in c {
        n[x.index()] += 1;
    }
    n
}

fn segment_objects(m: &SegReport) -> [u64; 4] {
    m.objects()
}

#[test]
fn segregate_a_real_program_end_to_end() {
    let dir = Dir(mkdtemp(&std::env::temp_dir(), "heaplab-seg-e2e-").unwrap());
    let tools = VgTools::from_lib_dir(&root().join("build/lib"));
    tools.check("heaplab").unwrap();
    let (_, train) = record(&tools, &dir.0, 20);
    let (test_path, test) = record(&tools, &dir.0, 25);
    assert!(train.has_sp && test.has_sp, "the recorder wrote no stack depths");

    // The classes by construction.
    let t = thresholds();
    let actual = counts(&classify(&test, &t));
    assert!(actual[Class::Hr.index()] >= 16, "{actual:?}");
    assert!(actual[Class::Sl.index()] >= 25 * 30, "{actual:?}");
    assert!(actual[Class::NotHr.index()] >= 25 * 4, "{actual:?}");

    // Train and predict offline.
    let stack = Predictor::train(Kind::Stack { depth: 3 }, &train, &t, &TrainOptions::default());
    let pred = stack.predict_all(&test);
    let offline = counts(&pred);
    for c in [Class::Hr, Class::Sl, Class::NotHr] {
        assert!(offline[c.index()] > 0, "STACK predicts no {c}: {offline:?}");
    }
    let sp = Predictor::train(Kind::Sp, &train, &t, &TrainOptions::default());
    assert!(!sp.table.is_empty(), "SP learned nothing from the recorded depths");

    // Emit.
    let mut b = Builder::new(&heaplab_plumb::Layout::checkout(&root()), &dir.0).unwrap();
    let c = emit::table_c(&stack, 4, 3, "end-to-end test");
    let lib_stack = b.build("stack", &c, &dir.0, emit::Front::Stack).unwrap().so;
    let def = Predictor::untrained(Kind::Default);
    // Issue 17, class 5: the table's comment and `about` string hold text from
    // traces (their paths); a trigraph, a comment end, quotes, an escape
    // sequence or UTF-8 there must not break the build (-Werror).
    let hostile = "DEFAULT from /t/x??/y.hltrace */ #error no \"q\" \\ \u{1b}[2J caf\u{e9}\n??=";
    let def_c = emit::table_c(&def, 1, 0, hostile);
    assert!(def_c.chars().all(|c| c == '\n' || (' '..='~').contains(&c)), "{def_c}");
    let lib_def = b.build("default", &def_c, &dir.0, emit::Front::One).unwrap().so;
    let spc = emit::table_c(&sp, 4, 0, "end-to-end test");
    let lib_sp = b.build("sp", &spc, &dir.0, emit::Front::Sp).unwrap().so;

    // The real program with the STACK library: run-time lookups.
    let prog = root().join("build/bin/seg-workload");
    let glibc = Command::new(&prog).arg("25").output().unwrap();
    let report = dir.0.join("runtime.jsonl");
    let run = Command::new(&prog)
        .arg("25")
        .env("LD_PRELOAD", &lib_stack)
        .env("HEAPLAB_SEG_REPORT", &report)
        .env("HEAPLAB_CHECK", "16")
        .output()
        .unwrap();
    assert!(run.status.success(), "{}", String::from_utf8_lossy(&run.stderr));
    assert_eq!(run.stdout, glibc.stdout, "the output differs from glibc's");
    let (rt, _) = evaluate::read_report(&report).unwrap();
    assert_eq!(
        segment_objects(&rt),
        offline,
        "run-time identifications put other objects in the segments than the prediction on the recording: {rt:?}"
    );
    assert_eq!(rt.hints, 0);
    // ... and were decided at the same levels of the tree as offline (the
    // return address alone, or after walking): the allocator's walk from the
    // program's frame sees the frames the recorder saw
    let (lv, unknown) = stack.levels_of(&test).unwrap();
    let mut rl = rt.levels.clone();
    rl.resize(lv.len(), 0);
    assert_eq!((rl, rt.unknown), (lv.clone(), unknown), "levels at run time vs offline: {rt:?}");
    assert!(
        lv[0] > 0 && lv.iter().skip(1).sum::<u64>() > 0,
        "the workload decides at one level only: {lv:?}"
    );
    // The walks repeat (same call sites): each steps exactly as many frames
    // as the level it was decided at (a prefix at a time, no frame more), the
    // prefix cache fills one slot per distinct prefix, far fewer than the
    // walks, and they still decide as offline (above)
    let walked: u64 = rt.levels.iter().skip(1).sum();
    let stepped: u64 = rt.levels.iter().enumerate().map(|(l, n)| l as u64 * n).sum();
    assert_eq!(rt.runtime_frames, stepped, "frames stepped against the levels: {rt:?}");
    assert!(
        walked > 0 && rt.path_misses * 4 < walked,
        "the walks were not remembered: {walked} walks, {rt:?}"
    );
    assert!(
        rt.cache_mallocs > 0 && rt.cache_frees > 0,
        "the per-thread caches served nothing: {rt:?}"
    );
    // The program under library `lib`, its run-time report written to `report`.
    let run_with = |lib: &Path, report: &Path| {
        Command::new(&prog)
            .arg("25")
            .env("LD_PRELOAD", lib)
            .env("HEAPLAB_SEG_REPORT", report)
            .output()
            .unwrap()
    };
    // SP at run time: depths measured from __libc_stack_end as the recorder measured them
    let report_sp = dir.0.join("runtime-sp.jsonl");
    let run = run_with(&lib_sp, &report_sp);
    assert!(run.status.success());
    let (rsp, _) = evaluate::read_report(&report_sp).unwrap();
    assert_eq!(segment_objects(&rsp), counts(&sp.predict_all(&test)), "SP at run time: {rsp:?}");

    // PATH: the workload's deep objects are told apart only five frames up,
    // at one (return address, depth), so the context slots keep five words
    // and the run-time lookups must compare all of them (a lookup that
    // compared three put the deep objects in one segment).  Its unseen
    // objects (the test run's only) come from return addresses training never
    // saw: the scan for the innermost path point reads eleven words, so
    // they are kept in long slots, hot and cold alternating at one (return
    // address, depth) with other classes (a long slot that took another
    // context's words for its own put them in one segment).
    let deep = Predictor::train(Kind::Path, &train, &t, &TrainOptions::default());
    let (dlv, _) = deep.levels_of(&test).unwrap();
    assert!(dlv.iter().skip(4).sum::<u64>() > 0, "no decision four frames up or more: {dlv:?}");
    let deepc = emit::table_c(
        &deep,
        emit::segments(Kind::Path),
        emit::table_depth(Kind::Path, train.stack_depth),
        "end-to-end test, PATH",
    );
    let lib_deep = b.build("path", &deepc, &dir.0, emit::Front::of(Kind::Path)).unwrap().so;
    let report_deep = dir.0.join("runtime-path.jsonl");
    let run = run_with(&lib_deep, &report_deep);
    assert!(run.status.success(), "{}", String::from_utf8_lossy(&run.stderr));
    assert_eq!(run.stdout, glibc.stdout, "PATH: the output differs from glibc's");
    let (rdeep, _) = evaluate::read_report(&report_deep).unwrap();
    assert_eq!(
        segment_objects(&rdeep),
        counts(&deep.predict_all(&test)),
        "PATH at run time: {rdeep:?}"
    );
    let mut rl = rdeep.levels.clone();
    rl.resize(dlv.len(), 0);
    assert_eq!(rl, dlv, "PATH: levels at run time vs offline: {rdeep:?}");
    assert!(dlv.iter().skip(9).sum::<u64>() > 0, "no decision nine frames up or more: {dlv:?}");
    // the unseen objects' two contexts each fill a long slot once, and then
    // their lookups hit: 50 hot and 50 cold (every round of the 25-round
    // run), far more than the walks
    assert!(
        (1..=4).contains(&rdeep.longs) && rdeep.uncached == 0,
        "PATH: the long contexts were not kept: {rdeep:?}"
    );
    assert!(rdeep.walks < 20, "PATH: the long contexts were walked again: {rdeep:?}");

    // Replay with site hints under the measure tool, keeping every access.
    let events = dir.0.join("test.events.hltrace");
    heaplab_refs::measure::events_only(&test_path, &events).unwrap();
    let sp_events = dir.0.join("test.sp-events.hltrace");
    evaluate::sp_events(&test_path, &sp_events).unwrap();
    let caches = heaplab_sim::config::parse_cache_spec("32K:32:1,256K:32:1").unwrap();
    let job = MeasureJob {
        tools: &tools,
        replay: &built(&root().join("build/bin/heaplab-replay")),
        trace: &test_path,
        events: &events,
        sp_events: Some(&sp_events),
        caches: &caches,
        scratch: &dir.0,
    };
    let (md, ad) = evaluate::measure_keeping(&job, "DEFAULT", &lib_def, false).unwrap();
    let (ms, as_) = evaluate::measure_keeping(&job, "STACK", &lib_stack, false).unwrap();
    let (mp, _) = evaluate::measure_keeping(&job, "SP", &lib_sp, true).unwrap();
    assert_eq!(segment_objects(&ms.report), offline, "the replay's hints: {:?}", ms.report);
    assert_eq!(
        segment_objects(&mp.report),
        counts(&sp.predict_all(&test)),
        "SP's hints: {:?}",
        mp.report
    );
    assert_eq!(segment_objects(&md.report), [test.objects.len() as u64, 0, 0, 0]);

    // Every figure against a naive computation over the same accesses.
    for (m, acc) in [(&md, &ad), (&ms, &as_)] {
        naive_check(m, acc, &caches);
    }
    // The relative figures against their definitions.
    let (t3, t4) = study::tables(&md, &ms);
    let d_pages = md.pages_8k() as f64;
    for s in &ms.segments {
        let i = match s.class.as_str() {
            "SL" => 1,
            "HR" => 2,
            "nonHR" => 3,
            _ => 0,
        };
        assert!((t3.relative[i] - s.pages_8k as f64 / d_pages).abs() < 1e-12);
        if s.pages_8k > 0 {
            let want = (s.app_refs as f64 / s.pages_8k as f64) / (md.app_refs() as f64 / d_pages);
            assert!((t4.relative[i].unwrap() - want).abs() < 1e-9);
        }
    }
    // the hot objects, alone on their pages, are referenced far more densely
    assert!(t4.relative[2].unwrap() > 2.0, "HR density {:?}", t4.relative);
    assert!(t4.relative[3].unwrap() < 0.5, "not-HR density {:?}", t4.relative);
    let cum = study::cumulative_relative(&md.page_refs_8k, &ms.page_refs_8k);
    let (mut cd, mut cs) = (0u64, 0u64);
    for (j, &(x, r)) in cum.iter().enumerate() {
        cd += md.page_refs_8k.get(j).copied().unwrap_or(0);
        cs += ms.page_refs_8k.get(j).copied().unwrap_or(0);
        assert_eq!(x, j as u64 + 1);
        assert!((r - cs as f64 / cd as f64).abs() < 1e-12);
    }
    let (dc, sc) = (md.curve(8192).unwrap(), ms.curve(8192).unwrap());
    let rel = study::faults_relative(dc, sc);
    let mut last = None;
    for &(m, r) in &rel {
        let f = |c: &heaplab_sim::PageCurve| {
            (c.faults_at(m) - c.distinct_pages) as f64 / c.references as f64
        };
        let d = f(dc);
        if d > 0.0 {
            last = Some(d);
        }
        assert!((r - f(sc) / last.unwrap()).abs() < 1e-12);
    }
}

/// The page, reference and cache figures of `m`, computed again the slow way
/// from `acc`, the accesses the simulators saw.
fn naive_check(m: &Measured, acc: &[Access], caches: &[CacheConfig]) {
    // each segment's address ranges: its best-fit heap and its fast core's slots
    let h = |k: &str| u64::from_str_radix(k.trim_start_matches("0x"), 16).unwrap();
    let ranges: Vec<Vec<(u64, u64)>> = m
        .report
        .segments
        .iter()
        .map(|s| {
            assert!(!s.ranges.is_empty(), "{}: segment {} has no ranges", m.name, s.class);
            s.ranges.iter().map(|[a, b]| (h(a), h(b))).collect()
        })
        .collect();
    let within = |r: &[(u64, u64)], a: u64| r.iter().any(|&(lo, hi)| a >= lo && a < hi);
    let other_bit = heaplab_refs::measure::OTHER_BIT;
    let heapish = |a: &Access| a.part == Part::Allocator || a.addr & other_bit == 0;
    let app_heap = |a: &Access| a.part == Part::Application && a.addr & other_bit == 0;
    for (i, r) in ranges.iter().enumerate() {
        let inside = |a: &&Access| within(r, a.addr) && heapish(a);
        let pages8: BTreeSet<u64> = acc.iter().filter(inside).map(|a| a.addr >> 13).collect();
        let pages4: BTreeSet<u64> = acc.iter().filter(inside).map(|a| a.addr >> 12).collect();
        let app: u64 = acc.iter().filter(inside).filter(|a| app_heap(a)).count() as u64;
        let s = &m.segments[i];
        assert_eq!(
            (s.pages_8k, s.pages_4k, s.app_refs),
            (pages8.len() as u64, pages4.len() as u64, app),
            "{}: segment {i}",
            m.name
        );
    }
    // the program's references per 8 KB page, sorted
    let mut per: BTreeMap<u64, u64> = BTreeMap::new();
    for a in acc.iter().filter(|a| heapish(a)) {
        if ranges.iter().any(|r| within(r, a.addr)) {
            *per.entry(a.addr >> 13).or_default() += u64::from(app_heap(a));
        }
    }
    let mut v: Vec<u64> = per.values().copied().collect();
    v.sort_unstable_by(|a, b| b.cmp(a));
    assert_eq!(v, m.page_refs_8k, "{}: page references", m.name);
    // page faults: the heap stream (the program's heap references, the allocator's)
    for ps in [4096u64, 8192] {
        let mut naive = NaivePages::new(ps);
        for a in acc.iter().filter(|a| heapish(a)) {
            naive.access(a);
        }
        assert_eq!(&naive.curve(), m.curve(ps).unwrap(), "{}: page curve, {ps}-byte pages", m.name);
    }
    // caches: all accesses, and the program's heap accesses alone
    for (cfg, got) in caches.iter().zip(&m.caches) {
        let (mut all, mut heap) = (NaiveCache::new(*cfg), NaiveCache::new(*cfg));
        for a in acc {
            all.access(a);
            if app_heap(a) {
                heap.access(a);
            }
        }
        assert_eq!(
            (got.all_accesses, got.all_misses),
            (all.counts().total_accesses(), all.counts().total_misses()),
            "{}: {}",
            m.name,
            got.config
        );
        assert_eq!(
            (got.heap_accesses, got.heap_misses),
            (heap.counts().total_accesses(), heap.counts().total_misses()),
            "{}: {} (heap)",
            m.name,
            got.config
        );
    }
}

/// A real program whose library is reached through a symbolic link
/// (libsqlite3.so.0 → libsqlite3.so.0.8.6): the recorder names the file, the
/// loader the link; the run-time keys must still be the recorded ones.
#[test]
fn runtime_lookups_in_sqlite3_match_the_recording() {
    let Ok(sqlite) = which("sqlite3") else {
        panic!("sqlite3 is not installed (scripts/setup.sh installs it)");
    };
    let dir = Dir(mkdtemp(&std::env::temp_dir(), "heaplab-seg-sqlite-").unwrap());
    let sql = "CREATE TABLE t(a INTEGER, b TEXT); \
        WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x+1 FROM c WHERE x < 2000) \
        INSERT INTO t SELECT x, printf('row-%d-%s', x, hex(x*7919)) FROM c; \
        CREATE INDEX tb ON t(b); SELECT count(*), sum(length(b)) FROM t WHERE a % 3 = 0;";
    let tools = VgTools::from_lib_dir(&root().join("build/lib"));
    let trace = dir.0.join("sqlite.hltrace");
    let (ended, _) = record::record(
        &tools,
        &[sqlite.clone().into(), ":memory:".into(), sql.into()],
        &trace,
        &RecOptions::default(),
    )
    .unwrap();
    assert_eq!(ended, Ended::Exit(0));
    let p = objects::load(&trace).unwrap();
    let t = heaplab_segregate::search::start_point(&p);
    let stack = Predictor::train(Kind::Stack { depth: 3 }, &p, &t, &TrainOptions::default());
    let offline = counts(&stack.predict_all(&p));
    assert!(offline[1] + offline[2] + offline[3] > 0, "nothing predicted: {offline:?}");
    let mut b = Builder::new(&heaplab_plumb::Layout::checkout(&root()), &dir.0).unwrap();
    let so = b
        .build("stack", &emit::table_c(&stack, 4, 3, "sqlite test"), &dir.0, emit::Front::Stack)
        .unwrap()
        .so;
    let report = dir.0.join("report.jsonl");
    let glibc = Command::new(&sqlite).args([":memory:", sql]).output().unwrap();
    let run = Command::new(&sqlite)
        .args([":memory:", sql])
        .env("LD_PRELOAD", &so)
        .env("HEAPLAB_SEG_REPORT", &report)
        .output()
        .unwrap();
    assert!(run.status.success());
    assert_eq!(run.stdout, glibc.stdout);
    let (rt, _) = evaluate::read_report(&report).unwrap();
    assert_eq!(segment_objects(&rt), offline, "run-time identifications in sqlite3: {rt:?}");
    let (lv, unknown) = stack.levels_of(&p).unwrap();
    let mut rl = rt.levels.clone();
    rl.resize(lv.len(), 0);
    assert_eq!((rl, rt.unknown), (lv, unknown), "levels in sqlite3: {rt:?}");
}

fn which(name: &str) -> Result<PathBuf, ()> {
    std::env::var_os("PATH")
        .iter()
        .flat_map(std::env::split_paths)
        .map(|d| d.join(name))
        .find(|p| p.exists())
        .ok_or(())
}
