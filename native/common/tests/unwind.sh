#!/bin/sh
# unwind.sh BINDIR LIBDIR WORKDIR [AGENT]: hl_unwind (native/common/hl_unwind.c)
# against libunwind, frame for frame.
#
#   1. the oracle programs (C, C without the libunwind fallback, C++): -O2
#      without frame pointers, recursion, alloca, big frames, a signal frame,
#      threads, exceptions, operator new;
#   2. real programs (perl, python3, make, gawk, sqlite3) under
#      libheaplab-unwind-check.so, whose malloc compares both walks on every
#      Nth call.  Any mismatch fails; walks handed to libunwind are fine.
set -eu
BIN=$1 LIB=$2 WORK=$3 AGENT=${4:-}
mkdir -p "$WORK"
fail=0
. "$(dirname "$0")/../../../scripts/skips.sh"

"$BIN/unwind-oracle" 3000 || fail=1
"$BIN/unwind-oracle-nolu" 3000 || fail=1
"$BIN/unwind-oracle-cxx" 1500 || fail=1

# a small text for the word counts
words="$WORK/words.txt"
i=0
: >"$words"
while [ $i -lt 300 ]; do
    echo "the quick brown fox $i jumps over the lazy dog $((i % 17)) and runs" >>"$words"
    i=$((i + 1))
done

check() { # NAME COMMAND...
    name=$1
    shift
    out="$WORK/$name.out"
    rm -f "$out"
    if ! HEAPLAB_UNWIND_CHECK_OUT="$out" LD_PRELOAD="$LIB/libheaplab-unwind-check.so" "$@" >"$WORK/$name.stdout" 2>"$WORK/$name.stderr"; then
        echo "unwind check: $name: the program failed under the checker (see $WORK/$name.stderr)"
        fail=1
        return
    fi
    if [ ! -s "$out" ]; then
        echo "unwind check: $name: no report written"
        fail=1
        return
    fi
    # pid walks frames fallbacks mismatches, one line per process
    set -- $(awk '{p++; w+=$2; f+=$3; b+=$4; m+=$5} END {print p+0, w+0, f+0, b+0, m+0}' "$out")
    echo "unwind check: $name: $1 processes, $2 walks, $3 frames, $4 handed to libunwind, $5 mismatches"
    if [ "$2" -eq 0 ] || [ "$5" -ne 0 ]; then
        fail=1
        sed -n 1,40p "$WORK/$name.stderr"
    fi
}

check perl perl -ne '$c{$_}++ for split; END { print join(",", map {"$_=$c{$_}"} sort keys %c), "\n" }' "$words"
PYTHONMALLOC=malloc check python3 python3 -c '
import collections, json, re
c = collections.Counter(re.findall(r"\w+", open("'"$words"'").read()))
print(json.dumps(sorted(c.items()))[:60])'
check make make -n -f "$(dirname "$0")/unwind_make.mk" WORDS="$words"
check gawk gawk '{ for (i = 1; i <= NF; i++) c[$i]++ } END { for (w in c) n++; print n }' "$words"
if command -v sqlite3 >/dev/null 2>&1; then
    check sqlite3 sqlite3 :memory: 'create table t(a, b);
        with recursive s(x) as (select 1 union all select x + 1 from s where x < 3000)
        insert into t select x, hex(randomblob(24)) from s;
        create index i on t(b); select count(*), sum(length(b)) from t group by a % 7;'
else
    allow_skip sqlite3 "sqlite3 is not installed (scripts/setup.sh installs it)" || fail=1
fi

# 3. the agent end to end: perl recorded with 16-frame stacks (walks too
#    long for the agent's memo of walks) and with 8 (the default: most walks
#    answered by the memo) by each walker gives the same stack table and the
#    same stack per event (sizes and times may differ: the environment
#    differs by the variable's value)
if [ -n "${AGENT:-}" ] && [ -x "$BIN/hltrace-dump" ]; then
    for d in 16 8; do
        for m in fast libunwind; do
            rm -f "$WORK/perl-$m.hltrace"*
            PERL_HASH_SEED=0 PERL_PERTURB_KEYS=0 HEAPLAB_UNWIND=$m HEAPLAB_RECORD_OUT="$WORK/perl-$m.hltrace" \
                HEAPLAB_RECORD_STACK_DEPTH=$d LD_PRELOAD="$AGENT" \
                perl -ne '$c{$_}++ for split; END { print scalar(keys %c), "\n" }' "$words" >/dev/null
            "$BIN/hltrace-dump" "$WORK/perl-$m.hltrace" |
                sed -n -e 's/ time=[0-9]*//' -e 's/ size=[0-9]*//' -e '/^stack /p' -e '/^event /p' >"$WORK/perl-$m.txt"
        done
        n=$(grep -c '^stack ' "$WORK/perl-fast.txt" || true)
        if [ "$n" -gt 20 ] && cmp -s "$WORK/perl-fast.txt" "$WORK/perl-libunwind.txt"; then
            echo "unwind check: agent: perl's trace has the same $n stacks ($d frames) and events with either walker"
        else
            echo "unwind check: agent: perl's traces differ between HEAPLAB_UNWIND=fast and libunwind ($d frames, $n stacks):"
            diff "$WORK/perl-fast.txt" "$WORK/perl-libunwind.txt" | sed -n 1,10p
            fail=1
        fi
    done
else
    allow_skip unwind-agent "no agent given, or $BIN/hltrace-dump is not built" || fail=1
fi

if [ $fail -ne 0 ]; then
    echo "unwind tests: FAILED"
    exit 1
fi
echo "unwind tests: ok"
