"""Shared helpers of the host tests (tests/host/test_*.py): the machine's
state read independently of latgov, fio and latgovd processes, and
HostTestCase, the base class that checks the prerequisites of the virtio test
bed (docs/platform.md: vda with one queue, two or more CPUs, root), starts latgovd
instances and puts back every per-CPU value
after each test.

Environment: LATGOVD and LATGOV, the paths of the two binaries (set by ctest).
Optional: LATGOV_TEST_RUNTIME_BASE, where the per-test runtime dirs go
(default /dev/shm: tmpfs, like /run in production).

The tests read and write nothing of the machine's own latgov state: every
configuration names a calibration, evidence and metrics file in the test's
temporary directory, and a test fails if /var/lib/latgov or node_exporter's
latgov.prom changed under it.
"""

import ctypes
import errno
import glob
import json
import os
import re
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
import unittest

# The bench's own readers of the same files: one parser of each.
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "bench"))
from latgov_bench.runner import unit_nice  # noqa: E402  (the Nice= latgov.service sets)
from latgov_bench.sysstate import SysRoot, mount_tracefs, pm_qos_writers  # noqa: E402
from latgov_bench.sysstate import parse_cpu_list as cpu_list  # noqa: E402


DISK = "vda"
FIO_FILE = "/var/tmp/latgov-host-test-fio.dat"
FIO_SIZE = 256 << 20
CPU_SYS = "/sys/devices/system/cpu"
NO_GLOBAL_LIMIT = 2000000000
EXIT_CONFIG = 78
MACHINE_STATE = "/var/lib/latgov"
# The metrics file latgovd writes by default where node_exporter's textfile
# directory exists (lib/core/latgov/config.hpp).
MACHINE_METRICS = "/var/lib/prometheus/node-exporter/latgov.prom"
# status.json io_events when a perf event wakes an idle daemon, and when
# perf events were refused and it samples instead.
EVENTS_ON = "sleeping until the first request"
PASSTHROUGH_ON = "block_rq_issue for passthrough"
# With no cpuidle driver and only auto-mode devices nothing can be held.
WATCH_ONLY = "not needed: "
EVENTS_OFF = "unavailable"

# The release of a hold is seen at the first steady tick whose whole window
# had no completion and that comes linger_ms after the last one: within
# linger_ms + 2 x steady_interval_ms of the last IO. The tests allow 50 ms
# more for this test process (polling every ms on a busy 2-CPU machine) to
# be scheduled and see it; measured here: 20-80 ms after vda's last IO.
DEFAULT_LINGER_MS = 3
STEADY_INTERVAL_MS = 20
RELEASE_SLACK_MS = 2 * STEADY_INTERVAL_MS + 50

# The fixed 0 us policy on the completion CPUs, waiter CPUs off; shared with
# the VM tests.
with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..",
                       "fixed-policy.toml")) as _f:
    FIXED_CONFIG = _f.read()


def log(msg):
    print(msg, file=sys.stderr, flush=True)


# --------------------------------------------------------------------------
# Machine state, read independently of latgov.

def cpu_knob(cpu):
    return f"{CPU_SYS}/cpu{cpu}/power/pm_qos_resume_latency_us"


def all_cpus():
    cpus = []
    for path in glob.glob(f"{CPU_SYS}/cpu[0-9]*/power/pm_qos_resume_latency_us"):
        cpus.append(int(re.search(r"/cpu(\d+)/power/", path).group(1)))
    return sorted(cpus)


def online_cpus():
    """/sys/devices/system/cpu/online as a list ("0-3,6" -> [0, 1, 2, 3, 6])."""
    with open(f"{CPU_SYS}/online") as f:
        text = f.read().strip()
    cpus = []
    for part in text.split(","):
        first, _, last = part.partition("-")
        cpus.extend(range(int(first), int(last or first) + 1))
    return cpus


def read_cpu(cpu):
    with open(cpu_knob(cpu)) as f:
        return f.read().strip()


def write_cpu(cpu, value):
    with open(cpu_knob(cpu), "w") as f:
        f.write(str(value))


def read_all():
    return {cpu: read_cpu(cpu) for cpu in all_cpus()}


def read_global():
    # Opening the device adds a request of its own (the default, "none"):
    # it does not lower the aggregate.
    with open("/dev/cpu_dma_latency", "rb") as f:
        return struct.unpack("=i", f.read(4))[0]


def disk_irq():
    """(irq number, irq name) of the disk's single request queue, from
    /sys/block/<disk>/device -> virtioN and /proc/interrupts."""
    dev = os.path.realpath(f"/sys/block/{DISK}/device")
    virtio = os.path.basename(dev)
    if not re.fullmatch(r"virtio\d+", virtio):
        raise AssertionError(f"/sys/block/{DISK}/device is {dev}, not a virtio device")
    wanted = f"{virtio}-req.0"
    found = []
    with open("/proc/interrupts") as f:
        for line in f:
            fields = line.split()
            if fields and fields[0].endswith(":") and fields[-1] == wanted:
                found.append(int(fields[0][:-1]))
            elif fields and fields[-1].startswith(f"{virtio}-req"):
                found.append(None)  # a second queue: not the expected bed
    if len(found) != 1 or found[0] is None:
        raise AssertionError(f"expected exactly one IRQ {wanted} for {DISK} in "
                             f"/proc/interrupts, found {found}")
    return found[0], wanted


def irq_count(irq):
    """Interrupts of `irq` so far, all CPUs (cheaper than /proc/interrupts)."""
    with open(f"/sys/kernel/irq/{irq}/per_cpu_count") as f:
        return sum(int(x) for x in f.read().strip().split(",") if x)


def inflight(disk):
    """Requests of `disk` in flight now, reads and writes."""
    with open(f"/sys/block/{disk}/inflight") as f:
        return sum(int(x) for x in f.read().split())


def completion_cpus(irq):
    with open(f"/proc/irq/{irq}/effective_affinity_list") as f:
        return set(cpu_list(f.read()))


def disk_devno():
    with open(f"/sys/block/{DISK}/dev") as f:
        major, minor = f.read().strip().split(":")
    return os.makedev(int(major), int(minor))


def disk_of(path):
    """The device number of the whole disk `path` lives on: its
    filesystem's own, or the disk's when that is a partition (vda1)."""
    dev = os.stat(path).st_dev
    node = os.path.realpath(f"/sys/dev/block/{os.major(dev)}:{os.minor(dev)}")
    if os.path.exists(os.path.join(node, "partition")):
        with open(os.path.join(os.path.dirname(node), "dev")) as f:
            major, minor = f.read().strip().split(":")
        return os.makedev(int(major), int(minor))
    return dev


def cpuidle_driver():
    try:
        with open(f"{CPU_SYS}/cpuidle/current_driver") as f:
            return f.read().strip()
    except FileNotFoundError:
        return "none"


def cpuidle_governor():
    for name in ("current_governor_ro", "current_governor"):
        try:
            with open(f"{CPU_SYS}/cpuidle/{name}") as f:
                return f.read().strip()
        except FileNotFoundError:
            pass
    return ""


# What PM QoS can do on a host, by its cpuidle driver and governor
# (IdleGovernorKind in lib/core/latgov/policy.hpp).
NO_IDLE_DRIVER = "none"  # no cpuidle driver: nothing can be held
ZERO_ONLY = "zero_only"  # haltpoll: only a limit of exactly 0 has an effect
LATENCY_AWARE = "latency_aware"  # menu, teo, ...: the idle states' costs decide


