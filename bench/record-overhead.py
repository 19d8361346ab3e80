#!/usr/bin/env python3
"""What recording costs: wall time, CPU time and peak RSS recorded / native,
trace bytes per event, and the same against heaptrack, in one invocation.

Workloads (default: all):

  perl-wc, make-n, python   the bundled ones (`heaplab workloads`)
  churn      bench/progs/churn.c: allocation-bound, cfrac-like, 40-60 M calls/s natively
  prodcons   bench/progs/prodcons.c: 4 threads, every item freed by another thread
  spawnjoin  bench/progs/spawnjoin.c: 10 rounds of creating and joining 2 threads,
             cross-thread frees (issue 17's lost-events program)

The C programs are built here from source (cc -O2) into --out. Every run's
stdout must equal the native run's (the C programs print checksums), and the
stacks-0 trace's event counts must equal those of the independent counting
preload (build/lib/libheaplab-count.so) on the same program: a recording
that lost or invented events fails the benchmark.

Variants, interleaved run by run so a busy machine slows all alike:

  native       the program alone
  stacks-0     libheaplab-record.so, stacks off
  stacks-8     8-frame stacks (hl_unwind)
  stacks-8-lu  the same walked by libunwind (--unwind both)
  heaptrack    under heaptrack (installed with apt-get when missing and
               possible; --no-heaptrack to skip), which records full stacks

For each: median wall time and its ratio to native and to heaptrack, median
CPU time (user + sys of the program and its threads, the agent's writer
included), peak RSS (ru_maxrss) and what recording added to it, and the
trace's bytes per event. The agent has no finishing pass: its writer drains
and closes the trace before the program's exit returns, so that is inside
the wall time. (heaptrack's own analysis step is not run.)

Goals (issue 11): stacks off <= 1.5x at >= 40 M calls/s and with 4 threads,
<= 1.3x on perl / make / python3; 8-frame stacks <= 2.5x; <= 1 byte per
event; <= 1 MiB of RSS per thread plus the writer's. Wall-time ratios on a
machine shared with other work mean little: the load average is printed
next to them; instruction counts (callgrind, see native/record/README.md)
are the steadier figure.

  bench/record-overhead.py                          all workloads, 3 runs each (a few minutes)
  bench/record-overhead.py --runs 5 --workloads churn,prodcons --no-heaptrack
  bench/record-overhead.py --json out/bench/record.json
  bench/record-overhead.py --agent ../main/build/lib/libheaplab-record.so   another build's agent
"""
import argparse
import json
import os
import re
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from heaplab_layout import LAYOUT, write_json

ROOT = LAYOUT.root
AGENT = LAYOUT.lib("libheaplab-record.so")
COUNTER = LAYOUT.lib("libheaplab-count.so")
DUMP = LAYOUT.bin("hltrace-dump")
HEAPLAB = LAYOUT.heaplab
PROGS = {
    "churn": ("churn.c", []),
    "prodcons": ("prodcons.c", ["-pthread"]),
    "spawnjoin": ("spawnjoin.c", ["-pthread"]),
}
BUNDLED = ["perl-wc", "make-n", "python"]
KINDS = ["malloc", "calloc", "realloc", "memalign", "posix_memalign", "aligned_alloc", "valloc", "pvalloc",
         "free", "realloc_free"]


def load():
    return os.getloadavg()[0]


def prepare_bundled(name, scale, cache):
    """The workload's command line from `heaplab workloads`: env, argv, stdin."""
    line = subprocess.run(
        [str(HEAPLAB), "workloads", name, "--scale", str(scale), "--cache", str(cache)],
        check=True, capture_output=True, text=True,
    ).stdout.strip()
    words = shlex.split(line)
    env, stdin = {}, None
    while words and re.match(r"^[A-Z_][A-Z0-9_]*=", words[0]):
        k, v = words.pop(0).split("=", 1)
        env[k] = v
    if "<" in words:
        i = words.index("<")
        stdin = words[i + 1]
        words = words[:i]
    # a version manager's shell shim would be measured (and recorded) instead
    # of the interpreter: use the real one
    exe = shutil.which(words[0]) or words[0]
    if "/shims/" in exe and Path("/usr/bin", words[0]).exists():
        exe = str(Path("/usr/bin", words[0]))
    words[0] = exe
    return env, words, stdin


