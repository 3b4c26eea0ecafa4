#!/usr/bin/env python3
"""latgovd's log lines on a stderr that systemd connected to the journal.

When JOURNAL_STREAM names the device and inode of its stderr, latgovd writes
each line as "<N>message": the syslog priority journald takes from the
prefix, and no time or level of its own (the journal adds the time and
"latgovd[PID]:"). A JOURNAL_STREAM that names another file (stderr
redirected under systemd) gets the plain format. Both an error of the
daemon (a bad configuration) and one of `latgovd --restore`, the short-lived
ExecStopPost= process whose lines must keep their unit, are checked.

Usage: test_journal_log.py LATGOVD
"""
import os
import re
import subprocess
import sys
import tempfile
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
        rc, out = self.run_latgovd(["--config", self.config], self.journal)
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
        rc, out = self.run_latgovd(["--config", self.config], lambda st: None)
        self.assertEqual(rc, 78, out)
        self.assertRegex(out, PLAIN)
        self.assertTrue(out.endswith("[daemon] bogus: unknown key\n"), out)

    def test_malformed_journal_stream_gets_the_plain_format(self):
        rc, out = self.run_latgovd(["--config", self.config], lambda st: "not-a-stream")
        self.assertEqual(rc, 78, out)
        self.assertRegex(out, PLAIN)


if __name__ == "__main__":
    if len(sys.argv) < 2 or not os.access(sys.argv[1], os.X_OK):
        sys.exit("usage: test_journal_log.py LATGOVD (an executable latgovd)")
    LATGOVD = sys.argv[1]
    unittest.main(argv=[sys.argv[0], "-v"])
