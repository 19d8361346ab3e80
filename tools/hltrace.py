#!/usr/bin/env python3
"""An independent reader of heaplab traces (versions 1 and 2), written from
docs/trace-format.md.

It exists to check the Rust and C readers and `heaplab stats` against
something that shares no code with them. Deliberately plain: no speed tricks,
no dependencies (compressed blocks go through the `zstandard` module where
it is installed, else through the `zstd` command). Version-2
traces are merged by the rules the format states ("The merge"), written out
again here from the text, not from the other readers.

    python3 tools/hltrace.py dump TRACE            # the text dump (testdata/vectors/README.md)
    python3 tools/hltrace.py profile TRACE [--unit R]   # size-class table as JSON
"""
import heapq
import json
import struct
import subprocess
import sys

KINDS = ["malloc", "calloc", "realloc", "memalign", "posix_memalign", "aligned_alloc",
         "valloc", "pvalloc", "free", "realloc_free"]
RELEASE = {"free", "realloc_free"}
ALIGNED = {"memalign", "posix_memalign", "aligned_alloc", "valloc", "pvalloc"}


_TABLE = []
for _i in range(256):
    _c = _i
    for _ in range(8):
        _c = (_c >> 1) ^ (0x82F63B78 if _c & 1 else 0)
    _TABLE.append(_c)


def crc32c_fast(data):
    crc = 0xFFFFFFFF
    for b in data:
        crc = _TABLE[(crc ^ b) & 0xFF] ^ (crc >> 8)
    return crc ^ 0xFFFFFFFF


class Cur:
    def __init__(self, b):
        self.b, self.p = b, 0

    def done(self):
        return self.p >= len(self.b)

    def var(self):
        v, s = 0, 0
        while True:
            x = self.b[self.p]
            self.p += 1
            v |= (x & 0x7F) << s
            if x < 0x80:
                return v
            s += 7

    def bytes(self):
        n = self.var()
        r = self.b[self.p:self.p + n]
        self.p += n
        return r


try:
    import zstandard as _zstd
except ImportError:  # the reader works without it, through the command
    _zstd = None


def unzstd(payload, raw):
    """One zstd frame of `raw` bytes (what the block header says), decoded."""
    if _zstd is not None:
        try:
            return _zstd.ZstdDecompressor().decompress(payload, max_output_size=max(raw, 1))
        except _zstd.ZstdError as e:
            raise TraceError("zstd: %s" % e)
    return subprocess.run(["zstd", "-d", "-c", "-q"], input=payload, capture_output=True, check=True).stdout


class TraceError(Exception):
    pass


def blocks(data):
    """(kind, flags, raw payload, offset) of each block, checked."""
    pos = 16
    nblock = 0
    last_end = None  # the reason of the END block just read
    while pos < len(data):
        if last_end is not None and last_end != 2:
            raise TraceError("trailing data after the END block at %d" % pos)
        if len(data) - pos < 24:
            raise TraceError("truncated header at %d" % pos)
        magic, kind, codec, flags, stored, raw, number, crc = struct.unpack_from("<4sBBHIIII", data, pos)
        if magic != b"HLBK":
            raise TraceError("bad magic at %d" % pos)
        payload = data[pos + 24:pos + 24 + stored]
        if len(payload) < stored:
            raise TraceError("truncated block at %d" % pos)
        if crc32c_fast(data[pos:pos + 20] + payload) != crc:
            raise TraceError("checksum at %d" % pos)
        if number != nblock:
            raise TraceError("block number at %d" % pos)
        if flags & ~1:
            raise TraceError("reserved flag bits at %d" % pos)
        nblock += 1
        at = pos
        pos += 24 + stored
        if codec == 1:
            payload = unzstd(payload, raw)
        if len(payload) != raw:
            raise TraceError("raw length")
        last_end = None
        if kind == 6:
            try:
                last_end = end_of(Cur(payload)).get(1)
            except (TraceError, IndexError):
                pass  # the caller reports a bad END
        yield kind, flags, payload, at


def meta_of(c):
    m = {"argv": []}
    while not c.done():
        k = c.var()
        v = c.bytes()
        if k == 3:
            m["argv"].append(v)
        elif k in (9, 10, 11, 13):
            m[k] = v
        else:
            m[k] = Cur(v).var()
    return m


def end_of(c):
    m = {}
    while not c.done():
        k = c.var()
        m[k] = Cur(c.bytes()).var()
    if 1 not in m or 4 not in m:
        raise TraceError("END lacks reason or events")
    return m


