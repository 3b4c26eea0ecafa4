#!/usr/bin/env bash
# run-topology-tests.sh: boot QEMU guests with real NVMe controllers (nvme-vm)
# and check, in each, that `latgov topology --json` agrees with an independent
# ground truth (ground_truth.py) read in the same guest.
#
# Usage: run-topology-tests.sh [options] LATGOV_BINARY
#   --snapshots DIR   also run `latgov snapshot -o DIR/LAYOUT.tar.gz` in each
#                     guest (used to make the golden fixtures in tests/golden)
#   --ground-truth DIR  with --snapshots: also write the live ground truth that
#                     each snapshot must reproduce as DIR/LAYOUT.json (see
#                     check-fixtures.sh; the repository keeps them in tests/vm/expected)
#   --out DIR         keep each guest's JSON and logs in DIR/LAYOUT/ (default: a
#                     temporary directory, removed when everything passed)
#   --only LAYOUT     run only this layout (repeatable)
#   --timeout S       per guest (default 600)
#   --list            print the layouts and exit
# Exit status: 0 if every layout passed, 1 if any failed or a guest did not
# boot, 2 on usage errors. Needs root (QEMU guest with the host root shared).
# Each boot takes 30-60 s under software emulation.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)

# name | nvme-vm options | nvme* disks to wait for | null_blk parameters for a
# second check in the same guest after reloading null_blk (empty: none) |
# guest state set before the first phase (empty: none; see guest-topology.sh)
layouts=(
  "vm-4cpu-1ctrl-4q|--cpus 4 --ctrl 4|1|"
  "vm-6cpu-3q-poll|--cpus 6 --ctrl 3 --poll-queues 1|1|"
  "vm-multipath|--cpus 4 --multipath 2|3|"
  "vm-2ctrl-nullblk|--cpus 2 --ctrl 1 --ctrl 2|2|nr_devices=2 submit_queues=2 poll_queues=1"
  "vm-2cpu-cstates|--cpus 2 --ctrl 2 --cstates 1,20,200|1||cpu1-state2-disabled,cpu0-resume-20"
)

usage() { sed -n '2,/^set -euo/p' "$0" | sed -e '$d' -e 's/^# \{0,1\}//'; }

snapdir="" gtdir="" outdir="" timeout=600 only=()
while [[ $# -gt 0 ]]; do
  case "$1" in
    --snapshots) snapdir=$2; shift 2;;
    --ground-truth) gtdir=$2; shift 2;;
    --out) outdir=$2; shift 2;;
    --only) only+=("$2"); shift 2;;
    --timeout) timeout=$2; shift 2;;
    --list) for l in "${layouts[@]}"; do IFS='|' read -r n v _ b _ <<< "$l"; echo "$n: $v${b:+ (then null_blk $b)}"; done; exit 0;;
    -h|--help) usage; exit 0;;
    --) shift; break;;
    -*) echo "run-topology-tests: unknown option $1" >&2; exit 2;;
    *) break;;
  esac
