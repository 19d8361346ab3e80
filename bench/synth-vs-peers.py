#!/usr/bin/env python3
"""Synthesized allocators against mimalloc, jemalloc, tcmalloc and glibc (issue 15),
measured as a new user would: trained on one run, checked on a run it never saw.

For each program, three inputs (1 and 2 train, 3 tests):

  x1    `heaplab synth` from input 1 alone
  x12   `heaplab synth` from inputs 1 and 2 (paper 002, Table 2)

both replayed on input 3 by `heaplab compare --counter vgcount` with the peers
in the same invocation (instructions per malloc and per free, median replay
wall time of --repeat runs, peak footprint), and the program itself run on
input 3 by `heaplab compare --live` (median wall time, peak RSS, stdout
identical to glibc's); for the C programs also a long live run, on an input
that runs 0.3-1 s (bignum 400000 550, jsonparse doc3 with 20 passes,
prodcons 2000000), where input 3 runs for milliseconds: a few allocators
get slower the longer a program runs. Every ratio is against mimalloc and glibc measured in
the same invocation: this machine is shared and loaded, so absolute wall
times mean little and ratios drift by some 10%.

Programs:
  perl-wc, make-n, python   the bundled workloads (`heaplab workloads`)
  bignum     bench/progs/bignum.c: cfrac-like bignum arithmetic, every result
             a new malloc; inputs 2000, 3000 and 5000 steps, so the test run's
             numbers grow to sizes the training runs never asked for
  jsonparse  bench/progs/jsonparse.c: a cJSON-like parse, walk, write and
             re-parse of generated documents (seeds 1, 2; 3 is four times larger)
  prodcons   bench/progs/prodcons.c: 2 producers, 2 consumers, every item
             freed by a thread that did not allocate it (50k, 80k, 200k items;
             long run 2M)

  bench/synth-vs-peers.py                               all six, into out/synth-vs-peers
  bench/synth-vs-peers.py --programs bignum,prodcons --repeat 5
  bench/synth-vs-peers.py --zoo                         also every zoo allocator (slow)
  bench/synth-vs-peers.py --report-only                 the tables of an earlier run
  bench/synth-vs-peers.py --json FILE                   the summary rows as JSON too

Goals (issue 15): instructions per malloc <= 12 and per free <= 10; replay
wall <= 0.8x mimalloc; live wall <= 0.95x mimalloc on the allocation-bound
programs (bignum, jsonparse, prodcons), <= 1.0x elsewhere; peak footprint
<= glibc's (ours: the exact bytes from the OS, glibc's: its peak RSS growth).
"""
import argparse
import json
import os
import subprocess
import sys

from heaplab_layout import LAYOUT, compare_records, write_json

ROOT = str(LAYOUT.root)
HEAPLAB = str(LAYOUT.heaplab)
PEERS = ["glibc", "jemalloc", "mimalloc", "tcmalloc"]
BUNDLED = ["perl-wc", "make-n", "python"]
PROGS = {  # built from bench/progs: (source, libs, inputs 1..3 and the long live run, as argv tails)
    "bignum": ("bignum.c", [], [["2000"], ["3000"], ["5000"], ["400000", "550"]]),
    "jsonparse": ("jsonparse.c", [], [["@doc1", "2"], ["@doc2", "2"], ["@doc3", "2"], ["@doc3", "20"]]),
    "prodcons": ("prodcons.c", ["-lpthread"], [["50000"], ["80000"], ["200000"], ["2000000"]]),
}
LONG = 4  # the long live run's input (the C programs only)
JSON_DOCS = {"@doc1": (3000, 1), "@doc2": (3000, 2), "@doc3": (12000, 3)}
ALLOC_BOUND = {"bignum", "jsonparse", "prodcons"}
SHORT = {"perl-wc": "perl", "make-n": "make", "python": "py", "bignum": "bn",
         "jsonparse": "js", "prodcons": "pc"}


def sh(args, env=None, quiet=False, stdout=None):
    e = dict(os.environ)
    e.pop("LD_PRELOAD", None)
    e.update(env or {})
    if not quiet:
        print("$ " + " ".join(args), file=sys.stderr, flush=True)
    if stdout is not None:
        r = subprocess.run(args, env=e, stdout=stdout, stderr=subprocess.PIPE, text=True)
    else:
        r = subprocess.run(args, env=e, capture_output=True, text=True)
    if r.returncode not in (0, 1):  # compare exits 1 when a cell failed: kept, reported
        sys.stderr.write((r.stdout or "") + (r.stderr or ""))
        raise SystemExit(f"failed ({r.returncode}): {' '.join(args)}")
    return r.stdout


def workload(name, variant, cache):
    line = sh([HEAPLAB, "workloads", name, "--variant", str(variant), "--cache", cache],
              quiet=True).split()
    env, argv = {}, []
    for w in line:
        k, eq, v = w.partition("=")
        if eq and not argv and k.isupper():
            env[k] = v
        else:
            argv.append(w)
    return env, argv