def prepare_prog(name, scale, out):
    """Builds bench/progs/NAME.c into out; its argv (scaled)."""
    src, flags = PROGS[name]
    exe = out / name
    cc = os.environ.get("CC", "cc")
    subprocess.run([cc, "-O2", "-o", str(exe), str(ROOT / "bench/progs" / src)] + flags, check=True)
    args = {"churn": [str(int(10000000 * scale))], "prodcons": [str(int(2000000 * scale))],
            "spawnjoin": ["10", str(max(1, int(4500 * scale)))]}[name]
    return {}, [str(exe)] + args, None


# Peak RSS from wait4() of a child forked by this (large) Python process
# would start at Python's own size: the kernel keeps the pre-exec image's
# high-water mark. A tiny launcher forks instead and reports its child's
# figures.
LAUNCHER_C = r"""
#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>
int main(int argc, char **argv) {
    if (argc < 3) return 125;
    pid_t p = fork();
    if (p == 0) {
        /* the preload is for the program, not for this launcher */
        const char *pre = getenv("BENCH_PRELOAD");
        if (pre) {
            setenv("LD_PRELOAD", pre, 1);
            unsetenv("BENCH_PRELOAD");
        }
        execvp(argv[2], argv + 2);
        _exit(127);
    }
    int st; struct rusage ru;
    if (p < 0 || wait4(p, &st, 0, &ru) != p) return 126;
    FILE *f = fopen(argv[1], "w");
    if (!f) return 126;
    fprintf(f, "%ld %ld.%06ld %ld.%06ld\n", ru.ru_maxrss, (long)ru.ru_utime.tv_sec, (long)ru.ru_utime.tv_usec,
            (long)ru.ru_stime.tv_sec, (long)ru.ru_stime.tv_usec);
    fclose(f);
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}
"""
LAUNCHER = None


def build_launcher(out):
    global LAUNCHER
    src = out / "launcher.c"
    src.write_text(LAUNCHER_C)
    LAUNCHER = out / "launcher"
    subprocess.run([os.environ.get("CC", "cc"), "-O2", "-o", str(LAUNCHER), str(src)], check=True)


def run(argv, env, stdin, extra_env):
    """(wall s, cpu s, max RSS KiB, stdout, stderr) of one run."""
    e = dict(os.environ)
    e.pop("LD_PRELOAD", None)
    # perl randomizes its hashes, and with them its realloc count, run by run
    e.update({"PERL_HASH_SEED": "0", "PERL_PERTURB_KEYS": "0", "PYTHONHASHSEED": "0", "LC_ALL": "C"})
    e.update(env)
    e.update(extra_env)
    if "LD_PRELOAD" in e:
        e["BENCH_PRELOAD"] = e.pop("LD_PRELOAD")
    stats = LAUNCHER.parent / "launcher.stats"
    t0 = time.perf_counter()
    with open(stdin or os.devnull, "rb") as inp, tempfile.TemporaryFile() as out, \
            tempfile.TemporaryFile() as err:
        p = subprocess.run([str(LAUNCHER), str(stats)] + argv, env=e, stdin=inp, stdout=out, stderr=err)
        wall = time.perf_counter() - t0
        out.seek(0)
        err.seek(0)
        o, er = out.read(), err.read().decode(errors="replace")
    if p.returncode != 0:
        sys.exit(f"{argv[0]} failed ({p.returncode}): {er[-500:]}")
    rss, ut, st = stats.read_text().split()
    return wall, float(ut) + float(st), int(rss), o, er


def counts(trace):
    line = subprocess.run([str(DUMP), "--counts", str(trace)], check=True, capture_output=True,
                          text=True).stdout
    return dict(kv.split("=", 1) for kv in line.split())


