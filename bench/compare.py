#!/usr/bin/env python3
"""Figures of heaplab compare, on recorded programs.

  1. Speed of the comparison (issue 14): `heaplab compare --allocators all
     --repeat 3` timed with the old counter (callgrind) and the new one
     (vgcount, heaplab's own Valgrind tool) in the same invocation, on the
     bundled workloads and on an allocation-bound program of at least 50 M
     events (bench/progs/bignum.c, `bignum 840000 1000`: 67 M events). Wall
     time, CPU time of the children, and the machine's load beside each.
     Then, from the same runs:
     - the new counts against callgrind's (the oracle), per (trace,
       allocator): instructions per malloc, free and realloc, relative
       difference (goal: within 1% everywhere);
     - the cost of exact counting, per allocator: the counted replay's timed
       region against the native replay's median (goal <= 5x), beside
       Valgrind's `none` tool on the same replay (--floor), the least any
       Valgrind tool can cost;
     - the same comparison as a plan run by GNU parallel on this machine and
       merged: its records against the local run's, wall time and RSS aside.
  2. Harness overhead per replayed event: the replayer's plain-mode loop with
     a trivial bump allocator preloaded, in instructions (callgrind) and ns.
  3. Wall time of the real programs (`heaplab compare --live`).

This is a benchmark, not a test: with callgrind on the 67 M-event trace it
takes tens of minutes.

  bench/compare.py                                  everything, into out/bench/compare
  bench/compare.py --skip-live --skip-harness       the speed figures only
  bench/compare.py --big-steps 0                    bundled workloads only
  bench/compare.py --skip-callgrind                 the new path only
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

from heaplab_layout import LAYOUT, compare_records

ROOT = str(LAYOUT.root)
HEAPLAB = str(LAYOUT.heaplab)
REPLAY = str(LAYOUT.bin("heaplab-replay"))
BUMP = str(LAYOUT.lib("libheaplab-test-bump.so"))
WORKLOADS = ["perl-wc", "make-n", "python"]


def sh(cmd, **kw):
    return subprocess.run(cmd, check=True, capture_output=True, text=True, **kw)


def program_of(name, scale, out):
    """The workload's command: (env, argv, stdin)."""
    line = sh([HEAPLAB, "workloads", name, "--variant", "1", "--scale", str(scale),
               "--cache", os.path.join(out, "inputs")], cwd=ROOT).stdout.strip().splitlines()[0]
    words = shlex.split(line)
    env, argv, stdin = {}, [], None
    it = iter(words)
    for w in it:
        if not argv and re.match(r"^[A-Z_]+=", w):
            k, v = w.split("=", 1)
            env[k] = v
        elif w == "<":
            stdin = next(it)
        else:
            argv.append(w)
    exe = shutil.which(argv[0]) or argv[0]
    with open(exe, "rb") as f:
        if f.read(2) == b"#!" and argv[0] == "python3":  # a wrapper script (pyenv's shim)
            argv[0] = "/usr/bin/python3"
    return env, argv, stdin


def record(name, env, argv, stdin, out):
    trace = os.path.join(out, f"{name}.hltrace")
    cmd = [HEAPLAB, "record", "-o", trace, "--"] + (["env"] + [f"{k}={v}" for k, v in env.items()] if env else []) + argv
    with open(stdin) if stdin else open(os.devnull) as fin:
        subprocess.run(cmd, check=True, stdin=fin, stdout=subprocess.DEVNULL, cwd=ROOT)
    # the program's own trace is the largest one the recording left
    cands = [os.path.join(out, f) for f in os.listdir(out) if f == f"{name}.hltrace" or f.startswith(f"{name}.hltrace.")]
    best = max(cands, key=os.path.getsize)
    main = os.path.join(out, "traces", f"{name}.hltrace")
    os.makedirs(os.path.dirname(main), exist_ok=True)
    shutil.copyfile(best, main)
    return main


