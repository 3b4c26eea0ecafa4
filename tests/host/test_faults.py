"""Host fault tests: latgovd killed at random moments while it changes
limits, a second writer of the same PM QoS files, --dry-run, attacks on the
runtime directory, a device it cannot read, auto mode's learning on a
simulated device, and the onset delay after idle.

Runs on the virtio test bed (vda, one queue, as root), with nothing else
using its disk or PM QoS files; a missing prerequisite FAILS, it never skips. Helpers: hostlib.py.

Environment: LATGOVD, LATGOV (set by ctest). Optional: LATGOV_SOAK_KILLS,
the kills per backend of the soak (default 25: 50 in all).
"""

import fcntl
import glob
import json
import os
import re
import random
import shutil
import signal
import socket
import subprocess
import threading
import time

from hostlib import (
    DISK, EXIT_CONFIG, FIO_FILE, FIO_SIZE, NO_GLOBAL_LIMIT, HostTestCase, cpu_knob, log, read_all, read_cpu,
    read_global,
    NotifySocket, PerfCounters, SimulatedReader, ensure_tracefs, write_cpu,
)
from test_onset import DirectReader

CONFIG = """\
[daemon]
log_level = "info"
status_interval_ms = 20

[defaults]
mode = "fixed"
backend = "{backend}"
limit_us = {limit}
"""

# A fixed limit, and a queue kept active by the requests its debugfs tags
# say are in flight (set_requests_in_flight): no file is rewritten while
# they are, so no sample reads one half written.
INFLIGHT_CONFIG = CONFIG.format(backend="percpu", limit=0).replace(
    "[daemon]\n", "[daemon]\nqueue_inflight = true\n")

# Malformed configurations: (name, text, the line and column, and a word the
# error must name). Each must stop a start with exit 78, fail --check-config
# with 1, and leave a running daemon on its configuration after SIGHUP.
MALFORMED = [
    ("syntax", b'[defaults]\nmode = "fixed"\nlimit_us = \n', 3, 1, "syntax error"),
    ("unknown key", b'[defaults]\nno_such_key = 1\n', 2, 15, "no_such_key"),
    ("unknown table", b'[daemon]\nstatus_interval_ms = 50\n[bogus]\nx = 1\n', 3, 1, "bogus"),
    ("wrong type", b'[defaults]\nlimit_us = "ten"\n', 2, 12, "limit_us"),
    ("out of range", b'[defaults]\nlimit_us = -5\n', 2, 12, "limit_us"),
    ("unknown enum", b'[defaults]\nmode = "sometimes"\n', 2, 8, "mode"),
    ("device without matcher", b'[[device]]\nlimit_us = 5\n', 1, 1, "[[device]]"),
    ("max below min", b'[defaults]\nmin_limit_us = 50\nmax_limit_us = 10\n', 3, 16,
     "max_limit_us"),
    ("not UTF-8", b'[defaults]\nmode = "fi\xffxed"\n', 2, 11, "UTF-8"),
]

# /sys/block/<disk>/stat with `inflight` requests in flight (its ninth field).
BLOCK_STAT = "1 0 8 0 0 0 0 0 {inflight} 0 0 0 0 0 0 0 0\n"


def write_proc_stat(root, vda_interrupts):
    """The /proc/stat of a tree of 2 CPUs, with IRQ 36 (vda's queue in
    the host-haltpoll tree) at the count given."""
    irqs = [0] * 64
    irqs[36] = vda_interrupts
    text = ("cpu  1 0 1 100 0 0 0 0 0 0\n"
            "cpu0 1 0 1 50 0 0 0 0 0 0\ncpu1 0 0 0 50 0 0 0 0 0 0\n"
            f"intr {sum(irqs)} " + " ".join(str(n) for n in irqs) + "\n")
    path = os.path.join(root, "proc", "stat")
    # At the same length (a count of as many digits), in place: latgovd,
    # which may read it at any moment, never finds it truncated.
    try:
        with open(path, "r+") as f:
            if len(f.read()) == len(text):
                f.seek(0)
                f.write(text)
                return
    except FileNotFoundError:
        pass
    with open(path, "w") as f:
        f.write(text)

# What someone else writes to a CPU: no value latgov ever writes here.
THEIRS = "77"


def latgovd_cpu_seconds(pid):
    """User and system CPU time of a process, in seconds."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def bursty_fio(seconds, cpu):
    """QD1 4k reads with 5 ms think time, submitted from `cpu`: longer than
    linger_ms (3), so the completion CPU is held and released every few ms."""
    return subprocess.Popen(
        ["taskset", "-c", str(cpu), "fio", "--thread", "--name=latgov-faults",
         f"--filename={FIO_FILE}", "--rw=randread", "--bs=4k", "--iodepth=1",
         "--ioengine=psync", "--direct=1", "--thinktime=5000", "--thinktime_blocks=1",
         f"--runtime={seconds}", "--time_based", "--output=/dev/null"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def onset_syscalls_us(cpus, rounds, gap_s=0.03):
    """The system calls latgovd cannot avoid at an onset on `cpus`, timed
    here: per round, after `gap_s` of sleep (the idle gap of the onsets), a
    read of each CPU's PM QoS file and a write back of what it holds
    (latgovd reads a file before it writes it, to see another writer's
    value). What this machine's system calls cost now, in us per round,
    Python's own few us per call included."""
    fds = [os.open(cpu_knob(cpu), os.O_RDWR) for cpu in cpus]
    rounds_us = []
    try:
        for _ in range(rounds):
            time.sleep(gap_s)
            start = time.perf_counter_ns()
            for fd in fds:
                os.pwrite(fd, os.pread(fd, 32, 0).strip(), 0)
            rounds_us.append((time.perf_counter_ns() - start) / 1000)
    finally:
        for fd in fds:
            os.close(fd)
    return rounds_us


def sighup_blocked(pid):
    """Whether SIGHUP is in the process's blocked mask (its main thread)."""
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("SigBlk:"):
                    return bool(int(line.split()[1], 16) & (1 << (signal.SIGHUP - 1)))
    except OSError:
        pass
    return False


