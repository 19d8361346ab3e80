#!/usr/bin/env python3
"""What recording costs: wall time recorded / native, and trace bytes per event.

For each workload (the bundled ones: `heaplab workloads`), in one invocation,
interleaved run by run so that a busy machine slows every variant alike:

  native     the program alone
  stacks-0   under libheaplab-record.so, stacks off
  stacks-8   under libheaplab-record.so, 8-frame stacks (hl_unwind, HEAPLAB_UNWIND=fast)
  stacks-8-lu  the same with HEAPLAB_UNWIND=libunwind (every walk by unw_backtrace)
  heaptrack  under heaptrack (if installed), which records full stacks

It reports the median wall time of each, its ratio to native, the CPU time
(user + sys of the program and its threads, which a loaded machine disturbs
less than wall time) and its ratio, and the trace size per event
(events = allocation calls + frees, as the trace counts them). heaptrack's
size is per event of the same run and per allocation call as heaptrack
itself counts them.

Goals (issue 2): stacks off <= 1.5x, depth 8 <= 3x, <= 1 byte per event.
This is a benchmark, not a test: it takes minutes (heaptrack is slow).

  bench/record-overhead.py                       3 runs, scale 1, all workloads
  bench/record-overhead.py --runs 5 --workloads perl-wc,make-n --no-heaptrack
  bench/record-overhead.py --json out/bench/record.json
  bench/record-overhead.py --unwind fast         stacks-8 with the fast walker only
"""
import argparse
import json
import os
import re
import resource
import shlex
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

from heaplab_layout import LAYOUT

ROOT = LAYOUT.root
AGENT = LAYOUT.lib("libheaplab-record.so")
DUMP = LAYOUT.bin("hltrace-dump")
HEAPLAB = LAYOUT.heaplab


def prepare(name, scale, cache):
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