def check_counts(name, argv, env, stdin, trace, recorded_env, out):
    """The trace's per-kind counts against the counting preload's, from a run
    with as many environment variables as the recorded one (perl and python
    allocate per variable)."""
    cfile = out / f"{name}.count"
    if cfile.exists():
        cfile.unlink()
    extra = dict(recorded_env)
    del extra["HEAPLAB_RECORD_OUT"]
    extra.update({"LD_PRELOAD": str(COUNTER), "HEAPLAB_COUNT_OUT": str(cfile)})
    run(argv, env, stdin, extra)
    lines = cfile.read_text().splitlines()
    # the program's line: the one whose parent (the launcher) counted nothing
    rows = [dict(x.split("=", 1) for x in line.split()) for line in lines]
    pids = {r["pid"] for r in rows}
    roots = [r for r in rows if r["ppid"] not in pids]
    want = roots[0] if len(roots) == 1 else None
    if want is None:
        sys.exit(f"{name}: the counting preload wrote no line for the program ({cfile})")
    got = counts(trace)
    bad = [k for k in KINDS if k != "free" and int(want[k]) != int(got[k])]
    if int(want["free"]) != int(got["free"]) + int(got.get("unknown_frees", 0)):
        bad.append("free")
    if bad or got.get("end", "").split(":")[0] != "exit" or got.get("lost", "0") != "0":
        sys.exit(f"{name}: the trace's counts differ from the counting preload's ({bad}) or it is "
                 f"incomplete: preload {want}, trace {got}")
    return int(got["events"])


