#!/usr/bin/env bash
# The long fuzzing run of issue 17: every fuzz target for --minutes each
# (default 60), one after the other, from the committed corpus, with peak
# memory and findings per target. Not part of make test (which runs each
# target for a few seconds: fuzz/run.sh smoke).
#
#   bench/fuzz.sh [--minutes N] [--targets a,b] [--json FILE] [--keep-corpus DIR]
#
# Writes a summary table, and with --json the figures: inputs run, inputs per
# second, corpus growth, peak RSS, findings. Exit status 1 when any target
# found something (its input is in fuzz/artifacts/TARGET/).
set -euo pipefail
cd "$(dirname "$0")/.."
minutes=60
targets=$(fuzz/run.sh list | paste -sd, -)
json=""
keep=""
while [ $# -gt 0 ]; do
    case $1 in
    --minutes) minutes=$2; shift 2 ;;
    --targets) targets=$2; shift 2 ;;
    --json) json=$2; shift 2 ;;
    --keep-corpus) keep=$2; shift 2 ;;
    *) sed -n '2,12p' "$0"; exit 2 ;;
    esac
done
fuzz/run.sh build
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
secs=$((minutes * 60))
status=0
rows=()
printf '%-14s %8s %12s %10s %8s %8s %s\n' target seconds inputs inputs/s corpus rss_MB finding
for t in ${targets//,/ }; do
    dir=${keep:+$keep/$t}
    dir=${dir:-$work/$t}
    log=$work/$t.log
    start=$(date +%s)
    if fuzz/run.sh run "$t" "$secs" "$dir" >"$log" 2>&1; then found=none; else found=yes; status=1; fi
    took=$(($(date +%s) - start))
    execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log")
    rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log")
    rss=$(sed -n 's/^stat::peak_rss_mb: *//p' "$log")
    corpus=$(find "$dir" -type f | wc -l)
    if [ "$found" = yes ]; then
        # libFuzzer's own verdict ("ERROR: libFuzzer: timeout after 11
        # seconds", "... deadly signal", "... out-of-memory") or the Rust
        # panic, not its explanatory lines; then where it saved the input
        found=$( (grep -m1 -oE "ERROR: libFuzzer: .*|panicked at .*" "$log" || echo "failed: see the log") |
            head -1 | cut -c1-80)
        unit=$(sed -n 's/.*Test unit written to \(.*\)$/\1/p' "$log" | head -1)
        [ -n "$unit" ] && found="$found; input: $unit"
    fi
    printf '%-14s %8s %12s %10s %8s %8s %s\n' "$t" "$took" "${execs:-?}" "${rate:-?}" "$corpus" "${rss:-?}" "$found"
    rows+=("{\"target\": \"$t\", \"seconds\": $took, \"inputs\": ${execs:-null}, \"inputs_per_s\": ${rate:-null}, \"corpus\": $corpus, \"peak_rss_mb\": ${rss:-null}, \"finding\": $( [ "$found" = none ] && echo null || echo "\"${found//\"/\'}\"" )}")
done
if [ -n "$json" ]; then
    mkdir -p "$(dirname "$json")"
    (IFS=,; echo "[${rows[*]}]") >"$json"
fi
exit $status
