#!/usr/bin/env python3
"""Checks on agent traces, reading the dump text form (hltrace-dump's output).

  check.py region EXPECTED DUMP [MODULE]
      The events between the marker allocations (tprog.h) must be exactly
      the expected lines the test program printed. With MODULE, the first
      frame of every allocation there must lie in a module whose path
      contains MODULE (the stack starts at the caller of malloc).
  check.py counts COUNTLINE DUMPCOUNTS
      The agent's per-kind counts (hltrace-dump --counts) must equal the
      counting preload's line for the same pid, frees of objects the
      recorder never saw allocated included.
"""
import re
import sys

MARK_BEGIN, MARK_END = 987654321, 987654322


def fields(line):
    return dict(m.groups() for m in re.finditer(r'(\w+)=("(?:[^"\\]|\\.)*"|\S*)', line))


def parse_dump(path):
    modules, stacks, events = {}, {}, []
    with open(path, encoding="utf-8", errors="replace") as f:
        for line in f:
            w = line.split()
            if not w:
                continue
            if w[0] == "module":
                modules[int(w[1])] = fields(line)["path"].strip('"')
            elif w[0] == "stack":
                frames = line.split("frames=", 1)[1].split()
                stacks[int(w[1])] = [(int(a), int(b, 16)) for a, b in (x.split(":") for x in frames)]
            elif w[0] == "event":
                e = fields(line)
                e["kind"] = w[2]
                e["failed"] = " failed" in line
                events.append(e)
    return modules, stacks, events


def region(expected_path, dump_path, module=None):
    with open(expected_path) as f:
        lines = [l.strip() for l in f]
    want = lines[lines.index("begin") + 1 : lines.index("end")]
    modules, stacks, events = parse_dump(dump_path)
    try:
        start = next(i for i, e in enumerate(events) if e["kind"] == "malloc" and e.get("size") == str(MARK_BEGIN))
        end = next(i for i, e in enumerate(events) if e["kind"] == "malloc" and e.get("size") == str(MARK_END))
    except StopIteration:
        sys.exit(f"{dump_path}: marker allocations not found")
    labels = {}
    got = []

    def lab(i):
        return f"#{labels[i]}" if i in labels else f"#?{i}"

    for e in events[start + 1 : end]:
        k = e["kind"]
        if k in ("free", "realloc_free"):
            got.append(f"{k} {lab(e['old'])}")
            continue
        s = k
        if k == "realloc":
            s += " null" if e["old"] == "null" else f" {lab(e['old'])}"
        s += f" {e['size']}"
        if "align" in e:
            s += f" {e['align']}"
        if e["failed"]:
            s += " failed"
        else:
            labels[e["id"]] = len(labels)
            s += f" -> #{labels[e['id']]}"
        got.append(s)
        if module and not e["failed"]:
            st = int(e["stack"])
            if st == 0:
                sys.exit(f"{dump_path}: {s}: no stack recorded")
            m, _ = stacks[st][0]
            if module not in modules.get(m, "(no module)"):
                sys.exit(f"{dump_path}: {s}: first frame in {modules.get(m, 'no module')}, not {module}")
    if got != want:
        print(f"{dump_path}: the events between the markers differ from what the program did", file=sys.stderr)
        for i in range(max(len(got), len(want))):
            g = got[i] if i < len(got) else "-"
            w = want[i] if i < len(want) else "-"
            print(f"  {'  ' if g == w else '!='} want {w:<40} got {g}", file=sys.stderr)
        sys.exit(1)
    print(f"region ok: {len(got)} events")


def counts(count_line, dump_counts):
    c = dict(kv.split("=") for kv in count_line.split())
    d = dict(kv.split("=", 1) for kv in dump_counts.split())
    bad = []
    for k in ("malloc", "calloc", "realloc", "memalign", "posix_memalign", "aligned_alloc", "valloc", "pvalloc",
              "realloc_free"):
        if int(c[k]) != int(d[k]):
            bad.append(f"{k}: counted {c[k]}, recorded {d[k]}")
    # a free of an object the recorder never saw is counted, not written
    if int(c["free"]) != int(d["free"]) + int(d.get("unknown_frees", 0)):
        bad.append(f"free: counted {c['free']}, recorded {d['free']} + {d.get('unknown_frees')} unknown")
    if bad:
        sys.exit("counts differ: " + "; ".join(bad))
    print(f"counts ok: {d['events']} events, unrecorded {d.get('unrecorded')}, unknown frees {d.get('unknown_frees')}")


if __name__ == "__main__":
    if sys.argv[1] == "region":
        region(*sys.argv[2:])
    elif sys.argv[1] == "counts":
        counts(sys.argv[2], sys.argv[3])
    else:
        sys.exit(__doc__)
