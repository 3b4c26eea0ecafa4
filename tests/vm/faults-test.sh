#!/usr/bin/env bash
# faults-test.sh: boot one nvme-vm guest (4 CPUs; controller A with 4 I/O
# queues, one CPU each; controller B with 2 queues of 2 CPUs each) and run
# guest-faults.sh in it: latgovd governing under fio while controller A is
# reset, a completion CPU of B goes offline and online, B's PCI function is
# removed and rescanned (governed again within a bound that only uevents
# meet), then stopped with every CPU back at its original value; then run
# again with no uevent socket, a CPU taken offline and back at once must be
# rescanned (cpuhp tracepoint) and its reads held.
#
# Usage: faults-test.sh [--timeout S] LATGOVD LATGOV
# Prints the guest's PASS/FAIL lines; exit 0 if all passed, 1 if any failed
# or the guest did not finish, 2 on usage errors. Needs root and fio.
set -euo pipefail

. "$(dirname "${BASH_SOURCE[0]}")/host-lib.sh"

timeout=300
while [[ $# -gt 0 ]]; do
  case "$1" in
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

lg_boot "$timeout" --cpus 4 --ctrl 4 --ctrl 2 -- /bin/bash "$lg_here/guest-faults.sh" "${bins[@]}"
