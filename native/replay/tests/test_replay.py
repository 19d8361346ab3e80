#!/usr/bin/env python3
"""Tests of heaplab-replay (native/replay), run by tests/run.sh.

Oracles are independent of the replayer: the trace's text dump (hltrace-dump)
read here, a logging test allocator (tests/log.c) that writes down every call
it receives, site keys computed here from the dump's module paths and frame
offsets, and the instruction count of the bump allocator's malloc read from
its disassembly (objdump).

usage: test_replay.py BINDIR LIBDIR WORKDIR VECTORDIR
"""
import json
import os
import random
import re
import shutil
import subprocess
import sys

BIN, LIB, WORK, VEC = sys.argv[1:5]
REPLAY = os.path.join(BIN, "heaplab-replay")
MASK = (1 << 64) - 1
failures = []
passes = 0


def lib(name):
    return os.path.join(LIB, f"libheaplab-test-{name}.so")


def run(args, preload=None, env=None, preexec=None):
    e = dict(os.environ)
    e.pop("LD_PRELOAD", None)
    if preload:
        e["LD_PRELOAD"] = preload
    if env:
        e.update(env)
    p = subprocess.run([REPLAY] + args, capture_output=True, text=True, env=e, preexec_fn=preexec)
    return p.returncode, p.stdout, p.stderr


def check(cond, what):
    global passes
    if cond:
        passes += 1
    else:
        failures.append(what)
        print(f"FAIL replay: {what}", file=sys.stderr)


# ---------------------------------------------------------------- the dump, read here

def dump(trace):
    out = subprocess.run([os.path.join(BIN, "hltrace-dump"), trace], capture_output=True, text=True)
    modules, stacks, events = {}, {}, []
    for line in out.stdout.splitlines():
        f = line.split(" ")
        if f[0] == "module":
            path = re.search(r'path="((?:[^"\\]|\\.)*)"', line).group(1)
            modules[int(f[1])] = path.encode().decode("unicode_escape").encode("latin-1")
        elif f[0] == "stack":
            frames = line.split("frames=")[1].split()
            stacks[int(f[1])] = [(int(m), int(o, 16)) for m, o in (x.split(":") for x in frames)]
        elif f[0] == "event":
            e = {"kind": f[2], "failed": "failed" in f}
            for kv in f[3:]:
                if "=" in kv:
                    k, v = kv.split("=", 1)
                    e[k] = v
            events.append(e)
    return modules, stacks, events


def peak_live(events):
    live = peak = 0
    sizes = {}
    for e in events:
        if e["kind"] in ("free", "realloc_free"):
            live -= sizes.pop(int(e["old"]))
        elif e["kind"] == "realloc" and not e["failed"] and e.get("old", "null") != "null":
            live -= sizes.pop(int(e["old"]))
        if "id" in e:
            sizes[int(e["id"])] = int(e["size"])
            live += int(e["size"])
        peak = max(peak, live)
    return peak


# ---------------------------------------------------------------- synthetic traces

def make_trace(name, events_spec, modules=None, stacks=None, threads=1):
    """events_spec: list of (kind, dict) in the dump's event syntax (a
    "thread" key puts an event on thread 1..threads-1); ids and the writer's
    bookkeeping are filled in here. Returns the trace path."""
    lines = ["writer codec=zstd block_events=1000", "hltrace 1",
             "meta pid=7 ppid=1 start_ns=1 pointer_size=8 endian=little time_unit_ns=1 stack_depth=4",
             "meta argv=\"synthetic\"",
             "meta recorder=\"test\" executable=\"/bin/synthetic\" options=\"\" clock=\"\" parent_pid=-"]
    for mid, path in (modules or {}).items():
        lines.append(f'module {mid} base=0x1000 size=0x1000 path="{path}" build_id=')
    for sid, frames in (stacks or {}).items():
        lines.append(f"stack {sid} frames=" + " ".join(f"{m}:0x{o:x}" for m, o in frames))
    for t in range(threads):
        lines.append(f'thread {t} tid={7 + t} name=""')
    nid = 0
    for i, (kind, kv) in enumerate(events_spec):
        kv = dict(kv)
        parts = [f"event {i} {kind} thread={kv.pop('thread', 0)} time={i}"]
        if "old" in kv:
            parts.append(f"old={kv.pop('old')}")
        if kv.pop("failed", False):
            parts.append("failed")
        elif kind not in ("free", "realloc_free"):
            parts.append(f"id={nid}")
            nid += 1
        parts.append(f"size={kv.pop('size')}")
        if "align" in kv:
            parts.append(f"align={kv.pop('align')}")
        parts.append(f"stack={kv.pop('stack', 0)}")
        lines.append(" ".join(parts))
    lines.append(f"end reason=exit status=0 end_ns=2 events={len(events_spec)} objects={nid} unrecorded=0 unknown_frees=0")
    script = os.path.join(WORK, name + ".script.txt")
    with open(script, "w") as f:
        f.write("\n".join(lines) + "\n")
    out = os.path.join(WORK, name + ".hltrace")
    subprocess.run([os.path.join(BIN, "hltrace-script"), script, out], check=True)
    return out