def read(path):
    """Yields ("meta", dict), ("module", ...), ("stack", id, frames), ("thread", ...),
    ("event", dict), ("end", dict): definitions in file order, events in the
    merged order (the same as file order in version 1)."""
    data = open(path, "rb").read()
    if data[:8] != b"HLTRACE\0":
        raise TraceError("not a heaplab trace")
    version = struct.unpack_from("<H", data, 8)[0]
    if version == 2:
        yield from read_v2(data)
        return
    if version != 1:
        raise TraceError("version")
    pos = 16
    nblock = 0
    live = {}
    next_id = 0
    time = 0
    index = 0
    nstacks = 0
    seqs = {}
    last_end = None
    while pos < len(data):
        if last_end is not None and last_end != 2:
            raise TraceError("trailing data after the END block at %d" % pos)
        if len(data) - pos < 24:
            raise TraceError("truncated header at %d" % pos)
        magic, kind, codec, flags, stored, raw, number, crc = struct.unpack_from("<4sBBHIIII", data, pos)
        if magic != b"HLBK":
            raise TraceError("bad magic at %d" % pos)
        payload = data[pos + 24:pos + 24 + stored]
        if len(payload) < stored:
            raise TraceError("truncated block at %d" % pos)
        if crc32c_fast(data[pos:pos + 20] + payload) != crc:
            raise TraceError("checksum at %d" % pos)
        if number != nblock:
            raise TraceError("block number at %d" % pos)
        if flags & ~1:
            raise TraceError("reserved flag bits at %d" % pos)
        nblock += 1
        pos += 24 + stored
        if codec == 1:
            payload = unzstd(payload, raw)
        if len(payload) != raw:
            raise TraceError("raw length")
        c = Cur(payload)
        if kind == 1:
            m = {"argv": []}
            while not c.done():
                k = c.var()
                v = c.bytes()
                if k == 3:
                    m["argv"].append(v)
                elif k in (9, 10, 11, 13):
                    m[k] = v
                else:
                    m[k] = Cur(v).var()
            yield ("meta", m)
        elif kind == 2:
            while not c.done():
                yield ("module", c.var(), c.var(), c.var(), c.bytes(), c.bytes())
        elif kind == 3:
            while not c.done():
                sid, n = c.var(), c.var()
                nstacks += 1
                yield ("stack", sid, [(c.var(), c.var()) for _ in range(n)])
        elif kind == 4:
            while not c.done():
                yield ("thread", c.var(), c.var(), c.bytes())
        elif kind == 5:
            n, first_event, first_id, base_time = c.var(), c.var(), c.var(), c.var()
            assert first_event == index and first_id == next_id and base_time == time
            cols = [Cur(c.bytes()) for _ in range(7)]
            ops, threads, times, sizes, aligns, refs, stacks = cols
            for i in range(n):
                op = ops.b[i]
                k = KINDS[op & 15]
                failed, old_null, has_stack, inherited = op & 16, op & 32, op & 64, op & 128
                e = {"index": index, "kind": k, "thread": threads.var()}
                time += times.var()
                e["time"] = time
                if k not in RELEASE:
                    e["size"] = sizes.var()
                if k in ALIGNED:
                    e["align"] = aligns.var()
                if k in RELEASE or (k == "realloc" and not old_null):
                    old = next_id - 1 - refs.var()
                    if old not in live:
                        raise TraceError("ref to dead object %d" % old)
                    e["old"] = old
                    e["old_size"] = live[old]
                    if k in RELEASE:
                        e["size"] = live[old]
                    if k in RELEASE or not failed:
                        del live[old]
                e["stack"] = stacks.var() if has_stack else 0
                e["failed"] = bool(failed)
                e["inherited"] = bool(inherited)
                if k not in RELEASE and not failed:
                    e["id"] = next_id
                    live[next_id] = e["size"]
                    next_id += 1
                index += 1
                e["thread_seq"] = seqs.get(e["thread"], 0)
                seqs[e["thread"]] = e["thread_seq"] + 1
                yield ("event", e)
        elif kind == 6:
            m = end_of(c)
            last_end = m[1]
            yield ("end", m)
        elif flags & 1:
            yield ("skipped", kind, raw)
        else:
            raise TraceError("unknown stream kind 0x%02x" % kind)


# ---------------------------------------------------------------- version 2

RING = 4096
M64 = (1 << 64) - 1


