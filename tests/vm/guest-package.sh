#!/usr/bin/env bash
# guest-package.sh: the part of package-test.sh that runs INSIDE an nvme-vm
# --systemd guest (systemd is PID 1; / is a throw-away overlay).
#
# Usage: guest-package.sh LATGOV_DEB
# Prints PASS/FAIL lines (and the unit's journal on failure); exits 1 if
# anything failed.
set -euo pipefail
export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=governor-lib.sh source-path=SCRIPTDIR
. "$here/governor-lib.sh"

[[ $# -eq 1 ]] || { echo "usage: guest-package.sh LATGOV_DEB" >&2; exit 2; }
deb=$1
unit=latgov

show() { systemctl show -p "$1" --value "$unit"; }
finish() {
  if [[ $LG_FAILED -gt 0 ]]; then
    echo "--- systemctl status $unit"
    systemctl status --no-pager "$unit" 2>&1 | sed 's/^/    /' || true
    echo "--- journalctl -u $unit"
    journalctl -u "$unit" -b --no-pager -o short 2>/dev/null | sed 's/^/    /'
  fi
  echo "guest-package: $LG_FAILED failed"
}
trap finish EXIT

echo "guest: $(uname -r), systemd $(systemctl --version | awk 'NR == 1 { print $2 }'), PID 1 $(cat /proc/1/comm)"
[[ $(cat /proc/1/comm) == systemd ]] || { lg_fail "PID 1 is not systemd"; exit 1; }
lg_wait_disks plain 1 || { lg_fail "no NVMe namespace disk appeared"; exit 1; }
lg_first_disk_queue

# A container image's policy-rc.d forbids starting services on package
# installs (exit 101); a server has none, and neither does this guest.
rm -f /usr/sbin/policy-rc.d

# --- install ------------------------------------------------------------------
lg_none_held || lg_fail "before install: some CPU is not at \"0\": $(lg_qos_all)"
out=$(DEBIAN_FRONTEND=noninteractive dpkg -i "$deb" 2>&1) && rc=0 || rc=$?
lg_check "dpkg -i $(basename "$deb") (rc $rc)" test "$rc" = 0
[[ $rc = 0 ]] || sed 's/^/    /' <<< "$out"
lg_check "dpkg owns /usr/sbin/latgovd" bash -c "dpkg -S /usr/sbin/latgovd | grep -q '^latgov:'"
lg_check "/etc/latgov/latgov.toml is a conffile" bash -c "dpkg-query -W -f='\${Conffiles}' latgov | grep -q ' /etc/latgov/latgov.toml '"
lg_check "man latgovd is installed" test -s /usr/share/man/man8/latgovd.8.gz
lg_check "enabled: $(systemctl is-enabled $unit 2>&1)" test "$(systemctl is-enabled $unit 2>&1)" = enabled
for ((i = 0; i < 100; i++)); do [[ $(show SubState) == running ]] && break; sleep 0.1; done
props="$(show ActiveState)/$(show SubState) StatusText='$(show StatusText)'"
lg_check "started by the package: $props" test "$props" = "active/running StatusText='Governing'"
exe=$(readlink "/proc/$(show MainPID)/exe" || echo none)
lg_check "runs the packaged binary: $exe" test "$exe" = /usr/sbin/latgovd
lg_check "unit from the package: $(show FragmentPath)" test "$(show FragmentPath)" = /lib/systemd/system/latgov.service
lg_check "latgov status answers" bash -c "latgov status > /dev/null"

# --- a hold to purge under ----------------------------------------------------
# This guest has no cpuidle driver, so the default auto mode holds nothing:
# a drop-in makes the daemon hold 0 on the completion CPU while IO runs.
mkdir -p /etc/latgov/latgov.d
printf '[defaults]\nmode = "fixed"\nlimit_us = 0\nlinger_ms = 300\n' > /etc/latgov/latgov.d/test.toml
systemctl reload "$unit"
base=$(lg_disk_reads "$disk")
lg_fio_start "$k" "$disk" 30
if lg_wait_reads "$disk" "$base" && lg_wait_only_held 3000 "$comp"; then
  lg_pass "fio: only CPU $comp reads n/a ($(lg_qos_all))"
else
  lg_fail "fio: expected CPU $comp held: $(lg_qos_all)"
fi

# --- purge while holding --------------------------------------------------------
out=$(DEBIAN_FRONTEND=noninteractive dpkg --purge latgov 2>&1) && rc=0 || rc=$?
lg_check "dpkg --purge latgov while holding (rc $rc)" test "$rc" = 0
[[ $rc = 0 ]] || sed 's/^/    /' <<< "$out"
lg_check "after purge: no latgovd process" bash -c "! pgrep -x latgovd > /dev/null"
lg_check "after purge: every CPU reads \"0\" ($(lg_qos_all))" lg_none_held
lg_check "after purge: the unit is gone ($(systemctl is-active $unit 2>&1), $(show LoadState))" \
  test "$(show LoadState)" = not-found
for f in /usr/sbin/latgovd /etc/latgov/latgov.toml /run/latgov /var/lib/latgov; do
  if [[ -e $f ]]; then lg_fail "after purge: $f is left: $(ls -la "$f" 2>&1 | head -n 5 | tr '\n' ';')"
  else lg_pass "after purge: $f is gone"; fi
done
# A file the administrator created is not the package's to remove.
lg_check "after purge: the administrator's drop-in stays" test -f /etc/latgov/latgov.d/test.toml
kill "$LG_FIO_PID" 2>/dev/null || true
wait "$LG_FIO_PID" 2>/dev/null || true
[[ $LG_FAILED -eq 0 ]]