def random_spec(n, seed, stack_ids=0):
    """n events over every kind, frees in random order; sizes 1..600 and a few large."""
    rng = random.Random(seed)
    live, spec, nid = [], [], 0
    for _ in range(n):
        r = rng.random()
        stack = rng.randint(1, stack_ids) if stack_ids and rng.random() < 0.8 else 0
        size = rng.randint(4096, 70000) if rng.random() < 0.03 else rng.choice([rng.randint(1, 64), rng.randint(1, 600)])
        if live and r < 0.40:
            old = live.pop(rng.randrange(len(live)))
            spec.append(("realloc_free" if rng.random() < 0.02 else "free", {"old": old, "size": 0}))
        elif live and r < 0.47:
            old = live.pop(rng.randrange(len(live)))
            spec.append(("realloc", {"old": old, "size": size, "stack": stack}))
            live.append(nid)
            nid += 1
        else:
            kind = rng.choice(["malloc"] * 12 + ["calloc", "memalign", "posix_memalign", "aligned_alloc",
                                                  "valloc", "pvalloc", "realloc"])
            extra = {}
            if kind in ("memalign", "posix_memalign", "aligned_alloc"):
                extra["align"] = rng.choice([32, 64, 256, 4096])
            if kind in ("valloc", "pvalloc"):
                extra["align"] = 4096
            if kind == "realloc":
                extra["old"] = "null"
            spec.append((kind, dict(size=size, stack=stack, **extra)))
            live.append(nid)
            nid += 1
    return spec


# ---------------------------------------------------------------- the tests

ALLOC_CALL = {"malloc": "malloc", "calloc": "calloc", "memalign": "memalign", "posix_memalign": "posix_memalign",
              "aligned_alloc": "aligned_alloc", "valloc": "valloc", "pvalloc": "pvalloc"}


def expected_calls(events):
    """What the log allocator must see, with pointers as ('id', n) placeholders."""
    out = []
    for e in events:
        k, size = e["kind"], int(e["size"])
        if k == "free":
            out.append(("free", ("id", int(e["old"]))))
        elif k == "realloc_free":
            out.append(("realloc", ("id", int(e["old"])), 0, None))
        elif k == "realloc":
            if e["failed"]:
                continue  # skipped, as documented
            old = None if e["old"] == "null" else ("id", int(e["old"]))
            out.append(("realloc", old, size, int(e["id"])))
        else:
            args = []
            if k == "calloc":
                args = [1]
            elif k in ("memalign", "posix_memalign", "aligned_alloc"):
                args = [int(e["align"])]
            out.append((ALLOC_CALL[k], tuple(args), size, None if e["failed"] else int(e["id"])))
    return out


def parse_log(path):
    calls = []
    for line in open(path):
        f = line.split()
        if f[0] == "hint":
            calls.append(("hint",) + tuple(f[1:]))
        elif f[0] == "free":
            calls.append(("free", int(f[1], 16)))
        else:
            ret = int(f[-1], 16)
            nums = f[1:-2]
            if f[0] == "realloc":
                calls.append(("realloc", int(nums[0], 16), int(nums[1]), ret))
            else:
                calls.append((f[0], tuple(int(x) for x in nums[:-1]), int(nums[-1]), ret))
    return calls


def test_mapping(name, trace):
    logf = os.path.join(WORK, name + ".log")
    if os.path.exists(logf):
        os.unlink(logf)
    # serially: one thread makes the calls in the trace's merged order (a
    # threaded replay's pthread_create would log its own calloc, too)
    rc, out, err = run(["--threads", "serial", trace], preload=lib("log"), env={"HEAPLAB_TESTLOG": logf})
    check(rc == 0, f"{name}: plain replay under the log allocator exits 0 (rc={rc}, {err.strip()})")
    _, _, events = dump(trace)
    want = expected_calls(events)
    got = [c for c in parse_log(logf) if c[0] != "hint"]
    ptr = {}
    i = 0
    ok = True
    for w in want:
        if i >= len(got):
            check(False, f"{name}: the log ends before the call {w}")
            return
        g = got[i]
        i += 1
        if w[0] == "free":
            ok &= g == ("free", ptr[w[1][1]])
        elif w[0] == "realloc":
            oldp = 0 if w[1] is None else ptr[w[1][1]]
            ok &= g[0] == "realloc" and g[1] == oldp and g[2] == w[2]
            if w[3] is not None:
                ptr[w[3]] = g[3]
            elif g[3]:  # realloc(p, 0) that returned a block: freed at once
                ok &= got[i] == ("free", g[3])
                i += 1
        else:
            ok &= g[0] == w[0] and g[1] == w[1] and g[2] == w[2]
            if w[3] is not None:
                ptr[w[3]] = g[3]
            elif g[3]:  # a failed allocation that succeeds now is freed at once
                ok &= got[i] == ("free", g[3])
                i += 1
        if not ok:
            check(False, f"{name}: call {i - 1} is {g}, expected {w}")
            return
    check(i == len(got), f"{name}: {len(got) - i} calls beyond the trace")
    check(True, f"{name}: object mapping")


def fnv(b):
    h = 0xcbf29ce484222325
    for c in b:
        h = ((h ^ c) * 0x100000001b3) & MASK
    return h


def site_hash(keys):
    if not keys:
        return 0
    h = 0xcbf29ce484222325
    for k in keys:
        h = ((h ^ k) * 0x100000001b3) & MASK
    h ^= h >> 33
    h = (h * 0xff51afd7ed558ccd) & MASK
    h ^= h >> 33
    return h


