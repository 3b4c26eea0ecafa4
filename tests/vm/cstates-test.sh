#!/usr/bin/env bash
# cstates-test.sh: boot one nvme-vm guest with ACPI C-states (--cstates
# 1,20,200: acpi_idle + menu, POLL C1 C2 C3) and run guest-cstates.py in it:
# latgovd's auto limit excludes exactly the states whose cost does not fit,
# and a held CPU stops entering exactly the excluded states (per-state usage
# counters) while unheld CPUs keep entering them.
#
# Usage: cstates-test.sh [--timeout S] LATGOVD LATGOV
# Exit 0 if all passed, 1 if any failed or the guest did not finish, 2 on
# usage errors. Needs root.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
latencies=1,20,200 timeout=600
if [[ ${1:-} = --timeout ]]; then timeout=$2; shift 2; fi
[[ $# -eq 2 ]] || { sed -n '2,/^set -euo/p' "$0" | sed -e '$d' -e 's/^# \{0,1\}//' >&2; exit 2; }
bins=()
for b in "$1" "$2"; do
  p=$(realpath -e -- "$b" 2>/dev/null) || { echo "cstates-test: no such file: $b" >&2; exit 2; }
  bins+=("$p")
done
if [[ $EUID -ne 0 ]]; then echo "cstates-test: needs root" >&2; exit 2; fi
command -v fio >/dev/null || { echo "FAIL cstates-test: fio is not installed"; exit 1; }

start=$SECONDS
rc=0
"$here/nvme-vm" --cpus 2 --ctrl 2 --cstates "$latencies" --timeout "$timeout" -- \
  python3 "$here/guest-cstates.py" --latencies "$latencies" "${bins[@]}" || rc=$?
secs=$((SECONDS - start))
case $rc in
  0) echo "PASS cstates-test (${secs}s)";;
  125) echo "FAIL cstates-test (${secs}s): the guest did not finish"; exit 1;;
  *) echo "FAIL cstates-test (${secs}s): guest rc $rc"; exit 1;;
esac
