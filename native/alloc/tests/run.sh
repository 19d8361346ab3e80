#!/usr/bin/env bash
# The allocator test suite: every test on every registered allocator, with
# glibc (no preload) as the control.  Normally started by
#
#   make -C native alloc-test [ALLOCATORS="a b"] [ALLOC_TESTS="conform random ..."]
#
# which passes --lib/--bin/--work/--registry.  Tests (matrix columns):
#
#   info      the .so exports the API and heaplab_alloc_*, and its info record
#             matches registry.txt
#   conform   tests/conform.c: the C library's promises, fork; again with
#             HEAPLAB_GENERIC=1 (the shim's own realloc and memalign)
#   random    tests/random.c: 200000 seeded operations with the checker every
#             64; then 20000 with HEAPLAB_CHECK=1; then 50000 under HEAPLAB_PAD=8,
#             then 50000 with HEAPLAB_GENERIC=1
#   threads   tests/threads.c: 4 threads, cross-thread frees
#   digest    tests/digest.c: the address digest of 400000 seeded operations
#             (where every block lands, its usable size, the peak footprint)
#             equals the allocator's line in tests/digests.txt; "-" where it
#             has none (glibc, a path).  A change that moves a block changes it:
#             update the line only for a change meant to place blocks differently
#   programs  perl, python3, sqlite3, make, gawk, gs on generated inputs:
#             stdout and exit status identical to glibc's (one column each)
#
# An allocator is a name from registry.txt, or the path of any malloc in a
# shared object, [LABEL=]/path/libNAME.so (e.g. one `heaplab synth` built):
#
#   run.sh ... --allocators "bsd /tmp/out/libcustom_perl.so"
#
# A path's info test checks its exports, not the registry.
#
# Allocators run two at a time (--jobs).  Prints a PASS/FAIL matrix; exits 1
# if any cell failed, with the end of each failing log.
set -uo pipefail

here=$(cd "$(dirname "$0")" && pwd)
lib="" bin="" work="" registry="" allocators="" tests="info conform random threads digest programs"
jobs=${HEAPLAB_TEST_JOBS:-2}
limit=${HEAPLAB_TEST_TIMEOUT:-600}

usage() {
    echo "usage: $0 --lib DIR --bin DIR --work DIR --registry FILE [--allocators \"a b\"] [--tests \"t1 t2\"] [--jobs N]" >&2
    exit 2
}
while (($#)); do
    case $1 in
    --lib) lib=$2; shift 2 ;;
    --bin) bin=$2; shift 2 ;;
    --work) work=$2; shift 2 ;;
    --registry) registry=$2; shift 2 ;;
    --allocators) allocators=$2; shift 2 ;;
    --tests) tests=$2; shift 2 ;;
    --jobs) jobs=$2; shift 2 ;;
    *) echo "run.sh: unknown argument '$1'" >&2; usage ;;
    esac
done
[ -n "$lib" ] && [ -n "$bin" ] && [ -n "$work" ] && [ -n "$registry" ] || usage

registered=$(awk -F'|' '/^[ \t]*[a-z0-9_]/ { gsub(/[ \t]/,"",$1); print $1 }' "$registry")
[ -n "$allocators" ] || allocators=$registered
# The label of an allocator (its row in the matrix) and its preload.
label_of() {
    case $1 in
    *=*/*) echo "${1%%=*}" ;;
    */*) local b=${1##*/}; b=${b%%.so*}; echo "${b#lib}" ;;
    *) echo "$1" ;;
    esac
}
preload_of() {
    case $1 in
    glibc) echo "" ;;
    */*) echo "${1#*=}" ;;
    *) echo "$lib/libheaplab-$1.so" ;;
    esac
}
labels=""
for a in $allocators; do
    labels="$labels $(label_of "$a")"
    case $a in
    */*)
        [ -f "$(preload_of "$a")" ] || { echo "run.sh: no such shared object: $(preload_of "$a")" >&2; exit 2; }
        continue ;;
    esac
    if ! grep -qx "$a" <<<"$registered"; then
        echo "run.sh: '$a' is not in $registry (registered: $(echo $registered))" >&2
        exit 2
    fi
done
for t in $tests; do
    case $t in
    info | conform | random | threads | digest | programs) ;;
    *) echo "run.sh: unknown test '$t' (tests: info conform random threads digest programs)" >&2; exit 2 ;;
    esac
done