def test_site_hints(name, trace, via="log", env=None):
    """via: the log allocator (tests/log.c), or zoosite, a test algorithm behind
    heaplab's own shim, so that the hint goes replayer -> shim -> (pad layer) ->
    hl_alloc_t.site_hint."""
    name = f"{name} via {via}" + (f" {env}" if env else "")
    logf = os.path.join(WORK, name.replace(" ", "_").replace("'", "") + ".hints.log")
    if os.path.exists(logf):
        os.unlink(logf)
    rc, out, err = run(["--site-hints", trace], preload=lib(via), env=dict(env or {}, HEAPLAB_TESTLOG=logf))
    check(rc == 0, f"{name}: --site-hints replay exits 0 ({err.strip()})")
    check(rc == 0 and json.loads(out)["site_hints"]["hook"], f"{name}: the replayer found the hook")
    modules, stacks, events = dump(trace)
    log = [tuple(l.split()) for l in open(logf)]
    hints = [c for c in log if c[0] == "hint"]
    allocs = [e for e in events if e["kind"] not in ("free", "realloc_free") and not e["failed"]]
    check(len(hints) == len(allocs), f"{name}: one hint per allocation ({len(hints)} vs {len(allocs)})")
    kinds = ["malloc", "calloc", "realloc", "memalign", "posix_memalign", "aligned_alloc", "valloc", "pvalloc"]
    bad = 0
    for h, e in zip(hints, allocs):
        stack = int(e["stack"])
        keys = []
        for m, off in stacks.get(stack, []):
            path = modules.get(m, b"")
            keys.append(fnv(path.rsplit(b"/", 1)[-1]) ^ ((off * 0x9E3779B97F4A7C15) & MASK))
        want = (str(kinds.index(e["kind"])), e["size"], e.get("align", "0") if e["kind"] not in ("malloc", "calloc", "realloc") else "0",
                str(stack), str(len(keys)), hex(site_hash(keys))) + tuple(hex(k) for k in keys)
        if h[1:] != want:
            bad += 1
            if bad == 1:
                print(f"  hint {h[1:]} != expected {want}", file=sys.stderr)
    check(bad == 0, f"{name}: site hints carry the keys computed from the dump ({bad} differ)")
    # each hint immediately precedes its allocation
    # (behind the shim, a realloc that fits its block reaches no malloc: another hint may follow)
    paired = all(i + 1 < len(log) and log[i + 1][0] not in ("hint", "free") or (c[1] == "2" and via == "zoosite")
                 for i, c in enumerate(log) if c[0] == "hint")
    check(paired, f"{name}: each hint comes just before its allocation")


def test_modes(name, trace, preloads):
    _, _, events = dump(trace)
    kinds = {}
    for e in events:
        kinds[e["kind"]] = kinds.get(e["kind"], 0) + 1
    peak = peak_live(events)
    nobj = sum(1 for e in events if "id" in e)
    nthreads = len({e["thread"] for e in events})
    for pre_name, pre in preloads:
        for mode, threads in [(m, t) for m in ("plain", "touch", "check") for t in ("serial", "recorded")]:
            if threads == "recorded" and nthreads < 2:
                continue
            rc, out, err = run(["--mode", mode, "--threads", threads, trace], preload=pre)
            label = f"{name} under {pre_name}, {mode} mode, {threads}"
            check(rc == 0, f"{label}: exits 0 (rc={rc}: {err.strip()[:300]})")
            try:
                j = json.loads(out)
            except ValueError:
                check(False, f"{label}: stdout is one JSON object: {out[:200]!r}")
                continue
            check(j["events"] == len(events), f"{label}: events {j['events']} == {len(events)}")
            check(all(j["kinds"][k] == v for k, v in kinds.items()), f"{label}: per-kind counts")
            check(j["objects"] == nobj, f"{label}: objects {j['objects']} == {nobj}")
            check(j["peak_live_bytes"] == peak, f"{label}: peak live bytes {j['peak_live_bytes']} == {peak}")
            want_threads = 1 if threads == "serial" else nthreads
            check(j["mode"] == mode and j["replay_threads"] == want_threads and j["threads_mode"] == threads,
                  f"{label}: mode and threads ({j['replay_threads']} == {want_threads})")
            if mode == "touch" and threads == "serial":  # threaded, the peak depends on the interleaving
                u = j["usable"]
                check(u["peak_live_bytes"] == peak, f"{label}: live bytes tracked while replaying peak at {peak}")
                check(u["usable_at_peak_live_bytes"] >= peak, f"{label}: usable bytes >= requested at the peak")
            if mode == "check":
                check(j["check"]["problems"] == 0, f"{label}: no problems: {j['check']['reported'][:2]}")


def test_broken():
    # mallocs that stay live long enough for every 50th to meet a live predecessor
    spec = []
    for i in range(400):
        spec.append(("malloc", {"size": 24 + (i % 5) * 8}))
        if i >= 10:
            spec.append(("free", {"old": i - 10, "size": 0}))
    trace = make_trace("broken", spec)
    rc, out, err = run(["--mode", "check", trace], preload=lib("overlap"))
    check(rc == 3, f"check mode exits 3 on the overlapping allocator (rc={rc})")
    check("overlaps live object" in err and json.loads(out)["check"]["problems"] > 0,
          f"check mode names the overlap: {err[:300]!r}")
    m = re.search(r"event (\d+) \(malloc of (\d+) bytes, object (\d+)\): block \[0x[0-9a-f]+, \+\d+\) overlaps live object (\d+)", err)
    check(m is not None and int(m.group(3)) == 49 and int(m.group(4)) == 48,
          f"the first overlap is object 49 over object 48 (the 50th malloc over the 49th): {m and m.groups()}")
    rc, out, err = run(["--mode", "check", trace], preload=lib("corrupt"))
    check(rc == 3, f"check mode exits 3 on the corrupting allocator (rc={rc})")
    m = re.search(r"free of object (\d+)\): payload byte 3 of \d+ at 0x[0-9a-f]+ is 0x0, expected", err)
    check(m is not None and int(m.group(1)) == 48, f"check mode names the damaged byte of object 48: {err[:300]!r}")
    for l in ("bump",):
        rc, out, err = run(["--mode", "check", trace], preload=lib(l))
        check(rc == 0, f"check mode passes the sound {l} allocator (rc={rc}: {err[:200]})")
    rc, out, err = run(["--mode", "check", trace])
    check(rc == 0, f"check mode passes glibc (rc={rc}: {err[:200]})")


