#!/usr/bin/env python3
"""What recording references costs, and how fast the simulators run on them.

For each program, in one invocation, run by run interleaved (so that a busy
machine slows every variant alike):

  native     the program alone
  dhat       valgrind --tool=dhat (DHAT replaces malloc and watches every
             heap access: the closest existing tool, the issue's anchor)
  tool       valgrind --tool=heaplab --hl-out=/dev/null: heaplab's Valgrind
             tool alone (what runs in the program's process)
  record     heaplab record --refs: the tool plus the converter that attributes
             every reference to its object and writes the trace (zstd), the
             whole cost a user pays
  baseline   (with --baseline HEAPLAB) record with another heaplab binary, for
             a before/after figure from the same invocation

It reports the median wall time and CPU time (user + sys of every process the
variant ran) of each, the slowdown against native, and record's against
dhat's (the goal: at most half). Then, from the trace record wrote: bytes per
recorded reference (drmemtrace: about 31), and the simulators fed from the
stream: decoding alone, one direct-mapped cache, the 96-cache sweep in one
pass, the exact LRU page curve (crates/heaplab-refs/examples/sim_refs.rs).

This is a benchmark, not a test: minutes.

  bench/refs.py                                   3 runs, bignum and gawk-wc
  bench/refs.py --runs 5 --programs bignum --json out/bench/refs.json
  bench/refs.py --baseline /tmp/heaplab-before     a build from before a change, beside
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
import tempfile
import time
from pathlib import Path

from heaplab_layout import LAYOUT

ROOT = LAYOUT.root
HEAPLAB = LAYOUT.heaplab
VGLIB = LAYOUT.valgrind_lib
SIM = ROOT / "target/release/examples/sim_refs"


def program(name, scale, work):
    """(argv, stdin path or None, env) of a program to measure."""
    if name == "bignum":
        exe = work / "bignum"
        if not exe.exists():
            subprocess.run(["gcc", "-O2", "-o", str(exe), str(ROOT / "bench/progs/bignum.c")], check=True)
        return [str(exe), str(int(12000 * scale))], None, {}
    line = subprocess.run(
        [str(HEAPLAB), "workloads", name, "--scale", str(scale), "--cache", str(work / "inputs")],
        check=True, capture_output=True, text=True, cwd=ROOT,
    ).stdout.strip()
    env = {}
    words = shlex.split(line)
    while words and "=" in words[0] and not words[0].startswith("/"):
        k, v = words.pop(0).split("=", 1)
        env[k] = v
    stdin = None
    if "<" in words:
        i = words.index("<")
        stdin = words[i + 1]
        words = words[:i] + words[i + 2:]
    return words, stdin, env


def timed(argv, stdin, env, cwd):
    """Wall and CPU seconds of one run; the output is thrown away."""
    r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.monotonic()
    with open(stdin or os.devnull, "rb") as inp:
        p = subprocess.run(argv, stdin=inp, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                           env={**os.environ, **env}, cwd=cwd)
    wall = time.monotonic() - t0
    r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime)
    if p.returncode != 0:
        sys.exit(f"{argv[0]} failed ({p.returncode}): {p.stderr.decode(errors='replace')[-2000:]}")
    return wall, cpu, p.stderr.decode(errors="replace")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--programs", default="bignum,gawk-wc")
    ap.add_argument("--scale", type=float, default=0.25, help="input size (bignum: 12000 x scale steps)")
    ap.add_argument("--json")
    ap.add_argument("--baseline", metavar="HEAPLAB",
                    help="another heaplab binary whose record --refs runs beside (variant 'baseline')")
    a = ap.parse_args()
    if a.baseline and not Path(a.baseline).is_file():
        sys.exit(f"--baseline {a.baseline}: no such file (a heaplab binary, e.g. a copy of target/release/heaplab)")
    for need in (HEAPLAB, VGLIB / "heaplab-amd64-linux", SIM):
        if not need.exists():
            sys.exit(f"{need} is missing: run `make` and `cargo build --release -p heaplab-refs --examples`")
    work = Path(tempfile.mkdtemp(prefix="heaplab-bench-refs-"))
    try:
        results = []
        for name in a.programs.split(","):
            argv, stdin, env = program(name, a.scale, work)
            trace = work / f"{name}.hltrace"
            variants = {
                "native": argv,
                "dhat": ["valgrind", "-q", "--tool=dhat", "--dhat-out-file=/dev/null"] + argv,
                "tool": ["valgrind", "-q", "--tool=heaplab", "--hl-out=/dev/null"] + argv,
                "record": [str(HEAPLAB), "record", "--refs", "-o", str(trace), "--"] + argv,
            }
            if a.baseline:
                variants["baseline"] = [a.baseline, "record", "--refs", "-o", str(work / f"{name}-baseline.hltrace"),
                                        "--"] + argv
            venv = {"tool": {"VALGRIND_LIB": str(VGLIB)}}
            if a.baseline and "HEAPLAB_HOME" not in os.environ:
                # a copy of the binary outside the checkout finds its native files here
                venv["baseline"] = {"HEAPLAB_HOME": str(ROOT)}
            times = {k: [] for k in variants}
            last_record = ""
            for run in range(a.runs):
                for k, v in variants.items():
                    wall, cpu, err = timed(v, stdin, {**env, **venv.get(k, {})}, ROOT)
                    times[k].append((wall, cpu))
                    if k == "record":
                        last_record = err
                print(f"{name}: run {run + 1}/{a.runs} done", file=sys.stderr)
            med = {k: (statistics.median(w for w, _ in t), statistics.median(c for _, c in t)) for k, t in times.items()}
            nat_w, nat_c = med["native"]
            row = {"program": name, "argv": argv, "runs": a.runs}
            for k, (w, c) in med.items():
                row[k] = {"wall_s": w, "cpu_s": c, "slowdown_wall": w / nat_w, "slowdown_cpu": c / max(nat_c, 1e-3)}
            row["record_vs_dhat_wall"] = med["record"][0] / med["dhat"][0]
            row["record_vs_dhat_cpu"] = med["record"][1] / med["dhat"][1]
            if a.baseline:
                row["baseline_binary"] = a.baseline
                row["baseline_vs_dhat_wall"] = med["baseline"][0] / med["dhat"][0]
                row["baseline_vs_dhat_cpu"] = med["baseline"][1] / med["dhat"][1]
            m = re.search(r"([\d,]+) references \(([\d,]+) heap\), ([\d,?]+) instructions", last_record)
            refs = int(m.group(1).replace(",", "")) if m else 0
            size = trace.stat().st_size
            row["references"] = refs
            row["trace_bytes"] = size
            row["bytes_per_reference"] = size / refs if refs else None
            sim = subprocess.run([str(SIM), str(trace), "--json", str(work / "sim.json")], check=True,
                                 capture_output=True, text=True)
            row["simulators"] = json.loads((work / "sim.json").read_text())
            results.append(row)

            print(f"\n{name}: {' '.join(argv)}  ({refs:,} references, {size / 2**20:.1f} MiB trace, "
                  f"{row['bytes_per_reference']:.3f} B/reference)")
            print(f"  {'variant':<8} {'wall s':>8} {'cpu s':>8} {'slowdown wall':>14} {'slowdown cpu':>13}")
            for k in variants:
                r = row[k]
                print(f"  {k:<8} {r['wall_s']:>8.2f} {r['cpu_s']:>8.2f} {r['slowdown_wall']:>13.1f}x {r['slowdown_cpu']:>12.1f}x")
            print(f"  record / dhat: {row['record_vs_dhat_wall']:.2f} (wall), {row['record_vs_dhat_cpu']:.2f} (cpu); goal <= 0.5")
            if a.baseline:
                print(f"  baseline / dhat: {row['baseline_vs_dhat_wall']:.2f} (wall), {row['baseline_vs_dhat_cpu']:.2f} (cpu)")
            print("  simulators fed from the stream:")
            for s in row["simulators"]:
                print(f"    {s['pass']:<44} {s['mrefs_per_s_cpu']:>7.1f} M refs/s (cpu)")
        if a.json:
            Path(a.json).parent.mkdir(parents=True, exist_ok=True)
            Path(a.json).write_text(json.dumps(results, indent=2) + "\n")
            print(f"\nwrote {a.json}", file=sys.stderr)
    finally:
        # the recorded traces (gawk's is ~100 MB) are the benchmark's own scratch
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
