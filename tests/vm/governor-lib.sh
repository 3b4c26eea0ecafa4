# governor-lib.sh: shell helpers for the latgovd VM tests (guest-governor.sh,
# guest-systemd.sh). Sourced, not run. Everything here reads the guest
# directly (sysfs, procfs), independently of latgov, and works for any
# number of CPUs, controllers and queues.
#
# Under software emulation a fork+exec in the guest costs 0.1-0.5 s, so the
# helpers used while IO runs (lg_only_held, lg_wait_*, lg_read_reads) use bash
# builtins only and return values in variables, not through $(...).
#
# Results: lg_pass / lg_fail print "PASS ..." / "FAIL ..." lines and count
# the failures in LG_FAILED.
# shellcheck shell=bash

LG_FAILED=0
LG_CPU_SYS=/sys/devices/system/cpu

lg_pass() { local up; read -r up _ < /proc/uptime; echo "PASS $* [t=$up]"; }
lg_fail() { local up; read -r up _ < /proc/uptime; echo "FAIL $* [t=$up]"; LG_FAILED=$((LG_FAILED + 1)); }
lg_check() { # $1 = description; rest = command
  local what=$1; shift
  if "$@"; then lg_pass "$what"; else lg_fail "$what"; fi
}
lg_ms() { # milliseconds since boot into LG_MS (monotonic, 10 ms steps), no fork
  local up
  read -r up _ < /proc/uptime
  LG_MS=$((10#${up/./} * 10))
}
# lg_sleep SECONDS: a pause without forking sleep (a read with a timeout on a
# FIFO nobody writes to; opened read-write so the open does not block; the
# guest's /dev has no /dev/fd for a process substitution)
lg_fifo=$(mktemp -u /run/latgov-sleep.XXXXXX)
mkfifo "$lg_fifo"
exec {LG_SLEEP_FD}<>"$lg_fifo"
rm -f "$lg_fifo"
lg_sleep() { read -r -t "$1" -u "$LG_SLEEP_FD" _ || true; }

# --- CPUs and their per-CPU PM QoS values -----------------------------------
# LG_CPUS: the CPUs that have the per-CPU knob, ascending (read once)
lg_init_cpus() {
  local f c
  local -a have=()
  for f in "$LG_CPU_SYS"/cpu[0-9]*/power/pm_qos_resume_latency_us; do
    [[ -e $f ]] || continue
    c=${f#"$LG_CPU_SYS"/cpu}; have[${c%%/*}]=1
  done
  LG_CPUS=("${!have[@]}")
}
lg_init_cpus
lg_cpus() { printf '%s\n' "${LG_CPUS[@]}"; }
lg_qos() { local v; read -r v < "$LG_CPU_SYS/cpu$1/power/pm_qos_resume_latency_us"; echo "$v"; }
lg_qos_all() { # "0=0 1=n/a ..."
  local c v out=""
  for c in "${LG_CPUS[@]}"; do
    read -r v < "$LG_CPU_SYS/cpu$c/power/pm_qos_resume_latency_us"; out+="$c=$v "
  done
  echo "${out% }"
}
# succeeds when exactly the CPUs in $1 (space separated, may be empty) read
# "n/a" and every other CPU reads "0"
lg_only_held() {
  local want=" $1 " c v
  for c in "${LG_CPUS[@]}"; do
    read -r v < "$LG_CPU_SYS/cpu$c/power/pm_qos_resume_latency_us"
    if [[ $want == *" $c "* ]]; then [[ $v == n/a ]] || return 1
    else [[ $v == 0 ]] || return 1; fi
  done
}
lg_none_held() { lg_only_held ""; }
# wait up to $1 ms for lg_only_held "$2"; the elapsed ms go to LG_ELAPSED
lg_wait_only_held() {
  local limit=$1 want=$2 t0
  lg_ms; t0=$LG_MS
  while :; do
    lg_ms; LG_ELAPSED=$((LG_MS - t0))
    lg_only_held "$want" && return 0
    [[ $LG_ELAPSED -lt $limit ]] || return 1
    lg_sleep 0.005
  done
}

# lg_fixed_config FILE LINGER_MS: the configuration of the fixed-policy
# tests (guest-governor.sh, guest-faults.sh): tests/fixed-policy.toml (a 0 us
# limit on the CPUs that complete each queue's IO, waiter CPUs off), held for
# LINGER_MS after a queue's last completion. Under software emulation fio's
# own user-space time between two QD1 reads reaches tens of ms (the guest's
# CPUs are emulated), so the 3 ms default linger would release and re-take
# the hold between reads. (Where fio runs on a CPU whose queue's IRQ lands
# elsewhere, the multipath case, its CPU would be held as a waiter; that is
# guest-waiters.py's subject.)
lg_fixed_config() {
  cat "$(dirname "${BASH_SOURCE[0]}")/../fixed-policy.toml" > "$1"
  echo "linger_ms = $2" >> "$1"
}

# --- topology, read independently of latgov ---------------------------------
lg_expand_cpus() { # "0-2,5" or "0, 1, 2" -> "0 1 2 5"
  local part lo hi out=() i
  IFS=',' read -r -a parts <<< "${1// /}"
  for part in "${parts[@]}"; do
    [[ -n $part ]] || continue
    if [[ $part == *-* ]]; then
      lo=${part%-*} hi=${part#*-}
      for ((i = lo; i <= hi; i++)); do out+=("$i"); done
    else out+=("$part"); fi
  done
  echo "${out[*]}"
}
lg_nvme_disks() { # kind: plain (namespace with mq/, not a path), head, path
  local d n
  for d in /sys/block/nvme*; do
    [[ -e $d ]] || continue
    n=${d##*/}
    case $1 in
      plain) [[ $n =~ ^nvme[0-9]+n[0-9]+$ && -d $d/mq ]] && echo "$n";;
      head) [[ $n =~ ^nvme[0-9]+n[0-9]+$ && ! -d $d/mq ]] && echo "$n";;
      path) [[ $n =~ ^nvme[0-9]+c[0-9]+n[0-9]+$ ]] && echo "$n";;
    esac
  done
  return 0
}
lg_wait_disks() { # $1 = kind, $2 = count; waits up to 20 s
  local i
  for ((i = 0; i < 200; i++)); do
    [[ $(lg_nvme_disks "$1" | wc -l) -ge $2 ]] && return 0
    sleep 0.1
  done
  return 1
}
lg_queue_of() { # $1 = disk with mq/, $2 = CPU -> hctx index that CPU submits to
  local q
  for q in /sys/block/"$1"/mq/*; do
    [[ " $(lg_expand_cpus "$(cat "$q/cpu_list")") " == *" $2 "* ]] && { echo "${q##*/}"; return 0; }
  done
  return 1
}
lg_ctrl_of() { basename "$(readlink -f "/sys/block/$1/device")"; } # nvme<C>
lg_irq_named() { # $1 = action name -> IRQ number from /proc/interrupts
  awk -v n="$1" '$1 ~ /^[0-9]+:$/ && $NF == n { sub(":", "", $1); print $1; exit }' /proc/interrupts
}
lg_queue_irq() { # $1 = disk, $2 = hctx index -> IRQ number (nvme<C>q<i+1>, or q0 if alone)
  local ctrl irq
  ctrl=$(lg_ctrl_of "$1")
  irq=$(lg_irq_named "${ctrl}q$(($2 + 1))")
  [[ -n $irq ]] || irq=$(lg_irq_named "${ctrl}q0")
  [[ -n $irq ]] && echo "$irq"
}
lg_completion_cpus() { lg_expand_cpus "$(cat "/proc/irq/$1/effective_affinity_list")"; }
# The queue the last CPU submits to on the first plain NVMe disk, for the
# systemd guests: sets disk, k (that CPU), q, irq and comp (the CPUs the IRQ
# completes on) and prints them.
lg_first_disk_queue() {
  disk=$(lg_nvme_disks plain | head -n 1)
  k=$(lg_cpus | tail -n 1)
  q=$(lg_queue_of "$disk" "$k")
  irq=$(lg_queue_irq "$disk" "$q")
  comp=$(lg_completion_cpus "$irq")
  echo "topology: CPU $k submits on $disk queue $q, IRQ $irq completes on CPU $comp"
}
# lg_io_count SOURCE: into LG_COUNT, the IO done so far of SOURCE: a disk's
# completed reads, or "irq:N", the interrupts of IRQ N on every CPU (a
# disk's statistics leave passthrough requests out where the kernel does
# not account them). Builtins only.
lg_io_count() {
  local line c n=0
  local -a counts
  if [[ $1 == irq:* ]]; then
    read -r line < "/sys/kernel/irq/${1#irq:}/per_cpu_count"
    IFS=, read -r -a counts <<< "$line"
    for c in "${counts[@]}"; do n=$((n + c)); done
  else
    read -r n _ < "/sys/block/$1/stat"
  fi
  LG_COUNT=$n
}
lg_disk_reads() { lg_io_count "$1"; echo "$LG_COUNT"; }

# --- latgov status (python3 for the JSON) ------------------------------------
# prints one line per CPU: "CPU LIMIT DEV/Q,DEV/Q" (LIMIT "-" = not held,
# held_for "-" = none) from `latgov status --json`, read on stdin
lg_status_lines() {
  if command -v jq >/dev/null; then
    jq -r '.cpus[] | "\(.cpu) \(if .limit_us == null then "-" else .limit_us end) \(
      [.held_for[]? | "\(.device)/\(.queue)"] | if length == 0 then "-" else join(",") end)"'
    return
  fi
  python3 -c '
import json, sys
s = json.load(sys.stdin)
for c in s["cpus"]:
    lim = "-" if c.get("limit_us") is None else str(c["limit_us"])
    held = ",".join("%s/%s" % (q["device"], q["queue"]) for q in c.get("held_for", []))
    print(c["cpu"], lim, held or "-")
'
}
# succeeds when the status says: CPU $2 held at 0 for $3 (DEV/Q) alone (the
# queue once for each reason: completes, waits), and nothing else held; $1 =
# the status lines
lg_status_only() {
  local lines=$1 cpu=$2 why=$3 c lim held item seen=0
  while read -r c lim held; do
    if [[ $c == "$cpu" ]]; then
      [[ $lim == 0 ]] || return 1
      for item in ${held//,/ }; do [[ $item == "$why" ]] || return 1; done
      seen=1
    else
      [[ $lim == - && $held == - ]] || return 1
    fi
  done <<< "$lines"
  [[ $seen == 1 ]]
}

# --- fio ---------------------------------------------------------------------
# lg_fio_start CPU DEV SECONDS [ENGINE]: QD1 4k random reads, read-only, from
# one thread pinned to CPU; sets LG_FIO_PID. ENGINE psync (the default:
# O_DIRECT reads of the disk DEV) or io_uring_cmd (NVMe passthrough reads,
# DEV the namespace's character device, ngXnY)
lg_fio_start() {
  local engine_args=(--ioengine=psync --direct=1)
  [[ ${4:-psync} == io_uring_cmd ]] && engine_args=(--ioengine=io_uring_cmd --cmd_type=nvme)
  taskset -c "$1" fio --name=latgov-vm --filename="/dev/$2" --readonly --thread \
    --rw=randread --bs=4k --iodepth=1 "${engine_args[@]}" \
    --runtime="$3" --time_based --output=/dev/null > /dev/null 2>&1 &
  LG_FIO_PID=$!
}
# wait until SOURCE (lg_io_count) did 8 more than $2 (IO under way), max
# 90 s (fio itself takes 10-30 s to start under emulation)
lg_wait_reads() {
  local t0
  lg_ms; t0=$LG_MS
  while :; do
    lg_io_count "$1"
    [[ $LG_COUNT -ge $(($2 + 8)) ]] && return 0
    kill -0 "$LG_FIO_PID" 2>/dev/null || return 1
    lg_ms; [[ $((LG_MS - t0)) -lt ${LG_WAIT_READS_MS:-90000} ]] || return 1
    lg_sleep 0.01
  done
}
# succeeds when status.json in $1 says an idle latgovd sleeps on
# block_getrq events (not the sampling fallback)
lg_events_armed() {
  local line
  line=$(grep -m1 '"io_events"' "$1/status.json" 2>/dev/null) || return 1
  [[ $line == *'"sleeping until the first request'* ]]
}
# onset_delay of status.json in $1 as "COUNT P99_US MAX_US" into LG_ONSET
lg_onset() {
  LG_ONSET=$(python3 -c '
import json, sys
o = json.load(open(sys.argv[1] + "/status.json")).get("onset_delay", {})
print(o.get("count", 0), int(o.get("p99_us", -1)), int(o.get("max_us", -1)))
' "$1" 2>/dev/null) || LG_ONSET="0 -1 -1"
}
# latgovd's view of its IO events (status.json in $1): io_events, onset_delay
lg_status_events() {
  python3 -c '
import json, sys
s = json.load(open(sys.argv[1] + "/status.json"))
print("status: io_events=%r onset_delay=%s" % (s.get("io_events"), json.dumps(s.get("onset_delay"))))
' "$1" 2>&1 || true
}
