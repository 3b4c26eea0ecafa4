#!/usr/bin/env bash
# package-test.sh: boot one nvme-vm --systemd guest (systemd as PID 1 on a
# throw-away overlay; 4 CPUs, one controller with 4 I/O queues) and run
# guest-package.sh in it: the Debian package installs with dpkg -i, its
# service is enabled and running from the packaged binary and holds the
# completion CPU for fio; under that hold a second dpkg -i (an upgrade)
# restarts it on the new binary, and dpkg -r stops it with no CPU left held
# and the conffile kept; dpkg --purge then leaves no file of it behind, but
# a runtime journal that still has records.
#
# Usage: package-test.sh [--timeout S] LATGOV_DEB
# Exit 0 if all passed, 1 if any failed or the guest did not finish, 2 on
# usage errors. Needs root, fio and systemd on the host.
set -euo pipefail

. "$(dirname "${BASH_SOURCE[0]}")/host-lib.sh"

timeout=600
while [[ $# -gt 0 ]]; do
  case "$1" in
    --timeout) timeout=$2; shift 2;;
    -h|--help) lg_usage; exit 0;;
    -*) echo "$lg_test: unknown option $1" >&2; exit 2;;
    *) break;;
  esac
done
[[ $# -eq 1 ]] || { echo "usage: package-test.sh [--timeout S] LATGOV_DEB" >&2; exit 2; }
deb=$(realpath -e -- "$1" 2>/dev/null) || { echo "FAIL $lg_test: no package $1"; exit 1; }
lg_host_ready
if dpkg-query -W -f='${Status}' latgov 2>/dev/null | grep -q "ok installed"; then
  echo "FAIL $lg_test: latgov is installed on this host; the guest must start without it"; exit 1
fi
lg_boot "$timeout" --systemd --cpus 4 --ctrl 4 -- /bin/bash "$lg_here/guest-package.sh" "$deb"
