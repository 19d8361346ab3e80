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
#   bench/segregate-study.sh                      # the five workloads and two C programs
#   WORKLOADS="perl-wc gawk-wc sqlite" bench/segregate-study.sh
#
# Besides the bundled workloads (`heaplab workloads`), two allocation-bound C
# programs from bench/progs, built here from source (cc -O2 -g, the
# distribution's usual flags: no frame pointer, unwound through .eh_frame):
#
#   bignum     cfrac-like bignum arithmetic; every operation allocates through
#              big_new, a wrapper, so the return address alone rarely decides.
#              Inputs: `bignum STEPS PERIOD` with PERIOD 400 / 700 / 550 (the
#              numbers grow to different sizes on each input).
#   jsonparse  a cJSON-like parser; xmalloc wraps malloc.  Inputs: a document
#              generated with seed 1 / 2 / 3 (different records, different sizes).
#
# Settings (environment):
#   WORKLOADS   workloads to study (default: perl-wc gawk-wc sqlite make-n python
#               bignum jsonparse)
#   REC_SCALE   input scale of the recordings (default 0.05: recording under
#               Valgrind with every reference runs 20-60 times slower)
#   RUN_SCALE   input scale of the real program's runs (default 1, the full input)
#   REPEATS     wall-time rounds (default 5)
#   OUT         output folder (default out/segregate-study)
#   FORCE=1     record again even if the traces exist
#   RECORD_ONLY=1  record the traces and stop (they do not depend on the
#               allocators: record early, while the libraries still change)
#
# Output: OUT/NAME.txt (the tables), OUT/NAME.json, OUT/NAME/report.html and
# the emitted libraries; OUT/all.txt and OUT/all/report.html for every program;
# OUT/commands.txt (every command this script ran).
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
layout() { python3 "$root/bench/heaplab_layout.py" "$1"; }
hl=$(layout heaplab)
WORKLOADS=${WORKLOADS:-"perl-wc gawk-wc sqlite make-n python bignum jsonparse"}
REC_SCALE=${REC_SCALE:-0.05}
RUN_SCALE=${RUN_SCALE:-1}
REPEATS=${REPEATS:-5}
OUT=${OUT:-$root/out/segregate-study}
FORCE=${FORCE:-0}
RECORD_ONLY=${RECORD_ONLY:-0}

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

# The C programs of bench/progs: built once into OUT/progs.
progs=$OUT/progs
build_prog() {
    local p=$1
    mkdir -p "$progs"
    if [ ! -x "$progs/$p" ] || [ "$root/bench/progs/$p.c" -nt "$progs/$p" ]; then
        run "cc -O2 -g -o $progs/$p.tmp $root/bench/progs/$p.c && mv $progs/$p.tmp $progs/$p" >&2
    fi
}

# A workload's command line (as `heaplab workloads NAME --variant V --scale S`
# prints it): the bundled ones from heaplab, the C programs from here.
workload_cmd() {
    local w=$1 v=$2 scale=$3
    case $w in
    bignum)
        build_prog bignum
        local periods=(0 400 700 550)
        local steps
        steps=$(python3 -c "print(max(1000, int(150000 * $scale)))")
        echo "$progs/bignum $steps ${periods[$v]}"
        ;;
    jsonparse)
        build_prog jsonparse
        local recs doc
        recs=$(python3 -c "print(max(200, int(20000 * $scale)))")
        doc=$progs/doc-$v-$recs.json
        if [ ! -s "$doc" ]; then
            run "$progs/jsonparse --gen $recs $v >$doc.tmp && mv $doc.tmp $doc"
        fi
        echo "$progs/jsonparse $doc 3"
        ;;
    *) "$hl" workloads "$w" --variant "$v" --scale "$scale" ;;
    esac
}

# A workload's command line is "VAR=VALUE ... PROGRAM ARGS [< FILE]": the
# settings go to heaplab record's environment (which Valgrind passes on), so
# that the program itself is what runs under the tool.
record() {
    local w=$1 v=$2 out=$3
    local cmd envs="" rest
    cmd=$(workload_cmd "$w" "$v" "$REC_SCALE")
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
    [ "$RECORD_ONLY" = 1 ] && continue
    test_cmd=$(workload_cmd "$w" 3 "$RUN_SCALE")
    run "$hl segregate --train $OUT/traces/$w-1.hltrace --threshold $OUT/traces/$w-2.hltrace \
        --test $OUT/traces/$w-3.hltrace -o $OUT/$w --json $OUT/$w.json --report $OUT/$w \
        --run-test \"$test_cmd\" --cwd $root --repeats $REPEATS >$OUT/$w.txt"
    jsons+=("$OUT/$w.json")
done
if [ "$RECORD_ONLY" = 1 ]; then
    echo "segregate-study: $((SECONDS - t0)) s; traces in $OUT/traces"
    exit 0
fi
run "$hl segregate --combine ${jsons[*]} --report $OUT/all >$OUT/all.txt"
echo "segregate-study: $((SECONDS - t0)) s; tables in $OUT/all.txt, figures in $OUT/all/report.html"