def unzz(v):
    return (v >> 1) ^ -(v & 1)


def ticks_to_ns(tick, tsc_ref, ns_ref, mult):
    d = tick - tsc_ref
    if d >= 1 << 63:
        d -= 1 << 64
    v = ns_ref + ((d * mult) >> 32)
    return min(max(v, 0), M64)


class Stream:
    """One thread's rows: its decoder state and the events not yet merged."""

    def __init__(self, start):
        self.start = start  # (thread, steps) or None
        self.events = self.steps = self.bytes = 0
        self.prev = self.nalloc = self.nfree = self.tick = 0
        self.slots = {}  # src % 64 -> (src, steps)
        self.allocs, self.frees = [], []
        self.stamp = None  # (event index, ns)
        self.q = []
        self.qh = 0
        self.half = False
        self.done = 0  # steps emitted

    def head(self):
        return self.q[self.qh] if self.qh < len(self.q) else None


def read_v2(data):
    streams, stacks = [], 0
    live = {}  # address -> (id, size, thread, seq)
    state = {"next_id": 0, "last_out": 0, "unknown": 0, "rows": 0, "bytes": 0, "round": None,
             "closed": None, "index": 0, "events": False}

    def addr(s, c, role):
        code = c.var()
        if code == 0:
            return 0
        v = code - 1
        tag, val = v & 3, v >> 2
        if tag == 0:
            a = (s.prev + (unzz(val) << 4)) & M64
        elif tag in (1, 2):
            ring = s.allocs if tag == 1 else s.frees
            if val >= len(ring) or val >= RING:
                raise TraceError("names an allocation or release the thread's stream does not hold")
            a = ring[-1 - val]
        else:
            if val:
                raise TraceError("bad address code")
            a = (s.prev + unzz(c.var())) & M64
        if a == 0:
            raise TraceError("an address of 0 written as a delta")
        s.prev = a
        if role == "new":
            s.allocs.append(a)
            del s.allocs[:-RING]
        elif role == "gone":
            s.frees.append(a)
            del s.frees[:-RING]
        return a

    def edge(s, c):
        src = c.var()
        z = c.var()
        k = src % 64
        base = s.slots[k][1] if k in s.slots and s.slots[k][0] == src else 0
        n = (base + unzz(z)) & M64
        s.slots[k] = (src, n)
        return (src, n)

    def events_block(p):
        c = Cur(p)
        th, rnd, first, tsc_ref, ns_ref, mult = [c.var() for _ in range(6)]
        if th >= len(streams):
            raise TraceError("thread %d is not defined" % th)
        if c.done():
            raise TraceError("no rows")
        if state["round"] is not None and rnd < state["round"]:
            raise TraceError("rounds never go back")
        s = streams[th]
        if first != s.bytes:
            raise TraceError("a block is missing")
        rows_at = c.p
        out = []
        steps = s.steps
        while not c.done():
            op = c.b[c.p]
            c.p += 1
            k = op & 15
            if k >= len(KINDS):
                raise TraceError("reserved kind %d" % k)
            e = {"kind": KINDS[k], "seq": s.events + len(out), "round": rnd, "size": 0, "align": 0,
                 "old": 0, "addr": 0, "e1": None, "e2": None, "stack": 0, "two": False, "time": None}
            if op & 0x20:
                s.tick = (s.tick + c.var()) & M64
                e["time"] = ticks_to_ns(s.tick, tsc_ref, ns_ref, mult)
            if op & 0x80:
                e["e2"] = edge(s, c)
            if op & 0x40:
                e["e1"] = edge(s, c)
            if k == 2:
                e["old"] = addr(s, c, "old")
                e["size"] = c.var()
                e["addr"] = addr(s, c, "new")
                e["two"] = e["old"] != 0
            elif k in (8, 9):
                if c.b[c.p] == 0:
                    raise TraceError("%s of NULL" % KINDS[k])
                e["addr"] = addr(s, c, "gone")
                e["two"] = k == 9
            else:
                e["size"] = c.var()
                if KINDS[k] in ALIGNED:
                    e["align"] = c.var()
                e["addr"] = addr(s, c, "new")
            if op & 0x10:
                e["stack"] = c.var()
                if e["stack"] == 0 or e["stack"] > stacks:
                    raise TraceError("stack %d is not defined" % e["stack"])
            if op & 0x80 and not e["two"]:
                raise TraceError("EDGE2 on a one-step event")
            for d in (e["e1"], e["e2"]):
                if d and (d[0] >= len(streams) or d[0] == th or d[1] == 0):
                    raise TraceError("bad edge")
            steps += 2 if e["two"] else 1
            out.append(e)
        # times between stamps, interpolated by event index
        last = s.stamp
        for i, e in enumerate(out):
            if e["time"] is not None:
                last = (e["seq"], e["time"])
                continue
            if last is None:
                raise TraceError("no time stamp before it")
            nxt = next((x for x in out[i + 1:] if x["time"] is not None), None)
            pe, pt = last
            if nxt is not None and nxt["time"] > pt:
                e["time"] = pt + (nxt["time"] - pt) * (e["seq"] - pe) // (nxt["seq"] - pe)
            else:
                e["time"] = pt
        s.stamp = last
        s.events += len(out)
        s.steps = steps
        s.bytes += len(p) - rows_at
        s.q.extend(out)
        state["rows"] += len(out)
        state["bytes"] += len(p) - rows_at
        state["round"] = rnd
        state["events"] = True

    def waits_for(t):
        """None if thread t's head may go now, else (thread, steps) it waits for, or "none"."""
        s = streams[t]
        p = s.head()
        if p is None or state["closed"] is None or p["round"] > state["closed"]:
            return "none"
        if s.done == 0 and s.start and streams[s.start[0]].done < s.start[1]:
            return s.start
        d = p["e2"] if p["two"] and not s.half else p["e1"]
        if d and streams[d[0]].done < d[1]:
            return d
        return None

    def merge():
        """The merged events that can go now, least (time, thread) first."""
        while True:
            ready = [t for t in range(len(streams)) if waits_for(t) is None]
            if not ready:
                return
            t = min(ready, key=lambda t: (streams[t].head()["time"], t))
            s = streams[t]
            p = s.head()
            if p["two"] and not s.half:
                a = p["old"] if p["kind"] == "realloc" else p["addr"]
                failed = p["kind"] == "realloc" and p["addr"] == 0 and p["size"] != 0
                p["stash"] = None if failed else live.pop(a, None)
                s.half = True
                s.done += 1
                continue
            s.qh += 1
            s.half = False
            s.done += 1
            e = event(t, p)
            if e is not None:
                yield e

    def event(t, p):
        e = {"index": state["index"], "kind": p["kind"], "thread": t, "thread_seq": p["seq"],
             "time": max(p["time"], state["last_out"]), "size": p["size"], "stack": p["stack"],
             "failed": False, "inherited": False, "after": [d for d in (p["e2"], p["e1"]) if d]}
        if p["kind"] in ALIGNED:
            e["align"] = p["align"]
        create = 0
        k = p["kind"]

        def frm(o):
            e["old"], e["old_size"] = o[0], o[1]

        if k == "free":
            o = live.pop(p["addr"], None)
            if o is None:
                state["unknown"] += 1
                return None
            frm(o)
            e["size"] = o[1]
        elif k == "realloc_free" or (k == "realloc" and p["two"] and p["addr"] == 0 and p["size"] == 0):
            e["kind"] = "realloc_free"
            o = p.get("stash")
            if o is None:
                state["unknown"] += 1
                return None
            frm(o)
            e["size"] = o[1]
        elif k == "realloc" and not p["two"]:
            create = p["addr"]
        elif k == "realloc" and p["addr"] == 0:
            o = live.get(p["old"])
            if o is not None:
                frm(o)
        elif k == "realloc":
            o = p.get("stash")
            if o is not None:
                frm(o)
            else:
                state["unknown"] += 1
            create = p["addr"]
        else:
            create = p["addr"]
        if e["kind"] not in RELEASE:
            if create == 0:
                e["failed"] = True
            else:
                live[create] = (state["next_id"], p["size"], t, p["seq"])
                e["id"] = state["next_id"]
                state["next_id"] += 1
        state["last_out"] = e["time"]
        state["index"] += 1
        return e

    def close(rnd):
        state["closed"] = rnd if rnd is not None else 0

    last_end = None
    for kind, flags, p, at in blocks(data):
        if last_end is not None and last_end != 2:
            raise TraceError("a block follows the END block")
        last_end = None
        c = Cur(p)
        if kind == 1:
            if at != 16:
                raise TraceError("a second META block")
            yield ("meta", meta_of(c))
        elif kind == 2:
            while not c.done():
                yield ("module", c.var(), c.var(), c.var(), c.bytes(), c.bytes())
        elif kind == 3:
            while not c.done():
                sid, n = c.var(), c.var()
                stacks += 1
                yield ("stack", sid, [(c.var(), c.var()) for _ in range(n)])
        elif kind == 4:
            while not c.done():
                idx, tid, name = c.var(), c.var(), c.bytes()
                st = c.var()
                start = None
                if st:
                    start = (st - 1, c.var())
                    if st - 1 >= idx or start[1] == 0:
                        raise TraceError("bad start edge")
                streams.append(Stream(start))
                yield ("thread", idx, tid, name, start)
        elif kind == 5:
            rnd = Cur(p).var() and None
            cc = Cur(p)
            cc.var()
            rnd = cc.var()
            if state["round"] is not None and rnd > state["round"]:
                close(state["round"])
                yield from (("event", e) for e in merge())
            events_block(p)
            yield from (("event", e) for e in merge())
        elif kind == 7:
            if state["events"] or state["next_id"]:
                raise TraceError("INHERITED comes first")
            n, t = c.var(), c.var()
            for _ in range(n):
                k = KINDS[c.var()]
                size = c.var()
                align = c.var() if k in ALIGNED else 0
                a, st = c.var(), c.var()
                if a in live or a == 0:
                    raise TraceError("bad inherited object")
                live[a] = (state["next_id"], size, 0, 0)
                e = {"index": state["index"], "kind": k, "thread": 0, "thread_seq": 0, "time": t,
                     "size": size, "stack": st, "failed": False, "inherited": True, "after": [],
                     "id": state["next_id"]}
                if k in ALIGNED:
                    e["align"] = align
                state["next_id"] += 1
                state["index"] += 1
                state["last_out"] = t
                yield ("event", e)
        elif kind == 6:
            m = end_of(c)
            if m.get(11) != state["bytes"] or (m[4] != state["rows"] and not m.get(10)):
                raise TraceError("END counts differ")
            close(state["round"])
            yield from (("event", e) for e in merge())
            while any(s.head() is not None for s in streams):
                # only a thread that was inside a hook at the end excuses a
                # wait for a step the trace does not hold
                t = next(t for t, s in enumerate(streams) if s.head() is not None)
                d = waits_for(t)
                if not m.get(10) or d in (None, "none") or d[1] <= streams[d[0]].steps:
                    raise TraceError("events wait for steps that never come")
                s = streams[t]
                if s.done == 0 and s.start == d:
                    s.start = None
                elif s.head()["two"] and not s.half:
                    s.head()["e2"] = None
                else:
                    s.head()["e1"] = None
                yield from (("event", e) for e in merge())
            m[4] = state["index"]
            m[5] = state["next_id"]
            m[7] = state["unknown"]
            last_end = m[1]
            yield ("end", m)
        elif flags & 1:
            yield ("skipped", kind, len(p))
        else:
            raise TraceError("unknown stream kind 0x%02x" % kind)
    if last_end is None:
        close(state["round"])
        yield from (("event", e) for e in merge())
        raise TraceError("no END block: the recording was cut short")


