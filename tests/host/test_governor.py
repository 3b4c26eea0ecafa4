"""Host tests of latgovd holding per-CPU / global PM QoS limits for real IO.

Runs on the virtio test bed (PLATFORM.md): vda with one queue whose IRQ is
virtio<N>-req.0, 2 CPUs, as root. Everything the tests need must be there:
a missing prerequisite FAILS, it never skips.

Environment: LATGOVD and LATGOV, the paths of the two binaries (set by ctest).
Optional: LATGOV_TEST_RUNTIME_BASE, where the per-test runtime dirs go
(default /dev/shm: tmpfs, like /run in production; see test_01b for why a
runtime dir on the governed disk matters).

Each test starts its own latgovd with its own runtime dir and config, kills
it in tearDown and puts back every per-CPU value it found in setUp.
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

GLOBAL_CONFIG = """\
[daemon]
log_level = "debug"
status_interval_ms = 50

[defaults]
mode = "fixed"
backend = "global"
limit_us = 0
"""

DRY_RUN_CONFIG = """\
[daemon]
log_level = "debug"
status_interval_ms = 50

[defaults]
mode = "fixed"
backend = "dry-run"
limit_us = 0
"""

# An unknown key on line 6.
BAD_CONFIG = """\
[daemon]
log_level = "info"

