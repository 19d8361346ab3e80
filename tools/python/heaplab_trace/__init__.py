"""heaplab traces in Python, for notebooks.

    pip install ./tools/python            # zstandard; pandas for the frames
    import heaplab_trace as ht
    t = ht.open("run.hltrace")
    t.meta["pid"], t.meta["argv"], t.end["reason"]      # named keys
    ev = t.events_frame()                               # one row per event
    sites = t.sites_frame()                             # one row per call stack
    t.write_parquet("out/")                             # events.parquet, sites.parquet (pyarrow)

The reading is tools/hltrace.py's (the project's independent reader, written
from docs/trace-format.md, which merges version-2 per-thread rows by the
format's rules); this package gives its records names and frames:

    Trace ── meta  {name: value}          META keys by name (META_KEYS)
          ├─ modules [{id, base, size, path, build_id}]
          ├─ stacks  {id: [(module id, offset), ...]}   innermost first
          ├─ threads [{index, tid, name, start_thread, start_steps}]
          ├─ events  [{index, kind, thread, thread_seq, time, size, ...}]
          └─ ends    [{name: value}]      END keys by name (END_KEYS)

sites_frame() answers per call stack what `heaplab stats` answers per site,
computed here on its own (two passes: find the program's peak, then replay
to it): allocations, bytes, bytes and objects live at the peak, leaked at
the end, temporaries (freed by their own thread with no other event of that
thread between: heaptrack's definition in the thread's own order).
"""
from . import _reader

__all__ = ["open", "Trace", "TraceError", "META_KEYS", "END_KEYS", "KINDS"]

TraceError = _reader.TraceError
KINDS = list(_reader.KINDS)

META_KEYS = {
    1: "pid", 2: "ppid", 3: "argv", 4: "start_ns", 5: "pointer_size", 6: "endianness",
    7: "time_unit_ns", 8: "stack_depth", 9: "recorder", 10: "executable", 11: "options",
    12: "parent_pid", 13: "clock",
}
END_KEYS = {
    1: "reason", 2: "status", 3: "end_ns", 4: "events", 5: "objects", 6: "unrecorded",
    7: "unknown_frees", 8: "lost", 9: "waited_ns", 10: "inflight", 11: "row_bytes",
}
END_REASONS = {1: "exit", 2: "exec", 3: "signal", 4: "closed"}


def _text(b):
    return b.decode("utf-8", "replace") if isinstance(b, (bytes, bytearray)) else b


