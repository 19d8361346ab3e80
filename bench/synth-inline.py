#!/usr/bin/env python3
"""The synthesized allocator's header in a real rebuild from source (issue 15,
"inline use"), measured apart from the LD_PRELOAD form.

bench/progs/bignum.c is trained on (`heaplab record`, then `heaplab synth`
on input 1, 2000 steps, as bench/synth-vs-peers.py's x1) and then built
twice:

  plain    cc -O2 -DBIG_NOINLINE bignum.c        run with LD_PRELOAD=libNAME.so
                                                 (and glibc, mimalloc for scale)
  inline   cc -O2 -DBIG_NOINLINE -DSYNTH_H='"NAME.h"' -DSYNTH_NAME=NAME bignum.c libNAME.a
           the node's malloc (size known when compiling) and every free are
           NAME_malloc / NAME_free, the header's inline fast path; the limbs'
           calloc is the archive's calloc; -DBIG_NOINLINE keeps bignum's
           constructor and destructor functions in both, so that the rest of
           the program compiles the same and the counts differ by the
           allocator alone

and each run on held-out inputs:

  instructions  callgrind's total Ir of the whole program on input 3 (5000
                steps; the program's own work is the same in every form, so
                differences are the allocator's), and that difference per
                allocator call against the LD_PRELOAD form
  wall          median of --repeat runs of `bignum STEPS 1000` (--steps,
                default 200000: about 16 M allocator calls), the forms
                interleaved in each round; ratios against mimalloc and the
                LD_PRELOAD form measured in the same invocation (this machine
                is shared and loaded: absolute times mean little)
  stdout        every form's output must equal glibc's

  bench/synth-inline.py                      into out/synth-inline
  bench/synth-inline.py --repeat 7 --steps 400000 --json FILE
"""
import argparse
import hashlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

from heaplab_layout import LAYOUT, write_json

ROOT = str(LAYOUT.root)
HEAPLAB = str(LAYOUT.heaplab)
NATIVE = str(LAYOUT.native)
SRC = os.path.join(ROOT, "bench", "progs", "bignum.c")
MIMALLOC = "/usr/lib/x86_64-linux-gnu/libmimalloc.so.2"
NAME = "bn_inline"


def sh(args, env=None, stdout=subprocess.PIPE):
    e = dict(os.environ)
    e.pop("LD_PRELOAD", None)
    e.update(env or {})
    print("$ " + " ".join(args), file=sys.stderr, flush=True)
    r = subprocess.run(args, env=e, stdout=stdout, stderr=subprocess.PIPE)
    if r.returncode != 0:
        sys.stderr.write(r.stderr.decode(errors="replace"))
        raise SystemExit(f"failed ({r.returncode}): {' '.join(args)}")
    return r


def build(out):
    progs = os.path.join(out, "progs")
    os.makedirs(progs, exist_ok=True)
    plain = os.path.join(progs, "bignum")
    sh(["cc", "-O2", "-DBIG_NOINLINE", "-o", plain + ".tmp", SRC])
    os.replace(plain + ".tmp", plain)
    trace = os.path.join(out, "bignum-v1.hltrace")
    sh([HEAPLAB, "record", "-q", "--stack-depth", "0", "-o", trace, "--", plain, "2000"],
       stdout=subprocess.DEVNULL)
    d = os.path.join(out, "alloc", NAME)
    sh([HEAPLAB, "synth", trace, "-o", d, "--name", NAME, "--no-register"])
    inline = os.path.join(progs, "bignum-inline")
    sh(["cc", "-O2", "-DBIG_NOINLINE", f"-DSYNTH_H=\"{NAME}.h\"", f"-DSYNTH_NAME={NAME}", f"-I{d}",
        f"-I{os.path.join(NATIVE, 'alloc')}", f"-I{os.path.join(NATIVE, 'common')}",
        "-o", inline + ".tmp", SRC, os.path.join(d, f"lib{NAME}.a"), "-lpthread"])
    os.replace(inline + ".tmp", inline)
    so = os.path.join(d, f"lib{NAME}.so")
    # form: (argv0, LD_PRELOAD or None)
    forms = {"glibc": (plain, None), "mimalloc": (plain, MIMALLOC),
             "preload": (plain, so), "inline": (inline, None)}
    return forms, trace


