#!/usr/bin/env bash
# check-metrics-host.sh LATGOVD TOOLS_DIR: latgovd on this machine's virtio
# disk (fixed 0 us while IO runs) with its metrics file in a private textfile
# directory. Checks, while fio reads the disk, that the file shows the held
# CPU with its reason, and after it the counters; `promtool check metrics`
# on the real file; the real node_exporter (textfile collector only,
# 127.0.0.1) serves latgov's metrics in a scrape; latgovd exits 0 on SIGTERM,
# removes the file and leaves every CPU's pm_qos_resume_latency_us as it was;
# a reload that names another file removes the old one. Then --metrics-file: a file it names is written in place of the
# configured one, and "" writes none. Its calibration, evidence and metrics
# files and runtime directory are its own: the machine's /var/lib/latgov and
# node_exporter's latgov.prom are neither read nor written.
# Root, fio and the host test bed (vda) are required.
# TOOLS_DIR holds promtool and node_exporter (scripts/prometheus-tools).
set -euo pipefail
latgovd=$(realpath -e "$1")
tools=$2
promtool=$tools/usr/bin/promtool exporter=$tools/usr/bin/prometheus-node-exporter
failed=0
pass() { echo "PASS $*"; }
fail() { echo "FAIL $*"; failed=1; }
[[ $EUID -eq 0 ]] || { fail "needs root"; exit 1; }
[[ -x $promtool && -x $exporter ]] || { fail "no promtool/node_exporter in $tools (scripts/prometheus-tools)"; exit 1; }
disk=vda
[[ -b /dev/$disk ]] || { fail "no /dev/$disk (the host test bed)"; exit 1; }
command -v fio > /dev/null || { fail "fio is missing (scripts/deps.sh test)"; exit 1; }
# IO on a file on the disk (the raw device may not be openable here). A run
# killed while writing it leaves it short: only the exact size is reused, and
# it is written under another name first.
data=/var/tmp/latgov-metrics.dat size=$((64 << 20))
if [[ ! -f $data || $(stat -c %s "$data") -ne $size ]]; then
    rm -f "$data"
    dd if=/dev/zero of="$data.new" bs=1M count=$((size >> 20)) status=none
    mv "$data.new" "$data"
fi
qos_files=(/sys/devices/system/cpu/cpu[0-9]*/power/pm_qos_resume_latency_us)
[[ -f ${qos_files[0]} ]] || { fail "no per-CPU pm_qos_resume_latency_us files"; exit 1; }
qos() { local f; for f in "${qos_files[@]}"; do echo "${f#/sys/devices/system/cpu/} $(< "$f")"; done; }
qos_before=$(qos)
# The machine's latgov state and the file latgovd writes by default where
# node_exporter's textfile directory exists.
machine_files=(/var/lib/latgov /var/lib/prometheus/node-exporter/latgov.prom)
machine() { find "${machine_files[@]}" -printf '%p %s %T@\n' 2>/dev/null | sort || true; }
machine_before=$(machine)

tmp=$(mktemp -d /dev/shm/latgov-metrics.XXXXXX)
daemon_pid="" exporter_pid="" fio_pid=""
cleanup() {
    for p in $fio_pid $exporter_pid $daemon_pid; do kill "$p" 2>/dev/null || true; done
    wait 2>/dev/null || true
    rm -rf "$tmp"
}
trap cleanup EXIT
mkdir -p "$tmp/textfile"
prom=$tmp/textfile/latgov.prom
cat > "$tmp/latgov.toml" <<TOML
[daemon]
status_interval_ms = 100
metrics_file = "$prom"
calibration_file = "$tmp/calibration.toml"
evidence_file = "$tmp/evidence"

[defaults]
mode = "fixed"
limit_us = 0
linger_ms = 50

[[device]]
name = "$disk"
TOML
"$latgovd" --config "$tmp/latgov.toml" --runtime-dir "$tmp/run" > "$tmp/latgovd.log" 2>&1 &
daemon_pid=$!
for ((i = 0; i < 100; i++)); do [[ -s $prom ]] && break; sleep 0.1; done
if [[ -s $prom ]]; then pass "latgovd wrote $prom"; else fail "no metrics file after 10 s"; cat "$tmp/latgovd.log"; exit 1; fi
# The idle costs name the calibration file it read: its own.
costs=$(python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["idle_costs"])' \
    "$tmp/run/status.json" 2>&1 || true)
