"""Shared helpers of the host tests (tests/host/test_*.py): the machine's
state read independently of latgov, fio and latgovd processes, and
HostTestCase, the base class that checks the prerequisites of the virtio test
bed (docs/platform.md), starts latgovd instances and puts back every per-CPU value
after each test.

Environment: LATGOVD and LATGOV, the paths of the two binaries (set by ctest).
Optional: LATGOV_TEST_RUNTIME_BASE, where the per-test runtime dirs go
(default /dev/shm: tmpfs, like /run in production).
"""

import glob
import json
import os
import re
import shutil
import signal
import struct
import subprocess
import sys
import tempfile
import time
import unittest


DISK = "vda"
FIO_FILE = "/var/tmp/latgov-host-test-fio.dat"
FIO_SIZE = 256 << 20
CPU_SYS = "/sys/devices/system/cpu"
NO_GLOBAL_LIMIT = 2000000000
EXIT_CONFIG = 78

FIXED_CONFIG = """\
[daemon]
log_level = "debug"
status_interval_ms = 50

[defaults]
mode = "fixed"
limit_us = 0
"""


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


def parse_cpu_list(text):
    cpus = set()
    for part in text.strip().split(","):
        if not part:
            continue
        if "-" in part:
            lo, hi = part.split("-")
            cpus.update(range(int(lo), int(hi) + 1))
        else:
            cpus.add(int(part))
    return cpus


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


def completion_cpus(irq):
    with open(f"/proc/irq/{irq}/effective_affinity_list") as f:
        return parse_cpu_list(f.read())


def disk_devno():
    with open(f"/sys/block/{DISK}/dev") as f:
        major, minor = f.read().strip().split(":")
    return os.makedev(int(major), int(minor))


def cpuidle_driver():
    try:
        with open(f"{CPU_SYS}/cpuidle/current_driver") as f:
            return f.read().strip()
    except FileNotFoundError:
        return "none"


