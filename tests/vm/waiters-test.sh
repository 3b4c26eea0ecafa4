#!/usr/bin/env bash
# waiters-test.sh: boot one nvme-vm guest with 4 CPUs and one NVMe controller
# of 2 IO queues (each queue serves 2 CPUs, its IRQ completes on one of
# them) and ACPI C-states (--cstates 1,20,200: acpi_idle + menu), and run
# guest-waiters.py in it: QD1 reads pinned to the CPU that does not complete
# their queue hold exactly that CPU ("waits") and the IRQ's CPU
# ("completes"), per queue, only while the IO runs; with waiter_cpus = false
# the reader's CPU is left alone.
#
# Usage: waiters-test.sh [--timeout S] LATGOVD LATGOV
# Exit 0 if all passed, 1 if any failed or the guest did not finish, 2 on
# usage errors. Needs root.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
timeout=400
if [[ ${1:-} = --timeout ]]; then timeout=$2; shift 2; fi
[[ $# -eq 2 ]] || { sed -n '2,/^set -euo/p' "$0" | sed -e '$d' -e 's/^# \{0,1\}//' >&2; exit 2; }
bins=()
for b in "$1" "$2"; do
  p=$(realpath -e -- "$b" 2>/dev/null) || { echo "waiters-test: no such file: $b" >&2; exit 2; }
  bins+=("$p")
done
if [[ $EUID -ne 0 ]]; then echo "waiters-test: needs root" >&2; exit 2; fi
command -v fio >/dev/null || { echo "FAIL waiters-test: fio is not installed"; exit 1; }

start=$SECONDS
rc=0
"$here/nvme-vm" --cpus 4 --ctrl 2 --cstates 1,20,200 --timeout "$timeout" -- \
  python3 "$here/guest-waiters.py" "${bins[@]}" || rc=$?
secs=$((SECONDS - start))
case $rc in
  0) echo "PASS waiters-test (${secs}s)";;
  125) echo "FAIL waiters-test (${secs}s): the guest did not finish"; exit 1;;
  *) echo "FAIL waiters-test (${secs}s): guest rc $rc"; exit 1;;
esac
