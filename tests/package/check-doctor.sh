#!/usr/bin/env bash
# check-doctor.sh LATGOV FIXTURE.tar.gz: `latgov doctor` on an unpacked
# snapshot and `latgov snapshot` feeding it.
#  - exit status: 0 nothing needs attention, 3 a line is marked FIX, 1 the
#    check failed (a tree that is not one), so a script tells them apart;
#  - what the tree lacks (an older snapshot: no /proc/mounts, no tracefs) is
#    "not in the snapshot", never FIX, and its latgovd is the status inside
#    the tree, not this host's /run/latgov;
#  - a status linked out of the tree is not read, and a --runtime-dir of
#    this host is judged as this host's; a status that does not parse is a
#    FIX that names it;
#  - a new snapshot of the tree keeps what doctor reads;
#  - a snapshot that cannot be written says why.
set -uo pipefail
latgov=$1 fixture=$2
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL $*"; exit 1; }
tree=$tmp/tree
mkdir "$tree" && tar -xzf "$fixture" -C "$tree" || fail "cannot unpack $fixture"
cpus=("$tree"/sys/devices/system/cpu/cpu[0-9]*)

# A failure is 1 and names what failed.
err=$("$latgov" --sysroot "$tmp/nonexistent" doctor 2>&1); rc=$?
[[ $rc -eq 1 ]] || fail "doctor on a missing tree exits $rc, expected 1: $err"
grep -q "Failed to open" <<< "$err" || fail "no message naming what failed: $err"

# No other holder in the tree: nothing needs attention, though the tree has
# neither /proc/mounts nor tracefs nor a status.
for cpu in "${cpus[@]}"; do echo 0 > "$cpu/power/pm_qos_resume_latency_us"; done
out=$("$latgov" --sysroot "$tree" doctor); rc=$?
echo "$out"
[[ $rc -eq 0 ]] || fail "doctor on a tree with nothing to fix exits $rc, expected 0"
! grep -q "FIX" <<< "$out" || fail "a FIX for a tree with nothing to fix"
for check in "tracefs" "/run"; do
  grep -q "^\[note\] $check: .*(not in the snapshot)" <<< "$out" ||
    fail "$check is not 'not in the snapshot'"
done
grep -q "^\[note\] latgovd: no status in the snapshot" <<< "$out" ||
  fail "latgovd is not the snapshot's"

# Another holder's per-CPU value: needs attention, exit 3.
echo 100 > "${cpus[-1]}/power/pm_qos_resume_latency_us"
out=$("$latgov" --sysroot "$tree" doctor); rc=$?
[[ $rc -eq 3 ]] || fail "doctor with a FIX exits $rc, expected 3: $out"
grep -q "^\[FIX \] per-CPU pm_qos_resume_latency_us: set by someone else" <<< "$out" ||
  fail "the other holder is not flagged: $out"

