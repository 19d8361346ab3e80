#!/usr/bin/env bash
# The replayer's tests (test_replay.py says what they check).
# usage: run.sh BINDIR LIBDIR WORKDIR
set -eu
here=$(cd "$(dirname "$0")" && pwd)
rm -rf "$3"
mkdir -p "$3"
exec python3 "$here/test_replay.py" "$1" "$2" "$3" "$here/../../../testdata/vectors"
