#!/usr/bin/env python3
"""The part of waiters-test.sh that runs INSIDE an nvme-vm guest booted with
--cpus 4 --ctrl 2 --cstates ...: one NVMe controller with 2 IO queues for 4
CPUs, so each queue is submitted to by 2 CPUs and its IRQ completes on one
of them. A QD1 reader pinned to the other CPU sleeps there while its IO is
completed elsewhere: latgovd must hold both CPUs, the completion CPU
("completes") and the reader's ("waits"), and nothing else.

Checks, against the guest's own sysfs/procfs (read here, not through latgov)
and `latgov status --json`:
  a   fio pinned to a CPU of queue 0 that its IRQ does not complete on:
      the IRQ's CPU is held for (disk, 0, completes), fio's CPU for
      (disk, 0, waits), the other CPUs are not held; the held CPUs enter no
      idle state but POLL while the unheld ones keep entering C1..Cn; all
      released within linger + a few ticks after the reads stop;
  both a second fio pinned likewise to a CPU of queue 1, both at once: each
      queue's completion and waiter CPUs are held for that queue only;
  off after a reload with `waiter_cpus = false` for the disk, fio as in (a)
      holds the completion CPU only, and its own CPU keeps entering the deep
      idle states.

fio runs once with its jobs in sequence (stonewall), each waiting on a
FIFO before its IO (exec_prerun): under software emulation an exec of fio
costs 10-20 s in this guest, one exec is enough.

Usage: guest-waiters.py LATGOVD LATGOV
Prints PASS/FAIL lines; exits 1 if anything failed.
"""

import argparse
import errno
import glob
import json
import os
import subprocess
import sys
import tempfile
import time

from guestlib import (CPU_SYS, FAILED, Latgovd, all_cpus, fixed_config, nvme_disk, qos, queues_of,
                      read, report, wait_for)

# Under software emulation fio's own time between two QD1 reads reaches tens
# of ms: a long linger keeps the queue active between reads. The waiter
# window (300 ms since the CPU's last request) covers the same gaps.
LINGER_MS = 300
# Release bound after the last read seen: linger + a steady tick (20 ms) +
# this script's polling and an emulated guest's scheduling on a busy host
# (measured: 310-600 ms at a host load of 8-11 on 2 cores). A waiter CPU
# still held for its own window after its queue's release would exceed it.
RELEASE_MAX_MS = LINGER_MS + 20 + 400
# Each job's IO time: the hold, >= 1 s of samples and one exec of latgov
# (seconds under emulation) must fit in it.
JOB_SECONDS = 10
WINDOW_SECONDS = 1.0


def qos_all(cpus):
    return {c: qos(c) for c in cpus}


def held_exactly(cpus, want):
    """Exactly the CPUs in `want` read "n/a" (0 us), every other reads "0"."""
    return all(qos(c) == ("n/a" if c in want else "0") for c in cpus)


def deep_usage(cpu):
    """Entries into each idle state deeper than POLL, by state index."""
    out = {}
    for d in glob.glob(f"{CPU_SYS}/cpu{cpu}/cpuidle/state*"):
        if read(f"{d}/name") != "POLL":
            out[int(d.rsplit("state", 1)[1])] = int(read(f"{d}/usage"))
    return out


def disk_reads(disk):
    return int(read(f"/sys/block/{disk}/stat").split()[0])


def irq_counts(irq):
    """Per-CPU counts of one IRQ from /proc/interrupts, by CPU position."""
    with open("/proc/interrupts") as f:
        ncpu = len(f.readline().split())
        for line in f:
            fields = line.split()
            if fields and fields[0] == f"{irq}:":
                return [int(x) for x in fields[1:1 + ncpu]]
    return []


