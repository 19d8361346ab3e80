"""heaplab-trace TRACE [--sites N] [--csv]: totals and the biggest call
stacks at the peak, from the Python reader (a notebook's view, on a shell)."""
import argparse
import json
import sys

import heaplab_trace


def main():
    ap = argparse.ArgumentParser(prog="heaplab-trace", description=__doc__)
    ap.add_argument("trace")
    ap.add_argument("--sites", type=int, default=10)
    ap.add_argument("--json", action="store_true", help="totals and sites as JSON")
    a = ap.parse_args()
    try:
        t = heaplab_trace.open(a.trace)
    except heaplab_trace.TraceError as e:
        sys.exit("heaplab-trace: %s: %s" % (a.trace, e))
    rows, totals = t.sites()
    if a.json:
        json.dump({"meta": {k: v for k, v in t.meta.items() if k != "argv_bytes"}, "end": t.end,
                   "threads": t.threads, "totals": totals, "sites": rows[:a.sites]}, sys.stdout, indent=1)
        print()
        return
    print(json.dumps(totals))
    for r in rows[:a.sites]:
        print("%12d B at peak %12d B leaked %8d allocs  %s" % (r["peak_bytes"], r["leaked_bytes"], r["allocs"],
                                                                 r["frames"].encode("unicode_escape").decode()))


if __name__ == "__main__":
    main()