def quote(b):
    out = ['"']
    for x in b:
        ch = chr(x)
        if ch == '"':
            out.append('\\"')
        elif ch == "\\":
            out.append("\\\\")
        elif ch == "\n":
            out.append("\\n")
        elif ch == "\t":
            out.append("\\t")
        elif 0x20 <= x <= 0x7E:
            out.append(ch)
        else:
            out.append("\\x%02x" % x)
    out.append('"')
    return "".join(out)


def dump(path, out):
    reasons = {1: "exit", 2: "exec", 3: "signal", 4: "closed"}
    version = struct.unpack_from("<H", open(path, "rb").read(10), 8)[0]
    out.write("hltrace %d\n" % version)
    for item in read(path):
        t = item[0]
        if t == "meta":
            m = item[1]
            g = lambda k: str(m[k]) if k in m else "-"
            out.write("meta pid=%d ppid=%s start_ns=%d pointer_size=%d endian=%s time_unit_ns=%d stack_depth=%d\n"
                      % (m[1], g(2), m[4], m[5], "little" if m[6] == 0 else "big", m[7], m[8]))
            out.write("meta argv=%s\n" % " ".join(quote(a) for a in m["argv"]))
            s = lambda k: quote(m.get(k, b""))
            out.write("meta recorder=%s executable=%s options=%s clock=%s parent_pid=%s\n"
                      % (s(9), s(10), s(11), s(13), g(12)))
        elif t == "module":
            _, mid, base, size, p, bid = item
            out.write("module %d base=%#x size=%#x path=%s build_id=%s\n" % (mid, base, size, quote(p), bid.hex()))
        elif t == "stack":
            out.write("stack %d frames=%s\n" % (item[1], " ".join("%d:%#x" % f for f in item[2])))
        elif t == "thread":
            start = item[4] if len(item) > 4 else None
            out.write("thread %d tid=%d name=%s%s\n" % (item[1], item[2], quote(item[3]),
                                                       " start=%d:%d" % start if start else ""))
        elif t == "event":
            e = item[1]
            s = "event %d %s thread=%d time=%d" % (e["index"], e["kind"], e["thread"], e["time"])
            if e["kind"] in RELEASE:
                s += " old=%d" % e["old"]
            elif e["kind"] == "realloc":
                s += " old=%s" % (e["old"] if "old" in e else "null")
            if e["failed"]:
                s += " failed"
            elif "id" in e:
                s += " id=%d" % e["id"]
            s += " size=%d" % e["size"]
            if e["kind"] in ALIGNED:
                s += " align=%d" % e["align"]
            s += " stack=%d" % e["stack"]
            if e["inherited"]:
                s += " inherited"
            if e.get("after"):
                s += " after=" + ",".join("%d:%d" % d for d in e["after"])
            out.write(s + "\n")
        elif t == "end":
            m = item[1]
            out.write("end reason=%s status=%d end_ns=%d events=%d objects=%d unrecorded=%d unknown_frees=%d"
                      % (reasons.get(m.get(1), str(m.get(1))), m.get(2, 0), m.get(3, 0), m.get(4, 0), m.get(5, 0),
                         m.get(6, 0), m.get(7, 0)))
            if version >= 2:
                out.write(" lost=%d waited_ns=%d inflight=%d" % (m.get(8, 0), m.get(9, 0), m.get(10, 0)))
            out.write("\n")
        elif t == "skipped":
            out.write("skipped kind=%#04x bytes=%d\n" % (item[1], item[2]))


