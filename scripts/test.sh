#!/usr/bin/env bash
# Every test heaplab has. `make test` (and so .ci/run) runs this after building.
set -euo pipefail
cd "$(dirname "$0")/.."

echo "== rust: formatting and clippy (the workspace's lints, warnings are errors)"
cargo fmt --all --check
cargo clippy --release --workspace --all-targets --quiet -- -D warnings

# A check that cannot run fails; HEAPLAB_ALLOW_SKIPS=NAME,... skips named
# ones on purpose (scripts/skips.sh lists the names).
echo "== the skip rule"
scripts/check-skips.sh

echo "== rust: unit and integration tests"
cargo test --release --workspace --quiet

echo "== native: C test programs"
make -C native test --no-print-directory

echo "== damaged traces through every reader (issue 17's audit, the quick set)"
python3 bench/mutation-audit.py --quick

echo "== fuzz targets, a few seconds each (bench/fuzz.sh runs them for an hour)"
fuzz/run.sh smoke
