#!/usr/bin/env python3
"""What `heaplab stats` per call site costs on a big trace, against
heaptrack_print on the same program, in one invocation (issue 16's closing
figure: time and memory of stats with sites and the flame graph on a
100 M-event trace).

  bench/memory-stats.py                    churn with 20 M steps (~100 M events)
  bench/memory-stats.py --steps 2000000    a quick run (~10 M events)
  bench/memory-stats.py --json out/bench/memory-stats.json
  bench/memory-stats.py --steps 5000000 --baseline /path/to/older/heaplab
                        (also times an older build's stats on the same trace,
                        and checks that both give the same JSON)

bench/progs/churn.c is built with -g -O2 into a private scratch directory;
it is recorded once by `heaplab record` (8-frame stacks, the default) and
once by heaptrack (full stacks). Then, interleaved run by run so a busy
machine slows all alike (--runs, default 1):

  stats        heaplab stats TRACE --sites 20 (size classes and sites, one pass)
  stats+report heaplab stats TRACE --sites 20 --report DIR (adds the three
               flame graphs and memory over time: report.html)
  heaptrack_print  heaptrack_print FILE (its default text: peak, leaks,
               temporaries, top sites)

For each: wall time (median), CPU time (user + sys) and peak RSS (ru_maxrss
of the child), and the ratio to heaptrack_print. Both tools' totals
(allocations, temporaries, leaked bytes) are printed beside each other: the
figures compare only where the answers agree. Wall times on a shared machine
are noisy: the load average is printed next to them.
"""
import argparse
import json
import os
import re
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from heaplab_layout import LAYOUT, write_json

ROOT = Path(__file__).resolve().parent.parent


def timed(argv, **kw):
    """Runs argv; returns (wall s, cpu s, completed process). Peak RSS is
    taken apart (rss_of): RUSAGE_CHILDREN keeps the largest child so far."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t = time.monotonic()
    p = subprocess.run(argv, capture_output=True, **kw)
    wall = time.monotonic() - t
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    if p.returncode != 0:
        sys.exit(f"memory-stats: {argv[0]} failed ({p.returncode}):\n{p.stderr.decode(errors='replace')[-2000:]}")
    return wall, cpu, p


def rss_of(argv):
    """Peak RSS (KiB) of argv alone: a fork whose own RUSAGE_CHILDREN holds
    only that child."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        try:
            c = subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            ru = resource.getrusage(resource.RUSAGE_CHILDREN)
            os.write(w, f"{c.returncode} {ru.ru_maxrss}".encode())
        finally:
            os._exit(0)
    os.close(w)
    out = b""
    while True:
        b = os.read(r, 64)
        if not b:
            break
        out += b
    os.close(r)
    os.waitpid(pid, 0)
    code, kib = out.decode().split()
    if code != "0":
        sys.exit(f"memory-stats: {argv[0]} failed ({code}) when measuring its RSS")
    return int(kib)


