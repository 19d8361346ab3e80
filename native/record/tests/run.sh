#!/usr/bin/env bash
# The recording agent's tests (make -C native record-test). Not a benchmark.
#
#  - small C and C++ programs: every malloc-API entry point and its edge
#    cases, threads and cross-thread frees, fork, exec, fatal signals,
#    SIGKILL mid-run, the calloc bootstrap, C++ new/delete;
#  - real programs (perl, make, sqlite3, python3 with PYTHONMALLOC=malloc):
#    same output and exit status as without the agent, a valid trace, and
#    event counts equal to those of an independent counting preload
#    (libheaplab-count.so) on the same deterministic run;
#  - when the Rust side is built, its reader must print the same dump.
#
# usage: run.sh BUILD_DIR        (BUILD_DIR/lib, BUILD_DIR/bin)
set -u
build=$(cd "$1" && pwd)
bin=$build/bin
agent=$build/lib/libheaplab-record.so
counter=$build/lib/libheaplab-count.so
dump=$bin/hltrace-dump
here=$(cd "$(dirname "$0")" && pwd)
check="python3 $here/check.py"
heaplab=$build/../target/release/heaplab
work=$(mktemp -d /tmp/hl-record-test.XXXXXX)
pass=0
fail=0
finished=0
# An early exit (a command that failed under set -u, a missing tool) must
# fail loudly, never pass by printing nothing.
on_exit() {
    rc_=$?
    rm -rf "$work"
    if [ $finished -ne 1 ]; then
        echo "FAIL record tests: stopped early (status $rc_) after $((pass + fail)) checks" >&2
        exit 1
    fi
}
trap on_exit EXIT

ok() {
    pass=$((pass + 1))
    echo "ok   $*"
}
bad() {
    fail=$((fail + 1))
    echo "FAIL $*" >&2
}

# rec NAME [VAR=VALUE...] -- COMMAND...: runs COMMAND under the agent, trace
# in $work/NAME.hltrace (children: NAME.hltrace.PID), stdout in NAME.out,
# stderr in NAME.err, exit status in $rc.
rec() {
    local name=$1
    shift
    local envs=()
    while [ "$1" != "--" ]; do
        envs+=("$1")
        shift
    done
    shift
    rm -f "$work/$name".hltrace*
    env HEAPLAB_RECORD_OUT="$work/$name.hltrace" "${envs[@]}" LD_PRELOAD="$agent" "$@" \
        >"$work/$name.out" 2>"$work/$name.err"
    rc=$?
}

# a trace that must read without error; its --counts line in $counts
valid() {
    local t=$1 what=$2
    if ! "$dump" "$t" >"$t.txt" 2>"$t.readerr"; then
        bad "$what: $(cat "$t.readerr")"
        return 1
    fi
    counts=$("$dump" --counts "$t")
    return 0
}

field() { sed -n "s/.* $1=\([^ ]*\).*/\1/p" <<<"$2"; }

# ---------------------------------------------------------------- the API, with stacks on and off
for depth in 8 0; do
    rec basic$depth HEAPLAB_RECORD_STACK_DEPTH=$depth -- "$bin/record-t_basic"
    if [ $rc -ne 0 ]; then
        bad "t_basic (depth $depth) exited $rc: $(cat "$work/basic$depth.err")"
    elif valid "$work/basic$depth.hltrace" "t_basic depth $depth"; then
        mod=""
        [ $depth -gt 0 ] && mod=record-t_basic
        if out=$($check region "$work/basic$depth.out" "$work/basic$depth.hltrace.txt" $mod 2>&1); then
            ok "t_basic, stack depth $depth: $out"
        else
            bad "t_basic depth $depth: $out"
        fi
    fi
done

