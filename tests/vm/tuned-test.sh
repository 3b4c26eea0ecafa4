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
. "$(dirname "${BASH_SOURCE[0]}")/host-lib.sh"
timeout=900
[[ ${1:-} == --timeout ]] && { timeout=$2; shift 2; }
[[ $# -eq 2 ]] || { echo "usage: tuned-test.sh [--timeout S] LATGOV_DEB TUNED_DEBS_DIR" >&2; exit 2; }
deb=$(realpath -e -- "$1" 2>/dev/null) || { echo "FAIL $lg_test: no package $1"; exit 1; }
debs=$(realpath -e -- "$2" 2>/dev/null) || { echo "FAIL $lg_test: no $2 (scripts/tuned-debs)"; exit 1; }
compgen -G "$debs/tuned_*.deb" > /dev/null || { echo "FAIL $lg_test: no tuned package in $debs"; exit 1; }
lg_host_ready
lg_boot "$timeout" --systemd --cpus 4 --ctrl 4 -- /bin/bash "$lg_here/guest-tuned.sh" "$deb" "$debs"