done
[[ $# -eq 1 ]] || { usage >&2; exit 2; }
latgov=$(realpath -e -- "$1" 2>/dev/null) || { echo "run-topology-tests: no such file: $1" >&2; exit 2; }
[[ -x $latgov ]] || { echo "run-topology-tests: not executable: $latgov" >&2; exit 2; }
if [[ $EUID -ne 0 ]]; then echo "run-topology-tests: needs root" >&2; exit 2; fi

if [[ -n $snapdir ]]; then mkdir -p "$snapdir"; snapdir=$(realpath "$snapdir"); fi
if [[ -n $gtdir ]]; then
  [[ -n $snapdir ]] || { echo "run-topology-tests: --ground-truth needs --snapshots" >&2; exit 2; }
  mkdir -p "$gtdir"
fi
tmp_out=0
if [[ -z $outdir ]]; then outdir=$(mktemp -d "${TMPDIR:-/tmp}/latgov-topo.XXXXXX"); tmp_out=1; fi
mkdir -p "$outdir"; outdir=$(realpath "$outdir")

# check one phase's files; prints the reason on failure
check_phase() { # $1 = phase dir
  local dir=$1 rc
  if [[ ! -s $dir/expected.json ]]; then
    echo "ground truth failed: $(head -c 300 "$dir/gt.err" 2>/dev/null)"; return 1
  fi
  if [[ -s $dir/gt.err ]]; then
    echo "ground truth reported problems: $(head -c 300 "$dir/gt.err")"; return 1
  fi
  rc=$(cat "$dir/latgov.rc" 2>/dev/null || echo "?")
  if [[ $rc != 0 ]]; then
    echo "latgov topology --json exited $rc: $(head -c 300 "$dir/latgov.err" 2>/dev/null)"; return 1
  fi
  if ! python3 "$here/check_topology.py" "$dir/expected.json" "$dir/actual.json" > "$dir/check.txt" 2>&1; then
    cat "$dir/check.txt"; return 1
  fi
  cat "$dir/check.txt"
}

# a snapshot must reproduce the live topology of the guest's last phase, both
# through latgov --sysroot and through ground_truth.py --root (completeness)
check_snapshot() { # $1 = layout dir, $2 = tarball
  local dir=$1 tarball=$2 last tree rc=0 bad=0
  last=$dir/$(tail -n 1 "$dir/phases")
  tree=$dir/snapshot.tree
  rm -rf "$tree"; mkdir -p "$tree"
  tar -xzf "$tarball" -C "$tree" || { echo "snapshot: cannot unpack $tarball"; return 1; }
  "$latgov" --sysroot "$tree" topology --json > "$dir/snapshot.actual.json" 2> "$dir/snapshot.err" || rc=$?
  if [[ $rc -ne 0 ]]; then
    echo "snapshot replay: latgov --sysroot exited $rc: $(head -c 300 "$dir/snapshot.err")"; bad=1
  elif python3 "$here/check_topology.py" "$last/expected.json" "$dir/snapshot.actual.json" > "$dir/snapshot.check.txt" 2>&1; then
    echo "snapshot replay (latgov --sysroot vs live ${last##*/}): $(cat "$dir/snapshot.check.txt")"
  else
    echo "snapshot replay (latgov --sysroot vs live ${last##*/}): $(cat "$dir/snapshot.check.txt")"; bad=1
  fi
  if python3 "$here/ground_truth.py" --root "$tree" > "$dir/snapshot.gt.json" 2> "$dir/snapshot.gt.err" &&
     python3 "$here/check_topology.py" "$last/expected.json" "$dir/snapshot.gt.json" > "$dir/snapshot.gt.check.txt" 2>&1; then
    echo "snapshot completeness (ground truth of the tarball vs live): $(cat "$dir/snapshot.gt.check.txt")"
    [[ -z $gtdir ]] || cp "$last/expected.json" "$gtdir/${dir##*/}.json"
  else
    echo "snapshot completeness (ground truth of the tarball vs live): $(cat "$dir/snapshot.gt.err" "$dir/snapshot.gt.check.txt" 2>/dev/null)"; bad=1
  fi
  return "$bad"
}

failed=0 ran=0
for l in "${layouts[@]}"; do
  IFS='|' read -r name vmopts ndisks nullblk setup <<< "$l"
  if [[ ${#only[@]} -gt 0 ]]; then
    match=0; for o in "${only[@]}"; do [[ $o = "$name" ]] && match=1; done
    [[ $match = 1 ]] || continue
  fi
  ran=$((ran + 1))
  dir=$outdir/$name
  rm -rf "$dir"; mkdir -p "$dir"
  read -r -a vmargs <<< "$vmopts"
  gargs=(--nvme-disks "$ndisks")
  [[ -n $nullblk ]] && gargs+=(--nullblk "$nullblk")
  [[ -n $setup ]] && gargs+=(--set "$setup")
  [[ $vmopts == *--multipath* ]] && gargs+=(--path-requests)
  [[ -n $snapdir ]] && { rm -f "$snapdir/$name.tar.gz"; gargs+=(--snapshot "$snapdir/$name.tar.gz"); }

  start=$SECONDS
  vmrc=0
  "$here/nvme-vm" "${vmargs[@]}" --timeout "$timeout" -- \
    /bin/bash "$here/guest-topology.sh" "${gargs[@]}" "$dir" "$latgov" > "$dir/guest.log" 2>&1 || vmrc=$?
  secs=$((SECONDS - start))

  if [[ $vmrc -ne 0 ]]; then
    echo "FAIL $name (${secs}s): guest did not boot or the guest script failed (rc $vmrc); log $dir/guest.log:"
    tail -n 15 "$dir/guest.log" | sed 's/^/    /'
    failed=$((failed + 1)); continue
  fi
  ok=1 msgs=()
  phases=()
  [[ -f $dir/phases ]] && mapfile -t phases < "$dir/phases"
  for phase in "${phases[@]/#/$dir/}"; do
    if reason=$(check_phase "$phase"); then
      msgs+=("${phase##*/}: $reason")
    else
      ok=0; msgs+=("${phase##*/}: $reason")
    fi
  done
  if [[ ${#msgs[@]} -eq 0 ]]; then ok=0; msgs+=("the guest wrote no results (see $dir/guest.log)"); fi
  if [[ $vmopts == *--multipath* ]]; then
    # requests through the head name the dev_t latgov gives its hidden paths
    [[ $(cat "$dir/path-requests.rc" 2>/dev/null) = 0 ]] || ok=0
    msgs+=("path requests (rc $(cat "$dir/path-requests.rc" 2>/dev/null || echo none)):")
    [[ -f $dir/path-requests.txt ]] && mapfile -t -O "${#msgs[@]}" msgs < "$dir/path-requests.txt"
  fi
  if [[ -n $snapdir ]]; then
    src=$(cat "$dir/snapshot.rc" 2>/dev/null || echo "?")
    if [[ $src = 0 && -s $snapdir/$name.tar.gz ]]; then
      msgs+=("snapshot: $snapdir/$name.tar.gz")
      if reason=$(check_snapshot "$dir" "$snapdir/$name.tar.gz"); then
        msgs+=("$reason")
      else
        ok=0; msgs+=("$reason")
      fi
    else
      ok=0; msgs+=("snapshot failed (rc $src): $(head -c 300 "$dir/snapshot.log" 2>/dev/null)")
    fi
  fi
  if [[ $ok = 1 ]]; then echo "PASS $name (${secs}s)"; else echo "FAIL $name (${secs}s)"; failed=$((failed + 1)); fi
  for m in "${msgs[@]}"; do printf '%s\n' "$m" | sed 's/^/    /'; done
done

if [[ $ran -eq 0 ]]; then echo "run-topology-tests: no layout selected (see --list)" >&2; exit 2; fi
echo "topology layouts: $((ran - failed)) passed, $failed failed"
if [[ $failed -eq 0 && $tmp_out = 1 ]]; then rm -rf "$outdir"; else echo "results kept in $outdir"; fi
[[ $failed -eq 0 ]]
