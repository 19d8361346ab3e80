#!/usr/bin/env python3
"""What recording costs in instructions per event, under callgrind: on the
program's threads (the hot path) and on the agent's writer, separately. A
busy machine does not change these figures, as it changes wall times
(bench/record-overhead.py).

For each workload, the program runs under callgrind natively and with the
agent preloaded (stacks off, then 8 frames), with --separate-threads=yes:

  hot path  (program threads' instructions - the native run's
             - writer work they did: hl_finish_locked, hl_writer_help) / event
  writer    (the writer thread's instructions + that writer work) / event

The chunk caps are raised (HEAPLAB_RECORD_RING_KB) so that no producer waits
for the writer: callgrind runs one thread at a time, and a producer that
waits would do writer work on its own thread. The flush interval is raised
(HEAPLAB_RECORD_FLUSH_MS) so that rounds come when a thread has
4 * block_events bytes of rows waiting, as in a native run: under callgrind
a program runs ~50x slower, and the 200 ms flush would cut its rows into
blocks far smaller than natively, which zstd takes at more instructions a
byte and compresses less. Inputs are smaller than the
wall-time benchmark's (callgrind is ~50x slower): a few minutes in all.

  bench/record-callgrind.py
  bench/record-callgrind.py --workloads churn,prodcons --depths 0
"""
import argparse
import glob
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

from heaplab_layout import LAYOUT

ROOT = LAYOUT.root
AGENT = LAYOUT.lib("libheaplab-record.so")
DUMP = LAYOUT.bin("hltrace-dump")
HEAPLAB = LAYOUT.heaplab
PROGS = {"churn": ("churn.c", [], ["1000000"]), "prodcons": ("prodcons.c", ["-pthread"], ["200000"])}
BUNDLED = ["perl-wc", "make-n", "python"]
ENV = {"PERL_HASH_SEED": "0", "PERL_PERTURB_KEYS": "0", "PYTHONHASHSEED": "0", "PYTHONMALLOC": "malloc",
       "LC_ALL": "C"}


def command(name, out):
    if name in PROGS:
        src, flags, args = PROGS[name]
        exe = out / name
        subprocess.run([os.environ.get("CC", "cc"), "-O2", "-o", str(exe), str(ROOT / "bench/progs" / src)] + flags,
                       check=True)
        return [str(exe)] + args, None
    line = subprocess.run([str(HEAPLAB), "workloads", name, "--cache", str(out / "inputs")], check=True,
                          capture_output=True, text=True).stdout.split()
    while line and re.match(r"^[A-Z_][A-Z0-9_]*=", line[0]):
        line.pop(0)  # ENV has them
    stdin = None
    if "<" in line:
        stdin = line[line.index("<") + 1]
        line = line[:line.index("<")]
    exe = shutil.which(line[0]) or line[0]
    if "/shims/" in exe and Path("/usr/bin", line[0]).exists():
        exe = str(Path("/usr/bin", line[0]))
    return [exe] + line[1:], stdin


def callgrind(argv, stdin, out_file, extra):
    for f in glob.glob(f"{out_file}*"):
        os.unlink(f)
    e = dict(os.environ)
    e.pop("LD_PRELOAD", None)
    e.update(ENV)
    e.update(extra)
    with open(stdin or os.devnull, "rb") as inp:
        subprocess.run(["valgrind", "--tool=callgrind", "--separate-threads=yes",
                        f"--callgrind-out-file={out_file}"] + argv, env=e, stdin=inp,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
    return sorted(glob.glob(f"{out_file}-*"))


def total(f):
    for line in open(f, errors="replace"):
        if line.startswith("totals:"):
            return int(line.split()[1])
    return 0


def inclusive(f, fn):
    out = subprocess.run(["callgrind_annotate", "--inclusive=yes", "--threshold=100", f], capture_output=True,
                         text=True).stdout
    best = 0
    for line in out.splitlines():
        m = re.match(r"\s*([\d,]+)\s.*:" + fn + r"\b", line)
        if m:
            best = max(best, int(m.group(1).replace(",", "")))
    return best


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--workloads", default=",".join(list(PROGS) + BUNDLED),
                    help="comma-separated, of: " + ", ".join(list(PROGS) + BUNDLED))
    ap.add_argument("--depths", default="0,8", help="stack depths to measure (default 0,8)")
    ap.add_argument("--agent", default=str(AGENT), help="the agent to measure (default: this tree's)")
    ap.add_argument("--out", default=str(ROOT / "out/bench/record-callgrind"), help="scratch directory")
    a = ap.parse_args()
    if not shutil.which("valgrind"):
        sys.exit("valgrind is not installed")
    agent = Path(a.agent).resolve()
    for need in (agent, DUMP, HEAPLAB):
        if not need.exists():
            sys.exit(f"{need} is not built: run `make` first")
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    print(f"{'workload':<9} {'stacks':>6} {'events':>10} {'thr':>3} {'native':>7} {'hot path':>9} "
          f"{'x prog':>7} {'writer':>7} {'(drain)':>8} {'B/event':>8}   (instructions per event)")
    for name in a.workloads.split(","):
        argv, stdin = command(name, out)
        nat = sum(total(f) for f in callgrind(argv, stdin, out / f"{name}-native.cg", {}))
        for depth in a.depths.split(","):
            trace = out / f"{name}-{depth}.hltrace"
            for f in glob.glob(f"{trace}*"):
                os.unlink(f)
            files = callgrind(argv, stdin, out / f"{name}-{depth}.cg",
                              {"LD_PRELOAD": str(agent), "HEAPLAB_RECORD_OUT": str(trace),
                               "HEAPLAB_RECORD_STACK_DEPTH": depth, "HEAPLAB_RECORD_RING_KB": "262144",
                               "HEAPLAB_RECORD_RING_TOTAL_MB": "1024", "HEAPLAB_RECORD_FLUSH_MS": "600000"})
            prog = writer = drained = 0
            for f in files:
                t = total(f)
                if "writer_main" in open(f, errors="replace").read():
                    writer += t
                else:
                    x = inclusive(f, "hl_finish_locked") + inclusive(f, "hl_writer_help")
                    prog += t - x
                    drained += x
            # valgrind's launcher is preloaded too and execs the tool: the
            # program's trace is the largest of the exec chain
            tr = max(glob.glob(f"{trace}*"), key=os.path.getsize)
            kv = dict(x.split("=", 1) for x in subprocess.run([str(DUMP), "--counts", tr], check=True,
                                                              capture_output=True, text=True).stdout.split())
            ev = int(kv["events"])
            print(f"{name:<9} {depth:>6} {ev:>10,} {kv['threads']:>3} {nat / ev:>7.1f} {(prog - nat) / ev:>+9.1f} "
                  f"{prog / nat:>7.2f} {(writer + drained) / ev:>7.1f} {drained / ev:>8.1f} "
                  f"{os.path.getsize(tr) / ev:>8.3f}", flush=True)


if __name__ == "__main__":
    main()