def loadavg():
    return os.getloadavg()[0]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--steps", type=int, default=20_000_000, help="churn steps (20 M: ~100 M events)")
    ap.add_argument("--runs", type=int, default=1)
    ap.add_argument("--json", help="write the figures here (a temporary name, then renamed)")
    ap.add_argument("--baseline", help="an older heaplab binary to time beside this one (same trace, same runs)")
    a = ap.parse_args()
    heaplab = LAYOUT.heaplab
    for tool in ("heaptrack", "heaptrack_print", "cc"):
        if not shutil.which(tool):
            sys.exit(f"memory-stats: {tool} is not installed (scripts/setup.sh installs heaptrack)")
    with tempfile.TemporaryDirectory(prefix="heaplab-memstats-") as d:
        d = Path(d)
        prog = d / "churn"
        subprocess.run(["cc", "-g", "-O2", "-o", str(prog), str(ROOT / "bench/progs/churn.c")], check=True)
        trace = d / "churn.hltrace"
        wall, _, _ = timed([str(heaplab), "record", "-q", "-o", str(trace), "--", str(prog), str(a.steps)])
        print(f"recorded {trace.name}: {trace.stat().st_size / 1e6:.1f} MB in {wall:.1f} s", flush=True)
        wall, _, p = timed(["heaptrack", "-o", str(d / "ht"), str(prog), str(a.steps)], cwd=d)
        ht = next(d.glob("ht*.zst"), None) or next(d.glob("ht*"), None)
        print(f"heaptrack recorded {ht.name}: {ht.stat().st_size / 1e6:.1f} MB in {wall:.1f} s", flush=True)
        variants = {
            "stats": [str(heaplab), "stats", str(trace), "--sites", "20", "--json", str(d / "s.json")],
            "stats+report": [str(heaplab), "stats", str(trace), "--sites", "20", "--report", str(d / "rep")],
            "heaptrack_print": ["heaptrack_print", str(ht)],
        }
        if a.baseline:
            variants["stats (baseline)"] = [a.baseline, "stats", str(trace), "--sites", "20", "--json", str(d / "s0.json")]
        res = {k: {"wall": [], "cpu": [], "rss_kib": [], "load": []} for k in variants}
        outputs = {}
        for _ in range(a.runs):
            for k, argv in variants.items():
                load = loadavg()
                wall, cpu, p = timed(argv)
                outputs[k] = p.stdout.decode(errors="replace")
                res[k]["wall"].append(wall)
                res[k]["cpu"].append(cpu)
                res[k]["load"].append(load)
                res[k]["rss_kib"].append(rss_of(argv))
                print(f"  {k:16} {wall:7.1f} s wall {cpu:7.1f} s cpu (load {load:.1f})", flush=True)
        if a.baseline:
            docs = [json.loads((d / f).read_text()) for f in ("s.json", "s0.json")]
            for doc in docs:
                doc.pop("provenance", None)
                doc.pop("schema_version", None)
                for m in doc.get("memory", []):
                    m.pop("over_time", None)  # newer than some baselines
            same = docs[0] == docs[1]
            print(f"stats and the baseline's stats give {'the same' if same else 'DIFFERENT'} JSON", flush=True)
            if not same:
                sys.exit("memory-stats: the baseline's answers differ")
        s = json.loads((d / "s.json").read_text())["memory"][0]["totals"]
        hp = outputs["heaptrack_print"]
        def grab(pat):
            m = re.search(pat, hp)
            return m.group(1) if m else "?"
        totals = {
            "events": s["events"],
            "heaplab": {"allocations": s["allocations"], "temporary": s["temporary"], "leaked_bytes": s["leaked_bytes"],
                        "peak_bytes": s["peak_bytes"]},
            "heaptrack": {"allocations": grab(r"calls to allocation functions: (\d+)"),
                          "temporary": grab(r"temporary memory allocations: (\d+)"),
                          "leaked": grab(r"total memory leaked: (\S+)"),
                          "peak": grab(r"peak heap memory consumption: (\S+)")},
        }
        base = {m: statistics.median(res["heaptrack_print"][m]) for m in ("wall", "cpu", "rss_kib")}
        print(f"\n{s['events']:,} events; totals: {json.dumps(totals)}")
        print(f"{'':16} {'wall s':>8} {'cpu s':>8} {'peak RSS':>10}   ratio to heaptrack_print (wall, cpu, RSS)")
        table = {}
        for k, r in res.items():
            med = {m: statistics.median(r[m]) for m in ("wall", "cpu", "rss_kib")}
            table[k] = {**med, "load": r["load"], "ratio": {m: med[m] / base[m] for m in med}}
            print(f"{k:16} {med['wall']:8.1f} {med['cpu']:8.1f} {med['rss_kib'] / 1024:8.0f} MiB   "
                  f"{med['wall'] / base['wall']:.2f}x {med['cpu'] / base['cpu']:.2f}x {med['rss_kib'] / base['rss_kib']:.2f}x")
        print(f"load average (1 min) at the runs: {[round(x, 1) for r in res.values() for x in r['load']]}")
        if a.json:
            write_json(a.json, {"steps": a.steps, "totals": totals, "variants": table})


if __name__ == "__main__":
    main()