# tiny blocks, no compression, free stacks on: the same events
rec basic_small HEAPLAB_RECORD_BLOCK_EVENTS=3 HEAPLAB_RECORD_COMPRESS=0 HEAPLAB_RECORD_FREE_STACKS=1 -- "$bin/record-t_basic"
if valid "$work/basic_small.hltrace" "t_basic small blocks" &&
    out=$($check region "$work/basic_small.out" "$work/basic_small.hltrace.txt" 2>&1); then
    frees_with_stack=$(grep -c '^event .* free .* stack=[1-9]' "$work/basic_small.hltrace.txt")
    blocks=$(grep -c . <<<"$(od -An -tx1 -v "$work/basic_small.hltrace" | tr -s ' ' '\n' | paste -sd' ' | grep -o '48 4c 42 4b 05')")
    if [ "$frees_with_stack" -gt 0 ]; then
        ok "t_basic, 3-event blocks, stored, free stacks: $out"
    else
        bad "t_basic free stacks: no free carries a stack"
    fi
else
    bad "t_basic small blocks: ${out:-}"
fi

# ---------------------------------------------------------------- C++
rec cxx -- "$bin/record-t_cxx"
if [ $rc -ne 0 ]; then
    bad "t_cxx exited $rc"
elif valid "$work/cxx.hltrace" "t_cxx" && out=$($check region "$work/cxx.out" "$work/cxx.hltrace.txt" libstdc++ 2>&1); then
    ok "C++ new/delete: $out, first frame in libstdc++"
else
    bad "t_cxx: ${out:-}"
fi

# ---------------------------------------------------------------- the calloc bootstrap
rec boot HEAPLAB_RECORD_TEST_BOOT=1 -- "$bin/record-t_bootstrap"
if [ $rc -ne 0 ] || [ "$(cat "$work/boot.out")" != ok ]; then
    bad "t_bootstrap exited $rc: $(cat "$work/boot.err")"
elif ! grep -q "bootstrap buffer: ok" "$work/boot.err"; then
    bad "t_bootstrap: $(cat "$work/boot.err")"
elif valid "$work/boot.hltrace" t_bootstrap; then
    if grep -q '^event .* calloc .* size=100 ' "$work/boot.hltrace.txt" &&
        grep -q '^event .* realloc .* size=1000 ' "$work/boot.hltrace.txt"; then
        ok "calloc bootstrap: buffer blocks recognised; the constructor's calloc before main recorded"
    else
        bad "t_bootstrap: the constructor's calloc or the realloc is missing"
    fi
fi

# ---------------------------------------------------------------- threads
# the smallest rings (two chunks a thread), so that producers wait for the writer
rec threads HEAPLAB_RECORD_RING_KB=128 -- "$bin/record-t_threads"
if [ $rc -ne 0 ]; then
    bad "t_threads exited $rc"
elif valid "$work/threads.hltrace" t_threads; then
    t=$work/threads.hltrace.txt
    want=$(cat "$work/threads.out")
    wa=$(field worker_allocs " $want")
    sh=$(field short " $want")
    th=$(field threads " $want")
    got_wa=$(grep -cE '^event [0-9]+ malloc .* size=3[01][0-9][0-9] ' "$t")
    got_wf=$(grep -cE '^event [0-9]+ free .* size=3[01][0-9][0-9] ' "$t")
    got_s=$(grep -cE '^event [0-9]+ (malloc .* size=4001|calloc .* size=5001|realloc .* size=6001|free .* size=6001|free .* size=5001) ' "$t")
    got_th=$(grep -c '^thread ' "$t")
    uf=$(field unknown_frees " $counts")
    if [ "$got_wa" = "$wa" ] && [ "$got_wf" = "$wa" ] && [ "$got_s" = $((sh * 5)) ] && [ "$got_th" = "$th" ] && [ "$uf" = 0 ]; then
        ok "threads: $wa allocations across $th threads, cross-thread frees all matched, no unknown frees"
    else
        bad "threads: allocs $got_wa/$wa frees $got_wf/$wa short $got_s/$((sh * 5)) threads $got_th/$th unknown frees $uf"
    fi
fi

