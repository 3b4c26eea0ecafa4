#!/usr/bin/env python3
"""`latgov calibrate` reads the configuration latgovd reads: its device
policy picks the disk, and its calibration_file is where the result goes
unless --output says otherwise. A configuration that does not load is an
error naming the file.

The tree under --sysroot has two virtio disks, vda and vdb, one queue each,
whose device nodes are 2 MiB files read for real (O_DIRECT, io_uring), and
per-CPU PM QoS slots that are plain files. It lives in SCRATCH_DIR (the
build directory): /tmp may be a tmpfs without O_DIRECT.

Usage: test_calibrate_config.py LATGOV SCRATCH_DIR
"""
import os
import shutil
import subprocess
import sys
import tempfile
import tomllib
import unittest

LATGOV = None
SCRATCH = None


def write(path, text):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        f.write(text)


def build_tree(root, cpus):
    """The disks' queues take requests from every CPU this test may run on
    and complete on the last of them."""
    cpu_list = ",".join(str(c) for c in cpus)
    write(f"{root}/sys/devices/system/cpu/online", cpu_list + "\n")
    for cpu in cpus:
        base = f"{root}/sys/devices/system/cpu/cpu{cpu}"
        write(f"{base}/power/pm_qos_resume_latency_us", "0\n")
        for index, (name, latency) in enumerate((("POLL", "0"), ("C1", "2"))):
            for key, value in (("name", name), ("latency", latency), ("residency", latency),
                               ("disable", "0")):
                write(f"{base}/cpuidle/state{index}/{key}", value + "\n")
    for n, disk in enumerate(("vda", "vdb")):
        virtio = f"virtio{n + 1}"
        pci = f"pci0000:00/0000:00:0{n + 2}.0"
        block = f"{root}/sys/devices/{pci}/{virtio}/block/{disk}"
        write(f"{block}/dev", f"254:{n * 16}\n")
        write(f"{block}/mq/0/cpu_list", cpu_list + "\n")
        os.symlink(f"../../../{virtio}", f"{block}/device")
        os.makedirs(f"{root}/sys/block", exist_ok=True)
        os.symlink(f"../devices/{pci}/{virtio}/block/{disk}", f"{root}/sys/block/{disk}")
        irq = str(36 + n)
        write(f"{root}/sys/kernel/irq/{irq}/actions", f"{virtio}-req.0\n")
        write(f"{root}/proc/irq/{irq}/smp_affinity_list", cpu_list + "\n")
        write(f"{root}/proc/irq/{irq}/effective_affinity_list", f"{cpus[-1]}\n")
        write(f"{root}/dev/{disk}", "x" * (2 << 20))