def idle_governor_kind(driver=None, governor=None):
    """The host's kind by latgovd's rule, checked in this order: driver
    "none" (or none read) -> NO_IDLE_DRIVER, whatever the governor; the
    haltpoll driver or the haltpoll governor -> ZERO_ONLY; else
    LATENCY_AWARE. driver, governor: this machine's (cpuidle_driver(),
    cpuidle_governor()) unless given."""
    driver = cpuidle_driver() if driver is None else driver
    governor = cpuidle_governor() if governor is None else governor
    if driver in ("", "none"):
        return NO_IDLE_DRIVER
    if "haltpoll" in (driver, governor):
        return ZERO_ONLY
    return LATENCY_AWARE


def idle_states(cpu):
    """cpu's idle states as sysfs lists them: [{index, name, latency, disabled}]."""
    base = f"{CPU_SYS}/cpu{cpu}/cpuidle"
    states = []
    if not os.path.isdir(base):
        return states
    for entry in sorted(os.listdir(base), key=lambda e: int(e[len("state"):])):
        def field(name):
            with open(f"{base}/{entry}/{name}") as f:
                return f.read().strip()
        states.append({"index": int(entry[len("state"):]), "name": field("name"),
                       "latency": int(field("latency")), "disabled": field("disable") != "0"})
    return states


def idle_costs_text(declared_because):
    """status.json's idle_costs where the declared latencies stand, for the
    reason given: where only 0 counts (the haltpoll driver or governor, with a
    driver) the status adds that auto mode uses no cost at all."""
    text = f"declared ({declared_because})"
    if idle_governor_kind() == ZERO_ONLY:
        text += "; under haltpoll auto mode uses no cost: live IO decides (limit_from)"
    return text


# expected_auto_limit's answer where no idle-state cost decides: the live IO
# windows with and without the hold do (hold 0 or nothing).
LIVE_EVIDENCE = "live IO"


def expected_auto_limit(states, allowed_us, driver, governor, costs=None):
    """The limit auto mode must choose for a CPU with these idle states when
    the wake-up cost allowed is allowed_us (latency_fraction x the device's
    mean request latency), computed here from the rule the README states, not
    from latgov's code: with no cpuidle driver, nothing (PM QoS cannot act);
    under the haltpoll driver or governor no cost decides, neither the declared 1 us
    (not the wake-up cost) nor a measured one: LIVE_EVIDENCE, live IO
    windows with and without the hold choose 0 or nothing; else states whose
    cost fits are kept and deeper ones excluded; nothing if all fit; else the
    deepest fitting declared latency below the shallowest misfit (0 = poll
    only). costs: {state name: measured cost}, declared latencies where absent.
    Returns (limit, None or LIVE_EVIDENCE; the states that do not fit)."""
    kind = idle_governor_kind(driver, governor)
    if kind == NO_IDLE_DRIVER:
        return None, []
    if kind == ZERO_ONLY:
        return LIVE_EVIDENCE, []
    costs = costs or {}
    enabled = [s for s in states if not s["disabled"]]
    misfits = [s for s in enabled
               if s["latency"] > 0 and costs.get(s["name"], s["latency"]) > allowed_us]
    if not misfits:
        return None, []
    cut = min(s["latency"] for s in misfits)
    fitting = [s["latency"] for s in enabled if s not in misfits and s["latency"] < cut]
    return max(fitting, default=0), misfits


def ensure_tracefs():
    """tracefs with the block_getrq event (the daemon's IO events),
    mounted as the bench does when it is not. Raises when it cannot: the
    tests that expect events must fail, not fall back."""
    try:
        d, _ = mount_tracefs()
    except OSError as e:
        raise AssertionError(str(e)) from e
    event = os.path.join(d, "events/block/block_getrq/id")
    if not os.path.exists(event):
        raise AssertionError(f"tracefs at {d} has no {event}")
    return d


def tree_state(path):
    """(relative path, size, mtime) of everything under path; None if absent."""
    if not os.path.exists(path):
        return None
    found = []
    for root, dirs, files in os.walk(path):
        for name in dirs + files:
            full = os.path.join(root, name)
            st = os.lstat(full)
            found.append((os.path.relpath(full, path), st.st_size, st.st_mtime_ns))
    return sorted(found)


def ensure_fio_file():
    """256 MiB of written data (not unwritten extents, whose reads never
    reach the disk) on the disk under test."""
    if disk_of(os.path.dirname(FIO_FILE)) != disk_devno():
        raise AssertionError(f"{os.path.dirname(FIO_FILE)} is not on {DISK}")
    try:
        if os.path.getsize(FIO_FILE) == FIO_SIZE:
            return
    except FileNotFoundError:
        pass
    tmp = FIO_FILE + ".tmp"
    block = os.urandom(1 << 20)
    with open(tmp, "wb") as f:
        for _ in range(FIO_SIZE >> 20):
            f.write(block)
        f.flush()
        os.fsync(f.fileno())
    os.rename(tmp, FIO_FILE)


# --------------------------------------------------------------------------
# Processes.

