#!/usr/bin/env bash
# check-fixtures.sh LATGOV_BINARY: offline (no VM) check of the golden VM
# fixtures. For each tests/vm/expected/LAYOUT.json (the ground truth that
# ground_truth.py read in the live guest when run-topology-tests.sh took the
# snapshot) unpack tests/golden/LAYOUT.tar.gz, run
# `latgov --sysroot TREE topology --json` and compare with check_topology.py.
# Regenerate both with:
#   tests/vm/run-topology-tests.sh --snapshots tests/golden \
#       --ground-truth tests/vm/expected LATGOV_BINARY
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
golden=$(cd "$here/../golden" && pwd)
[[ $# -eq 1 ]] || { echo "usage: check-fixtures.sh LATGOV_BINARY" >&2; exit 2; }
latgov=$1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

passed=0 failed=0
for exp in "$here"/expected/*.json; do
  [[ -e $exp ]] || continue
  name=$(basename "$exp" .json)
  if [[ ! -f $golden/$name.tar.gz ]]; then
    echo "FAIL $name: no fixture $golden/$name.tar.gz"; failed=$((failed + 1)); continue
  fi
  mkdir -p "$tmp/$name"
  tar -xzf "$golden/$name.tar.gz" -C "$tmp/$name"
  if ! "$latgov" --sysroot "$tmp/$name" topology --json > "$tmp/$name.json" 2> "$tmp/$name.err"; then
    echo "FAIL $name: latgov exited non-zero: $(head -c 300 "$tmp/$name.err")"; failed=$((failed + 1)); continue
  fi
  if out=$(python3 "$here/check_topology.py" "$exp" "$tmp/$name.json"); then
    echo "PASS $name: $out"; passed=$((passed + 1))
  else
    echo "FAIL $name:"; printf '%s\n' "$out" | sed 's/^/    /'; failed=$((failed + 1))
  fi
done
[[ $((passed + failed)) -gt 0 ]] || { echo "check-fixtures: no fixtures in $here/expected" >&2; exit 1; }
echo "vm fixtures: $passed passed, $failed failed"
[[ $failed -eq 0 ]]