# The same value held by the snapshot's latgovd (its status inside the
# tree, read by default): latgov's own, nothing to fix.
cpu=${cpus[-1]##*cpu}
mkdir -p "$tree/run/latgov"
echo "{\"pid\": 4242, \"cpus\": [{\"cpu\": $cpu, \"limit_us\": 100}]}" \
  > "$tree/run/latgov/status.json"
out=$("$latgov" --sysroot "$tree" doctor); rc=$?
[[ $rc -eq 0 ]] || fail "the snapshot's own latgovd hold exits $rc, expected 0: $out"
grep -q "^\[note\] latgovd: status from the snapshot" <<< "$out" ||
  fail "latgovd is not the snapshot's status: $out"

# A status linked to a file outside the tree is looked for inside it: none.
mv "$tree/run/latgov/status.json" "$tmp/status.json"
ln -s "$tmp/status.json" "$tree/run/latgov/status.json"
out=$("$latgov" --sysroot "$tree" doctor); rc=$?
[[ $rc -eq 3 ]] || fail "a status linked out of the tree exits $rc, expected 3: $out"
grep -q "^\[note\] latgovd: no status in the snapshot" <<< "$out" ||
  fail "a status outside the tree was read: $out"
out=$("$latgov" --sysroot "$tree" status 2>&1); rc=$?
[[ $rc -eq 1 ]] && grep -q "no status in the snapshot" <<< "$out" ||
  fail "status read a file outside the tree (exit $rc): $out"

# A runtime directory of this host named beside the tree: its status is
# this host's, and its writer (pid 4242, holding no lock here) is gone.
mkdir "$tmp/run" && mv "$tmp/status.json" "$tmp/run/status.json"
out=$("$latgov" --sysroot "$tree" doctor --runtime-dir "$tmp/run"); rc=$?
[[ $rc -eq 3 ]] || fail "doctor with a gone writer's status exits $rc, expected 3: $out"
grep -q "^\[FIX \] latgovd: not running; pid 4242 left its status" <<< "$out" ||
  fail "the status of --runtime-dir is not judged as this host's: $out"
rm "$tree/run/latgov/status.json" && mv "$tmp/run/status.json" "$tree/run/latgov/status.json"

# A status there that does not parse hides what latgov holds: a fix that
# names it, not "not running".
mkdir "$tmp/bad" && echo '{"pid": 42' > "$tmp/bad/status.json"
out=$("$latgov" --sysroot "$tree" doctor --runtime-dir "$tmp/bad"); rc=$?
[[ $rc -eq 3 ]] || fail "doctor with an unparsable status exits $rc, expected 3: $out"
grep -qF "[FIX ] latgovd: status unreadable: Failed to parse $tmp/bad/status.json at line 2, column 1: syntax error while parsing object - unexpected end of input; expected '}'" \
  <<< "$out" || fail "the unparsable status is not named: $out"

# A new snapshot of the tree keeps what doctor reads: its mounts, tracefs
# and status give verdicts, not "not in the snapshot".
printf 'sysfs /sys sysfs rw 0 0\ntmpfs /run tmpfs rw 0 0\ntracefs /sys/kernel/tracing tracefs rw 0 0\n' \
  > "$tmp/mounts"
mkdir -p "$tree/proc" "$tree/sys/kernel/tracing/events/block/block_getrq"
rm -f "$tree/proc/mounts"; cp "$tmp/mounts" "$tree/proc/mounts"
echo 1234 > "$tree/sys/kernel/tracing/events/block/block_getrq/id"
"$latgov" --sysroot "$tree" snapshot -o "$tmp/new.tar.gz" || fail "snapshot of the tree failed"
mkdir "$tmp/new" && tar -xzf "$tmp/new.tar.gz" -C "$tmp/new" || fail "cannot unpack the new snapshot"
out=$("$latgov" --sysroot "$tmp/new" doctor); rc=$?
echo "$out"
[[ $rc -eq 0 ]] || fail "doctor on the new snapshot exits $rc, expected 0"
grep -q "^\[ok  \] tracefs: block_getrq events available" <<< "$out" ||
  fail "the new snapshot lost tracefs"
grep -q "^\[ok  \] /run: tmpfs" <<< "$out" || fail "the new snapshot lost /proc/mounts"
grep -q "^\[ok  \] debugfs: mounted" <<< "$out" || fail "the new snapshot lost debugfs"
grep -q "^\[note\] latgovd: status from the snapshot" <<< "$out" ||
  fail "the new snapshot lost latgovd's status"

# A snapshot that cannot be written says why.
err=$("$latgov" --sysroot "$tree" snapshot -o "$tmp/nonexistent/x.tar.gz" 2>&1); rc=$?
[[ $rc -eq 1 ]] || fail "snapshot to a missing directory exits $rc, expected 1"
grep -q "No such file or directory" <<< "$err" || fail "no reason given: $err"
echo "PASS doctor: exit 0/3/1, a snapshot's gaps are unknown, a new snapshot keeps doctor's files"