def callgrind_profile(path):
    """self cost per function, arcs (caller, callee) -> inclusive, object per function."""
    names = {"fn": {}, "ob": {}}
    fn = ob = cfn = cob = None
    selfc, arcs, obj, pending = {}, {}, {}, None
    ir_total = None

    def resolve(kind, v):
        m = re.match(r"\((\d+)\)(?: (.*))?$", v)
        if not m:
            return v
        if m.group(2):
            names[kind][m.group(1)] = m.group(2)
        return names[kind][m.group(1)]

    for line in open(path):
        line = line.rstrip("\n")
        if line.startswith("fn="):
            fn = resolve("fn", line[3:])
            obj.setdefault(fn, ob)
        elif line.startswith("cfn="):
            cfn = resolve("fn", line[4:])
        elif line.startswith("ob="):
            ob = resolve("ob", line[3:])
        elif line.startswith("cob="):
            cob = resolve("ob", line[4:])
        elif line.startswith("calls="):
            pending = int(line[6:].split()[0])
        elif line.startswith("summary:") or line.startswith("totals:"):
            ir_total = int(line.split()[1])
        elif line[:1].isdigit() or line[:1] in "+-*":
            parts = line.split()
            c = int(parts[-1]) if len(parts) > 1 else 0
            if pending is not None:
                arcs[(fn, cfn)] = arcs.get((fn, cfn), 0) + c
                if cob:
                    obj.setdefault(cfn, cob)
                pending = cob = None
            else:
                selfc[fn] = selfc.get(fn, 0) + c
    return selfc, arcs, obj, ir_total or sum(selfc.values())


def harness(trace, runs, cache):
    out = os.path.join(os.path.dirname(trace), "harness.callgrind.out")
    env = dict(os.environ, LD_PRELOAD=BUMP)
    sh(["valgrind", "--tool=callgrind", "--instr-atstart=no", f"--callgrind-out-file={out}", REPLAY,
        "--ops-cache", cache, trace], env=env)
    selfc, arcs, obj, total = callgrind_profile(out)
    in_bump = lambda f: (obj.get(f) or "").endswith("libheaplab-test-bump.so")
    alloc = sum(c for (a, b), c in arcs.items() if in_bump(b) and not in_bump(a))
    ns = []
    events = 0
    for _ in range(runs):
        j = json.loads(sh([REPLAY, "--ops-cache", cache, trace], env=env).stdout)
        events = j["events"]
        ns.append(j["timed_ns"] / j["events"])
    return {"events": events, "instructions_total": total, "instructions_in_bump": alloc,
            "harness_instr_per_event": (total - alloc) / events,
            "bump_instr_per_event": alloc / events,
            "ns_per_event_median": statistics.median(ns), "ns_runs": ns}


WORKLOADS_ALL = ["perl-wc", "make-n", "python", "sqlite", "gawk-wc"]


def load():
    return round(os.getloadavg()[0], 2)


def timed(cmd, **kw):
    """Runs cmd; returns (seconds, children's CPU seconds, load before, load after, returncode)."""
    import resource, time
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    l0, t0 = load(), time.monotonic()
    r = subprocess.run(cmd, cwd=ROOT, **kw)
    wall = time.monotonic() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return {"wall_s": round(wall, 2), "cpu_s": round(cpu, 2), "load_before": l0, "load_after": load(),
            "returncode": r.returncode, "command": " ".join(shlex.quote(c) for c in cmd)}


def big_trace(out, steps, period):
    exe = os.path.join(out, "bignum")
    subprocess.run(["gcc", "-O2", "-o", exe, os.path.join(ROOT, "bench/progs/bignum.c")], check=True)
    trace = os.path.join(out, "traces", f"bignum-{steps}.hltrace")
    os.makedirs(os.path.dirname(trace), exist_ok=True)
    if not os.path.exists(trace):
        print(f"== recording bignum {steps} {period}", file=sys.stderr)
        subprocess.run([HEAPLAB, "record", "--stack-depth", "0", "-o", trace, "--", exe, str(steps), str(period)],
                       check=True, stdout=subprocess.DEVNULL)
    return trace


def compare_run(traces, counter, out, tag, repeat, timeout, allocators):
    """One `heaplab compare` with a fresh state directory: nothing reused."""
    state = os.path.join(out, f"state-{tag}-{counter}")
    shutil.rmtree(state, ignore_errors=True)
    js = os.path.join(out, f"compare-{tag}-{counter}.json")
    cmd = [HEAPLAB, "compare", *traces, "--allocators", allocators, "--repeat", str(repeat), "--counter", counter,
           "--timeout", str(timeout), "--state", state, "--json", js]
    print(f"== {tag}: heaplab compare --counter {counter} (load {load()})", file=sys.stderr)
    t = timed(cmd, stdout=subprocess.DEVNULL)
    t["records"] = compare_records(js) if os.path.exists(js) else []
    t["state"] = state
    return t