class GatedFio:
    """One fio process running its groups of jobs one after the other; each
    job waits for its gate (a FIFO) before its IO starts."""

    def __init__(self, workdir, disk, groups):
        self.dir = workdir
        lines = ["[global]", f"filename=/dev/{disk}", "rw=randread", "bs=4k", "iodepth=1",
                 "ioengine=psync", "direct=1", "invalidate=0", "thread", "time_based",
                 f"runtime={JOB_SECONDS}"]
        for i, group in enumerate(groups):
            for j, (name, cpu) in enumerate(group):
                gate = os.path.join(self.dir, f"gate-{name}")
                os.mkfifo(gate)
                lines += [f"[{name}]", f"cpus_allowed={cpu}", f"exec_prerun=read go < {gate}"]
                if i and not j:
                    lines.append("stonewall")  # after the previous group
        job_file = os.path.join(self.dir, "waiters.fio")
        with open(job_file, "w") as f:
            f.write("\n".join(lines) + "\n")
        # exec_prerun leaves NAME.prerun.txt in the working directory
        self.err_path = os.path.join(self.dir, "fio.err")
        self.proc = subprocess.Popen(["fio", "--readonly", "--output=/dev/null", job_file],
                                     cwd=self.dir, stdout=subprocess.DEVNULL,
                                     stderr=open(self.err_path, "w"))

    def open_gate(self, name, timeout):
        """Let job `name` start its IO: waits (up to `timeout`) until its
        prerun shell has the FIFO open for reading."""
        gate = os.path.join(self.dir, f"gate-{name}")
        deadline = time.monotonic() + timeout
        while True:
            try:
                fd = os.open(gate, os.O_WRONLY | os.O_NONBLOCK)
            except OSError as e:
                if e.errno != errno.ENXIO:
                    raise
                if self.proc.poll() is not None or time.monotonic() > deadline:
                    return False
                time.sleep(0.02)
                continue
            os.write(fd, b"go\n")
            os.close(fd)
            return True

    def errors(self):
        return open(self.err_path, errors="replace").read()


def config(device_entry=""):
    return fixed_config(LINGER_MS, devices=device_entry)


def check_status(label, status, disk, cpus, want):
    """`want`: CPU -> (queue, why). Those CPUs are held at 0 for exactly
    that (disk, queue, why); every other CPU holds nothing."""
    by_cpu = {c["cpu"]: c for c in status.get("cpus", [])}
    ok = True
    for cpu in cpus:
        entry = by_cpu.get(cpu, {})
        held_for = [(h.get("device"), h.get("queue"), h.get("why"))
                    for h in entry.get("held_for", [])]
        if cpu in want:
            queue, why = want[cpu]
            ok = report(entry.get("limit_us") == 0 and held_for == [(disk, queue, why)],
                        f"{label}: latgov status: cpu {cpu} held at 0 for {disk} queue {queue} "
                        f"({why}) only (limit_us {entry.get('limit_us')!r}, held_for "
                        f"{held_for})") and ok
        else:
            ok = report(entry.get("limit_us") is None and not held_for,
                        f"{label}: latgov status: cpu {cpu} neither completes nor waits, not "
                        f"held (limit_us {entry.get('limit_us')!r}, held_for {held_for})") and ok
    return ok


