//! `heaplab compare` as jobs: a plan run by GNU parallel on this machine and
//! merged gives the records a local run gives (wall time and RSS, which are
//! measured anew, aside); merge names the jobs missing or failed; a job
//! refuses inputs that changed and lines that were edited; an interrupted
//! comparison keeps what it finished and --resume measures only the rest.
//! The locality and segregate studies, planned and merged (segregate also
//! two at a time and resumed), give the study a local run gives.
//! Needs the native build, valgrind and GNU parallel (scripts/setup.sh).

mod common;
use common::*;
use serde_json::Value;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Fields measured anew by every run: wall time, and RSS (its growth moves
/// by tens of pages between runs of a small trace, with the address-space
/// layout; heaplab's allocators' footprint is exact and compared exactly).
/// Timings: they differ from run to run (present or absent alike).
const WALL: [&str; 7] = [
    "wall_s",
    "wall_runs_s",
    "wall_ratio_glibc",
    "cpu_s",
    "cpu_runs_s",
    "cpu_ratio_glibc",
    "ns_per_event",
];
const RSS_BYTES: [&str; 2] = ["peak_rss_growth_bytes", "peak_footprint_bytes"];
const RSS_RATIOS: [&str; 2] = ["footprint_vs_firstfit", "utilization"];

fn same_records(local: &[Value], merged: &[Value]) {
    assert_eq!(local.len(), merged.len());
    for (a, b) in local.iter().zip(merged) {
        let cell = format!("{} on {}", a["allocator"], a["trace_name"]);
        let rss_cell = a["footprint_source"] == "rss_touch";
        for (k, v) in a.as_object().unwrap() {
            let k = k.as_str();
            let rss_bytes = k == "peak_rss_growth_bytes" || (rss_cell && RSS_BYTES.contains(&k));
            if WALL.contains(&k) || (rss_cell && RSS_RATIOS.contains(&k)) {
                assert_eq!(v.is_null(), b[k].is_null(), "{cell}: {k}");
            } else if rss_bytes {
                let (x, y) = (v.as_f64().unwrap(), b[k].as_f64().unwrap());
                assert!((x - y).abs() <= 0.02 * x.max(y) + 262144.0, "{cell}: {k} {x} vs {y}");
            } else {
                assert_eq!(
                    v, &b[k],
                    "{cell}: {k} differs between the local run and the merged plan"
                );
            }
        }
    }
}

fn parallel_output(args: &[&str]) -> std::process::Output {
    let ok = Command::new("parallel").arg("--version").stdout(Stdio::null()).status();
    assert!(
        ok.is_ok_and(|s| s.success()),
        "GNU parallel is not installed (scripts/setup.sh installs it)"
    );
    Command::new("parallel").arg("--will-cite").args(args).output().unwrap()
}

fn parallel(args: &[&str]) {
    let out = parallel_output(args);
    assert!(out.status.success(), "parallel {args:?}: {}", show(&out));
}

/// One job line, run as the engines run it (GNU parallel, through a shell).
fn run_line(line: &str, dir: &Path) -> std::process::Output {
    let f = dir.join("one-line.txt");
    std::fs::write(&f, format!("{line}\n")).unwrap();
    parallel_output(&["-j1", "-a", f.to_str().unwrap()])
}

#[test]
fn a_plan_run_by_gnu_parallel_merges_into_the_local_records() {
    let d = tmp("parallel");
    let trace = d.0.join("kinds.hltrace");
    all_kinds_trace(&trace, 4_000, 3);
    let t = trace.to_str().unwrap();
    let allocs = "glibc,firstfit,bsd";
    let (local, merged) = (d.0.join("local.json"), d.0.join("merged.json"));
    let (lcsv, mcsv) = (d.0.join("local.csv"), d.0.join("merged.csv"));
    let out = heaplab(
        &[
            "compare",
            t,
            "--allocators",
            allocs,
            "--repeat",
            "2",
            "--json",
            local.to_str().unwrap(),
            "--csv",
            lcsv.to_str().unwrap(),
        ],
        &d.0,
    );
    assert!(out.status.success(), "{}", show(&out));

    let plan = d.0.join("plan");
    let p = plan.to_str().unwrap();
    let out = heaplab(&["compare", t, "--allocators", allocs, "--repeat", "2", "--plan", p], &d.0);
    assert!(out.status.success(), "{}", show(&out));
    let lines = std::fs::read_to_string(plan.join("jobs.txt")).unwrap();
    assert_eq!(lines.lines().count(), 9, "3 cells × (touch, count, time):\n{lines}");
    for l in lines.lines() {
        assert!(
            l.contains(" job compare.") && l.contains("=sha256:") && l.contains("--out "),
            "{l}"
        );
    }
    assert_eq!(std::fs::read_to_string(plan.join("jobs-alone.txt")).unwrap().lines().count(), 3);
    assert!(std::fs::read_to_string(plan.join("slurm.sbatch"))
        .unwrap()
        .contains("SLURM_ARRAY_TASK_ID"));
    // a plan goes into a new directory only
    let again = heaplab(&["compare", t, "--allocators", allocs, "--plan", p], &d.0);
    assert_eq!(again.status.code(), Some(2), "{}", show(&again));

    parallel(&["-j2", "-a", plan.join("jobs-shared.txt").to_str().unwrap()]);
    parallel(&["-j1", "-a", plan.join("jobs-alone.txt").to_str().unwrap()]);
    let out = heaplab(
        &[
            "compare",
            "--merge",
            p,
            "--json",
            merged.to_str().unwrap(),
            "--csv",
            mcsv.to_str().unwrap(),
        ],
        &d.0,
    );
    assert!(out.status.success(), "{}", show(&out));
    same_records(&records(&local), &records(&merged));
    let head = |p: &Path| std::fs::read_to_string(p).unwrap().lines().next().unwrap().to_string();
    assert_eq!(head(&lcsv), head(&mcsv));

    // a job with no outcome: merge names it, its cell says why, the status is 1
    let results = plan.join("results");
    let gone = std::fs::read_dir(&results)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.file_name().unwrap().to_string_lossy().starts_with("compare-count-"))
        .unwrap();
    let id = gone.file_stem().unwrap().to_string_lossy().to_string();
    std::fs::remove_file(&gone).unwrap();
    let out = heaplab(&["compare", "--merge", p, "--json", merged.to_str().unwrap()], &d.0);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{}", show(&out));
    assert!(err.contains(&id) && err.contains("missing"), "{err}");
    let failed: Vec<Value> =
        records(&merged).into_iter().filter(|r| r["status"] == "failed").collect();
    assert_eq!(failed.len(), 1, "one cell lost its counts");
    assert!(failed[0]["error"].as_str().unwrap().contains(&id));
    assert!(
        failed[0]["instr_per_malloc"].is_null() && !failed[0]["peak_footprint_bytes"].is_null()
    );

    // a job whose input changed since the plan fails, saying which, and merge names it
    let line = lines.lines().find(|l| l.contains(&id)).unwrap().to_string();
    std::fs::write(&trace, b"not the trace the plan was made from").unwrap();
    let run = run_line(&line, &d.0);
    assert_eq!(run.status.code(), Some(1), "one job failed: {}", show(&run));
    assert!(
        String::from_utf8_lossy(&run.stderr).contains("changed since the job was planned"),
        "{}",
        show(&run)
    );
    let out = heaplab(&["compare", "--merge", p], &d.0);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains(&id) && err.contains("failed") && err.contains("changed since"), "{err}");

    // an edited line is refused before it runs
    let edited = line.replace("--timeout 300", "--timeout 301");
    assert_ne!(edited, line);
    let run = run_line(&edited, &d.0);
    assert_eq!(run.status.code(), Some(1), "one job failed: {}", show(&run));
    assert!(String::from_utf8_lossy(&run.stderr).contains("hash to"), "{}", show(&run));
}

