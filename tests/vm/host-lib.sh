# host-lib.sh: what the *-test.sh wrappers share, each of which boots one
# nvme-vm guest on the host and runs a guest-side test in it. Sourced, not
# run; every line it prints names the wrapper
# (governor-test, ...).
#
# Exit status of a wrapper: 0 if every check passed, 1 if any failed or the
# guest did not finish, 2 on usage errors, running without root among them.
# shellcheck shell=bash

lg_here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
lg_test=$(basename "$0" .sh)

# The wrapper's header comment, from its second line to `set -euo`.
lg_usage() { sed -n '2,/^set -euo/p' "$0" | sed -e '$d' -e 's/^# \{0,1\}//'; }

# lg_binaries LATGOVD LATGOV: their real paths in the array `bins`; a usage
# error when either is missing or not executable.
lg_binaries() {
  bins=()
  local b p
  for b in "$@"; do
    p=$(realpath -e -- "$b" 2>/dev/null) || { echo "$lg_test: no such file: $b" >&2; exit 2; }
    [[ -x $p ]] || { echo "$lg_test: not executable: $p" >&2; exit 2; }
    bins+=("$p")
  done
}

# lg_host_ready: root (a usage error without it) and fio (a failure).
lg_host_ready() {
  if [[ $EUID -ne 0 ]]; then echo "$lg_test: needs root" >&2; exit 2; fi
  command -v fio >/dev/null || { echo "FAIL $lg_test: fio is not installed"; exit 1; }
}

# lg_boot TIMEOUT NVME_VM_OPTION... -- GUEST_COMMAND...: boots the guest,
# runs the command in it and prints one PASS or FAIL line with the time it
# took and the guest's options; exits 1 when the guest failed or did not
# finish (nvme-vm's 125).
lg_boot() {
  local timeout=$1 vmargs=() rc=0 start=$SECONDS secs
  shift
  while [[ $# -gt 0 && $1 != -- ]]; do vmargs+=("$1"); shift; done
  "$lg_here/nvme-vm" "${vmargs[@]}" --timeout "$timeout" "$@" || rc=$?
  secs=$((SECONDS - start))
  case $rc in
    0) echo "PASS $lg_test (${secs}s, nvme-vm ${vmargs[*]})";;
    125) echo "FAIL $lg_test (${secs}s): the guest did not finish"; exit 1;;
    *) echo "FAIL $lg_test (${secs}s): guest rc $rc"; exit 1;;
  esac
}
