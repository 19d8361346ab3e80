#!/usr/bin/env bash
# "Tests that can fail": a check that cannot run must fail `make test`
# unless it is skipped on purpose, by name (scripts/skips.sh). This checks
# the rule itself:
#  1. allow_skip fails without HEAPLAB_ALLOW_SKIPS and passes with the name;
#  2. no test script skips quietly: every SKIP/skip message in native/*/tests
#     and scripts/ goes through allow_skip (or HEAPLAB_ALLOW_SKIPS in Python).
set -u
cd "$(dirname "$0")/.."
. scripts/skips.sh
fail=0
if (HEAPLAB_ALLOW_SKIPS= allow_skip demo "why" >/dev/null 2>&1); then
    echo "FAIL check-skips: allow_skip passed without HEAPLAB_ALLOW_SKIPS" >&2
    fail=1
fi
if ! (HEAPLAB_ALLOW_SKIPS=x,demo,y allow_skip demo "why" >/dev/null 2>&1); then
    echo "FAIL check-skips: allow_skip failed with HEAPLAB_ALLOW_SKIPS naming it" >&2
    fail=1
fi
quiet=$(grep -rnE "(echo|print)\(? *[\"'f]*[Ss][Kk][Ii][Pp]" native/*/tests scripts --include='*.sh' --include='*.py' |
    grep -v "allowed by HEAPLAB_ALLOW_SKIPS" | grep -v "^scripts/skips.sh:" | grep -v "^scripts/check-skips.sh:" || true)
if [ -n "$quiet" ]; then
    echo "FAIL check-skips: these skip without asking scripts/skips.sh (allow_skip NAME WHY):" >&2
    echo "$quiet" >&2
    fail=1
fi
[ $fail -eq 0 ] && echo "check-skips: a check that cannot run fails unless skipped by name"
exit $fail
