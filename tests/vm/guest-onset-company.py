#!/usr/bin/env python3
"""The part of onset-company-test.sh that runs INSIDE an nvme-vm guest
booted with --ctrl Q --ctrl Q --namespaces 2: two controllers, each with
two namespaces. nvme0n1 and nvme0n2 share their controller's hardware
queues: queue i of each completes on the same IRQ (nvme0q<i+1>). nvme1n1's
queues have IRQs of their own.

Isolated 4 KiB reads of nvme0n1 (prearm off, linger 400 ms), each followed
2 ms later by an asynchronous 4 KiB write (a buffered write sent with
sync_file_range: nobody waits for it) from the same CPU to another disk,
which completes while the read is held. The reading CPU's count of
requests someone waits for says each read came alone, and latgovd stops
waking on requests after 8 of them (io_events "paused"). Checked against
the guest's sysfs and latgovd's status file, for two writers:
  shared   nvme0n2: the write completes on the read's IRQ. Counted by
           that interrupt, it would pass for the read's company;
  other    nvme1n1: the write's completion activates nvme1n1's queue (the
           reading CPU's event is disarmed while its read is held, so
           completions are sampled); its release would pass for company.
Either way latgovd would never pause. Every write must complete within
half the linger of its read, before the read's release (one after it is
unknown company, as it should be).

Usage: guest-onset-company.py LATGOVD LATGOV
Prints PASS/FAIL lines; exits 1 if anything failed.
"""

import argparse
import ctypes
import mmap
import os
import random
import sys
import tempfile
import time

from guestlib import (FAILED, Latgovd, all_cpus, fixed_config, qos, queues_of, read, report,
                      wait_for)

# The hold outlasts the write 2 ms after the read, under emulation too:
# a write that completed after the read's release would activate its queue
# unwatched, and that is company (unknown) for the streak.
LINGER_MS = 400
# After the release: latgovd writes the CPUs back before it arms its
# events again, and a read between would be sampled, not an onset.
REARM_SECONDS = 0.1
READS_BEFORE_PAUSE = 8
SYNC_FILE_RANGE_WRITE = 2

CONFIG = fixed_config(LINGER_MS, defaults="prearm = false\n")


def completed_writes(disk):
    return int(read(f"/sys/block/{disk}/stat").split()[4])


def queue_of_cpu(disk, cpu):
    return next(q for q in queues_of(disk) if cpu in q["submit"])


def reads_each_with_a_write(label, args, cpus, reader_disk, writer_disk):
    """Reads of `reader_disk` from this CPU, each with a write to `writer_disk`
    beside, under a latgovd of their own: paused after 8."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.sync_file_range.argtypes = [ctypes.c_int, ctypes.c_int64, ctypes.c_int64, ctypes.c_uint]
    rfd = os.open(f"/dev/{reader_disk}", os.O_RDONLY | os.O_DIRECT)
    wfd = os.open(f"/dev/{writer_disk}", os.O_WRONLY)
    buf = mmap.mmap(-1, 4096)
    blocks = (128 << 20) // 4096
    rng = random.Random(4242)

    def held():
        return any(qos(c) == "n/a" for c in cpus)

    def write(offset):
        os.pwrite(wfd, os.urandom(4096), offset)
        if libc.sync_file_range(wfd, offset, 4096, SYNC_FILE_RANGE_WRITE) != 0:
            raise OSError(ctypes.get_errno(), f"sync_file_range on {writer_disk}")

    # The first write and read take a slow path (tens of ms beside a busy
    # host): taken before latgovd starts.
    done = completed_writes(writer_disk)
    write(0)
    os.preadv(rfd, [buf], 0)
    wait_for(lambda: completed_writes(writer_disk) > done, 5.0)
    failed_before = len(FAILED)
    d = None
    try:
        d = Latgovd(args.latgovd, args.latgov, tempfile.mkdtemp(prefix="latgov-company-"), CONFIG)
        if not report(d.wait_ready(120), f"{label}: latgovd ready"):
            print(d.log())
            return
        time.sleep(1.0)  # the start's own IO drained, every CPU released

        def onsets():
            return d.status_file().get("onset_delay", {}).get("count", 0)

        for i in range(READS_BEFORE_PAUSE):
            if not report(wait_for(lambda: not held(), 5.0),
                          f"{label}: nothing held before read {i + 1}"):
                break
            time.sleep(REARM_SECONDS)  # and the status rewritten (50 ms)
            status = d.status_file()
            if not report("paused" not in status.get("io_events", ""),
                          f"{label}: not paused before read {i + 1}: "
                          f"{status.get('io_events')!r}"):
                break
            read_at = time.monotonic()
            os.preadv(rfd, [buf], rng.randrange(blocks) * 4096)
            time.sleep(0.002)
            done = completed_writes(writer_disk)
            write(rng.randrange(blocks) * 4096)
            if not report(wait_for(lambda: completed_writes(writer_disk) > done, 5.0, 0.0005),
                          f"{label}: read {i + 1}'s write to {writer_disk} completed"):
                break
            # Within half the linger of the read: before its release, held
            # or about to be (latgovd's first wake-up can be slower than
            # the write).
            took = time.monotonic() - read_at
            if not report(took < LINGER_MS / 2000,
                          f"{label}: read {i + 1}'s write completed {took * 1000:.1f} ms after "
                          f"the read, within half the linger"):
                break
            if not report(wait_for(lambda: onsets() >= i + 1, 5.0, 0.02),
                          f"{label}: read {i + 1}'s onset counted ({onsets()})"):
                break
        else:
            paused = wait_for(lambda: "paused" in d.status_file().get("io_events", ""), 3.0, 0.05)
            status = d.status_file()
            report(paused, f"{label}: io_events paused after {READS_BEFORE_PAUSE} reads of "
                           f"{reader_disk}, each with a write to {writer_disk} beside: "
                           f"{status.get('io_events')!r}, onsets "
                           f"{status.get('onset_delay', {}).get('count')}")
        if len(FAILED) > failed_before:
            print(d.log()[-20000:])
        report(d.stop() == 0, f"{label}: latgovd exit 0")
        report(all(qos(c) == "0" for c in cpus),
               f"{label}: every CPU back at 0 after the stop ({ {c: qos(c) for c in cpus} })")
    finally:
        if d and d.proc.poll() is None:
            d.proc.kill()
        os.close(rfd)
        os.close(wfd)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("latgovd")
    ap.add_argument("latgov")
    args = ap.parse_args()

    reader = "nvme0n1"
    writers = {"shared": "nvme0n2", "other": "nvme1n1"}
    disks = [reader, *writers.values()]
    if not report(wait_for(lambda: all(os.path.exists(f"/sys/block/{d}") for d in disks), 20, 0.1),
                  f"{', '.join(disks)} appeared"):
        return 1
    cpus = all_cpus()
    cpu = cpus[-1]
    os.sched_setaffinity(0, {cpu})
    r = queue_of_cpu(reader, cpu)
    for label, writer in writers.items():
        w = queue_of_cpu(writer, cpu)
        same = r["irq"] is not None and r["irq"] == w["irq"]
        if report(same == (label == "shared"),
                  f"{label}: CPU {cpu} submits to {reader} queue {r['index']} (IRQ {r['irq']}) "
                  f"and {writer} queue {w['index']} (IRQ {w['irq']}): "
                  f"{'one IRQ' if same else 'IRQs of their own'}"):
            reads_each_with_a_write(label, args, cpus, reader, writer)
    return 1 if FAILED else 0


if __name__ == "__main__":
    sys.exit(main())