def io_phase(label, d, fio, disk, cpus, streams, waiter_cpus):
    """Opens the gates of `streams` (job, queue, fio_cpu: fio pinned to
    fio_cpu, submitting on queue) and checks the holds while their reads
    run, then their release."""
    want = {}
    for job, queue, fio_cpu in streams:
        want[queue["completes"][0]] = (queue["index"], "completes")
        if waiter_cpus:
            want[fio_cpu] = (queue["index"], "waits")
        print(f"{label}: fio on cpu {fio_cpu} -> {disk} queue {queue['index']} -> IRQ "
              f"{queue['irq']} on cpu {queue['completes'][0]}", flush=True)
    others = [c for c in cpus if c not in want]
    print(f"{label}: expect held {sorted(want)}, not held {others}", flush=True)
    base = disk_reads(disk)
    irq_before = {q["irq"]: irq_counts(q["irq"]) for _, q, _ in streams}
    for job, _, _ in streams:
        if not report(fio.open_gate(job, 60), f"{label}: fio job {job} waiting for its gate"):
            print(fio.errors())
            return
    if not report(wait_for(lambda: disk_reads(disk) >= base + 8, 60),
                  f"{label}: fio reads {disk}"):
        return
    # seconds, not the job's whole time: the checks below must still see the IO
    t0 = time.monotonic()
    states = []

    def held():
        values = qos_all(cpus)
        if values not in states:
            states.append(values)
        return held_exactly(cpus, want)

    seen = wait_for(held, 4)
    report(seen, f"{label}: held {sorted(want)} and nothing else "
                 f"{time.monotonic() - t0:.2f} s after the reads were seen (values seen: "
                 f"{states})")

    # latgov's own view while the IO runs (one exec: seconds when emulated),
    # and meanwhile the values themselves: every sample over >= 1 s, and the
    # idle states entered
    reads = disk_reads(disk)
    cli = d.cli_status_start()
    usage0 = {c: deep_usage(c) for c in cpus}
    t0 = time.monotonic()
    samples, bad = 0, None
    while time.monotonic() - t0 < WINDOW_SECONDS or samples < 5:
        if not held_exactly(cpus, want):
            bad = qos_all(cpus)
            break
        samples += 1
        time.sleep(0.05)
    usage1 = {c: deep_usage(c) for c in cpus}
    still_reading = fio.proc.poll() is None and disk_reads(disk) > reads
    report(bad is None and still_reading,
           f"{label}: during IO only {sorted(want)} read n/a, the others 0 ({samples} samples"
           f" over {time.monotonic() - t0:.2f} s{'' if bad is None else f'; then {bad}'}"
           f"{'' if still_reading else '; fio had stopped'})")
    if bad is None:
        delta = {c: {i: usage1[c][i] - usage0[c][i] for i in usage1[c]} for c in cpus}
        for c in sorted(want):
            report(all(v == 0 for v in delta[c].values()),
                   f"{label}: held cpu {c} entered no idle state but POLL ({delta[c]})")
        for c in others:
            report(sum(delta[c].values()) > 0,
                   f"{label}: unheld cpu {c} kept entering C1.. ({delta[c]})")
    status = d.cli_status_end(cli)
    if report(disk_reads(disk) > reads and status is not None,
              f"{label}: latgov status --json ran while fio was reading"):
        check_status(label, status, disk, cpus, want)
        dev = {x["name"]: x for x in status["devices"]}.get(disk, {})
        waiters = sorted((w["queue"], w["cpu"]) for w in dev.get("waiters", []))
        expected = sorted((q["index"], c) for _, q, c in streams) if waiter_cpus else []
        report(dev.get("waiter_cpus") is waiter_cpus and waiters == expected,
               f"{label}: latgov status: {disk} waiter_cpus {dev.get('waiter_cpus')}, "
               f"waiters {waiters} (expected {waiter_cpus}, {expected})")
    for _, q, _ in streams:
        after = irq_counts(q["irq"])
        grew = [c for c in range(len(after)) if after[c] > irq_before[q["irq"]][c]]
        report(grew == q["completes"], f"{label}: queue {q['index']}'s IRQ {q['irq']} ran on "
                                       f"cpu {q['completes']} only (grew on {grew})")

    # release: within RELEASE_MAX_MS of the last read seen, once fio's jobs end
    last_read, reads = time.monotonic(), disk_reads(disk)
    released_at = None
    deadline = time.monotonic() + JOB_SECONDS + 30
    while time.monotonic() < deadline:
        now_reads = disk_reads(disk)
        now = time.monotonic()
        if now_reads != reads:
            reads, last_read, released_at = now_reads, now, None
        elif held_exactly(cpus, set()):
            if released_at is None:
                released_at = now
            if now - last_read > (LINGER_MS + 500) / 1000:
                break  # quiet for longer than linger: the jobs have ended
        else:
            released_at = None
        time.sleep(0.01)
    if released_at is None:
        report(False, f"{label}: not released after the reads stopped ({qos_all(cpus)})")
        print(f"{label}: status {json.dumps(d.status_file())}")
        return
    ms = (released_at - last_read) * 1000
    report(ms <= RELEASE_MAX_MS, f"{label}: released {ms:.0f} ms after the last read "
                                 f"(bound {RELEASE_MAX_MS} ms)")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("latgovd")
    ap.add_argument("latgov")
    args = ap.parse_args()

    cpus = all_cpus()
    driver = read(f"{CPU_SYS}/cpuidle/current_driver")
    # The idle-state checks need the --cstates guest: without acpi_idle they
    # could not run, and the test fails rather than pass with half of it.
    if not report(driver == "acpi_idle", f"cpuidle driver acpi_idle (--cstates), got {driver!r}"):
        return 1
    disk = nvme_disk()
    queues = queues_of(disk)
    print(f"guest: {os.uname().release}, cpus {cpus}, cpuidle {driver}, {disk} queues "
          f"{[(q['index'], q['submit'], q['irq'], q['completes']) for q in queues]}", flush=True)
    if not report(len(cpus) == 4 and len(queues) == 2,
                  f"4 CPUs, 2 IO queues ({len(cpus)}, {len(queues)})"):
        return 1
    # for each queue: its completion CPU, and a CPU that submits to it but
    # does not complete it (where fio waits)
    plan = []
    for q in queues:
        if q["irq"] is None or len(q["completes"]) != 1:
            report(False, f"queue {q['index']}: one completion CPU (IRQ {q['irq']}, "
                          f"{q['completes']})")
            return 1
        waiting = [c for c in q["submit"] if c not in q["completes"]]
        if not report(waiting, f"queue {q['index']}: a submit CPU that its IRQ does not "
                               f"complete on ({q['submit']} vs {q['completes']})"):
            return 1
        plan.append((q, waiting[0]))
    if not report(held_exactly(cpus, set()), f"nothing held before latgovd ({qos_all(cpus)})"):
        return 1

    workdir = tempfile.mkdtemp(prefix="latgov-waiters-", dir="/run")
    d = Latgovd(args.latgovd, args.latgov, workdir, config())
    # fio loads while latgovd starts; its jobs wait for their gates
    (qa, wa), (qb, wb) = plan
    fio = GatedFio(workdir, disk, [[("a", wa)], [("both-a", wa), ("both-b", wb)], [("off", wa)]])
    try:
        if not report(d.wait_ready(60), "latgovd ready"):
            print(d.log())
            return 1
        report(d.status_file().get("io_events", "").startswith("sleeping until the first"),
               f"latgovd sleeps on IO events ({d.status_file().get('io_events')!r})")
        base = disk_reads(disk)
        time.sleep(0.5)
        report(held_exactly(cpus, set()) and disk_reads(disk) == base,
               f"idle: nothing held without IO ({qos_all(cpus)})")

        io_phase("a", d, fio, disk, cpus, [("a", qa, wa)], True)
        # both queues at once: each waiter is held for its own queue only
        io_phase("both", d, fio, disk, cpus, [("both-a", qa, wa), ("both-b", qb, wb)], True)
        off = f'\n[[device]]\nname = "{disk}"\nwaiter_cpus = false\n'
        if report(d.reload(config(off), 30), "latgovd reloaded with waiter_cpus = false"):
            io_phase("off", d, fio, disk, cpus, [("off", qa, wa)], False)
        report(d.stop() == 0, "latgovd exited 0 on SIGTERM")
        report(fio.proc.wait(60) == 0, f"fio exited 0 {fio.errors().strip()[-300:]}")
        report(held_exactly(cpus, set()), f"nothing held after latgovd ({qos_all(cpus)})")
    finally:
        for p in (fio.proc, d.proc):
            if p.poll() is None:
                p.kill()
        if FAILED:
            print("--- latgovd log (last 40 lines)\n" + "\n".join(d.log().splitlines()[-40:]))
    print(f"guest-waiters: {len(FAILED)} failed")
    return 1 if FAILED else 0


if __name__ == "__main__":
    sys.exit(main())