if [[ $costs == *"no calibration at $tmp/calibration.toml"* ]]; then pass "idle costs: $costs"
else fail "idle costs not from its own calibration file: $costs"; fi

# QD1 direct reads for longer than the 5 s the metrics are watched, so the IO
# cannot be over before a refresh shows it
fio --name=latgov-metrics --filename="$data" --rw=randread --bs=4k --direct=1 \
    --ioengine=psync --time_based --runtime=20 --output="$tmp/fio.log" > /dev/null 2>&1 &
fio_pid=$!
held=""
for ((i = 0; i < 50; i++)); do
    held=$(grep -E '^latgov_cpu_limit_seconds\{cpu="[0-9]+",reason="[^"]*vda/0[^"]*"\} 0$' "$prom" || true)
    [[ -n $held ]] && break
    sleep 0.1
done
if [[ -n $held ]]; then pass "while fio reads: $held"; else fail "while fio reads: no held CPU for vda/0 in the metrics"; grep latgov_cpu "$prom"; fi
if kill -0 "$fio_pid" 2>/dev/null; then kill "$fio_pid"; wait "$fio_pid" 2>/dev/null || true
else fail "fio ended before the check: $(cat "$tmp/fio.log")"; fi
fio_pid=""
value() { awk -v m="$1" '$1 == m { print $2 }' "$prom"; }
# released linger_ms after the last IO (other IO on the disk may delay it)
for ((i = 0; i < 50; i++)); do
    [[ $(value latgov_releases_total) -ge 1 ]] && break
    sleep 0.1
done
holds=$(value latgov_holds_total) releases=$(value latgov_releases_total)
if [[ ${holds:-0} -ge 1 && ${releases:-0} -ge 1 ]]; then pass "after fio: holds_total $holds, releases_total $releases"
else fail "after fio: holds_total '$holds', releases_total '$releases'"; fi
secs=$(awk '/^latgov_cpu_held_seconds_total/ { s += $2 } END { print s + 0 }' "$prom")
if awk -v s="$secs" 'BEGIN { exit !(s > 0) }'; then pass "latgov_cpu_held_seconds_total sums to $secs s"
else fail "latgov_cpu_held_seconds_total sums to $secs"; fi
families=$(grep -c '^# TYPE ' "$prom"); helps=$(grep -c '^# HELP ' "$prom")
if out=$("$promtool" check metrics < "$prom" 2>&1); then pass "promtool check metrics: clean ($families families, $helps HELP)"
else fail "promtool check metrics: $out"; fi

port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
"$exporter" --web.listen-address="127.0.0.1:$port" --collector.disable-defaults --collector.textfile \
    --collector.textfile.directory="$tmp/textfile" > "$tmp/exporter.log" 2>&1 &
