"""Host tests of `latgov calibrate` (QD1 reads at each idle-state level on the
completion CPU of vda) and of latgovd using its result.

Raw /dev/vda cannot be opened on this test bed, so calibrate reads a file on
vda (--file). Runs as root; a missing prerequisite FAILS, it never skips.
Helpers and the per-test setup/teardown: hostlib.py.
"""

import os
import re
import signal
import subprocess
import time
import tomllib

from hostlib import (
    CPU_SYS, CSTATES_DISK, DISK, FIO_FILE, NO_IDLE_DRIVER, ZERO_ONLY, HostTestCase,
    cpuidle_driver, cstates_calibration, idle_costs_text, idle_governor_kind, idle_states, log,
    read_all, read_cpu, write_cpu,
)

CALIBRATED_CONFIG = """\
[daemon]
log_level = "debug"
status_interval_ms = 100
calibration_file = "{path}"

[defaults]
mode = "fixed"
limit_us = 0
waiter_cpus = false  # the completion CPU is the subject
"""

AUTO_CALIBRATED_CONFIG = """\
[daemon]
log_level = "debug"
status_interval_ms = 50

[defaults]
mode = "auto"
latency_fraction = 0.1
waiter_cpus = false
"""
# limit_from where the idle-state costs decide (the tree's requests observed).
TREE_COSTS_DECIDE = "idle-state costs against latency_fraction 0.1 x the observed request latency"


def idle_state_names(cpu):
    """The names of cpu's enabled idle states other than POLL, as sysfs spells them."""
    base = f"{CPU_SYS}/cpu{cpu}/cpuidle"
    names = []
    for entry in sorted(os.listdir(base)) if os.path.isdir(base) else []:
        with open(f"{base}/{entry}/name") as f:
            name = f.read().strip()
        with open(f"{base}/{entry}/disable") as f:
            disabled = f.read().strip() != "0"
        if name != "POLL" and not disabled:
            names.append(name)
    return names


def sysfs_cpuidle_driver():
    """current_driver as the kernel spells it ("none" without a driver)."""
    path = f"{CPU_SYS}/cpuidle/current_driver"
    if not os.path.exists(path):
        return cpuidle_driver()
    with open(path) as f:
        return f.read().strip()