# ---------------------------------------------------------------- threads that come and go, 50 times
# (issue 17: 1-2 recordings in 10 of this program once ended without END,
# holding part of the events, and nobody said so). Every run must give a
# complete trace with the same event counts, equal to the counting preload's.
sj_counts=""
sj_bad=0
for i in $(seq 50); do
    rec spawnjoin HEAPLAB_RECORD_STACK_DEPTH=$(( i % 2 ? 0 : 8 )) -- "$bin/record-spawnjoin"
    if [ $rc -ne 0 ] || ! valid "$work/spawnjoin.hltrace" "spawnjoin run $i"; then
        sj_bad=$((sj_bad + 1))
        continue
    fi
    c=$(sed 's/ live_at_end=[0-9]*//; s/ unrecorded=[0-9]*//; s/ waited_ns=[0-9]*//; s/pid=[0-9]* //; s/ stacks=[0-9]*//; s/ modules=[0-9]*//' <<<"$counts")
    if [[ "$c" != *" end=exit:0 "* ]] || [[ "$c" != *" lost=0"* ]]; then
        bad "spawnjoin run $i: incomplete: $counts"
        sj_bad=$((sj_bad + 1))
    elif [ -z "$sj_counts" ]; then
        sj_counts=$c
    elif [ "$c" != "$sj_counts" ]; then
        bad "spawnjoin run $i: counts differ: $c vs $sj_counts"
        sj_bad=$((sj_bad + 1))
    fi
done
rm -f "$work"/spawnjoin.count
env HEAPLAB_COUNT_OUT="$work/spawnjoin.count" LD_PRELOAD="$counter" "$bin/record-spawnjoin" >/dev/null 2>&1
if [ $sj_bad -eq 0 ] && out=$($check counts "$(grep " ppid=$$ " "$work/spawnjoin.count")" "$counts" 2>&1); then
    ok "spawnjoin (10 rounds of 2 threads, cross-thread frees) recorded 50 times: 50 complete traces, equal counts; $out"
else
    bad "spawnjoin recorded 50 times: $sj_bad bad runs; ${out:-}"
fi

# ---------------------------------------------------------------- fork
rec fork -- "$bin/record-t_fork"
child=$(field child " $(cat "$work/fork.out")")
if [ $rc -ne 0 ] || [ -z "$child" ]; then
    bad "t_fork exited $rc"
elif valid "$work/fork.hltrace" "t_fork parent" && ppid_trace=$(sed -n 's/^meta pid=\([0-9]*\) .*/\1/p' "$work/fork.hltrace.txt") &&
    valid "$work/fork.hltrace.$child" "t_fork child"; then
    c=$work/fork.hltrace.$child.txt
    inh=$(grep -cE '^event .* malloc .* size=100[0-9] .*inherited$' "$c")
    freed=$(grep -cE '^event .* free .* size=100[0-2] ' "$c")
    mine=$(grep -cE '^event .* malloc .* size=500[0-4] ' "$c")
    if grep -q "parent_pid=$ppid_trace\$" "$c" && [ "$inh" = 10 ] && [ "$freed" = 3 ] && [ "$mine" = 5 ] &&
        grep -q '^end reason=exit status=7 ' "$c" && grep -q '^end reason=exit status=0 ' "$work/fork.hltrace.txt"; then
        ok "fork: child trace with its parent's 10 live objects inherited, 3 freed, 5 new, END exit 7"
    else
        bad "fork: parent_pid/inherited $inh/freed $freed/mine $mine: $(tail -1 "$c")"
    fi
fi
rec nofork HEAPLAB_RECORD_FOLLOW_FORKS=0 -- "$bin/record-t_fork"
child=$(field child " $(cat "$work/nofork.out")")
if [ $rc -eq 0 ] && [ ! -e "$work/nofork.hltrace.$child" ] && valid "$work/nofork.hltrace" "nofork"; then
    ok "fork with HEAPLAB_RECORD_FOLLOW_FORKS=0: no child trace"
else
    bad "follow forks off: rc $rc, child trace present: $(ls "$work"/nofork.hltrace.*)"
fi

# ---------------------------------------------------------------- exec
rec exec -- "$bin/record-t_exec"
if [ $rc -ne 3 ]; then
    bad "t_exec exited $rc (want 3, from the exec'd image)"
