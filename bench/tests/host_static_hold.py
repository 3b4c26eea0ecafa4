"""Root, on this machine: once Session.hold_dma_zero() returns, no idle
state deeper than POLL gains time, including the halt a CPU was in when the
hold was written (the kernel kicks idle CPUs but does not wait for them).
Without the wait, a fast reader right after the write saw such time in 14
of 50 tries on a 2-vCPU haltpoll guest. On every host, with or without a
cpuidle driver, /dev/cpu_dma_latency reads 0 under each hold and its previous
value after each release_dma(). The same for a CPU held on its own by
Session.hold_percpu() (bench/ab's static-waiter and static-completion), whose
write wakes no CPU at all. Not part of the unit suites: run by ctest as
bench.host.static_hold."""

import os
import struct
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from latgov_bench.runner import PERCPU_JOURNAL, Session, Tools  # noqa: E402
from latgov_bench.sysstate import SysRoot, read_host, read_percpu_qos  # noqa: E402

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


def test_cpus_held_on_their_own_count_no_time_deeper_than_poll_and_the_others_do():
    """bench/ab's static-waiter and static-completion modes: a write to a
    CPU's pm_qos_resume_latency_us wakes no CPU, so hold_percpu makes each
    held CPU leave its idle state; from then on it polls, while a CPU not
    held keeps halting. Each CPU alone, then all at once; each CPU's file
    is "0" again after each release, and no journal is left."""
    assert os.geteuid() == 0, "needs root: it writes pm_qos_resume_latency_us"
    root = SysRoot()
    host = read_host(root)
    session = Session(root, Tools("fio", "latgovd", "latgov", None, 0))
    found = read_percpu_qos(root, host.cpus)
    assert all(v == "0" for v in found.values()), "constraints held before the test: %s" % found
    sets = [[cpu] for cpu in host.cpus] + ([host.cpus] if len(host.cpus) > 1 else [])
    tries = TRIES // 2 if host.layout.any else 3
    held, after = [], []
    gains: dict[int, list[int]] = {i: [] for i in range(len(sets))}   # the held CPUs'
    others: dict[int, list[int]] = {i: [] for i in range(len(sets))}  # the others'
    if host.layout.any:
        assert host.has_poll, "no POLL state under %s: the test needs one" % host.driver
    fds = {cpu: [os.open(root.cpu_sys / ("cpu%d/cpuidle/state%d/time" % (cpu, i)), os.O_RDONLY)
                 for i, name in host.layout.states.get(cpu, []) if name.upper() != "POLL"]
           for cpu in host.cpus}

    def deeper_us(cpus: list[int]) -> int:
        return sum(int(os.pread(fd, 64, 0)) for cpu in cpus for fd in fds[cpu])

    try:
        for _ in range(tries):
            for i, cpus in enumerate(sets):
                rest = [c for c in host.cpus if c not in cpus]
                time.sleep(0.1)             # every CPU idles, deeper than POLL
                session.hold_percpu(cpus)
                before, before_rest = deeper_us(cpus), deeper_us(rest)  # right away
                time.sleep(0.05)
                gains[i].append(deeper_us(cpus) - before)
                others[i].append(deeper_us(rest) - before_rest)
                held.append(read_percpu_qos(root, host.cpus))
                session.release_percpu()
                after.append(read_percpu_qos(root, host.cpus))
    finally:
        session.release_percpu()
        for fd in sum(fds.values(), []):
            os.close(fd)
    want = [{c: "n/a" if c in cpus else "0" for c in host.cpus}
            for _ in range(tries) for cpus in sets]
    assert held == want, "pm_qos_resume_latency_us under each hold: %s" % held
    assert after == [found] * len(want), "after each release: %s, was %s" % (after, found)
    assert not root.path(PERCPU_JOURNAL).exists(), "%s left behind" % PERCPU_JOURNAL
    if not host.layout.any:
        assert host.driver == "none", "no cpuidle states under driver %s" % host.driver
        return
    assert all(g == 0 for g in sum(gains.values(), [])), \
        "time deeper than POLL on the held CPUs, us per try: %s" % gains
    alone = [i for i, cpus in enumerate(sets) if len(cpus) < len(host.cpus)]
    assert all(any(g > 0 for g in others[i]) for i in alone), \
        "a CPU not held never went deeper than POLL, us per try: %s" % others
