#!/usr/bin/env bash
# check-explain.sh LATGOV FIXTURE.tar.gz DEVICE QUEUES: `latgov explain` on a
# captured tree with the embedded default configuration: the device is
# governed by default, every one of its QUEUES queues is listed with its IRQ,
# and each completion CPU gets its idle-state table. A --config that does
# not exist is an error, and so is a status that cannot be read.
set -euo pipefail
latgov=$1 fixture=$2 device=$3 queues=$4
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
tar -xzf "$fixture" -C "$tmp"
: > "$tmp/empty.toml"   # an empty file: every key at its default
out=$("$latgov" --sysroot "$tmp" explain "$device" --config "$tmp/empty.toml" --runtime-dir "$tmp/none")
echo "$out"
fail() { echo "FAIL $*"; exit 1; }
grep -q "^Governed by default (mode auto, backend percpu)" <<< "$out" || fail "not governed by default"
rows=$(grep -cE "^[0-9]+ +${device%n*}q[0-9]+ " <<< "$out" || true)
[[ $rows -eq $queues ]] || fail "$rows queue rows, expected $queues"
# One table per CPU that completes a queue (the rows' third column, a CPU
# list), and no other.
completing=$(grep -E "^[0-9]+ +${device%n*}q[0-9]+ " <<< "$out" | awk '{print $3}' | tr ',' '\n' |
  while IFS=- read -r lo hi; do seq "$lo" "${hi:-$lo}"; done | sort -nu | tr '\n' ' ')
tabled=$(grep -oE "^CPU [0-9]+( idle states:|: no idle states)" <<< "$out" | grep -oE "[0-9]+" |
  sort -nu | tr '\n' ' ')
[[ -n $completing && $tabled == "$completing" ]] ||
  fail "idle-state tables for CPUs '$tabled', completion CPUs '$completing'"
# A --config that does not exist is an error naming it, as for latgovd, not
# the embedded default.
if missing=$("$latgov" --sysroot "$tmp" explain "$device" --config "$tmp/missing.toml" \
             --runtime-dir "$tmp/none" 2>&1); then
  fail "explain with a missing --config succeeded"
fi
grep -q "$tmp/missing.toml" <<< "$missing" || fail "the error does not name the file: $missing"
# Under --sysroot the status is the one inside the tree (the snapshot's
# latgovd), not this host's: a CPU it held shows as held, and whether that
# latgovd still runs is not asked of this host.
cpu=$(grep -oE "^CPU [0-9]+" <<< "$out" | head -1 | cut -d' ' -f2)
[[ -n $cpu ]] || fail "no completion CPU listed"
mkdir -p "$tmp/run/latgov"
cat > "$tmp/run/latgov/status.json" <<JSON
{"pid": 4242, "cpuidle_driver": "none", "cpuidle_governor": "menu", "idle_costs": "table",
 "global_limit_us": null,
 "devices": [{"name": "$device", "mode": "fixed", "backend": "percpu",
              "observed_latency_us": null, "limit_us": 7, "active_queues": [0]}],
 "cpus": [{"cpu": $cpu, "limit_us": 7, "held_for": [{"device": "$device", "queue": 0}]}]}
JSON
snap=$("$latgov" --sysroot "$tmp" explain "$device" --config "$tmp/empty.toml")
grep -q "^  held now at 7 us for $device/0" <<< "$snap" ||
  fail "the tree's status is not read under --sysroot: $snap"
! grep -q "that wrote this status" <<< "$snap" || fail "a snapshot's latgovd reported gone: $snap"
# latgov status too: the tree's status, its latgovd neither running nor
# gone here (not asked: null).
js=$("$latgov" --sysroot "$tmp" status --json 2>&1) || fail "status --json on the tree failed: $js"
grep -q '"pid": 4242' <<< "$js" || fail "status --json does not read the tree's status: $js"
grep -q '"latgovd_running": null' <<< "$js" || fail "status --json asks this host of the snapshot: $js"
# A status that cannot be read is an error naming it, as for `latgov
# status`, not taken for a latgovd that is not running.
printf '{"pid": 4242, "devices": [' > "$tmp/run/latgov/status.json"   # cut short
if bad=$("$latgov" --sysroot "$tmp" explain "$device" --config "$tmp/empty.toml" 2>&1); then
  fail "explain with a truncated status succeeded: $bad"
fi
grep -q "Failed to parse .*status.json" <<< "$bad" || fail "the error does not name the status: $bad"
! grep -q "not running" <<< "$bad" || fail "a truncated status taken for no latgovd: $bad"
echo "PASS explain $device: $rows queues, idle-state tables for completion CPUs ${tabled% }; a missing --config named; the tree's status read; a truncated one named"