class Fio:
    """QD1 4k random reads, io_uring, O_DIRECT, submitted from `cpu` (the
    tests pass a CPU other than the disk's completion CPU, so that CPU idles
    between IOs and the completion really wakes it)."""

    def __init__(self, seconds, cpu, filename=FIO_FILE):
        self.started = time.monotonic()
        self.proc = subprocess.Popen(
            ["taskset", "-c", str(cpu), "fio", "--thread", "--name=latgov-host-test",
             f"--filename={filename}", "--rw=randread", "--bs=4k", "--iodepth=1",
             "--ioengine=io_uring", "--direct=1", f"--runtime={seconds}",
             "--time_based", "--output=/dev/null"],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        self.io_started = None
        self.ended = None

    def read_bytes(self):
        # taskset execs fio in place: the pid is fio's.
        try:
            with open(f"/proc/{self.proc.pid}/io") as f:
                for line in f:
                    if line.startswith("read_bytes:"):
                        return int(line.split()[1])
        except (FileNotFoundError, ProcessLookupError):
            pass
        return 0

    def wait_io_start(self, timeout=5.0, streak=8, step=0.002):
        """When fio's reads reached the disk: its read_bytes grew in each of
        `streak` samples `step` apart (the first of them is the start). A
        byte count alone is not enough where the page cache is small: fio
        and its libraries are then read from this disk too, in bursts of
        page faults, a few hundred ms before the job's first read."""
        deadline = time.monotonic() + timeout
        last, growing, first = self.read_bytes(), 0, None
        while time.monotonic() < deadline:
            time.sleep(step)
            now, read = time.monotonic(), self.read_bytes()
            growing = growing + 1 if read > last else 0
            if growing == 1:
                first = now - step
            last = read
            if growing >= streak:
                self.io_started = first
                return self.io_started
            if self.proc.poll() is not None:
                break
        raise AssertionError(f"fio did not start reading within {timeout} s "
                             f"(rc {self.proc.poll()}): {self.stderr()}")

    def running(self):
        return self.proc.poll() is None

    def wait(self, timeout=30):
        rc = self.proc.wait(timeout)
        self.ended = time.monotonic()
        if rc != 0:
            raise AssertionError(f"fio failed ({rc}): {self.stderr()}")
        self.proc.stderr.close()
        return self.ended

    def watch_until_exit(self, read, irq, step=0.001):
        """Poll until fio exits. Returns a Watched: when fio's reads made
        progress, every change of read() and when the disk's IRQ count grew."""
        w = Watched()
        last_bytes, last_irq = self.read_bytes(), irq_count(irq)
        w.progress.append(time.monotonic())
        while self.running():
            now = time.monotonic()
            rb = self.read_bytes()
            if rb != last_bytes:
                last_bytes = rb
                w.progress.append(now)
            n = irq_count(irq)
            if n != last_irq:
                last_irq = n
                w.irq_times.append(now)
            v = read()
            if not w.changes or w.changes[-1][1] != v:
                w.changes.append((now, v))
            time.sleep(step)
        self.wait()
        return w

    def stderr(self):
        if self.proc.poll() is None or self.proc.stderr.closed:
            return ""
        return self.proc.stderr.read().decode(errors="replace")

    def kill(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        if not self.proc.stderr.closed:
            self.proc.stderr.close()


class Watched:
    """What Fio.watch_until_exit saw: progress (times fio's read_bytes was
    seen to grow), changes ([(time, value)] at every change of the watched
    value) and irq_times (times the disk's interrupt count was seen to grow)."""

    def __init__(self):
        self.progress, self.changes, self.irq_times = [], [], []

    @property
    def last_io(self):
        return self.progress[-1]

    def gaps(self, held, linger_s, lookback_s=0.05):
        """Releases seen while fio ran that no stall of fio explains: a value
        other than `held` after the first `held` and before fio's last IO,
        with no gap of linger_s or more in fio's progress during the
        lookback_s before it (the daemon releases at a tick whose whole
        window had no completion: the stall may have ended just before the
        release was written and seen). A stall of this poller only hides
        progress: it can excuse a release, never invent one. Returns
        (unexplained, explained) lists of times."""
        first = next((t for t, v in self.changes if v == held), None)
        unexplained, explained = [], []
        if first is None:
            return unexplained, explained
        for t, v in self.changes:
            if t <= first or v == held or t >= self.last_io:
                continue
            points = [t - lookback_s] + [p for p in self.progress
                                         if t - lookback_s < p <= t] + [t]
            widest = max(b - a for a, b in zip(points, points[1:]))
            (explained if widest >= linger_s else unexplained).append(t)
        return unexplained, explained

    def held_fraction(self, held):
        """Fraction of the time from the first `held` to fio's last IO that
        the watched value was `held`."""
        first = next((t for t, v in self.changes if v == held), None)
        if first is None or first >= self.last_io:
            return 0.0
        total, on = self.last_io - first, 0.0
        for (t, v), nxt in zip(self.changes, self.changes[1:] + [(self.last_io, None)]):
            lo, hi = max(t, first), min(nxt[0], self.last_io)
            if v == held and hi > lo:
                on += hi - lo
        return on / total


class NotifySocket:
    """What a service manager hears: a datagram socket at `path`, given to
    latgovd as NOTIFY_SOCKET, and the sd_notify messages it received."""

    def __init__(self, path):
        self.path = path
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.sock.bind(path)
        self.sock.setblocking(False)
        self.messages = []

    def received(self):
        """Every message so far, each a dict of its assignments."""
        while True:
            try:
                data = self.sock.recv(4096)
            except BlockingIOError:
                return self.messages
            self.messages.append(dict(line.split("=", 1)
                                      for line in data.decode().splitlines() if "=" in line))

    def last(self, key):
        """The last value sent for `key` (None before one was)."""
        values = [m[key] for m in self.received() if key in m]
        return values[-1] if values else None

    def wait_last(self, key, check, timeout=2.0):
        """Polls until check(last value of key) holds; that value."""
        deadline = time.monotonic() + timeout
        while True:
            value = self.last(key)
            if check(value):
                return value
            if time.monotonic() > deadline:
                raise AssertionError(f"{key}= is {value!r} after {timeout} s; "
                                     f"every message: {self.messages}")
            time.sleep(0.02)

    def close(self):
        self.sock.close()


def epoll_watches(pid):
    """{epoll fd: the fds it watches} of process `pid`, and which of its
    fds are perf events and which the signalfd (the main loop's epoll
    watches that one), from /proc/<pid>/fd and fdinfo."""
    watches, kinds = {}, {}
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            kinds[int(fd)] = os.readlink(f"/proc/{pid}/fd/{fd}")
        except FileNotFoundError:
            continue
    for fd, kind in kinds.items():
        if kind == "anon_inode:[eventpoll]":
            try:
                with open(f"/proc/{pid}/fdinfo/{fd}") as f:
                    info = f.read()
            except FileNotFoundError:
                continue  # closed meanwhile (a rescan)
            watches[fd] = {int(t) for t in re.findall(r"^tfd:\s*(\d+)", info, re.M)}
    perf = {fd for fd, kind in kinds.items() if kind == "anon_inode:[perf_event]"}
    signalfd = {fd for fd, kind in kinds.items() if kind == "anon_inode:[signalfd]"}
    return watches, perf, signalfd


class PerfCounters:
    """Copies of the perf event fds another process waits on (pidfd_getfd),
    to read their counts: a copy counts while the process keeps its event
    enabled.
    Every perf event shares one anonymous inode, so an event is told apart
    from another by kcmp(KCMP_FILE) against the process's fd."""

    SYS_PIDFD_GETFD = 438  # the same number on every architecture
    SYS_KCMP = {"x86_64": 312, "aarch64": 272}
    KCMP_FILE = 0

    def __init__(self, pid):
        self.pid = pid
        self.pidfd = os.pidfd_open(pid)
        self.libc = ctypes.CDLL(None, use_errno=True)
        machine = os.uname().machine
        if machine not in self.SYS_KCMP:
            raise AssertionError(f"no kcmp syscall number known for {machine}")
        self.sys_kcmp = self.SYS_KCMP[machine]
        self.copies = {}  # the process's fd number: our copy of its event
        self.retired = []  # copies of events it has closed

    def _perf_fds(self, only=None):
        """The process's perf events that an epoll of its watches: those
        that wake it (its counting events wake nobody); of `only`, if given."""
        watches, perf, _ = epoll_watches(self.pid)
        found = perf & set().union(*watches.values())
        return sorted(found if only is None else found & set(only))

    def _same(self, theirs, ours):
        return self.libc.syscall(self.sys_kcmp, self.pid, os.getpid(), self.KCMP_FILE,
                                 theirs, ours) == 0

    def take(self, only=None):
        """Copies the perf events the process waits on that are not copied
        yet (a new event, or a new one under a reused fd number); only
        those among the fds `only`, if given."""
        for fd in self._perf_fds(only):
            if fd in self.copies and self._same(fd, self.copies[fd]):
                continue
            copy = self.libc.syscall(self.SYS_PIDFD_GETFD, self.pidfd, fd, 0)
            if copy < 0:
                err = ctypes.get_errno()
                if err == errno.EBADF:  # closed meanwhile
                    continue
                raise OSError(err, f"pidfd_getfd of fd {fd} of pid {self.pid}")
            if fd in self.copies:  # kept open: its number names no other event
                self.retired.append(self.copies[fd])
            self.copies[fd] = copy

    def counts(self):
        """The count of each copied event the process still has open, by our
        copy's fd (a perf event read with no read_format is its value, 8
        bytes). One it closed is gone for it, whatever our copy counts."""
        return {copy: struct.unpack("Q", os.read(copy, 8))[0]
                for fd, copy in self.copies.items() if self._same(fd, copy)}

    def close(self):
        for copy in [*self.copies.values(), *self.retired]:
            os.close(copy)
        self.copies, self.retired = {}, []
        os.close(self.pidfd)


class Daemon:
    def __init__(self, latgovd, runtime_dir, config_path, log_path, prefix=(), args=(),
                 notify_socket=None, journal_stream=None):
        """prefix: a command that execs latgovd (setpriv ... to drop
        capabilities); latgovd's pid is then the process's own. args: more
        options of latgovd's. notify_socket: where latgovd's sd_notify
        messages go (none are sent without). journal_stream: a socket that
        becomes latgovd's stderr, named by JOURNAL_STREAM as systemd names
        the journal's (the log file then gets nothing). latgovd runs at the
        unit's priority: its timer races the IO it holds for."""
        self.runtime_dir = runtime_dir
        self.log_path = log_path
        self.logf = open(log_path, "ab")
        nice = unit_nice()
        env = {k: v for k, v in os.environ.items() if k != "NOTIFY_SOCKET"}
        if notify_socket:
            env["NOTIFY_SOCKET"] = notify_socket
        stderr = subprocess.STDOUT
        if journal_stream is not None:
            st = os.fstat(journal_stream.fileno())
            env["JOURNAL_STREAM"] = f"{st.st_dev}:{st.st_ino}"
            stderr = journal_stream
        self.proc = subprocess.Popen(
            [*prefix, latgovd, "--config", config_path, "--runtime-dir", runtime_dir, *args],
            stdin=subprocess.DEVNULL, stdout=self.logf, stderr=stderr, env=env,
            preexec_fn=lambda: os.setpriority(os.PRIO_PROCESS, 0, nice))

    def log(self):
        with open(self.log_path, errors="replace") as f:
            return f.read()

    def wait_log(self, pattern, timeout=5.0):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            text = self.log()
            if re.search(pattern, text):
                return text
            if self.proc.poll() is not None:
                raise AssertionError(f"latgovd exited ({self.proc.returncode}) before "
                                     f"logging /{pattern}/:\n{text}")
            time.sleep(0.002)
        raise AssertionError(f"latgovd did not log /{pattern}/ within {timeout} s:\n"
                             f"{self.log()}")

    def wait_ready(self):
        return self.wait_log(r"latgovd ready")

    def send(self, sig):
        self.proc.send_signal(sig)

    def stop(self, sig=signal.SIGTERM, timeout=5):
        self.proc.send_signal(sig)
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            raise AssertionError(f"latgovd did not exit within {timeout} s of "
                                 f"{signal.Signals(sig).name}")

    def alive(self):
        return self.proc.poll() is None

    def perf_event_fds(self):
        """How many perf events latgovd has open (its fds on perf's inode)."""
        fd_dir = f"/proc/{self.proc.pid}/fd"
        links = []
        for fd in os.listdir(fd_dir):
            try:
                links.append(os.readlink(os.path.join(fd_dir, fd)))
            except FileNotFoundError:  # closed meanwhile
                pass
        return sum(link == "anon_inode:[perf_event]" for link in links)

    def kill(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        self.logf.close()

    @property
    def journal(self):
        return os.path.join(self.runtime_dir, "journal")

    @property
    def status_path(self):
        return os.path.join(self.runtime_dir, "status.json")


def journal_cpus(path):
    """CPU numbers a journal lists (None when there is no journal)."""
    try:
        with open(path) as f:
            text = f.read()
    except FileNotFoundError:
        return None
    return [int(m.group(1)) for m in re.finditer(r"^cpu (\d+) ", text, re.M)]


# --------------------------------------------------------------------------
# A captured latency-aware host (tests/golden/vm-2cpu-cstates.tar.gz:
# acpi_idle/menu, 2 CPUs, C1 1 us, C2 20 us (disabled on cpu 1), C3 200 us;
# nvme0n1's queue 1 completes on cpu 1 through IRQ 26), for latgovd run
# with --sysroot: auto mode's cost rule checked on any host, whatever its
# own cpuidle driver (none and haltpoll hosts have no costs to use).

GOLDEN_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "golden")
CSTATES_TREE = os.path.join(GOLDEN_DIR, "vm-2cpu-cstates.tar.gz")
CSTATES_DISK, CSTATES_IRQ, CSTATES_CPU = "nvme0n1", 26, 1
# What read_machine_identity reads from the tree (written into it here):
# a calibration names them to be used there.
CSTATES_CPU_MODEL = "latgov golden vm-2cpu-cstates"
CSTATES_KERNEL = "0.0.0-golden-cstates"


def cstates_calibration(cost_us, states=("C1", "C2", "C3")):
    """A calibration of the cstates tree (its machine, as latgovd reads it
    there) giving every state the measured cost `cost_us`."""
    declared = {"C1": 1, "C2": 20, "C3": 200}
    text = (f'[machine]\ncpu_model = "{CSTATES_CPU_MODEL}"\nkernel = "{CSTATES_KERNEL}"\n'
            'cpuidle_driver = "acpi_idle"\ncpuidle_governor = "menu"\n\n'
            f'[probe]\ndevice = "{CSTATES_DISK}"\ncpu = {CSTATES_CPU}\nsubmit_cpu = 0\n'
            'rounds = 1\nios_per_level = 100\ndate = "2024-01-01T00:00:00Z"\n')
    for name in states:
        text += (f'\n[[state]]\nname = "{name}"\ndeclared_exit_latency_us = {declared[name]}\n'
                 f"measured_cost_us = {cost_us:.2f}\n")
    return text + "\n# end of calibration\n"


class SimulatedReader:
    """A QD1 reader on a disk of a captured tree, as the kernel would count
    it: every 2 ms the disk's block stat (reads, sectors, read ticks, one in
    flight) and its queue IRQ's count in the tree's /proc/stat grow by the
    requests that fit in the time since the last step. A request takes
    held_us while the tree's completion CPU file reads "n/a" (held at 0),
    else unheld_us, and the next comes GAP_US after it. Each file is
    rewritten in place at a fixed length, in one write: latgovd keeps them
    open and reads at offset 0. `seen`: every value the CPU file read."""

    GAP_US = 150.0
    STEP_S = 0.002

    def __init__(self, root, disk, irq, qos_file, held_us, unheld_us):
        self.held_us, self.unheld_us = held_us, unheld_us
        self.stat = os.path.join(root, "sys", "block", disk, "stat")
        self.proc_stat = os.path.join(root, "proc", "stat")
        self.irq, self.qos_file = irq, qos_file
        self.ios = self.ticks_ms = 0.0
        self.steps = self.held_steps = 0
        self.seen = set()
        self.running, self.thread, self.started = False, None, None

    def write(self, inflight):
        ios, ticks = int(self.ios), int(self.ticks_ms)
        stat = (f"{ios:012d} 0 {8 * ios:014d} {ticks:012d} 0 0 0 0 {inflight} {ticks:012d} "
                f"{ticks:012d} 0 0 0 0 0 0\n")
        irqs = ["0"] * 64
        irqs[self.irq] = f"{ios:012d}"
        proc = ("cpu  1 0 1 100 0 0 0 0 0 0\n"
                "cpu0 1 0 1 50 0 0 0 0 0 0\ncpu1 0 0 0 50 0 0 0 0 0 0\n"
                f"intr {ios:012d} " + " ".join(irqs) + "\n")
        for path, text in ((self.stat, stat), (self.proc_stat, proc)):
            fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o644)
            try:
                os.pwrite(fd, text.encode(), 0)
            finally:
                os.close(fd)

    def run(self):
        last = time.monotonic()
        while self.running:
            with open(self.qos_file) as f:
                value = f.read().strip()
            self.seen.add(value)
            held = value == "n/a"
            latency = self.held_us if held else self.unheld_us
            now = time.monotonic()
            done = (now - last) * 1e6 / (latency + self.GAP_US)
            last = now
            self.ios += done
            self.ticks_ms += done * latency / 1000
            self.steps += 1
            self.held_steps += held
            self.write(inflight=1)
            time.sleep(self.STEP_S)
        self.write(inflight=0)

    def start(self):
        self.running = True
        self.started = time.monotonic()
        self.thread = threading.Thread(target=self.run, daemon=True)
        self.thread.start()

    def stop(self):
        if self.thread:
            self.running = False
            self.thread.join()
            self.thread = None

    def elapsed(self):
        return time.monotonic() - self.started

    def held_fraction(self):
        return self.held_steps / max(1, self.steps)


# --------------------------------------------------------------------------

class HostTestCase(unittest.TestCase):
    """Base of the host tests; subclasses set `suite` (the CTest name)."""
    suite = "host"
    runtime_base = os.environ.get("LATGOV_TEST_RUNTIME_BASE", "/dev/shm")

    @classmethod
    def setUpClass(cls):
        # Prerequisites: fail loudly, never skip.
        problems = []
        cls.latgovd = os.environ.get("LATGOVD", "")
        cls.latgov = os.environ.get("LATGOV", "")
        for var, path in (("LATGOVD", cls.latgovd), ("LATGOV", cls.latgov)):
            if not path:
                problems.append(f"{var} is not set (path of the binary under test)")
            elif not os.access(path, os.X_OK):
                problems.append(f"{var}={path} is not an executable")
        if os.geteuid() != 0:
            problems.append("not running as root (per-CPU PM QoS files need root)")
        if not os.path.exists(f"/sys/block/{DISK}"):
            problems.append(f"no /sys/block/{DISK}")
        for tool in ("fio", "taskset", "unshare", "losetup"):
            if shutil.which(tool) is None:
                problems.append(f"{tool} is needed")
        if not problems:
            try:
                cls.irq, cls.irq_name = disk_irq()
            except AssertionError as e:
                problems.append(str(e))
        if not problems:
            # Every test but the fallback one expects the event-driven idle.
            try:
                cls.tracefs = ensure_tracefs()
            except AssertionError as e:
                problems.append(str(e))
        if problems:
            raise AssertionError(f"{cls.suite} prerequisites missing:\n  " +
                                 "\n  ".join(problems))
        cls.cpus = all_cpus()
        comp = completion_cpus(cls.irq)
        if len(comp) != 1 or len(cls.cpus) < 2:
            raise AssertionError(f"expected one completion CPU for IRQ {cls.irq} and "
                                 f">= 2 CPUs, got {comp} of {cls.cpus}")
        cls.comp = comp.pop()
        cls.others = [c for c in cls.cpus if c != cls.comp]
        cls.other = cls.others[0]
        # fio submits from a CPU that does not complete: the completion CPU
        # idles between IOs, which is the case latgov exists for.
        cls.submit_cpu = cls.other
        ensure_fio_file()
        log(f"\n[{cls.suite}] {DISK}: IRQ {cls.irq} ({cls.irq_name}) completes on cpu "
            f"{cls.comp}; fio submits from cpu {cls.submit_cpu}; cpuidle driver "
            f"{cpuidle_driver()}, governor {cpuidle_governor()}")

    def setUp(self):
        # Another latgovd (a service of this machine, another test run)
        # writes the same per-CPU slots: what a test reads back would no
        # longer be the daemon under test's doing.
        others = foreign_governors()
        self.assertEqual(others, [], "another latgovd/latgov runs on this machine and "
                                     "writes the same per-CPU slots; stop it first")
        self.baseline = read_all()
        # The expectations below ("0" = no limit before and after) need a
        # machine nobody has constrained.
        self.assertEqual(set(self.baseline.values()), {"0"},
                         f"per-CPU resume latency limits are not all \"0\" before the "
                         f"test: {self.baseline}")
        self.machine_state = tree_state(MACHINE_STATE)
        self.machine_metrics = tree_state(MACHINE_METRICS)
        self.tmp = tempfile.mkdtemp(prefix="latgov-host-", dir=self.runtime_base)
        self.calibration_file = os.path.join(self.tmp, "calibration.toml")
        self.evidence_file = os.path.join(self.tmp, "evidence")
        self.metrics_file = os.path.join(self.tmp, "metrics.prom")
        self.daemons = []
        self.fios = []

    def tearDown(self):
        for fio in self.fios:
            fio.kill()
        for d in self.daemons:
            d.kill()
        for cpu, value in self.baseline.items():
            try:
                if read_cpu(cpu) != value:
                    write_cpu(cpu, value)
            except OSError as e:
                log(f"tearDown: could not restore cpu {cpu} to {value}: {e}")
        if failure := self._failure():
            # What failed first: the daemons' logs that follow can be long
            # enough for a CI excerpt to cut off the report at the end.
            log(f"--- {self.id()} failed:\n{failure[-2000:]}")
            for d in self.daemons:
                try:
                    log(f"--- latgovd log {d.log_path}:\n{d.log()}")
                except OSError:
                    pass
        shutil.rmtree(self.tmp, ignore_errors=True)
        self.assertEqual(tree_state(MACHINE_STATE), self.machine_state,
                         f"the test changed the machine's {MACHINE_STATE}")
        self.assertEqual(tree_state(MACHINE_METRICS), self.machine_metrics,
                         f"the test wrote the machine's {MACHINE_METRICS}")

    def _failure(self):
        """The traceback of this test's failure or error so far, or None."""
        outcome = getattr(self, "_outcome", None)
        result = getattr(outcome, "result", None)
        if result is None:
            return None
        return next((text for t, text in result.failures + result.errors if t is self), None)

    # helpers ---------------------------------------------------------------

    def write_config(self, text, name="latgov.toml"):
        """Writes a configuration into the test's directory. A [daemon]
        section that names no calibration_file / evidence_file / metrics_file
        gets the test's own (absent unless the test or latgovd writes it):
        the machine's /var/lib/latgov/calibration.toml and evidence must not
        decide a test, nor a test write what the machine's latgovd learnt or
        the metrics node_exporter serves (the default metrics file, written
        wherever its directory exists)."""
        own = {"calibration_file": self.calibration_file, "evidence_file": self.evidence_file,
               "metrics_file": self.metrics_file}
        if "[daemon]" not in text:
            text = "[daemon]\n\n" + text
        for key, path in own.items():
            if not re.search(rf"(?m)^{key} *=", text):
                text = re.sub(r"(?m)^\[daemon\]$", f'[daemon]\n{key} = "{path}"', text,
                              count=1)
        path = os.path.join(self.tmp, name)
        with open(path, "w") as f:
            f.write(text)
        return path

    def start_daemon(self, config_text=FIXED_CONFIG, config_path=None, runtime_dir=None,
                     wait=True, prefix=(), events=True, args=(), notify_socket=None,
                     journal_stream=None):
        """Starts latgovd; with wait, waits until it is ready and checks the
        idle mode its status reports: woken by IO events (events=True), or
        sampling because perf events were refused (events=False); events=None
        checks neither (a daemon that cannot write its status)."""
        if config_path is None:
            config_path = self.write_config(config_text)
        runtime_dir = runtime_dir or os.path.join(self.tmp, "run")
        log_path = os.path.join(self.tmp, f"latgovd-{len(self.daemons)}.log")
        d = Daemon(self.latgovd, runtime_dir, config_path, log_path, prefix, args, notify_socket,
                   journal_stream)
        self.daemons.append(d)
        if wait:
            d.wait_ready()
            if events is not None:
                self.assert_wake_mode(d, events)
        return d

    def assert_wake_mode(self, d, events=True):
        """events=True: woken by IO events, or, where nothing can be held (no
        cpuidle driver and every device in auto mode), not woken at all."""
        st = self.wait_status(d, lambda s: "io_events" in s, "io_events")
        mode = st.get("io_events", "")
        watch_only = (cpuidle_driver() in ("", "none") and st["devices"]
                      and all(dev["mode"] == "auto" for dev in st["devices"]))
        if events and watch_only:
            self.assertTrue(mode.startswith(WATCH_ONLY),
                            f"io_events is {mode!r}: latgovd wakes for requests on a host "
                            "where it can hold nothing")
        elif events:
            self.assertTrue(mode.startswith(EVENTS_ON),
                            f"io_events is {mode!r}: not woken by block_getrq events "
                            f"(tracefs at {self.tracefs}):\n{d.log()}")
            # This kernel takes the passthrough events too: in the ring's
            # group, filtered on rwbs, writing to its ring.
            self.assertIn(PASSTHROUGH_ON, mode,
                          f"io_events is {mode!r}: passthrough requests unseen:\n{d.log()}")
        else:
            self.assertTrue(mode.startswith(EVENTS_OFF),
                            f"io_events is {mode!r}: expected the sampling fallback")
        return st

    def wait_status(self, d, check, what, timeout=2.0):
        """Polls status.json until check(status) is true; the status."""
        deadline = time.monotonic() + timeout
        st = None
        while True:
            if os.path.exists(d.status_path):
                st = self.status(d.runtime_dir)
                if check(st):
                    return st
            if time.monotonic() > deadline:
                self.fail(f"status.json: {what} not within {timeout} s:\n{st}")
            time.sleep(0.02)

    def start_fio(self, seconds, cpu=None, filename=FIO_FILE):
        fio = Fio(seconds, self.submit_cpu if cpu is None else cpu, filename)
        self.fios.append(fio)
        return fio

    def start_fio_held(self, seconds, want="n/a"):
        """Start fio and wait until its IO has started and the completion CPU is held."""
        fio = self.start_fio(seconds)
        fio.wait_io_start()
        self.wait_held(fio, want=want)
        return fio

    def wait_value(self, read, want, timeout, step=0.001):
        """Poll read() until it returns want; the time it did, or None."""
        deadline = time.monotonic() + timeout
        while True:
            now = time.monotonic()
            if read() == want:
                return now
            if now >= deadline:
                return None
            time.sleep(step)

    def wait_held(self, fio, timeout=1.0, want="n/a"):
        """After fio's IO started: when the completion CPU read `want`."""
        t = self.wait_value(lambda: read_cpu(self.comp), want, timeout)
        self.assertIsNotNone(t, f"cpu {self.comp} not {want!r} within {timeout} s of fio's "
                                f"IO start (values {read_all()})")
        return t

    def assert_no_stray(self, values, allowed=None, what=""):
        """No CPU but the completion CPU holds anything: every other CPU reads
        its baseline (or allowed[cpu])."""
        allowed = allowed or {}
        stray = {c: v for c, v in values.items()
                 if c != self.comp and v != allowed.get(c, self.baseline[c])}
        self.assertEqual(stray, {}, f"non-completion CPUs constrained {what}: {values}")

    def status(self, runtime_dir):
        out = subprocess.run([self.latgov, "status", "--json", "--runtime-dir", runtime_dir],
                             capture_output=True, text=True, timeout=10)
        self.assertEqual(out.returncode, 0, f"latgov status failed: {out.stderr}")
        return json.loads(out.stdout)

    def assert_held_throughout(self, watched, held, what, linger_ms=DEFAULT_LINGER_MS):
        """While fio ran, `held` stayed in place: every release is explained
        by fio's reads stalling for linger_ms (a stall on this busy host is
        a real end of IO), and the value was held most of the time."""
        unexplained, explained = watched.gaps(held, linger_ms / 1000)
        fraction = watched.held_fraction(held)
        log(f"  {what}: held {100 * fraction:.1f}% of the time fio read, "
            f"{len(explained)} release(s) after a stall of fio, {len(unexplained)} without")
        self.assertEqual(unexplained, [], f"{what}: released while fio's reads progressed "
                                          f"(at {unexplained}): {watched.changes[:20]}")
        self.assertGreaterEqual(fraction, 0.8, f"{what}: held only {100 * fraction:.1f}% "
                                               "of the time fio read")

    def assert_released(self, read, free, fio, watched, what, linger_ms=DEFAULT_LINGER_MS):
        """After the last IO, read() must return to `free` within linger_ms +
        RELEASE_SLACK_MS (the daemon sees the end of IO within linger +
        steady_interval). watched: what fio.watch_until_exit returned.
        Other IO on vda (other users of the machine) legitimately keeps the
        hold: the delay that counts is the one from the disk's last
        completion interrupt before the release. Prints both delays."""
        last_io, changes, irq_times = watched.last_io, watched.changes, watched.irq_times
        last_irq = irq_count(self.irq)
        deadline = time.monotonic() + 3.0
        released = None
        if changes and changes[-1][1] == free:
            released = changes[-1][0]  # released while fio was exiting
        while released is None:
            now = time.monotonic()
            n = irq_count(self.irq)
            if n != last_irq:
                last_irq = n
                irq_times.append(now)
            if read() == free:
                released = now
            elif now > deadline:
                self.fail(f"{what} still {read()!r} 3 s after fio exited")
            else:
                time.sleep(0.001)
        last_disk = max([t for t in irq_times if t <= released] or [last_io])
        from_fio = released - last_io
        from_disk = released - max(last_disk, last_io)
        bound = (linger_ms + RELEASE_SLACK_MS) / 1000
        log(f"  {what}: released {1000 * from_fio:.1f} ms after fio's last IO, "
            f"{1000 * from_disk:.1f} ms after vda's last completion "
            f"(fio exited {1000 * (fio.ended - last_io):.1f} ms after its last IO; "
            f"bound {1000 * bound:.0f} ms)")
        self.assertLessEqual(from_disk, bound,
                             f"{what}: released {1000 * from_disk:.1f} ms after the disk's "
                             f"last IO (> linger {linger_ms} + {RELEASE_SLACK_MS} ms)")

    def loop_device(self, size=64 << 20):
        """A loop device over a file in the test's tmpfs directory (its IO
        never reaches vda); detached at cleanup. Its name."""
        fd, backing = tempfile.mkstemp(prefix="loop-", suffix=".img", dir=self.tmp)
        os.close(fd)
        with open(backing, "wb") as f:
            f.truncate(size)
        out = subprocess.run(["losetup", "--find", "--show", backing],
                             capture_output=True, text=True, timeout=10)
        self.assertEqual(out.returncode, 0, f"losetup failed: {out.stderr}")
        dev = out.stdout.strip()
        self.addCleanup(subprocess.run, ["losetup", "-d", dev], timeout=10)
        with open(dev, "r+b") as f:  # written blocks, read back by fio
            block = os.urandom(1 << 20)
            for _ in range(size >> 20):
                f.write(block)
        return os.path.basename(dev)

    def run_auto(self, config_text=None, config_path=None, prefix=(), costs=None,
                 evidence_file=None):
        """latgovd in auto mode under fio: checks that the limit it chose
        (status.json, and the completion CPU's file) is the one the host's
        idle states call for at the device's observed latency
        (expected_auto_limit; costs: measured costs by state name, declared
        latencies otherwise). Under haltpoll (LIVE_EVIDENCE) see
        check_live_evidence; evidence_file: where that daemon keeps what it
        learns (the test's own unless the configuration is not the test's).
        Returns (status under fio, the expected limit)."""
        d = self.start_daemon(config_text or FIXED_CONFIG, config_path=config_path,
                              prefix=prefix)
        driver, governor = cpuidle_driver(), cpuidle_governor()
        kind = idle_governor_kind(driver, governor)
        states = idle_states(self.comp)
        # Under haltpoll the live IO decides: a window pair takes about a
        # second of IO after the onset, and the default status is written
        # once a second.
        # With no cpuidle driver latgovd samples every status_interval (1 s
        # by default), and IO seen in the sample after one of its own writes
        # is shown only when the next sample sees IO too: up to three
        # periods.
        fio = self.start_fio(4 if kind in (ZERO_ONLY, NO_IDLE_DRIVER) else 2)
        fio.wait_io_start()

        def observed(st):
            dev = {x["name"]: x for x in st["devices"]}.get(DISK, {})
            return dev.get("observed_latency_us") is not None

        st = self.wait_status(d, observed, f"{DISK} observed_latency_us",
                              timeout=3.2 if kind == NO_IDLE_DRIVER else 1.5)
        self.assertTrue(fio.running(), "fio ended before the status showed a latency")
        dev = {x["name"]: x for x in st["devices"]}[DISK]
        fraction = float(re.search(r"latency_fraction = ([0-9.]+)", config_text or "")
                         .group(1)) if config_text and "latency_fraction" in config_text \
            else 0.1
        allowed = fraction * dev["observed_latency_us"]
        want, misfits = expected_auto_limit(states, allowed, driver, governor, costs)
        log(f"  auto: driver {driver}/{governor}, states "
            f"{[(x['name'], x['latency']) for x in states]}, observed "
            f"{dev['observed_latency_us']:.1f} us x {fraction} = {allowed:.2f} us allowed -> "
            f"expected limit {want} (misfits {[x['name'] for x in misfits]}); latgov chose "
            f"{dev['limit_us']} ({dev.get('limit_from')})")
        self.assertEqual(dev["mode"], "auto", st)
        if want == LIVE_EVIDENCE:
            # Only a configuration of the test's own writes status often
            # (status_interval_ms); the embedded default writes it once a
            # second, too seldom to be sure to fall in a window that holds.
            often = "status_interval_ms" in (config_text or "")
            waiters = "waiter_cpus = false" not in (config_text or "")
            self.check_live_evidence(d, fio, evidence_file or self.evidence_file,
                                     status_shows_hold=often, waiters=waiters)
            return st, want
        self.assertEqual(dev["limit_us"], want, st)
        self.assertTrue(dev["limit_from"].startswith(
            "no cpuidle driver" if want is None and kind == NO_IDLE_DRIVER
            else "idle-state costs against latency_fraction"), dev)
        sysfs = "0" if want is None else ("n/a" if want == 0 else str(want))
        if want is not None:
            self.wait_held(fio, want=sysfs)
        watched = fio.watch_until_exit(lambda: read_cpu(self.comp), self.irq)
        values = {v for _, v in watched.changes}
        if want is None:
            self.assertEqual(values, {"0"}, f"auto held something where {want} was expected")
        else:
            self.assert_held_throughout(watched, sysfs, f"cpu {self.comp}")
            self.assert_released(lambda: read_cpu(self.comp), "0", fio, watched,
                                 f"cpu {self.comp}")
        if kind == NO_IDLE_DRIVER:
            self.assertEqual(st["cpuidle_driver"], driver, st)
            self.assertRegex(d.log(), r"no cpuidle driver.*auto holds nothing")
            # Nothing to hold: latgovd only watches, and no request wakes it.
            self.assertTrue(st["io_events"].startswith(WATCH_ONLY), st)
            self.assertEqual(d.perf_event_fds(), 0, "latgovd watches requests it cannot act on")
        self.assert_no_stray(read_all(), what="in auto mode")
        self.assertEqual(d.stop(), 0)
        return st, want

    def check_live_evidence(self, d, fio, evidence_file, status_shows_hold=True, waiters=False):
        """Auto mode under haltpoll with no verdict known for this gap: no
        idle-state cost decides, live IO windows with and without the hold
        do. Until fio ends, every status.json says so (limit_from "live IO
        ..."), the device's limit is 0 or nothing, and the completion CPU
        holds exactly what the status says (a queue active and limit 0 ->
        0, else nothing); the file reads only "0" or "n/a", and "n/a" at
        some point: the first window holds while it measures (the declared
        1 us would never hold). Window pairs were counted (none is a
        failure), and after stop they are in evidence_file. status_shows_hold: a status written while
        the CPU held must be among those read (status written often).
        No other CPU is touched meanwhile, but fio's with waiters on (and,
        on a host with more CPUs, one that status.json shows held for a task
        of the host that waits for this disk)."""
        snapshots, cpu_values, stray, waiting = [], set(), {}, set()
        may_hold = {self.comp, self.submit_cpu} if waiters else {self.comp}
        while fio.running():
            cpu_values.add(read_cpu(self.comp))
            stray.update({c: v for c, v in read_all().items()
                          if c not in may_hold and v != self.baseline[c]})
            with open(d.status_path) as f:
                text = f.read()
            if text:
                st = json.loads(text)
                dev = {x["name"]: x for x in st["devices"]}[DISK]
                cpu = {c["cpu"]: c for c in st["cpus"]}[self.comp]
                snapshots.append((dev, cpu, st["evidence"]))
                waiting |= {c["cpu"] for c in st["cpus"]
                            if any(h["device"] == DISK and h["why"] == "waits"
                                   for h in c["held_for"])}
            cpu_values.add(read_cpu(self.comp))
            time.sleep(0.01)
        fio.wait()
        self.assertGreater(len(snapshots), 10, "too few status snapshots while fio ran")
        held = {dev["limit_us"] for dev, _, _ in snapshots}
        log(f"  live IO: {len(snapshots)} snapshots, device limits {held}, cpu {self.comp} "
            f"read {cpu_values}; last: {snapshots[-1][0]['limit_from']}; "
            f"evidence {snapshots[-1][2]}")
        for dev, cpu, evidence in snapshots:
            self.assertTrue(dev["limit_from"].startswith("live IO"), dev)
            self.assertIn(dev["limit_us"], (0, None), dev)
            if dev["experimenting"]:
                self.assertRegex(dev["limit_from"], r"uncertain|no gap between requests", dev)
            elif "holding buys latency" in dev["limit_from"]:
                self.assertEqual(dev["limit_us"], 0, dev)
            else:
                self.assertIn("holding buys nothing measurable", dev["limit_from"], dev)
                self.assertIsNone(dev["limit_us"], dev)
            want = 0 if dev["active_queues"] and dev["limit_us"] == 0 else None
            self.assertEqual(cpu["limit_us"], want, (dev, cpu))
            for e in evidence:
                self.assertIn(e["verdict"], ("hold", "no-hold", "uncertain"), e)
        if waiters and stray.keys() & waiting:
            log(f"  also held for waiters of this host: cpus {sorted(stray.keys() & waiting)}")
        unexplained = {c: v for c, v in stray.items() if not (waiters and c in waiting)}
        self.assertEqual(unexplained, {}, f"CPUs other than {sorted(may_hold)} constrained "
                                          f"under fio (status showed waiters on {sorted(waiting)})")
        self.assertLessEqual(cpu_values, {"0", "n/a"}, "a limit other than 0 or nothing")
        self.assertIn("n/a", cpu_values, "never held: the first live window holds")
        if status_shows_hold:
            self.assertIn(0, held, "status never showed the hold")
        released = self.wait_value(read_all, self.baseline, 2.0)
        self.assertIsNotNone(released, f"not released 2 s after fio: {read_all()}")
        # A pair takes two windows of ~0.5 s (settle + min_window) after
        # the onset: seconds of QD1 IO count several. None counted means the
        # windows never finished, and there would be nothing to persist.
        pairs = sum(e["pairs"] for e in snapshots[-1][2])
        self.assertEqual(d.stop(), 0)
        self.assertGreater(pairs, 0, f"no window pair counted in {len(snapshots)} status "
                                     f"snapshots while fio ran: the live IO windows never "
                                     f"finished; last: {snapshots[-1][0]['limit_from']}, "
                                     f"evidence {snapshots[-1][2]}")
        self.assertTrue(os.path.exists(evidence_file),
                        f"{pairs} window pairs counted, nothing in {evidence_file}")
        with open(evidence_file) as f:
            learnt = f.read()
        self.assertRegex(learnt, r"(?m)^gap class=\d+ verdict=", learnt)

    def auto_on_cstates_tree(self, config_text, calibration=None, latency_us=100.0,
                             seconds=1.0):
        """latgovd with --sysroot on the cstates tree (CSTATES_TREE) while a
        SimulatedReader reads nvme0n1 (queue 1, cpu 1) at QD1, `latency_us` a
        request. calibration: the text of the test's calibration file
        (None: there is none). The status once the reader's IO was observed
        and ran `seconds` more, still under IO (the device and cpu 1 of it),
        and every value cpu 1's file read meanwhile. latgovd stops with 0,
        the tree's CPUs back as they were and this machine's untouched."""
        root = os.path.join(self.tmp, f"cstates-{len(self.daemons)}")
        os.makedirs(root)
        subprocess.run(["tar", "xzf", CSTATES_TREE, "-C", root], check=True)
        os.makedirs(os.path.join(root, "proc", "sys", "kernel"), exist_ok=True)
        with open(os.path.join(root, "proc", "cpuinfo"), "w") as f:
            f.write(f"processor\t: 0\nmodel name\t: {CSTATES_CPU_MODEL}\n\n"
                    f"processor\t: 1\nmodel name\t: {CSTATES_CPU_MODEL}\n")
        with open(os.path.join(root, "proc", "sys", "kernel", "osrelease"), "w") as f:
            f.write(CSTATES_KERNEL + "\n")
        for dev in os.listdir(os.path.join(root, "sys", "block")):
            with open(os.path.join(root, "sys", "block", dev, "stat"), "w") as f:
                f.write("0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0\n")
        qos = {cpu: os.path.join(root, "sys", "devices", "system", "cpu", f"cpu{cpu}", "power",
                                 "pm_qos_resume_latency_us") for cpu in (0, 1)}

        def tree_values():
            out = {}
            for cpu, path in qos.items():
                with open(path) as f:
                    out[cpu] = f.read().strip()
            return out
        before = tree_values()
        self.assertEqual(before, {0: "20", 1: "0"}, f"not the tree expected: {CSTATES_TREE}")
        if os.path.exists(self.calibration_file):
            os.remove(self.calibration_file)
        if calibration is not None:
            with open(self.calibration_file, "w") as f:
                f.write(calibration)
        reader = SimulatedReader(root, CSTATES_DISK, CSTATES_IRQ, qos[CSTATES_CPU], latency_us,
                                 latency_us)
        self.addCleanup(reader.stop)
        reader.write(inflight=0)  # the fixed-length layout, before latgovd opens the files
        d = self.start_daemon(config_text, events=None, args=("--sysroot", root),
                              runtime_dir=os.path.join(self.tmp, f"run-{len(self.daemons)}"))
        reader.start()

        def observed(st):
            dev = {x["name"]: x for x in st["devices"]}.get(CSTATES_DISK, {})
            return dev.get("observed_latency_us") is not None and 1 in dev["active_queues"]

        self.wait_status(d, observed, f"{CSTATES_DISK} observed and active", timeout=3.0)
        time.sleep(seconds)
        st = self.status(d.runtime_dir)
        reader.stop()
        dev = {x["name"]: x for x in st["devices"]}[CSTATES_DISK]
        cpu = {c["cpu"]: c for c in st["cpus"]}[CSTATES_CPU]
        log(f"  cstates tree, {latency_us} us requests: idle_costs {st['idle_costs']!r}; "
            f"{CSTATES_DISK} limit {dev['limit_us']} from {dev['limit_from']!r}, observed "
            f"{dev['observed_latency_us']} us, active {dev['active_queues']}; cpu {CSTATES_CPU} "
            f"status limit {cpu['limit_us']}, file read {sorted(reader.seen)}")
        self.assertEqual(st["cpuidle_driver"], "acpi_idle", st)
        self.assertEqual(st["cpuidle_governor"], "menu", st)
        self.assertIn(1, dev["active_queues"], f"the status was not taken under IO: {dev}")
        self.assertIsNotNone(self.wait_value(tree_values, before, 2.0),
                             f"the tree's CPUs still held after the IO: {tree_values()}")
        self.assertEqual(d.stop(), 0)
        self.assertEqual(tree_values(), before, "the tree's CPUs were left held")
        self.assertEqual(read_all(), self.baseline, "the machine's own files were written")
        return st, dev, cpu, reader.seen


def foreign_governors():
    """Other latgovd / latgov processes on the machine that write its PM
    QoS files (the bench's own test of a command line): they write the same
    per-CPU slots as the latgovd under test, so what a test reads back is
    no longer latgov's own doing."""
    return pm_qos_writers(SysRoot(), {os.getpid()})
