#!/usr/bin/env bash
# Builds and runs heaplab's fuzz targets with libFuzzer, on stable Rust.
#
#   fuzz/run.sh build                      build every target (instrumented)
#   fuzz/run.sh run TARGET SECONDS [DIR]   fuzz TARGET for SECONDS, starting from the
#                                          committed corpus fuzz/corpus/TARGET, growing
#                                          a scratch corpus in DIR (default: a fresh
#                                          private directory, removed afterwards)
#   fuzz/run.sh smoke [SECONDS]            every target for a few seconds (make test)
#   fuzz/run.sh list                       the targets
#
# Why not `cargo fuzz`: cargo-fuzz's default AddressSanitizer needs a nightly
# compiler, which a fresh machine cannot fetch. This script builds what
# `cargo fuzz build --sanitizer none` builds: libfuzzer-sys's libFuzzer,
# and the code under test with LLVM's SanitizerCoverage (8-bit counters, PC
# table, comparison tracing) for coverage guidance, plus overflow checks and
# debug assertions, so an arithmetic overflow is a crash the fuzzer finds.
# The readers are safe Rust; what the fuzzer looks for is panics, aborts,
# runaway memory (-rss_limit_mb, -malloc_limit_mb) and hangs (-timeout).
# Where cargo-fuzz is installed, `cargo fuzz run TARGET --sanitizer none`
# in fuzz/ works too.
#
# Exit status of `run`: 0 when the target ran its time without a finding;
# libFuzzer's (non-zero) when it found a crash, a leak of memory or a hang,
# with the input written to fuzz/artifacts/TARGET/.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
targets=(trace_reader refs_decoder text_reader din_reader)
triple=$(rustc -vV | sed -n 's/^host: //p')
bin() { echo "$here/target/$triple/release/$1"; }

build() {
    # The flags cargo-fuzz passes with --sanitizer none. They apply to the
    # target only (--target keeps them off build scripts).
    local flags="-Cpasses=sancov-module -Cllvm-args=-sanitizer-coverage-level=4 \
-Cllvm-args=-sanitizer-coverage-inline-8bit-counters -Cllvm-args=-sanitizer-coverage-pc-table \
-Cllvm-args=-sanitizer-coverage-trace-compares --cfg fuzzing \
-Cllvm-args=-simplifycfg-branch-fold-threshold=0 -Cdebug-assertions -Coverflow-checks -Ccodegen-units=1"
    (cd "$here" && RUSTFLAGS="$flags" cargo build --release --quiet --target "$triple" --bins)
}

# fuzz_one TARGET SECONDS DIR: fuzz TARGET for SECONDS from the committed
# corpus, new inputs in DIR. Every committed input is run first, so a
# regression seed (an input that once crashed) fails at once.
fuzz_one() {
    local t=$1 secs=$2 work=$3
    mkdir -p "$here/artifacts/$t" "$work"
    # -rss_limit_mb: the whole process, target and libFuzzer; -malloc_limit_mb:
    # any one allocation. -timeout: one input. The committed corpus is read,
    # never written: new inputs go to the scratch directory.
    "$(bin "$t")" "$work" "$here/corpus/$t" \
        -max_total_time="$secs" -rss_limit_mb=1024 -malloc_limit_mb=512 -timeout=10 \
        -max_len=1048576 -artifact_prefix="$here/artifacts/$t/" -print_final_stats=1 \
        ${FUZZ_FLAGS:-}
}

case "${1:-}" in
build)
    build
    ;;
list)
    printf '%s\n' "${targets[@]}"
    ;;
run)
    t=${2:?usage: run.sh run TARGET SECONDS [DIR]}
    secs=${3:?usage: run.sh run TARGET SECONDS [DIR]}
    build
    if [ -n "${4:-}" ]; then
        fuzz_one "$t" "$secs" "$4"
    else
        work=$(mktemp -d)
        trap 'rm -rf "$work"' EXIT
        fuzz_one "$t" "$secs" "$work"
    fi
    ;;
smoke)
    # make test: every target for a few seconds (FUZZ_SMOKE_SECONDS, default 8).
    secs=${2:-${FUZZ_SMOKE_SECONDS:-8}}
    build
    work=$(mktemp -d)
    trap 'rm -rf "$work"' EXIT
    for t in "${targets[@]}"; do
        log="$work/$t.log"
        if fuzz_one "$t" "$secs" "$work/$t" >"$log" 2>&1; then
            execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log")
            rss=$(sed -n 's/^stat::peak_rss_mb: *//p' "$log")
            echo "fuzz $t: ${secs} s, $execs inputs, peak RSS $rss MB, no finding"
        else
            echo "FAIL fuzz $t: a finding (input in fuzz/artifacts/$t/):" >&2
            grep -E "panicked|ERROR|SUMMARY|deadly|timeout|out-of-memory" "$log" | head -8 >&2
            exit 1
        fi
    done
    ;;
*)
    sed -n '2,28p' "$0"
    exit 2
    ;;
esac
