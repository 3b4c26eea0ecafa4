#!/usr/bin/env python3
"""`latgov COMMAND --help` and `-h`: that command's part of the usage text on
stdout and exit status 0, wherever the option stands after the command and
whatever else is given (nothing is read or run). An unknown command stays a
usage error. Output that cannot be written is a failure (exit 1).

Usage: test_help.py LATGOV
"""
import os
import re
import shutil
import subprocess
import sys
import tempfile
import unittest

LATGOV = None


def run(*args):
    return subprocess.run([LATGOV, *args], capture_output=True, text=True, timeout=30)


def commands():
    """The commands `latgov --help` lists, with the lines that describe each."""
    out = run("--help").stdout
    block = out.split("Commands:\n", 1)[1].split("\nOptions:\n", 1)[0]
    listed = {}
    for line in block.splitlines():
        m = re.match(r"^  ([a-z]+)\b", line)
        if m:
            name = m.group(1)
            listed[name] = []
        listed[name].append(line)
    return listed


class CommandHelp(unittest.TestCase):
    def test_every_command_prints_its_part(self):
        listed = commands()
        self.assertGreaterEqual(len(listed), 6, listed)
        for name, lines in listed.items():
            for flag in ("--help", "-h"):
                with self.subTest(command=name, flag=flag):
                    out = run(name, flag)
                    self.assertEqual(out.returncode, 0, out.stderr)
                    self.assertEqual(out.stderr, "")
                    # With the arguments the command must have (explain's DEVICE).
                    required = re.match(r"  (\S+(?: [^\s\[]+)*)", lines[0]).group(1)
                    self.assertTrue(
                        out.stdout.startswith(
                            f"Usage: latgov [--sysroot DIR] {required} [OPTIONS]\n"),
                        out.stdout)
                    for line in lines:
                        self.assertIn(line + "\n", out.stdout)
                    for other in listed:
                        if other != name:
                            self.assertNotRegex(out.stdout, rf"(?m)^  {other}\b")
                    self.assertIn("\nOptions:\n  --sysroot DIR", out.stdout)

    def test_help_after_other_options_runs_nothing(self):
        # status would fail on a missing runtime directory, calibrate would
        # probe, and explain needs a DEVICE: --help wins over all of it.
        for name, args in (
                ("status", ["status", "--runtime-dir", "/nonexistent", "--json", "--help"]),
                ("calibrate", ["--sysroot", "/nonexistent", "calibrate", "--device", "nvme0n1",
                               "-h"]),
                ("explain DEVICE", ["explain", "--help"])):
            with self.subTest(args=args):
                out = run(*args)
                self.assertEqual(out.returncode, 0, out.stderr)
                self.assertEqual(out.stderr, "")
                self.assertIn(f"Usage: latgov [--sysroot DIR] {name} [OPTIONS]\n", out.stdout)

    def test_sysroot_without_a_directory_says_so(self):
        # Before the command or after it, last or given empty.
        for args in (["--sysroot"], ["topology", "--sysroot"], ["--sysroot=", "topology"],
                     ["topology", "--sysroot="]):
            with self.subTest(args=args):
                out = run(*args)
                self.assertEqual(out.returncode, 2)
                self.assertIn("latgov: --sysroot needs a directory\n", out.stderr)

    def test_unknown_command_with_help_is_a_usage_error(self):
        out = run("nosuchcommand", "--help")
        self.assertEqual(out.returncode, 2)
        self.assertIn("unknown command nosuchcommand", out.stderr)
        self.assertEqual(out.stdout, "")


class OptionErrors(unittest.TestCase):
    """A usage error names what is wrong, an option left without its value
    apart from an unknown one, and shows the command's part of the usage."""

    def check(self, args, message, command):
        out = run("--sysroot", "/nonexistent", *args)
        self.assertEqual(out.returncode, 2, out.stderr)
        self.assertIn(f"latgov: {message}\n", out.stderr)
        self.assertIn(f"Usage: latgov [--sysroot DIR] {command} [OPTIONS]\n", out.stderr)
        for other in commands():
            if not command.startswith(other):
                self.assertNotRegex(out.stderr, rf"(?m)^  {other}\b")

    def test_an_option_without_its_value(self):
        for args, message, command in (
                (["explain", "nvme0n1", "--config"], "explain: --config needs a value",
                 "explain DEVICE"),
                (["explain", "nvme0n1", "--runtime-dir"], "explain: --runtime-dir needs a value",
                 "explain DEVICE"),
                (["status", "--interval"], "status: --interval needs a value", "status"),
                (["status", "--runtime-dir"], "status: --runtime-dir needs a value", "status"),
                (["calibrate", "--rounds"], "calibrate: --rounds needs a value", "calibrate")):
            with self.subTest(args=args):
                self.check(args, message, command)

    def test_an_unknown_option(self):
        for args, message, command in (
                (["status", "--bogus"], "status: unknown option --bogus", "status"),
                (["explain", "nvme0n1", "--bogus"], "explain: unknown option --bogus",
                 "explain DEVICE"),
                (["calibrate", "--bogus"], "calibrate: unknown option --bogus", "calibrate")):
            with self.subTest(args=args):
                self.check(args, message, command)

    def test_output_that_cannot_be_written_fails(self):
        """stdout on a full device: the usage text, small output (written at
        exit from stdout's buffer) and large output (written as it goes)
        each end in exit status 1 and a line that names standard output,
        not in an abort (134) or a success with nothing written (0)."""
        tree = tempfile.mkdtemp(prefix="latgov-cli-output.")
        self.addCleanup(shutil.rmtree, tree)
        golden = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "golden",
                              "host-haltpoll.tar.gz")
        subprocess.run(["tar", "xzf", golden, "-C", tree], check=True)
        for args in (["--help"], ["topology", "--help"], ["--sysroot", tree, "topology"],
                     ["--sysroot", tree, "topology", "--json"],
                     ["--sysroot", tree, "status", "--watch"]):
            with self.subTest(args=args), open("/dev/full", "w") as full:
                out = subprocess.run([LATGOV, *args], stdout=full, stderr=subprocess.PIPE,
                                     text=True, timeout=30)
                self.assertEqual(out.returncode, 1, out.stderr)
                self.assertEqual(out.stderr, "latgov: Failed to write to standard output: "
                                             "No space left on device\n")

    def test_calibrate_cpu_takes_a_cpu_number(self):
        # 2^32 would wrap to CPU 0 and 2^32 - 1 to -1 in an int.
        for value in ("4294967296", "4294967295", "-1", "one"):
            with self.subTest(value=value):
                self.check(["calibrate", "--cpu", value],
                           f"calibrate: --cpu takes a CPU number, got {value}", "calibrate")


if __name__ == "__main__":
    if len(sys.argv) < 2 or not os.access(sys.argv[1], os.X_OK):
        sys.exit("usage: test_help.py LATGOV (an executable latgov)")
    LATGOV = sys.argv[1]
    unittest.main(argv=[sys.argv[0], "-v"])