exporter_pid=$!
scrape=""
for ((i = 0; i < 50; i++)); do
    scrape=$(python3 -c 'import sys, urllib.request
print(urllib.request.urlopen(sys.argv[1], timeout=2).read().decode())' "http://127.0.0.1:$port/metrics" 2>/dev/null) && break
    sleep 0.2
done
if grep -q '^latgov_holds_total ' <<< "$scrape" && grep -q '^node_textfile_scrape_error 0' <<< "$scrape"; then
    pass "node_exporter on 127.0.0.1:$port serves latgov's metrics ($(grep -c '^latgov_' <<< "$scrape") samples, node_textfile_scrape_error 0)"
else
    fail "node_exporter scrape lacks latgov's metrics: $(grep -E 'textfile|latgov_holds' <<< "$scrape" | head -5)"; cat "$tmp/exporter.log"
fi
kill "$exporter_pid"; wait "$exporter_pid" 2>/dev/null || true; exporter_pid=""

# A reload that names another file: the old one goes (node_exporter would
# serve it for ever), the new one is written.
reloaded=$tmp/textfile/reloaded.prom
sed -i "s|^metrics_file = .*|metrics_file = \"$reloaded\"|" "$tmp/latgov.toml"
kill -HUP "$daemon_pid"
for ((i = 0; i < 100; i++)); do [[ -s $reloaded && ! -e $prom ]] && break; sleep 0.1; done
if [[ -s $reloaded && ! -e $prom ]]; then pass "a reload naming another metrics file: the old one removed, the new one written"
else fail "after the reload: $reloaded $([[ -s $reloaded ]] && echo written || echo absent), $prom $([[ -e $prom ]] && echo left || echo removed)"; tail -5 "$tmp/latgovd.log"; fi

kill -TERM "$daemon_pid"; rc=0; wait "$daemon_pid" || rc=$?; daemon_pid=""
if [[ $rc -eq 0 ]]; then pass "latgovd exited 0 after SIGTERM"
else fail "latgovd exited $rc after SIGTERM"; tail -20 "$tmp/latgovd.log"; fi
if [[ ! -e $reloaded ]]; then pass "latgovd removed the metrics file when it stopped"; else fail "metrics file left after stop"; fi

# --metrics-file overrides the configured file; "" writes none
other=$tmp/textfile/override.prom
"$latgovd" --config "$tmp/latgov.toml" --runtime-dir "$tmp/run" --metrics-file "$other" \
    > "$tmp/override.log" 2>&1 &
daemon_pid=$!
for ((i = 0; i < 100; i++)); do [[ -s $other ]] && break; sleep 0.1; done
configured=$reloaded # what the configuration names now
if [[ -s $other && ! -e $configured ]]; then pass "--metrics-file $other: written there, not at the configured file"
else fail "--metrics-file $other: written $([[ -s $other ]] && echo yes || echo no), configured file $([[ -e $configured ]] && echo written || echo absent)"; cat "$tmp/override.log"; fi
kill -TERM "$daemon_pid"; rc=0; wait "$daemon_pid" || rc=$?; daemon_pid=""
if [[ $rc -eq 0 ]]; then pass "latgovd --metrics-file $other exited 0 after SIGTERM"
else fail "latgovd --metrics-file $other exited $rc after SIGTERM"; tail -20 "$tmp/override.log"; fi
if [[ ! -e $other ]]; then pass "the --metrics-file file removed at stop"; else fail "$other left after stop"; fi
"$latgovd" --config "$tmp/latgov.toml" --runtime-dir "$tmp/run" --metrics-file "" \
    > "$tmp/none.log" 2>&1 &
daemon_pid=$!
# status.json is written with the metrics, so it shows a write happened
for ((i = 0; i < 100; i++)); do [[ -s $tmp/run/status.json ]] && break; sleep 0.1; done
sleep 0.3 # three more status intervals
files=$(find "$tmp/textfile" -type f | wc -l)
if [[ -s $tmp/run/status.json && $files -eq 0 ]]; then pass '--metrics-file "": status written, no metrics file'
else fail "--metrics-file \"\": status.json $([[ -s $tmp/run/status.json ]] && echo written || echo absent), $files file(s) in the textfile directory"; fi
kill -TERM "$daemon_pid"; rc=0; wait "$daemon_pid" || rc=$?; daemon_pid=""
if [[ $rc -eq 0 ]]; then pass 'latgovd --metrics-file "" exited 0 after SIGTERM'
else fail "latgovd --metrics-file \"\" exited $rc after SIGTERM"; tail -20 "$tmp/none.log"; fi

machine_after=$(machine)
if [[ $machine_after == "$machine_before" ]]; then pass "${machine_files[*]} as before"
else fail "the machine's latgov files changed:"; diff <(echo "$machine_before") <(echo "$machine_after") || true; fi
qos_after=$(qos)
if [[ $qos_after == "$qos_before" ]]; then pass "every CPU's pm_qos_resume_latency_us as before (${#qos_files[@]} CPUs)"
else fail "pm_qos_resume_latency_us changed:"; diff <(echo "$qos_before") <(echo "$qos_after") || true; fi
exit $failed
