#!/usr/bin/env bash
# systemd-test.sh: boot one nvme-vm --systemd guest (systemd as PID 1 on a
# throw-away overlay; 4 CPUs, one controller with 4 I/O queues) and run
# guest-systemd.sh in it: systemd/latgov.service, as shipped but for the path
# of latgovd and a 5 s WatchdogSec=, must start (Type=notify) after
# calibrate_on_start with every CPU still allowed, work under its hardening,
# hold the completion CPU for fio, reload, restore and restart after kill -9
# and after a stalled loop (SIGSTOP: the watchdog kills it) leaving another
# writer's value alone, refuse a bad configuration with exit 78 without a
# restart loop, and release on stop.
#
# Usage: systemd-test.sh [options] LATGOVD LATGOV
#   --unit FILE   the unit to test (default: systemd/latgov.service of this tree)
#   --timeout S   guest timeout (default 600)
# Prints the guest's PASS/FAIL lines (and the unit's journal on failure);
# exit 0 if all passed, 1 if any failed or the guest did not finish, 2 on
# usage errors. Needs root and systemd installed on the host.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
usage() { sed -n '2,/^set -euo/p' "$0" | sed -e '$d' -e 's/^# \{0,1\}//'; }

unit=$here/../../systemd/latgov.service timeout=600
while [[ $# -gt 0 ]]; do
  case "$1" in
    --unit) unit=$2; shift 2;;
    --timeout) timeout=$2; shift 2;;
    -h|--help) usage; exit 0;;
    --) shift; break;;
    -*) echo "systemd-test: unknown option $1" >&2; exit 2;;
    *) break;;
  esac
done
[[ $# -eq 2 ]] || { usage >&2; exit 2; }
bins=()
for b in "$1" "$2"; do
  p=$(realpath -e -- "$b" 2>/dev/null) || { echo "systemd-test: no such file: $b" >&2; exit 2; }
  [[ -x $p ]] || { echo "systemd-test: not executable: $p" >&2; exit 2; }
  bins+=("$p")
done
unit=$(realpath -e -- "$unit" 2>/dev/null) || { echo "systemd-test: no unit file" >&2; exit 2; }
if [[ $EUID -ne 0 ]]; then echo "systemd-test: needs root" >&2; exit 2; fi
command -v fio >/dev/null || { echo "FAIL systemd-test: fio is not installed"; exit 1; }

start=$SECONDS
rc=0
"$here/nvme-vm" --systemd --cpus 4 --ctrl 4 --timeout "$timeout" -- \
  /bin/bash "$here/guest-systemd.sh" "$unit" "${bins[@]}" || rc=$?
secs=$((SECONDS - start))
if [[ $rc -eq 0 ]]; then
  echo "PASS systemd-test (${secs}s)"
elif [[ $rc -eq 125 ]]; then
  echo "FAIL systemd-test (${secs}s): the guest did not finish"; exit 1
else
  echo "FAIL systemd-test (${secs}s): guest rc $rc"; exit 1
fi
