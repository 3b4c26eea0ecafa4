#!/usr/bin/env bash
# cstates-test.sh: boot one nvme-vm guest with ACPI C-states (--cstates
# 1,20,200: acpi_idle + menu, POLL C1 C2 C3) and run guest-cstates.py in it:
# latgovd's auto limit excludes exactly the states whose cost does not fit,
# and a held CPU stops entering exactly the excluded states (per-state usage
# counters) while unheld CPUs keep entering them.
#
# Usage: cstates-test.sh [--timeout S] LATGOVD LATGOV
# Exit 0 if all passed, 1 if any failed or the guest did not finish, 2 on
# usage errors. Needs root.
set -euo pipefail

. "$(dirname "${BASH_SOURCE[0]}")/host-lib.sh"

latencies=1,20,200 timeout=600
if [[ ${1:-} = --timeout ]]; then timeout=$2; shift 2; fi
[[ $# -eq 2 ]] || { lg_usage >&2; exit 2; }
lg_binaries "$1" "$2"
lg_host_ready

lg_boot "$timeout" --cpus 2 --ctrl 2 --cstates "$latencies" -- \
  python3 "$lg_here/guest-cstates.py" --latencies "$latencies" "${bins[@]}"
