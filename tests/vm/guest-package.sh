#!/usr/bin/env bash
# guest-package.sh: the part of package-test.sh that runs INSIDE an nvme-vm
# --systemd guest (systemd is PID 1; / is a throw-away overlay): dpkg -i,
# then, while the daemon holds a CPU for fio, dpkg -i again (an upgrade: the
# service restarts on the new binary and releases when IO stops) and dpkg -r
# (the service stops, every CPU is back, the conffile stays), dpkg --purge,
# and the postrm's purge of a journal that still has records (kept, with a
# warning).
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
# man-db's trigger rebuilds the whole manual page index after each dpkg run
# that adds or removes a page: tens of seconds under emulation, four times.
# Nothing here reads the index.
rm -f /var/lib/man-db/auto-update

# dpkg_step WHAT DPKG_ARGS...: dpkg, and a PASS/FAIL line naming WHAT, its
# exit status and how long it took; its output is printed if it failed.
dpkg_step() {
  local what=$1 t0 out rc; shift
  lg_ms; t0=$LG_MS
  out=$(DEBIAN_FRONTEND=noninteractive dpkg "$@" 2>&1) && rc=0 || rc=$?
  lg_ms
  lg_check "$what (rc $rc, $(((LG_MS - t0) / 1000)) s)" test "$rc" = 0
  [[ $rc = 0 ]] || sed 's/^/    /' <<< "$out"
}
wait_running() { # up to 10 s
  local i
  for ((i = 0; i < 100; i++)); do [[ $(show SubState) == running ]] && break; sleep 0.1; done
}
# The runtime journal holds a record (a line that is neither blank nor a comment).
journal_records() { grep -qs '^[[:space:]]*[^#[:space:]]' /run/latgov/journal; }
no_journal_records() { ! journal_records; }

# --- install ------------------------------------------------------------------
lg_none_held || lg_fail "before install: some CPU is not at \"0\": $(lg_qos_all)"
dpkg_step "dpkg -i $(basename "$deb")" -i "$deb"
lg_check "dpkg owns /usr/sbin/latgovd" bash -c "dpkg -S /usr/sbin/latgovd | grep -q '^latgov:'"
lg_check "/etc/latgov/latgov.toml is a conffile" bash -c "dpkg-query -W -f='\${Conffiles}' latgov | grep -q ' /etc/latgov/latgov.toml '"
lg_check "man latgovd is installed" test -s /usr/share/man/man8/latgovd.8.gz
lg_check "enabled: $(systemctl is-enabled $unit 2>&1)" test "$(systemctl is-enabled $unit 2>&1)" = enabled
wait_running
props="$(show ActiveState)/$(show SubState) StatusText='$(show StatusText)'"
lg_check "started by the package: $props" test "$props" = "active/running StatusText='Governing'"
exe=$(readlink "/proc/$(show MainPID)/exe" || echo none)
lg_check "runs the packaged binary: $exe" test "$exe" = /usr/sbin/latgovd
lg_check "unit from the package: $(show FragmentPath)" test "$(show FragmentPath)" = /lib/systemd/system/latgov.service
lg_check "latgov status answers" bash -c "latgov status > /dev/null"

# --- a hold to upgrade and remove under ------------------------------------------
# This guest has no cpuidle driver, so the default auto mode holds nothing:
# a drop-in makes the daemon hold 0 on the completion CPU while IO runs.
# One fio run serves every step (it takes 10-30 s to start under
# emulation): paused with SIGSTOP where IO must stop, killed at the end.
# 20 reads a second: 50 ms gaps, well inside linger_ms, so the hold lasts,
# and the guest is not kept busy (fio at full speed makes each dpkg run
# below take 2 to 4 times as long under emulation).
mkdir -p /etc/latgov/latgov.d
printf '[defaults]\nmode = "fixed"\nlimit_us = 0\nlinger_ms = 300\n' > /etc/latgov/latgov.d/test.toml
systemctl reload "$unit"
base=$(lg_disk_reads "$disk")
taskset -c "$k" fio --name=latgov-vm --filename="/dev/$disk" --readonly --thread \
  --rw=randread --bs=4k --iodepth=1 --ioengine=psync --direct=1 --rate_iops=20 \
  --runtime=600 --time_based --output=/dev/null > /dev/null 2>&1 &
LG_FIO_PID=$!
stop_fio() {
  [[ -n $LG_FIO_PID ]] || return 0
  kill -CONT "$LG_FIO_PID" 2>/dev/null || true
  kill "$LG_FIO_PID" 2>/dev/null || true
  wait "$LG_FIO_PID" 2>/dev/null || true
  LG_FIO_PID=
}
trap 'stop_fio; finish' EXIT
if lg_wait_reads "$disk" "$base" && lg_wait_only_held 3000 "$comp"; then
  lg_pass "fio: only CPU $comp reads n/a ($(lg_qos_all))"
