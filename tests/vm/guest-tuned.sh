#!/usr/bin/env bash
# guest-tuned.sh: the part of tuned-test.sh that runs INSIDE an nvme-vm
# --systemd guest. Usage: guest-tuned.sh LATGOV_DEB TUNED_DEBS_DIR
set -euo pipefail
export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=governor-lib.sh source-path=SCRIPTDIR
. "$here/governor-lib.sh"
[[ $# -eq 2 ]] || { echo "usage: guest-tuned.sh LATGOV_DEB TUNED_DEBS_DIR" >&2; exit 2; }
deb=$1 debs=$2
finish() {
  if [[ $LG_FAILED -gt 0 ]]; then
    for u in tuned latgov; do
      echo "--- journalctl -u $u"
      journalctl -u "$u" -b --no-pager -o short 2>/dev/null | tail -n 30 | sed 's/^/    /'
    done
  fi
  echo "guest-tuned: $LG_FAILED failed"
}
trap finish EXIT
# the aggregate of every /dev/cpu_dma_latency request, in us ("none" = no limit)
dma() { python3 -c 'import struct; v = struct.unpack("i", open("/dev/cpu_dma_latency", "rb").read(4))[0]; print("none" if v == 2000000000 else v)'; }
all_qos() { local c out=""; for c in $(lg_cpus); do out+="$(lg_qos "$c") "; done; echo "${out% }"; }

lg_wait_disks plain 1 || { lg_fail "no NVMe namespace disk appeared"; exit 1; }
lg_first_disk_queue
ncpu=$(lg_cpus | wc -l)
rm -f /usr/sbin/policy-rc.d   # a container image's ban on starting services
# Under software emulation dpkg spends minutes in man-db's index trigger and
# in byte-compiling tuned's Python: skip both in this throw-away guest
# (Python compiles on first import instead).
rm -f /var/lib/man-db/auto-update
printf '#!/bin/sh\nexit 0\n' > /usr/local/bin/py3compile && chmod +x /usr/local/bin/py3compile

# --- tuned with force_latency and a per-CPU value --------------------------------
# libraries first: gawk pre-depends on libsigsegv2, which must be configured
# before gawk unpacks
out=$(export DEBIAN_FRONTEND=noninteractive
      if compgen -G "$debs/lib*.deb" > /dev/null; then dpkg -i "$debs"/lib*.deb; fi &&
      dpkg -i "$debs"/*.deb 2>&1) && rc=0 || rc=$?
lg_check "dpkg -i tuned and its dependencies (rc $rc)" test "$rc" = 0
echo "tuned: $(systemctl is-active tuned 2>&1)"
[[ $rc = 0 ]] || { grep -iE "error|depend|dpkg:" <<< "$out" | sed 's/^/    /' | head -n 30; exit 1; }
mkdir -p /etc/tuned/latgov-coexist
cat > /etc/tuned/latgov-coexist/tuned.conf <<'CONF'
[main]
summary=latgov coexistence test: a global and a per-CPU wake-up latency limit
[cpu]
force_latency=20
pm_qos_resume_latency_us=100
CONF
systemctl start tuned
tuned-adm profile latgov-coexist
want_tuned="$(printf '100 %.0s' $(seq "$ncpu"))"; want_tuned=${want_tuned% }
for ((i = 0; i < 100; i++)); do [[ $(dma) == 20 && $(all_qos) == "$want_tuned" ]] && break; sleep 0.1; done
lg_check "tuned holds /dev/cpu_dma_latency at $(dma) us, every CPU at $(all_qos)" \
  test "$(dma)" = 20 -a "$(all_qos)" = "$want_tuned"

# --- latgov beside it ----------------------------------------------------------------
DEBIAN_FRONTEND=noninteractive dpkg -i "$deb" > /dev/null 2>&1 || lg_fail "dpkg -i latgov"
mkdir -p /etc/latgov/latgov.d
printf '[defaults]\nmode = "fixed"\nlimit_us = 0\nlinger_ms = 300\n' > /etc/latgov/latgov.d/test.toml
systemctl restart latgov
lg_check "latgov active: $(systemctl is-active latgov)" test "$(systemctl is-active latgov)" = active
doctor=$(latgov doctor 2>&1) && drc=0 || drc=$?
echo "$doctor" | sed 's/^/    doctor: /'
lg_check "latgov doctor exits 3, needs attention (rc $drc)" test "$drc" = 3
lg_check "latgov doctor names the other /dev/cpu_dma_latency holder" \
  grep -q 'FIX.*/dev/cpu_dma_latency: held at 20 us by another process' <<< "$doctor"
lg_check "latgov doctor names tuned's per-CPU values" grep -q "FIX.*per-CPU pm_qos_resume_latency_us: set by someone else: cpu0=100" <<< "$doctor"
status=$(latgov status 2>&1 | tail -n 1)
lg_check "latgov status shows tuned's holds: $status" \
  grep -q "other holders (kept, not governed by latgov): /dev/cpu_dma_latency 20 us, cpu0 100" <<< "$status"
base=$(lg_disk_reads "$disk")
# One reading of every CPU both says and checks what was seen: under TCG
# dma() (a python3 start) takes seconds, long enough for fio to end.
want_during=$(for c in $(lg_cpus); do [[ $c == "$comp" ]] && echo n/a || echo 100; done | tr '\n' ' ')
want_during=${want_during% }
lg_fio_start "$k" "$disk" 15
if lg_wait_reads "$disk" "$base"; then
  for ((i = 0; i < 60; i++)); do qos=$(all_qos); [[ $qos == "$want_during" ]] && break; sleep 0.05; done
  global=$(dma)
  lg_check "during fio: CPU $comp n/a (latgov, stricter than tuned's 100), others tuned's: $qos; global $global" \
    test "$qos" = "$want_during" -a "$global" = 20
else lg_fail "fio did not start"; fi
wait "$LG_FIO_PID" || true
for ((i = 0; i < 40; i++)); do [[ $(all_qos) == "$want_tuned" ]] && break; sleep 0.05; done
lg_check "after fio: tuned's 100 back on CPU $comp ($(all_qos)), global $(dma)" test "$(all_qos)" = "$want_tuned" -a "$(dma)" = 20

systemctl stop latgov
lg_check "latgov stopped: tuned's values in place ($(all_qos), global $(dma))" test "$(all_qos)" = "$want_tuned" -a "$(dma)" = 20
systemctl start latgov
systemctl stop tuned
for ((i = 0; i < 100; i++)); do [[ $(dma) == none ]] && break; sleep 0.1; done
lg_check "tuned stopped: its global request gone (global $(dma)), latgov still active" \
  test "$(dma)" = none -a "$(systemctl is-active latgov)" = active
want_none="$(printf '0 %.0s' $(seq "$ncpu"))"; want_none=${want_none% }
for ((i = 0; i < 40; i++)); do [[ $(all_qos) == "$want_none" ]] && break; sleep 0.05; done
lg_check "tuned stopped: the per-CPU values tuned put back stay ($(all_qos))" test "$(all_qos)" = "$want_none"
[[ $LG_FAILED -eq 0 ]]
