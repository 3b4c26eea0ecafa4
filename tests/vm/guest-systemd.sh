#!/usr/bin/env bash
# guest-systemd.sh: the part of systemd-test.sh that runs INSIDE an nvme-vm
# --systemd guest (systemd is PID 1; / is a throw-away overlay). Installs
# UNIT_FILE as latgov.service with the given latgovd, a fixed 0 us
# configuration in /etc/latgov/latgov.toml, and checks the unit's life cycle
# under the real service manager: start (Type=notify, READY), hardening,
# holding for fio, reload, crash + restart + ExecStopPost restore, a bad
# configuration (exit 78, no restart loop) and stop.
#
# Usage: guest-systemd.sh UNIT_FILE LATGOVD LATGOV
# Prints PASS/FAIL lines (and journalctl -u latgov on failure); exits 1 if
# anything failed.
set -euo pipefail
export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=governor-lib.sh source-path=SCRIPTDIR
. "$here/governor-lib.sh"

[[ $# -eq 3 ]] || { echo "usage: guest-systemd.sh UNIT_FILE LATGOVD LATGOV" >&2; exit 2; }
unit_src=$1 latgovd=$2 latgov=$3
unit=latgov
runtime=/run/latgov
fio_seconds=5

show() { systemctl show -p "$1" --value "$unit"; }
journal() { journalctl -u "$unit" -b --no-pager -o short 2>/dev/null; }
finish() {
  if [[ $LG_FAILED -gt 0 ]]; then
    echo "--- systemctl status $unit"
    systemctl status --no-pager "$unit" 2>&1 | sed 's/^/    /' || true
    echo "--- journalctl -u $unit"
    journal | sed 's/^/    /'
  fi
  echo "guest-systemd: $LG_FAILED failed"
}
trap finish EXIT

echo "guest: $(uname -r), systemd $(systemctl --version | awk 'NR == 1 { print $2 }'), PID 1 $(cat /proc/1/comm)"
[[ $(cat /proc/1/comm) == systemd ]] || { lg_fail "PID 1 is not systemd"; exit 1; }
lg_wait_disks plain 1 || { lg_fail "no NVMe namespace disk appeared"; exit 1; }
lg_first_disk_queue
[[ $comp =~ ^[0-9]+$ ]] || { lg_fail "topology: IRQ $irq completes on '$comp', not one CPU"; exit 1; }

# The unit as shipped, with our binary. ProtectHome= and PrivateTmp= hide
# home directories and /tmp from the service, where a build may live: install
# a copy in /usr/local/sbin of this throw-away guest, as a package would.
install -m 0755 "$latgovd" /usr/local/sbin/latgovd
bin=/usr/local/sbin/latgovd
sed -E -e "s|^ExecStart=[^ ]*latgovd|ExecStart=$bin|" \
    -e "s|^ExecStopPost=[^ ]*latgovd|ExecStopPost=$bin|" \
    "$unit_src" > /etc/systemd/system/$unit.service
grep -E '^Exec(Start|StopPost)=' /etc/systemd/system/$unit.service | sed 's/^/unit: /'
mkdir -p /etc/latgov
good_config() {
  cat > /etc/latgov/latgov.toml <<'EOF'
[daemon]
log_level = "debug"
status_interval_ms = 50

[defaults]
mode = "fixed"
limit_us = 0
# Software emulation: fio's user-space time between two QD1 reads reaches
# tens of ms; hold the queue 300 ms past its last completion.
linger_ms = 300
EOF
}
bad_config() { # an unknown key on line 6
  printf '[daemon]\nlog_level = "info"\n\n[defaults]\nmode = "fixed"\nno_such_key = 1\n' > /etc/latgov/latgov.toml
}
good_config
"$latgovd" --check-config --config /etc/latgov/latgov.toml > /dev/null || lg_fail "the test configuration does not validate"

# fio from CPU k in the background; waits until its reads reach the disk
fio_bg() {
  local base
  base=$(lg_disk_reads "$disk")
  lg_fio_start "$k" "$disk" "$1"
  lg_wait_reads "$disk" "$base"
}
held_only_comp() { # during fio: exactly CPU comp at n/a, within 3 s
  if lg_wait_only_held 3000 "$comp"; then lg_pass "$1: only CPU $comp reads n/a (after $LG_ELAPSED ms) ($(lg_qos_all))"
  else lg_fail "$1: expected only CPU $comp at n/a: $(lg_qos_all)"; return 1; fi
}

# --- start --------------------------------------------------------------------
lg_none_held || lg_fail "before start: some CPU is not at \"0\": $(lg_qos_all)"
systemctl daemon-reload
rc=0; systemctl start "$unit" || rc=$?
lg_check "systemctl start $unit (rc $rc)" test "$rc" = 0
st=$(systemctl is-active "$unit" || true)
lg_check "systemctl is-active: $st" test "$st" = active
props="$(show ActiveState)/$(show SubState) StatusText='$(show StatusText)'"
lg_check "READY (Type=notify): $props" test "$props" = "active/running StatusText='Governing'"
pid=$(show MainPID)
jt=$(journal)
lg_check "journal: governing $disk" grep -q "governing $disk " <<< "$jt"
if bad=$(grep -E "Failed to|Permission denied|Operation not permitted|not on tmpfs|\[error\]" <<< "$jt"); then
  lg_fail "journal: errors under the unit's hardening: $(head -n 5 <<< "$bad" | tr '\n' ';')"
else lg_pass "journal: no 'Failed to' / 'Permission denied' / EPERM"; fi
if grep -q "waking on block_rq_issue events" <<< "$jt"; then
  lg_pass "journal: IO events (perf_event_open) work under the hardening"
else
  lg_fail "journal: IO events unavailable under the hardening: $(grep -i 'IO events' <<< "$jt" | head -n 1)"
fi
# kernel uevents reach the unit's private network namespace: a synthetic
# "change" uevent on the disk (written to its uevent file) makes latgovd rescan
echo change > "/sys/block/$disk/uevent"
for ((i = 0; i < 60; i++)); do
  grep -q "rescanning after .* uevent(s), the last: change block" <<< "$(journal)" && break
  lg_sleep 0.1
done
lg_check "journal: a change uevent on $disk reached latgovd (AF_NETLINK, PrivateNetwork=yes)" \
  grep -q "rescanning after .* uevent(s), the last: change block" <<< "$(journal)"
lg_check "idle: every CPU reads \"0\" ($(lg_qos_all))" lg_none_held

# --- IO: the completion CPU is held -------------------------------------------
if fio_bg "$fio_seconds"; then
  held_only_comp "fio from CPU $k" || true
  status=$("$latgov" status --json --runtime-dir "$runtime" | lg_status_lines) || status="(failed)"
  if lg_status_only "$status" "$comp" "$disk/$q"; then lg_pass "latgov status: CPU $comp held_for $disk/$q"
  else lg_fail "latgov status does not show only CPU $comp held_for $disk/$q: $(tr '\n' ';' <<< "$status")"; fi
else lg_fail "fio did not start reading"; fi
wait "$LG_FIO_PID" || lg_fail "fio exited non-zero"
if lg_wait_only_held 1000 ""; then lg_pass "released $LG_ELAPSED ms after fio exited"
else lg_fail "not released within 1 s of fio's exit: $(lg_qos_all)"; fi

# --- reload -------------------------------------------------------------------
rc=0; systemctl reload "$unit" || rc=$?
lg_check "systemctl reload (rc $rc)" test "$rc" = 0
props="$(show ActiveState)/$(show SubState) StatusText='$(show StatusText)' MainPID=$(show MainPID)"
lg_check "after reload: $props (same PID $pid)" test "$props" = "active/running StatusText='Governing' MainPID=$pid"
lg_check "journal: configuration reloaded" grep -q "configuration reloaded" <<< "$(journal)"

# --- kill -9 while holding: ExecStopPost restores, Restart=on-failure -----------
nr0=$(show NRestarts)
if fio_bg 20 && held_only_comp "before kill -9"; then
  kill -9 "$pid"
  # ExecStopPost= must put the value back before the restarted daemon (after
  # RestartSec=1s) takes it again; systemctl is too slow here to catch the
  # auto-restart state, so watch the value itself
  if lg_wait_only_held 10000 ""; then lg_pass "crash: every CPU back to \"0\" $LG_ELAPSED ms after kill -9"
  else lg_fail "crash: not restored within 10 s of kill -9: $(lg_qos_all)"; fi
  newpid=0
  for ((i = 0; i < 200; i++)); do
    newpid=$(show MainPID)
    [[ $newpid != 0 && $newpid != "$pid" && $(show SubState) == running ]] && break
    sleep 0.1
  done
  lg_check "restarted after SIGKILL: PID $pid -> $newpid, NRestarts $nr0 -> $(show NRestarts), $(show ActiveState)/$(show SubState)" \
    test "$newpid" != 0 -a "$newpid" != "$pid" -a "$(show NRestarts)" -gt "$nr0"
  # the restore must come from ExecStopPost (neither the dead nor the new PID)
  restorers=$(journal | grep -E "latgovd\[[0-9]+\]: cpu $comp: restored" | sed -E 's/.*latgovd\[([0-9]+)\].*/\1/' | sort -u | tr '\n' ' ')
  by_stop_post=0
  for p in $restorers; do [[ $p != "$pid" && $p != "$newpid" ]] && by_stop_post=1; done
  lg_check "ExecStopPost=--restore put cpu $comp back (restoring PIDs: ${restorers:-none})" test "$by_stop_post" = 1
  if kill -0 "$LG_FIO_PID" 2>/dev/null; then held_only_comp "restarted daemon holds again" || true; fi
  wait "$LG_FIO_PID" || lg_fail "fio exited non-zero"
  if lg_wait_only_held 1000 ""; then lg_pass "after restart and idle: every CPU reads \"0\" ($LG_ELAPSED ms after fio)"
  else lg_fail "after restart and idle: $(lg_qos_all)"; fi
  pid=$newpid
else
  lg_fail "kill -9 test: no hold to kill the daemon in"; wait "$LG_FIO_PID" || true
fi

# --- bad configuration: exit 78, no restart loop ---------------------------------
bad_config
rc=0; systemctl restart "$unit" 2> /dev/null || rc=$?
lg_check "restart with a bad configuration fails (rc $rc)" test "$rc" != 0
sleep 0.5
nr1=$(show NRestarts)
sleep 3   # RestartSec=1s: a restart loop would show within 3 s
props="$(show ActiveState) ExecMainStatus=$(show ExecMainStatus) NRestarts=$nr1->$(show NRestarts)"
lg_check "bad configuration: $props (78, not restarted)" test "$props" = "failed ExecMainStatus=78 NRestarts=$nr1->$nr1"
lg_check "bad configuration: journal names latgov.toml:6 and no_such_key" grep -qE "latgov.toml:6:[0-9]+.*no_such_key|no_such_key.*latgov.toml:6:" <<< "$(journal)"
lg_check "bad configuration: every CPU reads \"0\" ($(lg_qos_all))" lg_none_held

# --- stop while holding -------------------------------------------------------------
good_config
systemctl reset-failed "$unit" || true
rc=0; systemctl start "$unit" || rc=$?
lg_check "start again with the good configuration (rc $rc)" test "$rc" = 0
if fio_bg 8 && held_only_comp "before stop"; then
  rc=0; systemctl stop "$unit" || rc=$?
  lg_check "systemctl stop while holding (rc $rc)" test "$rc" = 0
  lg_check "after stop: every CPU reads \"0\" ($(lg_qos_all))" lg_none_held
  lg_check "after stop: $(show ActiveState), journal $runtime/journal gone" test "$(show ActiveState)" = inactive -a ! -e "$runtime/journal"
else
  lg_fail "stop test: no hold"
fi
kill "$LG_FIO_PID" 2>/dev/null || true
wait "$LG_FIO_PID" 2>/dev/null || true
[[ $LG_FAILED -eq 0 ]]