class CalibrateConfig(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="latgov-calibrate-config.", dir=SCRATCH)
        self.addCleanup(shutil.rmtree, self.tmp)
        self.root = os.path.join(self.tmp, "root")
        self.cpus = sorted(os.sched_getaffinity(0))
        build_tree(self.root, self.cpus)
        # The runtime directory goes below /tmp, not the build directory:
        # latgov refuses one below a directory another user owns, as a
        # checkout may be.
        self.run_dir = tempfile.mkdtemp(prefix="latgov-calibrate-run.")
        self.addCleanup(shutil.rmtree, self.run_dir)
        self.state = os.path.join(self.tmp, "state")
        os.mkdir(self.state)
        self.configured = os.path.join(self.state, "calibration.toml")
        # vda is left alone: the first disk the configuration governs is vdb.
        self.config = os.path.join(self.tmp, "etc/latgov.toml")
        write(self.config, f'[daemon]\ncalibration_file = "{self.configured}"\n\n'
                           '[[device]]\nname = "vda"\nmode = "off"\n')

    def calibrate(self, *args, config=None):
        argv = [LATGOV, "--sysroot", self.root, "calibrate", "--config", config or self.config,
                "--rounds", "1", "--ios", "10", "--runtime-dir", os.path.join(self.run_dir, "run"),
                *args]
        out = subprocess.run(argv, capture_output=True, text=True, timeout=60)
        return out.returncode, out.stdout + out.stderr

    def probed(self, path):
        with open(path, "rb") as f:
            return tomllib.load(f)["probe"]["device"]

    def slots(self):
        values = []
        for cpu in self.cpus:
            with open(f"{self.root}/sys/devices/system/cpu/cpu{cpu}/power/"
                      "pm_qos_resume_latency_us") as f:
                values.append(f.read().strip())
        return values

    def test_configured_device_policy_and_calibration_file(self):
        rc, out = self.calibrate()
        self.assertEqual(rc, 0, out)
        self.assertIn(f"wrote {self.configured}\n", out)
        self.assertEqual(self.probed(self.configured), "vdb")
        self.assertEqual(self.slots(), ["0"] * len(self.cpus))

    def test_output_overrides_the_configured_file(self):
        elsewhere = os.path.join(self.tmp, "elsewhere.toml")
        rc, out = self.calibrate("--output", elsewhere)
        self.assertEqual(rc, 0, out)
        self.assertIn(f"wrote {elsewhere}\n", out)
        self.assertEqual(self.probed(elsewhere), "vdb")
        self.assertFalse(os.path.exists(self.configured))

    def test_a_device_the_configuration_leaves_alone_is_refused(self):
        rc, out = self.calibrate("--device", "vda")
        self.assertEqual(rc, 1, out)
        self.assertIn("Device vda is not governed", out)
        self.assertFalse(os.path.exists(self.configured))

    def test_a_drop_in_applies(self):
        write(os.path.join(self.tmp, "etc/latgov.d/50-vdb.toml"),
              '[[device]]\nname = "vdb"\nmode = "off"\n')
        rc, out = self.calibrate()
        self.assertEqual(rc, 1, out)
        self.assertIn("no governed disk", out)

    def test_a_bad_configuration_is_named(self):
        bad = os.path.join(self.tmp, "bad.toml")
        write(bad, "[daemon]\nno_such_key = 1\n")
        rc, out = self.calibrate(config=bad)
        self.assertEqual(rc, 1, out)
        self.assertIn(f"{bad}:2:", out)
        missing = os.path.join(self.tmp, "missing.toml")
        rc, out = self.calibrate(config=missing)
        self.assertEqual(rc, 1, out)
        self.assertIn(missing, out)
        self.assertFalse(os.path.exists(self.configured))

    def test_a_level_that_cannot_be_held_is_not_measured(self):
        """The runtime directory keeps the journal of a latgovd that ran on
        another root: the probe may neither take it over nor hold a CPU
        without it. It stops at the first level that needs a hold, names
        why, and writes no calibration measured without its limits."""
        run = os.path.join(self.run_dir, "run")
        os.mkdir(run, 0o700)
        journal = os.path.join(run, "journal")
        elsewhere = os.path.join(self.tmp, "another-root")
        recorded = ("# latgov journal: per-CPU pm_qos_resume_latency_us to restore\n"
                    f"# root {elsewhere}\ncpu 0 original 0 written n/a\n")
        write(journal, recorded)
        rc, out = self.calibrate()
        self.assertEqual(rc, 1, out)
        self.assertRegex(out, rf"Calibration stopped \(cpu {self.cpus[-1]} could not be held at "
                              r"\S+ for the \S+ level \(it reads 0\)\)")
        self.assertIn(f"{journal} records the CPUs of the tree {elsewhere}", out)
        self.assertFalse(os.path.exists(self.configured), "a calibration measured unheld")
        self.assertEqual(self.slots(), ["0"] * len(self.cpus))
        with open(journal) as f:
            self.assertEqual(f.read(), recorded)


if __name__ == "__main__":
    if len(sys.argv) < 3 or not os.access(sys.argv[1], os.X_OK) or not os.path.isdir(sys.argv[2]):
        sys.exit("usage: test_calibrate_config.py LATGOV SCRATCH_DIR")
    LATGOV, SCRATCH = sys.argv[1], sys.argv[2]
    unittest.main(argv=[sys.argv[0], "-v"])