def oracle(new, old):
    """Relative differences of the new counts from callgrind's, per cell."""
    rows, by = [], {(r["trace"], r["allocator"]): r for r in old}
    for r in new:
        o = by.get((r["trace"], r["allocator"]))
        if not o or r["status"] != "ok" or o["status"] != "ok":
            continue
        d = {}
        for f in ("instr_per_malloc", "instr_per_free", "instr_per_realloc"):
            if r[f] is not None and o[f]:
                d[f] = (r[f] - o[f]) / o[f]
        rows.append({"trace": r["trace_name"], "allocator": r["allocator"], "diff": d,
                     "max_abs_pct": 100 * max((abs(v) for v in d.values()), default=0.0)})
    return rows


def cost(run):
    """Per cell: the counted replay's timed region over the native median."""
    counted = {}
    for f in os.listdir(run["state"]):
        o = json.load(open(os.path.join(run["state"], f)))
        if o["status"] == "ok" and o["kind"] == "compare.count":
            counted[(o["result"]["trace"], o["result"]["allocator"])] = o
    rows = []
    for r in run["records"]:
        o = counted.get((os.path.abspath(r["trace"]), r["allocator"]))
        if r["status"] != "ok" or not r["wall_s"] or o is None:
            continue
        t = o["result"]["replay"]["timed_ns"] / 1e9
        rows.append({"trace": r["trace_name"], "allocator": r["allocator"], "native_s": r["wall_s"],
                     "counted_timed_s": t, "counted_job_s": o["seconds"], "ratio": t / r["wall_s"],
                     "job_ratio": o["seconds"] / r["wall_s"]})
    return rows


def floor(trace, allocators_of, out, runs=3):
    """Per allocator, one after another at the same moment: the native
    replay, the counted one (vgcount) and Valgrind's none tool on the same
    replay (the least any Valgrind tool can cost), timed regions, best of
    `runs` each."""
    rows = []
    cache = os.path.join(out, "ops-cache-floor")
    vglib = str(LAYOUT.valgrind_lib)
    for name, preload in allocators_of:
        env = dict(os.environ)
        env.pop("LD_PRELOAD", None)
        if preload:
            env["LD_PRELOAD"] = preload
        if name.startswith("gnulocal+pad"):
            env["HEAPLAB_PAD"] = name.split("+pad")[1]
        best = {"native": [], "vgcount": [], "none": []}
        for _ in range(runs):
            for k, cmd, e in (
                ("native", [REPLAY, "--ops-cache", cache, trace], env),
                ("vgcount", ["valgrind", "-q", "--tool=heaplab-count", REPLAY, "--count", "vgcount", "--ops-cache",
                             cache, trace], dict(env, VALGRIND_LIB=vglib)),
                ("none", ["valgrind", "-q", "--tool=none", REPLAY, "--ops-cache", cache, trace], env),
            ):
                j = json.loads(sh(cmd, env=e).stdout)
                best[k].append(j["timed_ns"] / 1e9)
        row = {"allocator": name, "load": load()}
        row.update({f"{k}_s": min(v) for k, v in best.items()})
        rows.append(row)
        print(f"   floor {name}: native {row['native_s']:.3f} s, vgcount {row['vgcount_s']:.2f} s "
              f"({row['vgcount_s'] / row['native_s']:.1f}x), none {row['none_s']:.2f} s "
              f"({row['none_s'] / row['native_s']:.1f}x), load {row['load']}", file=sys.stderr)
    shutil.rmtree(cache, ignore_errors=True)
    return rows