def test_bad_input():
    for f in sorted(os.listdir(VEC)):
        if not f.endswith(".err"):
            continue
        name = f[:-4]
        spec = open(os.path.join(VEC, f)).read().strip()
        offset = re.search(r"offset=(\d+)", spec).group(1)
        events = re.search(r"events=(\d+)", spec).group(1)
        phrase = spec.split("problem=", 1)[1]
        rc, out, err = run([os.path.join(VEC, name + ".hltrace")])
        if "cut short" in phrase or "truncated" in phrase or "no END block" in phrase:
            check(rc == 0 and json.loads(out)["cut_short"] and "warning" in err,
                  f"{name}: a cut-short trace replays its good events with a warning (rc={rc})")
            check(f"byte {offset}" in err and phrase in err, f"{name}: warning names offset and problem: {err!r}")
        else:
            check(rc == 1 and out == "", f"{name}: exit 1 and no JSON on a bad trace (rc={rc})")
            check(f"byte {offset}:" in err and f"({events} events read before this point)" in err and phrase in err,
                  f"{name}: the error names the file, offset {offset}, {events} events and {phrase!r}: {err!r}")
    rc, out, err = run([os.path.join(WORK, "does-not-exist.hltrace")])
    check(rc == 1 and "No such file" in err, f"a missing trace is named: {err!r}")
    rc, out, err = run(["--mode", "fast", "x"])
    check(rc == 2 and "plain, touch or check" in err, f"a bad --mode says what is allowed: {err[:120]!r}")
    rc, out, err = run(["--frobnicate", "x"])
    check(rc == 2 and "unknown option --frobnicate" in err and "usage:" in err, f"an unknown flag is named: {err[:120]!r}")


def objdump_count(so, fn):
    """Instructions of `fn` from its entry to its first ret (its straight fast path)."""
    out = subprocess.run(["objdump", "-d", "--no-show-raw-insn", so], capture_output=True, text=True).stdout
    body = out.split(f"<{fn}>:\n", 1)[1].split("\n\n", 1)[0]
    n = 0
    for line in body.splitlines():
        if re.match(r"\s+[0-9a-f]+:\s+\S", line):
            n += 1
            if re.search(r"\bret", line):
                return n
    return None


def callgrind(args, preload):
    out = os.path.join(WORK, "cg.out")
    e = dict(os.environ)
    e["LD_PRELOAD"] = preload
    subprocess.run(["valgrind", "--tool=callgrind", "--callgrind-out-file=" + out, REPLAY] + args,
                   capture_output=True, env=e, check=True)
    names = {}
    fn = cfn = None
    selfc, calls, pending = {}, {}, None
    for line in open(out):
        line = line.rstrip("\n")
        m = re.match(r"(c?fn)=\((\d+)\)(?: (.*))?$", line)
        if m:
            if m.group(3):
                names[m.group(2)] = m.group(3)
            if m.group(1) == "fn":
                fn = names[m.group(2)]
            else:
                cfn = names[m.group(2)]
            continue
        if line.startswith("calls="):
            pending = int(line[6:].split()[0])
        elif (line[:1].isdigit() or line[:1] in "+-*") and len(line.split()) > 1:
            c = int(line.split()[-1])
            if pending is not None:
                n, s = calls.get((fn, cfn), (0, 0))
                calls[(fn, cfn)] = (n + pending, s + c)
                pending = None
            else:
                selfc[fn] = selfc.get(fn, 0) + c
    return selfc, calls