#[test]
fn an_interrupted_compare_keeps_what_it_finished_and_resume_does_the_rest() {
    let d = tmp("resume");
    let trace = d.0.join("kinds.hltrace");
    all_kinds_trace(&trace, 60_000, 5);
    let state = d.0.join("state");
    let json = d.0.join("r.json");
    let args = [
        "compare",
        trace.to_str().unwrap(),
        "--allocators",
        "glibc,firstfit,bsd,gnugpp,quickfit,buddy",
        "--jobs",
        "1",
        "--state",
        state.to_str().unwrap(),
        "--json",
        json.to_str().unwrap(),
    ];
    let kept = || std::fs::read_dir(&state).map(|r| r.count()).unwrap_or(0);
    let child =
        heaplab_cmd(&args, &d.0).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap();
    let t0 = Instant::now();
    while kept() < 2 && t0.elapsed() < Duration::from_secs(120) {
        std::thread::sleep(Duration::from_millis(20));
    }
    // SAFETY: kill(2) on the pid of a child this test started and has not reaped.
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    let out = child.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    let at_interrupt = kept();
    assert!(err.contains("interrupted") && err.contains("--resume"), "{}", show(&out));
    assert_eq!(out.status.code(), Some(1), "unmeasured cells are not clean: {}", show(&out));
    assert!((2..18).contains(&at_interrupt), "some of the 18 jobs, not all: {at_interrupt}");

    let mut resumed = args.to_vec();
    resumed.push("--resume");
    let out = heaplab(&resumed, &d.0);
    assert!(out.status.success(), "{}", show(&out));
    let err = String::from_utf8_lossy(&out.stderr);
    let reused = err.matches("kept from before").count();
    assert!(
        reused >= at_interrupt.min(18),
        "every kept outcome is reused ({reused} of {at_interrupt}):\n{err}"
    );
    assert_eq!(kept(), 18);
    assert!(records(&d.0.join("r.json")).iter().all(|r| r["status"] == "ok"));
    // a second --resume measures nothing
    let out = heaplab(&resumed, &d.0);
    assert_eq!(
        String::from_utf8_lossy(&out.stderr).matches("kept from before").count(),
        18,
        "{}",
        show(&out)
    );

    // Pruning: an outcome of another study written 60 days ago goes when a
    // run finishes (30 days by default), the run's own stay, and files
    // heaplab did not write stay whatever the limits.
    let own: Vec<_> = std::fs::read_dir(&state).unwrap().map(|e| e.unwrap().path()).collect();
    let mut old: Value = serde_json::from_slice(&std::fs::read(&own[0]).unwrap()).unwrap();
    old["job"] = "compare-count-00000000000000aa".into();
    let old_path = state.join("compare-count-00000000000000aa.json");
    std::fs::write(&old_path, old.to_string()).unwrap();
    let aged = std::time::SystemTime::now() - Duration::from_secs(60 * 86400);
    std::fs::File::options().write(true).open(&old_path).unwrap().set_modified(aged).unwrap();
    let notes = state.join("notes.txt");
    std::fs::write(&notes, "not heaplab's").unwrap();
    let dry = heaplab(&["jobs", "prune", "--state", state.to_str().unwrap(), "--dry-run"], &d.0);
    let said = String::from_utf8_lossy(&dry.stdout);
    assert!(dry.status.success() && said.contains("would remove 1 files"), "{}", show(&dry));
    assert!(old_path.exists(), "a dry run removes nothing");
    let out = heaplab(&resumed, &d.0);
    assert!(out.status.success(), "{}", show(&out));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("removed 1 old outcomes"),
        "a run prunes when it finishes: {}",
        show(&out)
    );
    assert!(!old_path.exists() && own.iter().all(|p| p.exists()) && notes.exists());
    let out =
        heaplab(&["jobs", "prune", "--state", state.to_str().unwrap(), "--max-mb", "0"], &d.0);
    assert!(out.status.success(), "{}", show(&out));
    assert!(String::from_utf8_lossy(&out.stdout).contains("removed 18 files"), "{}", show(&out));
    assert_eq!(std::fs::read_to_string(&notes).unwrap(), "not heaplab's");
    assert_eq!(kept(), 1, "only the file heaplab did not write is left");
    let bad = heaplab(&["jobs", "prune", "--state", state.to_str().unwrap(), "--max-mb=-1"], &d.0);
    assert!(!bad.status.success() && String::from_utf8_lossy(&bad.stderr).contains("--max-mb"));
}

