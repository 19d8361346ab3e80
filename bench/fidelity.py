#!/usr/bin/env python3
"""How well a replay predicts the real program (issue 13): for each program,
`heaplab compare --live` (the program itself under each allocator) and
`heaplab compare` on its trace (the replay), in the same invocation, then per
allocator:

  live ×glibc     the program's wall time over glibc's (live)
  replay ×glibc   the replay's timed region over glibc's (replay)
  predicted       what the replay predicts for the live ratio: the program's
                  glibc time plus the replay's difference to glibc,
                  1 + (replay_a - replay_glibc) / live_glibc
                  (the replay measures the allocator's time alone; the program
                  also does its own work, which the allocator does not change
                  except through cache and page effects)
  error           replay ×glibc / live ×glibc - 1, and predicted / live - 1

and across the allocators, Spearman's rank correlation of wall time, live
against replay. The same figures in CPU time (user + system: the live
program's and the replay's timed region's, every thread's) follow each
program's line: on a machine shared with other work a run waits for a core
without using it, which wall time counts and CPU time does not.

Programs: the bundled workloads (`heaplab workloads`), bench/progs/prodcons.c
(4 threads, cross-thread frees) and two multithreaded Debian programs:
`git repack -a -d -f --threads=4` on a generated repository (pack-objects'
four delta-search threads allocate about 80 K objects and free each
other's; `git`) and `xz -T4` with small blocks (four threads, but only
about 350 allocations; `xz`, not run by default). Traces of programs with
several threads replay with their threads (`--threads recorded`, the
default), or serially with `--threads serial`, to compare the two.

This is a benchmark, not a test: it runs every program (runs + 1) times per
allocator. Wall times on a loaded machine are noisy: the JSON keeps every run
and the machine's load average beside each program.

  bench/fidelity.py                                  everything, into out/bench/fidelity
  bench/fidelity.py --programs prodcons,git,xz --runs 5 --threads serial
  bench/fidelity.py --programs prodcons --waits futex,spin   # how replay threads wait
  bench/fidelity.py --scale 0.3 --allocators glibc,jemalloc,firstfit,bsd
  bench/fidelity.py --programs prodcons:1,prodcons:2,prodcons:4,prodcons:8   # scaling
  bench/fidelity.py --programs perl-wc,make-n --time-modes plain,touch --runs 4

Each program line also gives the noise ceiling: Spearman between the
medians of the even and the odd live runs (and replay runs), per
allocator. Where the live runs do not agree with one another, no replay
can rank the allocators as the program does.

`prodcons:T` runs prodcons with T threads (1, or T/2 producer/consumer
pairs, each pair the same work). Given more than one, the report ends with
the scaling: each allocator's wall time at T threads over its time at the
fewest, live and replayed. On a machine with fewer cores than threads the
threads take turns: the figure then shows the cost of oversubscription and
of the allocators' locks, not parallel speed-up.
"""
import argparse
import json
import os
import random
import re
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile

from heaplab_layout import LAYOUT, compare_records, write_json

ROOT = str(LAYOUT.root)
HEAPLAB = str(LAYOUT.heaplab)
WORKLOADS = ["perl-wc", "make-n", "python", "sqlite", "gawk-wc"]
EXTRA = ["prodcons", "git"]
MORE = ["xz"]


def sh(cmd, **kw):
    return subprocess.run(cmd, check=True, capture_output=True, text=True, **kw)


def workload(name, scale, inputs):
    """A bundled workload's command: (env, argv, stdin)."""
    line = sh([HEAPLAB, "workloads", name, "--variant", "1", "--scale", str(scale), "--cache", inputs],
              cwd=ROOT).stdout.strip().splitlines()[0]
    env, argv, stdin = {}, [], None
    it = iter(shlex.split(line))
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


def text_input(path, mb):
    """Compressible text, the same every time (words from a fixed formula)."""
    if os.path.exists(path) and os.path.getsize(path) >= mb * 1000000:
        return path
    words = [f"w{(i * 7919) % 5003:x}" for i in range(5003)]
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        n, i = 0, 0
        while n < mb * 1000000:
            line = " ".join(words[(i * 31 + k * 17) % 5003] for k in range(12)) + "\n"
            f.write(line)
            n += len(line)
            i += 1
    os.replace(tmp, path)
    return path