def calls(exe, args):
    """The allocator calls of one run, from a recording of it."""
    with tempfile.TemporaryDirectory() as t:
        tr = os.path.join(t, "r.hltrace")
        sh([HEAPLAB, "record", "-q", "--stack-depth", "0", "-o", tr, "--", exe] + args,
           stdout=subprocess.DEVNULL)
        dump = sh([str(LAYOUT.bin("hltrace-dump")), tr]).stdout.decode(errors="replace")
    n = 0
    for line in dump.splitlines():
        w = line.split(None, 3)
        if len(w) >= 3 and w[0] == "event" and w[2] in ("malloc", "calloc", "realloc", "free"):
            n += 1
    return n


def irs(exe, pre, args):
    with tempfile.TemporaryDirectory() as t:
        outf = os.path.join(t, "cg.out")
        env = {"LD_PRELOAD": pre} if pre else {}
        r = sh(["valgrind", "--tool=callgrind", f"--callgrind-out-file={outf}", exe] + args,
               env=env)
        total = None
        with open(outf) as f:
            for line in f:
                if line.startswith("totals:") or line.startswith("summary:"):
                    total = int(line.split()[1])
        return total, hashlib.sha256(r.stdout).hexdigest()


def run(a):
    out = os.path.abspath(a.out)
    os.makedirs(out, exist_ok=True)
    forms, _ = build(out)
    res = {k: {"form": k} for k in forms}
    test = ["5000"]
    ncalls = calls(forms["glibc"][0], test)
    for k, (exe, pre) in forms.items():
        res[k]["instructions"], res[k]["stdout_sha"] = irs(exe, pre, test)
    big = [str(a.steps), "1000"]
    walls = {k: [] for k in forms}
    want = None
    for _ in range(a.repeat):
        for k, (exe, pre) in forms.items():
            e = dict(os.environ)
            e.pop("LD_PRELOAD", None)
            if pre:
                e["LD_PRELOAD"] = pre
            t0 = time.perf_counter()
            r = subprocess.run([exe] + big, env=e, stdout=subprocess.PIPE)
            walls[k].append(time.perf_counter() - t0)
            h = hashlib.sha256(r.stdout).hexdigest()
            if r.returncode != 0:
                raise SystemExit(f"{k}: exit {r.returncode}")
            if k == "glibc":
                want = h
            res[k]["big_stdout_same"] = res[k].get("big_stdout_same", True) and h == want
    for k in forms:
        res[k]["wall_s"] = statistics.median(walls[k])
        res[k]["walls_s"] = walls[k]
    summary = {"test_input": test, "calls_on_test_input": ncalls, "wall_input": big,
               "repeat": a.repeat, "load_before": os.getloadavg(), "forms": res}
    write_json(os.path.join(out, "inline.json"), summary)


def report(a):
    out = os.path.abspath(a.out)
    s = json.load(open(os.path.join(out, "inline.json")))
    f = s["forms"]
    n = s["calls_on_test_input"]
    print(f"bignum {' '.join(s['test_input'])} (held out; trained on 2000): {n} allocator calls; "
          f"wall: bignum {' '.join(s['wall_input'])}, median of {s['repeat']}, "
          f"load {s['load_before'][0]:.1f}\n")
    print(f"{'form':9} {'total Ir':>12} {'Ir - inline':>12} {'per call':>9} "
          f"{'wall s':>8} {'x mimalloc':>10} {'x preload':>9} {'stdout':>6}")
    for k in ("glibc", "mimalloc", "preload", "inline"):
        r = f[k]
        d = r["instructions"] - f["inline"]["instructions"]
        same = r["stdout_sha"] == f["glibc"]["stdout_sha"] and r.get("big_stdout_same", True)
        print(f"{k:9} {r['instructions']:12d} {d:12d} {d / n:9.2f} {r['wall_s']:8.3f} "
              f"{r['wall_s'] / f['mimalloc']['wall_s']:10.2f} "
              f"{r['wall_s'] / f['preload']['wall_s']:9.2f} {'same' if same else 'DIFF':>6}")
    print("\nIr - inline: the whole program's instructions beyond the inline form's; per call:"
          "\nthat over the test input's allocator calls.")
    if a.json:
        write_json(a.json, s)


def main():
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", default=os.path.join(ROOT, "out", "synth-inline"))
    p.add_argument("--repeat", type=int, default=5, help="wall runs per form (median)")
    p.add_argument("--steps", type=int, default=200000, help="steps of the wall-time input")
    p.add_argument("--report-only", action="store_true")
    p.add_argument("--json", help="write the summary to FILE")
    a = p.parse_args()
    if a.repeat < 1 or a.steps < 1:
        raise SystemExit("--repeat and --steps take a positive count")
    if not os.path.exists(HEAPLAB):
        raise SystemExit("build first: make build")
    if not a.report_only:
        run(a)
    report(a)


if __name__ == "__main__":
    main()
