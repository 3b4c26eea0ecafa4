#!/usr/bin/env bash
# onset-company-test.sh: boot one nvme-vm guest with 2 CPUs and two NVMe
# controllers of 2 IO queues, each with two namespaces (nvme0n1 and nvme0n2
# share their controller's queues and IRQs), and run guest-onset-company.py
# in it: isolated reads of nvme0n1, each with an asynchronous write to
# nvme0n2 (on the read's IRQ) or to nvme1n1 (another controller) completing
# while the read is held, come alone, and latgovd pauses its wake-ups after
# 8 of them.
#
# Usage: onset-company-test.sh [--timeout S] LATGOVD LATGOV
# Exit 0 if all passed, 1 if any failed or the guest did not finish, 2 on
# usage errors. Needs root.
set -euo pipefail

. "$(dirname "${BASH_SOURCE[0]}")/host-lib.sh"

timeout=300
if [[ ${1:-} = --timeout ]]; then timeout=$2; shift 2; fi
[[ $# -eq 2 ]] || { lg_usage >&2; exit 2; }
lg_binaries "$1" "$2"
lg_host_ready

lg_boot "$timeout" --cpus 2 --ctrl 2 --ctrl 2 --namespaces 2 -- \
  python3 "$lg_here/guest-onset-company.py" "${bins[@]}"
