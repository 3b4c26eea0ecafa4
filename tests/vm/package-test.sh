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

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
timeout=600
while [[ $# -gt 0 ]]; do
  case "$1" in
    --timeout) timeout=$2; shift 2;;
    -h|--help) sed -n '2,/^set -euo/p' "$0" | sed -e '$d' -e 's/^# \{0,1\}//'; exit 0;;
    -*) echo "package-test: unknown option $1" >&2; exit 2;;
    *) break;;
  esac
done
[[ $# -eq 1 ]] || { echo "usage: package-test.sh [--timeout S] LATGOV_DEB" >&2; exit 2; }
deb=$(realpath -e -- "$1" 2>/dev/null) || { echo "FAIL package-test: no package $1"; exit 1; }
if [[ $EUID -ne 0 ]]; then echo "package-test: needs root" >&2; exit 2; fi
command -v fio >/dev/null || { echo "FAIL package-test: fio is not installed"; exit 1; }
if dpkg-query -W -f='${Status}' latgov 2>/dev/null | grep -q "ok installed"; then
  echo "FAIL package-test: latgov is installed on this host; the guest must start without it"; exit 1
fi

start=$SECONDS
rc=0
"$here/nvme-vm" --systemd --cpus 4 --ctrl 4 --timeout "$timeout" -- \
  /bin/bash "$here/guest-package.sh" "$deb" || rc=$?
secs=$((SECONDS - start))
if [[ $rc -eq 0 ]]; then
  echo "PASS package-test (${secs}s)"
elif [[ $rc -eq 125 ]]; then
  echo "FAIL package-test (${secs}s): the guest did not finish"; exit 1
else
  echo "FAIL package-test (${secs}s): guest rc $rc"; exit 1
fi