def test_instructions():
    if not shutil.which("valgrind") or not shutil.which("objdump"):
        # A check that cannot run fails, unless skipped on purpose and by name
        # (scripts/skips.sh).
        if "callgrind" in os.environ.get("HEAPLAB_ALLOW_SKIPS", "").split(","):
            why = "instruction counts need valgrind and objdump"
            print(f"SKIP callgrind: {why} (allowed by HEAPLAB_ALLOW_SKIPS)")
        else:
            failures.append("callgrind: valgrind and objdump are needed for the instruction "
                            "tests (HEAPLAB_ALLOW_SKIPS=callgrind skips them on purpose)")
        return
    spec = []
    for i in range(3000):
        spec.append(("malloc", {"size": 1 + i % 200}))
        if i >= 5:
            spec.append(("free", {"old": i - 5, "size": 0}))
    trace = make_trace("bumpcount", spec)
    bump = lib("bump")
    want_malloc = objdump_count(bump, "malloc")
    want_free = objdump_count(bump, "free")
    selfc, calls = callgrind(["--general", trace], bump)
    n, cost = next(((n, c) for (f, g), (n, c) in calls.items() if f == "rp_call_malloc"), (0, 0))
    check(n == 3000 and cost == 3000 * want_malloc,
          f"callgrind: bump's malloc costs exactly {want_malloc} instructions (objdump) per call: {cost}/{n}")
    n, cost = next(((n, c) for (f, g), (n, c) in calls.items() if f == "rp_call_free"), (0, 0))
    check(n == 2995 and cost == 2995 * want_free, f"callgrind: bump's free costs {want_free}: {cost}/{n}")
    selfc, calls = callgrind(["--per-call", trace], bump)
    n, cost = next(((n, c) for (f, g), (n, c) in calls.items() if f == "rp_call_malloc"), (0, 0))
    check(n == 3000 and cost == 3000 * want_malloc, f"callgrind, --per-call: {cost}/{n} for malloc")
    selfc, calls = callgrind([trace], bump)
    lean = [f for f in selfc if f.startswith("rp_lean_x86_64") or f == "rp_exec_lean"]
    harness = sum(selfc[f] for f in lean)
    per_event = harness / len(spec)
    check(per_event <= 10, f"harness: {per_event:.2f} instructions per replayed event (<= 10)")
    print(f"  harness: {per_event:.2f} instructions per event on {len(spec)} events (bump malloc {want_malloc}, free {want_free})")


# ---------------------------------------------------------------- threaded replay

ROOT = os.path.abspath(os.path.join(VEC, "..", ".."))


def test_ops_cache(trace, threaded):
    """--ops-cache: the first run decodes the trace into the cache (in its
    first pass), later runs read it and replay exactly the same calls; runs
    started together decode it once; a threaded run writes it for the serial
    ones and counts the trace once; --fill-cache fills it and stops; a
    corrupt trace leaves nothing behind."""
    cache = os.path.join(WORK, "ops-cache")
    shutil.rmtree(cache, ignore_errors=True)
    logs = []
    for i, want in enumerate(("written", "hit")):
        logf = os.path.join(WORK, f"cache{i}.log")
        if os.path.exists(logf):
            os.unlink(logf)
        rc, out, err = run(["--ops-cache", cache, trace], preload=lib("log"), env={"HEAPLAB_TESTLOG": logf})
        j = json.loads(out) if rc == 0 else None
        check(j and j["ops_cache"] == want, f"ops cache: run {i} says {want} (rc {rc}, {err[:200]})")
        logs.append(parse_log(logf))
    nocache = os.path.join(WORK, "cache-none.log")
    if os.path.exists(nocache):
        os.unlink(nocache)
    run([trace], preload=lib("log"), env={"HEAPLAB_TESTLOG": nocache})
    def calls(log):  # addresses renamed by first appearance (each run maps its own)
        names = {}
        return [tuple(names.setdefault(v, len(names)) if isinstance(v, int) and v > 1 << 20 else v
                      for v in c) for c in log]
    check(logs[0] and calls(logs[0]) == calls(logs[1]) == calls(parse_log(nocache)),
          "ops cache: the same calls written, read back and without the cache")
    shutil.rmtree(cache, ignore_errors=True)
    procs = [subprocess.Popen([REPLAY, "--ops-cache", cache, trace], stdout=subprocess.PIPE, text=True)
             for _ in range(3)]
    outs = [json.loads(p.communicate()[0]) for p in procs]
    said = sorted(o["ops_cache"] for o in outs)
    check(said == ["hit", "hit", "written"], f"ops cache: three runs started together decode once ({said})")
    check(len({json.dumps([o["events"], o["kinds"], o["objects"]]) for o in outs}) == 1,
          "ops cache: the three runs see the same trace")
    left = sorted(os.listdir(cache))
    check(len([f for f in left if f.endswith(".ops")]) == 1 and all(f.endswith((".ops", ".lock")) for f in left),
          f"ops cache: one cache file, no temporary left ({left})")
    rc, out, err = run(["--ops-cache", cache, "--fill-cache", trace])
    check(rc == 0 and json.loads(out)["ops_cache"] == "hit", f"ops cache: --fill-cache finds it (rc {rc})")
    shutil.rmtree(cache, ignore_errors=True)
    rc, out, err = run(["--ops-cache", cache, "--fill-cache", trace])
    j = json.loads(out) if rc == 0 else {}
    check(j.get("ops_cache") == "written" and j.get("events") == outs[0]["events"],
          f"ops cache: --fill-cache writes it and says how many events (rc {rc}, {err[:200]})")
    rc, out, err = run(["--fill-cache", trace])
    check(rc == 2 and "--ops-cache" in err, "ops cache: --fill-cache without --ops-cache is a usage error")
    # a threaded trace: the threaded runs write the cache but cannot use it
    shutil.rmtree(cache, ignore_errors=True)
    runs = [replay_json(["--ops-cache", cache] + extra + [threaded])[1] for extra in ([], [], ["--threads", "serial"])]
    check(all(runs) and [r["ops_cache"] for r in runs] == ["written", "off", "hit"]
          and [r["threads_mode"] for r in runs] == ["recorded", "recorded", "serial"],
          f"ops cache: a threaded trace: written by a threaded run, read by a serial one "
          f"({[(r or {}).get('ops_cache') for r in runs]})")
    check(all(runs) and len({json.dumps([r["events"], r["kinds"], r["objects"], r["trace_threads"]]) for r in runs}) == 1,
          "ops cache: a threaded run after the cache was written counts the trace once")
    # a corrupt trace: an error, and no cache or temporary file
    shutil.rmtree(cache, ignore_errors=True)
    bad = os.path.join(WORK, "cache-bad.hltrace")
    b = bytearray(open(trace, "rb").read())
    b[-30] ^= 0xFF  # inside the END block: a checksum error
    open(bad, "wb").write(bytes(b))
    rc, out, err = run(["--ops-cache", cache, bad])
    left = [f for f in (os.listdir(cache) if os.path.isdir(cache) else []) if not f.endswith(".lock")]
    check(rc == 1 and not left, f"ops cache: a corrupt trace fails and leaves no cache file ({rc}, {left})")



