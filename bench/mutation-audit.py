#!/usr/bin/env python3
"""The mutation audit of issue 17: damaged traces through every reader.

Each base trace is mutated (truncated at and around every block boundary and
at random points, bit-flipped, torn, followed by junk), and every mutant is
given to every reader heaplab has: `stats` (table and JSON), `convert` (to
the dump, to .rep, to a trace), `compare`, `lab`, `synth`, `sim`,
`locality`, `segregate`, and the C side (`hltrace-dump`, `heaplab-replay`).
Each run is one of:

  crash    killed by a signal, or a Rust panic (exit 101, "panicked at")
  hang     still running after the time limit (killed)
  silent   exit 0 and nothing on stderr, although the mutant is not a whole
           trace: a result that looks clean and is not
  warned   exit 0 with a warning on stderr (allowed only where the command
           documents it: stats prints the profile of what it read, convert
           --partial); counted, listed with --verbose
  refused  a non-zero exit with a message: what a damaged trace must get
  clean    exit 0 on a mutant that is itself a whole trace (a cut that fell
           just after an END of exec, say), judged by an independent oracle:
           the Python reader tools/hltrace.py

The goal is 0 crashes, 0 hangs and 0 silent. `--quick` (run by make test:
scripts/test.sh) takes four vectors and a few mutants each; without it, every
vector, a recorded program and a trace with references, and many mutants.
(--quick: four vectors, 12 mutants each, the commands that need no valgrind.)

    python3 bench/mutation-audit.py --quick
    python3 bench/mutation-audit.py --mutants 60 --json out/bench/mutation-audit.json

Exit status: 1 when any crash, hang or silent success was seen.
Not a benchmark of speed: wall times here mean nothing.
"""
import argparse
import json
import os
import random
import shutil
import struct
import subprocess
import sys
import tempfile
import time

from heaplab_layout import LAYOUT

ROOT = str(LAYOUT.root)
sys.path.insert(0, os.path.join(ROOT, "tools"))
import hltrace  # noqa: E402  (the independent reader, the oracle)

HEAPLAB = str(LAYOUT.heaplab)
DUMP = str(LAYOUT.bin("hltrace-dump"))
REPLAY = str(LAYOUT.bin("heaplab-replay"))
VECTORS = os.path.join(ROOT, "testdata/vectors")


def whole(path):
    """True when the independent reader reads the file to an END block and
    the file ends there: a trace that a reader may accept cleanly."""
    try:
        items = list(hltrace.read(path))
    except Exception:  # any failure of the oracle: not whole
        return False
    return bool(items) and items[-1][0] == "end"


def blocks(b):
    """Offsets of the block headers (a good trace's layout)."""
    at, out = 16, []
    while at + 24 <= len(b):
        if b[at:at + 4] != b"HLBK":
            break
        stored = struct.unpack_from("<I", b, at + 8)[0]
        out.append(at)
        at += 24 + stored
    return out, at


