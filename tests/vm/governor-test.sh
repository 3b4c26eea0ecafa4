#!/usr/bin/env bash
# governor-test.sh: boot one nvme-vm guest (4 CPUs, one controller with 4 I/O
# queues, one CPU each, one with 2 queues of 2 CPUs, plus a 2-path multipath
# subsystem) and run
# guest-governor.sh in it: latgovd with a fixed 0 us policy must hold exactly
# the completion CPU of the submitting CPU's queue while fio reads, release it
# within 1 s after (also with the disk behind mq-deadline, and for NVMe
# passthrough reads), and release
# everything on SIGTERM.
#
# Usage: governor-test.sh [options] LATGOVD LATGOV
#   --no-multipath   boot without the multipath subsystem, skip that check
#   --timeout S      guest timeout (default 600)
# Prints the guest's PASS/FAIL lines; exit 0 if all passed, 1 if any failed
# or the guest did not finish, 2 on usage errors. Needs root.
set -euo pipefail

. "$(dirname "${BASH_SOURCE[0]}")/host-lib.sh"

multipath=1 timeout=600
while [[ $# -gt 0 ]]; do
  case "$1" in
    --no-multipath) multipath=0; shift;;
    --timeout) timeout=$2; shift 2;;
    -h|--help) lg_usage; exit 0;;
    --) shift; break;;
    -*) echo "$lg_test: unknown option $1" >&2; exit 2;;
    *) break;;
  esac
done
[[ $# -eq 2 ]] || { lg_usage >&2; exit 2; }
lg_binaries "$1" "$2"
lg_host_ready

# a second controller with 2 queues (2 CPUs each) for the IRQ move by hotplug
vmargs=(--cpus 4 --ctrl 4 --ctrl 2) gargs=(--irq-move)
if [[ $multipath = 1 ]]; then vmargs+=(--multipath 2); gargs+=(--multipath); fi
lg_boot "$timeout" "${vmargs[@]}" -- /bin/bash "$lg_here/guest-governor.sh" "${gargs[@]}" "${bins[@]}"