def run(argv, env, stdin, extra_env):
    e = dict(os.environ)
    e.pop("LD_PRELOAD", None)
    e.update(env)
    e.update(extra_env)
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    with open(stdin or os.devnull, "rb") as inp:
        p = subprocess.run(argv, env=e, stdin=inp, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    if p.returncode != 0:
        sys.exit(f"{argv[0]} failed ({p.returncode}): {p.stderr.decode(errors='replace')[-500:]}")
    return wall, cpu, p.stderr.decode(errors="replace")


def counts(trace):
    line = subprocess.run([str(DUMP), "--counts", str(trace)], check=True, capture_output=True, text=True).stdout
    return dict(kv.split("=", 1) for kv in line.split())


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=3, help="runs of each variant (median reported)")
    ap.add_argument("--scale", type=float, default=1.0, help="input size relative to the default")
    ap.add_argument("--workloads", default="perl-wc,make-n,python", help="comma-separated (heaplab workloads)")
    ap.add_argument("--no-heaptrack", action="store_true", help="skip heaptrack")
    ap.add_argument("--out", default=str(ROOT / "out/bench/record"), help="traces and inputs go here")
    ap.add_argument("--json", help="also write the results as JSON")
    ap.add_argument("--unwind", choices=["both", "fast", "libunwind"], default="both",
                    help="stack walker of the stacks-8 rows: both (stacks-8 fast, stacks-8-lu libunwind), "
                         "or only one of them")
    a = ap.parse_args()
    for need in (AGENT, DUMP, HEAPLAB):
        if not need.exists():
            sys.exit(f"{need} is not built: run `make` first")
    heaptrack = None if a.no_heaptrack else shutil.which("heaptrack")
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    print(f"record overhead: {a.runs} runs per variant, scale {a.scale}, load average {os.getloadavg()[0]:.1f}, "
          f"{os.cpu_count()} CPUs", flush=True)
    results = []
    for name in a.workloads.split(","):
        env, argv, stdin = prepare(name, a.scale, out / "inputs")
        variants = {"native": lambda: {}}
        traces = {}
        rows = [("stacks-0", 0, "fast")]
        if a.unwind in ("both", "fast"):
            rows.append(("stacks-8", 8, "fast"))
        if a.unwind in ("both", "libunwind"):
            rows.append(("stacks-8-lu", 8, "libunwind"))
        for v, depth, walker in rows:
            traces[v] = out / f"{name}-{v}.hltrace"
            def mk(depth=depth, walker=walker, t=traces[v]):
                for old in out.glob(f"{t.name}*"):
                    old.unlink()
                return {"LD_PRELOAD": str(AGENT), "HEAPLAB_RECORD_OUT": str(t),
                        "HEAPLAB_RECORD_STACK_DEPTH": str(depth), "HEAPLAB_UNWIND": walker}
            variants[v] = mk
        times = {v: [] for v in variants}
        cpus = {v: [] for v in variants}
        ht_times, ht_cpus, ht_stats = [], [], ""
        for r in range(a.runs):
            for v, mk in variants.items():
                w, c, _ = run(argv, env, stdin, mk())
                times[v].append(w)
                cpus[v].append(c)
            if heaptrack:
                ht_out = out / f"{name}-heaptrack"
                for old in out.glob(f"{name}-heaptrack*"):
                    old.unlink()
                w, c, err = run([heaptrack, "-o", str(ht_out)] + argv, env, stdin, {})
                ht_times.append(w)
                ht_cpus.append(c)
                ht_stats = err
            print(f"  {name} run {r + 1}: " + "  ".join(f"{v} {times[v][-1]:.2f}s" for v in variants)
                  + (f"  heaptrack {ht_times[-1]:.2f}s" if heaptrack else ""), flush=True)
        base_w, base_c = statistics.median(times["native"]), statistics.median(cpus["native"])
        row = {"workload": name, "command": " ".join(argv), "native_s": base_w, "native_cpu_s": base_c, "variants": {}}
        for v in variants:
            if v == "native":
                continue
            t = traces[v]
            c = counts(t)
            events = int(c["events"])
            size = t.stat().st_size
            row["variants"][v] = {
                "wall_s": statistics.median(times[v]), "wall_ratio": statistics.median(times[v]) / base_w,
                "cpu_s": statistics.median(cpus[v]), "cpu_ratio": statistics.median(cpus[v]) / base_c,
                "events": events, "trace_bytes": size, "bytes_per_event": size / max(events, 1),
                "allocation_calls": events - int(c["free"]) - int(c["realloc_free"]),
            }
        if heaptrack:
            ht_file = next(out.glob(f"{name}-heaptrack*"), None)
            m = re.search(r"allocations:\s+(\d+)", ht_stats)
            calls = int(m.group(1)) if m else 0
            events = row["variants"]["stacks-0"]["events"]
            size = ht_file.stat().st_size if ht_file else 0
            row["variants"]["heaptrack"] = {
                "wall_s": statistics.median(ht_times), "wall_ratio": statistics.median(ht_times) / base_w,
                "cpu_s": statistics.median(ht_cpus), "cpu_ratio": statistics.median(ht_cpus) / base_c,
                "events": events, "trace_bytes": size, "bytes_per_event": size / max(events, 1),
                "allocation_calls": calls, "bytes_per_allocation_call": size / max(calls, 1),
            }
        results.append(row)

    print()
    print(f"{'workload':<9} {'variant':<11} {'wall s':>8} {'x native':>8} {'cpu s':>8} {'x native':>8} "
          f"{'events':>11} {'trace':>10} {'B/event':>8} {'B/alloc call':>12}")
    for row in results:
        print(f"{row['workload']:<9} {'native':<11} {row['native_s']:>8.2f} {1:>8.2f} {row['native_cpu_s']:>8.2f} {1:>8.2f}")
        for v, d in row["variants"].items():
            per_call = d["trace_bytes"] / max(d["allocation_calls"], 1)
            print(f"{'':<9} {v:<11} {d['wall_s']:>8.2f} {d['wall_ratio']:>8.2f} {d['cpu_s']:>8.2f} {d['cpu_ratio']:>8.2f} "
                  f"{d['events']:>11,} {d['trace_bytes']:>10,} {d['bytes_per_event']:>8.3f} {per_call:>12.3f}")
    for row in results:
        vs = row["variants"]
        if "stacks-8" in vs and "stacks-8-lu" in vs:
            # the stacks' own cost: depth 8 over depth 0, CPU time (less disturbed by load)
            base = vs["stacks-0"]["cpu_s"]
            fast, lu = vs["stacks-8"]["cpu_s"] - base, vs["stacks-8-lu"]["cpu_s"] - base
            row["stack_cpu_s"] = {"fast": fast, "libunwind": lu}
            print(f"{row['workload']:<9} stacks' CPU cost over stacks-0: fast {fast:.3f}s, libunwind {lu:.3f}s"
                  + (f" ({lu / fast:.1f}x less with fast)" if fast > 0 else ""))
    print("\ngoals: stacks-0 <= 1.5x native, stacks-8 <= 3x, <= 1 byte per event")
    if a.json:
        Path(a.json).parent.mkdir(parents=True, exist_ok=True)
        Path(a.json).write_text(json.dumps({"runs": a.runs, "scale": a.scale, "cpus": os.cpu_count(),
                                            "results": results}, indent=2))


if __name__ == "__main__":
    main()
