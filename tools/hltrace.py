#!/usr/bin/env python3
"""An independent reader of heaplab traces, written from docs/trace-format.md.

It exists to check the Rust reader and `heaplab stats` against something that
shares no code with them. Deliberately plain: no speed tricks, no dependencies
(compressed blocks go through the `zstd` command).

    python3 tools/hltrace.py dump TRACE            # the text dump (testdata/vectors/README.md)
    python3 tools/hltrace.py profile TRACE [--unit R]   # size-class table as JSON
"""
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


class TraceError(Exception):
    pass


def read(path):
    """Yields ("meta", dict), ("module", ...), ("stack", id, frames), ("thread", ...),
    ("event", dict), ("end", dict) in file order."""
    data = open(path, "rb").read()
    if data[:8] != b"HLTRACE\0":
        raise TraceError("not a heaplab trace")
    if struct.unpack_from("<H", data, 8)[0] != 1:
        raise TraceError("version")
    pos = 16
    nblock = 0
    live = {}
    next_id = 0
    time = 0
    index = 0
    nstacks = 0
    while pos < len(data):
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
        nblock += 1
        pos += 24 + stored
        if codec == 1:
            payload = subprocess.run(["zstd", "-d", "-c", "-q"], input=payload, capture_output=True, check=True).stdout
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
                yield ("event", e)
        elif kind == 6:
            m = {}
            while not c.done():
                k = c.var()
                m[k] = Cur(c.bytes()).var()
            yield ("end", m)
        elif flags & 1:
            yield ("skipped", kind, raw)
        else:
            raise TraceError("unknown stream kind 0x%02x" % kind)


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
    out.write("hltrace 1\n")
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
            out.write("thread %d tid=%d name=%s\n" % (item[1], item[2], quote(item[3])))
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
            out.write(s + "\n")
        elif t == "end":
            m = item[1]
            out.write("end reason=%s status=%d end_ns=%d events=%d objects=%d unrecorded=%d unknown_frees=%d\n"
                      % (reasons.get(m.get(1), str(m.get(1))), m.get(2, 0), m.get(3, 0), m.get(4, 0), m.get(5, 0),
                         m.get(6, 0), m.get(7, 0)))
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