[defaults]
mode = "fixed"
no_such_key = 1
"""
BAD_CONFIG_LINE = 6


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
    def __init__(self, latgovd, runtime_dir, config_path, log_path):
        self.runtime_dir = runtime_dir
        self.log_path = log_path
        self.logf = open(log_path, "ab")
        self.proc = subprocess.Popen(
            [latgovd, "--config", config_path, "--runtime-dir", runtime_dir],
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

class GovernorTest(unittest.TestCase):
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
            raise AssertionError("host.governor prerequisites missing:\n  " +
                                 "\n  ".join(problems))
        cls.cpus = all_cpus()
        comp = completion_cpus(cls.irq)
        if len(comp) != 1 or len(cls.cpus) < 2:
            raise AssertionError(f"expected one completion CPU for IRQ {cls.irq} and "
                                 f">= 2 CPUs, got {comp} of {cls.cpus}")
        cls.comp = comp.pop()
        cls.other = next(c for c in cls.cpus if c != cls.comp)
        ensure_fio_file()
        log(f"\n[host.governor] {DISK}: IRQ {cls.irq} ({cls.irq_name}) completes on cpu "
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
                     wait=True):
        if config_path is None:
            config_path = self.write_config(config_text)
        runtime_dir = runtime_dir or os.path.join(self.tmp, "run")
        log_path = os.path.join(self.tmp, f"latgovd-{len(self.daemons)}.log")
        d = Daemon(self.latgovd, runtime_dir, config_path, log_path)
        self.daemons.append(d)
        if wait:
            d.wait_ready()
        return d

    def start_fio(self, seconds):
        fio = Fio(seconds)
        self.fios.append(fio)
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

    def idle_samples(self, seconds=2.0, period=0.05):
        samples = []
        t0 = time.monotonic()
        for i in range(int(round(seconds / period))):
            samples.append(read_all())
            next_t = t0 + (i + 1) * period
            time.sleep(max(0.0, next_t - time.monotonic()))
        return samples

    def assert_idle_quiet(self, samples):
        constrained = sum(1 for s in samples if s[self.comp] != "0")
        other = [s[self.other] for s in samples if s[self.other] != "0"]
        log(f"  idle: cpu {self.comp} constrained in {constrained}/{len(samples)} samples")
        self.assertEqual(other, [], f"non-completion cpu {self.other} was constrained")
        self.assertLessEqual(constrained, len(samples) // 10,
                             f"completion cpu {self.comp} constrained in {constrained} of "
                             f"{len(samples)} idle samples (> 10%)")

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

    def kill9_while_holding(self, config_text=FIXED_CONFIG, attempts=5):
        """Start latgovd and fio, SIGKILL latgovd while it holds the completion
        CPU. Returns the dead daemon's runtime dir."""
        for attempt in range(attempts):
            runtime = os.path.join(self.tmp, f"run-kill-{attempt}")
            d = self.start_daemon(config_text, runtime_dir=runtime)
            fio = self.start_fio(3)
            fio.wait_io_start()
            self.wait_held(fio)
            d.proc.kill()
            d.proc.wait()
            fio.kill()
            value = read_cpu(self.comp)
            cpus = journal_cpus(d.journal)
            if value == "n/a":
                self.assertEqual(cpus, [self.comp],
                                 f"cpu {self.comp} left \"n/a\" but the journal lists {cpus}")
                return d
            # Released just before the kill (an IO stall): consistent, retry.
            self.assertIsNone(cpus, f"value \"{value}\" but journal lists {cpus}")
            log(f"  kill -9 attempt {attempt}: not holding at the kill, retrying")
        self.fail(f"could not kill latgovd while holding in {attempts} attempts")

    # tests -------------------------------------------------------------------

    def test_01_idle(self):
        """No IO of ours: the completion CPU is (almost) never constrained, the
        other CPU never."""
        self.start_daemon()
        time.sleep(0.2)
        self.assert_idle_quiet(self.idle_samples())

    def test_01b_idle_runtime_dir_on_governed_disk(self):
        """Same as test_01 with the runtime dir (status.json, journal) on vda
        itself, as /run is on this test bed: latgovd's own bookkeeping IO must
        not keep the device it governs 'active'. (ext4 flushes a file
        replaced by truncate or rename at once, so every status.json rewrite
        is a real write to vda.)"""
        ondisk = tempfile.mkdtemp(prefix="latgov-host-rt-", dir="/var/tmp")
        try:
            self.assertEqual(os.stat(ondisk).st_dev, disk_devno())
            d = self.start_daemon(runtime_dir=os.path.join(ondisk, "run"))
            time.sleep(0.2)
            # Finer samples than test_01: a periodic pattern cannot alias.
            before = d.log().count("-> 0 us")
            samples = self.idle_samples(2.0, 0.005)
            holds = d.log().count("-> 0 us") - before
            log(f"  latgovd took a hold {holds} times in 2 s")
            # Occasional background IO may take a hold now and then; a hold
            # every idle tick is latgovd feeding on its own writes.
            self.assertLessEqual(holds, 5, f"latgovd took a hold {holds} times in 2 s "
                                           "with no IO of ours")
            self.assert_idle_quiet(samples)
        finally:
            for d in self.daemons:
                d.kill()
            shutil.rmtree(ondisk, ignore_errors=True)

    def test_02_hold_under_fio(self):
        d = self.start_daemon()
        fio = self.start_fio(3)
        io_start = fio.wait_io_start()
        held = self.wait_held(fio)
        other = read_cpu(self.other)
        log(f"  hold appeared {1000 * (held - io_start):.1f} ms after fio's IO start "
            f"({1000 * (held - fio.started):.1f} ms after fio was launched)")
        self.assertEqual(other, "0", f"non-completion cpu {self.other} is {other!r}")

        # status.json is rewritten on changes; an IO stall may release for a
        # moment: poll until it shows the hold (fio runs for 3 s).
        deadline = time.monotonic() + 2.0
        while True:
            st = self.status(d.runtime_dir)
            cpus = {c["cpu"]: c for c in st["cpus"]}
            if cpus.get(self.comp, {}).get("limit_us") == 0 or time.monotonic() > deadline:
                break
            time.sleep(0.02)
        self.assertTrue(fio.running(), "fio ended before status showed the hold")
        self.assertIn(self.comp, cpus, st)
        self.assertEqual(cpus[self.comp]["limit_us"], 0, st)
        self.assertEqual([{"device": h.get("device"), "queue": h.get("queue")}
                          for h in cpus[self.comp]["held_for"]],
                         [{"device": DISK, "queue": 0}], st)
        self.assertIn(self.other, cpus, st)
        self.assertIsNone(cpus[self.other]["limit_us"], st)
        self.assertEqual(cpus[self.other]["held_for"], [], st)
        self.assertIn(DISK, [dev["name"] for dev in st["devices"]], st)
        fio.wait()

    def test_03_release_after_fio(self):
        self.start_daemon()
        fio = self.start_fio(2)
        fio.wait_io_start()
        self.wait_held(fio)
        watched = fio.watch_until_exit(lambda: read_cpu(self.comp), self.irq)
        self.assert_released(lambda: read_cpu(self.comp), "0", fio, watched,
                             f"cpu {self.comp}")
        self.assertEqual(read_cpu(self.other), "0")

    def test_04_sigterm_while_holding(self):
        d = self.start_daemon()
        fio = self.start_fio(3)
        fio.wait_io_start()
        self.wait_held(fio)
        self.assertIsNotNone(self.wait_value(lambda: journal_cpus(d.journal), [self.comp], 1.0),
                             "no journal listing the held CPU while holding")
        rc = d.stop(signal.SIGTERM)
        self.assertEqual(rc, 0, d.log())
        after = read_all()
        fio.kill()
        self.assertEqual(after, self.baseline, "values after SIGTERM differ from before")
        self.assertFalse(os.path.exists(d.journal), "journal left after SIGTERM")
        self.assertFalse(os.path.exists(d.status_path), "status.json left after SIGTERM")

    def test_05_global_backend(self):
        self.assertEqual(read_global(), NO_GLOBAL_LIMIT, "a global limit is already held")
        self.start_daemon(GLOBAL_CONFIG)
        fio = self.start_fio(2)
        io_start = fio.wait_io_start()
        held = self.wait_value(read_global, 0, 1.0)
        self.assertIsNotNone(held, f"/dev/cpu_dma_latency not 0 within 1 s of fio's IO "
                                   f"start (reads {read_global()})")
        log(f"  global 0 appeared {1000 * (held - io_start):.1f} ms after fio's IO start")
        percpu_changed = []

        def sample():
            values = read_all()
            if values != self.baseline:
                percpu_changed.append(values)
            return read_global()

        watched = fio.watch_until_exit(sample, self.irq, step=0.002)
        self.assertEqual(percpu_changed, [], "per-CPU files changed with backend global")
        self.assert_released(read_global, NO_GLOBAL_LIMIT, fio, watched,
                             "/dev/cpu_dma_latency")
        self.assertEqual(read_all(), self.baseline)

    def test_06a_kill9_then_restore(self):
        d = self.kill9_while_holding()
        self.assertEqual(read_cpu(self.comp), "n/a")
        self.assertTrue(os.path.exists(d.journal))
        out = subprocess.run([self.latgovd, "--restore", "--runtime-dir", d.runtime_dir],
                             capture_output=True, text=True, timeout=10)
        self.assertEqual(out.returncode, 0, out.stderr)
        self.assertEqual(read_cpu(self.comp), "0", out.stderr)
        self.assertFalse(os.path.exists(d.journal), "journal left after --restore")

    def test_06b_kill9_then_restart(self):
        dead = self.kill9_while_holding()
        self.assertEqual(read_cpu(self.comp), "n/a")
        d = self.start_daemon(runtime_dir=dead.runtime_dir, wait=False)
        d.wait_log(rf"cpu {self.comp}: restored \S+ from journal")
        value = read_cpu(self.comp)
        d.wait_ready()
        if value != "0":
            # IO arrived right after the restore and it holds again: what it
            # journaled as the original must be the real one, "0".
            with open(d.journal) as f:
                text = f.read()
            self.assertRegex(text, rf"(?m)^cpu {self.comp} original 0 written ",
                             f"after restart cpu {self.comp} is {value!r}, journal:\n{text}")
        log(f"  right after the restore cpu {self.comp} read {value!r}")
        self.assertEqual(d.stop(), 0)
        self.assertEqual(read_all(), self.baseline)
        self.assertFalse(os.path.exists(d.journal))

    def test_07a_external_looser_values(self):
        write_cpu(self.other, "20")
        write_cpu(self.comp, "500")
        d = self.start_daemon()
        fio = self.start_fio(2)
        fio.wait_io_start()
        self.wait_held(fio)
        self.assertEqual(read_cpu(self.other), "20")
        others = set()
        while fio.running():
            others.add(read_cpu(self.other))
            time.sleep(0.005)
        fio.wait()
        self.assertEqual(others, {"20"})
        self.assertEqual(d.stop(), 0)
        self.assertEqual(read_cpu(self.comp), "500")
        self.assertEqual(read_cpu(self.other), "20")

    def test_07b_external_stricter_value_left_alone(self):
        write_cpu(self.comp, "n/a")  # someone else: 0 us, as strict as latgov's
        d = self.start_daemon()
        fio = self.start_fio(2)
        fio.wait_io_start()
        seen_values = set()
        journals = []
        while fio.running():
            seen_values.add(read_cpu(self.comp))
            cpus = journal_cpus(d.journal)
            if cpus is not None:
                journals.append(cpus)
            time.sleep(0.002)
        fio.wait()
        time.sleep(0.1)
        self.assertEqual(d.stop(), 0)
        self.assertEqual(seen_values, {"n/a"})
        self.assertFalse(any(self.comp in j for j in journals),
                         f"latgov journaled cpu {self.comp} it never needed to write: "
                         f"{journals[:5]}")
        self.assertEqual(read_cpu(self.comp), "n/a")

    def test_07c_external_change_while_held(self):
        d = self.start_daemon()
        fio = self.start_fio(3)
        fio.wait_io_start()
        self.wait_held(fio)
        time.sleep(0.2)
        self.wait_held(fio)
        write_cpu(self.comp, "7")
        changed = time.monotonic()
        values = set()
        while fio.running():
            values.add(read_cpu(self.comp))
            time.sleep(0.002)
        fio.wait()
        log(f"  fio ran {time.monotonic() - changed:.2f} s after the external write")
        time.sleep(0.1)
        self.assertEqual(values, {"7"}, "latgov fought the external value")
        self.assertRegex(d.log(), rf"cpu {self.comp}: .*changed to 7 .*by someone else")
        self.assertEqual(read_cpu(self.comp), "7", "clobbered after fio")
        self.assertEqual(d.stop(), 0)
        self.assertEqual(read_cpu(self.comp), "7", "clobbered by SIGTERM")
        self.assertFalse(os.path.exists(d.journal))

    def test_08_embedded_default_policy(self):
        missing = os.path.join(self.tmp, "does-not-exist", "latgov.toml")
        d = self.start_daemon(config_path=missing)
        driver = cpuidle_driver()
        fio = self.start_fio(2)
        fio.wait_io_start()
        seen = []
        while fio.running():
            seen.append(read_all())
            time.sleep(0.005)
        fio.wait()
        st = self.status(d.runtime_dir)
        devices = {dev["name"]: dev for dev in st["devices"]}
        self.assertIn(DISK, devices, st)
        self.assertEqual(devices[DISK]["mode"], "auto", st)
        changed = [s for s in seen if s != self.baseline]
        log(f"  cpuidle driver {driver}: {len(changed)}/{len(seen)} samples constrained")
        if driver == "none":
            self.assertEqual(changed, [], "auto policy held something with no cpuidle "
                                          "driver")
        else:
            self.assertTrue(any(s[self.comp] != "0" for s in seen),
                            f"auto policy held nothing on cpu {self.comp} (driver {driver})")

    def test_09_bad_config(self):
        bad = self.write_config(BAD_CONFIG, "bad.toml")
        good = self.write_config(FIXED_CONFIG, "good.toml")
        out = subprocess.run([self.latgovd, "--config", bad, "--runtime-dir",
                              os.path.join(self.tmp, "run")],
                             capture_output=True, text=True, timeout=10)
        self.assertEqual(out.returncode, EXIT_CONFIG, out.stdout + out.stderr)
        text = out.stdout + out.stderr
        self.assertRegex(text, re.escape(bad) + rf":{BAD_CONFIG_LINE}:\d+")
        self.assertIn("no_such_key", text)
        check = subprocess.run([self.latgovd, "--check-config", "--config", bad],
                               capture_output=True, text=True, timeout=10)
        self.assertEqual(check.returncode, 1, check.stdout + check.stderr)
        self.assertRegex(check.stdout + check.stderr, re.escape(bad) + rf":{BAD_CONFIG_LINE}:\d+")
        check = subprocess.run([self.latgovd, "--check-config", "--config", good],
                               capture_output=True, text=True, timeout=10)
        self.assertEqual(check.returncode, 0, check.stdout + check.stderr)

    def test_10_sighup_reload(self):
        d = self.start_daemon()
        config = os.path.join(self.tmp, "latgov.toml")
        with open(config, "w") as f:
            f.write(DRY_RUN_CONFIG)
        d.send(signal.SIGHUP)
        d.wait_log(r"configuration reloaded")
        fio = self.start_fio(2)
        fio.wait_io_start()
        seen = []
        while fio.running():
            seen.append(read_all())
            time.sleep(0.005)
        fio.wait()
        time.sleep(0.1)
        self.assertEqual([s for s in seen if s != self.baseline], [],
                         "per-CPU values written after reload to dry-run")
        self.assertFalse(os.path.exists(d.journal))
        self.assertRegex(d.log(), rf"dry-run: cpu {self.comp} would go")

        with open(config, "w") as f:
            f.write(BAD_CONFIG)
        before = len(d.log())
        d.send(signal.SIGHUP)
        d.wait_log(r"keeping the running one")
        time.sleep(0.2)
        self.assertTrue(d.alive(), f"latgovd died on a bad reload:\n{d.log()}")
        self.assertIn("no_such_key", d.log()[before:])
        self.assertEqual(d.stop(), 0)


if __name__ == "__main__":
    unittest.main(verbosity=2)
