#!/usr/bin/env python3
"""The part of cstates-test.sh that runs INSIDE an nvme-vm guest booted with
--cstates: ACPI _CST states, so the guest runs acpi_idle with the menu
governor (POLL, C1, C2, C3 with the declared exit latencies given to
nvme-vm), and PM QoS exclusion and the per-state `usage` counters are real.

Checks, against the guest's own sysfs (read here, not through latgov):
  auto    latgovd in auto mode chooses, for the device's observed latency,
          the limit that keeps exactly the states whose declared cost fits
          in latency_fraction x that latency and excludes the others
          (status.json and the CPU's pm_qos_resume_latency_us agree);
  exclude while latgovd holds a limit on the completion CPU of fio's queue,
          that CPU's usage counters of the states deeper than the limit
          stand still and those of the states it keeps move; after the
          release they move again; a CPU latgovd does not hold keeps
          entering the deep states all along.

Usage: guest-cstates.py --latencies 1,20,200 LATGOVD LATGOV
Prints PASS/FAIL lines; exits 1 if anything failed.
"""

import argparse
import glob
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time

from guestlib import CPU_SYS, FAILED, nvme_disk, qos, read, report, wait_for

# Under software emulation fio's own time between two QD1 reads reaches tens
# of ms: a long linger keeps the queue active between reads.
LINGER_MS = 300
FRACTION = 0.1
HOLD_SECONDS = 3.0


def cpus():
    return sorted(int(re.search(r"cpu(\d+)/power", p).group(1))
                  for p in glob.glob(f"{CPU_SYS}/cpu[0-9]*/power/pm_qos_resume_latency_us"))


def states(cpu):
    out = []
    for d in sorted(glob.glob(f"{CPU_SYS}/cpu{cpu}/cpuidle/state*"),
                    key=lambda p: int(p.rsplit("state", 1)[1])):
        out.append({"index": int(d.rsplit("state", 1)[1]), "name": read(f"{d}/name"),
                    "latency": int(read(f"{d}/latency")), "disabled": read(f"{d}/disable") != "0"})
    return out


def usage(cpu):
    return {int(d.rsplit("state", 1)[1]): int(read(f"{d}/usage"))
            for d in glob.glob(f"{CPU_SYS}/cpu{cpu}/cpuidle/state*")}


def expected_limit(sts, allowed_us):
    """The rule of the README's auto mode, for menu/acpi_idle: states whose
    declared cost fits are kept, the deepest fitting latency below the
    shallowest misfit is the limit (0: poll only), nothing if all fit."""
    enabled = [s for s in sts if not s["disabled"]]
    misfits = [s for s in enabled if s["latency"] > 0 and s["latency"] > allowed_us]
    if not misfits:
        return None, []
    cut = min(s["latency"] for s in misfits)
    fitting = [s["latency"] for s in enabled if s not in misfits and s["latency"] < cut]
    return max(fitting, default=0), misfits


def sysfs_value(limit):
    return "0" if limit is None else ("n/a" if limit == 0 else str(limit))


def completion_cpu(disk, submit_cpu):
    """The CPU completing the queue submit_cpu submits to, from mq/*/cpu_list,
    the IRQ named nvme<C>q<i+1> and its effective affinity."""
    ctrl = os.path.basename(os.path.realpath(f"/sys/block/{disk}/device"))
    for q in glob.glob(f"/sys/block/{disk}/mq/*"):
        listed = {int(x) for x in re.split(r"[,\s]+", read(f"{q}/cpu_list")) if x}
        if submit_cpu in listed:
            name = f"{ctrl}q{int(os.path.basename(q)) + 1}"
            for line in open("/proc/interrupts"):
                f = line.split()
                if f and f[-1] == name:
                    irq = int(f[0].rstrip(":"))
                    eff = read(f"/proc/irq/{irq}/effective_affinity_list")
                    return int(os.path.basename(q)), irq, int(eff)
    raise SystemExit(f"FAIL cpu {submit_cpu} submits to no queue of {disk}")


