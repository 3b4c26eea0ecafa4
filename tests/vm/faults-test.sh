#!/usr/bin/env bash
# faults-test.sh: boot one nvme-vm guest (4 CPUs; controller A with 4 I/O
# queues, one CPU each; controller B with 2 queues of 2 CPUs each) and run
# guest-faults.sh in it: latgovd governing under fio while controller A is
# reset, a completion CPU of B goes offline and online, B's PCI function is
# removed and rescanned (governed again within a bound that only uevents
# meet), then stopped with every CPU back at its original value.
#
# Usage: faults-test.sh [--timeout S] LATGOVD LATGOV
# Prints the guest's PASS/FAIL lines; exit 0 if all passed, 1 if any failed
# or the guest did not finish, 2 on usage errors. Needs root and fio.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
usage() { sed -n '2,/^set -euo/p' "$0" | sed -e '$d' -e 's/^# \{0,1\}//'; }

timeout=300
while [[ $# -gt 0 ]]; do
  case "$1" in
    --timeout) timeout=$2; shift 2;;
    -h|--help) usage; exit 0;;
    --) shift; break;;
    -*) echo "faults-test: unknown option $1" >&2; exit 2;;
    *) break;;
  esac
done
[[ $# -eq 2 ]] || { usage >&2; exit 2; }
bins=()
for b in "$1" "$2"; do
  p=$(realpath -e -- "$b" 2>/dev/null) || { echo "faults-test: no such file: $b" >&2; exit 2; }
  [[ -x $p ]] || { echo "faults-test: not executable: $p" >&2; exit 2; }
  bins+=("$p")
done
if [[ $EUID -ne 0 ]]; then echo "faults-test: needs root" >&2; exit 2; fi
command -v fio >/dev/null || { echo "FAIL faults-test: fio is not installed"; exit 1; }

vmargs=(--cpus 4 --ctrl 4 --ctrl 2)
start=$SECONDS
rc=0
"$here/nvme-vm" "${vmargs[@]}" --timeout "$timeout" -- \
  /bin/bash "$here/guest-faults.sh" "${bins[@]}" || rc=$?
secs=$((SECONDS - start))
if [[ $rc -eq 0 ]]; then
  echo "PASS faults-test (${secs}s, nvme-vm ${vmargs[*]})"
elif [[ $rc -eq 125 ]]; then
  echo "FAIL faults-test (${secs}s): the guest did not finish"; exit 1
else
  echo "FAIL faults-test (${secs}s): guest rc $rc"; exit 1
fi