def heaptrack_path(allow_install):
    ht = shutil.which("heaptrack")
    if ht or not allow_install:
        return ht
    if shutil.which("apt-get") and os.geteuid() == 0:
        print("heaptrack is not installed: apt-get install heaptrack ...", flush=True)
        subprocess.run(["apt-get", "install", "-y", "-q", "heaptrack"], stdout=subprocess.DEVNULL)
        ht = shutil.which("heaptrack")
    if not ht:
        print("heaptrack is not installed and could not be: its rows are left out", flush=True)
    return ht


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=3, help="runs of each variant (median reported; default 3)")
    ap.add_argument("--scale", type=float, default=1.0, help="input size relative to the default (1)")
    ap.add_argument("--workloads", default=",".join(BUNDLED + list(PROGS)),
                    help="comma-separated, of: " + ", ".join(BUNDLED + list(PROGS)))
    ap.add_argument("--no-heaptrack", action="store_true", help="skip heaptrack (and its install)")
    ap.add_argument("--unwind", choices=["fast", "both"], default="fast",
                    help="stacks-8 with hl_unwind only (default), or also stacks-8-lu (libunwind)")
    ap.add_argument("--out", default=str(ROOT / "out/bench/record"), help="traces, programs and inputs go here")
    ap.add_argument("--json", help="also write the results as JSON")
    ap.add_argument("--agent", default=str(AGENT),
                    help="the agent to measure (default: this tree's build/lib/libheaplab-record.so); "
                         "another build's, to compare")
    a = ap.parse_args()
    agent = Path(a.agent).resolve()
    for need in (agent, COUNTER, DUMP, HEAPLAB):
        if not need.exists():
            sys.exit(f"{need} is not built: run `make` first")
    names = a.workloads.split(",")
    for n in names:
        if n not in BUNDLED and n not in PROGS:
            sys.exit(f"unknown workload {n!r}; expected one of: {', '.join(BUNDLED + list(PROGS))}")
    heaptrack = None if a.no_heaptrack else heaptrack_path(True)
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    build_launcher(out)
    print(f"record overhead: {a.runs} runs per variant, scale {a.scale}, load average {load():.1f} at the "
          f"start, {os.cpu_count()} CPUs, agent {agent}", flush=True)
    results = []
    for name in names:
        if name in PROGS:
            env, argv, stdin = prepare_prog(name, a.scale, out)
        else:
            env, argv, stdin = prepare_bundled(name, a.scale, out / "inputs")
        variants = {"native": None}
        rows = [("stacks-0", 0, "fast"), ("stacks-8", 8, "fast")]
        if a.unwind == "both":
            rows.append(("stacks-8-lu", 8, "libunwind"))
        traces = {}
        for v, depth, walker in rows:
            traces[v] = out / f"{name}-{v}.hltrace"
            variants[v] = {"LD_PRELOAD": str(agent), "HEAPLAB_RECORD_OUT": str(traces[v]),
                           "HEAPLAB_RECORD_STACK_DEPTH": str(depth), "HEAPLAB_UNWIND": walker}
        if heaptrack:
            variants["heaptrack"] = None
        wall = {v: [] for v in variants}
        cpu = {v: [] for v in variants}
        rss = {v: [] for v in variants}
        loads = []
        native_out = None
        ht_stats = ""
        for r in range(a.runs):
            loads.append(load())
            for v, extra in variants.items():
                if v == "heaptrack":
                    for old in out.glob(f"{name}-heaptrack*"):
                        old.unlink()
                    w, c, m, o, er = run([heaptrack, "-o", str(out / f"{name}-heaptrack")] + argv, env, stdin, {})
                    ht_stats = er
                else:
                    if v in traces:
                        for old in out.glob(f"{traces[v].name}*"):
                            old.unlink()
                    w, c, m, o, er = run(argv, env, stdin, extra or {})
                if v != "heaptrack":
                    if native_out is None:
                        native_out = o
                    elif o != native_out:
                        sys.exit(f"{name} {v}: its output differs from the native run's")
                wall[v].append(w)
                cpu[v].append(c)
                rss[v].append(m)
            print(f"  {name} run {r + 1} (load {loads[-1]:.1f}): "
                  + "  ".join(f"{v} {wall[v][-1]:.2f}s" for v in variants), flush=True)
        events = check_counts(name, argv, env, stdin, traces["stacks-0"], variants["stacks-0"], out)
        base_w, base_c = statistics.median(wall["native"]), statistics.median(cpu["native"])
        base_rss = statistics.median(rss["native"])
        row = {"workload": name, "command": " ".join(argv), "events": events, "native_s": base_w,
               "native_cpu_s": base_c, "native_rss_kib": base_rss,
               "calls_per_s_native": events / base_w, "load": loads, "variants": {}}
        ht_w = statistics.median(wall["heaptrack"]) if heaptrack else None
        for v in variants:
            if v == "native":
                continue
            if v == "heaptrack":
                ht_file = next(out.glob(f"{name}-heaptrack*"), None)
                size = ht_file.stat().st_size if ht_file else 0
                ev = events
            else:
                size = traces[v].stat().st_size
                ev = int(counts(traces[v])["events"])
            w = statistics.median(wall[v])
            row["variants"][v] = {
                "wall_s": w, "wall_ratio": w / base_w, "wall_vs_heaptrack": (w / ht_w) if ht_w else None,
                "cpu_s": statistics.median(cpu[v]), "cpu_ratio": statistics.median(cpu[v]) / base_c,
                "rss_kib": statistics.median(rss[v]), "rss_added_kib": statistics.median(rss[v]) - base_rss,
                "events": ev, "trace_bytes": size, "bytes_per_event": size / max(ev, 1),
            }
        results.append(row)

    print()
    print(f"{'workload':<10} {'variant':<11} {'wall s':>7} {'x native':>8} {'x htrack':>8} {'cpu s':>7} "
          f"{'x native':>8} {'RSS MiB':>8} {'+RSS MiB':>8} {'events':>11} {'B/event':>8}  load")
    for row in results:
        ld = "/".join(f"{x:.1f}" for x in row["load"])
        print(f"{row['workload']:<10} {'native':<11} {row['native_s']:>7.2f} {1:>8.2f} {'':>8} "
              f"{row['native_cpu_s']:>7.2f} {1:>8.2f} {row['native_rss_kib'] / 1024:>8.1f} {'':>8} "
              f"{row['events']:>11,} {'':>8}  {ld}   ({row['calls_per_s_native'] / 1e6:.1f} M calls/s natively)")
        for v, d in row["variants"].items():
            vh = f"{d['wall_vs_heaptrack']:.2f}" if d["wall_vs_heaptrack"] is not None else "-"
            print(f"{'':<10} {v:<11} {d['wall_s']:>7.2f} {d['wall_ratio']:>8.2f} {vh:>8} {d['cpu_s']:>7.2f} "
                  f"{d['cpu_ratio']:>8.2f} {d['rss_kib'] / 1024:>8.1f} {d['rss_added_kib'] / 1024:>8.1f} "
                  f"{d['events']:>11,} {d['bytes_per_event']:>8.3f}")
    print(f"\nload average at the end {load():.1f} on {os.cpu_count()} CPUs (ratios on a busy machine are noisy)")
    print("goals: stacks-0 <= 1.5x (>= 40 M calls/s, 4 threads), <= 1.3x (perl, make, python); "
          "stacks-8 <= 2.5x; <= 1 byte per event; RSS added <= 1 MiB per thread + the writer's")
    if a.json:
        write_json(a.json, {"runs": a.runs, "scale": a.scale, "cpus": os.cpu_count(), "results": results},
                   indent=2)


if __name__ == "__main__":
    main()