class FaultTest(HostTestCase):
    suite = "host.faults"

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        ensure_tracefs()

    def run_cmd(self, *args, timeout=20):
        return subprocess.run(list(args), capture_output=True, text=True, timeout=timeout)

    def config(self, backend="percpu", limit=0, name="latgov.toml"):
        return self.write_config(CONFIG.format(backend=backend, limit=limit), name)

    def full_runtime_dir(self, chunk=4096):
        """A runtime directory on a tmpfs of 8k that a file fills (unmounted
        at cleanup): nothing can be journaled there, so nothing is held.
        Returns the directory and the filler, whose removal makes room."""
        mnt = os.path.join(self.tmp, "full")
        os.mkdir(mnt)
        out = self.run_cmd("mount", "-t", "tmpfs", "-o", "size=8k,mode=0755", "latgov-full", mnt)
        self.assertEqual(out.returncode, 0, f"mount tmpfs: {out.stderr}")

        def unmount():  # after tearDown, which kills the daemons and empties the rest
            out = self.run_cmd("umount", mnt)
            if out.returncode != 0:  # busy: detached, gone once its last user is
                log(f"  umount {mnt}: {out.stderr.strip()}; detaching it")
                self.run_cmd("umount", "-l", mnt)
            shutil.rmtree(self.tmp, ignore_errors=True)
        self.addCleanup(unmount)
        run = os.path.join(mnt, "run")
        os.mkdir(run, 0o711)
        filler = os.path.join(mnt, "filler")
        try:
            with open(filler, "wb") as f:
                while True:
                    f.write(b"x" * chunk)
                    f.flush()
        except OSError:
            pass  # full
        return run, filler

    def assert_back(self, expected, what):
        values = read_all()
        self.assertEqual(values, expected, f"{what}: per-CPU values {values}, want {expected}")
        self.assertEqual(read_global(), NO_GLOBAL_LIMIT,
                         f"{what}: /dev/cpu_dma_latency still constrained")

    # -------------------------------------------------------------------------

    def soak(self, backend, kills):
        """latgovd under bursty IO, its limit moved by SIGHUP between 0 and 5
        us, killed (SIGKILL) at a random moment; then restarted and stopped,
        or `latgovd --restore`. Every value must be back; a value someone
        else wrote while it was held must still be theirs."""
        rng = random.Random(f"soak-{backend}")
        runtime = os.path.join(self.tmp, f"run-{backend}")
        fio = bursty_fio(10 + kills * 3, self.submit_cpu)
        outcomes = {"restart": 0, "restore": 0, "theirs kept": 0, "held at kill": 0}
        try:
            for i in range(kills):
                config = self.config(backend, 0, "soak.toml")
                d = self.start_daemon(config_path=config, runtime_dir=runtime)
                theirs = i % 5 == 4 and backend == "percpu"
                deadline = time.monotonic() + rng.uniform(0.05, 0.6)
                moved = False
                while time.monotonic() < deadline:
                    if not moved and rng.random() < 0.02:
                        # A move between two held limits, at a random time.
                        self.config(backend, 5, "soak.toml")
                        d.send(signal.SIGHUP)
                        moved = True
                    if theirs and read_cpu(self.comp) not in ("0", THEIRS):
                        write_cpu(self.comp, THEIRS)
                    time.sleep(rng.uniform(0, 0.004))
                # The kernel drops the global request with the process: look
                # just before the kill.
                held = read_cpu(self.comp) != "0" or read_global() != NO_GLOBAL_LIMIT
                d.proc.kill()
                d.proc.wait()
                d.logf.close()
                if held:
                    outcomes["held at kill"] += 1
                expected = dict(self.baseline)
                if theirs and read_cpu(self.comp) == THEIRS:
                    expected[self.comp] = THEIRS
                    outcomes["theirs kept"] += 1
                if i % 2 == 0:
                    out = self.run_cmd(self.latgovd, "--restore", "--runtime-dir", runtime)
                    self.assertEqual(out.returncode, 0, f"kill {i}: --restore: {out.stderr}")
                    outcomes["restore"] += 1
                    if expected[self.comp] == THEIRS:
                        self.assert_back(expected, f"kill {i} then --restore")
                        write_cpu(self.comp, "0")
                        continue
                else:
                    outcomes["restart"] += 1
                    # The restart restores first; it may then hold again
                    # (over a looser value of someone else's too), and puts
                    # their value back when stopped.
                    r = self.start_daemon(config_path=config, runtime_dir=runtime)
                    self.assertEqual(r.stop(), 0)
                self.assert_back(expected, f"kill {i} then {'--restore' if i % 2 == 0 else 'restart'}")
                self.assertFalse(os.path.exists(os.path.join(runtime, "journal")),
                                 f"kill {i}: journal left after a complete restore")
                if expected[self.comp] == THEIRS:
                    write_cpu(self.comp, "0")
        finally:
            fio.kill()
            fio.wait()
        log(f"  soak {backend}: {kills} kills, {outcomes}")
        # The kills must have landed while limits were held, not only idle.
        self.assertGreater(outcomes["held at kill"], kills // 4, outcomes)
        # And someone else's value must have been there to keep.
        if backend == "percpu" and kills >= 5:
            self.assertGreater(outcomes["theirs kept"], 0, outcomes)
        return outcomes

    def test_01_kill9_soak_percpu(self):
        self.soak("percpu", int(os.environ.get("LATGOV_SOAK_KILLS", "25")))

    def test_02_kill9_soak_global(self):
        self.soak("global", int(os.environ.get("LATGOV_SOAK_KILLS", "25")))

    # -------------------------------------------------------------------------

    def test_03_one_writer_at_a_time(self):
        """While latgovd runs, a second latgovd, `latgovd --restore` and
        `latgov calibrate` on the same runtime directory refuse to start, and
        the first keeps governing."""
        d = self.start_daemon(config_path=self.config())
        fio = bursty_fio(4, self.submit_cpu)
        try:
            self.assertIsNotNone(self.wait_value(lambda: read_cpu(self.comp), "n/a", 2.0),
                                 "not held under IO")
            second = self.run_cmd(self.latgovd, "--config", self.config(), "--runtime-dir",
                                  d.runtime_dir)
            self.assertEqual(second.returncode, 1, second.stderr)
            self.assertIn("another latgovd", second.stderr)
            restore = self.run_cmd(self.latgovd, "--restore", "--runtime-dir", d.runtime_dir)
            self.assertEqual(restore.returncode, 1, restore.stderr)
            self.assertIn("another latgovd", restore.stderr)
            cal = self.run_cmd(self.latgov, "calibrate", "--file", FIO_FILE, "--rounds", "1",
                               "--ios", "10", "--output", os.path.join(self.tmp, "cal.toml"),
                               "--runtime-dir", d.runtime_dir)
            self.assertNotEqual(cal.returncode, 0, cal.stdout)
            self.assertIn("stop latgovd first", cal.stderr)
            self.assertFalse(os.path.exists(os.path.join(self.tmp, "cal.toml")))
            # Still governing: held again on the next burst, journal in place.
            self.assertIsNotNone(self.wait_value(lambda: read_cpu(self.comp), "n/a", 2.0),
                                 "the first latgovd stopped governing")
            self.assertTrue(os.path.exists(d.journal))
            self.assertNotIn("someone else", d.log())
        finally:
            fio.kill()
            fio.wait()
        self.assertEqual(d.stop(), 0)
        self.assert_back(self.baseline, "after stop")

    def test_03b_other_runtime_dirs_share_one_cpu_lock(self):
        """A writer with another runtime directory is refused while latgovd
        runs, also from a service's own sysfs instance (PrivateNetwork= in
        a recent systemd mounts one, whose inodes and flocks are not the
        host's); and no other user can take either lock to keep latgovd or
        its restore out."""
        d = self.start_daemon(config_path=self.config())
        other = os.path.join(self.tmp, "other-run")
        os.mkdir(other, 0o755)  # there: --restore locks it
        plain = self.run_cmd(self.latgovd, "--restore", "--runtime-dir", other)
        self.assertEqual(plain.returncode, 1, plain.stderr)
        self.assertIn("Failed to lock /dev/cpu_dma_latency", plain.stderr)
        self.assertIn(f"(pid {d.proc.pid})", plain.stderr)
        own_sysfs = ["unshare", "--mount", "--net", "--", "sh", "-c",
                     'mount -t sysfs sysfs /sys && exec "$0" "$@"']
        cpus = os.stat("/sys/devices/system/cpu")
        seen = self.run_cmd(*own_sysfs, "stat", "-c", "%d:%i", "/sys/devices/system/cpu")
        self.assertEqual(seen.returncode, 0, seen.stderr)
        self.assertNotEqual(seen.stdout.strip(), f"{cpus.st_dev}:{cpus.st_ino}",
                            "a new network namespace's sysfs is the host's instance here: "
                            "the case this test is about cannot be made")
        inside = self.run_cmd(*own_sysfs, self.latgovd, "--restore", "--runtime-dir", other)
        self.assertEqual(inside.returncode, 1, inside.stderr)
        self.assertIn("Failed to lock /dev/cpu_dma_latency", inside.stderr)
        self.assertEqual(d.stop(), 0)
        # Another user: the CPUs' sysfs directory is theirs to flock, the
        # runtime directory (readable by name only) and the node are not.
        os.chmod(self.tmp, 0o755)
        nobody = ["setpriv", "--reuid", "65534", "--regid", "65534", "--clear-groups"]
        for path in ("/sys/devices/system/cpu", d.runtime_dir, "/dev/cpu_dma_latency"):
            with self.subTest(path=path):
                held = subprocess.Popen(nobody + ["flock", "-n", path, "sleep", "30"],
                                        stderr=subprocess.PIPE, text=True)
                try:
                    time.sleep(0.3)
                    locked = held.poll() is None
                    self.assertEqual(locked, path == "/sys/devices/system/cpu",
                                     f"another user's flock on {path}: "
                                     f"{'held' if locked else held.stderr.read()}")
                    restore = self.run_cmd(self.latgovd, "--restore", "--runtime-dir",
                                           d.runtime_dir)
                    self.assertEqual(restore.returncode, 0, restore.stderr)
                finally:
                    held.kill()
                    held.communicate()
        self.assert_back(self.baseline, "after stop")

    def test_04_dry_run_changes_nothing(self):
        """--dry-run next to what a killed latgovd left: no restore, no
        journal or status write, no PM QoS write."""
        d = self.start_daemon(config_path=self.config())
        fio = bursty_fio(3, self.submit_cpu)
        try:
            self.assertIsNotNone(self.wait_value(lambda: read_cpu(self.comp), "n/a", 2.0))
            d.proc.kill()
            d.proc.wait()
        finally:
            fio.kill()
            fio.wait()
        left = read_all()
        names = sorted(os.listdir(d.runtime_dir))
        with open(d.journal) as f:
            journal = f.read()
        # Started again with --dry-run (hostlib's Daemon has no such option).
        log_path = os.path.join(self.tmp, "dry.log")
        with open(log_path, "wb") as logf:
            p = subprocess.Popen([self.latgovd, "--dry-run", "--config", self.config(),
                                  "--runtime-dir", d.runtime_dir],
                                 stdout=logf, stderr=subprocess.STDOUT)
            try:
                deadline = time.monotonic() + 5
                while time.monotonic() < deadline:
                    with open(log_path) as f:
                        if "latgovd ready" in f.read():
                            break
                    time.sleep(0.01)
                fio = bursty_fio(1, self.submit_cpu)
                fio.wait()
            finally:
                p.send_signal(signal.SIGTERM)
                self.assertEqual(p.wait(5), 0)
        with open(log_path) as f:
            text = f.read()
        self.assertIn("latgovd ready", text)
        # It saw the IO, and would have held: what it did not write counts.
        self.assertRegex(text, rf"dry-run: cpu {self.comp} would go ", text[-3000:])
        self.assertEqual(read_all(), left, f"--dry-run changed a CPU:\n{text}")
        self.assertEqual(sorted(os.listdir(d.runtime_dir)), names, text)
        with open(d.journal) as f:
            self.assertEqual(f.read(), journal, "--dry-run rewrote the journal")
        out = self.run_cmd(self.latgovd, "--restore", "--runtime-dir", d.runtime_dir)
        self.assertEqual(out.returncode, 0, out.stderr)
        self.assert_back(self.baseline, "after --restore")

    # -------------------------------------------------------------------------

    def test_05_runtime_dir_of_another_user_is_refused(self):
        runtime = os.path.join(self.tmp, "run-foreign")
        os.mkdir(runtime, 0o700)
        os.chown(runtime, 65534, 65534)
        with open(os.path.join(runtime, "journal"), "w") as f:
            # A forged journal: would pin cpu comp to poll-only on "restore".
            f.write(f"cpu {self.comp} original n/a written 0\n")
        os.chown(os.path.join(runtime, "journal"), 65534, 65534)
        for args in (["--config", self.config(), "--runtime-dir", runtime],
                     ["--restore", "--runtime-dir", runtime]):
            out = self.run_cmd(self.latgovd, *args)
            self.assertEqual(out.returncode, 1, out.stderr)
            self.assertIn("someone else created it", out.stderr)
        self.assert_back(self.baseline, "after refusing")

    def test_06_symlinked_status_and_temp_files_are_not_followed(self):
        runtime = os.path.join(self.tmp, "run")
        os.mkdir(runtime, 0o755)
        victim = os.path.join(self.tmp, "victim")
        with open(victim, "w") as f:
            f.write("precious\n")
        for name in ("status.json", "status.json.tmp", "journal.tmp"):
            os.symlink(victim, os.path.join(runtime, name))
        d = self.start_daemon(config_path=self.config(), runtime_dir=runtime)
        fio = bursty_fio(1, self.submit_cpu)
        fio.wait()
        self.assertEqual(d.stop(), 0)
        with open(victim) as f:
            self.assertEqual(f.read(), "precious\n")
        self.assert_back(self.baseline, "after stop")

    def test_07_full_tmpfs_holds_nothing_it_cannot_journal(self):
        run, _ = self.full_runtime_dir()
        # No status.json fits either: the wake mode is not checked.
        d = self.start_daemon(config_path=self.config(), runtime_dir=run, events=None)
        fio = bursty_fio(1, self.submit_cpu)
        seen = set()
        while fio.poll() is None:  # the completion CPU, and the waiter's
            seen.add(tuple(sorted(read_all().items())))
            time.sleep(0.002)
        self.assertEqual(seen, {tuple(sorted(self.baseline.items()))},
                         "held a CPU it could not journal")
        self.assertRegex(d.log(), r"Failed to (create|write) .*No space left on device")
        self.assertEqual(d.stop(), 0)
        self.assert_back(self.baseline, "after stop")

    def test_09_named_config_that_does_not_exist(self):
        typo = os.path.join(self.tmp, "typo.toml")
        check = self.run_cmd(self.latgovd, "--check-config", "--config", typo)
        self.assertEqual(check.returncode, 1, check.stdout)
        self.assertIn(typo, check.stderr)
        start = self.run_cmd(self.latgovd, "--config", typo, "--runtime-dir",
                             os.path.join(self.tmp, "run"))
        self.assertEqual(start.returncode, 78, start.stderr)
        self.assertIn(typo, start.stderr)
        self.assert_back(self.baseline, "after refusing")

    def test_10_sighup_during_start_up(self):
        """SIGHUP while latgovd restores, discovers and opens its events
        is a reload once it runs, never a death systemd counts as clean.
        The signal is sent at increasing delays after main() has blocked it
        (SigBlk in /proc/PID/status): before that the process is still being
        loaded, and no program can catch a signal there."""
        for i, delay in enumerate((0, 0.002, 0.004, 0.008, 0.015)):
            d = self.start_daemon(config_path=self.config(),
                                  runtime_dir=os.path.join(self.tmp, f"run-hup-{i}"), wait=False)
            deadline = time.monotonic() + 5
            while not sighup_blocked(d.proc.pid):
                self.assertTrue(d.alive(), f"latgovd exited before blocking signals:\n{d.log()}")
                self.assertLess(time.monotonic(), deadline, "latgovd never blocked SIGHUP")
                time.sleep(0.0002)
            time.sleep(delay)
            d.send(signal.SIGHUP)
            d.wait_ready()
            self.assertTrue(d.alive(), f"SIGHUP {delay * 1000:.0f} ms after start killed it")
            self.assertEqual(d.stop(), 0)
        self.assert_back(self.baseline, "after stop")

    # -------------------------------------------------------------------------

    def test_11_malformed_configuration_table(self):
        """Each malformed configuration: exit 78 at start, 1 from
        --check-config, both naming file:line:column and the key; sent to a
        running daemon by SIGHUP it is refused and the running configuration
        (limit 20, neither the embedded default nor 0) still governs."""
        runtime = os.path.join(self.tmp, "run")
        for name, text, line, column, word in MALFORMED:
            path = os.path.join(self.tmp, "bad.toml")
            with open(path, "wb") as f:
                f.write(text)
            where = f"{path}:{line}:{column}:"
            check = self.run_cmd(self.latgovd, "--check-config", "--config", path)
            self.assertEqual(check.returncode, 1, f"{name}: --check-config: {check.stderr}")
            self.assertIn(where, check.stderr, f"{name}: --check-config")
            self.assertIn(word, check.stderr, f"{name}: --check-config")
            start = self.run_cmd(self.latgovd, "--config", path, "--runtime-dir", runtime)
            self.assertEqual(start.returncode, EXIT_CONFIG, f"{name}: start: {start.stderr}")
            self.assertIn(where, start.stderr, f"{name}: start")
            self.assert_back(self.baseline, f"after refusing {name}")

        path = self.config(limit=20)
        d = self.start_daemon(config_path=path)
        for name, text, line, column, word in MALFORMED:
            with open(path, "wb") as f:
                f.write(text)
            before = d.log()
            d.send(signal.SIGHUP)
            deadline = time.monotonic() + 5
            while d.log().count("keeping the running one") == before.count(
                    "keeping the running one"):
                self.assertTrue(d.alive(), f"{name}: latgovd died on the reload:\n{d.log()}")
                self.assertLess(time.monotonic(), deadline, f"{name}: no refusal logged")
                time.sleep(0.005)
            self.assertIn(f"{path}:{line}:{column}:", d.log()[len(before):], name)
        fio = self.start_fio_held(1, want="20")
        fio.wait()
        # A refused configuration changes nothing: no rescan either, which
        # would have dropped every hold mid-IO.
        self.assertEqual(d.log().count("topology scanned (reload)"), 0, d.log()[-3000:])
        self.assertEqual(d.stop(), 0)
        self.assert_back(self.baseline, "after stop")

    def test_12_restore_follows_the_named_runtime_dir(self):
        """`latgovd --restore --runtime-dir DIR` restores the journal in DIR
        even when the configuration names another runtime_dir (as after an
        edit of the file): the unit names its directory on both ExecStart
        and ExecStopPost, so a changed key cannot orphan the journal. The
        killed latgovd's status goes too: until then `latgov status` says
        its latgovd is gone, and then that there is none."""
        runtime = os.path.join(self.tmp, "run-named")
        d = self.start_daemon(config_path=self.config(), runtime_dir=runtime)
        fio = self.start_fio_held(2)
        d.proc.kill()
        d.proc.wait()
        d.logf.close()
        fio.wait()
        self.assertEqual(read_cpu(self.comp), "n/a", "the kill left nothing to restore")
        journal = os.path.join(runtime, "journal")
        self.assertTrue(os.path.exists(journal), "kill -9 while holding left no journal")
        status = os.path.join(runtime, "status.json")
        self.assertTrue(os.path.exists(status), "kill -9 while holding left no status")
        with open(self.metrics_file) as f:
            self.assertRegex(f.read(), r"(?m)^latgov_cpu_held\{cpu=\"\d+\"\} 1$",
                             "the killed latgovd's metrics show nothing held")
        shown = self.run_cmd(self.latgov, "status", "--runtime-dir", runtime)
        self.assertIn(f"The latgovd that wrote this status (pid {d.proc.pid}) is not running",
                      shown.stdout, shown.stderr)
        shown = self.run_cmd(self.latgov, "status", "--json", "--runtime-dir", runtime)
        self.assertEqual(shown.returncode, 0, shown.stderr)
        self.assertIs(json.loads(shown.stdout)["latgovd_running"], False, shown.stdout)
        self.assertIn(f"(pid {d.proc.pid}) is not running", shown.stderr)
        # What a kill between a temporary's creation and its rename leaves.
        left = [os.path.join(runtime, f".{name}.{d.proc.pid}.{n}.tmp")
                for n, name in enumerate(("status.json", "journal"))]
        for path in left:
            with open(path, "w") as f:
                f.write("cut")
        elsewhere = os.path.join(self.tmp, "run-elsewhere")
        edited = self.write_config(CONFIG.format(backend="percpu", limit=0).replace(
            "[daemon]\n", f'[daemon]\nruntime_dir = "{elsewhere}"\n'), "edited.toml")
        out = self.run_cmd(self.latgovd, "--restore", "--config", edited,
                           "--runtime-dir", runtime)
        self.assertEqual(out.returncode, 0, out.stderr)
        self.assert_back(self.baseline, "after --restore of the named directory")
        self.assertFalse(os.path.exists(journal), "journal left after a complete restore")
        self.assertFalse(os.path.exists(status), "the killed latgovd's status left after restore")
        self.assertFalse(os.path.exists(self.metrics_file),
                         "the killed latgovd's metrics, showing its holds, left after restore")
        self.assertEqual([p for p in left if os.path.exists(p)], [],
                         "the killed latgovd's temporaries left after restore")
        # And a start removes them too (a latgovd started by hand after a kill).
        for path in left:
            with open(path, "w") as f:
                f.write("cut")
        again = self.start_daemon(config_path=self.config(), runtime_dir=runtime)
        self.assertEqual([p for p in left if os.path.exists(p)], [],
                         "the killed latgovd's temporaries left after a start")
        self.assertIn("removed 2 temporary file(s) that a killed latgov process left", again.log())
        self.assertEqual(again.stop(), 0)
        shown = self.run_cmd(self.latgov, "status", "--runtime-dir", runtime)
        self.assertIn("no status at", shown.stderr, shown.stdout)
        self.assertFalse(os.path.exists(elsewhere), "restore looked in the configured directory")

    def sampled_tree(self, name="root"):
        """A captured tree (discovery's files: a haltpoll guest, vda's one
        queue completing on cpu 1) with what sampling reads added: latgovd
        runs on it with --sysroot, holding nothing of this machine's. Its
        root (`name` in the test's directory), and a reader of its CPUs' PM
        QoS values."""
        root = os.path.join(self.tmp, name)
        golden = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "golden",
                              "host-haltpoll.tar.gz")
        os.makedirs(root)
        subprocess.run(["tar", "xzf", golden, "-C", root], check=True)
        write_proc_stat(root, vda_interrupts=0)
        for dev in os.listdir(os.path.join(root, "sys", "block")):
            with open(os.path.join(root, "sys", "block", dev, "stat"), "w") as f:
                f.write(BLOCK_STAT.format(inflight=0))
        qos = sorted(glob.glob(os.path.join(root, "sys", "devices", "system", "cpu", "cpu*",
                                            "power", "pm_qos_resume_latency_us")))
        self.assertTrue(qos, f"no PM QoS files in {golden}")

        def values():
            out = []
            for path in qos:
                with open(path) as f:
                    out.append(f.read().strip())
            return out
        return root, values

    def assert_stopped_clean(self, d, tree_values, before):
        """latgovd on a sampled tree stops with 0, the tree's CPUs back to
        `before` and this machine's untouched."""
        self.assertEqual(d.stop(), 0)
        self.assertEqual(tree_values(), before, "the tree's CPUs were left held")
        self.assertEqual(read_all(), self.baseline, "the machine's own files were written")

    @staticmethod
    def set_requests_in_flight(root, busy):
        """The tree's vda queue with `busy` requests in flight, as its
        debugfs tags say (the captured tree has the queue's directory)."""
        tags = os.path.join(root, "sys", "kernel", "debug", "block", "vda", "hctx0", "tags")
        with open(tags, "w") as f:
            f.write(f"nr_tags=256\nbusy={busy}\n")

    def hold_in_tree(self, root, tree_values, **start):
        """latgovd on the tree (INFLIGHT_CONFIG), then a request in flight
        there: cpu 1 is held. The daemon, and the tree's values held."""
        before = tree_values()
        self.set_requests_in_flight(root, 0)
        d = self.start_daemon(INFLIGHT_CONFIG, events=None, args=("--sysroot", root), **start)
        self.set_requests_in_flight(root, 1)
        self.assertIsNotNone(self.wait_value(lambda: tree_values() != before, True, 2.0),
                             f"cpu 1 not held with a request in flight: {tree_values()}")
        return d, tree_values()

    def test_13_unreadable_device_statistics_back_off(self):
        """A device whose statistics this build cannot parse (an unexpected
        kernel, say) in a tree given with --sysroot, where discovery still
        succeeds: latgovd names the file and what is wrong, holds nothing,
        and retries with a growing period, neither rescanning at every wake
        nor spinning on a status it cannot refresh. The status says why
        nothing is held, and so does the service manager's status line (it
        is ready all the same: nothing to gain from restarting); once the
        file reads again, latgovd samples again, and says it governs."""
        root, tree_values = self.sampled_tree()
        bad = os.path.join(root, "sys", "block", "vda", "stat")
        with open(bad, "w") as f:
            f.write("reads=1 writes=0\n")
        before = tree_values()
        notify = NotifySocket(os.path.join(self.tmp, "notify"))
        self.addCleanup(notify.close)
        d = self.start_daemon(CONFIG.format(backend="percpu", limit=0), events=None,
                              args=("--sysroot", root), notify_socket=notify.path)
        d.wait_log(r"rescanning devices")
        t0, cpu0 = time.monotonic(), latgovd_cpu_seconds(d.proc.pid)
        time.sleep(3.0)
        elapsed = time.monotonic() - t0
        used = latgovd_cpu_seconds(d.proc.pid) - cpu0
        self.assertTrue(d.alive(), d.log())
        text = d.log()
        rescans = len(re.findall(r"topology scanned \(device_error\)", text))
        log(f"  vda/stat unreadable: {rescans} rescans, {used:.2f} s of CPU in {elapsed:.1f} s")
        # Retried after 100 ms, doubling: six tries in the first 3.1 s.
        self.assertLessEqual(rescans, 8, text[-3000:])
        self.assertLess(used, 0.1 * elapsed, f"latgovd used {used:.2f} s of CPU in {elapsed:.1f} s")
        self.assertIsNotNone(re.search(rf"Failed to parse {re.escape(bad)}: .*; nothing held, "
                                       r"rescanning in \d+ ms", text), text[-3000:])
        why = self.status(d.runtime_dir)["sampling_error"]
        self.assertRegex(why or "", rf"^Failed to parse {re.escape(bad)}: [^;]*$")
        shown = self.run_cmd(self.latgov, "--sysroot", root, "status", "--runtime-dir",
                             d.runtime_dir)
        self.assertIn(f"NOT GOVERNING, nothing held: {why}", shown.stdout, shown.stderr)
        self.assertNotIn("is not running", shown.stdout)  # it runs, the tree has no /proc
        shown = self.run_cmd(self.latgov, "--sysroot", root, "status", "--json",
                             "--runtime-dir", d.runtime_dir)
        self.assertIs(json.loads(shown.stdout)["latgovd_running"], True, shown.stdout)
        self.assertEqual(shown.stderr, "")
        self.assertEqual(notify.last("READY"), "1", notify.messages)
        self.assertEqual(notify.last("STATUS"), f"Not governing, nothing held: {why}",
                         notify.messages)
        with open(bad, "w") as f:
            f.write(BLOCK_STAT.format(inflight=0))
        d.wait_log(r"sampling again", timeout=2.0)  # tried every idle_interval_ms (50)
        self.wait_status(d, lambda s: s.get("sampling_error", "") is None, "sampling_error null")
        notify.wait_last("STATUS", lambda v: v == "Governing")
        self.assert_stopped_clean(d, tree_values, before)

    def test_14_holds_dropped_while_blind_are_taken_again(self):
        """A queue with a request in flight is held (cpu 1 of the tree),
        after a completion interrupt made it active.
        Its statistics stop parsing and the rescan fails too (the online
        CPU list garbled): the hold is released, since nothing can be
        observed. Both files read again with the request still in flight:
        the same governor, which saw no change of activity, holds again."""
        root, tree_values = self.sampled_tree()
        before = tree_values()
        stat = os.path.join(root, "sys", "block", "vda", "stat")
        online = os.path.join(root, "sys", "devices", "system", "cpu", "online")
        with open(online) as f:
            online_text = f.read()
        with open(stat, "w") as f:
            f.write(BLOCK_STAT.format(inflight=1))
        d = self.start_daemon(CONFIG.format(backend="percpu", limit=0), events=None,
                              args=("--sysroot", root))
        write_proc_stat(root, vda_interrupts=1)  # a completion: the queue is active
        held = self.wait_value(lambda: tree_values()[1] != before[1], True, 2.0)
        self.assertIsNotNone(held, f"cpu 1 not held with a request in flight: {tree_values()}")
        holding = tree_values()
        with open(online, "w") as f:
            f.write("garbled\n")
        with open(stat, "w") as f:
            f.write("reads=1 writes=0\n")
        d.wait_log(r"keeping the current map, retrying in")
        self.assertIsNotNone(self.wait_value(tree_values, before, 2.0),
                             f"held while nothing could be sampled: {tree_values()}")
        with open(online, "w") as f:
            f.write(online_text)
        with open(stat, "w") as f:
            f.write(BLOCK_STAT.format(inflight=1))
        d.wait_log(r"sampling again", timeout=2.0)
        self.assertIsNotNone(self.wait_value(tree_values, holding, 2.0),
                             f"the request still in flight is not held again: {tree_values()}")
        self.assert_stopped_clean(d, tree_values, before)

    def test_15_io_events_stand_still_while_blind(self):
        """The tree of test_13 given this machine's block_getrq (and
        block_rq_issue) tracepoint, its vda given this machine's device number: latgovd arms real IO
        events, and this disk's reads count on them. Once the tree's
        statistics stop parsing, nothing is held and every event latgovd has
        open is disabled: the same reads count on none (read through copies
        of latgovd's perf fds, taken as it opens new ones at each rescan).
        Once they parse again, the events count again. The copies outlive
        latgovd's fds of the events it closes at each rescan: it takes them
        out of its epoll first, or it would spin."""
        root, tree_values = self.sampled_tree()
        before = tree_values()
        # This machine's vda (the tree's was 254:0; virtio-blk's major is
        # given out at boot).
        shutil.copy(f"/sys/block/{DISK}/dev", os.path.join(root, "sys", "block", "vda", "dev"))
        for event in ("events/block/block_getrq", "events/block/block_rq_issue"):
            os.makedirs(os.path.join(root, "sys", "kernel", "tracing", event))
            for name in ("id", "format"):
                shutil.copy(os.path.join(self.tracefs, event, name),
                            os.path.join(root, "sys", "kernel", "tracing", event, name))
        stat = os.path.join(root, "sys", "block", "vda", "stat")
        online = os.path.join(root, "sys", "devices", "system", "cpu", "online")
        d = self.start_daemon(CONFIG.format(backend="percpu", limit=0), events=True,
                              args=("--sysroot", root))
        reader = DirectReader()
        self.addCleanup(reader.close)
        # From a CPU of the tree's (0-1): latgovd opens events on those alone.
        affinity = os.sched_getaffinity(0)
        os.sched_setaffinity(0, {0, 1} & affinity)
        self.addCleanup(os.sched_setaffinity, 0, affinity)
        counters = PerfCounters(d.proc.pid)
        self.addCleanup(counters.close)

        def counted(pairs=40):
            """Requests counted on latgovd's events over `pairs` pairs of
            reads 10 ms apart (pairs: requests that each came alone would
            stop the events, test_onset.py)."""
            counters.take()
            start = counters.counts()
            for _ in range(pairs):
                time.sleep(0.01)
                reader.read()
                reader.read()
                counters.take()
            return sum(n - start.get(key, 0) for key, n in counters.counts().items())

        armed = counted()
        log(f"  sampling: {armed} requests counted on latgovd's events in 40 pairs of reads")
        self.assertGreater(armed, 0, "this disk's reads count on no event of latgovd's: the "
                           "test cannot tell disabled events apart")
        # Blind twice: on the map whose events were armed (the rescan fails
        # too: the online CPU list garbled), then on the new maps the
        # rescans of the backoff make (statistics still unparsable).
        with open(online) as f:
            online_text = f.read()
        with open(online, "w") as f:
            f.write("garbled\n")
        with open(stat, "w") as f:
            f.write("reads=1 writes=0\n")
        # The failed rescan's retry comes at a later wake: the events were
        # disarmed before the loop slept.
        d.wait_log(r"keeping the current map, retrying in")
        d.wait_log(r"(?s)keeping the current map, retrying in.*keeping the current map")
        t0, cpu0 = time.monotonic(), latgovd_cpu_seconds(d.proc.pid)
        blind = counted()
        log(f"  blind on the map of the armed events: {blind} requests counted on "
            f"{len(counters.copies)} events")
        self.assertEqual(blind, 0, f"IO events enabled while latgovd can sample nothing:\n"
                         f"{d.log()[-3000:]}")
        with open(online, "w") as f:
            f.write(online_text)
        d.wait_log(r"(?s)topology scanned \(device_error\).*topology scanned \(device_error\)")
        blind = counted()
        log(f"  blind on new maps: {blind} requests counted on {len(counters.copies)} events")
        self.assertEqual(blind, 0, f"IO events enabled while latgovd can sample nothing:\n"
                         f"{d.log()[-3000:]}")
        with open(stat, "w") as f:
            f.write(BLOCK_STAT.format(inflight=0))
        d.wait_log(r"sampling again", timeout=2.0)
        again = counted()
        elapsed = time.monotonic() - t0
        used = latgovd_cpu_seconds(d.proc.pid) - cpu0
        log(f"  sampling again: {again} requests counted; latgovd used {used:.2f} s of CPU "
            f"in {elapsed:.1f} s")
        self.assertGreater(again, 0, f"the events were not enabled again:\n{d.log()[-3000:]}")
        # Copies of its events outlive latgovd's fds (ours, here): an event
        # closed but left in its epoll would wake it in a spin.
        self.assertLess(used, 0.1 * elapsed, f"latgovd used {used:.2f} s of CPU in "
                        f"{elapsed:.1f} s")
        self.assert_stopped_clean(d, tree_values, before)

    def test_16_evidence_file_that_cannot_be_checked(self):
        """An evidence_file whose path cannot even be checked (ELOOP here; a
        directory the unit's capabilities cannot search is the same) is
        named and learnt afresh: latgovd starts and stops cleanly, instead
        of dying at every start (and restart) on an exception."""
        loop = os.path.join(self.tmp, "loop")
        os.symlink("loop", loop)
        evidence = os.path.join(loop, "evidence")
        d = self.start_daemon(CONFIG.format(backend="percpu", limit=0).replace(
            "[daemon]\n", f'[daemon]\nevidence_file = "{evidence}"\n'))
        d.wait_log(rf"Failed to load {re.escape(evidence)}: .*symbolic links; learning again")
        self.assertTrue(d.alive(), d.log())
        self.assertEqual(d.stop(), 0, d.log())
        self.assertEqual(read_all(), self.baseline)

    def learn_on_simulated_device(self, held_us, unheld_us, verdict, limit_from):
        """latgovd in auto mode on the tree of test_13 (a haltpoll guest,
        whose idle states declare no cost that can be trusted) with a
        SimulatedReader on its vda: it alternates windows with and without
        the hold until the status shows `limit_from`, then holds (limit 0)
        or not as `verdict` says. Once the IO stops (the queue idle) it
        writes what it learnt to its evidence file while it runs, not only
        at exit, and leaves the tree's CPUs and this machine's as they
        were. The next start reuses it: the same verdict at once, no window
        measured again. Rewound one and a half first lives (a hold's is 10
        minutes, a no-hold's 2.5), it is measured again and saved as
        confirmed once; rewound again, it lasts two first lives and is
        reused. On any host (the haltpoll test of the same, in
        test_waiters, runs only where holding pays enough to be learnt)."""
        root, tree_values = self.sampled_tree()
        before = tree_values()
        qos1 = os.path.join(root, "sys", "devices", "system", "cpu", "cpu1", "power",
                            "pm_qos_resume_latency_us")
        evidence = os.path.join(self.tmp, "evidence")
        config = ("[daemon]\nlog_level = \"debug\"\nstatus_interval_ms = 50\n"
                  f'evidence_file = "{evidence}"\n\n'
                  "[defaults]\nmode = \"auto\"\nwaiter_cpus = false\nprearm = false\n")

        def simulated_reader():
            device = SimulatedReader(root, "vda", 36, qos1, held_us, unheld_us)
            self.addCleanup(device.stop)
            device.write(inflight=0)  # the fixed-length layout, before latgovd opens the files
            return device

        device = simulated_reader()
        d = self.start_daemon(config, events=None, args=("--sysroot", root))
        device.start()

        def decided(st):
            dev = {x["name"]: x for x in st["devices"]}.get("vda", {})
            return limit_from in (dev.get("limit_from") or "")

        st = self.wait_status(d, decided, f"vda: {limit_from}", timeout=20)
        dev = {x["name"]: x for x in st["devices"]}["vda"]
        log(f"  requests {held_us} us held, {unheld_us} us not: decided after "
            f"{device.elapsed():.1f} s of IO, cpu 1 held in {device.held_fraction():.0%} of it: "
            f"{dev['limit_from']}")
        self.assertEqual([e["verdict"] for e in st["evidence"]], [verdict], st)
        self.assertTrue(0.2 < device.held_fraction() < 0.95,
                        f"windows held {device.held_fraction():.0%} of the time while learning")
        self.assertFalse(os.path.exists(evidence), "evidence written while IO ran")
        held = "n/a" if verdict == "hold" else "0"
        self.assertEqual(dev["limit_us"], 0 if verdict == "hold" else None, st)
        self.assertIsNotNone(self.wait_value(lambda: tree_values()[1], held, 1.0),
                             f"cpu 1 not {held} after the verdict")
        device.stop()
        saved = self.wait_value(lambda: os.path.exists(evidence), True, 5.0)
        self.assertIsNotNone(saved, "nothing saved once the queue was idle")
        self.assertTrue(d.alive(), d.log())
        with open(evidence) as f:
            learnt = f.read()
        self.assertRegex(learnt, rf"(?m)^gap class=\d+ verdict={verdict} ", learnt)
        self.assertIsNotNone(self.wait_value(tree_values, before, 2.0),
                             f"cpu 1 still held after the IO: {tree_values()}")
        pairs = [e["pairs"] for e in self.wait_status(d, lambda st: True, "a status")["evidence"]]
        self.assert_stopped_clean(d, tree_values, before)

        # The next start reuses it: the same verdict once the first window
        # has measured the gap, with no window measured without the hold
        # (or with it, for "no-hold") and no pair added.
        device = simulated_reader()
        again = self.start_daemon(config, events=None, args=("--sysroot", root))
        again.wait_log(rf"reusing what {re.escape(evidence)} learnt at \d+ idle gaps")
        device.start()
        st = self.wait_status(again, decided, f"vda: {limit_from} again", timeout=5)
        dev = {x["name"]: x for x in st["devices"]}["vda"]
        self.assertFalse(dev["experimenting"], st)
        self.assertEqual([e["verdict"] for e in st["evidence"]], [verdict], st)
        self.assertEqual([e["pairs"] for e in st["evidence"]], pairs,
                         "windows were measured again instead of reusing the evidence")
        self.assertIsNotNone(self.wait_value(lambda: tree_values()[1], held, 1.0),
                             f"cpu 1 not {held} with the evidence reused")
        device.seen.clear()
        time.sleep(1.0)  # three windows' worth: none of them may leave the verdict
        device.stop()
        log(f"  restarted: decided after {device.elapsed() - 1.0:.1f} s of IO, then cpu 1 read "
            f"{sorted(device.seen)}")
        self.assertEqual(device.seen, {held}, "a window left the reused verdict")
        self.assertIsNotNone(self.wait_value(tree_values, before, 2.0),
                             f"cpu 1 still held after the IO: {tree_values()}")
        self.assert_stopped_clean(again, tree_values, before)

        # Learnt one and a half first lives ago: measured again, windows
        # without the hold (or with it) included, and, the same verdict
        # again, saved as confirmed once.
        first_life = 10 * 60 if verdict == "hold" else 150
        rewound = first_life * 3 // 2

        def start_rewound(text):
            """latgovd on `text` as its evidence, learnt `rewound` seconds
            ago, and the reader going."""
            with open(evidence, "w") as f:
                f.write(re.sub(r"learnt_at=\d+", f"learnt_at={int(time.time()) - rewound}",
                               text))
            device = simulated_reader()
            d = self.start_daemon(config, events=None, args=("--sysroot", root))
            device.start()
            return d, device

        third, device = start_rewound(learnt)
        st = self.wait_status(third, decided, f"vda: {limit_from}, measured again", timeout=20)
        self.assertEqual([e["verdict"] for e in st["evidence"]], [verdict], st)
        self.assertTrue(0.2 < device.held_fraction() < 0.95,
                        f"windows held {device.held_fraction():.0%} of the time: not measured "
                        "again")
        device.stop()

        def saved_text():
            with open(evidence) as f:
                return f.read()

        confirmed = self.wait_value(
            lambda: re.search(rf"(?m)^gap class=\d+ verdict={verdict} .* confirmed=1$",
                              saved_text()) is not None, True, 5.0)
        self.assertIsNotNone(confirmed, "the confirmation was not saved: " + saved_text())
        learnt = saved_text()
        log(f"  learnt {rewound} s before: measured again in {device.elapsed():.1f} s of IO, "
            f"saved confirmed once")
        self.assert_stopped_clean(third, tree_values, before)

        # Confirmed once, it lasts two first lives: rewound as old, it is
        # reused, and the status says so, and when it is measured again.
        fourth, device = start_rewound(learnt)
        st = self.wait_status(fourth, decided, f"vda: {limit_from}, reused", timeout=5)
        self.assertFalse({x["name"]: x for x in st["devices"]}["vda"]["experimenting"], st)
        [entry] = st["evidence"]
        self.assertEqual(entry["confirmations"], 1, entry)
        self.assertIsNone(entry["expired"], entry)
        # The first second latgovd finds it past its two first lives.
        self.assertEqual(entry["measured_again_at"], entry["learnt_at"] + 2 * first_life + 1,
                         entry)
        text = subprocess.run([self.latgov, "status", "--runtime-dir", fourth.runtime_dir],
                              capture_output=True, text=True, timeout=10)
        self.assertEqual(text.returncode, 0, text.stderr)
        # Half a first life and a second left when the file was written,
        # in minutes rounded up, minus the seconds since.
        left = [-(-(first_life // 2 + 1 - late) // 60) for late in range(0, 30)]
        self.assertRegex(text.stdout, r"on vda, confirmed 1 time, measured again in "
                         f"({'|'.join(map(str, sorted(set(left))))}) min\n", text.stdout)
        device.seen.clear()
        time.sleep(1.0)
        device.stop()
        self.assertEqual(device.seen, {held}, f"a confirmed verdict {rewound} s old was measured "
                         "again")
        self.assert_stopped_clean(fourth, tree_values, before)

    def test_17_auto_learns_that_holding_pays(self):
        """Auto mode's live-IO learning end to end, on any host: requests
        that take 100 us while their completion CPU is held and 150 us
        while it is not (150 us apart) are held from the verdict on."""
        self.learn_on_simulated_device(100, 150, "hold", "holding buys latency")

    def test_18_auto_learns_that_holding_buys_nothing(self):
        """The same where the hold changes nothing (150 us either way):
        after the windows nothing is held."""
        self.learn_on_simulated_device(150, 150, "no-hold", "holding buys nothing measurable")

    def test_19_waits_for_a_runtime_dir_someone_else_holds(self):
        """The unit starting while `latgov calibrate` holds the runtime
        directory (a restart during a calibration): with --wait-for-lock,
        latgovd waits, writes nothing meanwhile and starts once the lock is
        released; past the wait it fails naming the holder, and a stop
        signal ends the wait with exit 0."""
        config = self.config()
        run = os.path.join(self.tmp, "run")
        os.makedirs(run, mode=0o755)
        held = os.open(run, os.O_RDONLY | os.O_DIRECTORY)
        fcntl.flock(held, fcntl.LOCK_EX)  # as calibrate takes it
        try:
            start = time.monotonic()
            late = self.run_cmd(self.latgovd, "--config", config, "--runtime-dir", run,
                                "--wait-for-lock", "1")
            took = time.monotonic() - start
            self.assertEqual(late.returncode, 1, late.stderr)
            self.assertIn(f"(pid {os.getpid()}) holds it", late.stderr)
            self.assertIn("(waited 1 s)", late.stderr)
            self.assertGreaterEqual(took, 1.0)
            stopped = self.start_daemon(config_path=config, runtime_dir=run, wait=False,
                                        args=("--wait-for-lock", "30"))
            stopped.wait_log(r"waiting up to 30 s for it")
            self.assertEqual(stopped.stop(timeout=2), 0, stopped.log())
            self.assertIn("while waiting for the lock, stopping", stopped.log())
            d = self.start_daemon(config_path=config, runtime_dir=run, wait=False,
                                  args=("--wait-for-lock", "30"))
            d.wait_log(r"waiting up to 30 s for it")
            time.sleep(0.5)
            self.assertTrue(d.alive(), d.log())
            self.assertEqual(os.listdir(run), [], "written while waiting for the lock")
            self.assertNotIn("latgovd ready", d.log())
            self.assert_back(self.baseline, "while waiting for the lock")
        finally:
            os.close(held)
        d.wait_ready()
        self.assertIn("is ours now", d.log())
        fio = bursty_fio(3, self.submit_cpu)
        try:
            self.assertIsNotNone(self.wait_value(lambda: read_cpu(self.comp), "n/a", 2.0),
                                 "not held under IO after the wait")
        finally:
            fio.kill()
            fio.wait()
        self.assertEqual(d.stop(), 0)
        self.assert_back(self.baseline, "after stop")

    def test_20_restore_removes_every_dead_temporary(self):
        """`latgovd --restore` removes what a writer killed between creating
        a temporary and renaming it left, of every file a start cleans: the
        status and journal in the runtime directory, and the evidence,
        calibration and metrics files wherever the configuration puts them.
        A live writer's temporary stays."""
        run = os.path.join(self.tmp, "run-temporaries")
        os.makedirs(run, mode=0o755)
        metrics = os.path.join(self.tmp, "latgov.prom")
        config = self.write_config(CONFIG.format(backend="percpu", limit=0).replace(
            "[daemon]\n", f'[daemon]\nmetrics_file = "{metrics}"\n'))
        gone = subprocess.Popen(["true"])
        gone.wait()  # its pid names a writer that no longer runs
        targets = [os.path.join(run, "status.json"), os.path.join(run, "journal"),
                   self.evidence_file, self.calibration_file, metrics]
        dead = []
        for n, target in enumerate(targets):
            folder, name = os.path.split(target)
            dead.append(os.path.join(folder, f".{name}.{gone.pid}.{n}.tmp"))
        live = os.path.join(os.path.dirname(metrics), f".latgov.prom.{os.getpid()}.0.tmp")
        for path in dead + [live]:
            with open(path, "w") as f:
                f.write("cut")
        out = self.run_cmd(self.latgovd, "--restore", "--config", config, "--runtime-dir", run)
        self.assertEqual(out.returncode, 0, out.stderr)
        self.assertEqual([p for p in dead if os.path.exists(p)], [],
                         f"a dead writer's temporaries left after --restore: {out.stderr}")
        self.assertTrue(os.path.exists(live), "a live writer's temporary was removed")
        self.assertIn(f"removed {len(dead)} temporary file(s) that a killed latgov process left",
                      out.stderr)
        self.assert_back(self.baseline, "after --restore")

    def test_21_unreadable_online_cpu_list_is_no_hotplug(self):
        """The online CPU list unreadable (a tree of test_13 whose file is
        gone): the hotplug check says so once, naming the file, and rescans
        nothing; the map of the last scan governs on. A list that changed
        rescans, and says what it changed to."""
        root, tree_values = self.sampled_tree()
        before = tree_values()
        online = os.path.join(root, "sys", "devices", "system", "cpu", "online")
        with open(online) as f:
            online_text = f.read()
        d = self.start_daemon(CONFIG.format(backend="percpu", limit=0), events=None,
                              args=("--sysroot", root))
        os.rename(online, online + ".away")
        d.wait_log(r"cpu/online: .*; CPU hotplug is not checked meanwhile", timeout=8.0)
        time.sleep(5.5)  # one more check: said once
        text = d.log()
        self.assertEqual(text.count("CPU hotplug is not checked meanwhile"), 1, text)
        self.assertNotIn("online CPUs changed", text)
        self.assertNotIn("topology scanned (hotplug)", text)
        self.assertTrue(d.alive(), text)
        with open(online, "w") as f:
            f.write("0\n")  # cpu 1 went offline
        d.wait_log(r"online CPUs changed to 0, rescanning", timeout=8.0)
        with open(online, "w") as f:
            f.write(online_text)
        self.assert_stopped_clean(d, tree_values, before)

    def test_22_reload_whose_rescan_failed_is_tried_again(self):
        """SIGHUP with a new linger_ms while discovery fails (the tree's
        online CPU list garbled): the configuration is taken, its rescan
        fails and the current map governs on. Once discovery works again
        the rescan is tried again, with no uevent, hotplug or periodic check
        to bring it, and the new configuration governs."""
        root, tree_values = self.sampled_tree()
        before = tree_values()
        online = os.path.join(root, "sys", "devices", "system", "cpu", "online")
        with open(online) as f:
            online_text = f.read()
        config = CONFIG.format(backend="percpu", limit=0)
        path = self.write_config(config, "reload.toml")
        d = self.start_daemon(config_path=path, events=None, args=("--sysroot", root))

        def vda_linger(st):
            return [dev["linger_ms"] for dev in st["devices"] if dev["name"] == DISK]
        self.wait_status(d, lambda st: vda_linger(st) == [3], f"{DISK} with linger_ms 3")
        with open(online, "w") as f:
            f.write("garbled\n")
        with open(path, "w") as f:
            f.write(config + "linger_ms = 7\n")
        d.send(signal.SIGHUP)
        d.wait_log(r"configuration reloaded")
        d.wait_log(r"keeping the current map, retrying in")
        self.assertEqual(vda_linger(self.status(d.runtime_dir)), [3])
        with open(online, "w") as f:
            f.write(online_text)
        # Retried after 100 ms, then twice as long each time: within 1.6 s
        # of the reload unless the machine stalls.
        d.wait_log(r"topology scanned \(reload\)", timeout=5.0)
        self.wait_status(d, lambda st: vda_linger(st) == [7], f"{DISK} with linger_ms 7")
        self.assert_stopped_clean(d, tree_values, before)

    def test_23_unread_journal_stream_stalls_nothing(self):
        """latgovd's stderr is the journal stream (JOURNAL_STREAM names it)
        and journald stops reading it: a socket with room for a few lines
        that nobody reads. The loop goes on: a request in flight in the
        tree is held and released again, cycle after cycle, the metrics
        count the messages dropped, and SIGTERM ends it with everything
        back. Once the stream is read again, a line says how many were
        dropped."""
        root, tree_values = self.sampled_tree()
        before = tree_values()
        stat = os.path.join(root, "sys", "block", "vda", "stat")
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        self.addCleanup(ours.close)
        theirs.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 1024)
        ours.setblocking(False)
        config = CONFIG.format(backend="percpu", limit=0).replace('"info"', '"debug"')
        d = self.start_daemon(config, wait=False, args=("--sysroot", root),
                              journal_stream=theirs)
        theirs.close()
        self.wait_status(d, lambda st: st["devices"], "a governed device", timeout=5.0)
        interrupts = 0
        for cycle in range(5):
            with open(stat, "w") as f:
                f.write(BLOCK_STAT.format(inflight=1))
            interrupts += 1
            write_proc_stat(root, vda_interrupts=interrupts)  # a completion: active
            self.assertIsNotNone(self.wait_value(lambda: tree_values() != before, True, 2.0),
                                 f"cycle {cycle}: cpu 1 not held with a request in flight, "
                                 f"the journal stream unread: {tree_values()}")
            with open(stat, "w") as f:
                f.write(BLOCK_STAT.format(inflight=0))
            self.assertIsNotNone(self.wait_value(tree_values, before, 2.0),
                                 f"cycle {cycle}: not released once the request completed, "
                                 f"the journal stream unread: {tree_values()}")

        def dropped():
            try:
                with open(self.metrics_file) as f:
                    found = re.search(r"(?m)^latgov_log_messages_dropped_total (\d+)$", f.read())
            except FileNotFoundError:
                return 0
            return int(found.group(1)) if found else 0
        self.assertIsNotNone(self.wait_value(lambda: dropped() > 0, True, 2.0),
                             f"no line counted dropped in {self.metrics_file}: the stream never "
                             "filled, and the test showed nothing")
        text = b""
        try:
            while chunk := ours.recv(65536):
                text += chunk
        except BlockingIOError:
            pass
        d.send(signal.SIGHUP)
        deadline = time.monotonic() + 5.0
        notice = re.compile(rb"(?m)^<4>(\d+) log messages? dropped: the journal stream was full$")
        while not (re.search(notice, text) and b"configuration reloaded" in text):
            self.assertLess(time.monotonic(), deadline,
                            f"no report of the dropped lines, then the reload, once the "
                            f"stream was read again:\n{text.decode(errors='replace')}")
            try:
                text += ours.recv(65536)
            except BlockingIOError:
                time.sleep(0.01)
        self.assertGreater(int(re.search(notice, text).group(1)), 0)
        self.assert_stopped_clean(d, tree_values, before)

    def test_24_statistics_missing_at_start_are_opened_later(self):
        """A disk whose stat file is not there when latgovd maps the tree (a
        disk appearing as it was scanned): latgovd says its IO is not seen,
        and opens the file once it is there, without a change of the map
        that would rescan. Its requests then count: 200 reads in 100 ms of
        read time show as a mean latency of 500 us, which the completion
        interrupts alone would never tell, and the counts the file had when
        it was opened are not taken for IO."""
        root, tree_values = self.sampled_tree()
        before = tree_values()
        stat = os.path.join(root, "sys", "block", "vda", "stat")
        os.unlink(stat)
        d = self.start_daemon(CONFIG.format(backend="percpu", limit=0), events=None,
                              args=("--sysroot", root))
        d.wait_log(rf"Failed to open {re.escape(stat)}: .*; the IO of vda is not seen")

        def kernel_stat(reads, sectors, ticks):
            # As the kernel prints it, each field 8 wide: rewritten in place
            # at the same length, never read empty or half written.
            fields = [reads, 0, sectors, ticks] + [0] * 13
            return " ".join(f"{v:8d}" for v in fields) + "\n"
        with open(stat, "w") as f:
            f.write(kernel_stat(1000, 8000, 9000))  # 9 ms each since boot
        d.wait_log(r"the IO of vda is seen: its statistics opened", timeout=8.0)
        # Logged just before the sample that takes the file's counts as
        # its baseline, in the same tick: well after that, new counts.
        time.sleep(0.2)
        with open(stat, "r+") as f:
            f.write(kernel_stat(1200, 9600, 9100))
        write_proc_stat(root, vda_interrupts=5)  # completions: active, so the status is written

        def observed(st):
            dev = next((x for x in st["devices"] if x["name"] == "vda"), {})
            return dev.get("observed_latency_us") is not None
        st = self.wait_status(d, observed, "vda observed_latency_us", timeout=2.0)
        dev = next(x for x in st["devices"] if x["name"] == "vda")
        self.assertAlmostEqual(dev["observed_latency_us"], 500.0, delta=1.0, msg=dev)
        self.assertNotIn("topology scanned (", d.log().split("the IO of vda is seen")[1])
        self.assert_stopped_clean(d, tree_values, before)

    def test_25_hold_that_failed_is_tried_again(self):
        """The runtime directory's file system is full when a request comes
        in the tree: the hold cannot be journaled, so cpu 1 is not held. Room
        is made while the request is still in flight, the holds latgovd
        wants unchanged: cpu 1 is held within seconds (a failed hold is tried
        again at each check of the journal, every second), not only once the
        wanted holds change, and released when the request completes. The
        request in flight is read from the queue's debugfs tags, which keep
        it active with no file rewritten in between (a rewrite read half
        done fails the sample, which would retry the hold by itself)."""
        root, tree_values = self.sampled_tree()
        before = tree_values()
        self.set_requests_in_flight(root, 0)
        run, filler = self.full_runtime_dir(chunk=1024)
        d = self.start_daemon(INFLIGHT_CONFIG, runtime_dir=run, events=None,
                              args=("--sysroot", root))
        self.addCleanup(d.kill)
        self.set_requests_in_flight(root, 1)

        def values_for(seconds):
            seen = set()
            end = time.monotonic() + seconds
            while time.monotonic() < end:
                seen.add(tuple(tree_values()))
                time.sleep(0.005)
            return seen
        self.assertEqual(values_for(1.0), {tuple(before)}, "held a CPU it could not journal")
        text = d.log()
        # Each said once, though tried every second (the hold) and every
        # 20 ms while the queue is active (the status).
        self.assertEqual(len(re.findall(r"No space left on device, not constraining cpu 1",
                                        text)), 1, text[-3000:])
        self.assertEqual(len(re.findall(r"status\.json.*No space left on device", text)), 1,
                         text[-3000:])
        os.unlink(filler)
        self.assertIsNotNone(self.wait_value(lambda: tree_values() != before, True, 4.0),
                             "cpu 1 not held within 4 s of room in the runtime directory, the "
                             f"request still in flight:\n{d.log()[-3000:]}")
        self.assertEqual(values_for(0.5), {tuple(tree_values())}, "the hold did not last")
        d.wait_log(r"cpu 1: constrained now; what failed before has passed")
        d.wait_log(r"status written again")
        self.set_requests_in_flight(root, 0)
        self.assertIsNotNone(self.wait_value(tree_values, before, 2.0),
                             f"not released once the request completed: {tree_values()}")
        self.assert_stopped_clean(d, tree_values, before)

    def test_26_stop_that_cannot_release_says_so(self):
        """cpu 1 of the tree is held, and its PM QoS file is gone when SIGTERM
        comes (removed: a CPU going, a broken tree). latgovd cannot put
        its original back: it says so, exits 1 rather than 0, and keeps the
        journal and its status, so that `latgov status` and `latgov doctor`
        tell an operator what may still be held. `latgovd --restore` puts it
        back once the file is there, and removes both."""
        root, tree_values = self.sampled_tree()
        before = tree_values()
        d, held = self.hold_in_tree(root, tree_values)
        self.wait_status(d, lambda st: any(c["limit_us"] is not None for c in st["cpus"]),
                         "a held CPU in the status")
        qos = os.path.join(root, "sys", "devices", "system", "cpu", "cpu1", "power",
                           "pm_qos_resume_latency_us")
        shutil.copy(qos, qos + ".away")  # held; latgovd's descriptor sees it removed
        os.unlink(qos)
        self.assertEqual(d.stop(), 1, d.log()[-3000:])
        text = d.log()
        self.assertIn("Failed to put back every original", text)
        self.assertIn("stopped, but not every constraint could be released", text)
        self.assertNotIn("every constraint released", text)
        self.assertTrue(os.path.exists(d.journal), "the journal of what is held was removed")
        self.assertTrue(os.path.exists(d.status_path), "the status of what is held was removed")
        shown = self.run_cmd(self.latgov, "--sysroot", root, "status", "--runtime-dir",
                             d.runtime_dir)
        self.assertIn(f"(pid {d.proc.pid}) is not running", shown.stdout, shown.stderr)
        os.rename(qos + ".away", qos)
        self.assertEqual(tree_values(), held)
        restored = self.run_cmd(self.latgovd, "--sysroot", root, "--restore", "--runtime-dir",
                                d.runtime_dir)
        self.assertEqual(restored.returncode, 0, restored.stderr)
        self.assertEqual(tree_values(), before)
        self.assertFalse(os.path.exists(d.journal))
        self.assertFalse(os.path.exists(d.status_path))
        self.assertEqual(read_all(), self.baseline, "the machine's own files were written")

    def test_27_status_follows_io_that_holds_nothing(self):
        """A tree whose cpuidle driver is none, in auto mode: IO there holds
        nothing, so the holds latgovd wants never change. The status still
        follows the IO: the queue is listed active while its request is in
        flight and no longer once it has completed, though no hold changed
        to mark the status for a rewrite."""
        root, tree_values = self.sampled_tree()
        before = tree_values()
        with open(os.path.join(root, "sys", "devices", "system", "cpu", "cpuidle",
                               "current_driver"), "w") as f:
            f.write("none\n")
        self.set_requests_in_flight(root, 0)
        config = ("[daemon]\nlog_level = \"info\"\nstatus_interval_ms = 20\n"
                  "queue_inflight = true\n")
        d = self.start_daemon(config, events=None, args=("--sysroot", root))

        def active(st):
            dev = next((x for x in st["devices"] if x["name"] == "vda"), {})
            return dev.get("active_queues")
        self.wait_status(d, lambda st: active(st) == [], "vda listed with no active queue")
        self.set_requests_in_flight(root, 1)
        st = self.wait_status(d, lambda st: active(st) == [0], "vda queue 0 active")
        dev = next(x for x in st["devices"] if x["name"] == "vda")
        self.assertIsNone(dev["limit_us"], dev)
        self.assertTrue(dev["limit_from"].startswith("no cpuidle driver"), dev)
        self.set_requests_in_flight(root, 0)  # completed
        self.wait_status(d, lambda st: active(st) == [], "vda queue 0 idle again once its "
                                                           "request completed", timeout=3.0)
        self.assertEqual(tree_values(), before, "held a CPU with no cpuidle driver")
        self.assert_stopped_clean(d, tree_values, before)

    def test_28_journal_of_another_root_is_kept_for_it(self):
        """latgovd on one tree is killed while it holds cpu 1 there; a
        latgovd on another tree is then started with the same runtime
        directory. The journal records the first tree's CPUs: the second
        latgovd must neither put them back on its own tree nor take the
        records over (which would lose them: the first tree's cpu 1 would
        stay held for good). It refuses to start with 78 (EX_CONFIG: the
        unit does not restart on it) and names the restore that puts them
        back; `--restore` under the second tree refuses too, and
        under the first it puts cpu 1 back."""
        first, first_values = self.sampled_tree("first")
        second, second_values = self.sampled_tree("second")
        before, second_before = first_values(), second_values()
        d, held = self.hold_in_tree(first, first_values)
        d.kill()
        journal = d.journal
        with open(journal) as f:
            recorded = f.read()
        named = os.path.realpath(first)  # as the journal names a root
        refusal = (f"{journal} records the CPUs of the tree {named}, not of the tree "
                   f"{os.path.realpath(second)}: nothing of it is put back or taken over here, "
                   f"and it is kept for `latgovd --restore --sysroot {named} --runtime-dir "
                   f"{d.runtime_dir}` (if that tree is gone, so are its CPUs: remove the "
                   "journal)")

        other = self.start_daemon(INFLIGHT_CONFIG, wait=False, args=("--sysroot", second))
        try:
            code = other.proc.wait(10)
        except subprocess.TimeoutExpired:
            code = None
        other.kill()
        self.assertEqual(code, 78, f"latgovd started on a journal of another tree:\n"
                                  f"{other.log()[-3000:]}")
        self.assertIn(refusal, other.log())
        wrong = self.run_cmd(self.latgovd, "--sysroot", second, "--restore", "--runtime-dir",
                             d.runtime_dir)
        self.assertEqual(wrong.returncode, 1, wrong.stderr)
        self.assertIn(refusal, wrong.stderr)
        with open(journal) as f:
            self.assertEqual(f.read(), recorded, "the journal of the first tree was changed")
        self.assertEqual(first_values(), held)
        self.assertEqual(second_values(), second_before)

        restored = self.run_cmd(self.latgovd, "--sysroot", first, "--restore", "--runtime-dir",
                                d.runtime_dir)
        self.assertEqual(restored.returncode, 0, restored.stderr)
        self.assertEqual(first_values(), before)
        self.assertFalse(os.path.exists(journal))
        self.assertEqual(read_all(), self.baseline, "the machine's own files were written")

    def test_29_own_writes_on_a_governed_disk_do_not_feed_the_status(self):
        """latgovd's metrics file on the disk it watches (node_exporter's
        directory is on disk): each replacement of it is a write there. On a
        tree whose cpuidle driver is none (latgovd only watches, sampling the
        counters), a thread turns each replacement into a completion on the
        tree's vda. One burst of IO from elsewhere, over three samples, is
        shown in the status, active then idle; the writes latgovd makes for
        it must not keep the queue active and the files rewritten: within a
        second it is quiet. (The IO of one write alone, in one sample, is
        not shown: that is how latgovd tells it from a burst.)"""
        root, tree_values = self.sampled_tree()
        before = tree_values()
        with open(os.path.join(root, "sys", "devices", "system", "cpu", "cpuidle",
                               "current_driver"), "w") as f:
            f.write("none\n")
        completions = [1000000]  # as many digits throughout: rewritten in place
        write_proc_stat(root, vda_interrupts=completions[0])
        metrics = os.path.join(self.tmp, "metrics", "latgov.prom")
        os.mkdir(os.path.dirname(metrics))
        config = "[daemon]\nlog_level = \"info\"\nstatus_interval_ms = 100\n"
        d = self.start_daemon(config, events=None,
                              args=("--sysroot", root, "--metrics-file", metrics))
        done = threading.Event()
        writes = []  # (seconds since start, what the status lists active)

        def inode(path):
            try:
                return os.stat(path).st_ino
            except FileNotFoundError:
                return None

        def disk():
            seen = {metrics: inode(metrics), d.status_path: inode(d.status_path)}
            t0 = time.monotonic()
            while not done.is_set():
                for path in seen:
                    now = inode(path)
                    if now == seen[path]:
                        continue
                    seen[path] = now
                    if path == metrics:
                        completions[0] += 1
                        write_proc_stat(root, vda_interrupts=completions[0])
                    else:
                        try:
                            shown = next(x["active_queues"] for x in self.status(d.runtime_dir)
                                         ["devices"] if x["name"] == "vda")
                        except (OSError, ValueError, KeyError, StopIteration):
                            shown = "?"
                        writes.append((time.monotonic() - t0, shown))
                time.sleep(0.002)
        thread = threading.Thread(target=disk)
        thread.start()
        try:
            time.sleep(0.5)
            for _ in range(3):  # IO from elsewhere, one sample (status_interval) apart
                completions[0] += 3
                write_proc_stat(root, vda_interrupts=completions[0])
                time.sleep(0.1)
            time.sleep(3.2)
        finally:
            done.set()
            thread.join()
        shown = [active for _, active in writes]
        self.assertIn([0], shown, f"the burst was never shown: {writes}")
        self.assertEqual(shown[-1], [], f"the status was left listing vda active: {writes}")
        late = [(round(t, 2), active) for t, active in writes if t > 2.2]
        self.assertEqual(late, [], f"status rewritten 1.5 s after the burst, fed by latgovd's own "
                                   f"writes ({completions[0] - 1000009} of them): {writes}")
        self.assertEqual(tree_values(), before)
        self.assert_stopped_clean(d, tree_values, before)

    def test_30_a_hold_that_failed_is_no_onset(self):
        """Pairs of reads after idle wake latgovd, which cannot journal, so
        holds nothing: no constraint was written, so none is an onset in
        the metrics (latgov_onset_delay_seconds). Once the runtime
        directory has room, the same reads hold, and are onsets."""
        run, filler = self.full_runtime_dir()
        d = self.start_daemon(CONFIG.format(backend="percpu", limit=0).replace(
            'log_level = "info"', 'log_level = "debug"'), runtime_dir=run, events=None)

        def onsets():
            try:
                with open(self.metrics_file) as f:
                    found = re.search(r"(?m)^latgov_onset_delay_seconds_count (\d+)$", f.read())
            except FileNotFoundError:
                return None
            return int(found.group(1)) if found else None

        def pairs(n):
            """n pairs of reads 30 ms apart: latgovd's wake-ups by a request
            that activated a queue, the onsets then counted, and the values
            the CPUs read meanwhile."""
            log_at, seen = len(d.log()), set()
            reader = DirectReader()
            try:
                for _ in range(n):
                    time.sleep(0.03)
                    reader.read()
                    reader.read()
                    seen.add(tuple(sorted(read_all().items())))
            finally:
                reader.close()
            ended = time.time()
            # The metrics follow the status, written as the queue goes idle
            # after the last read: a count read before would say nothing.
            self.assertIsNotNone(
                self.wait_value(lambda: os.stat(self.metrics_file).st_mtime > ended - 0.01,
                                True, 2.0),
                f"{self.metrics_file} not rewritten after the reads")
            woken = len(re.findall(r"woken by a request issued", d.log()[log_at:]))
            return woken, onsets(), seen

        self.assertIsNotNone(self.wait_value(lambda: onsets() is not None, True, 2.0),
                             f"no onset count in {self.metrics_file}")
        woken, counted, seen = pairs(20)
        log(f"  runtime directory full: 20 pairs of reads woke latgovd {woken} times, "
            f"{counted} onsets counted")
        self.assertEqual(seen, {tuple(sorted(self.baseline.items()))},
                         "held a CPU it could not journal")
        self.assertRegex(d.log(), r"No space left on device, not constraining cpu")
        self.assertGreaterEqual(woken, 10, "the reads did not wake latgovd: the test shows nothing")
        self.assertEqual(counted, 0, "a request for which nothing was written counted as an onset")

        os.unlink(filler)
        woken, counted, _ = pairs(20)
        log(f"  with room: 20 pairs of reads woke latgovd {woken} times, {counted} onsets counted")
        self.assertGreaterEqual(counted, 10, "reads after idle that wrote the hold not counted")
        self.assertEqual(d.stop(), 0)
        self.assert_back(self.baseline, "after stop")

    def test_31_irq_moved_without_a_uevent_is_followed(self):
        """irqbalance or an administrator moves an unmanaged IRQ, and no
        uevent says so. With a request in flight on the tree's vda (cpu 1
        held: its IRQ 36 completes there), the IRQ is moved to cpu 0:
        within the online check's period latgovd names the move, rescans,
        and holds cpu 0 instead of cpu 1 for the same request. The periodic
        check alone would take up to 60 s."""
        root, tree_values = self.sampled_tree()
        before = tree_values()
        d, holding = self.hold_in_tree(root, tree_values)
        self.assertNotEqual(holding[1], before[1], holding)
        self.assertEqual(holding[0], before[0], f"cpu 0 held before the move: {holding}")
        moved_at = time.monotonic()
        with open(os.path.join(root, "proc", "irq", "36", "effective_affinity_list"), "w") as f:
            f.write("0\n")
        d.wait_log(r"IRQ 36 \(virtio1-req\.0\) of vda queue 0 completes on cpus 0 now, not 1, "
                   r"rescanning", timeout=8.0)
        d.wait_log(r"topology scanned \(irq_moved\)", timeout=2.0)
        after = [holding[1], before[1]] + holding[2:]
        self.assertIsNotNone(self.wait_value(tree_values, after, 2.0),
                             f"cpu 0 not held in cpu 1's place: {tree_values()}")
        log(f"  IRQ 36 moved from cpu 1 to cpu 0: held there "
            f"{time.monotonic() - moved_at:.1f} s later")
        self.set_requests_in_flight(root, 0)
        self.assertIsNotNone(self.wait_value(tree_values, before, 2.0),
                             f"held after the request completed: {tree_values()}")
        self.assert_stopped_clean(d, tree_values, before)

    def test_08_onset_after_idle(self):
        """Pairs of 4k reads 30 ms apart (each pair after the 3 ms linger
        released the CPU): the onset delay, from the first request's issue to
        the constraint written, and latgovd's own part of it, against what
        the system calls it cannot avoid cost on this machine, timed before
        and after latgovd runs. Pairs, since reads that each come alone stop
        the wake-ups (isolated requests, test_onset.py)."""
        # The onset holds the completion CPU and the reader's (a waiter).
        held = [self.comp, self.other]
        baseline = onset_syscalls_us(held, 100)
        d = self.start_daemon(config_path=self.config())
        reader = DirectReader()
        n = int(os.environ.get("LATGOV_ONSET_READS", "200"))
        try:
            for _ in range(n):
                time.sleep(0.03)
                reader.read()
                reader.read()
        finally:
            reader.close()
        time.sleep(0.1)
        with open(d.status_path) as f:
            onset = json.load(f)["onset_delay"]
        self.assertEqual(d.stop(), 0)
        baseline = sorted(baseline + onset_syscalls_us(held, 100))
        syscalls_p50 = baseline[len(baseline) // 2]
        log(f"  onset after idle ({n} pairs of reads 30 ms apart): count {onset['count']}, "
            f"p50 {onset['p50_us']:.0f} us, p99 {onset['p99_us']:.0f} us, "
            f"max {onset['max_us']:.0f} us; latgovd's wake-up p50 "
            f"{onset['wake_p50_us']:.0f} us, p99 {onset['wake_p99_us']:.0f} us; its own work "
            f"p50 {onset['work_p50_us']:.0f} us, p99 {onset['work_p99_us']:.0f} us; "
            f"{onset['on_issuing_cpu']} handled on the issuing CPU; a read and a write of "
            f"cpus {held}'s files here, after the same idle gap: p50 {syscalls_p50:.0f} us")
        self.assertGreaterEqual(onset["count"], n // 2, onset)
        # What latgovd does once running: drain the events, decide, mark
        # each CPU's journal record held (one pwrite to the runtime
        # directory, written ahead before sleeping: test_journal_faults.cpp)
        # and read and write each CPU file.
        # On a 2-vCPU guest the first system call after a 30 ms sleep costs
        # most of it, in latgovd as in the timings, and that cost moves from
        # one minute to the next. Over eleven runs there: work p50 46 to 118
        # us against 38 to 61 us, 0.85 to 2.95 times; a fixed bound of
        # 100 us failed one run in three. The bound, three times the system
        # calls plus 50 us, leaves room for that noise and for the
        # bookkeeping where system calls are cheap (bare metal): it catches
        # work out of proportion (a journal sync, a rescan at each onset),
        # not one system call more (test_journal_faults.cpp checks that the
        # onset writes only the record's mark and the CPU file). Its tail and
        # the wake-up before it are the scheduler's.
        self.assertLess(onset["work_p50_us"], 3 * syscalls_p50 + 50, onset)
        self.assertLess(onset["work_p99_us"], 1000, onset)
