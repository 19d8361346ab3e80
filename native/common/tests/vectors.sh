#!/usr/bin/env bash
# The C side of the test-vector contract (testdata/vectors/README.md):
#  - hltrace-dump decodes every good vector to exactly its .txt (a NAME-zstd
#    vector without its own .txt to NAME.txt);
#  - on every bad vector it fails with the .err's offset, event count and phrase
#    (and prints exactly NAME.txt before, when there is one);
#  - the C writer rebuilds every uncompressed vector from its script byte for
#    byte, and a compressed one to a trace that decodes to the same dump
#    (NAME.script.txt: version 1, written by the Rust writer too;
#    NAME.cscript.txt: version 2, rows encoded as the agent encodes them).
# usage: vectors.sh BINDIR VECTORDIR
set -u
bin=$1
dir=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0
pass=0

bad() {
    echo "FAIL vectors: $*" >&2
    fail=$((fail + 1))
}

shopt -s nullglob
vectors=("$dir"/*.hltrace)
if [ ${#vectors[@]} -eq 0 ]; then
    echo "vectors: no *.hltrace in $dir" >&2
    exit 1
fi

for f in "${vectors[@]}"; do
    name=$(basename "$f" .hltrace)
    if [ -f "$dir/$name.err" ]; then
        spec=$(cat "$dir/$name.err")
        offset=$(sed -n 's/.*offset=\([0-9]*\).*/\1/p' <<<"$spec")
        events=$(sed -n 's/.*events=\([0-9]*\).*/\1/p' <<<"$spec")
        phrase=${spec#*problem=}
        "$bin/hltrace-dump" "$f" >"$tmp/out" 2>"$tmp/err"
        rc=$?
        msg=$(cat "$tmp/err")
        if [ -f "$dir/$name.txt" ] && ! cmp -s "$tmp/out" "$dir/$name.txt"; then
            # what comes out before the error: a bad block gives none of its items
            bad "$name: the dump before the error differs from $name.txt"
            diff "$dir/$name.txt" "$tmp/out" | head -5 >&2
        elif [ $rc -eq 0 ]; then
            bad "$name: hltrace-dump exited 0 on a bad trace"
        elif [[ "$msg" != "$f: byte $offset: "* ]]; then
            bad "$name: expected '$f: byte $offset: ...', got: $msg"
        elif [[ "$msg" != *"$phrase"* ]]; then
            bad "$name: message lacks '$phrase': $msg"
        elif [[ "$msg" != *"($events events read before this point)" ]]; then
            bad "$name: expected $events events read: $msg"
        else
            pass=$((pass + 1))
        fi
        continue
    fi
    txt="$dir/$name.txt"
    [ -f "$txt" ] || txt="$dir/${name%-zstd}.txt"
    if [ ! -f "$txt" ]; then
        bad "$name: neither .txt nor .err beside it"
        continue
    fi
    if ! "$bin/hltrace-dump" "$f" >"$tmp/out" 2>"$tmp/err"; then
        bad "$name: $(cat "$tmp/err")"
    elif ! cmp -s "$tmp/out" "$txt"; then
        bad "$name: dump differs from $(basename "$txt"):"
        diff "$txt" "$tmp/out" | head -20 >&2
    else
        pass=$((pass + 1))
    fi
done

for s in "$dir"/*.script.txt "$dir"/*.cscript.txt; do
    name=$(basename "$s" .script.txt)
    name=$(basename "$name" .cscript.txt)
    variants=("$s")
    # the compressed twin of an uncompressed script
    if grep -q '^writer.* codec=none' "$s"; then
        sed 's/^\(writer.*\) codec=none/\1 codec=zstd/' "$s" >"$tmp/$name-z.script.txt"
        variants+=("$tmp/$name-z.script.txt")
    fi
    for v in "${variants[@]}"; do
        out="$tmp/$(basename "$v" .script.txt).hltrace"
        if ! "$bin/hltrace-script" "$v" "$out" 2>"$tmp/err"; then
            bad "$name: C writer: $(cat "$tmp/err")"
            continue
        fi
        if grep -q '^writer.* codec=zstd' "$v"; then
            # zstd builds may differ in bytes; the content must not
            if [ -f "$dir/$name.err" ]; then
                pass=$((pass + 1)) # a bad vector: its compressed twin is no test
            elif ! "$bin/hltrace-dump" "$out" >"$tmp/out" 2>"$tmp/err"; then
                bad "$name (zstd, C writer): $(cat "$tmp/err")"
            elif ! cmp -s "$tmp/out" "$dir/$name.txt"; then
                bad "$name (zstd, C writer): dump differs from $name.txt"
            else
                pass=$((pass + 1))
            fi
        elif ! cmp -s "$out" "$dir/$name.hltrace"; then
            bad "$name: the C writer does not reproduce $name.hltrace byte for byte"
            cmp "$out" "$dir/$name.hltrace" >&2
        else
            pass=$((pass + 1))
        fi
    done
done

echo "vectors: $pass checks passed, $fail failed"
[ $fail -eq 0 ]