def zoo_names():
    names = []
    for line in open(os.path.join(ROOT, "native", "alloc", "registry.txt")):
        if re.match(r"\s*[a-z0-9_]", line):
            names.append(line.split("|")[0].strip())
    return names


def threaded_spec(rounds, seed):
    """Four threads: thread 0 makes objects that threads 1-3 free and
    realloc; each also keeps objects of its own."""
    rnd = random.Random(seed)
    spec, nid, mine = [], 0, {t: [] for t in range(4)}
    for _ in range(rounds):
        t = rnd.randrange(4)
        r = rnd.random()
        if r < 0.45 or not any(mine.values()):
            spec.append(("malloc", {"size": rnd.randint(1, 300), "thread": t}))
            # objects made by thread 0 go to another thread half the time
            owner = rnd.randrange(1, 4) if t == 0 and rnd.random() < 0.5 else t
            mine[owner].append(nid)
            nid += 1
        elif r < 0.55 and mine[t]:
            old = mine[t].pop(rnd.randrange(len(mine[t])))
            spec.append(("realloc", {"old": old, "size": rnd.randint(1, 500), "thread": t}))
            mine[t].append(nid)
            nid += 1
        elif mine[t]:
            old = mine[t].pop(rnd.randrange(len(mine[t])))
            spec.append(("free", {"old": old, "size": 0, "thread": t}))
    return spec


def replay_json(args, preload=None, preexec=None):
    rc, out, err = run(args, preload, preexec=preexec)
    try:
        return rc, json.loads(out), err
    except ValueError:
        return rc, None, err


def test_threads_handmade():
    """A hand-made 4-thread trace: threaded by default, clean in check mode
    under glibc and bump; with --threads unordered its order breaks and check
    mode must say so."""
    spec = threaded_spec(4000, 7)
    trace = make_trace("threads4", spec, threads=4)
    rc, j, err = replay_json(["--mode", "check", trace])
    check(rc == 0 and j and j["threads_mode"] == "recorded" and j["replay_threads"] == 4
          and j["check"]["problems"] == 0,
          f"threads: a 4-thread trace replays threaded and clean in check mode (rc {rc}, {err[:300]})")
    rc, js, err = replay_json(["--mode", "check", "--threads", "serial", trace])
    check(rc == 0 and js and js["threads_mode"] == "serial" and js["replay_threads"] == 1,
          f"threads: --threads serial replays on one thread (rc {rc})")
    check(js and js["thread_wait"] is None, "threads: a serial replay says no thread waited (thread_wait null)")
    for key in ("events", "objects", "kinds", "peak_live_bytes"):
        check(j and js and j[key] == js[key], f"threads: {key} equal threaded and serial")
    check(j and j["replay"] == js["replay"], "threads: replay counts equal threaded and serial")
    rc, j, err = replay_json(["--mode", "check", "--threads", "unordered", trace])
    check(rc == 3 and "does not exist yet" in err and j and j["check"]["problems"] > 0,
          f"threads: --threads unordered breaks the order and check mode catches it (rc {rc})")
    rc, j, err = replay_json(["--threads", "unordered", trace])
    check(rc == 0, f"threads: unordered plain mode does not crash (rc {rc}, {err[:200]})")
    rc, out, err = run(["--wait", "sideways", trace])
    check(rc == 2 and "futex or spin" in err, "threads: a bad --wait value is a usage error")
    for wait in ("futex", "spin"):
        rc, jw, err = replay_json(["--mode", "check", "--wait", wait, trace])
        check(rc == 0 and jw and jw["thread_wait"] == wait and jw["check"]["problems"] == 0
              and jw["kinds"] == js["kinds"] and (wait == "futex" or jw["thread_sleeps"] == 0),
              f"threads: --wait {wait}: clean in check mode, the same calls (rc {rc}, {err[:200]})")
    rc, out, err = run(["--threads", "sideways", trace])
    check(rc == 2 and "recorded, serial or unordered" in err, "threads: a bad --threads value is a usage error")
    rc, out, err = run(["--threads", "recorded", "--site-hints", trace])
    check(rc == 2 and "--threads serial" in err, "threads: --threads recorded with --site-hints says what to do")
    for mode in ("plain", "touch"):
        rc, j, err = replay_json(["--mode", mode, trace], lib("bump"))
        check(rc == 0 and j and j["threads_mode"] == "recorded", f"threads: bump, {mode} mode (rc {rc})")
    # a one-thread trace stays serial by default
    rc, j, err = replay_json([make_trace("thread1", random_spec(300, 3))])
    check(rc == 0 and j and j["threads_mode"] == "serial", "threads: a one-thread trace replays serially")
    return trace


