"""Where heaplab's files are, for the bench scripts: the Python twin of
crates/heaplab-plumb/src/layout.rs (keep the two in step).

    from heaplab_layout import LAYOUT, zoo_names, write_json
    LAYOUT.heaplab            # the heaplab binary
    LAYOUT.lib("libheaplab-record.so"), LAYOUT.bin("heaplab-replay")
    zoo_names()               # the allocators of native/alloc/registry.txt, in order
    write_json(path, obj)     # a temporary name beside path, then a rename

$HEAPLAB_HOME (a checkout, or a prefix `make install` filled) wins; else the
checkout this file is in. From a shell: `python3 bench/heaplab_layout.py
heaplab|lib|bin|native|root` prints that path.
"""
import os
import sys
from pathlib import Path

_REGISTRY = Path("alloc/registry.txt")


class Layout:
    def __init__(self, root, installed):
        self.root = Path(root)
        self.installed = installed
        if installed:
            share = self.root / "share/heaplab"
            self.heaplab = self.root / "bin/heaplab"
            self.lib_dir = self.root / "lib/heaplab"
            self.bin_dir = self.root / "libexec/heaplab"
            self.native = share / "native"
            self.workloads = share / "workloads"
        else:
            self.heaplab = self.root / "target/release/heaplab"
            self.lib_dir = self.root / "build/lib"
            self.bin_dir = self.root / "build/bin"
            self.native = self.root / "native"
            self.workloads = self.root / "workloads"
        self.registry = self.native / _REGISTRY
        self.valgrind_lib = self.lib_dir / "valgrind"

    def lib(self, name):
        return self.lib_dir / name

    def bin(self, name):
        return self.bin_dir / name


def discover():
    home = os.environ.get("HEAPLAB_HOME")
    if home:
        h = Path(home).resolve()
        if (h / "share/heaplab/native" / _REGISTRY).is_file():
            return Layout(h, True)
        if (h / "native" / _REGISTRY).is_file():
            return Layout(h, False)
        sys.exit(f"HEAPLAB_HOME={home} is neither a heaplab checkout nor an install prefix")
    return Layout(Path(__file__).resolve().parent.parent, False)


LAYOUT = discover()
ROOT = LAYOUT.root


def zoo_names(layout=LAYOUT):
    """The zoo's allocators: the first field of every line of registry.txt
    that is not blank or a comment."""
    names = []
    with open(layout.registry) as f:
        for line in f:
            line = line.strip()
            if line and not line.startswith("#"):
                names.append(line.split("|")[0].strip())
    return names


def write_json(path, obj, indent=1):
    """Writes obj as JSON to path the safe way: its directory made if need
    be, a fresh temporary name beside it (mkstemp), then a rename, so a
    reader never sees half a file and a link at path is replaced, never
    followed."""
    import json
    import tempfile
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(fd, "w") as f:
            json.dump(obj, f, indent=indent)
            f.write("\n")
        os.replace(tmp, path)
    except BaseException:
        os.unlink(tmp)
        raise


if __name__ == "__main__":
    what = sys.argv[1] if len(sys.argv) > 1 else "root"
    paths = {
        "root": LAYOUT.root, "heaplab": LAYOUT.heaplab, "lib": LAYOUT.lib_dir,
        "bin": LAYOUT.bin_dir, "native": LAYOUT.native, "valgrind": LAYOUT.valgrind_lib,
    }
    if what == "zoo":
        print("\n".join(zoo_names()))
    elif what in paths:
        print(paths[what])
    else:
        sys.exit(f"usage: {sys.argv[0]} root|heaplab|lib|bin|native|valgrind|zoo")


def compare_records(path):
    """The records of a `heaplab compare --json` file: a document with
    schema, provenance and records (schema version 2), or the bare array of
    records older heaplabs wrote (version 1)."""
    import json
    with open(path) as f:
        doc = json.load(f)
    return doc["records"] if isinstance(doc, dict) else doc
