#!/usr/bin/env bash
# tuned-test.sh: latgov beside Debian's tuned in one nvme-vm --systemd guest
# (4 CPUs, one controller with 4 I/O queues). guest-tuned.sh installs tuned
# (scripts/tuned-debs) and the latgov package there, activates a tuned
# profile with force_latency and a per-CPU pm_qos_resume_latency_us, and
# checks that neither clobbers the other, that latgov doctor names the
# other holder, and that stopping either leaves the other's values in place.
#
# Usage: tuned-test.sh [--timeout S] LATGOV_DEB TUNED_DEBS_DIR
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
timeout=900
[[ ${1:-} == --timeout ]] && { timeout=$2; shift 2; }
[[ $# -eq 2 ]] || { echo "usage: tuned-test.sh [--timeout S] LATGOV_DEB TUNED_DEBS_DIR" >&2; exit 2; }
deb=$(realpath -e -- "$1" 2>/dev/null) || { echo "FAIL tuned-test: no package $1"; exit 1; }
debs=$(realpath -e -- "$2" 2>/dev/null) || { echo "FAIL tuned-test: no $2 (scripts/tuned-debs)"; exit 1; }
compgen -G "$debs/tuned_*.deb" > /dev/null || { echo "FAIL tuned-test: no tuned package in $debs"; exit 1; }
if [[ $EUID -ne 0 ]]; then echo "tuned-test: needs root" >&2; exit 2; fi
command -v fio >/dev/null || { echo "FAIL tuned-test: fio is not installed"; exit 1; }
start=$SECONDS rc=0
"$here/nvme-vm" --systemd --cpus 4 --ctrl 4 --timeout "$timeout" -- \
  /bin/bash "$here/guest-tuned.sh" "$deb" "$debs" || rc=$?
secs=$((SECONDS - start))
if [[ $rc -eq 0 ]]; then echo "PASS tuned-test (${secs}s)"
elif [[ $rc -eq 125 ]]; then echo "FAIL tuned-test (${secs}s): the guest did not finish"; exit 1
else echo "FAIL tuned-test (${secs}s): guest rc $rc"; exit 1; fi
