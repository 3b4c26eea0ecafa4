#!/usr/bin/env python3
"""Runs in a guest with an NVMe multipath head: reads through each head with
O_DIRECT, round-robin over its paths, while block_rq_issue is traced, and
checks that every request the reads issued names the dev_t that `latgov
topology --json` (ACTUAL, written in the same guest) gives one of the head's
path disks, and that every path was seen. Hidden path disks have no dev file
in sysfs; latgov reads their dev_t from /proc/diskstats, and this is where
that reading meets the tracepoint latgovd filters on.

Usage: path_requests.py ACTUAL_JSON
Prints PASS/FAIL lines; exits 1 if any failed (or no head is listed)."""

import json
import os
import re
import subprocess
import sys

from guestlib import FAILED, read, report

TRACING = "/sys/kernel/tracing"
EVENT = f"{TRACING}/events/block/block_rq_issue"


def write(path, text):
    with open(path, "w") as f:
        f.write(text)


def traced_devs(head, reads):
    """The "major:minor" of every request dd issued while reading `head`."""
    write(f"{TRACING}/trace", "")
    write(f"{EVENT}/enable", "1")
    try:
        subprocess.run(["dd", f"if=/dev/{head}", "of=/dev/null", "bs=4k", f"count={reads}",
                        "iflag=direct", "status=none"], check=True)
    finally:
        write(f"{EVENT}/enable", "0")
    devs = []
    for line in read(f"{TRACING}/trace").splitlines():
        # "dd-146 [001] ..... 4.656: block_rq_issue: 259,1 RS 4096 () 0 + 8 [dd]":
        # the event's own command, last (the task column may read <...>)
        m = re.search(r"block_rq_issue: (\d+),(\d+) .*\[dd\]$", line)
        if m:
            devs.append(f"{m.group(1)}:{m.group(2)}")
    return devs


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    with open(sys.argv[1]) as f:
        devices = {d["name"]: d for d in json.load(f)["devices"]}
    heads = [d for d in devices.values() if d["kind"] == "nvme-multipath"]
    if not report(bool(heads), f"multipath heads listed: {[h['name'] for h in heads]}"):
        sys.exit(1)
    if not os.path.isdir(f"{TRACING}/events"):
        subprocess.run(["mount", "-t", "tracefs", "none", TRACING], check=True)
    for head in heads:
        paths = {devices[p]["dev"]: p for p in head["paths"] if p in devices}
        report(all(paths) and len(paths) == len(head["paths"]),
               f"{head['name']}: latgov gives each path a dev_t: "
               f"{ {p: devices[p]['dev'] for p in head['paths'] if p in devices} }")
        subsys = os.path.basename(os.readlink(f"/sys/block/{head['name']}/device"))
        policy_file = f"/sys/class/nvme-subsystem/{subsys}/iopolicy"
        policy = read(policy_file)
        write(policy_file, "round-robin")
        try:
            devs = traced_devs(head["name"], 16)
        finally:
            write(policy_file, policy)
        names = sorted({paths.get(d, f"unknown {d}") for d in devs})
        report(bool(devs) and all(d in paths for d in devs),
               f"{head['name']}: {len(devs)} requests, each on a path's dev_t: {names}")
        report(set(devs) == set(paths), f"{head['name']}: round-robin reached every path")
    sys.exit(1 if FAILED else 0)


if __name__ == "__main__":
    main()