def mutants(data, n, rng):
    """(name, bytes) pairs: n of them at most, of every kind."""
    starts, end = blocks(data)
    out = []
    # truncations: at every block boundary (the end of the file excepted),
    # around it, and at random points
    cuts = set()
    for s in starts[1:]:
        for d in (0, 1, 7, 23):
            if 0 < s + d < len(data):
                cuts.add(s + d)
    cuts.update(rng.randrange(1, len(data)) for _ in range(4))
    for c in sorted(cuts):
        out.append(("cut@%d" % c, data[:c]))
    # bit flips
    for _ in range(max(4, n // 4)):
        p = rng.randrange(len(data))
        bit = rng.randrange(8)
        b = bytearray(data)
        b[p] ^= 1 << bit
        out.append(("flip@%d.%d" % (p, bit), bytes(b)))
    # torn: a write lost inside a block (the rest of the file follows a gap),
    # and a block cut short with a later block after it
    for _ in range(3):
        p = rng.randrange(17, len(data))
        q = min(len(data), p + rng.randrange(1, 64))
        out.append(("torn@%d-%d" % (p, q), data[:p] + data[q:]))
    if len(starts) > 2:
        i = rng.randrange(1, len(starts) - 1)
        mid = starts[i] + rng.randrange(1, 24)
        out.append(("torn-block@%d" % mid, data[:mid] + data[starts[i + 1]:]))
    # junk after the end
    out.append(("junk-random", data + bytes(rng.randrange(256) for _ in range(rng.randrange(1, 64)))))
    out.append(("junk-text", data + b"garbage after the end\n"))
    out.append(("junk-block", data + data[starts[-1]:end] if starts else data + b"x"))
    out.append(("junk-copy", data + data))
    rng.shuffle(out)
    # keep every kind: the first cuts, flips, torn, junk up to n
    kinds = {}
    for name, b in out:
        kinds.setdefault(name.split("@")[0].split("-")[0], []).append((name, b))
    picked = []
    while len(picked) < n and any(kinds.values()):
        for k in sorted(kinds):
            if kinds[k] and len(picked) < n:
                picked.append(kinds[k].pop())
    return picked


def readers(quick, work, has_valgrind):
    """(name, argv builder, a warning on exit 0 is allowed) for every reader."""
    def hl(*a):
        return lambda t: [HEAPLAB] + [x.replace("{T}", t).replace("{W}", work) for x in a]
    r = [
        ("stats", hl("stats", "{T}"), True),
        ("stats-json", hl("stats", "{T}", "--json"), True),
        ("convert-txt", hl("convert", "{T}", "{W}/out.txt"), False),
        ("convert-rep", hl("convert", "{T}", "{W}/out.rep"), False),
        ("convert-trace", hl("convert", "{T}", "{W}/out.hltrace"), False),
        ("compare", hl("compare", "{T}", "--allocators", "glibc", "--no-instructions",
                       "--repeat", "1", "--jobs", "1"), False),
        ("lab", hl("lab", "{T}", "--allocators", "glibc", "--repeat", "1", "--jobs", "1"), False),
        ("hltrace-dump", lambda t: [DUMP, t], False),
        ("heaplab-replay", lambda t: [REPLAY, t], True),
    ]
    if not quick:
        r += [
            ("synth", hl("synth", "{T}", "-o", "{W}/synth", "--name", "audit"), False),
            ("sim", hl("sim", "{T}", "--format", "hltrace"), False),
            ("compare-check", hl("compare", "{T}", "--allocators", "firstfit", "--no-instructions",
                                 "--repeat", "1", "--jobs", "1"), False),
        ]
        if has_valgrind:
            r += [
                ("locality", hl("locality", "{T}", "--allocators", "firstfit", "--json", "{W}/loc.json"), False),
                ("segregate", hl("segregate", "--train", "{T}", "--threshold", "{T}", "--test", "{T}",
                                 "--out", "{W}/seg"), False),
            ]
    return r


def classify(proc_rc, out, err, timed_out, ok_whole, warn_ok):
    if timed_out:
        return "hang"
    if proc_rc < 0 or proc_rc == 101 or "panicked at" in err or "AddressSanitizer" in err:
        return "crash"
    if proc_rc == 0:
        if ok_whole:
            return "clean"
        if err.strip():
            return "warned" if warn_ok else "silent"
        return "silent"
    return "refused"


def run(argv, env, timeout):
    try:
        p = subprocess.run(argv, stdin=subprocess.DEVNULL, capture_output=True, env=env,
                           timeout=timeout)
        return p.returncode, p.stdout.decode("utf-8", "replace"), p.stderr.decode("utf-8", "replace"), False
    except subprocess.TimeoutExpired as e:
        return -9, (e.stdout or b"").decode("utf-8", "replace"), (e.stderr or b"").decode("utf-8", "replace"), True


def record_bases(work, refs):
    """A recorded perl run (and, with valgrind, one with references)."""
    out = []
    t = os.path.join(work, "perl.hltrace")
    prog = ["perl", "-e", 'my %h; for my $i (1..3000) { $h{$i} = "x" x ($i % 97) } print scalar(keys %h), "\\n"']
    p = subprocess.run([HEAPLAB, "record", "-o", t, "--"] + prog, capture_output=True)
    if p.returncode == 0 and os.path.exists(t):
        out.append(("perl", t))
    if refs:
        r = os.path.join(work, "refs.hltrace")
        p = subprocess.run([HEAPLAB, "record", "--refs", "-o", r, "--"] + prog, capture_output=True)
        if p.returncode == 0 and os.path.exists(r):
            out.append(("perl-refs", r))
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="the small set make test runs")
    ap.add_argument("--mutants", type=int, default=40, help="mutants per base trace (default 40)")
    ap.add_argument("--seed", type=int, default=17)
    ap.add_argument("--timeout", type=float, default=60.0, help="seconds before a run counts as a hang")
    ap.add_argument("--json", help="write the counts and every bad run here")
    ap.add_argument("--verbose", action="store_true", help="list warned runs too")
    a = ap.parse_args()
    for p in (HEAPLAB, DUMP, REPLAY):
        if not os.path.exists(p):
            sys.exit("mutation-audit: %s is not built (make build)" % p)
    rng = random.Random(a.seed)
    work = tempfile.mkdtemp(prefix="heaplab-audit-")
    os.chmod(work, 0o700)
    env = dict(os.environ)
    env.pop("LD_PRELOAD", None)
    env["HEAPLAB_SYNTH_REGISTRY"] = os.path.join(work, "registry")
    has_valgrind = shutil.which("valgrind") is not None
    try:
        if a.quick:
            bases = [(n, os.path.join(VECTORS, n + ".hltrace"))
                     for n in ("basic", "exec-continue", "many-zstd", "fork-child")]
            per_base = 12
        else:
            bases = [(f[:-8], os.path.join(VECTORS, f)) for f in sorted(os.listdir(VECTORS))
                     if f.endswith(".hltrace") and whole(os.path.join(VECTORS, f))]
            bases += record_bases(work, has_valgrind)
            per_base = a.mutants
        rs = readers(a.quick, work, has_valgrind)
        counts = {name: {k: 0 for k in ("runs", "clean", "refused", "warned", "silent", "crash", "hang")}
                  for name, _, _ in rs}
        bad, warned = [], []
        mut_dir = os.path.join(work, "mutants")
        os.mkdir(mut_dir)
        n_mutants = 0
        t0 = time.time()
        # Each reader must accept every base trace as it is: otherwise a
        # "refused" below could be a wrong command line, not a detection.
        core = {"stats", "stats-json", "convert-txt", "convert-rep", "convert-trace", "compare",
                "lab", "hltrace-dump", "heaplab-replay", "compare-check"}
        baseline_bad = []
        for base, path in bases:
            for rname, argv, _ in rs:
                if rname in core or base.endswith("refs"):
                    rc, _, err, _ = run(argv(path), env, a.timeout)
                    if rc != 0:
                        baseline_bad.append("%s on %s: exit %d %s" % (rname, base, rc, err.strip()[-200:]))
        for b in baseline_bad:
            print("BASELINE: %s" % b)
        for base, path in bases:
            data = open(path, "rb").read()
            for mname, mbytes in mutants(data, per_base, rng):
                n_mutants += 1
                mpath = os.path.join(mut_dir, "%s.%s.hltrace" % (base, mname))
                with open(mpath, "wb") as f:
                    f.write(mbytes)
                ok_whole = whole(mpath)
                for rname, argv, warn_ok in rs:
                    for leftover in ("out.txt", "out.rep", "out.hltrace"):
                        p = os.path.join(work, leftover)
                        if os.path.exists(p):
                            os.remove(p)
                    rc, out, err, timed_out = run(argv(mpath), env, a.timeout)
                    c = classify(rc, out, err, timed_out, ok_whole, warn_ok)
                    counts[rname]["runs"] += 1
                    counts[rname][c] += 1
                    rec = {"base": base, "mutant": mname, "reader": rname, "class": c, "exit": rc,
                           "stderr": err.strip().splitlines()[-1:] if err.strip() else []}
                    if c in ("silent", "crash", "hang"):
                        bad.append(rec)
                    elif c == "warned":
                        warned.append(rec)
        total = {k: sum(c[k] for c in counts.values()) for k in next(iter(counts.values()))}
        width = max(len(n) for n in counts)
        print("mutation audit: %d base traces, %d mutants, %d runs (%.0f s)"
              % (len(bases), n_mutants, total["runs"], time.time() - t0))
        print("%-*s %6s %6s %8s %7s %7s %6s %5s" % (width, "reader", "runs", "clean", "refused",
                                                   "warned", "silent", "crash", "hang"))
        for name, c in list(counts.items()) + [("total", total)]:
            print("%-*s %6d %6d %8d %7d %7d %6d %5d" % (width, name, c["runs"], c["clean"], c["refused"],
                                                       c["warned"], c["silent"], c["crash"], c["hang"]))
        for r in bad + (warned if a.verbose else []):
            print("%s: %s %s on %s: exit %s %s" % (r["class"].upper(), r["reader"], r["mutant"],
                                                 r["base"], r["exit"], " ".join(r["stderr"])[:200]))
        if a.json:
            os.makedirs(os.path.dirname(os.path.abspath(a.json)), exist_ok=True)
            with open(a.json, "w") as f:
                json.dump({"bases": [b for b, _ in bases], "mutants": n_mutants, "counts": counts,
                           "total": total, "bad": bad, "warned": warned}, f, indent=1)
        sys.exit(1 if bad or baseline_bad else 0)
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