def git_repo(path, scale):
    """A git repository made the same every time: 300 text files changed
    over 40 * scale commits (fast-import from a seeded generator)."""
    if os.path.isdir(os.path.join(path, ".git")):
        return path
    rng = random.Random(13)
    words = ["".join(rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(rng.randint(2, 9)))
             for _ in range(3000)]
    files = {f"src/f{i:03d}.txt": [" ".join(rng.choice(words) for _ in range(10)) for _ in range(150)]
             for i in range(300)}

    def data(b):
        return b"data %d\n" % len(b) + b + b"\n"
    stream = bytearray()
    for c in range(max(2, int(40 * scale))):
        for name in rng.sample(sorted(files), 60):
            lines = files[name]
            for _ in range(5):
                lines[rng.randrange(len(lines))] = " ".join(rng.choice(words) for _ in range(10))
        stream += b"commit refs/heads/main\ncommitter H <h@example.org> %d +0000\n" % (1700000000 + c)
        stream += data(b"commit %d" % c)
        for name in sorted(files):
            stream += b"M 100644 inline " + name.encode() + b"\n" + data(("\n".join(files[name]) + "\n").encode())
        stream += b"\n"
    tmp = tempfile.mkdtemp(prefix=".git-", dir=os.path.dirname(path))
    subprocess.run(["git", "init", "-q", tmp], check=True)
    subprocess.run(["git", "-C", tmp, "fast-import", "--quiet"], input=bytes(stream), check=True)
    os.rename(tmp, path)
    return path


def program(name, scale, work):
    inputs = os.path.join(work, "inputs")
    os.makedirs(inputs, exist_ok=True)
    if name in WORKLOADS:
        return workload(name, scale, inputs)
    if name == "prodcons" or name.startswith("prodcons:"):
        exe = os.path.join(work, "prodcons")
        if not os.path.exists(exe):
            sh(["cc", "-O2", "-pthread", "-o", exe, os.path.join(ROOT, "bench", "progs", "prodcons.c")])
        threads = name.split(":")[1] if ":" in name else "4"
        return {}, [exe, str(max(1000, int(200000 * scale))), threads], None
    if name == "git":
        if not shutil.which("git"):
            sys.exit("bench/fidelity.py: git is not installed (scripts/setup.sh installs it)")
        repo = git_repo(os.path.join(inputs, f"fidelity-git-x{scale}"), scale)
        # pack-objects (run by repack) searches deltas on four threads, which
        # allocate and free each other's objects; -f recomputes every delta on
        # each run, so every run does the same work; stdout stays empty (the
        # pack itself differs from run to run with the threads' scheduling)
        return {}, ["git", "-C", repo, "repack", "-a", "-d", "-f", "-q", "--threads=4"], None
    if name == "xz":
        if not shutil.which("xz"):
            sys.exit("bench/fidelity.py: xz is not installed (scripts/setup.sh installs xz-utils)")
        src = text_input(os.path.join(inputs, "fidelity-text.txt"), max(1, int(8 * scale)))
        # 256 KiB blocks: a small input still keeps four threads busy
        return {}, ["xz", "-T4", "--block-size=262144", "-3", "-c", src], None
    sys.exit(f"bench/fidelity.py: no program {name!r}; known: {', '.join(WORKLOADS + EXTRA + MORE)}, prodcons:THREADS")


def record(name, env, argv, stdin, work):
    d = os.path.join(work, "rec-" + name)
    os.makedirs(d, exist_ok=True)
    trace = os.path.join(d, f"{name.replace(':', '-')}.hltrace")
    cmd = [HEAPLAB, "record", "-o", trace, "--force", "--"]
    cmd += (["env"] + [f"{k}={v}" for k, v in env.items()] if env else []) + argv
    with open(stdin) if stdin else open(os.devnull) as fin:
        subprocess.run(cmd, check=True, stdin=fin, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                       cwd=ROOT)
    # the program's own trace is the largest one the recording left
    cands = [os.path.join(d, f) for f in os.listdir(d) if f.startswith(os.path.basename(trace))]
    return max(cands, key=os.path.getsize)


def load():
    try:
        return float(open("/proc/loadavg").read().split()[0])
    except OSError:
        return None


