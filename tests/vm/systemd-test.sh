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

. "$(dirname "${BASH_SOURCE[0]}")/host-lib.sh"

unit=$lg_here/../../systemd/latgov.service timeout=600
while [[ $# -gt 0 ]]; do
  case "$1" in
    --unit) unit=$2; shift 2;;
    --timeout) timeout=$2; shift 2;;
    -h|--help) lg_usage; exit 0;;
    --) shift; break;;
    -*) echo "$lg_test: unknown option $1" >&2; exit 2;;
    *) break;;
  esac
done
[[ $# -eq 2 ]] || { lg_usage >&2; exit 2; }
lg_binaries "$1" "$2"
unit=$(realpath -e -- "$unit" 2>/dev/null) || { echo "$lg_test: no unit file" >&2; exit 2; }
lg_host_ready

lg_boot "$timeout" --systemd --cpus 4 --ctrl 4 -- \
  /bin/bash "$lg_here/guest-systemd.sh" "$unit" "${bins[@]}"
