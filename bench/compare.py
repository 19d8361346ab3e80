#!/usr/bin/env python3
"""Figures of the replay-and-compare issue, on three real recorded programs.

  1. Harness overhead per replayed event: the replayer's plain-mode loop with
     a trivial bump allocator preloaded (build/lib/libheaplab-test-bump.so),
     in instructions (callgrind: every instruction counted while ops run,
     minus those inside the bump allocator) and in ns (median timed region
     over --runs runs, bump's own work included, so an upper bound).
     Goal: <= 10 instructions per event.
  2. Instructions per malloc and per free of every allocator (heaplab's and
     glibc, jemalloc, mimalloc, tcmalloc) on each program's trace
     (`heaplab compare`, callgrind).
  3. Wall time on the same programs against glibc and mimalloc: the replay's
     timed region (`heaplab compare`, median of --runs) and the real program
     (`heaplab compare --live`, median of --runs, stdout checked against
     glibc's).

The programs are the bundled workloads perl-wc (perl word and bigram count),
make-n (make -n on a generated makefile) and python (python3 with
PYTHONMALLOC=malloc), recorded here with `heaplab record`. python3 is run as
/usr/bin/python3 when the one on PATH is a wrapper script (pyenv's shim),
because a wrapper's exec would leave the program's trace under another name
and callgrind would follow only the wrapper.

This is a benchmark, not a test: it takes several minutes.

  bench/compare.py                          scale 1, 5 runs, into out/bench/compare
  bench/compare.py --scale 0.5 --runs 3 --out /tmp/b
  bench/compare.py --skip-live              replay figures only
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

from heaplab_layout import LAYOUT

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


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default=os.path.join(ROOT, "out/bench/compare"))
    ap.add_argument("--scale", type=float, default=1.0)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--allocators", default="all")
    ap.add_argument("--timeout", type=int, default=120, help="seconds per replay (callgrind: ten times)")
    ap.add_argument("--skip-live", action="store_true")
    a = ap.parse_args()
    for f in (HEAPLAB, REPLAY, BUMP):
        if not os.path.exists(f):
            sys.exit(f"{f} is not built: run `make build` first")
    os.makedirs(a.out, exist_ok=True)
    cache = os.path.join(a.out, "ops-cache")
    result = {"scale": a.scale, "runs": a.runs, "machine": os.uname().nodename, "cores": os.cpu_count(),
              "load_before": os.getloadavg(), "programs": {}}
    traces = []
    for w in WORKLOADS:
        env, argv, stdin = program_of(w, a.scale, a.out)
        print(f"== {w}: recording {' '.join(argv)}", file=sys.stderr)
        t = record(w, env, argv, stdin, a.out)
        traces.append(t)
        h = harness(t, a.runs, cache)
        print(f"   harness {h['harness_instr_per_event']:.2f} instr/event, {h['ns_per_event_median']:.1f} ns/event "
              f"with bump ({h['events']} events)", file=sys.stderr)
        result["programs"][w] = {"command": argv, "env": env, "trace": t, "harness": h}

    print("== heaplab compare on the three traces", file=sys.stderr)
    cj = os.path.join(a.out, "compare.json")
    subprocess.run([HEAPLAB, "compare", *traces, "--allocators", a.allocators, "--repeat", str(a.runs),
                    "--timeout", str(a.timeout), "--json", cj, "--csv", os.path.join(a.out, "compare.csv"),
                    "--report", os.path.join(a.out, "report")], cwd=ROOT)
    records = json.load(open(cj))
    result["compare"] = records

    if not a.skip_live:
        for w in WORKLOADS:
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

    # ---- the tables
    lines = ["# Replay and compare: figures", "",
             f"Scale {a.scale}, {a.runs} runs per timing, machine load {result['load_before'][0]:.1f} before, "
             f"{result['load_after'][0]:.1f} after ({result['cores']} cores). Made by `bench/compare.py`.", "",
             "## Harness overhead per replayed event (bump allocator preloaded)", "",
             "| program | events | harness instr/event | bump instr/event | ns/event (harness + bump) |",
             "|---|---:|---:|---:|---:|"]
    for w in WORKLOADS:
        h = result["programs"][w]["harness"]
        lines.append(f"| {w} | {h['events']:,} | {h['harness_instr_per_event']:.2f} | {h['bump_instr_per_event']:.2f} | "
                     f"{h['ns_per_event_median']:.1f} |")
    names = []
    for r in records:
        if r["allocator"] not in names:
            names.append(r["allocator"])
    by = {(r["trace_name"], r["allocator"]): r for r in records}
    f = lambda v, d=1: "—" if v is None else f"{v:.{d}f}"
    lines += ["", "## Instructions per malloc / per free (callgrind, inclusive)", "",
              "| allocator | " + " | ".join(WORKLOADS) + " |", "|---|" + "---:|" * len(WORKLOADS)]
    for n in names:
        cells = []
        for w in WORKLOADS:
            r = by.get((w, n))
            cells.append("—" if r is None else f"{f(r['instr_per_malloc'])} / {f(r['instr_per_free'])}"
                         + ("" if r["status"] == "ok" else f" ({r['status']})"))
        lines.append(f"| {n} | " + " | ".join(cells) + " |")
    lines += ["", "## Wall time of the replay (median timed region, ms; × glibc; × mimalloc)", "",
              "| allocator | " + " | ".join(WORKLOADS) + " |", "|---|" + "---:|" * len(WORKLOADS)]
    for n in names:
        cells = []
        for w in WORKLOADS:
            r, m = by.get((w, n)), by.get((w, "mimalloc"))
            if r is None or r["wall_s"] is None:
                cells.append("—")
                continue
            vm = f"{r['wall_s'] / m['wall_s']:.2f}" if m and m.get("wall_s") else "—"
            cells.append(f"{r['wall_s'] * 1e3:.1f} ms, {f(r['wall_ratio_glibc'], 2)}×g, {vm}×mi")
        lines.append(f"| {n} | " + " | ".join(cells) + " |")
    if not a.skip_live:
        lines += ["", "## Wall time of the real program (median, s; × glibc; × mimalloc; stdout = glibc's)", "",
                  "| allocator | " + " | ".join(WORKLOADS) + " |", "|---|" + "---:|" * len(WORKLOADS)]
        live = {(w, r["allocator"]): r for w in WORKLOADS for r in result["programs"][w]["live"]}
        for n in names:
            cells = []
            for w in WORKLOADS:
                r, m = live.get((w, n)), live.get((w, "mimalloc"))
                if r is None or r["wall_s"] is None:
                    cells.append("—" if r is None else r["status"])
                    continue
                vm = f"{r['wall_s'] / m['wall_s']:.2f}" if m and m.get("wall_s") else "—"
                same = {True: "same", False: "DIFF", None: "—"}[r["stdout_matches_glibc"]]
                cells.append(f"{r['wall_s']:.3f} s, {f(r['wall_ratio_glibc'], 2)}×g, {vm}×mi, {same}")
            lines.append(f"| {n} | " + " | ".join(cells) + " |")
    text = "\n".join(lines) + "\n"
    open(os.path.join(a.out, "figures.md"), "w").write(text)
    print(text)


main()