def spearman(xs, ys):
    def ranks(v):
        order = sorted(range(len(v)), key=lambda i: v[i])
        r = [0.0] * len(v)
        i = 0
        while i < len(order):
            j = i
            while j + 1 < len(order) and v[order[j + 1]] == v[order[i]]:
                j += 1
            for k in range(i, j + 1):
                r[order[k]] = (i + j) / 2 + 1
            i = j + 1
        return r
    if len(xs) < 3:
        return None
    rx, ry = ranks(xs), ranks(ys)
    mx, my = statistics.mean(rx), statistics.mean(ry)
    sxy = sum((a - mx) * (b - my) for a, b in zip(rx, ry))
    sxx = sum((a - mx) ** 2 for a in rx)
    syy = sum((b - my) ** 2 for b in ry)
    return sxy / (sxx * syy) ** 0.5 if sxx and syy else None


def halves(runs, agg=statistics.median):
    """Spearman of the even runs' medians (or agg) against the odd runs'
    (None with fewer than two runs each way)."""
    if not runs or any(not r or len(r) < 2 for r in runs):
        return None
    return spearman([agg(r[0::2]) for r in runs], [agg(r[1::2]) for r in runs])


def measure(name, a, work, mode, done, wait=None):
    """One program's live runs (once, kept in `done`) against its replays
    timed in `mode`, their threads waiting by `wait` (None: the default)."""
    if name not in done:
        env, argv, stdin = program(name, a.scale, work)
        trace = record(name, env, argv, stdin, work)
        live_json = os.path.join(work, f"live-{name.replace(':', '-')}.json")
        cmd = [HEAPLAB, "compare", "--live", "--allocators", a.allocators, "--repeat", str(a.runs),
               "--no-instructions", "--json", live_json]
        for k, v in env.items():
            cmd += ["--env", f"{k}={v}"]
        if stdin:
            cmd += ["--stdin", stdin]
        load0 = load()
        # exit status 1 when a row is not clean (a differing stdout): the rows say why
        subprocess.run(cmd + ["--"] + argv, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        done[name] = (env, argv, trace, live_json, load0)
    env, argv, trace, live_json, load0 = done[name]
    rep_json = os.path.join(work, f"replay-{name.replace(':', '-')}-{mode}-{wait or 'default'}.json")
    rcmd = [HEAPLAB, "compare", trace, "--allocators", a.allocators, "--repeat", str(a.runs),
            "--no-instructions", "--no-footprint", "--allow-truncated", "--time-mode", mode,
            "--json", rep_json]
    if a.threads:
        rcmd += ["--threads", a.threads]
    if wait:
        rcmd += ["--wait", wait]
    subprocess.run(rcmd, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    live = {r["allocator"]: r for r in compare_records(live_json)}
    rep = {r["allocator"]: r for r in compare_records(rep_json)}
    lg, rg = live.get("glibc", {}).get("wall_s"), rep.get("glibc", {}).get("wall_s")
    rows = []
    for n in live:
        lr, rr = live[n], rep.get(n, {})
        row = {"allocator": n, "live_status": lr.get("status"), "replay_status": rr.get("status"),
               "live_wall_s": lr.get("wall_s"), "replay_wall_s": rr.get("wall_s"),
               "live_runs_s": lr.get("wall_runs_s"), "replay_runs_s": rr.get("wall_runs_s"),
               "live_cpu_s": lr.get("cpu_s"), "replay_cpu_s": rr.get("cpu_s"),
               "live_cpu_runs_s": lr.get("cpu_runs_s"), "replay_cpu_runs_s": rr.get("cpu_runs_s"),
               "live_cpu_ratio": lr.get("cpu_ratio_glibc"), "replay_cpu_ratio": rr.get("cpu_ratio_glibc"),
               "live_ratio": lr.get("wall_ratio_glibc"), "replay_ratio": rr.get("wall_ratio_glibc"),
               "threads_mode": rr.get("threads_mode"), "replay_threads": rr.get("replay_threads")}
        if None not in (lg, rg, row["replay_wall_s"]) and lg > 0:
            row["predicted_ratio"] = 1 + (row["replay_wall_s"] - rg) / lg
        if row["live_ratio"] and row["replay_ratio"]:
            row["replay_vs_live"] = row["replay_ratio"] / row["live_ratio"] - 1
        if row["live_ratio"] and row.get("predicted_ratio"):
            row["predicted_vs_live"] = row["predicted_ratio"] / row["live_ratio"] - 1
        lc, rc = live.get("glibc", {}).get("cpu_s"), rep.get("glibc", {}).get("cpu_s")
        if None not in (lc, rc, row["replay_cpu_s"], row["live_cpu_ratio"]) and lc > 0:
            row["predicted_cpu_ratio"] = 1 + (row["replay_cpu_s"] - rc) / lc
            row["predicted_cpu_vs_live"] = row["predicted_cpu_ratio"] / row["live_cpu_ratio"] - 1
        rows.append(row)
    both = [r for r in rows if r["live_wall_s"] and r["replay_wall_s"]]
    cboth = [r for r in rows if r["live_cpu_s"] and r["replay_cpu_s"]]
    events = next((r.get("events") for r in rep.values() if r.get("events")), None)
    return {
        "program": name, "time_mode": mode, "wait": wait, "command": argv, "env": env, "trace": trace, "events": events,
        "load_before": load0, "load_after": load(),
        "live_glibc_s": lg, "replay_glibc_s": rg,
        "replay_share_of_live": (rg / lg) if lg and rg else None,
        "spearman_wall": spearman([r["live_wall_s"] for r in both], [r["replay_wall_s"] for r in both]),
        # the noise ceiling: how well the live runs predict one another (the
        # median of the even runs against that of the odd runs, per
        # allocator); a replay cannot rank the allocators better than that
        "spearman_live_halves": halves([r["live_runs_s"] for r in both]),
        "spearman_replay_halves": halves([r["replay_runs_s"] for r in both]),
        # the same with each allocator's fastest run instead of its median:
        # on a loaded machine the least disturbed run (the load drifts over
        # the minutes a comparison takes, and a run only ever gets slower)
        "spearman_wall_min": spearman([min(r["live_runs_s"]) for r in both if r["live_runs_s"]],
                                      [min(r["replay_runs_s"]) for r in both if r["live_runs_s"]])
        if all(r["live_runs_s"] and r["replay_runs_s"] for r in both) else None,
        "spearman_live_halves_min": halves([r["live_runs_s"] for r in both], min),
        "spearman_replay_halves_min": halves([r["replay_runs_s"] for r in both], min),
        # the same in CPU time (user + system), which waiting for a core on a
        # shared machine does not inflate (older heaplabs record none: None)
        "spearman_cpu": spearman([r["live_cpu_s"] for r in cboth], [r["replay_cpu_s"] for r in cboth]),
        "spearman_live_halves_cpu": halves([r["live_cpu_runs_s"] for r in cboth]),
        "spearman_replay_halves_cpu": halves([r["replay_cpu_runs_s"] for r in cboth]),
        "predicted_cpu_within_15pct": sum(1 for r in rows if r.get("predicted_cpu_vs_live") is not None
                                          and abs(r["predicted_cpu_vs_live"]) <= 0.15),
        "predicted_within_15pct": sum(1 for r in rows if r.get("predicted_vs_live") is not None
                                      and abs(r["predicted_vs_live"]) <= 0.15),
        "allocators_compared": len(both),
        "rows": rows,
    }


def fmt(v, d=2, pct=False):
    if v is None:
        return "—"
    return f"{v * 100:+.0f}%" if pct else f"{v:.{d}f}"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default=os.path.join(ROOT, "out", "bench", "fidelity"))
    ap.add_argument("--programs", default=",".join(WORKLOADS + EXTRA))
    ap.add_argument("--allocators", default="all")
    ap.add_argument("--runs", type=int, default=3, help="timing runs per allocator, both ways (median)")
    ap.add_argument("--scale", type=float, default=0.5, help="input size relative to the default")
    ap.add_argument("--time-modes", default="plain",
                    help="the replays' timing modes, comma-separated, each against the same live runs "
                         "(heaplab compare --time-mode): plain times the calls alone, touch also writes "
                         "every new object as the program did")
    ap.add_argument("--threads", choices=["recorded", "serial"], default=None,
                    help="how the replays run a trace's threads (default: the replayer's, recorded)")
    ap.add_argument("--waits", default="",
                    help="how a threaded replay's threads wait, comma-separated, each against the same "
                         "live runs (heaplab compare --wait futex|spin; default: the replayer's, futex)")
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    work = tempfile.mkdtemp(prefix="fidelity-", dir=a.out)  # 0700, removed at the end
    results = []
    try:
        done = {}
        modes = [m for m in a.time_modes.split(",") if m]
        for m in modes:
            if m not in ("plain", "touch"):
                sys.exit(f"bench/fidelity.py: --time-modes: {m!r} is not plain or touch")
        waits = [w for w in a.waits.split(",") if w] or [None]
        for w in waits:
            if w not in (None, "futex", "spin"):
                sys.exit(f"bench/fidelity.py: --waits: {w!r} is not futex or spin")
        for name, mode, wait in [(p, m, w) for p in a.programs.split(",") if p for m in modes for w in waits]:
            how = mode + (f", {wait} waits" if wait else "")
            print(f"== {name} ({how} replays)", file=sys.stderr)
            results.append(measure(name, a, work, mode, done, wait))
            r = results[-1]
            print(f"{name}, {how} replays: {r['events']} events, replay/live glibc time {fmt(r['replay_share_of_live'])}, "
                  f"Spearman {fmt(r['spearman_wall'])} over {r['allocators_compared']} allocators "
                  f"(live against live: {fmt(r['spearman_live_halves'])}, replay against replay: "
                  f"{fmt(r['spearman_replay_halves'])}); by the fastest run {fmt(r['spearman_wall_min'])} "
                  f"(live against live: {fmt(r['spearman_live_halves_min'])}, replay against replay: "
                  f"{fmt(r['spearman_replay_halves_min'])}), "
                  f"load {r['load_before']}..{r['load_after']}")
            print(f"  in CPU time: Spearman {fmt(r['spearman_cpu'])} (live against live: "
                  f"{fmt(r['spearman_live_halves_cpu'])}, replay against replay: "
                  f"{fmt(r['spearman_replay_halves_cpu'])}); predicted ratio within ±15% of live: "
                  f"{r['predicted_within_15pct']} of {r['allocators_compared']} by wall time, "
                  f"{r['predicted_cpu_within_15pct']} by CPU time")
            print(f"  {'allocator':<14} {'live×g':>7} {'replay×g':>8} {'pred×g':>7} {'replay err':>10} "
                  f"{'pred err':>8} {'cpu pred err':>12} {'threads':>8}")
            for row in r["rows"]:
                print(f"  {row['allocator']:<14} {fmt(row['live_ratio']):>7} {fmt(row['replay_ratio']):>8} "
                      f"{fmt(row.get('predicted_ratio')):>7} {fmt(row.get('replay_vs_live'), pct=True):>10} "
                      f"{fmt(row.get('predicted_vs_live'), pct=True):>8} "
                      f"{fmt(row.get('predicted_cpu_vs_live'), pct=True):>12} "
                      f"{(row['threads_mode'] or '—') + '/' + str(row['replay_threads'] or '—'):>8}"
                      + ("" if row["live_status"] == "ok" else f"  live {row['live_status']}")
                      + ("" if row["replay_status"] in ("ok", None) else f"  replay {row['replay_status']}"))
            sys.stdout.flush()
        scaling = [r for r in results if r["program"].startswith("prodcons:") and r["time_mode"] == modes[0]
                   and r["wait"] == waits[0]]
        if len(scaling) > 1:
            base = scaling[0]
            names = [row["allocator"] for row in base["rows"]]
            print(f"scaling: wall time over {base['program']}'s, live / replay ({os.cpu_count()} cores here)")
            print(f"  {'allocator':<14}" + "".join(f" {r['program'].split(':')[1] + ' thr':>13}" for r in scaling))
            for n in names:
                def at(r, key):
                    row = next((x for x in r["rows"] if x["allocator"] == n), {})
                    b = next((x for x in base["rows"] if x["allocator"] == n), {})
                    return row.get(key) / b[key] if row.get(key) and b.get(key) else None
                cells = "".join(f" {fmt(at(r, 'live_wall_s'), 1) + '/' + fmt(at(r, 'replay_wall_s'), 1):>13}"
                                for r in scaling)
                print(f"  {n:<14}{cells}")
    finally:
        for r in results:  # the traces go with the scratch directory
            r["trace"] = os.path.basename(r["trace"])
        out = os.path.join(a.out, "fidelity.json")
        write_json(out, {"runs": a.runs, "scale": a.scale, "allocators": a.allocators,
                         "threads": a.threads, "time_modes": a.time_modes, "waits": a.waits,
                         "programs": results})
        shutil.rmtree(work, ignore_errors=True)
    print(f"wrote {out}", file=sys.stderr)


main()