def program(prog, variant, out):
    """(env, argv) of a bench/progs program's input `variant`, built (and its
    input generated) under out/progs."""
    src, libs, inputs = PROGS[prog]
    d = os.path.join(out, "progs")
    os.makedirs(d, exist_ok=True)
    exe = os.path.join(d, prog)
    srcp = os.path.join(ROOT, "bench", "progs", src)
    if not os.path.exists(exe) or os.path.getmtime(exe) < os.path.getmtime(srcp):
        sh(["cc", "-O2", "-o", exe + ".tmp", srcp] + libs)
        os.replace(exe + ".tmp", exe)
    argv = [exe]
    for w in inputs[variant - 1]:
        if w in JSON_DOCS:
            doc = os.path.join(d, f"{w[1:]}.json")
            if not os.path.exists(doc):
                records, seed = JSON_DOCS[w]
                with open(doc + ".tmp", "w") as f:
                    sh([exe, "--gen", str(records), str(seed)], stdout=f)
                os.replace(doc + ".tmp", doc)
            w = doc
        argv.append(w)
    return {}, argv


def command(prog, variant, out):
    if prog in BUNDLED:
        return workload(prog, variant, os.path.join(out, "inputs"))
    return program(prog, variant, out)


def run(a):
    out = os.path.abspath(a.out)
    os.makedirs(out, exist_ok=True)
    env = {"HEAPLAB_SYNTH_REGISTRY": os.path.join(out, "registry")}
    others = ",".join(PEERS) + (",zoo" if a.zoo else "")
    for prog in a.programs:
        s = SHORT[prog]
        traces = {}
        for v in (1, 2, 3):
            t = os.path.join(out, f"{prog}-v{v}.hltrace")
            if not os.path.exists(t):
                wenv, argv = command(prog, v, out)
                sh([HEAPLAB, "record", "-q", "--stack-depth", "0", "-o", t, "--"] + argv, env=wenv)
            traces[v] = t
        for name, ts in ((f"{s}_x1", [traces[1]]), (f"{s}_x12", [traces[1], traces[2]])):
            sh([HEAPLAB, "synth"] + ts + ["-o", os.path.join(out, "alloc", name), "--name", name],
               env=env)
        sh([HEAPLAB, "compare", traces[3], "--allocators", f"{s}_x1,{s}_x12,{others}",
            "--counter", "vgcount", "--repeat", str(a.repeat), "--json",
            os.path.join(out, f"{prog}-replay.json")], env=env)
        wenv, argv = command(prog, 3, out)
        live = ["--env", "MAKEFLAGS=", "--env", "MAKELEVEL="]
        for k, v in wenv.items():
            live += ["--env", f"{k}={v}"]
        sh([HEAPLAB, "compare", "--live", "--allocators", f"{s}_x1,{s}_x12,{','.join(PEERS)}",
            "--repeat", str(a.repeat), "--no-instructions", "--json",
            os.path.join(out, f"{prog}-live.json")] + live + ["--"] + argv, env=env)
        if prog in PROGS and not a.no_long:
            # input 3 runs for milliseconds, where start-up and noise are much of
            # a run; the long run (0.3-1 s) shows how an allocator holds up
            _, argv = command(prog, LONG, out)
            sh([HEAPLAB, "compare", "--live", "--allocators", f"{s}_x1,{s}_x12,{','.join(PEERS)}",
                "--repeat", str(a.repeat), "--no-instructions", "--json",
                os.path.join(out, f"{prog}-live-long.json"), "--"] + argv, env=env)


def load(path):
    if not os.path.exists(path):
        return {}
    return {r["allocator"]: r for r in compare_records(path)}


def ratio(a, b):
    return None if a is None or b in (None, 0) else a / b


def fmt(v, spec):
    return "-" if v is None else format(v, spec)