class Trace:
    """A whole trace read into memory (for notebooks: traces of a few
    million events; `heaplab stats` and `heaplab export` stream bigger ones)."""

    def __init__(self, path):
        self.path = str(path)
        self.meta = {}
        self.modules = []
        self.stacks = {}
        self.threads = []
        self.events = []
        self.ends = []
        self.skipped = []
        for item in _reader.read(self.path):
            t = item[0]
            if t == "meta":
                m = item[1]
                self.meta = {META_KEYS.get(k, k): (_text(v) if k in (9, 10, 11, 13) else v)
                             for k, v in m.items() if k != "argv"}
                self.meta["argv_bytes"] = list(m["argv"])
                self.meta["argv"] = [_text(a) for a in m["argv"]]
            elif t == "module":
                _, mid, base, size, p, bid = item
                self.modules.append({"id": mid, "base": base, "size": size, "path": _text(p),
                                     "build_id": bid.hex()})
            elif t == "stack":
                self.stacks[item[1]] = list(item[2])
            elif t == "thread":
                start = item[4] if len(item) > 4 else None
                self.threads.append({"index": item[1], "tid": item[2], "name": _text(item[3]),
                                     "start_thread": start[0] if start else None,
                                     "start_steps": start[1] if start else None})
            elif t == "event":
                self.events.append(item[1])
            elif t == "end":
                e = {END_KEYS.get(k, k): v for k, v in item[1].items()}
                e["reason"] = END_REASONS.get(e.get("reason"), e.get("reason"))
                self.ends.append(e)
            elif t == "skipped":
                self.skipped.append({"kind": item[1], "bytes": item[2]})

    @property
    def end(self):
        """The END that closed the trace (None when it was cut short)."""
        return self.ends[-1] if self.ends else None

    def module_path(self, mid):
        for m in self.modules:
            if m["id"] == mid:
                return m["path"]
        return ""

    def frames_text(self, sid):
        """A stack as "module+0xoffset" frames, innermost first."""
        return ["%s+%#x" % (self.module_path(m).rsplit("/", 1)[-1], off) for m, off in self.stacks.get(sid, [])]

    def sites(self, temporary_within=1):
        """Per stack id: a dict of what `sites_frame` holds, and the totals."""
        unit = self.meta.get("time_unit_ns", 1) or 1
        live, peak, peak_at = 0, 0, -1
        for e in self.events:  # pass 1: the program's peak
            if e["kind"] in _reader.RELEASE or ("old" in e and not e["failed"]):
                live -= e.get("old_size", 0) if e["kind"] not in _reader.RELEASE else e["size"]
            if "id" in e:
                live += e["size"]
                if live > peak:
                    peak, peak_at = live, e["index"]
        per = {}
        objs = {}
        temporary = 0
        t0 = self.events[0]["time"] if self.events else 0

        def site(sid):
            s = per.get(sid)
            if s is None:
                s = per[sid] = {"stack": sid, "allocs": 0, "bytes": 0, "live_bytes": 0, "live_objects": 0,
                                "peak_bytes": 0, "peak_objects": 0, "temporary": 0, "freed": 0,
                                "lifetime_ns_sum": 0}
            return s

        for e in self.events:  # pass 2: per stack
            old = e.get("old")
            if old is not None and (e["kind"] in _reader.RELEASE or not e["failed"]) and old in objs:
                sid, size, thread, seq, time = objs.pop(old)
                s = per[sid]
                s["live_bytes"] -= size
                s["live_objects"] -= 1
                s["freed"] += 1
                s["lifetime_ns_sum"] += (e["time"] - time) * unit
                if thread == e["thread"] and e["thread_seq"] - seq <= temporary_within:
                    s["temporary"] += 1
                    temporary += 1
            if "id" in e:
                s = site(e["stack"])
                s["allocs"] += 1
                s["bytes"] += e["size"]
                s["live_bytes"] += e["size"]
                s["live_objects"] += 1
                owner = None if e["inherited"] else e["thread"]
                objs[e["id"]] = (e["stack"], e["size"], owner, e["thread_seq"], e["time"])
            if e["index"] == peak_at:
                for s in per.values():
                    s["peak_bytes"], s["peak_objects"] = s["live_bytes"], s["live_objects"]
        rows = []
        for s in per.values():
            rows.append({
                "stack": s["stack"], "allocs": s["allocs"], "bytes": s["bytes"],
                "peak_bytes": s["peak_bytes"], "peak_objects": s["peak_objects"],
                "leaked_bytes": s["live_bytes"], "leaked_objects": s["live_objects"],
                "temporary": s["temporary"],
                "mean_lifetime_ns": s["lifetime_ns_sum"] / s["freed"] if s["freed"] else None,
                "frames": ";".join(self.frames_text(s["stack"])),
            })
        rows.sort(key=lambda r: (-r["peak_bytes"], -r["leaked_bytes"], -r["bytes"], r["stack"]))
        totals = {
            "events": len(self.events),
            "allocations": sum(r["allocs"] for r in rows),
            "bytes_allocated": sum(r["bytes"] for r in rows),
            "peak_bytes": peak, "peak_event": peak_at,
            "leaked_bytes": sum(r["leaked_bytes"] for r in rows),
            "leaked_objects": sum(r["leaked_objects"] for r in rows),
            "temporary": temporary,
            "duration_ns": ((self.events[-1]["time"] - t0) * unit) if self.events else 0,
        }
        return rows, totals

    def events_frame(self):
        """One row per event (pandas): index, kind, thread, thread_seq, time_ns
        (from the first event), size, align, id, old, stack, failed, inherited."""
        import pandas as pd
        unit = self.meta.get("time_unit_ns", 1) or 1
        t0 = self.events[0]["time"] if self.events else 0
        cols = {k: [] for k in ("index", "kind", "thread", "thread_seq", "time_ns", "size", "align",
                                "id", "old", "stack", "failed", "inherited")}
        for e in self.events:
            cols["index"].append(e["index"])
            cols["kind"].append(e["kind"])
            cols["thread"].append(e["thread"])
            cols["thread_seq"].append(e.get("thread_seq", 0))
            cols["time_ns"].append((e["time"] - t0) * unit)
            cols["size"].append(e.get("size", 0))
            cols["align"].append(e.get("align", 0))
            cols["id"].append(e.get("id"))
            cols["old"].append(e.get("old"))
            cols["stack"].append(e["stack"])
            cols["failed"].append(e["failed"])
            cols["inherited"].append(e["inherited"])
        df = pd.DataFrame(cols)
        for c in ("id", "old"):
            df[c] = df[c].astype("Int64")
        df["kind"] = df["kind"].astype("category")
        return df

    def sites_frame(self, temporary_within=1):
        """One row per call stack (pandas), the biggest at the peak first."""
        import pandas as pd
        rows, _ = self.sites(temporary_within)
        return pd.DataFrame(rows)

    def threads_frame(self):
        import pandas as pd
        return pd.DataFrame(self.threads)

    def write_parquet(self, directory):
        """DIR/events.parquet and DIR/sites.parquet, for pandas, polars and
        DuckDB (needs pyarrow: pip install ./tools/python[parquet])."""
        import os
        try:
            import pyarrow  # noqa: F401
        except ImportError as e:
            raise RuntimeError("write_parquet needs pyarrow: pip install pyarrow") from e
        os.makedirs(directory, exist_ok=True)
        out = []
        for name, df in (("events", self.events_frame()), ("sites", self.sites_frame())):
            path = os.path.join(directory, name + ".parquet")
            tmp = os.path.join(directory, ".%s.parquet.%d.tmp" % (name, os.getpid()))
            df.to_parquet(tmp, index=False)
            os.replace(tmp, path)
            out.append(path)
        return out


def open(path):  # noqa: A001 (the module's verb, as in gzip.open)
    """Reads the trace at `path` (TraceError names what is wrong)."""
    return Trace(path)
