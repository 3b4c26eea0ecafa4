#!/usr/bin/env bash
# guest-topology.sh: the part of run-topology-tests.sh that runs INSIDE an
# nvme-vm guest. For each phase it writes into OUTDIR/PHASE/:
#   expected.json  ground_truth.py's view       (gt.err: its stderr)
#   actual.json    `latgov topology --json`     (latgov.err, latgov.rc)
# and the phase names, in order, into OUTDIR/phases
# and, with --snapshot, runs `latgov snapshot -o FILE` once at the end.
# The comparison is left to the caller (check_topology.py on the host).
#
# Usage: guest-topology.sh [options] OUTDIR LATGOV
#   --nvme-disks N        wait until N nvme* block devices exist (namespace scan
#                         is asynchronous and may lag the controllers)
#   --nullblk "PARAMS"    after phase "boot", reload null_blk with PARAMS and run
#                         phase "nullblk"
#   --snapshot FILE       run `latgov snapshot -o FILE` after the last phase
#   --path-requests       after phase "boot", check with path_requests.py that
#                         requests through each multipath head name the dev_t
#                         latgov gives its paths (OUTDIR/path-requests.{txt,rc})
#   --set "ITEM,..."      before the first phase: cpuN-stateK-disabled writes 1
#                         to cpuN's cpuidle/stateK/disable; cpuN-resume-V writes
#                         V to cpuN's pm_qos_resume_latency_us (captured
#                         fixtures then hold a disabled state and a limit)
set -euo pipefail
export PATH=/usr/sbin:/usr/bin:/sbin:/bin

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
nvme_disks=0 nullblk="" snapshot="" have_nullblk=0 set="" path_requests=0
while [[ $# -gt 0 ]]; do
  case "$1" in
    --nvme-disks) nvme_disks=$2; shift 2;;
    --nullblk) nullblk=$2; have_nullblk=1; shift 2;;
    --snapshot) snapshot=$2; shift 2;;
    --set) set=$2; shift 2;;
    --path-requests) path_requests=1; shift;;
    --) shift; break;;
    -*) echo "guest-topology: unknown option $1" >&2; exit 2;;
    *) break;;
  esac
done
[[ $# -eq 2 ]] || { echo "usage: guest-topology.sh [options] OUTDIR LATGOV" >&2; exit 2; }
# A layout without its disks must fail, not compare two empty views.
[[ $nvme_disks -gt 0 ]] || { echo "guest-topology: --nvme-disks N (N > 0) is required" >&2; exit 2; }
out=$1 latgov=$2

mountpoint -q /sys/kernel/debug || mount -t debugfs none /sys/kernel/debug

count_nvme_disks() { local n=0 d; for d in /sys/block/nvme*; do [[ -e $d ]] && n=$((n + 1)); done; echo "$n"; }
wait_for() { # $1 = description; rest = command that succeeds when ready (20 s)
  local what=$1; shift
  local deadline=$((SECONDS + 20))
  until "$@"; do
    if ((SECONDS >= deadline)); then
      echo "guest-topology: FAIL: $what did not appear within 20 s" >&2
      exit 1
    fi
    sleep 0.1
  done
}
enough_nvme() { [[ $(count_nvme_disks) -ge $nvme_disks ]]; }
all_nullb() { # $1 = expected number of nullb devices
  local n=0 d; for d in /sys/block/nullb*; do [[ -e $d/mq ]] && n=$((n + 1)); done; [[ $n -ge $1 ]]
}

run_phase() { # $1 = phase name
  local dir=$out/$1 rc=0 try
  mkdir -p "$dir"
  # take the ground truth before and after latgov; retry if the machine changed
  for try in 1 2 3; do
    python3 "$here/ground_truth.py" > "$dir/expected.json" 2> "$dir/gt.err" || echo "ground_truth.py failed: rc $?" >> "$dir/gt.err"
    rc=0
    "$latgov" topology --json > "$dir/actual.json" 2> "$dir/latgov.err" || rc=$?
    echo "$rc" > "$dir/latgov.rc"
    python3 "$here/ground_truth.py" > "$dir/expected.again.json" 2>/dev/null || true
    if cmp -s "$dir/expected.json" "$dir/expected.again.json"; then
      rm -f "$dir/expected.again.json"
      break
    fi
    echo "guest-topology: $1: topology changed during try $try, retrying" >&2
    sleep 1
  done
  echo "$1" >> "$out/phases"
  echo "guest-topology: phase $1 done (latgov rc $rc)"
}

IFS=, read -r -a items <<< "$set"
for item in "${items[@]}"; do
  if [[ $item =~ ^cpu([0-9]+)-state([0-9]+)-disabled$ ]]; then
    echo 1 > "/sys/devices/system/cpu/cpu${BASH_REMATCH[1]}/cpuidle/state${BASH_REMATCH[2]}/disable"
  elif [[ $item =~ ^cpu([0-9]+)-resume-([0-9]+|n/a)$ ]]; then
    echo "${BASH_REMATCH[2]}" > "/sys/devices/system/cpu/cpu${BASH_REMATCH[1]}/power/pm_qos_resume_latency_us"
  else
    echo "guest-topology: unknown --set item $item" >&2; exit 2
  fi
done

udevadm settle 2>/dev/null || true
wait_for "$nvme_disks nvme block devices" enough_nvme
wait_for "null_blk's nullb0 (nvme-vm loads null_blk)" all_nullb 1
run_phase boot

if [[ $path_requests = 1 ]]; then
  rc=0
  python3 "$here/path_requests.py" "$out/boot/actual.json" > "$out/path-requests.txt" 2>&1 || rc=$?
  echo "$rc" > "$out/path-requests.rc"
  echo "guest-topology: path requests rc $rc"
fi

if [[ $have_nullblk = 1 ]]; then
  modprobe -r null_blk
  # shellcheck disable=SC2086  # PARAMS is a list of module parameters
  modprobe null_blk $nullblk
  nr=1
  if [[ $nullblk =~ nr_devices=([0-9]+) ]]; then nr=${BASH_REMATCH[1]}; fi
  wait_for "$nr null_blk devices" all_nullb "$nr"
  run_phase nullblk
fi

if [[ -n $snapshot ]]; then
  rc=0
  "$latgov" snapshot -o "$snapshot" > "$out/snapshot.log" 2>&1 || rc=$?
  echo "$rc" > "$out/snapshot.rc"
  echo "guest-topology: snapshot rc $rc"
fi