def parallel_check(traces, out, allocators, repeat, local):
    plan = os.path.join(out, "plan")
    shutil.rmtree(plan, ignore_errors=True)
    sh([HEAPLAB, "compare", *traces, "--allocators", allocators, "--repeat", str(repeat), "--plan", plan])
    t1 = timed(["parallel", "--will-cite", "-j", str(os.cpu_count()), "-a", os.path.join(plan, "jobs-shared.txt")],
               stdout=subprocess.DEVNULL)
    t2 = timed(["parallel", "--will-cite", "-j1", "-a", os.path.join(plan, "jobs-alone.txt")], stdout=subprocess.DEVNULL)
    mj = os.path.join(out, "merged.json")
    m = subprocess.run([HEAPLAB, "compare", "--merge", plan, "--json", mj], cwd=ROOT, capture_output=True, text=True)
    merged = compare_records(mj)
    skip = {"wall_s", "wall_runs_s", "wall_ratio_glibc", "cpu_s", "cpu_runs_s", "cpu_ratio_glibc", "ns_per_event",
            "peak_rss_growth_bytes"}
    rss_only = {"peak_footprint_bytes", "footprint_vs_firstfit", "utilization"}
    diffs = []
    for a, b in zip(local, merged):
        for k in a:
            if k in skip or (k in rss_only and a["footprint_source"] == "rss_touch"):
                continue
            if a[k] != b[k]:
                diffs.append(f"{a['trace_name']}/{a['allocator']}.{k}: {a[k]} vs {b[k]}")
    return {"jobs_shared": t1, "jobs_alone": t2, "merge_returncode": m.returncode, "cells": len(merged),
            "differences": diffs}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default=os.path.join(ROOT, "out/bench/compare"))
    ap.add_argument("--scale", type=float, default=1.0)
    ap.add_argument("--runs", type=int, default=3, help="timing runs per cell (--repeat)")
    ap.add_argument("--allocators", default="all")
    ap.add_argument("--timeout", type=int, default=600, help="seconds per replay (under Valgrind: ten times)")
    ap.add_argument("--workloads", default=",".join(WORKLOADS_ALL))
    ap.add_argument("--big-steps", type=int, default=840000, help="bignum steps (80 events each; 0: no big trace)")
    ap.add_argument("--big-period", type=int, default=1000)
    ap.add_argument("--skip-callgrind", action="store_true", help="time the new path only")
    ap.add_argument("--floor", action="store_true", help="also run Valgrind's none tool on the big trace")
    ap.add_argument("--skip-parallel", action="store_true")
    ap.add_argument("--skip-harness", action="store_true")
    ap.add_argument("--skip-live", action="store_true")
    a = ap.parse_args()
    for f in (HEAPLAB, REPLAY, BUMP):
        if not os.path.exists(f):
            sys.exit(f"{f} is not built: run `make build` first")
    os.makedirs(a.out, exist_ok=True)
    workloads = [w for w in a.workloads.split(",") if w]
    cache = os.path.join(a.out, "ops-cache")
    result = {"scale": a.scale, "runs": a.runs, "machine": os.uname().nodename, "cores": os.cpu_count(),
              "load_before": os.getloadavg(), "programs": {}, "speed": {}}
    traces = []
    for w in workloads:
        env, argv, stdin = program_of(w, a.scale, a.out)
        print(f"== {w}: recording {' '.join(argv)}", file=sys.stderr)
        t = record(w, env, argv, stdin, a.out)
        traces.append(t)
        result["programs"][w] = {"command": argv, "env": env, "trace": t}
        if not a.skip_harness:
            h = harness(t, a.runs, cache)
            print(f"   harness {h['harness_instr_per_event']:.2f} instr/event, {h['ns_per_event_median']:.1f} ns/event "
                  f"with bump ({h['events']} events)", file=sys.stderr)
            result["programs"][w]["harness"] = h

    sets = [("bundled", traces)] if traces else []
    if a.big_steps > 0:
        sets.append(("bignum", [big_trace(a.out, a.big_steps, a.big_period)]))
    for tag, ts in sets:
        sp = {"traces": ts}
        sp["vgcount"] = compare_run(ts, "vgcount", a.out, tag, a.runs, a.timeout, a.allocators)
        if not a.skip_callgrind:
            sp["callgrind"] = compare_run(ts, "callgrind", a.out, tag, a.runs, a.timeout, a.allocators)
            sp["oracle"] = oracle(sp["vgcount"]["records"], sp["callgrind"]["records"])
        sp["cost"] = cost(sp["vgcount"])
        if tag == "bignum" and a.floor:
            names = [r["allocator"] for r in sp["vgcount"]["records"] if r["status"] == "ok"]
            sp["floor"] = floor(ts[0], [(n, preload_of(n)) for n in names], a.out)
        if tag == "bundled" and not a.skip_parallel:
            print("== bundled: the same comparison as a plan run by GNU parallel, merged", file=sys.stderr)
            sp["parallel"] = parallel_check(ts, a.out, a.allocators, a.runs, sp["vgcount"]["records"])
        result["speed"][tag] = sp
        for k in ("vgcount", "callgrind"):
            if k in sp:
                print(f"   {tag} {k}: {sp[k]['wall_s']} s wall, {sp[k]['cpu_s']} s CPU, load {sp[k]['load_before']}"
                      f" -> {sp[k]['load_after']}", file=sys.stderr)

    if not a.skip_live:
        for w in workloads:
            p = result["programs"][w]
            print(f"== heaplab compare --live: {w}", file=sys.stderr)
            lj = os.path.join(a.out, f"live-{w}.json")
            cmd = [HEAPLAB, "compare", "--live", "--allocators", a.allocators, "--repeat", str(a.runs),
                   "--no-instructions", "--json", lj]
            cmd += [x for k, v in p["env"].items() for x in ("--env", f"{k}={v}")]
            subprocess.run(cmd + ["--"] + p["command"], cwd=ROOT)
            p["live"] = json.load(open(lj))
    result["load_after"] = os.getloadavg()
    json.dump(result, open(os.path.join(a.out, "figures.json"), "w"), indent=2)
    text = "\n".join(tables(result, a)) + "\n"
    open(os.path.join(a.out, "figures.md"), "w").write(text)
    print(text)