def test_threads_prodcons():
    """bench/progs/prodcons.c recorded with the agent (4 threads, every item
    freed by another thread): check mode 10 times with the same results;
    then every zoo allocator, glibc and the peers that are installed."""
    agent = os.path.join(LIB, "libheaplab-record.so")
    prog = os.path.join(WORK, "prodcons")
    subprocess.run(["cc", "-O2", "-pthread", "-o", prog, os.path.join(ROOT, "bench", "progs", "prodcons.c")],
                   check=True)
    trace = os.path.join(WORK, "prodcons.hltrace")
    e = dict(os.environ)
    e.update({"LD_PRELOAD": agent, "HEAPLAB_RECORD_OUT": trace, "HEAPLAB_RECORD_STACK_DEPTH": "0"})
    # The agent writes an edge only where an address passes between threads
    # (freed on one, reused on another), which depends on the scheduling:
    # about 1 recording in 12 has none.  The edges are what this test checks,
    # so it records again (at most 5 times) until a trace has some.
    for attempt in range(5):
        if os.path.exists(trace):
            os.unlink(trace)  # this test's own recording
        p = subprocess.run([prog, "3000"], env=e, capture_output=True, text=True)
        check(p.returncode == 0 and os.path.exists(trace), f"threads: recorded prodcons ({p.stderr[:300]})")
        if p.returncode:
            return
        rc, j, err = replay_json(["--mode", "check", trace])
        if rc == 0 and j and j["thread_edges"] > 0:
            break
        print(f"  prodcons recording {attempt + 1} has no cross-thread edges: recording again")
    results = set()
    for i in range(10):
        rc, j, err = replay_json(["--mode", "check", trace])
        ok = (rc == 0 and j and j["check"]["problems"] == 0 and j["replay_threads"] >= 4
              and j["thread_edges"] > 0)
        check(ok, f"threads: prodcons check-mode run {i}: rc {rc}, {err[:300]}")
        if j:
            results.add(json.dumps([j["events"], j["objects"], j["kinds"], j["replay"], j["check"],
                                    j["replay_threads"]], sort_keys=True))
    check(len(results) == 1, f"threads: 10 threaded check runs give one result, not {len(results)}")
    # One CPU for four replay threads: waits that outlast the spin sleep on
    # the futex (how many depends on the scheduler); the results must not.
    if hasattr(os, "sched_setaffinity"):
        for i in range(3):
            rc, j, err = replay_json(["--mode", "check", trace], preexec=lambda: os.sched_setaffinity(0, {min(os.sched_getaffinity(0))}))
            check(rc == 0 and j and j["check"]["problems"] == 0 and j["thread_edges"] > 0,
                  f"threads: prodcons check mode on one CPU, run {i}: rc {rc}, {err[:300]}")
            if j:
                results.add(json.dumps([j["events"], j["objects"], j["kinds"], j["replay"], j["check"],
                                        j["replay_threads"]], sort_keys=True))
        check(len(results) == 1, f"threads: one CPU gives the same results too, not {len(results)}")
    rc, j, err = replay_json(["--mode", "check", "--no-edges", trace])
    check(rc == 0 and j and j["thread_edges"] == 0 and j["check"]["problems"] == 0,
          f"threads: --no-edges waits on objects only, still clean (rc {rc})")
    allocs = [(n, os.path.join(LIB, f"libheaplab-{n}.so")) for n in zoo_names()] + [("glibc", None)]
    for n, so in (("jemalloc", "libjemalloc.so.2"), ("mimalloc", "libmimalloc.so.2"),
                  ("tcmalloc", "libtcmalloc_minimal.so.4")):
        path = os.path.join("/usr/lib/x86_64-linux-gnu", so)
        if os.path.exists(path):
            allocs.append((n, path))
    for name, so in allocs:
        for mode in ("plain", "check"):
            rc, j, err = replay_json(["--mode", mode, trace], so)
            check(rc == 0 and j and j["threads_mode"] == "recorded",
                  f"threads: prodcons under {name}, {mode} mode: rc {rc}, {err[:300]}")
            if j and mode == "plain":
                zoo = so.startswith(LIB) if so else False
                lk = j.get("lock")
                check((lk is None) != zoo and (not zoo or all(isinstance(lk[k], int) for k in ("contended", "sleeps", "wait_ns"))),
                      f"threads: prodcons under {name}: the shim's lock counted for the zoo only ({lk})")
                if zoo and lk and lk["contended"] == 0:
                    check(lk["sleeps"] == 0 and lk["wait_ns"] == 0, f"threads: {name}: no contention, no wait ({lk})")
    # one thread never finds the zoo's lock held
    rc, j, err = replay_json(["--threads", "serial", trace], os.path.join(LIB, "libheaplab-firstfit.so"))
    check(rc == 0 and j and j["lock"] == {"contended": 0, "sleeps": 0, "wait_ns": 0},
          f"threads: serial replay under firstfit: an uncontended lock ({j and j.get('lock')})")
    return trace