else
  lg_fail "fio: expected CPU $comp held: $(lg_qos_all)"
fi

# --- upgrade while holding: the same package again ----------------------------------
# postinst restarts the service: ExecStopPost= puts the CPU back, and the new
# latgovd must take "0" for the original, not the old one's "n/a".
pid=$(show MainPID)
dpkg_step "dpkg -i $(basename "$deb") again while holding (upgrade)" -i "$deb"
wait_running
newpid=$(show MainPID)
lg_check "after upgrade: restarted, PID $pid -> $newpid, $(show ActiveState)/$(show SubState)" \
  test "$newpid" != "$pid" -a "$newpid" != 0 -a "$(show SubState)" = running
exe=$(readlink "/proc/$newpid/exe" || echo none)
lg_check "after upgrade: runs the packaged binary: $exe" test "$exe" = /usr/sbin/latgovd
if lg_wait_only_held 3000 "$comp"; then lg_pass "after upgrade, fio: only CPU $comp reads n/a ($(lg_qos_all))"
else lg_fail "after upgrade, fio: expected CPU $comp held: $(lg_qos_all)"; fi
kill -STOP "$LG_FIO_PID"
if lg_wait_only_held 2000 ""; then lg_pass "after upgrade, fio paused: nothing held after $LG_ELAPSED ms ($(lg_qos_all))"
else lg_fail "after upgrade, fio paused: still held after 2 s: $(lg_qos_all)"; fi
kill -CONT "$LG_FIO_PID"
if lg_wait_only_held 3000 "$comp"; then lg_pass "fio resumed: only CPU $comp reads n/a ($(lg_qos_all))"
else lg_fail "fio resumed: expected CPU $comp held: $(lg_qos_all)"; fi

# --- remove while holding ------------------------------------------------------------
dpkg_step "dpkg -r latgov while holding" -r latgov
lg_check "after remove: no latgovd process" bash -c "! pgrep -x latgovd > /dev/null"
lg_check "after remove: every CPU reads \"0\" ($(lg_qos_all))" lg_none_held
status=$(dpkg-query -W -f='${Status}' latgov 2>&1 || true)
lg_check "after remove: package state '$status'" test "$status" = "deinstall ok config-files"
lg_check "after remove: /etc/latgov/latgov.toml is kept (conffile)" test -f /etc/latgov/latgov.toml
lg_check "after remove: /usr/sbin/latgovd is gone" test ! -e /usr/sbin/latgovd
lg_check "after remove: the unit is gone ($(show LoadState))" test "$(show LoadState)" = not-found
lg_check "after remove: no record left in /run/latgov/journal" no_journal_records
stop_fio

# --- purge ------------------------------------------------------------------------------
dpkg_step "dpkg --purge latgov" --purge latgov
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

# --- purge with a journal that still has records --------------------------------
# What neither ExecStopPost= nor the prerm's restore could put back: the
# package's postrm, run by hand, keeps it and says so; a journal of blank
# records goes.
scripts=$(mktemp -d)
dpkg-deb -e "$deb" "$scripts"
mkdir -p /run/latgov
printf '# latgov journal: per-CPU pm_qos_resume_latency_us to restore\n%-255s\n%-255s\n' \
  "cpu $comp original 0 written n/a" "" > /run/latgov/journal
out=$(DPKG_MAINTSCRIPT_PACKAGE=latgov DPKG_MAINTSCRIPT_NAME=postrm sh "$scripts/postrm" purge 2>&1) && rc=0 || rc=$?
warned() { [[ $rc = 0 && $out == *"warning: /run/latgov/journal still records"* ]]; }
lg_check "postrm purge, journal with a record: rc $rc, warns: $(head -n 1 <<< "$out")" warned
lg_check "postrm purge, journal with a record: /run/latgov/journal is kept" journal_records
printf '# latgov journal: per-CPU pm_qos_resume_latency_us to restore\n%-255s\n' "" > /run/latgov/journal
out=$(DPKG_MAINTSCRIPT_PACKAGE=latgov DPKG_MAINTSCRIPT_NAME=postrm sh "$scripts/postrm" purge 2>&1) && rc=0 || rc=$?
lg_check "postrm purge, journal of blank records: rc $rc, /run/latgov removed${out:+: $out}" \
  test "$rc" = 0 -a ! -e /run/latgov
rm -rf "$scripts"
[[ $LG_FAILED -eq 0 ]]
