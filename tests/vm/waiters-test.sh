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

. "$(dirname "${BASH_SOURCE[0]}")/host-lib.sh"

timeout=400
if [[ ${1:-} = --timeout ]]; then timeout=$2; shift 2; fi
[[ $# -eq 2 ]] || { lg_usage >&2; exit 2; }
lg_binaries "$1" "$2"
lg_host_ready

lg_boot "$timeout" --cpus 4 --ctrl 2 --cstates 1,20,200 -- \
  python3 "$lg_here/guest-waiters.py" "${bins[@]}"
