#!/usr/bin/env python3
"""CPU time of the synthesized allocators against mimalloc and glibc, on the
runs bench/synth-vs-peers.py left in its --out directory (issue 15): its
input-3 traces, its x1 and x12 libraries, its programs and inputs.

On a shared, loaded machine wall time says little; the CPU time a process
(or the replay's timed region) spends is steadier, since a busy machine
mostly delays it. Each round runs every allocator once, in an order that
rotates from round to round, so that drifts of the machine fall on all of
them alike; the medians of --rounds rounds are compared:

  replay  heaplab-replay TRACE with LD_PRELOAD=lib: its timed_cpu_ns (the
          CPU time of the timed region, the allocator calls; the decoding of
          the trace is outside it)
  live    the program on input 3 with LD_PRELOAD=lib: user + system CPU time
          of the process (os.wait4), output discarded

  bench/synth-cpu.py --out out/svp3                   every program of that run
  bench/synth-cpu.py --out out/svp3 --programs bignum,perl-wc --rounds 11 --json FILE

glibc is the program without LD_PRELOAD; mimalloc is the system's
libmimalloc.so.2. The load average before and after is printed with the table.
"""
import argparse
import importlib.util
import json
import os
import statistics
import subprocess
import sys

from heaplab_layout import LAYOUT, write_json

ROOT = str(LAYOUT.root)
REPLAY = str(LAYOUT.bin("heaplab-replay"))
MIMALLOC = "/usr/lib/x86_64-linux-gnu/libmimalloc.so.2"

_spec = importlib.util.spec_from_file_location(
    "svp", os.path.join(ROOT, "bench", "synth-vs-peers.py"))
svp = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(svp)


def env_with(preload, extra=None):
    e = dict(os.environ)
    e.pop("LD_PRELOAD", None)
    e.update(extra or {})
    if preload:
        e["LD_PRELOAD"] = preload
    return e


def replay_cpu(trace, preload):
    r = subprocess.run([REPLAY, trace], env=env_with(preload), capture_output=True, text=True)
    if r.returncode != 0:
        raise SystemExit(f"replay of {trace} with {preload or 'glibc'} failed: {r.stderr}")
    return json.loads(r.stdout)["timed_cpu_ns"] / 1e9


def live_cpu(argv, wenv, preload):
    extra = dict(wenv)
    extra.update({"MAKEFLAGS": "", "MAKELEVEL": ""})
    with open(os.devnull, "wb") as null:
        p = subprocess.Popen(argv, env=env_with(preload, extra), stdout=null,
                             stderr=subprocess.DEVNULL)
        _, status, ru = os.wait4(p.pid, 0)
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"{' '.join(argv)} with {preload or 'glibc'} failed ({status})")
    return ru.ru_utime + ru.ru_stime


def loadavg():
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def main():
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", required=True, help="a bench/synth-vs-peers.py --out directory")
    p.add_argument("--programs", default=",".join(svp.SHORT))
    p.add_argument("--rounds", type=int, default=7)
    p.add_argument("--json", help="write the rows to FILE")
    a = p.parse_args()
    out = os.path.abspath(a.out)
    rows = []
    print(f"load average before: {loadavg()}")
    print(f"{'program':9} {'allocator':9} {'replay cpu ms':>13} {'x mimalloc':>10} "
          f"{'live cpu s':>10} {'x mimalloc':>10}")
    for prog in [x for x in a.programs.split(",") if x]:
        s = svp.SHORT[prog]
        trace = os.path.join(out, f"{prog}-v3.hltrace")
        if not os.path.exists(trace):
            print(f"{prog}: no {trace}; skipped", file=sys.stderr)
            continue
        allocs = {f"{s}_{v}": os.path.join(out, "alloc", f"{s}_{v}", f"lib{s}_{v}.so")
                  for v in ("x1", "x12")}
        allocs.update({"mimalloc": MIMALLOC, "glibc": None})
        names = list(allocs)
        wenv, argv = svp.command(prog, 3, out)
        rep = {n: [] for n in names}
        live = {n: [] for n in names}
        for r in range(a.rounds):
            order = names[r % len(names):] + names[:r % len(names)]
            for n in order:
                rep[n].append(replay_cpu(trace, allocs[n]))
                live[n].append(live_cpu(argv, wenv, allocs[n]))
        med = {n: (statistics.median(rep[n]), statistics.median(live[n])) for n in names}
        mi = med["mimalloc"]
        for n in names:
            row = {"program": prog, "allocator": n,
                   "replay_cpu_s": med[n][0], "replay_cpu_x_mimalloc": med[n][0] / mi[0],
                   "live_cpu_s": med[n][1], "live_cpu_x_mimalloc": med[n][1] / mi[1],
                   "replay_cpu_runs_s": rep[n], "live_cpu_runs_s": live[n]}
            rows.append(row)
            print(f"{prog:9} {n:9} {med[n][0] * 1e3:13.2f} {row['replay_cpu_x_mimalloc']:10.2f} "
                  f"{med[n][1]:10.3f} {row['live_cpu_x_mimalloc']:10.2f}", flush=True)
    print(f"load average after: {loadavg()}")
    if a.json:
        write_json(a.json, rows)


if __name__ == "__main__":
    main()