def report(a):
    out = os.path.abspath(a.out)
    rows, goals = [], []
    print("Replay of input 3 (never seen in training) and the program itself on input 3;")
    print("ratios against mimalloc (xmi) and glibc (xgl) measured in the same invocation.")
    print("footprint: ours exact (heaplab_alloc_stats), others' peak RSS growth; xgl against")
    print("glibc's peak RSS growth. Live: median wall; stdout compared with glibc's.\n")
    head = (f"{'program':9} {'allocator':9} {'ins/malloc':>10} {'ins/free':>8} {'replay xmi':>10} "
            f"{'xgl':>5} {'foot MiB':>8} {'foot xgl':>8} {'live xmi':>8} {'xgl':>5} "
            f"{'RSS xgl':>7} {'stdout':>6} {'long xmi':>8}")
    print(head)
    print("-" * len(head))
    for prog in a.programs:
        s = SHORT[prog]
        rp = load(os.path.join(out, f"{prog}-replay.json"))
        lv = load(os.path.join(out, f"{prog}-live.json"))
        ll = load(os.path.join(out, f"{prog}-live-long.json"))
        llm = ll.get("mimalloc", {})
        if not rp:
            continue
        g, m = rp.get("glibc", {}), rp.get("mimalloc", {})
        lg, lm = lv.get("glibc", {}), lv.get("mimalloc", {})
        names = [f"{s}_x1", f"{s}_x12"] + PEERS
        if a.zoo:
            names += sorted(n for n in rp if n not in names)
        for n in names:
            x, y = rp.get(n), lv.get(n, {})
            if not x:
                continue
            foot = x.get("peak_footprint_bytes") if x.get("footprint_source") == "heaplab_alloc_stats" \
                else x.get("peak_rss_growth_bytes")
            row = {
                "program": prog, "allocator": n, "mine": n.startswith(s + "_"),
                "instr_per_malloc": x.get("instr_per_malloc"),
                "instr_per_free": x.get("instr_per_free"),
                "replay_wall_s": x.get("wall_s"),
                "replay_x_mimalloc": ratio(x.get("wall_s"), m.get("wall_s")),
                "replay_x_glibc": ratio(x.get("wall_s"), g.get("wall_s")),
                "footprint_bytes": foot,
                "footprint_x_glibc": ratio(foot, g.get("peak_rss_growth_bytes")),
                "live_wall_s": y.get("wall_s"),
                "live_x_mimalloc": ratio(y.get("wall_s"), lm.get("wall_s")),
                "live_x_glibc": ratio(y.get("wall_s"), lg.get("wall_s")),
                "live_rss_x_glibc": ratio(y.get("peak_rss_bytes"), lg.get("peak_rss_bytes")),
                "stdout_matches_glibc": y.get("stdout_matches_glibc"),
                "long_live_wall_s": ll.get(n, {}).get("wall_s"),
                "long_live_x_mimalloc": ratio(ll.get(n, {}).get("wall_s"), llm.get("wall_s")),
                "long_stdout_matches_glibc": ll.get(n, {}).get("stdout_matches_glibc"),
                "status": x.get("status"),
            }
            rows.append(row)
            print(f"{prog:9} {n:9} {fmt(row['instr_per_malloc'], '10.1f')} "
                  f"{fmt(row['instr_per_free'], '8.1f')} {fmt(row['replay_x_mimalloc'], '10.2f')} "
                  f"{fmt(row['replay_x_glibc'], '5.2f')} "
                  f"{fmt(foot and foot / 1048576, '8.2f')} {fmt(row['footprint_x_glibc'], '8.2f')} "
                  f"{fmt(row['live_x_mimalloc'], '8.2f')} {fmt(row['live_x_glibc'], '5.2f')} "
                  f"{fmt(row['live_rss_x_glibc'], '7.2f')} "
                  f"{'-' if row['stdout_matches_glibc'] is None else ('same' if row['stdout_matches_glibc'] else 'DIFF'):>6} "
                  f"{fmt(row['long_live_x_mimalloc'], '8.2f')}"
                  + ("" if row["long_stdout_matches_glibc"] in (None, True) else " DIFF")
                  + ("" if x.get("status") == "ok" else f"  {x.get('status')}: {x.get('error')}"))
            if row["mine"]:
                live_goal = 0.95 if prog in ALLOC_BOUND else 1.0
                for what, val, goal in (
                        ("instructions per malloc", row["instr_per_malloc"], 12),
                        ("instructions per free", row["instr_per_free"], 10),
                        ("replay wall / mimalloc", row["replay_x_mimalloc"], 0.8),
                        ("live wall / mimalloc", row["live_x_mimalloc"], live_goal),
                        ("long live wall / mimalloc", row["long_live_x_mimalloc"], live_goal),
                        ("footprint / glibc", row["footprint_x_glibc"], 1.0)):
                    goals.append((prog, n, what, val, goal,
                                   "met" if val is not None and val <= goal else "MISSED"))
        print()
    if goals:
        print("goals (issue 15)")
        for prog, n, what, val, goal, verdict in goals:
            # a value that rounds to the goal but misses it gets the digits
            # that show by how much (10.004 instructions a free, not "10.00")
            f = '7.4f' if val is not None and val > goal and round(val, 2) <= goal else '7.2f'
            print(f"  {prog:9} {n:9} {what:24} {fmt(val, f)}  <= {goal:<5} {verdict}")
    if a.json:
        write_json(a.json, rows)


def main():
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", default=os.path.join(ROOT, "out", "synth-vs-peers"))
    p.add_argument("--programs", default=",".join(BUNDLED + list(PROGS)))
    p.add_argument("--repeat", type=int, default=3, help="timing runs per cell (median)")
    p.add_argument("--zoo", action="store_true", help="also every zoo allocator (replay)")
    p.add_argument("--no-long", action="store_true",
                   help="skip the long live runs of the C programs (input 3 runs for milliseconds)")
    p.add_argument("--report-only", action="store_true")
    p.add_argument("--json", help="write the summary rows to FILE")
    a = p.parse_args()
    a.programs = [x for x in a.programs.split(",") if x]
    for x in a.programs:
        if x not in SHORT:
            raise SystemExit(f"no program {x!r}; this benchmark knows {', '.join(SHORT)}")
    if not os.path.exists(HEAPLAB):
        raise SystemExit("build first: make build")
    if not a.report_only:
        run(a)
    report(a)


if __name__ == "__main__":
    main()