# Every tunable an allocator reads must be in the table of native/alloc/README.md.
for v in $(grep -ho 'hl_tunable("[A-Z0-9_]*"' "$here"/../*.c | sed 's/.*("//; s/"//' | sort -u); do
    grep -q "^| \`$v\` |" "$here/../README.md" || {
        echo "run.sh: tunable $v is read by native/alloc but missing from the table in native/alloc/README.md" >&2
        exit 1
    }
done

programs="perl python3 sqlite3 make gawk gs"
columns=""
for t in $tests; do
    if [ "$t" = programs ]; then columns="$columns $programs"; else columns="$columns $t"; fi
done

python=/usr/bin/python3
[ -x "$python" ] || python=$(command -v python3)
in=$work/inputs

# The command line of a real program (run in $in).  Inputs are sized so that
# the slowest classic allocators (sequential fits scanning long free lists:
# nextfit, firstfit, gnugpp on python3) finish in seconds, not minutes.
prog_cmd() {
    case $1 in
    perl) echo "perl $here/programs/work.pl 15000" ;;
    python3) echo "env PYTHONMALLOC=malloc PYTHONHASHSEED=0 $python $here/programs/work.py 4000" ;;
    sqlite3) echo "sqlite3 -bail :memory: -init /dev/null" ;; # SQL on stdin
    make) echo "env -u MAKEFLAGS -u MAKELEVEL -u MFLAGS make -s -f $in/work.mk" ;;
    gawk) echo "gawk -f $here/programs/work.awk $in/text.txt" ;;
    gs) echo "gs -q -dNODISPLAY -dBATCH -dNOPAUSE -dSAFER $here/programs/work.ps" ;;
    esac
}
prog_stdin() { if [ "$1" = sqlite3 ]; then echo "$in/work.sql"; else echo /dev/null; fi; }

# run_prog PROG PRELOAD OUT: stdout to OUT, exit status echoed
# With a preload, the shim appends its statistics to OUT.stats at exit, so
# that the test can tell the allocator really ran (a library that fails to
# load leaves the program on glibc, which would pass for the wrong reason).
run_prog() {
    local p=$1 pre=$2 out=$3
    rm -f "$out.stats"
    (cd "$in" && timeout "$limit" env ${pre:+LD_PRELOAD=$pre HEAPLAB_STATS=$out.stats} $(prog_cmd "$p") \
        <"$(prog_stdin "$p")" >"$out" 2>"$out.err")
    echo $?
}

# True when OUT.stats shows the preloaded allocator served mallocs.
served() {
    [ -s "$1.stats" ] && grep -q '"mallocs": *[1-9]' "$1.stats"
}

# ---- one allocator: every selected test, one result file per column ----
one() {
    local item=$1 a pre
    a=$(label_of "$item")
    pre=$(preload_of "$item")
    local res=$work/results/$a logd=$work/logs/$a t0=$SECONDS
    mkdir -p "$res" "$logd"
    local P="${pre:+LD_PRELOAD=$pre}"
    for t in $tests; do
        case $t in
        info)
            if [ "$a" = glibc ]; then echo "-" >"$res/info"; continue; fi
            {
                ok=1
                for s in malloc free calloc realloc reallocarray posix_memalign aligned_alloc memalign \
                    valloc pvalloc malloc_usable_size heaplab_alloc_stats heaplab_alloc_stats_reset_peak \
                    heaplab_alloc_check heaplab_alloc_info heaplab_site_hint; do
                    nm -D --defined-only "$pre" | awk '{print $3}' | grep -qx "$s" || { echo "missing export $s"; ok=0; }
                done
                got=$(env $P "$bin/alloc-conform" --info)
                echo "info:     $got"
                case $item in
                */*) [ -n "$got" ] || { echo "no info record"; ok=0; } ;;
                *)
                    want=$(awk -F'|' -v n="$a" '/^[ \t]*[a-z0-9_]/ { k=$1; gsub(/[ \t]/,"",k); if (k==n) {
                        for (i=1;i<=4;i++) { gsub(/^[ \t]+|[ \t]+$/,"",$i) } print $1 "|" $3 "|" $4 } }' "$registry")
                    echo "registry: $want"
                    [ "$want" = "$got" ] || { echo "info record differs from registry.txt"; ok=0; }
                    ;;
                esac
                [ $ok = 1 ]
            } >"$logd/info.log" 2>&1 && echo PASS >"$res/info" || echo FAIL >"$res/info"
            ;;
        conform)
            {
                timeout "$limit" env $P "$bin/alloc-conform" &&
                    if [ -n "$pre" ]; then timeout "$limit" env $P HEAPLAB_GENERIC=1 "$bin/alloc-conform"; fi
            } >"$logd/conform.log" 2>&1 && echo PASS >"$res/conform" || echo FAIL >"$res/conform"
            ;;
        random)
            {
                timeout "$limit" env $P "$bin/alloc-random" 1 200000 64 &&
                    timeout "$limit" env $P HEAPLAB_CHECK=1 "$bin/alloc-random" 2 20000 0 &&
                    timeout "$limit" env $P HEAPLAB_PAD=8 "$bin/alloc-random" 3 50000 64 &&
                    timeout "$limit" env $P HEAPLAB_GENERIC=1 "$bin/alloc-random" 4 50000 64
            } >"$logd/random.log" 2>&1 && echo PASS >"$res/random" || echo FAIL >"$res/random"
            ;;
        threads)
            timeout "$limit" env $P "$bin/alloc-threads" 60000 >"$logd/threads.log" 2>&1 &&
                echo PASS >"$res/threads" || echo FAIL >"$res/threads"
            ;;
        digest)
            want=$(awk -v n="$a" '$1 == n { print $2 }' "$here/digests.txt")
            if [ -z "$pre" ] || [ -z "$want" ]; then echo "-" >"$res/digest"; continue; fi
            {
                got=$(timeout "$limit" env $P "$bin/alloc-digest" 1 400000) && echo "$got" &&
                    echo "expected: digest $want (tests/digests.txt)" &&
                    [ "$(awk '{ print $2 }' <<<"$got")" = "$want" ]
            } >"$logd/digest.log" 2>&1 && echo PASS >"$res/digest" || echo FAIL >"$res/digest"
            ;;
        programs)
            for p in $programs; do
                local out=$work/out/$a.$p
                mkdir -p "$work/out"
                start=$(date +%s.%N)
                rc=$(run_prog "$p" "$pre" "$out")
                end=$(date +%s.%N)
                want_rc=$(cat "$work/expected/$p.rc")
                {
                    echo "command: ${pre:+LD_PRELOAD=$pre }$(prog_cmd "$p") < $(prog_stdin "$p")"
                    echo "exit status $rc (glibc $want_rc), $(awk -v s="$start" -v e="$end" 'BEGIN{printf "%.2f", e-s}') s"
                    tail -5 "$out.err"
                } >"$logd/$p.log"
                if [ -n "$pre" ] && ! served "$out"; then
                    echo "the allocator did not serve this program (no mallocs in $out.stats)" >>"$logd/$p.log"
                    echo FAIL >"$res/$p"
                elif [ "$rc" = "$want_rc" ] && cmp -s "$out" "$work/expected/$p.out"; then
                    echo PASS >"$res/$p"
                else
                    cmp "$out" "$work/expected/$p.out" >>"$logd/$p.log" 2>&1
                    echo FAIL >"$res/$p"
                fi
            done
            ;;
        esac
    done
    echo "  done: $a ($((SECONDS - t0)) s)"
}