elif valid "$work/exec.hltrace" "t_exec first image"; then
    pid=$(sed -n 's/^meta pid=\([0-9]*\) .*/\1/p' "$work/exec.hltrace.txt")
    t=$work/exec.hltrace.txt
    ends=$(grep -c '^end reason=exec ' "$t")
    after=$(awk '/^end reason=exec/ {e=1} e && /^event .* size=222 /' "$t" | wc -l)
    if [ "$ends" = 2 ] && [ "$after" = 1 ] && valid "$work/exec.hltrace.$pid" "t_exec second image" &&
        grep -q 'malloc .* size=778 ' "$work/exec.hltrace.$pid.txt" && grep -q '^end reason=exit status=3 ' "$work/exec.hltrace.$pid.txt"; then
        ok "exec: END exec before a failed exec, recording went on; the new image wrote $(basename "$work/exec.hltrace.$pid")"
    else
        bad "exec: $ends END exec blocks, $after events after the first; second image: $(ls "$work"/exec.hltrace.*)"
    fi
fi

# ---------------------------------------------------------------- fatal signals
for mode in segv:11 abort:6; do
    m=${mode%:*} sig=${mode#*:}
    rec sig_$m -- "$bin/record-t_signal" "$m"
    if [ $rc -ne $((128 + sig)) ]; then
        bad "t_signal $m exited $rc, want $((128 + sig))"
    elif valid "$work/sig_$m.hltrace" "t_signal $m" && grep -q "^end reason=signal status=$sig " "$work/sig_$m.hltrace.txt" &&
        [ "$(grep -cE '^event .* malloc .* size=(3[2-9]|[4-9][0-9]|1[0-2][0-9]|13[01]) ' "$work/sig_$m.hltrace.txt")" -ge 100 ]; then
        ok "fatal signal $sig ($m): every event written, END signal $sig, the process still dies of it"
    else
        bad "t_signal $m: $(tail -1 "$work/sig_$m.hltrace.txt")"
    fi
done

# SIGTERM (default disposition) and SIGKILL while running
# sig_run NAME MODE SIGNAL [SECONDS [PATTERN MIN]]: t_signal MODE under the
# agent; once it says ready (60 s at most: CI's machine may be loaded) and
# SECONDS more (0.1), and with PATTERN once the trace on disk holds MIN
# events that match it (60 s at most), it gets SIGNAL. Waiting on the trace,
# not on the clock, keeps a starved program from failing a count. The dump
# reads a copy of the bytes written so far: on the growing file itself it
# would follow the writer.
sig_run() {
    rm -f "$work/$1".hltrace*
    HEAPLAB_RECORD_OUT="$work/$1.hltrace" LD_PRELOAD="$agent" "$bin/record-t_signal" "$2" >"$work/$1.out" 2>&1 &
    local p=$!
    for _ in $(seq 3000); do
        grep -q ready "$work/$1.out" 2>/dev/null && break
        sleep 0.02
    done
    sleep "${4:-0.1}"
    if [ -n "${5:-}" ]; then
        for _ in $(seq 600); do
            head -c "$(stat -c %s "$work/$1.hltrace" 2>/dev/null || echo 0)" "$work/$1.hltrace" >"$work/$1.so-far" 2>/dev/null
            [ "$("$dump" "$work/$1.so-far" 2>/dev/null | grep -cE "$5")" -ge "$6" ] && break
            sleep 0.1
        done
    fi
    kill -"$3" $p
    wait $p
    rc=$?
}
sig_run term sleep TERM
if [ $rc -eq 143 ] && valid "$work/term.hltrace" "SIGTERM" && grep -q '^end reason=signal status=15 ' "$work/term.hltrace.txt"; then
    ok "SIGTERM: END signal 15, exit status 143"
else
    bad "SIGTERM: rc $rc"
fi
# SIGTERM while the program allocates flat out: it may land while the thread
# drains the rings itself, and is then taken when it lets go
termok=0
for i in 1 2 3; do
    sig_run termchurn churn TERM 0.3
    if [ $rc -eq 143 ] && valid "$work/termchurn.hltrace" "SIGTERM churn" &&
        grep -q '^end reason=signal status=15 ' "$work/termchurn.hltrace.txt"; then
        termok=$((termok + 1))
    fi
done
if [ $termok = 3 ]; then
    ok "SIGTERM while allocating flat out (3 runs): END signal 15 every time"
else
    bad "SIGTERM while allocating: $termok of 3 runs ended with END signal 15 (last rc $rc)"
fi
sig_run kill churn KILL 1.0
"$dump" "$work/kill.hltrace" >"$work/kill.txt" 2>"$work/kill.readerr"
krc=$?
kev=$(grep -c '^event ' "$work/kill.txt")
if [ $rc -eq 137 ] && [ $krc -ne 0 ] && grep -qE 'no END block|truncated' "$work/kill.readerr" && [ "$kev" -gt 1000 ]; then
    ok "SIGKILL after 1 s: $kev events readable up to the last complete block ($(sed 's/.*: byte/byte/' "$work/kill.readerr"))"
else
    bad "SIGKILL: rc $rc, reader rc $krc, $kev events: $(cat "$work/kill.readerr")"
fi

# ~300 allocations in 1.5 s, far from a block's 65536 events: they reach the
# file only by the 200 ms flush. Killed once 150 of them are on disk (within
# 60 s, 12000 allocations at most: still no full block), which a loaded
# machine may take longer than 1.5 s to get to; without the flush the file
# never holds them and the count below fails.
sig_run slowkill slow KILL 1.5 '^event .* malloc .* size=100 ' 150
"$dump" "$work/slowkill.hltrace" >"$work/slowkill.txt" 2>/dev/null
sev=$(grep -c '^event .* malloc .* size=100 ' "$work/slowkill.txt")
if [ $rc -eq 137 ] && [ "$sev" -ge 150 ]; then
    ok "SIGKILL of a program allocating every 5 ms: $sev of its allocations in the trace"
else
    bad "SIGKILL of a slow program: rc $rc, only $sev allocations in the trace"
fi

# ---------------------------------------------------------------- real programs, and counts against the counting preload
gen=$work/gen
mkdir -p "$gen"
perl -e 'srand(1); my @w = map { join "", map { chr(97 + int rand 12) } 1 .. 2 + int rand 7 } 1 .. 2000;
         for (1 .. 20000) { print join(" ", map { $w[int(rand(@w) ** 1.5 / @w ** 0.5)] } 1 .. 1 + int rand 10), "\n" }' >"$gen/text"
cat >"$gen/wc.pl" <<'EOF'
my %n; while (<>) { for my $w (split) { $n{$w}++; $n{"$p $w"}++ if defined $p; $p = $w } }
for my $w (sort { $n{$b} <=> $n{$a} || $a cmp $b } keys %n) { print "$n{$w} $w\n" }
EOF
{
    echo "all: $(seq -f 't%g' 1 3000 | tr '\n' ' ')"
    for i in $(seq 1 3000); do echo "t$i: d$((i % 97)).h"; printf '\t@echo build $@ from $^\n'; done
    echo 'd%.h:'
    printf '\t@true\n'
} >"$gen/Makefile"
{
    echo "CREATE TABLE t(id INTEGER PRIMARY KEY, name TEXT, v REAL);"
    echo "BEGIN;"
    for i in $(seq 1 4000); do echo "INSERT INTO t VALUES($i, 'n$((i * 7919 % 1000))', $((i % 100)).5);"; done
    echo "COMMIT;"
    echo "CREATE INDEX tn ON t(name);"
    echo "SELECT name, count(*), sum(v) FROM t GROUP BY name ORDER BY 2 DESC, 1 LIMIT 5;"
} >"$gen/script.sql"
cat >"$gen/work.py" <<'EOF'
import json
d = {}
for i in range(30000):
    d["k%d" % (i % 5000)] = [i, str(i) * 3, {"x": i}]
s = json.dumps(d, sort_keys=True)
print(len(s), len(json.loads(s)), sum(len(v[1]) for v in d.values()))
EOF

real() { # NAME STDIN COMMAND...
    local name=$1 input=$2
    shift 2
    local envs=(PERL_HASH_SEED=0 PERL_PERTURB_KEYS=0 PYTHONHASHSEED=0 PYTHONMALLOC=malloc LC_ALL=C)
    env "${envs[@]}" "$@" <"$input" >"$work/$name.native" 2>&1
    local nrc=$?
    rm -f "$work/$name.count"
    env "${envs[@]}" HEAPLAB_COUNT_OUT="$work/$name.count" LD_PRELOAD="$counter" "$@" <"$input" >/dev/null 2>&1
    rm -f "$work/$name".hltrace*
    env "${envs[@]}" HEAPLAB_RECORD_OUT="$work/$name.hltrace" LD_PRELOAD="$agent" "$@" <"$input" >"$work/$name.rec" 2>&1
    local rrc=$?
    if [ $nrc -ne $rrc ] || ! cmp -s "$work/$name.native" "$work/$name.rec"; then
        bad "$name: recorded run differs from the native one (exit $rrc vs $nrc)"
        diff "$work/$name.native" "$work/$name.rec" | head -5 >&2
        return
    fi
    valid "$work/$name.hltrace" "$name" || return
    local line out
    line=$(grep " ppid=$$ " "$work/$name.count")
    if out=$($check counts "$line" "$counts" 2>&1); then
        ok "$name: same output and exit status; $out"
    else
        bad "$name: $out"
    fi
}
real perl /dev/null perl "$gen/wc.pl" "$gen/text"
real make /dev/null make -n -r -f "$gen/Makefile"
real sqlite3 "$gen/script.sql" sqlite3 :memory:
# the real interpreter, not a version manager's shell shim
py=$(command -v python3)
[ -x /usr/bin/python3 ] && py=/usr/bin/python3
real python3 /dev/null "$py" "$gen/work.py"

# ---------------------------------------------------------------- a shell that forks and execs a lot
rec shell -- bash -c 'for i in 1 2 3 4 5; do x=$(echo $i | tr 1 a); /bin/true; done; ( ls / >/dev/null ); echo $x'
if [ $rc -eq 0 ] && [ "$(cat "$work/shell.out")" = 5 ]; then
    n=0
    allgood=1
    for f in "$work"/shell.hltrace*; do
        case $f in *.txt | *.readerr) continue ;; esac
        n=$((n + 1))
        valid "$f" "shell: $(basename "$f")" || allgood=0
        tail -1 "$f.txt" | grep -q '^end ' || { allgood=0; bad "shell: $(basename "$f") has no END"; }
    done
    [ $allgood = 1 ] && [ $n -ge 10 ] && ok "bash forking and exec'ing: $n traces, every one complete and valid"
