#!/usr/bin/env bash
# bench/segregate-study.sh: paper 001's study (Seidl and Zorn, segregating
# heap objects by reference behaviour and lifetime) on the bundled workloads.
#
# For each workload: record its three inputs with references (training,
# threshold, test: `heaplab workloads NAME --variant 1|2|3`), run
# `heaplab segregate` on them (thresholds searched on input 2, predictors
# trained on input 1, everything measured on input 3, the real program run on
# input 3 at RUN_SCALE for the lookup cost and the wall times), then combine
# every program into one report.
#
#   bench/segregate-study.sh                      # all five workloads
#   WORKLOADS="perl-wc gawk-wc sqlite" bench/segregate-study.sh
#
# Settings (environment):
#   WORKLOADS   workloads to study (default: perl-wc gawk-wc sqlite make-n python)
#   REC_SCALE   input scale of the recordings (default 0.05: recording under
#               Valgrind with every reference runs 20-60 times slower)
#   RUN_SCALE   input scale of the real program's runs (default 1, the full input)
#   REPEATS     wall-time rounds (default 5)
#   OUT         output folder (default out/segregate-study)
#   FORCE=1     record again even if the traces exist
#
# Output: OUT/NAME.txt (the tables), OUT/NAME.json, OUT/NAME/report.html and
# the emitted libraries; OUT/all.txt and OUT/all/report.html for every program;
# OUT/commands.txt (every command this script ran).
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
layout() { python3 "$root/bench/heaplab_layout.py" "$1"; }
hl=$(layout heaplab)
WORKLOADS=${WORKLOADS:-"perl-wc gawk-wc sqlite make-n python"}
REC_SCALE=${REC_SCALE:-0.05}
RUN_SCALE=${RUN_SCALE:-1}
REPEATS=${REPEATS:-5}
OUT=${OUT:-$root/out/segregate-study}
FORCE=${FORCE:-0}

[ -x "$hl" ] || { echo "segregate-study: $hl is not built (run make)" >&2; exit 1; }
[ -e "$(layout valgrind)" ] || { echo "segregate-study: the Valgrind tool is not built (run make)" >&2; exit 1; }
mkdir -p "$OUT/traces"
cd "$root"
log=$OUT/commands.txt
: >"$log"

run() {
    echo "$*" >>"$log"
    eval "$@"
}

# A workload's command line is "VAR=VALUE ... PROGRAM ARGS [< FILE]": the
# settings go to heaplab record's environment (which Valgrind passes on), so
# that the program itself is what runs under the tool.
record() {
    local w=$1 v=$2 out=$3
    local cmd envs="" rest
    cmd=$("$hl" workloads "$w" --variant "$v" --scale "$REC_SCALE")
    rest=$cmd
    while [[ $rest =~ ^([A-Za-z_][A-Za-z0-9_]*=[^[:space:]]*)[[:space:]]+(.*)$ ]]; do
        envs+="${BASH_REMATCH[1]} "
        rest=${BASH_REMATCH[2]}
    done
    run "env $envs $hl record --refs --stack-depth 12 -o $out -- $rest >/dev/null"
}

t0=$SECONDS
jsons=()
for w in $WORKLOADS; do
    echo "== $w"
    for v in 1 2 3; do
        t=$OUT/traces/$w-$v.hltrace
        if [ "$FORCE" = 1 ] || [ ! -s "$t" ]; then
            record "$w" "$v" "$t"
        fi
    done
    test_cmd=$("$hl" workloads "$w" --variant 3 --scale "$RUN_SCALE")
    run "$hl segregate --train $OUT/traces/$w-1.hltrace --threshold $OUT/traces/$w-2.hltrace \
        --test $OUT/traces/$w-3.hltrace -o $OUT/$w --json $OUT/$w.json --report $OUT/$w \
        --run-test \"$test_cmd\" --cwd $root --repeats $REPEATS >$OUT/$w.txt"
    jsons+=("$OUT/$w.json")
done
run "$hl segregate --combine ${jsons[*]} --report $OUT/all >$OUT/all.txt"
echo "segregate-study: $((SECONDS - t0)) s; tables in $OUT/all.txt, figures in $OUT/all/report.html"
