#!/usr/bin/env python3
"""latgovd's log lines on a stderr that systemd connected to the journal.

When JOURNAL_STREAM names the device and inode of its stderr, latgovd writes
each line as "<N>message": the syslog priority journald takes from the
prefix, and no time or level of its own (the journal adds the time and
"latgovd[PID]:"). A JOURNAL_STREAM that names another file (stderr
redirected under systemd) gets the plain format. Both an error of the
daemon (a bad configuration) and one of `latgovd --restore`, the short-lived
ExecStopPost= process whose lines must keep their unit, are checked.

A bad configuration still puts back what the journal of a killed latgovd
records before exiting 78, in a tree (--sysroot) with its own runtime
directory.

Usage: test_journal_log.py LATGOVD
"""
import os
import re
import socket
import subprocess
import sys
import tempfile
import time
import unittest

LATGOVD = None
PLAIN = re.compile(r"^\[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{3}\] \[latgovd\] \[error\] ")


class JournalStreamLog(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.addCleanup(self.tmp.cleanup)
        self.config = os.path.join(self.tmp.name, "latgov.toml")
        with open(self.config, "w") as f:
            f.write('[daemon]\nlog_level = "info"\nbogus = 1\n')
        # a runtime directory others may write: --restore refuses it
        self.runtime = os.path.join(self.tmp.name, "run")
        os.mkdir(self.runtime)
        os.chmod(self.runtime, 0o777)
        # where a bad configuration looks for a journal to restore: none
        self.missing = os.path.join(self.tmp.name, "missing")

    def run_latgovd(self, args, journal_stream):
        """latgovd's stderr, written to a file; journal_stream(st) gives
        JOURNAL_STREAM from that file's stat (None: unset)."""
        path = os.path.join(self.tmp.name, "stderr")
        with open(path, "w+") as err:
            env = {k: v for k, v in os.environ.items() if k != "JOURNAL_STREAM"}
            stream = journal_stream(os.fstat(err.fileno()))
            if stream is not None:
                env["JOURNAL_STREAM"] = stream
            result = subprocess.run([LATGOVD, *args], stdin=subprocess.DEVNULL,
                                    stdout=subprocess.DEVNULL, stderr=err, env=env, timeout=30)
            err.seek(0)
            return result.returncode, err.read()

    def journal(self, st):
        return f"{st.st_dev}:{st.st_ino}"

    def other_file(self, st):
        return f"{st.st_dev}:{st.st_ino + 1}"

    def test_bad_configuration_on_the_journal_stream(self):
        rc, out = self.run_latgovd(["--config", self.config, "--runtime-dir", self.missing],
                                   self.journal)
        self.assertEqual(rc, 78, out)
        self.assertEqual(out, f"<3>{self.config}:3:9: [daemon] bogus: unknown key\n")

    def test_restore_refusal_on_the_journal_stream(self):
        rc, out = self.run_latgovd(["--restore", "--runtime-dir", self.runtime], self.journal)
        self.assertEqual(rc, 1, out)
        self.assertRegex(out, r"^<3>Refusing runtime directory " + re.escape(self.runtime) +
                         r": group or others may write it \(mode 0777\)\n$")

    def test_journal_stream_naming_another_file_gets_the_plain_format(self):
        rc, out = self.run_latgovd(["--restore", "--runtime-dir", self.runtime], self.other_file)
        self.assertEqual(rc, 1, out)
        self.assertRegex(out, PLAIN)
        self.assertNotIn("<3>", out)

    def test_no_journal_stream_gets_the_plain_format(self):
        rc, out = self.run_latgovd(["--config", self.config, "--runtime-dir", self.missing],
                                   lambda st: None)
        self.assertEqual(rc, 78, out)
        self.assertRegex(out, PLAIN)
        self.assertTrue(out.endswith("[daemon] bogus: unknown key\n"), out)

    def test_malformed_journal_stream_gets_the_plain_format(self):
        rc, out = self.run_latgovd(["--config", self.config, "--runtime-dir", self.missing],
                                   lambda st: "not-a-stream")
        self.assertEqual(rc, 78, out)
        self.assertRegex(out, PLAIN)


class JournaledTree:
    """A tree (--sysroot) of two CPUs, cpu 1 left at 20 by a killed run
    whose journal in a runtime directory of its own says so, and a bad
    configuration."""

    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.addCleanup(self.tmp.cleanup)
        self.root = os.path.join(self.tmp.name, "root")
        for cpu, value in ((0, "0\n"), (1, "20\n")):
            power = os.path.join(self.root, f"sys/devices/system/cpu/cpu{cpu}/power")
            os.makedirs(power)
            with open(os.path.join(power, "pm_qos_resume_latency_us"), "w") as f:
                f.write(value)
        self.runtime = os.path.join(self.tmp.name, "run")
        os.mkdir(self.runtime, 0o700)
        self.journal = os.path.join(self.runtime, "journal")
        with open(self.journal, "w") as f:
            f.write("# latgov journal\ncpu 1 original 0 written 20\n")
        self.config = os.path.join(self.tmp.name, "latgov.toml")
        with open(self.config, "w") as f:
            f.write("[defaults]\nno_such_key = 1\n")

    def slot(self, cpu):
        with open(os.path.join(self.root, f"sys/devices/system/cpu/cpu{cpu}/power/"
                               "pm_qos_resume_latency_us")) as f:
            return f.read()

    def run_latgovd(self, *extra):
        env = {k: v for k, v in os.environ.items() if k != "JOURNAL_STREAM"}
        return subprocess.run([LATGOVD, "--config", self.config, "--sysroot", self.root,
                               "--runtime-dir", self.runtime, *extra],
                              stdin=subprocess.DEVNULL, capture_output=True, text=True,
                              env=env, timeout=30)


class BadConfigurationRestores(JournaledTree, unittest.TestCase):
    """kill -9, then a start with a bad configuration: the CPU the killed
    run constrained gets its original back, the journal goes, and the exit
    is still 78. systemd's ExecStopPost= would restore too; by hand nothing
    else does."""

    def test_bad_configuration_restores_the_journal_before_exiting(self):
        result = self.run_latgovd()
        self.assertEqual(result.returncode, 78, result.stderr)
        self.assertIn("no_such_key", result.stderr)
        self.assertEqual(self.slot(1), "0", result.stderr)
        self.assertEqual(self.slot(0), "0\n")
        self.assertFalse(os.path.exists(self.journal), result.stderr)
        self.assertIn("cpu 1: restored 0 from journal", result.stderr)
        self.assertIn(f"Put back what {self.journal} recorded", result.stderr)

    def test_restore_with_dry_run_is_refused_and_restores_nothing(self):
        result = self.run_latgovd("--restore", "--dry-run")
        self.assertEqual(result.returncode, 2, result.stderr)
        self.assertIn("--restore and --dry-run exclude each other", result.stderr)
        self.assertEqual(self.slot(1), "20\n")
        self.assertTrue(os.path.exists(self.journal))

    def test_dry_run_with_a_bad_configuration_restores_nothing(self):
        result = self.run_latgovd("--dry-run")
        self.assertEqual(result.returncode, 78, result.stderr)
        self.assertEqual(self.slot(1), "20\n")
        self.assertTrue(os.path.exists(self.journal))


class RestoreOnAFullJournalStream(JournaledTree, unittest.TestCase):
    """`latgovd --restore`, as ExecStopPost= runs it, with its stderr a
    journal stream already full (journald behind): it writes without
    blocking, so its lines wait, and before it exits it waits up to a second
    for room. Read within that second, every line arrives, the report of
    any dropped first; never read, it still exits, having restored."""

    def run_on_full_stream(self, read_after):
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        self.addCleanup(ours.close)
        theirs.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4096)
        try:  # filled without O_NONBLOCK: the stream stays as systemd makes it
            while True:
                theirs.send(b"<6>filler\n" * 64, socket.MSG_DONTWAIT)
        except BlockingIOError:
            pass
        st = os.fstat(theirs.fileno())
        env = {k: v for k, v in os.environ.items() if k != "JOURNAL_STREAM"}
        env["JOURNAL_STREAM"] = f"{st.st_dev}:{st.st_ino}"
        start = time.monotonic()
        proc = subprocess.Popen([LATGOVD, "--restore", "--sysroot", self.root,
                                 "--runtime-dir", self.runtime], stdin=subprocess.DEVNULL,
                                stdout=subprocess.DEVNULL, stderr=theirs, env=env)
        theirs.close()
        received = b""
        if read_after is not None:
            time.sleep(read_after)
            ours.settimeout(10)
            while chunk := ours.recv(65536):
                received += chunk
        try:
            rc = proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
            self.fail("latgovd --restore still ran 10 s on, blocked on its journal stream")
        return rc, time.monotonic() - start, received.decode(errors="replace")

    def test_lines_wait_for_room_before_exit(self):
        rc, _, text = self.run_on_full_stream(read_after=0.3)
        self.assertEqual(rc, 0, text)
        self.assertEqual(self.slot(1), "0")
        self.assertRegex(text, r"(?m)^<\d>cpu 1: restored 0 from journal$")
        self.assertFalse(text.endswith("filler\n"), "latgovd's lines never came")

    def test_a_stream_never_read_does_not_keep_it(self):
        rc, seconds, _ = self.run_on_full_stream(read_after=None)
        self.assertEqual(rc, 0)
        self.assertEqual(self.slot(1), "0")
        self.assertFalse(os.path.exists(self.journal))
        self.assertLess(seconds, 5.0, "latgovd --restore waited on a stream nobody read")


if __name__ == "__main__":
    if len(sys.argv) < 2 or not os.access(sys.argv[1], os.X_OK):
        sys.exit("usage: test_journal_log.py LATGOVD (an executable latgovd)")
    LATGOVD = sys.argv[1]
    unittest.main(argv=[sys.argv[0], "-v"])