def test_threads_instructions(trace):
    """The threaded lean loop's own instructions per event, under callgrind
    with the bump allocator (whose calls are not counted): at most 15.  The
    loop and wait_for's check are the replayer's cost; the waiting (the
    waiter's spin and futex sleep in wait_spin, wait_obj and wait_done, and
    the waited-for thread's wake-up checks in wake_check and wake_scan while
    a thread sleeps on it) depends on the scheduler and the machine's load,
    so it is reported apart, not judged.  With --wait spin nobody sleeps."""
    if not shutil.which("valgrind"):
        return  # test_instructions reports the missing tool
    events = len(threaded_spec(4000, 7))
    base = lambda f: f.split(".")[0]  # gcc's .constprop/.isra clones
    waiting = ("wait_spin", "wait_obj", "wait_done", "wait_done_yet", "wake_check", "wake_scan",
               "rp_relax", "rp_futex_wait", "rp_futex_wake", "syscall", "__errno_location")
    for wait in ("futex", "spin"):
        selfc, calls = callgrind(["--wait", wait, trace], lib("bump"))
        loop = sum(c for f, c in selfc.items() if base(f) in ("rp_thread_lean", "run_stream", "wait_for"))
        spin = sum(c for f, c in selfc.items() if base(f) in waiting)
        per_event = loop / events
        check(0 < per_event <= 15,
              f"threads: {per_event:.2f} replayer instructions per event, threaded, --wait {wait} (<= 15)")
        print(f"  threaded harness, --wait {wait}: {per_event:.2f} instructions per event on {events} events,"
              f" 4 threads (+ {spin / events:.2f} spent waiting, not judged)")


def test_missing_entries():
    """An allocator without part of the memalign family (Debian's jemalloc
    has no pvalloc): the replayer emulates the missing entry points with the
    allocator's memalign and says so, so that a pvalloc'd block comes from
    the allocator's heap and its free does not crash it. Under glibc and the
    log allocator nothing is emulated."""
    spec, nid, live = [], 0, []
    rng = random.Random(5)
    for i in range(3000):
        if live and rng.random() < 0.45:
            spec.append(("free", {"old": live.pop(rng.randrange(len(live))), "size": 0}))
            continue
        kind = rng.choice(["pvalloc", "pvalloc", "valloc", "memalign", "malloc"])
        size = rng.choice([0, 1, 100, 4095, 4096, 4097, rng.randint(1, 20000)])
        if size == 0 and kind in ("valloc", "memalign"):
            size = 1  # jemalloc's own memalign(64, 0) and valloc(0) return unaligned blocks
        extra = {"align": 4096} if kind in ("pvalloc", "valloc") else {"align": 64} if kind == "memalign" else {}
        spec.append((kind, dict(size=size, **extra)))
        live.append(nid)
        nid += 1
    trace = make_trace("pvalloc", spec)
    for name, pre, want in (("glibc", None, []), ("log", lib("log"), [])):
        rc, j, err = replay_json(["--mode", "check", trace], pre)
        check(rc == 0 and j and j["emulated"] == want,
              f"pvalloc: under {name}: nothing emulated (rc {rc}, {j and j.get('emulated')}, {err[:200]})")
    je = "/usr/lib/x86_64-linux-gnu/libjemalloc.so.2"
    if not os.path.exists(je):
        print("  SKIP pvalloc under jemalloc: libjemalloc2 is not installed (scripts/setup.sh installs it)")
        return
    for mode in ("plain", "touch", "check"):
        rc, j, err = replay_json(["--mode", mode, trace], je)
        check(rc == 0 and j is not None,
              f"pvalloc: under jemalloc, {mode} mode: exits 0 with a report (rc {rc}: {err.strip()[:300]})")
        if not j:
            continue
        check(j["emulated"] == ["pvalloc"], f"pvalloc: under jemalloc, {mode}: emulated {j['emulated']} == ['pvalloc']")
        check(j["kinds"].get("pvalloc", 0) > 0, f"pvalloc: the trace replays pvalloc calls ({j['kinds']})")
        if mode == "check":
            check(j["check"]["problems"] == 0 and j["check"]["misaligned"] == 0,
                  f"pvalloc: under jemalloc, check mode: no problems, page aligned: {j['check']}")
        if mode == "touch":
            # pvalloc rounds up to whole pages: the usable bytes show it
            check(j["usable"]["usable_at_peak_live_bytes"] >= j["peak_live_bytes"],
                  f"pvalloc: under jemalloc, touch: usable >= requested ({j['usable']})")


def main():
    os.makedirs(WORK, exist_ok=True)
    vectors = {n: os.path.join(VEC, n + ".hltrace") for n in ("basic", "fork-child", "exec-continue", "many-zstd", "skippable")}
    mods = {1: "/usr/bin/perl", 2: "/usr/lib/x86_64-linux-gnu/libc.so.6", 3: "relative/name.so"}
    stacks = {s: [(random.Random(s).randint(0, 3), random.Random(s * 7).randint(0, 1 << 40)) for _ in range(1 + s % 5)]
              for s in range(1, 40)}
    synthetic = make_trace("random", random_spec(6000, 1, stack_ids=39), modules=mods, stacks=stacks)
    for name, t in list(vectors.items()) + [("random", synthetic)]:
        test_mapping(name, t)
    for name in ("basic", "random"):
        test_site_hints(name, vectors.get(name, synthetic))
        test_site_hints(name, vectors.get(name, synthetic), via="zoosite")
    test_site_hints("basic", vectors["basic"], via="zoosite", env={"HEAPLAB_PAD": "8"})
    for name, t in [("basic", vectors["basic"]), ("fork-child", vectors["fork-child"]), ("random", synthetic)]:
        test_modes(name, t, [("glibc", None), ("bump", lib("bump"))])
    test_broken()
    test_bad_input()
    test_instructions()
    t4 = test_threads_handmade()
    test_threads_instructions(t4)
    test_ops_cache(synthetic, t4)
    test_threads_prodcons()
    test_missing_entries()
    print(f"replay tests: {passes} passed, {len(failures)} failed")
    sys.exit(1 if failures else 0)


main()
