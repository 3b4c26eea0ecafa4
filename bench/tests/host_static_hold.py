"""Root, on this machine: once Session.hold_dma_zero() returns, no idle
state deeper than POLL gains time, including the halt a CPU was in when the
hold was written (the kernel kicks idle CPUs but does not wait for them).
Without the wait, a fast reader right after the write saw such time in 14
of 50 tries on a 2-vCPU haltpoll guest. On every host, with or without a
cpuidle driver, /dev/cpu_dma_latency reads 0 under each hold and its previous
value after each release_dma(). Not part of the unit suites: run by ctest as
bench.host.static_hold."""

import os
import struct
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from latgov_bench.runner import Session, Tools  # noqa: E402
from latgov_bench.sysstate import SysRoot, read_host  # noqa: E402

TRIES = 40


def dma_latency(root: SysRoot) -> int:
    """What /dev/cpu_dma_latency reads: the aggregate request, a native s32
    (opening it adds a request at the default, which lowers nothing)."""
    with open(root.dma_latency, "rb") as f:
        return struct.unpack("=i", f.read(4))[0]


def test_no_time_deeper_than_poll_once_the_hold_returns():
    assert os.geteuid() == 0, "needs root: it writes /dev/cpu_dma_latency"
    root = SysRoot()
    host = read_host(root)
    session = Session(root, Tools("fio", "latgovd", "latgov", None, 0))
    previous = dma_latency(root)
    assert previous > 0, "/dev/cpu_dma_latency already held at %d before the test" % previous
    if not host.layout.any:
        # No cpuidle states: nothing for the hold to exclude, and no time to
        # count; the hold itself still holds (reads 0) and its release puts
        # the previous value back.
        assert host.driver == "none", "no cpuidle states under driver %s" % host.driver
        held, after = [], []
        try:
            for _ in range(5):
                session.hold_dma_zero(host.cpus)
                held.append(dma_latency(root))
                session.release_dma()
                after.append(dma_latency(root))
        finally:
            session.release_dma()
        assert held == [0] * 5, "/dev/cpu_dma_latency under the hold: %s" % held
        assert after == [previous] * 5, \
            "/dev/cpu_dma_latency after each release: %s, was %d" % (after, previous)
        return
    assert host.has_poll, "no POLL state under %s: the test needs one" % host.driver
    deeper = [root.cpu_sys / ("cpu%d/cpuidle/state%d/time" % (cpu, i))
              for cpu in host.cpus for i, name in host.layout.states[cpu] if name.upper() != "POLL"]
    fds = [os.open(p, os.O_RDONLY) for p in deeper]

    def deeper_us() -> int:
        return sum(int(os.pread(fd, 64, 0)) for fd in fds)

    gains, held, after = [], [], []
    try:
        for _ in range(TRIES):
            time.sleep(0.2)                 # every CPU idles, deeper than POLL
            session.hold_dma_zero(host.cpus)
            before = deeper_us()            # right away, before anything else
            time.sleep(0.05)
            gains.append(deeper_us() - before)
            held.append(dma_latency(root))
            session.release_dma()
            after.append(dma_latency(root))
    finally:
        session.release_dma()
        for fd in fds:
            os.close(fd)
    assert held == [0] * TRIES, "/dev/cpu_dma_latency under the hold: %s" % held
    assert after == [previous] * TRIES, \
        "/dev/cpu_dma_latency after each release: %s, was %d" % (after, previous)
    assert all(g == 0 for g in gains), \
        "time deeper than POLL under the hold, us per try: %s" % gains
