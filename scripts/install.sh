#!/usr/bin/env bash
# scripts/install.sh PREFIX [--native-only]: install what `make build` built
# into a relocatable tree (`make install PREFIX=...` runs this; `make dist`
# packs such a tree). heaplab finds its files relative to its own binary
# (crates/heaplab-plumb/src/layout.rs), so the tree works wherever it is
# moved:
#
#   PREFIX/bin/heaplab
#   PREFIX/lib/heaplab/             the agent, the zoo, the segmented allocators, valgrind/
#   PREFIX/libexec/heaplab/         heaplab-replay, hltrace-dump, hltrace-script
#   PREFIX/share/heaplab/native/    the C sources synth and segregate compile against
#   PREFIX/share/heaplab/zoo-cflags.txt, workloads/
#   PREFIX/share/man/man1/          heaplab.1, heaplab-COMMAND.1
#   PREFIX/share/bash-completion/completions/heaplab, zsh/site-functions/_heaplab,
#   PREFIX/share/fish/vendor_completions.d/heaplab.fish
#   PREFIX/share/doc/heaplab/       README.md and docs/
#
# --native-only leaves bin/ out: for `cargo install --path crates/heaplab
# --root PREFIX` beside it. HEAPLAB_BIN names the binary to install
# (default target/release/heaplab).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
[ $# -ge 1 ] || { echo "usage: scripts/install.sh PREFIX [--native-only]" >&2; exit 2; }
prefix=$1
native_only=${2:-}
bin=${HEAPLAB_BIN:-$root/target/release/heaplab}
build=$root/build

for f in "$build/lib/libheaplab-record.so" "$build/bin/heaplab-replay" "$build/zoo-cflags.txt"; do
    [ -e "$f" ] || { echo "install: $f is not built (run make build)" >&2; exit 1; }
done
[ -n "$native_only" ] || [ -x "$bin" ] || { echo "install: $bin is not built (run make build)" >&2; exit 1; }

mkdir -p "$prefix"
prefix=$(cd "$prefix" && pwd)
lib=$prefix/lib/heaplab
libexec=$prefix/libexec/heaplab
share=$prefix/share/heaplab
install -d -m 755 "$lib" "$libexec" "$share/native" "$share/workloads" \
    "$prefix/share/man/man1" "$prefix/share/doc/heaplab/docs"

# shared objects (not the test allocators), and the Valgrind tool's folder
for so in "$build"/lib/libheaplab-*.so; do
    case $(basename "$so") in
        libheaplab-test-*|libheaplab-segtest-*|libheaplab-unwind-check.so) continue ;;
    esac
    install -m 755 "$so" "$lib/"
done
if [ -d "$build/lib/valgrind" ]; then
    rm -rf "$lib/valgrind"
    cp -a "$build/lib/valgrind" "$lib/valgrind"
fi
for p in heaplab-replay hltrace-dump hltrace-script; do
    install -m 755 "$build/bin/$p" "$libexec/"
done

# the sources and flags heaplab compiles against at run time
for room in alloc common segregate; do
    install -d -m 755 "$share/native/$room"
    find "$root/native/$room" -maxdepth 1 -type f \( -name '*.c' -o -name '*.h' -o -name 'registry.txt' \) \
        -exec install -m 644 {} "$share/native/$room/" \;
done
install -m 644 "$build/zoo-cflags.txt" "$share/zoo-cflags.txt"
find "$root/workloads" -maxdepth 1 -type f -exec install -m 644 {} "$share/workloads/" \;
install -m 644 "$root/README.md" "$prefix/share/doc/heaplab/"
install -m 644 "$root"/docs/*.md "$prefix/share/doc/heaplab/docs/"

if [ -z "$native_only" ]; then
    install -d -m 755 "$prefix/bin"
    install -m 755 "$bin" "$prefix/bin/heaplab"
    # line tables stay in the build's binary (profiles, callgrind); the
    # installed one keeps its symbols (panics name functions) but not them
    if command -v strip >/dev/null; then strip --strip-debug "$prefix/bin/heaplab"; fi
    hl=$prefix/bin/heaplab
else
    hl=$bin
fi
# man pages and completions, from the command's own flags
if [ -x "$hl" ]; then
    "$hl" man "$prefix/share/man/man1" 2>/dev/null
    install -d -m 755 "$prefix/share/bash-completion/completions" \
        "$prefix/share/zsh/site-functions" "$prefix/share/fish/vendor_completions.d"
    "$hl" completions bash >"$prefix/share/bash-completion/completions/heaplab"
    "$hl" completions zsh >"$prefix/share/zsh/site-functions/_heaplab"
    "$hl" completions fish >"$prefix/share/fish/vendor_completions.d/heaplab.fish"
fi
echo "heaplab installed in $prefix"