# Each run gets its own directory, so that runs started at the same time (by
# several engineers, or make -j) do not trample each other; a passing run's
# directory is removed at the end, a failing one is kept for its logs.
mkdir -p "$work"
work=$(mktemp -d "$work/run.XXXXXX") || exit 1
in=$work/inputs
mkdir -p "$work/results" "$work/logs"

# ---- the real programs' expected output: glibc, twice (the workloads must be deterministic) ----
if grep -qw programs <<<"$tests"; then
    "$here/programs/gen.sh" "$in" || { echo "run.sh: generating inputs failed" >&2; exit 1; }
    mkdir -p "$work/expected"
    for p in $programs; do
        command -v "${p/python3/$python}" >/dev/null || { echo "run.sh: $p is not installed (scripts/setup.sh installs it)" >&2; exit 1; }
        rc1=$(run_prog "$p" "" "$work/expected/$p.out")
        rc2=$(run_prog "$p" "" "$work/expected/$p.again")
        echo "$rc1" >"$work/expected/$p.rc"
        if [ "$rc1" != 0 ] || [ "$rc2" != 0 ] || ! cmp -s "$work/expected/$p.out" "$work/expected/$p.again"; then
            echo "run.sh: the $p workload is broken or not deterministic under glibc (exit $rc1/$rc2):" >&2
            tail -5 "$work/expected/$p.out.err" >&2
            exit 1
        fi
    done
fi

echo "allocator tests: $(echo $allocators | wc -w) allocators + glibc; tests:$columns ($jobs at a time)"
export -f one run_prog served prog_cmd prog_stdin label_of preload_of
export here lib bin work registry tests programs python in limit
t0=$(date +%s)
printf '%s\n' glibc $allocators | xargs -P "$jobs" -I{} bash -c 'one "$@"' _ {}
t1=$(date +%s)

# ---- the matrix ----
fail=0
printf '\n%-14s' allocator
for c in $columns; do printf ' %-8s' "$c"; done
printf '\n'
for a in glibc $labels; do
    printf '%-14s' "$a"
    for c in $columns; do
        r=$(cat "$work/results/$a/$c" 2>/dev/null || echo "?")
        [ "$r" = PASS ] || [ "$r" = "-" ] || fail=1
        printf ' %-8s' "$r"
    done
    printf '\n'
done
echo "($((t1 - t0)) s; logs in $work/logs)"
if ((fail)); then
    for a in glibc $labels; do
        for c in $columns; do
            r=$(cat "$work/results/$a/$c" 2>/dev/null || echo "?")
            if [ "$r" != PASS ] && [ "$r" != "-" ]; then
                log=$work/logs/$a/$c.log
                echo "---- FAIL $a / $c ($log)"
                tail -15 "$log" 2>/dev/null
            fi
        done
    done
    exit 1
fi
rm -rf "$work"
