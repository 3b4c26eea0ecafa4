#!/usr/bin/env bash
# governor-test.sh: boot one nvme-vm guest (4 CPUs, one controller with 4 I/O
# queues, one CPU each, one with 2 queues of 2 CPUs, plus a 2-path multipath
# subsystem) and run
# guest-governor.sh in it: latgovd with a fixed 0 us policy must hold exactly
# the completion CPU of the submitting CPU's queue while fio reads, release it
# within 1 s after, and release everything on SIGTERM.
#
# Usage: governor-test.sh [options] LATGOVD LATGOV
#   --no-multipath   boot without the multipath subsystem, skip that check
#   --timeout S      guest timeout (default 600)
# Prints the guest's PASS/FAIL lines; exit 0 if all passed, 1 if any failed
# or the guest did not finish, 2 on usage errors. Needs root.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
usage() { sed -n '2,/^set -euo/p' "$0" | sed -e '$d' -e 's/^# \{0,1\}//'; }

multipath=1 timeout=600
while [[ $# -gt 0 ]]; do
  case "$1" in
    --no-multipath) multipath=0; shift;;
    --timeout) timeout=$2; shift 2;;
    -h|--help) usage; exit 0;;
    --) shift; break;;
    -*) echo "governor-test: unknown option $1" >&2; exit 2;;
    *) break;;
  esac
done
[[ $# -eq 2 ]] || { usage >&2; exit 2; }
bins=()
for b in "$1" "$2"; do
  p=$(realpath -e -- "$b" 2>/dev/null) || { echo "governor-test: no such file: $b" >&2; exit 2; }
  [[ -x $p ]] || { echo "governor-test: not executable: $p" >&2; exit 2; }
  bins+=("$p")
done
if [[ $EUID -ne 0 ]]; then echo "governor-test: needs root" >&2; exit 2; fi
command -v fio >/dev/null || { echo "FAIL governor-test: fio is not installed" ; exit 1; }

# a second controller with 2 queues (2 CPUs each) for the IRQ move by hotplug
vmargs=(--cpus 4 --ctrl 4 --ctrl 2) gargs=(--irq-move)
if [[ $multipath = 1 ]]; then vmargs+=(--multipath 2); gargs+=(--multipath); fi

start=$SECONDS
rc=0
"$here/nvme-vm" "${vmargs[@]}" --timeout "$timeout" -- \
  /bin/bash "$here/guest-governor.sh" "${gargs[@]}" "${bins[@]}" || rc=$?
secs=$((SECONDS - start))
if [[ $rc -eq 0 ]]; then
  echo "PASS governor-test (${secs}s, nvme-vm ${vmargs[*]})"
elif [[ $rc -eq 125 ]]; then
  echo "FAIL governor-test (${secs}s): the guest did not finish"; exit 1
else
  echo "FAIL governor-test (${secs}s): guest rc $rc"; exit 1
fi