class Latgovd:
    def __init__(self, latgovd, latgov, config):
        self.latgov = latgov
        self.dir = tempfile.mkdtemp(prefix="latgov-cstates-", dir="/run")
        self.config = os.path.join(self.dir, "latgov.toml")
        with open(self.config, "w") as f:
            f.write(config.replace("@CAL@", os.path.join(self.dir, "calibration.toml")))
        self.log_path = os.path.join(self.dir, "latgovd.log")
        self.proc = subprocess.Popen([latgovd, "--config", self.config, "--runtime-dir",
                                      self.dir], stdout=open(self.log_path, "w"),
                                     stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 30
        while "latgovd ready" not in self.log():
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise SystemExit(f"FAIL latgovd did not become ready:\n{self.log()}")
            time.sleep(0.05)

    def log(self):
        return open(self.log_path, errors="replace").read()

    def status(self):
        with open(os.path.join(self.dir, "status.json")) as f:
            return json.load(f)

    def stop(self):
        self.proc.send_signal(signal.SIGTERM)
        return self.proc.wait(30)


def fio(cpu, disk, seconds):
    return subprocess.Popen(
        ["taskset", "-c", str(cpu), "fio", "--name=latgov-cstates", f"--filename=/dev/{disk}",
         "--readonly", "--rw=randread", "--bs=4k", "--iodepth=1", "--ioengine=psync",
         "--direct=1", f"--runtime={seconds}", "--time_based", "--output=/dev/null"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def config(mode_lines):
    return f"""[daemon]
log_level = "debug"
status_interval_ms = 50
calibration_file = "@CAL@"

[defaults]
linger_ms = {LINGER_MS}
{mode_lines}
"""


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--latencies", required=True)
    ap.add_argument("latgovd")
    ap.add_argument("latgov")
    args = ap.parse_args()
    declared = [int(x) for x in args.latencies.split(",")]

    driver = read(f"{CPU_SYS}/cpuidle/current_driver")
    governor = read(f"{CPU_SYS}/cpuidle/current_governor_ro")
    all_cpus = cpus()
    st = states(all_cpus[0])
    print(f"guest: {os.uname().release}, cpus {all_cpus}, cpuidle {driver}/{governor}, "
          f"states {[(s['name'], s['latency']) for s in st]}")
    if not report(driver == "acpi_idle" and governor == "menu",
                  f"cpuidle is acpi_idle/menu ({driver}/{governor})"):
        return 1
    if not report([s["latency"] for s in st if s["name"] != "POLL"] == declared,
                  f"the non-POLL states declare {declared} us"):
        return 1
    if not report(all(qos(c) == "0" for c in all_cpus), "nothing constrained before latgovd"):
        return 1

    disk = nvme_disk()
    submit = all_cpus[0]
    queue, irq, comp = completion_cpu(disk, submit)
    others = [c for c in all_cpus if c != comp]
    print(f"topology: cpu {submit} submits on {disk} queue {queue}, IRQ {irq} completes on "
          f"cpu {comp}; cpus not completing it: {others}")
    if not report(others, "a CPU that latgovd must leave alone exists"):
        return 1

    # (a) auto: the chosen limit keeps exactly the states whose cost fits.
    d = Latgovd(args.latgovd, args.latgov,
                config(f'mode = "auto"\nlatency_fraction = {FRACTION}'))
    report(d.status().get("io_events", "").startswith("sleeping until the first request"),
           f"auto: woken by IO events ({d.status().get('io_events')!r})")
    # fio ends by itself (its runtime), as in guest-governor.sh
    f = fio(submit, disk, 8)

    def observed():
        dev = {x["name"]: x for x in d.status()["devices"]}.get(disk, {})
        return dev.get("observed_latency_us") is not None and dev.get("active_queues")

    if report(wait_for(observed, 60, 0.05), f"auto: {disk} active with an observed latency"):
        status = d.status()
        dev = {x["name"]: x for x in status["devices"]}[disk]
        allowed = FRACTION * dev["observed_latency_us"]
        want, misfits = expected_limit(states(comp), allowed)
        print(f"auto: observed {dev['observed_latency_us']:.1f} us x {FRACTION} = "
              f"{allowed:.1f} us allowed; expected limit {want}, excluding "
              f"{[m['name'] for m in misfits]}; latgov chose {dev['limit_us']}")
        # Where every state fits (a latency past 10x the deepest exit),
        # nothing is excluded and the check below would hold trivially.
        report(bool(misfits), f"auto: the case is made: some state does not fit "
                              f"(excluded {[m['name'] for m in misfits]}, limit {want})")
        report(dev["limit_us"] == want,
               f"auto: limit {dev['limit_us']} is the one that keeps exactly the fitting "
               f"states ({want})")
        held = wait_for(lambda: qos(comp) == sysfs_value(want), 5)
        report(held, f"auto: cpu {comp} reads {sysfs_value(want)!r} ({qos(comp)!r})")
        report(all(qos(c) == "0" for c in others),
               f"auto: no other CPU constrained ({[qos(c) for c in others]})")
    f.wait()
    report(wait_for(lambda: all(qos(c) == "0" for c in all_cpus), 5, 0.05),
           f"auto: released within 5 s of fio's end ({[qos(c) for c in all_cpus]})")
    report(d.stop() == 0, "auto: latgovd exited 0 on SIGTERM")

    # (b) a held CPU stops entering exactly the excluded states.
    limit = sorted(declared)[len(declared) // 2]  # keeps C1..Cmid, excludes the deeper ones
    d = Latgovd(args.latgovd, args.latgov, config(f'mode = "fixed"\nlimit_us = {limit}'))
    excluded = [s["index"] for s in states(comp) if s["latency"] > limit]
    kept = [s["index"] for s in states(comp) if 0 < s["latency"] <= limit]
    print(f"exclude: fixed limit {limit} us: excluded states {excluded}, kept {kept}")
    before_idle = {c: usage(c) for c in all_cpus}
    time.sleep(2.0)
    idle = {c: usage(c) for c in all_cpus}
    # Informational: what each CPU entered before any IO (the checks below
    # compare a held CPU with itself after the release, and with the others).
    print(f"exclude: before any IO, 2 s: usage deltas "
          f"{ {c: {i: idle[c][i] - before_idle[c][i] for i in idle[c]} for c in all_cpus} }")
    f = fio(submit, disk, 10)
    if report(wait_for(lambda: qos(comp) == str(limit), 60, 0.05),
              f"exclude: cpu {comp} held at {limit} under fio"):
        start = {c: usage(c) for c in all_cpus}
        t0 = time.monotonic()
        gaps = 0
        while time.monotonic() - t0 < HOLD_SECONDS:
            gaps += qos(comp) != str(limit)
            time.sleep(0.02)
        end = {c: usage(c) for c in all_cpus}
        still_held = qos(comp) == str(limit) and f.poll() is None
        report(still_held and gaps == 0,
               f"exclude: cpu {comp} held throughout the {HOLD_SECONDS} s window "
               f"({gaps} samples without it)")
        delta = {c: {i: end[c][i] - start[c][i] for i in end[c]} for c in all_cpus}
        print(f"exclude: usage deltas while held: {delta}")
        report(all(delta[comp][i] == 0 for i in excluded),
               f"exclude: held cpu {comp} entered no excluded state {excluded} "
               f"({ {i: delta[comp][i] for i in excluded} })")
        report(sum(delta[comp][i] for i in kept) > 0,
               f"exclude: held cpu {comp} still entered the kept states {kept}")
        for c in others:
            report(all(delta[c][i] > 0 for i in excluded),
                   f"exclude: unheld cpu {c} kept entering the deep states {excluded} "
                   f"({ {i: delta[c][i] for i in excluded} })")
    f.wait()
    released = wait_for(lambda: all(qos(c) == "0" for c in all_cpus), 15, 0.05)
    if not report(released, f"exclude: released within 15 s of fio's end "
                            f"({[qos(c) for c in all_cpus]})"):
        print(f"exclude: status {json.dumps(d.status())}\n{d.log()[-3000:]}")
    after = usage(comp)
    time.sleep(2.0)
    again = usage(comp)
    moved = [i for i in excluded if again[i] > after[i]]
    report(moved == excluded, f"exclude: after the release cpu {comp} enters the deep "
                              f"states {excluded} again (moved: {moved})")
    report(d.stop() == 0, "exclude: latgovd exited 0 on SIGTERM")
    report(all(qos(c) == "0" for c in all_cpus), "nothing constrained after latgovd")
    print(f"guest-cstates: {len(FAILED)} failed")
    return 1 if FAILED else 0


if __name__ == "__main__":
    sys.exit(main())