else
    bad "shell: rc $rc, output $(cat "$work/shell.out") $(head -3 "$work/shell.err")"
fi

# ---------------------------------------------------------------- the Rust reader agrees
if [ -x "$heaplab" ]; then
    for t in threads perl python3 fork; do
        f=$work/$t.hltrace
        "$dump" "$f" >"$work/$t.c.txt" 2>/dev/null
        if "$heaplab" convert "$f" "$work/$t.rust.txt" >/dev/null 2>"$work/$t.rust.err" && cmp -s "$work/$t.c.txt" "$work/$t.rust.txt" &&
            "$heaplab" stats "$f" --json >/dev/null 2>&1; then
            ok "$t: heaplab convert prints the same dump as hltrace-dump; heaplab stats reads it"
        else
            bad "$t: the Rust reader disagrees: $(cat "$work/$t.rust.err")"
        fi
    done
else
    . "$here/../../../scripts/skips.sh"
    allow_skip rust-crosscheck "$heaplab is not built (cargo build --release)" || fail=$((fail + 1))
fi

echo "record tests: $pass passed, $fail failed"
finished=1
# a script that stopped early (or skipped its checks) must not look like a pass
if [ $((pass + fail)) -lt 10 ]; then
    echo "FAIL record tests: only $((pass + fail)) checks ran; at least 10 should have" >&2
    exit 1
fi
[ $fail -eq 0 ]
