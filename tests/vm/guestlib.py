"""What the Python guest tests (guest-cstates.py, guest-waiters.py,
guest-onset-company.py) share: PASS/FAIL lines, sysfs reads, polling, finding
the NVMe namespace and its queues, a latgovd with its own runtime directory.
They run in the guest from this directory, so a plain import finds this
module."""

import glob
import json
import os
import re
import signal
import subprocess
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


def cpu_set(text):
    """ "0, 1" (mq cpu_list) or "0-1,3" (IRQ affinity lists) -> {0, 1, ...} """
    out = set()
    for part in re.split(r"[,\s]+", text.strip()):
        if "-" in part:
            lo, hi = part.split("-")
            out.update(range(int(lo), int(hi) + 1))
        elif part:
            out.add(int(part))
    return out


def all_cpus():
    return sorted(int(re.search(r"cpu(\d+)/power", p).group(1))
                  for p in glob.glob(f"{CPU_SYS}/cpu[0-9]*/power/pm_qos_resume_latency_us"))


def queues_of(disk):
    """Each hardware queue: its submit CPUs, IRQ (nvme<C>q<i+1>) and the
    CPUs its IRQ completes on (effective affinity)."""
    ctrl = os.path.basename(os.path.realpath(f"/sys/block/{disk}/device"))
    irq_of = {}
    for line in open("/proc/interrupts"):
        f = line.split()
        if f and f[0].endswith(":") and f[0][:-1].isdigit():
            irq_of[f[-1]] = int(f[0][:-1])
    out = []
    for q in sorted(glob.glob(f"/sys/block/{disk}/mq/*"), key=lambda p: int(os.path.basename(p))):
        index = int(os.path.basename(q))
        irq = irq_of.get(f"{ctrl}q{index + 1}")
        out.append({"index": index, "submit": sorted(cpu_set(read(f"{q}/cpu_list"))), "irq": irq,
                    "completes": sorted(cpu_set(read(f"/proc/irq/{irq}/effective_affinity_list")))
                    if irq is not None else []})
    return out


class Latgovd:
    def __init__(self, latgovd, latgov, workdir, config):
        self.latgov = latgov
        self.dir = workdir
        self.config = os.path.join(self.dir, "latgov.toml")
        self.write_config(config)
        self.log_path = os.path.join(self.dir, "latgovd.log")
        self.proc = subprocess.Popen([latgovd, "--config", self.config, "--runtime-dir",
                                      self.dir], stdout=open(self.log_path, "w"),
                                     stderr=subprocess.STDOUT)

    def write_config(self, text):
        with open(self.config, "w") as f:
            f.write(text)

    def wait_ready(self, timeout):
        deadline = time.monotonic() + timeout
        while "latgovd ready" not in self.log() or not os.path.exists(self.status_path()):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                return False
            time.sleep(0.05)
        return True

    def log(self):
        return open(self.log_path, errors="replace").read()

    def status_path(self):
        return os.path.join(self.dir, "status.json")

    def status_file(self):
        with open(self.status_path()) as f:
            return json.load(f)

    def cli_status_start(self):
        return subprocess.Popen([self.latgov, "status", "--json", "--runtime-dir", self.dir],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)

    def cli_status_end(self, proc):
        out, err = proc.communicate(timeout=60)
        if proc.returncode != 0:
            print(f"latgov status --json exited {proc.returncode}: {err}")
            return None
        return json.loads(out)

    def reload(self, config, timeout):
        before = self.log().count("configuration reloaded")
        self.write_config(config)
        self.proc.send_signal(signal.SIGHUP)
        return wait_for(lambda: self.log().count("configuration reloaded") > before, timeout, 0.05)

    def stop(self):
        self.proc.send_signal(signal.SIGTERM)
        return self.proc.wait(30)


def fixed_config(linger_ms, defaults="", devices=""):
    """latgovd's configuration for a guest test: a fixed limit of 0 with
    this linger and waiter CPUs, debug logs, a status file every 50 ms, no
    calibration file; `defaults` adds keys to [defaults], `devices`
    [[device]] entries."""
    return f"""[daemon]
log_level = "debug"
status_interval_ms = 50
calibration_file = "/nonexistent/calibration.toml"

[defaults]
mode = "fixed"
limit_us = 0
linger_ms = {linger_ms}
waiter_cpus = true
{defaults}{devices}"""
