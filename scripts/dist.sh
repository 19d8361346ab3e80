#!/usr/bin/env bash
# scripts/dist.sh [OUT]: the release archive (`make dist`): a relocatable
# installed tree (scripts/install.sh) packed as
# OUT/heaplab-VERSION-ARCH-linux.tar.gz (OUT defaults to out/dist). Unpack
# it anywhere and run heaplab-VERSION/bin/heaplab.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
out=${1:-$root/out/dist}
version=$(sed -n 's/^version = "\(.*\)"/\1/p' "$root/Cargo.toml" | head -1)
name=heaplab-$version-$(uname -m)-linux
stage=$(mktemp -d "${TMPDIR:-/tmp}/heaplab-dist-XXXXXX")
trap 'rm -rf "$stage"' EXIT
"$root/scripts/install.sh" "$stage/heaplab-$version" >/dev/null
mkdir -p "$out"
tar -C "$stage" -czf "$out/$name.tar.gz.tmp" "heaplab-$version"
mv "$out/$name.tar.gz.tmp" "$out/$name.tar.gz"
echo "$out/$name.tar.gz"