/// Every value of two JSON documents, paths where they differ (keys named in
/// `skip` aside).
fn differences(a: &Value, b: &Value, path: &str, skip: &[&str], out: &mut Vec<String>) {
    match (a, b) {
        (Value::Object(x), Value::Object(y)) => {
            for (k, v) in x {
                if !skip.contains(&k.as_str()) {
                    differences(v, &y[k], &format!("{path}.{k}"), skip, out);
                }
            }
            if x.len() != y.len() {
                out.push(format!("{path}: keys differ"));
            }
        }
        (Value::Array(x), Value::Array(y)) if x.len() == y.len() => {
            for (i, (u, v)) in x.iter().zip(y).enumerate() {
                differences(u, v, &format!("{path}[{i}]"), skip, out);
            }
        }
        _ if a != b => out.push(format!("{path}: {a} vs {b}")),
        _ => {}
    }
}

#[test]
fn a_locality_plan_merges_into_the_local_study() {
    let d = tmp("locality");
    let prog = root().join("build/bin/vgtool-test-counts");
    let trace = d.0.join("counts.hltrace");
    let rec = heaplab(
        &["record", "--refs", "-o", trace.to_str().unwrap(), "--", prog.to_str().unwrap()],
        &d.0,
    );
    assert!(rec.status.success(), "{}", show(&rec));
    let t = trace.to_str().unwrap();
    let common = [
        "--allocators",
        "bsd,glibc,gnulocal,gnulocal+pad8",
        "--caches",
        "16K:32:1",
        "--pages",
        "4K",
    ];
    let local = d.0.join("local.json");
    let mut args = vec!["locality", t, "--json", local.to_str().unwrap()];
    args.extend(common);
    let out = heaplab(&args, &d.0);
    assert!(out.status.success(), "{}", show(&out));

    let plan = d.0.join("plan");
    let mut args = vec!["locality", t, "--plan", plan.to_str().unwrap()];
    args.extend(common);
    let out = heaplab(&args, &d.0);
    assert!(out.status.success(), "{}", show(&out));
    assert_eq!(
        std::fs::read_to_string(plan.join("jobs.txt")).unwrap().lines().count(),
        4,
        "one job per allocator"
    );
    parallel(&["-j2", "-a", plan.join("jobs.txt").to_str().unwrap()]);
    let merged = d.0.join("merged.json");
    let out = heaplab(
        &["locality", "--merge", plan.to_str().unwrap(), "--json", merged.to_str().unwrap()],
        &d.0,
    );
    assert!(out.status.success(), "{}", show(&out));
    let read =
        |p: &Path| serde_json::from_str::<Value>(&std::fs::read_to_string(p).unwrap()).unwrap();
    let (a, b) = (read(&local), read(&merged));
    assert_eq!(a["allocators"].as_array().unwrap().len(), 4);
    assert_eq!(b["boundary_tags"].as_array().unwrap().len(), 1, "gnulocal beside gnulocal+pad8");
    let mut diffs = Vec::new();
    differences(&a, &b, "", &["seconds"], &mut diffs);
    assert!(diffs.is_empty(), "the merged study differs from the local one:\n{}", diffs.join("\n"));
}