def ensure_fio_file():
    """256 MiB of written data (not unwritten extents, whose reads never
    reach the disk) on the disk under test."""
    st = os.stat(os.path.dirname(FIO_FILE))
    if st.st_dev != disk_devno():
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
    """QD1 4k random reads, io_uring, O_DIRECT, submitted from CPU 0."""

    def __init__(self, seconds):
        self.started = time.monotonic()
        self.proc = subprocess.Popen(
            ["taskset", "-c", "0", "fio", "--thread", "--name=latgov-host-test",
             f"--filename={FIO_FILE}", "--rw=randread", "--bs=4k", "--iodepth=1",
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

    def wait_io_start(self, timeout=5.0):
        """When fio's reads reached the disk (its read_bytes passed 64 KiB)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.read_bytes() >= 64 << 10:
                self.io_started = time.monotonic()
                return self.io_started
            if self.proc.poll() is not None:
                break
            time.sleep(0.001)
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
        """Poll until fio exits. Returns (time of fio's last read progress,
        [(time, read())] at every change of read(), [times the disk's IRQ
        count was seen to grow])."""
        last_bytes, last_io, changes = self.read_bytes(), time.monotonic(), []
        last_irq, irq_times = irq_count(irq), []
        while self.running():
            now = time.monotonic()
            rb = self.read_bytes()
            if rb != last_bytes:
                last_bytes, last_io = rb, now
            n = irq_count(irq)
            if n != last_irq:
                last_irq = n
                irq_times.append(now)
            v = read()
            if not changes or changes[-1][1] != v:
                changes.append((now, v))
            time.sleep(step)
        self.wait()
        return last_io, changes, irq_times

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


class Daemon:
    def __init__(self, latgovd, runtime_dir, config_path, log_path, prefix=()):
        """prefix: a command that execs latgovd (setpriv ... to drop
        capabilities); latgovd's pid is then the process's own."""
        self.runtime_dir = runtime_dir
        self.log_path = log_path
        self.logf = open(log_path, "ab")
        self.proc = subprocess.Popen(
            [*prefix, latgovd, "--config", config_path, "--runtime-dir", runtime_dir],
            stdin=subprocess.DEVNULL, stdout=self.logf, stderr=subprocess.STDOUT)

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
        if shutil.which("fio") is None or shutil.which("taskset") is None:
            problems.append("fio and taskset are needed")
        if not problems:
            try:
                cls.irq, cls.irq_name = disk_irq()
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
        cls.other = next(c for c in cls.cpus if c != cls.comp)
        ensure_fio_file()
        log(f"\n[{cls.suite}] {DISK}: IRQ {cls.irq} ({cls.irq_name}) completes on cpu "
            f"{cls.comp}; other cpu {cls.other}; cpuidle driver {cpuidle_driver()}")

    def setUp(self):
        self.baseline = read_all()
        # The expectations below ("0" = no limit before and after) need a
        # machine nobody has constrained.
        self.assertEqual(set(self.baseline.values()), {"0"},
                         f"per-CPU resume latency limits are not all \"0\" before the "
                         f"test: {self.baseline}")
        self.tmp = tempfile.mkdtemp(prefix="latgov-host-", dir=self.runtime_base)
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
        if self._failed():
            for d in self.daemons:
                try:
                    log(f"--- latgovd log {d.log_path}:\n{d.log()}")
                except OSError:
                    pass
        shutil.rmtree(self.tmp, ignore_errors=True)

    def _failed(self):
        outcome = getattr(self, "_outcome", None)
        result = getattr(outcome, "result", None)
        if result is None:
            return False
        return any(t is self for t, _ in result.failures + result.errors)

    # helpers ---------------------------------------------------------------

    def write_config(self, text, name="latgov.toml"):
        path = os.path.join(self.tmp, name)
        with open(path, "w") as f:
            f.write(text)
        return path

    def start_daemon(self, config_text=FIXED_CONFIG, config_path=None, runtime_dir=None,
                     wait=True, prefix=()):
        if config_path is None:
            config_path = self.write_config(config_text)
        runtime_dir = runtime_dir or os.path.join(self.tmp, "run")
        log_path = os.path.join(self.tmp, f"latgovd-{len(self.daemons)}.log")
        d = Daemon(self.latgovd, runtime_dir, config_path, log_path, prefix)
        self.daemons.append(d)
        if wait:
            d.wait_ready()
        return d

    def start_fio(self, seconds):
        fio = Fio(seconds)
        self.fios.append(fio)
        return fio

    def start_fio_held(self, seconds):
        """Start fio and wait until its IO has started and the completion CPU is held."""
        fio = self.start_fio(seconds)
        fio.wait_io_start()
        self.wait_held(fio)
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

    def wait_held(self, fio, timeout=1.0):
        """After fio's IO started: when the completion CPU read "n/a"."""
        t = self.wait_value(lambda: read_cpu(self.comp), "n/a", timeout)
        self.assertIsNotNone(t, f"cpu {self.comp} not \"n/a\" within {timeout} s of fio's "
                                f"IO start (values {read_all()})")
        return t

    def status(self, runtime_dir):
        out = subprocess.run([self.latgov, "status", "--json", "--runtime-dir", runtime_dir],
                             capture_output=True, text=True, timeout=10)
        self.assertEqual(out.returncode, 0, f"latgov status failed: {out.stderr}")
        return json.loads(out.stdout)

    def assert_released(self, read, free, fio, watched, what):
        """After the last IO, read() must return to `free` within 300 ms
        (linger 3 ms + a tick). watched: what fio.watch_until_exit returned.
        Other IO on vda (other users of the machine) legitimately keeps the
        hold: the delay that counts is the one from the disk's last
        completion interrupt before the release. Prints both delays."""
        last_io, changes, irq_times = watched
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
        log(f"  {what}: released {1000 * from_fio:.1f} ms after fio's last IO, "
            f"{1000 * from_disk:.1f} ms after vda's last completion "
            f"(fio exited {1000 * (fio.ended - last_io):.1f} ms after its last IO)")
        self.assertLessEqual(from_disk, 0.3, f"{what}: released {1000 * from_disk:.1f} ms "
                                             "after the disk's last IO (> 300 ms)")



def foreign_governors():
    """Other latgovd / latgov processes on the machine ("pid comm args"):
    they write the same per-CPU slots as the latgovd under test, so what a
    test reads back is no longer latgov's own doing."""
    found = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit() or int(pid) == os.getpid():
            continue
        try:
            with open(f"/proc/{pid}/comm") as f:
                comm = f.read().strip()
            if comm not in ("latgovd", "latgov"):
                continue
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                args = f.read().replace(b"\0", b" ").decode(errors="replace").strip()
        except OSError:
            continue
        found.append(f"{pid} {args}")
    return found
