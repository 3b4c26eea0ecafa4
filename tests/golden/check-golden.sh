#!/usr/bin/env bash
# check-golden.sh LATGOV TREE: unpack TREE.tar.gz, run `latgov topology --json`
# on it and compare with TREE.json. With UPDATE_GOLDEN=1, rewrite TREE.json.
set -euo pipefail
latgov=$1 tree=$2
[[ -f $tree.tar.gz ]] || { echo "missing fixture $tree.tar.gz" >&2; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
tar -xzf "$tree.tar.gz" -C "$tmp/"
"$latgov" --sysroot "$tmp" topology --json > "$tmp/actual.json"
if [[ ${UPDATE_GOLDEN:-0} = 1 ]]; then
    cp "$tmp/actual.json" "$tree.json"
    echo "updated $tree.json"
    exit 0
fi
diff -u "$tree.json" "$tmp/actual.json"
echo "golden $(basename "$tree"): identical"
