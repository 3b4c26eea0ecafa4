#!/usr/bin/env bash
# check-golden.sh LATGOV TREE: unpack TREE.tar.gz, run `latgov topology --json`
# on it and compare with TREE.json (the test ctest runs).
# check-golden.sh --update LATGOV TREE: rewrite TREE.json from latgov's output,
# by hand, after reviewing the difference; ctest never passes --update, and no
# environment variable turns the check into a copy.
set -euo pipefail
update=0
if [[ ${1:-} = --update ]]; then update=1; shift; fi
[[ $# -eq 2 ]] || { echo "usage: check-golden.sh [--update] LATGOV TREE" >&2; exit 2; }
latgov=$1 tree=$2
[[ -f $tree.tar.gz ]] || { echo "missing fixture $tree.tar.gz" >&2; exit 1; }
[[ $update = 1 || -f $tree.json ]] || { echo "missing expected $tree.json" >&2; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
tar -xzf "$tree.tar.gz" -C "$tmp/"
"$latgov" --sysroot "$tmp" topology --json > "$tmp/actual.json"
if [[ $update = 1 ]]; then
    cp "$tmp/actual.json" "$tree.json"
    echo "updated $tree.json"
    exit 0
fi
diff -u "$tree.json" "$tmp/actual.json"
echo "golden $(basename "$tree"): identical"
