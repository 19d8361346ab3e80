#!/usr/bin/env bash
# Install the Debian packages heaplab needs, if any are missing. Idempotent:
# on a machine that has them all it does nothing and prints nothing.
set -euo pipefail

pkgs=(
    gcc g++ make pkg-config           # the native rooms (g++ also builds libFuzzer for fuzz/)
    libzstd-dev zstd                  # optional trace compression
    libunwind-dev                     # the agent's call-stack unwinder
    valgrind                          # instruction counts, the reference tool
    parallel                          # GNU parallel: runs the jobs of compare --plan (and its test)
    git xz-utils                      # bench/fidelity.py's multithreaded Debian programs
    libjemalloc2 libmimalloc2.0 libtcmalloc-minimal4   # peer allocators
    perl make gawk sqlite3 python3 ghostscript         # real workloads
    binutils heaptrack                # stats' checks: objcopy/strip (debug files), heaptrack's totals
    chromium                          # report.html opened in a headless browser (tests/browser.rs)
    python3-zstandard python3-pandas python3-venv python3-pip   # tools/python (notebooks)
)
# `go tool pprof` reads heaplab's pprof exports back (tests/memory.rs); any Go will do
command -v go >/dev/null || pkgs+=(golang-go)

missing=()
for p in "${pkgs[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
    echo "setup: installing ${missing[*]}" >&2
    sudo=""
    [ "$(id -u)" -eq 0 ] || sudo=sudo
    $sudo apt-get update -q
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -q --no-install-recommends "${missing[@]}"
fi

# Parquet from the notebook package (tools/python) needs pyarrow, which Debian
# does not package: a virtual environment under build/ with Debian's pandas
# and numpy and pyarrow from PyPI (before 18: the last that takes numpy 1.x).
# Without PyPI the Parquet test says so (HEAPLAB_ALLOW_SKIPS=parquet skips it).
venv="$(cd "$(dirname "$0")/.." && pwd)/build/pyarrow-venv"
if ! "$venv/bin/python" -c 'import pyarrow' 2>/dev/null; then
    echo "setup: pyarrow from PyPI into $venv (for the Parquet test)" >&2
    mkdir -p "$(dirname "$venv")"
    { /usr/bin/python3 -m venv --system-site-packages "$venv" &&
        "$venv/bin/python" -m pip install -q 'pyarrow>=14,<18'; } ||
        echo "setup: could not install pyarrow; the Parquet test will fail unless HEAPLAB_ALLOW_SKIPS=parquet" >&2
fi

if ! command -v cargo >/dev/null; then
    echo "setup: cargo is not on PATH; install Rust with rustup (https://rustup.rs) and retry" >&2
    exit 1
fi

# `make test` checks formatting and clippy: their components, when rustup
# manages the toolchain (a distribution's cargo ships them as packages).
if command -v rustup >/dev/null; then
    for c in rustfmt clippy; do
        rustup component list --installed 2>/dev/null | grep -q "^$c" || rustup component add "$c" >&2
    done
fi
