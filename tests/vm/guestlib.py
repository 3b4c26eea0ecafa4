"""What the Python guest tests (guest-cstates.py, guest-waiters.py) share:
PASS/FAIL lines, sysfs reads, polling, finding the NVMe namespace. They run
in the guest from this directory, so a plain import finds this module."""

import glob
import os
import re
import time

CPU_SYS = "/sys/devices/system/cpu"
FAILED = []


def report(ok, what):
    up = open("/proc/uptime").read().split()[0]
    print(f"{'PASS' if ok else 'FAIL'} {what} [t={up}]", flush=True)
    if not ok:
        FAILED.append(what)
    return ok


def read(path):
    with open(path) as f:
        return f.read().strip()


def qos(cpu):
    return read(f"{CPU_SYS}/cpu{cpu}/power/pm_qos_resume_latency_us")


def wait_for(check, timeout, step=0.01):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return True
        time.sleep(step)
    return check()


def nvme_disk():
    for _ in range(200):
        disks = sorted(os.path.basename(p) for p in glob.glob("/sys/block/nvme*n*")
                       if re.fullmatch(r"nvme\d+n\d+", os.path.basename(p)))
        if disks:
            return disks[0]
        time.sleep(0.1)
    raise SystemExit("FAIL no NVMe namespace appeared")