class CalibrateTest(HostTestCase):
    suite = "host.calibrate"

    def setUp(self):
        super().setUp()
        self.cal_run = os.path.join(self.tmp, "cal-run")

    # helpers ---------------------------------------------------------------

    def calibrate_cmd(self, output, runtime_dir=None, rounds=2, ios=200):
        return [self.latgov, "calibrate", "--file", FIO_FILE, "--rounds", str(rounds),
                "--ios", str(ios), "--output", output,
                "--runtime-dir", runtime_dir or self.cal_run]

    def calibrate(self, output, runtime_dir=None, rounds=2, ios=200, timeout=60):
        out = subprocess.run(self.calibrate_cmd(output, runtime_dir, rounds, ios),
                             capture_output=True, text=True, timeout=timeout)
        return out.returncode, out.stdout + out.stderr

    def load(self, path):
        with open(path, "rb") as f:
            return tomllib.load(f)

    def assert_journal_gone(self, runtime_dir=None):
        journal = os.path.join(runtime_dir or self.cal_run, "journal")
        self.assertFalse(os.path.exists(journal), f"calibrate left {journal}")

    # tests -------------------------------------------------------------------

    def test_01_calibrate(self):
        """A short calibration: exits 0, prints the levels, writes the TOML,
        and puts back every per-CPU value it found."""
        write_cpu(self.other, "20")  # someone else's value on the other CPU
        before = read_all()
        output = os.path.join(self.tmp, "cal.toml")
        started = time.monotonic()
        rc, text = self.calibrate(output)
        took = time.monotonic() - started
        log(f"  latgov calibrate ({took:.1f} s):\n{text.rstrip()}")
        self.assertEqual(rc, 0, text)
        self.assertEqual(read_cpu(self.other), "20", "the other CPU's value was changed")
        self.assertEqual(read_cpu(self.comp), "0", "the completion CPU was not put back")
        self.assertEqual(read_all(), before)
        self.assert_journal_gone()

        self.assertTrue(os.path.exists(output), f"no {output} written:\n{text}")
        cal = self.load(output)
        self.assertIn("machine", cal, cal)
        self.assertEqual(cal["machine"].get("cpuidle_driver"), sysfs_cpuidle_driver(), cal)
        self.assertEqual(cal["probe"]["cpu"], self.comp, cal["probe"])
        self.assertEqual(cal["probe"]["submit_cpu"], self.other, cal["probe"])
        levels = cal.get("level", [])
        names = [lv["name"] for lv in levels]
        self.assertGreaterEqual(len(levels), 2, cal)
        self.assertEqual(names[0], "poll", names)
        self.assertEqual(levels[0]["limit"], "n/a", levels[0])
        self.assertEqual(names[-1], "none", names)
        self.assertEqual(levels[-1]["limit"], "0", levels[-1])
        for lv in levels:
            self.assertGreater(lv["median_us"], 0, lv)
            self.assertEqual(len(lv["round_medians_us"]), 2, lv)
            # The table on stdout names every level.
            self.assertRegex(text, rf"(?m)^{re.escape(lv['name'])}\s", text)
        medians = ", ".join(f"{lv['name']} {lv['median_us']:.1f} us (p99 {lv['p99_us']:.1f})"
                            for lv in levels)
        log(f"  levels: {medians}")
        driver = sysfs_cpuidle_driver()
        kind = idle_governor_kind(driver)
        if kind == ZERO_ONLY:
            # The haltpoll driver or governor: only a limit of 0 counts, so
            # the levels are poll and none. Every enabled non-POLL state of
            # the studied CPU is listed under the name the kernel gives it
            # ("haltpoll idle"), and its cost is what the level that admits
            # it (none) adds over poll-only: a property of the file, not a
            # number of one machine.
            self.assertEqual(names, ["poll", "none"], names)
            states = {s["name"]: s for s in cal.get("state", [])}
            kernel_states = idle_state_names(self.comp)
            self.assertTrue(kernel_states, f"cpu{self.comp} has no non-POLL idle state")
            poll, none = levels[0]["median_us"], levels[-1]["median_us"]
            for name in kernel_states:
                self.assertIn(name, states, cal)
                cost = states[name]["measured_cost_us"]
                log(f"  {name}: declared {states[name]['declared_exit_latency_us']} us, "
                    f"measured {cost:.1f} us")
                self.assertAlmostEqual(cost, max(0.0, none - poll), delta=0.02, msg=states)
        elif kind == NO_IDLE_DRIVER:
            # No cpuidle driver: the kernel lists no idle state, and the
            # calibration none (its two levels, poll and none, are checked
            # above).
            self.assertEqual(idle_states(self.comp), [],
                             f"cpu{self.comp} lists idle states with no cpuidle driver")
            self.assertEqual(cal.get("state", []), [], cal)
            self.assertEqual(names, ["poll", "none"], names)
        else:
            # A latency-aware governor: every enabled state of the studied
            # CPU (POLL too, as the probe lists them) is listed under its
            # kernel name with its declared exit latency, and no other.
            states = {s["name"]: s for s in cal.get("state", [])}
            kernel = [s for s in idle_states(self.comp) if not s["disabled"]]
            self.assertTrue([s for s in kernel if s["name"] != "POLL"],
                            f"cpu{self.comp} has no non-POLL idle state under {driver}")
            self.assertEqual(sorted(states), sorted(s["name"] for s in kernel), cal)
            for s in kernel:
                self.assertEqual(states[s["name"]]["declared_exit_latency_us"], s["latency"],
                                 states)

    def test_02_sigint_puts_everything_back(self):
        write_cpu(self.other, "20")
        before = read_all()
        output = os.path.join(self.tmp, "cal.toml")
        proc = subprocess.Popen(self.calibrate_cmd(output, rounds=50, ios=1000),
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        try:
            seen = set()
            t0 = time.monotonic()
            while time.monotonic() - t0 < 1.0 and proc.poll() is None:
                seen.add(read_cpu(self.comp))
                time.sleep(0.002)
            # Interrupt it while it holds the poll level when possible.
            t1 = time.monotonic()
            while time.monotonic() - t1 < 1.0 and proc.poll() is None:
                if read_cpu(self.comp) == "n/a":
                    seen.add("n/a")
                    break
                time.sleep(0.0005)
            at_signal = read_cpu(self.comp)
            if proc.poll() is not None:
                self.fail("calibrate --rounds 50 ended before the SIGINT: "
                          + proc.communicate()[0])
            proc.send_signal(signal.SIGINT)
            text = proc.communicate(timeout=10)[0]
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        log(f"  SIGINT with cpu {self.comp} at {at_signal!r} (seen {sorted(seen)}); "
            f"rc {proc.returncode}: {text.strip()}")
        self.assertIn("n/a", seen, f"calibrate never held cpu {self.comp} at the poll level")
        self.assertNotEqual(proc.returncode, 0, text)
        self.assertIn("interrupted", text)
        self.assertEqual(read_all(), before, "values not put back after SIGINT")
        self.assert_journal_gone()
        self.assertFalse(os.path.exists(output), "calibration written after SIGINT")

    def test_03_refuses_while_latgovd_runs(self):
        d = self.start_daemon()
        output = os.path.join(self.tmp, "cal.toml")
        rc, text = self.calibrate(output, runtime_dir=d.runtime_dir, rounds=1, ios=50)
        log(f"  rc {rc}: {text.strip()}")
        self.assertNotEqual(rc, 0, text)
        self.assertRegex(text, rf"latgovd.*\bpid {d.proc.pid}\b", text)
        self.assertFalse(os.path.exists(output), "calibration written while latgovd runs")
        self.assertTrue(d.alive())
        self.assertEqual(d.stop(), 0)
        self.assertEqual(read_all(), self.baseline)

    def test_04_latgovd_uses_calibration(self):
        path = os.path.join(self.tmp, "calibration.toml")
        rc, text = self.calibrate(path, rounds=1, ios=100)
        self.assertEqual(rc, 0, text)

        d = self.start_daemon(CALIBRATED_CONFIG.format(path=path),
                              runtime_dir=os.path.join(self.tmp, "run-measured"))
        costs = self.status(d.runtime_dir).get("idle_costs", "")
        log(f"  idle_costs with this machine's calibration: {costs!r}")
        self.assertTrue(costs.startswith("measured"), costs)
        self.assertEqual(d.stop(), 0)

        with open(path) as f:
            cal = f.read()
        other_kernel = re.sub(r'(?m)^kernel = ".*"$', 'kernel = "0.0.0-another-kernel"', cal)
        self.assertNotEqual(other_kernel, cal, "no kernel line in the calibration")
        foreign = os.path.join(self.tmp, "foreign.toml")
        with open(foreign, "w") as f:
            f.write(other_kernel)
        d = self.start_daemon(CALIBRATED_CONFIG.format(path=foreign),
                              runtime_dir=os.path.join(self.tmp, "run-foreign"))
        costs = self.status(d.runtime_dir).get("idle_costs", "")
        log(f"  idle_costs with another kernel's calibration: {costs!r}")
        self.assertTrue(costs.startswith("declared ("), costs)
        self.assertIn("another machine", costs)
        self.assertEqual(d.stop(), 0)
        self.assertEqual(read_all(), self.baseline)


    def test_05_auto_uses_measured_costs(self):
        """auto mode with a calibration of the machine uses the measured
        costs, not the declared latencies. Checked on the cstates tree
        (acpi_idle/menu, latgovd with --sysroot: on any host) at 100 us a
        request, where latency_fraction 0.1 allows 10 us: the declared
        latencies keep C1 (1 us) and exclude C2 (20 us): limit 1; a
        calibration giving every state 1000 us: poll only (0), cpu 1 held
        "n/a"; one giving 0 us: every state fits, nothing held. Then on
        this machine with its own calibration rewritten the same way (every
        measured cost 1000 us, then 0 us): with no cpuidle driver the
        calibration lists no state and nothing is held; under haltpoll no
        cost decides, measured or not: both runs are decided by live IO
        (each from no evidence); elsewhere the limit those costs call for
        (run_auto checks each)."""
        config = AUTO_CALIBRATED_CONFIG
        st, dev, cpu, seen = self.auto_on_cstates_tree(config)
        self.assertEqual(st["idle_costs"], f"declared (no calibration at {self.calibration_file})")
        self.assertEqual(dev["limit_from"], TREE_COSTS_DECIDE, dev)
        self.assertEqual(dev["limit_us"], 1, "declared: C1 fits 10 us, C2 does not")
        self.assertEqual(cpu["limit_us"], 1, cpu)
        self.assertIn("1", seen, "cpu 1 of the tree never held at 1")
        for cost, limit in ((1000.0, 0), (0.0, None)):
            st, dev, cpu, seen = self.auto_on_cstates_tree(config, cstates_calibration(cost))
            self.assertTrue(st["idle_costs"].startswith(f"measured ({CSTATES_DISK}, "),
                            st["idle_costs"])
            self.assertEqual(dev["limit_from"], TREE_COSTS_DECIDE, dev)
            self.assertEqual(dev["limit_us"], limit, f"every state measured at {cost} us: {dev}")
            self.assertEqual(cpu["limit_us"], limit, cpu)
            if limit is None:
                self.assertEqual(seen, {"0"}, f"held with every state measured at {cost} us")
            else:
                self.assertLessEqual(seen, {"0", "n/a"}, seen)
                self.assertIn("n/a", seen, f"cpu 1 of the tree never held at {limit}")

        # This machine, with its own calibration.
        path = os.path.join(self.tmp, "machine-calibration.toml")
        rc, text = self.calibrate(path, rounds=1, ios=100)
        self.assertEqual(rc, 0, text)
        with open(path) as f:
            cal = f.read()
        names = [s["name"] for s in self.load(path).get("state", [])]
        driver = cpuidle_driver()
        if idle_governor_kind(driver) == NO_IDLE_DRIVER:
            # No idle state to measure: the file lists none, and with no
            # driver auto holds nothing whatever the costs (run_auto).
            self.assertEqual(names, [], cal)
            self.assertEqual(idle_state_names(self.comp), [], f"cpu{self.comp} has idle states")
        else:
            self.assertTrue(names, f"no [[state]] measured under {driver}: {cal}")
        self.assertEqual(len(re.findall(r"(?m)^measured_cost_us = ", cal)), len(names), cal)
        for cost in (1000.0, 0.0) if names else (1000.0,):
            edited = re.sub(r"(?m)^measured_cost_us = .*$", f"measured_cost_us = {cost}", cal)
            with open(self.calibration_file, "w") as f:
                f.write(edited)
            if os.path.exists(self.evidence_file):
                os.remove(self.evidence_file)  # each run learns from nothing
            st, want = self.run_auto(config, costs={name: cost for name in names})
            log(f"  measured costs {cost} us: idle_costs {st['idle_costs']!r}, limit {want}")
            self.assertTrue(st["idle_costs"].startswith("measured"), st["idle_costs"])
        self.assertEqual(read_all(), self.baseline)

    def test_06_calibrate_on_start(self):
        """calibrate_on_start with no calibration file: latgovd measures the
        idle states on a governed disk before it is ready, writes the file
        where the configuration says (the test's directory) and uses it.
        It reads the raw disk: where that cannot be opened (this bed's
        /dev/vda refuses O_DIRECT opens by root) it must say why, use the
        declared latencies and still govern, writing no file."""
        try:
            os.close(os.open(f"/dev/{DISK}", os.O_RDONLY | os.O_DIRECT))
            raw, why = True, ""
        except OSError as e:
            raw, why = False, e.strerror
        d = self.start_daemon(
            "[daemon]\nlog_level = \"debug\"\nstatus_interval_ms = 50\n"
            "calibrate_on_start = true\n\n[defaults]\nmode = \"fixed\"\nlimit_us = 0\n"
            "waiter_cpus = false\n",
            wait=False)
        d.wait_log(r"latgovd ready", timeout=60)
        self.assert_wake_mode(d)
        self.assertRegex(d.log(), r"measuring idle-state costs \(calibrate_on_start\)")
        costs = self.status(d.runtime_dir).get("idle_costs", "")
        log(f"  /dev/{DISK} {'opens' if raw else 'refused: ' + why}; idle_costs {costs!r}")
        if raw:
            self.assertTrue(os.path.exists(self.calibration_file),
                            f"no calibration written to {self.calibration_file}:\n{d.log()}")
            cal = self.load(self.calibration_file)
            self.assertEqual(cal["machine"].get("cpuidle_driver"), sysfs_cpuidle_driver(), cal)
            self.assertTrue(costs.startswith("measured"), costs)
        else:
            self.assertRegex(d.log(), rf"Failed to calibrate: .*/dev/{DISK}.*{re.escape(why)}"
                                      rf".*; using declared exit latencies")
            self.assertFalse(os.path.exists(self.calibration_file))
            self.assertTrue(costs.startswith("declared (no calibration at "), costs)
        fio = self.start_fio_held(1)
        fio.wait()
        self.assertEqual(d.stop(), 0)
        self.assertEqual(read_all(), self.baseline)

    def test_07_calibrate_on_start_replaces_another_kernels_file(self):
        """calibrate_on_start with a calibration of another kernel (as after
        an upgrade): latgovd does not use it, and measures again rather than
        keep it for ever. Where the raw disk cannot be opened (see test_06)
        the old file stays and the declared latencies govern."""
        rc, text = self.calibrate(self.calibration_file, rounds=1, ios=100)
        self.assertEqual(rc, 0, text)
        with open(self.calibration_file) as f:
            current = f.read()
        kernel = os.uname().release
        self.assertIn(f'kernel = "{kernel}"', current)
        stale = current.replace(f'kernel = "{kernel}"', 'kernel = "0.0.0-another"')
        with open(self.calibration_file, "w") as f:
            f.write(stale)
        try:
            os.close(os.open(f"/dev/{DISK}", os.O_RDONLY | os.O_DIRECT))
            raw = True
        except OSError:
            raw = False
        d = self.start_daemon(
            "[daemon]\nstatus_interval_ms = 50\ncalibrate_on_start = true\n\n"
            "[defaults]\nmode = \"fixed\"\nlimit_us = 0\nwaiter_cpus = false\n",
            wait=False)
        d.wait_log(r"latgovd ready", timeout=60)
        self.assertIn(f"calibration at {self.calibration_file} is for another machine or kernel: "
                      "measuring idle-state costs again (calibrate_on_start)", d.log())
        costs = self.status(d.runtime_dir).get("idle_costs", "")
        with open(self.calibration_file) as f:
            after = f.read()
        log(f"  /dev/{DISK} {'opens' if raw else 'refused'}; idle_costs {costs!r}")
        if raw:
            self.assertIn(f'kernel = "{kernel}"', after)
            self.assertTrue(costs.startswith("measured"), costs)
        else:
            self.assertEqual(after, stale)
            self.assertEqual(costs, idle_costs_text(f"calibration at {self.calibration_file} "
                                                    "is for another machine or kernel"))
        self.assertEqual(d.stop(), 0)
        self.assertEqual(read_all(), self.baseline)


if __name__ == "__main__":
    import unittest
    unittest.main(verbosity=2)
