#!/usr/bin/env bash
# guest-systemd.sh: the part of systemd-test.sh that runs INSIDE an nvme-vm
# --systemd guest (systemd is PID 1; / is a throw-away overlay). Installs
# UNIT_FILE as latgov.service with the given latgovd, a fixed 0 us
# configuration in /etc/latgov/latgov.toml, and checks the unit's life cycle
# under the real service manager: start (Type=notify, READY) with
# calibrate_on_start (the unit lets it read the disk; the daemon keeps every
# CPU), hardening, holding for fio, reload, crash + restart + ExecStopPost
# restore, a stalled loop killed by the watchdog, restarted and restored, a
# bad configuration (exit 78, no restart loop) and stop.
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
  local rc=$?
  # A command that failed under set -e stops the script with no check
  # failed: it says where, and shows the same as a failed check.
  [[ $rc -ne 0 && $LG_FAILED -eq 0 ]] &&
    echo "guest-systemd: stopped early (rc $rc) at line ${err_line:-?}"
  if [[ $LG_FAILED -gt 0 || $rc -ne 0 ]]; then
    echo "--- systemctl status $unit"
    systemctl status --no-pager "$unit" 2>&1 | sed 's/^/    /' || true
    echo "--- journalctl -u $unit"
    journal | sed 's/^/    /'
    # Lines of latgovd that journald did not attribute to the unit (a
    # process that exits before journald reads its datagram) show here only.
    echo "--- journalctl -b, latgovd's 'restored' lines, with or without a unit"
    journalctl -b --no-pager -o short 2>/dev/null | grep -E "latgovd\[[0-9]+\]: .*restored" |
      sed 's/^/    /' || true
  fi
  echo "guest-systemd: $LG_FAILED failed"
}
trap finish EXIT
trap 'err_line=$LINENO' ERR

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
# The watchdog as shipped (30 s) would take most of a minute to fire: the
# same mechanism with a shorter period.
watchdog_s=5 restart_s=1
grep -qE '^WatchdogSec=' /etc/systemd/system/$unit.service || lg_fail "the unit sets no WatchdogSec="
grep -qE "^RestartSec=${restart_s}s$" /etc/systemd/system/$unit.service || lg_fail "the unit's RestartSec= is not ${restart_s}s"
mkdir -p /etc/systemd/system/$unit.service.d
printf '[Service]\nWatchdogSec=%ss\n' "$watchdog_s" > /etc/systemd/system/$unit.service.d/watchdog.conf
calibration=/var/lib/latgov/calibration.toml
rm -f "$calibration"
mkdir -p /etc/latgov
good_config() {
  cat > /etc/latgov/latgov.toml <<'EOF'
[daemon]
log_level = "debug"
status_interval_ms = 50
# Measured on the first start only (the file is then there): the probe reads
# the NVMe namespace under the unit's device policy.
calibrate_on_start = true

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
# Someone else's value on CPU $other (neither the completion nor the fio CPU):
# latgovd, its restarts and ExecStopPost must leave it alone.
other=
for c in $(lg_cpus); do [[ $c != "$comp" && $c != "$k" ]] && { other=$c; break; }; done
[[ -n $other ]] || { lg_fail "topology: no CPU other than $comp and $k"; exit 1; }
foreign=20
set_foreign() { echo "$1" > "$LG_CPU_SYS/cpu$other/power/pm_qos_resume_latency_us"; }
# exactly the CPUs in $1 at n/a, CPU $other at $foreign, every other CPU at 0
held_with_foreign() {
  local want=" $1 " c v
  for c in "${LG_CPUS[@]}"; do
    read -r v < "$LG_CPU_SYS/cpu$c/power/pm_qos_resume_latency_us"
    if [[ $c == "$other" ]]; then [[ $v == "$foreign" ]] || return 1
    elif [[ $want == *" $c "* ]]; then [[ $v == n/a ]] || return 1
    else [[ $v == 0 ]] || return 1; fi
  done
}
# wait up to $1 ms for held_with_foreign "$2"; the elapsed ms go to LG_ELAPSED
wait_held_with_foreign() {
  local limit=$1 t0
  lg_ms; t0=$LG_MS
  while :; do
    lg_ms; LG_ELAPSED=$((LG_MS - t0))
    held_with_foreign "$2" && return 0
    [[ $LG_ELAPSED -lt $limit ]] || return 1
    lg_sleep 0.005
  done
}
# waits up to $2 ms for a running main PID other than $1; it goes to newpid
wait_new_main_pid() {
  local t0
  lg_ms; t0=$LG_MS
  while :; do
    newpid=$(show MainPID)
    [[ $newpid != 0 && $newpid != "$1" && $(show SubState) == running ]] && break
    lg_ms; LG_ELAPSED=$((LG_MS - t0))
    [[ $LG_ELAPSED -lt $2 ]] || return 1
    lg_sleep 0.1
  done
  lg_ms; LG_ELAPSED=$((LG_MS - t0))
}
# the PIDs that logged restoring cpu $comp in journal lines $1 on
restorers_from() {
  journal | tail -n +"$1" | { grep -E "latgovd\[[0-9]+\]: cpu $comp: restored" || true; } |
    sed -E 's/.*latgovd\[([0-9]+)\].*/\1/' | sort -u | tr '\n' ' '
}
# the restoring PIDs from journal line $1 on once ExecStopPost='s is among
# them (journald may take the exited process's output a moment later than
# the restart it preceded), or whatever is there after 5 s
restorers_after() {
  local found deadline=$((SECONDS + 5))
  found=$(restorers_from "$1")
  while ! restored_by_stop_post "$found" "$2" "$3" && ((SECONDS < deadline)); do
    sleep 0.2
    found=$(restorers_from "$1")
  done
  echo "$found"
}
# succeeds when a PID in $1 is neither $2 nor $3: the restore came from
# ExecStopPost=, not from the killed daemon nor from the restarted one
restored_by_stop_post() {
  local p
  for p in $1; do [[ $p != "$2" && $p != "$3" ]] && return 0; done
  return 1
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
# calibrate_on_start: the probe opened the disk (DeviceAllow=) and wrote its
# file; a "Failed to calibrate" also fails the error check below.
lg_check "journal: calibrate_on_start measured" grep -q "measuring idle-state costs (calibrate_on_start)" <<< "$jt"
lg_check "calibrate_on_start wrote $calibration" test -s "$calibration"
lg_check "idle costs in use: measured ($(grep -m1 -o 'idle-state costs: .*' <<< "$jt"))" grep -q "idle-state costs: measured" <<< "$jt"
# The probe's reads ran pinned to one CPU: every thread of the daemon must
# still be allowed on every CPU the service manager allows it (PID 1's),
# but for the latgovd/N threads, each pinned to its CPU for good.
want_cpus=$(awk '/^Cpus_allowed_list:/ { print $2 }' /proc/1/status)
got_cpus=$(for task in /proc/"$pid"/task/*; do
               case $(cat "$task/comm") in latgovd/*) continue ;; esac
               awk '/^Cpus_allowed_list:/ { print $2 }' "$task/status"
           done | sort -u | tr '\n' ' ')
lg_check "after calibrate_on_start latgovd may run on CPUs ${got_cpus% } (PID 1: $want_cpus)" test "${got_cpus% }" = "$want_cpus"
# Nice=: the timer and the kick threads preempt a CPU-bound task.
want_nice=$(show Nice)
got_nice=$(for task in /proc/"$pid"/task/*; do awk '{ print $19 }' "$task/stat"; done | sort -u | tr '\n' ' ')
lg_check "every latgovd thread runs at nice ${got_nice% } (the unit's Nice=$want_nice)" \
  test "${got_nice% }" = "$want_nice" -a "$want_nice" -lt 0
if bad=$(grep -E "Failed to|Permission denied|Operation not permitted|not on tmpfs" <<< "$jt"); then
  lg_fail "journal: errors under the unit's hardening: $(head -n 5 <<< "$bad" | tr '\n' ';')"
else lg_pass "journal: no 'Failed to' / 'Permission denied' / EPERM"; fi
# latgovd writes "<N>"-prefixed lines to its stderr stream: journald must
# have taken N as the priority, not left it in the message
if bad=$(journalctl -u "$unit" -b --no-pager -o short -p err 2>/dev/null | grep -E "latgovd\[[0-9]+\]:"); then
  lg_fail "journal: latgovd logged at priority err or worse: $(head -n 5 <<< "$bad" | tr '\n' ';')"
else lg_pass "journal: nothing from latgovd at priority err or worse"; fi
logged_at_info() { # $1 = text: in the journal at priority info, not above
  journalctl -u "$unit" -b --no-pager -p info | grep -q "$1" &&
    ! journalctl -u "$unit" -b --no-pager -p notice | grep -q "$1"
}
lg_check "journal: 'governing $disk' logged at priority info" logged_at_info "governing $disk "
if bad=$(grep -E "latgovd\[[0-9]+\]: <[0-7]>" <<< "$jt"); then
  lg_fail "journal: a priority prefix left in the message: $(head -n 2 <<< "$bad" | tr '\n' ';')"
else lg_pass "journal: no '<N>' prefix left in latgovd's messages"; fi
if grep -q "waking on block_getrq events" <<< "$jt"; then
  lg_pass "journal: IO events (perf_event_open) work under the hardening"
else
  lg_fail "journal: IO events unavailable under the hardening: $(grep -i 'IO events' <<< "$jt" | head -n 1)"
fi
# kernel uevents reach the unit's private network namespace: a synthetic
# "add" uevent on the disk (written to its uevent file) makes latgovd rescan
# (a disk's "change" alone may not: it first compares the map)
echo add > "/sys/block/$disk/uevent"
for ((i = 0; i < 60; i++)); do
  grep -q "rescanning after .* uevent(s), the last: add block" <<< "$(journal)" && break
  lg_sleep 0.1
done
lg_check "journal: an add uevent on $disk reached latgovd (AF_NETLINK, PrivateNetwork=yes)" \
  grep -q "rescanning after .* uevent(s), the last: add block" <<< "$(journal)"
lg_check "idle: every CPU reads \"0\" ($(lg_qos_all))" lg_none_held

# --- another runtime directory beside the unit ------------------------------------
# Its journal would not know the unit's limits: refused by the lock every
# writer shares, /dev/cpu_dma_latency (the unit's sandbox may give it a
# sysfs of its own, whose inodes another process's flock does not see).
lg_check "$runtime is not listable by others ($(stat -c %a "$runtime"))" test "$(stat -c %a "$runtime")" = 711
mkdir -p /tmp/other-run
rc=0; out=$("$latgovd" --restore --runtime-dir /tmp/other-run 2>&1) || rc=$?
lg_check "latgovd --restore with another runtime directory exits 1 (rc $rc)" test "$rc" = 1
lg_check "... naming the unit's latgovd as the holder of /dev/cpu_dma_latency: $out" \
  grep -q "Failed to lock /dev/cpu_dma_latency: .*(pid $(show MainPID))" <<< "$out"

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

# --- kill -9, then a stalled loop, while holding ---------------------------------
# One fio run for both, stopped once both are checked: up to 180 s, as fio
# takes 10-30 s to start under emulation and the two restarts 20-40 s under
# TCG, more on a loaded host. Before each, someone else writes $foreign to
# CPU $other: nothing may touch it.
if fio_bg 180 && held_only_comp "before kill -9"; then
  set_foreign "$foreign"
  # SIGKILL: ExecStopPost= must put the value back before the restarted
  # daemon (after RestartSec=) takes it again; systemctl is too slow here to
  # catch the auto-restart state, so watch the value itself
  nr0=$(show NRestarts) lines0=$(($(journal | wc -l) + 1))
  kill -9 "$pid"
  if wait_held_with_foreign 10000 ""; then lg_pass "crash: CPU $comp back to \"0\", CPU $other still at $foreign, $LG_ELAPSED ms after kill -9 ($(lg_qos_all))"
  else lg_fail "crash: not restored within 10 s of kill -9, or CPU $other changed: $(lg_qos_all)"; fi
  newpid=0
  wait_new_main_pid "$pid" 20000 || true
  lg_check "restarted after SIGKILL: PID $pid -> $newpid, NRestarts $nr0 -> $(show NRestarts), $(show ActiveState)/$(show SubState)" \
    test "$newpid" != 0 -a "$newpid" != "$pid" -a "$(show NRestarts)" -gt "$nr0"
  restorers=$(restorers_after "$lines0" "$pid" "$newpid")
  lg_check "ExecStopPost=--restore put CPU $comp back after SIGKILL (restoring PIDs: ${restorers:-none})" \
    restored_by_stop_post "$restorers" "$pid" "$newpid"
  pid=$newpid
  if wait_held_with_foreign 3000 "$comp"; then lg_pass "restarted daemon holds CPU $comp again, CPU $other still at $foreign ($LG_ELAPSED ms)"
  else lg_fail "after SIGKILL + restart: expected CPU $comp at n/a and CPU $other at $foreign: $(lg_qos_all)"; fi

  # SIGSTOP: the loop no longer feeds the watchdog; systemd must kill it
  # (SIGABRT) after WatchdogSec=, ExecStopPost= restore and Restart= start
  # it again
  nr0=$(show NRestarts) lines0=$(($(journal | wc -l) + 1))
  kill -STOP "$pid"
  if held_with_foreign "$comp"; then lg_pass "stopped daemon: CPU $comp still held"
  else lg_fail "stopped daemon: CPU $comp not held: $(lg_qos_all)"; fi
  lg_ms; stopped_at=$LG_MS
  limit_ms=$(((watchdog_s + 5) * 1000))
  if wait_held_with_foreign "$limit_ms" ""; then lg_pass "watchdog: CPU $comp back to \"0\", CPU $other still at $foreign, $LG_ELAPSED ms after SIGSTOP (WatchdogSec=${watchdog_s}s) ($(lg_qos_all))"
  else lg_fail "watchdog: not restored within $limit_ms ms of SIGSTOP, or CPU $other changed: $(lg_qos_all)"; fi
  newpid=0
  limit_ms=$(((watchdog_s + restart_s + 15) * 1000))
  lg_ms; wait_new_main_pid "$pid" $((limit_ms - (LG_MS - stopped_at))) || true
  lg_ms; since_stop=$((LG_MS - stopped_at))
  lg_check "restarted after the watchdog: PID $pid -> $newpid, NRestarts $nr0 -> $(show NRestarts), $(show ActiveState)/$(show SubState), $since_stop ms after SIGSTOP (limit $limit_ms)" \
    test "$newpid" != 0 -a "$newpid" != "$pid" -a "$(show NRestarts)" -gt "$nr0" -a "$since_stop" -le "$limit_ms"
  jt=$(journal | tail -n +"$lines0")
  lg_check "journal: the service manager's watchdog fired" grep -q "Watchdog timeout" <<< "$jt"
  lg_check "journal: the stalled daemon died of SIGABRT ($(grep -m1 -oE 'Main process exited, .*' <<< "$jt"))" \
    grep -qE "Main process exited, code=(dumped|killed), status=6/ABRT" <<< "$jt"
  restorers=$(restorers_after "$lines0" "$pid" "$newpid")
  lg_check "ExecStopPost=--restore put CPU $comp back after the watchdog (restoring PIDs: ${restorers:-none})" \
    restored_by_stop_post "$restorers" "$pid" "$newpid"
  kill -CONT "$pid" 2>/dev/null || true
  pid=$newpid
  if kill -0 "$LG_FIO_PID" 2>/dev/null; then
    if wait_held_with_foreign 3000 "$comp"; then lg_pass "restarted daemon holds CPU $comp again, CPU $other still at $foreign ($LG_ELAPSED ms)"
    else lg_fail "after the watchdog + restart: expected CPU $comp at n/a and CPU $other at $foreign: $(lg_qos_all)"; fi
    kill "$LG_FIO_PID"
    wait "$LG_FIO_PID" 2> /dev/null || true
  else
    rc=0; wait "$LG_FIO_PID" || rc=$?
    lg_fail "fio ended (rc $rc) before the watchdog restart could be checked under IO"
  fi
  if wait_held_with_foreign 1000 ""; then lg_pass "after restarts and idle: nothing held, CPU $other still at $foreign ($LG_ELAPSED ms after fio) ($(lg_qos_all))"
  else lg_fail "after restarts and idle: $(lg_qos_all)"; fi
  set_foreign 0
else
  lg_fail "kill -9 / watchdog test: no hold to kill the daemon in"; wait "$LG_FIO_PID" || true
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

# --- start while latgov calibrate holds the runtime directory ----------------------
# Calibrate holds the runtime directory's lock while it steps a CPU (30 s at
# most by default). A start meanwhile waits for it (--wait-for-lock in the
# unit); failing at once, Restart= would reach the start limit and give up.
mkdir -p "$runtime"   # kept across stops (RuntimeDirectoryPreserve=yes)
# Held until released (flock -o: by flock alone, not by its sleep).
lock_runtime() {
  flock -o "$runtime" sleep 600 &
  locker=$!
  for ((i = 0; i < 100; i++)); do
    flock -n "$runtime" true 2> /dev/null || break
    sleep 0.1
  done
}
unlock_runtime() {
  pkill -P "$locker" sleep || true
  kill "$locker" 2> /dev/null || true
  wait "$locker" 2> /dev/null || true
}
# Until the unit says it waits (one `systemctl show` for both: consistent).
wait_for_waiting() {
  state=
  for ((i = 0; i < 300; i++)); do
    state=$(systemctl show -p ActiveState -p StatusText "$unit" | sort | paste -sd ' ')
    [[ $state == *'waiting up to 60 s for it'* ]] && break
    sleep 0.1
  done
  [[ $state == 'ActiveState=activating StatusText='*'waiting up to 60 s for it' ]]
}
lock_runtime
systemctl start "$unit" & starter=$!
waiting=no; wait_for_waiting && kill -0 "$starter" 2> /dev/null && waiting=yes
lg_check "while locked, systemctl start waits: $state" test "$waiting" = yes
unlock_runtime
rc=0; wait "$starter" || rc=$?
lg_check "start while locked succeeds once the lock is released (rc $rc)" test "$rc" = 0
props="$(show ActiveState)/$(show SubState) StatusText='$(show StatusText)'"
lg_check "after the wait: $props" test "$props" = "active/running StatusText='Governing'"
lg_check "journal: latgovd waited, then took the lock" \
  bash -c "journalctl -u $unit -b --no-pager | grep -q 'waiting up to 60 s for it' && journalctl -u $unit -b --no-pager | grep -q 'is ours now'"
systemctl stop "$unit" || true
# Stopped while it waits: latgovd exits 0, and ExecStopPost='s restore
# waits for the lock too, so the unit ends inactive, not failed.
lock_runtime
systemctl start "$unit" & starter=$!
waiting=no; wait_for_waiting && waiting=yes
lg_check "locked again, the start waits: $state" test "$waiting" = yes
systemctl stop "$unit" & stopper=$!
sleep 1
unlock_runtime
rc=0; wait "$stopper" || rc=$?
wait "$starter" 2> /dev/null || true
props="rc $rc, $(show ActiveState), Result=$(show Result), ExecMainStatus=$(show ExecMainStatus)"
lg_check "stopped while waiting for the lock: $props" \
  test "$props" = "rc 0, inactive, Result=success, ExecMainStatus=0"
[[ $LG_FAILED -eq 0 ]]
