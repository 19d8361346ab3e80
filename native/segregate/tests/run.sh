#!/usr/bin/env bash
# The segmented allocator's tests (make -C native segregate-test):
#   1. seg-test layout/hint/path/size/runtime on the libraries made for them;
#   2. the exports a tool needs;
#   3. the zoo's suite (native/alloc/tests/run.sh: conform, random, threads,
#      the address digest and real programs with output identical to glibc's)
#      on DEFAULT, RANDOM over four segments, STACK-3 with the run-time
#      lookup, and SP on its own shim.
set -uo pipefail
lib=$1 bin=$2 work=$3
here=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$work"
fail=0

t() { # NAME LIB ENV... -- ARGS...
    local name=$1 so=$2
    shift 2
    local envs=()
    while [ "$1" != -- ]; do envs+=("$1"); shift; done
    shift
    if out=$(env "${envs[@]}" LD_PRELOAD="$lib/libheaplab-$so.so" HEAPLAB_CHECK=64 "$bin/seg-test" "$@" 2>&1); then
        echo "PASS seg-test $name ($so)"
    else
        echo "FAIL seg-test $name ($so):"
        echo "$out" | tail -20 | sed 's/^/    /'
        fail=1
    fi
}

t "layout, four segments" segregated_random -- layout 4
t "layout, one segment (DEFAULT)" segregated -- layout 1
t "hints, STACK-3" segtest-hint -- hint
t "hints, PATH" segtest-path -- path
t "hints, STACK+size" segtest-size -- size
t "run-time stack walk" segregated_stack HEAPLAB_SEG_DEBUG=1 -- runtime
t "run-time tree levels" segregated_stack HEAPLAB_SEG_DEBUG=1 -- levels "$lib/libheaplab-segtest-env.so"

# The test must be able to fail: the runtime test without the debug export on says so.
if env LD_PRELOAD="$lib/libheaplab-segregated_stack.so" "$bin/seg-test" runtime >/dev/null 2>&1; then
    echo "FAIL seg-test runtime passed without HEAPLAB_SEG_DEBUG (it cannot have looked)"
    fail=1
fi

for so in segregated segregated_random segregated_stack segregated_sp; do
    for s in malloc free calloc realloc posix_memalign aligned_alloc memalign valloc pvalloc \
        malloc_usable_size heaplab_alloc_stats heaplab_alloc_info heaplab_site_hint \
        heaplab_seg_segments heaplab_seg_slots heaplab_seg_class_of heaplab_seg_last heaplab_seg_predictor \
        heaplab_seg_levels; do
        nm -D --defined-only "$lib/libheaplab-$so.so" | awk '{print $3}' | grep -qx "$s" ||
            { echo "FAIL libheaplab-$so.so does not export $s"; fail=1; }
    done
done
[ $fail = 0 ] && echo "PASS exports"

# The zoo's suite.
"$here/../../alloc/tests/run.sh" --lib "$lib" --bin "$bin" --work "$work" --registry "$here/registry.txt" \
    --allocators "segregated segregated_random segregated_stack segregated_sp" --tests "conform random threads digest programs" || fail=1
exit $fail