def preload_of(name):
    """The shared object heaplab preloads for an allocator name (None: glibc)."""
    peers = {"jemalloc": "libjemalloc.so.2", "mimalloc": "libmimalloc.so.2", "tcmalloc": "libtcmalloc_minimal.so.4"}
    if name == "glibc":
        return None
    if name in peers:
        return os.path.join("/usr/lib/x86_64-linux-gnu", peers[name])
    return str(LAYOUT.lib(f"libheaplab-{name.split('+')[0]}.so"))


def tables(result, a):
    f = lambda v, d=1: "—" if v is None else f"{v:.{d}f}"
    lines = ["# heaplab compare: figures", "",
             f"Scale {a.scale}, {a.runs} timing runs per cell, {result['cores']} cores, load "
             f"{result['load_before'][0]:.1f} before, {result['load_after'][0]:.1f} after. Made by `bench/compare.py`.", ""]
    for tag, sp in result["speed"].items():
        events = sum((r["events"] or 0) for r in sp["vgcount"]["records"] if r["allocator"] == "glibc")
        lines += [f"## Speed: {tag} ({len(sp['traces'])} trace{'s' if len(sp['traces']) > 1 else ''}, "
                  f"{events:,} events, --allocators {a.allocators} --repeat {a.runs})", "",
                  "| counter | wall | CPU (children) | load before → after |", "|---|---:|---:|---|"]
        for k in ("callgrind", "vgcount"):
            if k in sp:
                r = sp[k]
                lines.append(f"| {k} | {r['wall_s']:.1f} s ({r['wall_s'] / 60:.1f} min) | {r['cpu_s']:.1f} s | "
                             f"{r['load_before']} → {r['load_after']} |")
        if "callgrind" in sp:
            lines.append("")
            lines.append(f"vgcount / callgrind: {sp['vgcount']['wall_s'] / sp['callgrind']['wall_s']:.2f} of the wall time, "
                         f"{sp['vgcount']['cpu_s'] / sp['callgrind']['cpu_s']:.2f} of the CPU time.")
        if sp.get("oracle"):
            worst = max(sp["oracle"], key=lambda r: r["max_abs_pct"])
            over = [r for r in sp["oracle"] if r["max_abs_pct"] > 1.0]
            exact = sum(1 for r in sp["oracle"] if r["max_abs_pct"] == 0.0)
            lines += ["", f"New counts against callgrind's, {len(sp['oracle'])} cells: {exact} equal to the instruction, "
                      f"largest difference {worst['max_abs_pct']:.4f}% ({worst['allocator']} on {worst['trace']}); "
                      f"{len(over)} over 1%" + (": " + ", ".join(f"{r['allocator']}/{r['trace']}" for r in over) if over else ".")]
            lines += ["", "| trace | allocator | malloc | free | realloc |", "|---|---|---:|---:|---:|"]
            for r in sp["oracle"]:
                d = r["diff"]
                pc = lambda k: "—" if k not in d else f"{100 * d[k]:+.4f}%"
                lines.append(f"| {r['trace']} | {r['allocator']} | {pc('instr_per_malloc')} | {pc('instr_per_free')} | "
                             f"{pc('instr_per_realloc')} |")
        if sp.get("cost"):
            lines += ["", "Cost of exact counting inside the comparison: the counted replay (vgcount) against the "
                      "native replay's median, timed regions (both measured under the comparison's load: the "
                      "counted runs two at a time, the timing runs alone).", "",
                      "| trace | allocator | native s | counted s | × native | whole job × native |",
                      "|---|---|---:|---:|---:|---:|"]
            for r in sp["cost"]:
                lines.append(f"| {r['trace']} | {r['allocator']} | {r['native_s']:.3f} | {r['counted_timed_s']:.2f} | "
                             f"{r['ratio']:.1f} | {r['job_ratio']:.1f} |")
            tot_n = sum(r["native_s"] for r in sp["cost"])
            tot_c = sum(r["counted_timed_s"] for r in sp["cost"])
            lines.append(f"| all | (sum) | {tot_n:.2f} | {tot_c:.2f} | {tot_c / tot_n:.1f} | |")
        if sp.get("floor"):
            lines += ["", "The same, one run at a time (no other job of this benchmark running), one after another per allocator (best of 3 timed regions): "
                      "native, vgcount, and Valgrind's none tool, which instruments nothing.", "",
                      "| allocator | native s | vgcount s | vgcount × native | none × native | vgcount × none | load |",
                      "|---|---:|---:|---:|---:|---:|---:|"]
            for r in sp["floor"]:
                lines.append(f"| {r['allocator']} | {r['native_s']:.3f} | {r['vgcount_s']:.2f} | "
                             f"{r['vgcount_s'] / r['native_s']:.1f} | {r['none_s'] / r['native_s']:.1f} | "
                             f"{r['vgcount_s'] / r['none_s']:.2f} | {r['load']} |")
            n = sum(r["native_s"] for r in sp["floor"])
            v = sum(r["vgcount_s"] for r in sp["floor"])
            z = sum(r["none_s"] for r in sp["floor"])
            lines.append(f"| all (sum) | {n:.2f} | {v:.2f} | {v / n:.1f} | {z / n:.1f} | {v / z:.2f} | |")
        if "parallel" in sp:
            p = sp["parallel"]
            lines += ["", f"GNU parallel on this machine: {p['jobs_shared']['wall_s']} s (shared jobs, -j{result['cores']}) + "
                      f"{p['jobs_alone']['wall_s']} s (timing jobs, -j1); merge exit {p['merge_returncode']}; "
                      f"{p['cells']} cells, {len(p['differences'])} fields differ from the local run "
                      "(wall time and RSS aside)" + (": " + "; ".join(p["differences"][:10]) if p["differences"] else ".")]
        lines.append("")
    progs = [w for w in result["programs"] if "harness" in result["programs"][w]]
    if progs:
        lines += ["## Harness overhead per replayed event (bump allocator preloaded)", "",
                  "| program | events | harness instr/event | bump instr/event | ns/event (harness + bump) |",
                  "|---|---:|---:|---:|---:|"]
        for w in progs:
            h = result["programs"][w]["harness"]
            lines.append(f"| {w} | {h['events']:,} | {h['harness_instr_per_event']:.2f} | {h['bump_instr_per_event']:.2f} | "
                         f"{h['ns_per_event_median']:.1f} |")
    if not a.skip_live:
        names = []
        for w in result["programs"]:
            for r in result["programs"][w].get("live", []):
                if r["allocator"] not in names:
                    names.append(r["allocator"])
        ws = list(result["programs"])
        lines += ["", "## Wall time of the real program (median, s; × glibc; stdout = glibc's)", "",
                  "| allocator | " + " | ".join(ws) + " |", "|---|" + "---:|" * len(ws)]
        live = {(w, r["allocator"]): r for w in ws for r in result["programs"][w].get("live", [])}
        for n in names:
            cells = []
            for w in ws:
                r = live.get((w, n))
                if r is None or r["wall_s"] is None:
                    cells.append("—" if r is None else r["status"])
                    continue
                same = {True: "same", False: "DIFF", None: "—"}[r["stdout_matches_glibc"]]
                cells.append(f"{r['wall_s']:.3f} s, {f(r['wall_ratio_glibc'], 2)}×g, {same}")
            lines.append(f"| {n} | " + " | ".join(cells) + " |")
    return lines


main()
