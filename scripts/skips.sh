# Sourced by the test scripts: a check that cannot run (a tool or a build it
# needs is missing) fails, unless it is skipped on purpose and by name:
#
#   HEAPLAB_ALLOW_SKIPS=callgrind,rust-crosscheck make test
#
# Names: callgrind (replay instruction counts: valgrind, objdump),
# rust-crosscheck (the recorder's traces read by the Rust side: target/release/heaplab),
# sqlite3 (the unwinder's sqlite3 run), unwind-agent (the agent end to end in
# the unwinder's tests), zoo-build (heaplab-plumb's C-flags test: build/zoo-cflags.txt),
# heaptrack, pprof (go), massif (ms_print), notebook (python3 with pandas and
# zstandard) and browser (chromium): tests/memory.rs and tests/browser.rs.
#
# allow_skip NAME WHY: prints "SKIP NAME: WHY" and returns 0 when NAME is
# allowed; otherwise prints why it cannot be skipped and returns 1.
allow_skip() {
    case ",${HEAPLAB_ALLOW_SKIPS:-}," in
    *",$1,"*)
        echo "SKIP $1: $2 (allowed by HEAPLAB_ALLOW_SKIPS)"
        return 0
        ;;
    esac
    echo "FAIL $1: $2; a check that cannot run fails (HEAPLAB_ALLOW_SKIPS=$1 skips it on purpose)" >&2
    return 1
}
