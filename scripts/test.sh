#!/usr/bin/env bash
# Every test heaplab has. `make test` (and so .ci/run) runs this after building.
set -euo pipefail
cd "$(dirname "$0")/.."

echo "== rust: formatting and clippy (the workspace's lints, warnings are errors)"
cargo fmt --all --check
cargo clippy --release --workspace --all-targets --quiet -- -D warnings

echo "== rust: unit and integration tests"
cargo test --release --workspace --quiet

echo "== native: C test programs"
make -C native test --no-print-directory