/// The segregate study as jobs: two at a time, resumed, and planned, run by
/// GNU parallel and merged, it gives the study a serial run gives (what
/// moves between runs aside: timings, the replay's process id, and the C
/// compiler's commands, which the first build alone runs for the shared
/// objects); a resumed run measures nothing and returns what it kept.
#[test]
fn a_segregate_study_as_jobs_merges_into_the_serial_one() {
    let d = tmp("segregate");
    let prog = root().join("build/bin/seg-workload");
    assert!(prog.exists(), "{} is not built: run `make -C native` first", prog.display());
    let traces: Vec<String> = [12, 10, 14]
        .iter()
        .map(|n| {
            let t = d.0.join(format!("wl{n}.hltrace"));
            let (t_s, n_s) = (t.to_str().unwrap().to_string(), n.to_string());
            let rec = heaplab(
                &["record", "--refs", "-o", &t_s, "--", prog.to_str().unwrap(), &n_s],
                &d.0,
            );
            assert!(rec.status.success(), "{}", show(&rec));
            t_s
        })
        .collect();
    let libs = d.0.join("libs");
    // The `--jobs 2` study's scratch directories (TMPDIR) have longer names
    // than the serial one's: the measured replay's stack, whose references
    // are simulated, must not move with them (they hold heaplab's PID too,
    // whose digits once moved 14 of DEFAULT's 4,900 misses between the two).
    let long_tmp = d.0.join("a-temporary-directory-with-a-longer-name");
    std::fs::create_dir(&long_tmp).unwrap();
    let study_in = |tmpdir: Option<&Path>, extra: &[&str]| -> std::process::Output {
        let mut args = vec![
            "segregate",
            "--train",
            &traces[0],
            "--threshold",
            &traces[1],
            "--test",
            &traces[2],
            "--predictor",
            "sp,stack",
            "-o",
            libs.to_str().unwrap(),
        ];
        args.extend(extra);
        let mut cmd = heaplab_cmd(&args, &d.0);
        if let Some(t) = tmpdir {
            cmd.env("TMPDIR", t);
        }
        let out = cmd.output().unwrap();
        assert!(out.status.success(), "{}", show(&out));
        out
    };
    let study = |extra: &[&str]| study_in(None, extra);
    let read =
        |p: &Path| serde_json::from_str::<Value>(&std::fs::read_to_string(p).unwrap()).unwrap();
    let p = |x: &Path| x.to_str().unwrap().to_string();
    let (s1, s2) = (d.0.join("state1"), d.0.join("state2"));
    let (serial, two, resumed, merged) = (
        d.0.join("serial.json"),
        d.0.join("two.json"),
        d.0.join("resumed.json"),
        d.0.join("merged.json"),
    );
    study(&["--jobs", "1", "--state", &p(&s1), "--json", &p(&serial)]);
    let out = study_in(Some(&long_tmp), &["--jobs", "2", "--state", &p(&s2), "--json", &p(&two)]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("[3/3]") && !err.contains("kept from before"), "{err}");
    let a = read(&serial);
    let names: Vec<&str> =
        a["measured"].as_array().unwrap().iter().map(|m| m["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["DEFAULT", "SP", "STACK"], "the libraries' order");
    // the fault curves came through the outcomes: Figure 4 has every allocator's line
    let fig4 = a["figure4"].as_array().unwrap();
    assert_eq!(fig4.len(), 3, "{}", a["figure4"]);
    assert!(fig4.iter().all(|c| !c["points"].as_array().unwrap().is_empty()), "{fig4:?}");
    let skip = ["seconds", "pid", "commands"];
    let same = |x: &Value, y: &Value, what: &str| {
        let mut diffs = Vec::new();
        differences(x, y, "", &skip, &mut diffs);
        assert!(diffs.is_empty(), "{what} differs from the serial study:\n{}", diffs.join("\n"));
    };
    same(&a, &read(&two), "--jobs 2");
    // resumed: every measurement kept from before, none run again
    let out = study(&["--jobs", "2", "--state", &p(&s2), "--resume", "--json", &p(&resumed)]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(err.matches("kept from before").count(), 3, "{err}");
    let (b, c) = (read(&two), read(&resumed));
    same(&a, &c, "the resumed run");
    for (x, y) in b["measured"].as_array().unwrap().iter().zip(c["measured"].as_array().unwrap()) {
        assert_eq!(
            (&x["seconds"], &x["report"]["pid"]),
            (&y["seconds"], &y["report"]["pid"]),
            "a kept outcome is returned as it was"
        );
    }
    // planned, run by GNU parallel, merged
    let plan = d.0.join("plan");
    let out = study(&["--plan", &p(&plan)]);
    assert!(String::from_utf8_lossy(&out.stdout).contains("3 jobs"), "{}", show(&out));
    parallel(&["-j2", "-a", plan.join("jobs.txt").to_str().unwrap()]);
    let out = heaplab(&["segregate", "--merge", &p(&plan), "--json", &p(&merged)], &d.0);
    assert!(out.status.success(), "{}", show(&out));
    same(&a, &read(&merged), "the merged plan");
    // a missing outcome is named
    let gone = std::fs::read_dir(plan.join("results")).unwrap().next().unwrap().unwrap().path();
    std::fs::remove_file(&gone).unwrap();
    let out = heaplab(&["segregate", "--merge", &p(&plan)], &d.0);
    let id = gone.file_stem().unwrap().to_str().unwrap();
    assert!(
        !out.status.success() && String::from_utf8_lossy(&out.stderr).contains(id),
        "{}",
        show(&out)
    );
}

/// Synth's evaluation as jobs: an allocator `heaplab synth` made from one
/// trace, checked on another it never saw, as a plan run by GNU parallel
/// and merged, gives the records of the same check run here (its shared
/// object hashed like a peer's; wall time and RSS aside).
#[test]
fn a_synthesized_allocator_checked_on_a_held_out_trace_plans_and_merges() {
    let d = tmp("synth-plan");
    let (train, held_out) = (d.0.join("train.hltrace"), d.0.join("held-out.hltrace"));
    all_kinds_trace(&train, 3_000, 5);
    all_kinds_trace(&held_out, 3_000, 6);
    let syn = d.0.join("syn");
    let out = heaplab(
        &[
            "synth",
            train.to_str().unwrap(),
            "-o",
            syn.to_str().unwrap(),
            "--name",
            "custom_t",
            "--no-register",
        ],
        &d.0,
    );
    assert!(out.status.success(), "{}", show(&out));
    let allocs = format!("custom_t={},glibc", syn.join("libcustom_t.so").display());
    let t = held_out.to_str().unwrap();
    let (local, merged, plan) = (d.0.join("local.json"), d.0.join("merged.json"), d.0.join("plan"));
    let out = heaplab(
        &[
            "compare",
            t,
            "--allocators",
            &allocs,
            "--repeat",
            "1",
            "--json",
            local.to_str().unwrap(),
        ],
        &d.0,
    );
    assert!(out.status.success(), "{}", show(&out));
    let p = plan.to_str().unwrap();
    let out = heaplab(&["compare", t, "--allocators", &allocs, "--repeat", "1", "--plan", p], &d.0);
    assert!(out.status.success(), "{}", show(&out));
    let lines = std::fs::read_to_string(plan.join("jobs.txt")).unwrap();
    assert!(lines.contains("libcustom_t.so=sha256:"), "the library is a hashed input:\n{lines}");
    parallel(&["-j2", "-a", plan.join("jobs-shared.txt").to_str().unwrap()]);
    parallel(&["-j1", "-a", plan.join("jobs-alone.txt").to_str().unwrap()]);
    let out = heaplab(&["compare", "--merge", p, "--json", merged.to_str().unwrap()], &d.0);
    assert!(out.status.success(), "{}", show(&out));
    let (a, b) = (records(&local), records(&merged));
    assert!(
        a.iter().any(|r| r["allocator"] == "custom_t" && r["status"] == "ok"),
        "the synthesized allocator was measured: {a:?}"
    );
    same_records(&a, &b);
}
