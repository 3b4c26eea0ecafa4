"""Host tests of latgovd holding per-CPU / global PM QoS limits for real IO.

Runs on the virtio test bed (docs/platform.md): vda with one queue whose IRQ is
virtio<N>-req.0, 2 CPUs, as root. Everything the tests need must be there:
a missing prerequisite FAILS, it never skips.

Environment: LATGOVD and LATGOV, the paths of the two binaries (set by ctest).
Optional: LATGOV_TEST_RUNTIME_BASE, where the per-test runtime dirs go
(default /dev/shm: tmpfs, like /run in production; see test_01b for why a
runtime dir on the governed disk matters).

Each test starts its own latgovd with its own runtime dir and config, kills
it in tearDown and puts back every per-CPU value it found in setUp.
"""

import os
import re
import shutil
import signal
import subprocess
import tempfile
import time
import unittest

from hostlib import (
    DISK, EXIT_CONFIG, FIXED_CONFIG, NO_GLOBAL_LIMIT, HostTestCase, cpuidle_driver,
    disk_devno, journal_cpus, log, read_all, read_cpu, read_global, write_cpu,
)

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


# --------------------------------------------------------------------------

class GovernorTest(HostTestCase):
    suite = "host.governor"

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

    def kill9_while_holding(self, config_text=FIXED_CONFIG, attempts=5):
        """Start latgovd and fio, SIGKILL latgovd while it holds the completion
        CPU. Returns the dead daemon's runtime dir."""
        for attempt in range(attempts):
            runtime = os.path.join(self.tmp, f"run-kill-{attempt}")
            d = self.start_daemon(config_text, runtime_dir=runtime)
            fio = self.start_fio_held(3)
            d.proc.kill()
            d.proc.wait()
            fio.kill()
            value = read_cpu(self.comp)
            cpus = journal_cpus(d.journal)
            if value == "n/a":  # fio's own CPU may be journaled too, as the waiter
                self.assertIn(cpus, ([self.comp], sorted([self.comp, self.other])),
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
        log(f"  hold appeared {1000 * (held - io_start):.1f} ms after fio's IO start "
            f"({1000 * (held - fio.started):.1f} ms after fio was launched)")

        # fio waits for every read on cpu self.other: that CPU is held too, as
        # the queue's waiter. status.json is rewritten on changes; an IO stall
        # may release for a moment: poll until it shows both holds (fio runs
        # for 3 s).
        deadline = time.monotonic() + 2.0
        while True:
            st = self.status(d.runtime_dir)
            cpus = {c["cpu"]: c for c in st["cpus"]}
            if (all(cpus.get(c, {}).get("limit_us") == 0 for c in (self.comp, self.other))
                    or time.monotonic() > deadline):
                break
            time.sleep(0.02)
        self.assertTrue(fio.running(), "fio ended before status showed the holds")
        for cpu, why in ((self.comp, "completes"), (self.other, "waits")):
            self.assertIn(cpu, cpus, st)
            self.assertEqual(cpus[cpu]["limit_us"], 0, st)
            self.assertEqual(cpus[cpu]["held_for"],
                             [{"device": DISK, "queue": 0, "why": why}], st)
        for cpu, c in cpus.items():
            if cpu not in (self.comp, self.other):
                self.assertIsNone(c["limit_us"], st)
                self.assertEqual(c["held_for"], [], st)
        self.assertIn(DISK, [dev["name"] for dev in st["devices"]], st)
        fio.wait()

    def test_03_release_after_fio(self):
        self.start_daemon()
        fio = self.start_fio_held(2)
        watched = fio.watch_until_exit(lambda: read_cpu(self.comp), self.irq)
        self.assert_released(lambda: read_cpu(self.comp), "0", fio, watched,
                             f"cpu {self.comp}")
        self.assertEqual(read_cpu(self.other), "0")

    def test_04_sigterm_while_holding(self):
        d = self.start_daemon()
        fio = self.start_fio_held(3)
        both = sorted([self.comp, self.other])  # completion CPU and fio's, the waiter
        self.assertIsNotNone(self.wait_value(lambda: journal_cpus(d.journal), both, 1.0),
                             "no journal listing the held CPUs while holding")
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
        fio = self.start_fio_held(2)
        others = set()
        while fio.running():
            others.add(read_cpu(self.other))
            time.sleep(0.005)
        fio.wait()
        # fio's CPU is held as the waiter (stricter), else keeps its own value.
        self.assertIn("n/a", others)
        self.assertLessEqual(others, {"20", "n/a"})
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
        fio = self.start_fio_held(3)
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