def profile(path, unit):
    """The size-class table, computed the plain way (see heaplab_trace::profile)."""
    cls = {}
    live = {}  # id -> (class, size)
    live_bytes = peak = peak_objs = 0
    allocations = frees = reallocs = 0
    for item in read(path):
        if item[0] != "event":
            continue
        e = item[1]
        if e["failed"]:
            continue
        if e["kind"] == "realloc" and "old" in e:
            reallocs += 1
        if "old" in e:
            c, size = live.pop(e["old"])
            r = cls[c]
            r["frees"] += 1
            r["live"] -= 1
            r["fl"] += 1
            frees += 1
            live_bytes -= size
        if "id" in e:
            c = max(1, -(-e["size"] // unit)) * unit
            r = cls.setdefault(c, {"allocs": 0, "frees": 0, "live": 0, "max_live": 0, "live_sum": 0, "fl": 0, "fl_sum": 0})
            r["allocs"] += 1
            r["fl_sum"] += r["fl"]
            r["fl"] = max(0, r["fl"] - 1)
            r["live"] += 1
            r["max_live"] = max(r["max_live"], r["live"])
            r["live_sum"] += r["live"]
            live[e["id"]] = (c, e["size"])
            allocations += 1
            live_bytes += e["size"]
            peak = max(peak, live_bytes)
            peak_objs = max(peak_objs, len(live))
    classes = [{"size": c, "allocs": r["allocs"], "frees": r["frees"], "max_live": r["max_live"],
                "mean_live": r["live_sum"] / r["allocs"], "mean_free_list": r["fl_sum"] / r["allocs"]}
               for c, r in cls.items()]
    classes.sort(key=lambda r: (-r["allocs"], r["size"]))
    return {"allocations": allocations, "frees": frees, "reallocs": reallocs, "peak_live_bytes": peak,
            "peak_live_objects": peak_objs, "size_classes": classes}


def main():
    if len(sys.argv) < 3 or sys.argv[1] not in ("dump", "profile"):
        sys.exit(__doc__)
    if sys.argv[1] == "dump":
        dump(sys.argv[2], sys.stdout)
    else:
        unit = int(sys.argv[sys.argv.index("--unit") + 1]) if "--unit" in sys.argv else 8
        json.dump(profile(sys.argv[2], unit), sys.stdout, indent=1)
        print()


if __name__ == "__main__":
    main()
