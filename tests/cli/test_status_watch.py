#!/usr/bin/env python3
"""`latgov status --watch` against a status file that changes under it.

On a pseudo-terminal the output is fed to a small screen model that knows
only the sequences the command may use (anything else fails the test): the
screen must show the first state, then the changed one with nothing of the
first left over, without ever scrolling; Ctrl-C (typed into the terminal,
so the line discipline sends SIGINT) ends it with status 0 and the cursor
shown again. With stdout on a pipe it prints plain copies, one per
interval, and no control sequences. A status file it cannot use is named,
with what is wrong with it; one whose latgovd is gone says so.

Usage: test_status_watch.py LATGOV
"""
import fcntl
import json
import os
import pty
import re
import select
import signal
import struct
import subprocess
import sys
import tempfile
import termios
import time
import unittest

LATGOV = None
ROWS, COLS = 40, 120
TIMEOUT = 10.0  # seconds to wait for any expected frame (interval is 1 s)


def status(pid, cpus, device_limit, observed):
    """A status.json as latgovd writes it."""
    return {
        "pid": pid,
        # A first line shorter than the "no status at ..." line before it,
        # so a line not cleared to its end would show.
        "cpuidle_driver": "none",
        "cpuidle_governor": "menu",
        "idle_costs": "table",
        "global_limit_us": None,
        "cpus": [
            {
                "cpu": cpu,
                "limit_us": limit,
                "held_seconds": 1.5,
                "held_for": [{"device": "nvme0n1", "queue": cpu, "why": "completes"}],
            }
            for cpu, limit in cpus
        ],
        "devices": [
            {
                "name": "nvme0n1",
                "mode": "auto",
                "backend": "percpu",
                "observed_latency_us": observed,
                "limit_us": device_limit,
                "active_queues": [cpu for cpu, _ in cpus],
            }
        ],
    }


# Two CPUs held, then one: the second frame is shorter, so whatever the
# first left below it must be cleared. Both written by this process, which
# holds the runtime directory's lock as their latgovd would (setUp); told
# apart by their observed latency.
FIRST = status(os.getpid(), [(0, 20), (1, 20)], 20, 81.5)
SECOND = status(os.getpid(), [(0, 0)], 0, 9.5)
FIRST_MARK, SECOND_MARK = " 81.5 ", " 9.5 "


def write_status(runtime_dir, content):
    """Atomically, as latgovd does (write then rename)."""
    tmp = os.path.join(runtime_dir, ".status.json.tmp")
    with open(tmp, "w") as f:
        json.dump(content, f)
    os.rename(tmp, os.path.join(runtime_dir, "status.json"))


class Screen:
    """The terminal as far as `status --watch` may drive it."""

    SEQUENCE = re.compile(rb"\x1b\[([?0-9;]*)([A-Za-z])")
    UNFINISHED = re.compile(rb"\x1b(\[[?0-9;]*)?\Z")  # cut by the end of a read

    def __init__(self):
        self.rows = [""] * ROWS
        self.row = self.col = 0
        self.scrolled = 0
        self.cursor_visible = True
        self.homes = 0
        self.pending = b""

    def feed(self, data):
        data, self.pending = self.pending + data, b""
        i = 0
        while i < len(data):
            b = data[i : i + 1]
            if b == b"\x1b":
                m = self.SEQUENCE.match(data, i)
                if not m and self.UNFINISHED.match(data, i):
                    self.pending = data[i:]
                    return
                if not m:
                    raise AssertionError(f"unexpected escape at {data[i:i + 12]!r}")
                self.control(m.group(1).decode(), m.group(2).decode())
                i = m.end()
                continue
            if b == b"\r":
                self.col = 0
            elif b == b"\n":
                self.row += 1
                if self.row == ROWS:  # past the bottom: the screen scrolls
                    self.rows = self.rows[1:] + [""]
                    self.row = ROWS - 1
                    self.scrolled += 1
            elif b[0] < 0x20:
                raise AssertionError(f"unexpected control byte {b!r}")
            else:
                line = self.rows[self.row].ljust(self.col)
                self.rows[self.row] = line[: self.col] + b.decode("latin-1") + line[self.col + 1 :]
                self.col += 1
            i += 1

    def control(self, params, final):
        if final == "H" and params == "":
            self.row = self.col = 0
            self.homes += 1
        elif final == "K" and params == "":
            self.rows[self.row] = self.rows[self.row][: self.col]
        elif final == "J" and params == "":
            self.rows[self.row] = self.rows[self.row][: self.col]
            for r in range(self.row + 1, ROWS):
                self.rows[r] = ""
        elif final == "J" and params == "2":
            self.rows = [""] * ROWS
        elif final in "lh" and params == "?25":
            self.cursor_visible = final == "h"
        else:
            raise AssertionError(f"unexpected sequence ESC[{params}{final}")

    def text(self):
        return "\n".join(r.rstrip() for r in self.rows).rstrip("\n")


class Terminal:
    """latgov on the slave side of a pseudo-terminal, as its session leader."""

    def __init__(self, argv):
        self.pid, self.master = pty.fork()
        if self.pid == 0:
            try:
                fcntl.ioctl(0, termios.TIOCSWINSZ, struct.pack("HHHH", ROWS, COLS, 0, 0))
                os.execv(argv[0], argv)
            finally:
                os._exit(127)
        self.raw = b""
        self.screen = Screen()
        self.status = None

    def read(self, timeout):
        ready, _, _ = select.select([self.master], [], [], timeout)
        if not ready:
            return False
        try:
            data = os.read(self.master, 65536)
        except OSError:  # EIO: the slave side is closed, the child is gone
            data = b""
        if not data:
            return None
        self.raw += data
        self.screen.feed(data)
        return True

    def wait_for(self, what, predicate):
        """Until a whole frame (ending with clear-below) is drawn and shows `what`."""
        deadline = time.monotonic() + TIMEOUT
        while not (self.raw.endswith(b"\x1b[J") and predicate()):
            left = deadline - time.monotonic()
            if left <= 0 or self.read(left) is None:
                raise AssertionError(f"never saw {what}; screen:\n{self.screen.text()}\nraw: {self.raw[-400:]!r}")

    def type(self, data):
        os.write(self.master, data)

    def finish(self):
        deadline = time.monotonic() + TIMEOUT
        while time.monotonic() < deadline and self.read(deadline - time.monotonic()) is not None:
            pass
        _, self.status = os.waitpid(self.pid, 0)
        os.close(self.master)

    def kill(self):
        if self.status is None:
            os.kill(self.pid, signal.SIGKILL)
            os.waitpid(self.pid, 0)
            os.close(self.master)


class StatusWatch(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.addCleanup(self.tmp.cleanup)
        self.runtime = os.path.join(self.tmp.name, "run")
        self.root = os.path.join(self.tmp.name, "root")  # empty: no other holders
        os.makedirs(self.runtime)
        os.makedirs(self.root)
        # The latgovd of the statuses below runs: it holds the runtime
        # directory's lock (this process, here).
        self.lock = os.open(self.runtime, os.O_RDONLY | os.O_DIRECTORY)
        self.addCleanup(os.close, self.lock)
        fcntl.flock(self.lock, fcntl.LOCK_EX)

    def argv(self, interval):
        return [LATGOV, "--sysroot", self.root, "status", "--watch", "--interval", str(interval),
                "--runtime-dir", self.runtime]

    def test_terminal_redraws_in_place_and_ctrl_c_restores_the_cursor(self):
        term = Terminal(self.argv(1))
        self.addCleanup(term.kill)
        screen = term.screen

        term.wait_for("the frame without a status file", lambda: "is latgovd running?" in screen.text())
        self.assertFalse(screen.cursor_visible, "the cursor is hidden while watching")

        write_status(self.runtime, FIRST)
        term.wait_for("the first state", lambda: FIRST_MARK in screen.text())
        first = screen.text()
        self.assertRegex(first, r"(?m)^0 +20 +1\.5 +nvme0n1/0 \(completes\)$")
        self.assertRegex(first, r"(?m)^1 +20 +1\.5 +nvme0n1/1 \(completes\)$")
        self.assertRegex(first, r"(?m)^nvme0n1 +auto +percpu +81\.5 +20 +0,1$")
        self.assertNotIn("is latgovd running?", first)
        homes_at_first = screen.homes

        write_status(self.runtime, SECOND)
        term.wait_for("the changed state", lambda: SECOND_MARK in screen.text())
        second = screen.text()
        self.assertRegex(second, r"(?m)^0 +0 \(poll\) +1\.5 +nvme0n1/0 \(completes\)$")
        self.assertRegex(second, r"(?m)^nvme0n1 +auto +percpu +9\.5 +0 \(poll\) +0$")
        # Drawn over the first frame: nothing of it is left, the screen
        # starts with the frame and ends with its footer.
        self.assertNotRegex(second, r"(?m)^1 +20 ")
        self.assertNotIn("81.5", second)
        lines = second.split("\n")
        self.assertTrue(lines[0].startswith(f"latgovd pid {os.getpid()}"), lines[0])
        self.assertRegex(lines[-1], r"^Every 1\.0 s, \d\d:\d\d:\d\d \(Ctrl-C stops\)$")
        self.assertEqual(screen.scrolled, 0, "frames are redrawn, not scrolled")
        self.assertGreater(screen.homes, homes_at_first)
        # Every frame starts at the top left: none is printed below another.
        frames = term.raw.count(b"latgovd pid") + term.raw.count(b"no status at")
        self.assertGreaterEqual(frames, 3)
        self.assertEqual(term.raw.count(b"\x1b[Hlatgovd pid") + term.raw.count(b"\x1b[Hno status at"), frames)

        term.type(b"\x03")  # Ctrl-C: the line discipline sends SIGINT
        term.finish()
        self.assertTrue(os.WIFEXITED(term.status), f"killed by a signal: {term.status}")
        self.assertEqual(os.WEXITSTATUS(term.status), 0)
        self.assertTrue(screen.cursor_visible, "the cursor is shown again on the way out")
        self.assertGreater(term.raw.rindex(b"\x1b[?25h"), term.raw.rindex(b"\x1b[?25l"))
        self.assertEqual(screen.scrolled, 0)

    def test_terminal_resize_redraws_at_once_and_sigterm_ends_cleanly(self):
        write_status(self.runtime, FIRST)
        term = Terminal(self.argv(3600))
        self.addCleanup(term.kill)
        term.wait_for("the first frame", lambda: FIRST_MARK in term.screen.text())
        homes = term.screen.homes
        started = time.monotonic()
        fcntl.ioctl(term.master, termios.TIOCSWINSZ, struct.pack("HHHH", ROWS, COLS - 1, 0, 0))
        term.wait_for("a redraw after the resize", lambda: term.screen.homes > homes)
        self.assertLess(time.monotonic() - started, 5, "a resize redraws without waiting the interval")
        os.kill(term.pid, signal.SIGTERM)
        term.finish()
        self.assertTrue(os.WIFEXITED(term.status), f"killed by a signal: {term.status}")
        self.assertEqual(os.WEXITSTATUS(term.status), 0)
        self.assertTrue(term.screen.cursor_visible)

    def test_pipe_gets_plain_copies(self):
        proc = subprocess.Popen(self.argv(1), stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        self.addCleanup(lambda: proc.poll() is None and proc.kill())
        out = b""

        def wait_for(what, needle):
            nonlocal out
            deadline = time.monotonic() + TIMEOUT
            while needle not in out:
                left = deadline - time.monotonic()
                ready = left > 0 and select.select([proc.stdout], [], [], left)[0]
                chunk = os.read(proc.stdout.fileno(), 65536) if ready else b""
                if not chunk:
                    self.fail(f"never saw {what}; output:\n{out.decode(errors='replace')}")
                out += chunk

        wait_for("the copy without a status file", b"is latgovd running?")
        write_status(self.runtime, FIRST)
        wait_for("the first state", FIRST_MARK.encode())
        write_status(self.runtime, SECOND)
        wait_for("the changed state", SECOND_MARK.encode())
        proc.send_signal(signal.SIGINT)
        rest, err = proc.communicate(timeout=TIMEOUT)
        out += rest
        self.assertEqual(proc.returncode, 0, err.decode())
        self.assertEqual(err, b"")
        self.assertNotIn(b"\x1b", out, "no control sequences on a pipe")
        text = out.decode()
        # Whole copies, each headed by its time, in order.
        copies = re.split(r"(?m)^--- \d\d:\d\d:\d\d, every 1\.0 s ---\n", text)
        self.assertEqual(copies[0], "")
        copies = copies[1:]
        self.assertGreaterEqual(len(copies), 3)
        first = next(i for i, c in enumerate(copies) if FIRST_MARK in c)
        second = next(i for i, c in enumerate(copies) if SECOND_MARK in c)
        self.assertLess(first, second)
        self.assertTrue(all(c.endswith("other holders: none\n\n") for c in copies[first:]), copies)

    def test_a_status_file_it_cannot_use_is_named_with_why(self):
        path = os.path.join(self.runtime, "status.json")

        def status():
            return subprocess.run([LATGOV, "--sysroot", self.root, "status", "--runtime-dir",
                                   self.runtime], capture_output=True, text=True, timeout=TIMEOUT)
        result = status()
        self.assertNotEqual(result.returncode, 0)
        self.assertIn(f"no status at {path}: is latgovd running?", result.stderr)
        with open(path, "w") as f:
            f.write("[1, 2]\n")  # JSON, but not a status
        result = status()
        self.assertNotEqual(result.returncode, 0)
        self.assertIn(f"Failed to parse {path}: not a JSON object", result.stderr)
        os.unlink(path)
        os.mkdir(path)  # there, but not a file: not "is latgovd running?"
        result = status()
        self.assertNotEqual(result.returncode, 0)
        self.assertIn(f"Failed to read {path}: Is a directory", result.stderr)
        self.assertNotIn("is latgovd running", result.stderr)

    def test_json_refuses_a_status_the_text_cannot_read(self):
        """--json is for scripts: it passes on latgovd's document (with
        latgovd_running added) only where the text form can read it too;
        one that breaks the schema fails both, with the same words."""
        def run(*extra):
            return subprocess.run([LATGOV, "--sysroot", self.root, "status", "--runtime-dir",
                                   self.runtime, *extra],
                                  capture_output=True, text=True, timeout=TIMEOUT)
        sound = status(os.getpid(), [(0, 20)], 20, 81.5)  # holds the lock (setUp)
        write_status(self.runtime, sound)
        result = run("--json")
        self.assertEqual(result.returncode, 0, result.stderr)
        printed = json.loads(result.stdout)
        self.assertIs(printed.pop("latgovd_running"), True)
        self.assertEqual(printed, sound)
        broken = dict(sound, cpus="all of them")
        write_status(self.runtime, broken)
        text, as_json = run(), run("--json")
        self.assertEqual(text.returncode, 1, text.stdout)
        self.assertIn(f"Failed to read {os.path.join(self.runtime, 'status.json')}: ",
                      text.stderr)
        self.assertEqual(as_json.returncode, 1, as_json.stdout)
        self.assertEqual(as_json.stdout, "")
        self.assertEqual(as_json.stderr, text.stderr)

    def test_control_bytes_from_the_status_do_not_reach_the_terminal(self):
        """The status carries strings read from the system (the cpuidle
        driver's name, device names): a control character in one (ESC,
        BEL, CR, DEL, the C1 CSI) is shown as '?' by the text form and by
        --watch; --json escapes it."""
        hostile = "none\x1b]0;owned\x07\x1b[2J\r\x7f\u009b2J"
        write_status(self.runtime, dict(status(os.getpid(), [(0, 20)], 20, 81.5),
                                        cpuidle_driver=hostile))
        common = [LATGOV, "--sysroot", self.root, "status", "--runtime-dir", self.runtime]
        text = subprocess.run(common, capture_output=True, timeout=TIMEOUT)
        self.assertEqual(text.returncode, 0, text.stderr)
        shown = b"none?]0;owned??[2J???2J"
        self.assertIn(shown, text.stdout)
        watch = subprocess.Popen(common + ["--watch"], stdout=subprocess.PIPE)
        try:
            frame = watch.stdout.readline() + watch.stdout.readline()
        finally:
            watch.terminate()
            watch.wait(TIMEOUT)
        self.assertIn(shown, frame)
        as_json = subprocess.run(common + ["--json"], capture_output=True, timeout=TIMEOUT)
        self.assertEqual(json.loads(as_json.stdout)["cpuidle_driver"], hostile)
        for out in (text.stdout, frame, as_json.stdout):
            self.assertFalse(any(b < 0x20 and b not in b"\n\t" for b in out), out)
            self.assertNotIn(b"\x7f", out)
            self.assertNotIn("\u009b".encode(), out)

    def test_a_status_whose_latgovd_is_gone_says_so(self):
        """A latgovd killed without `latgovd --restore` leaves its status:
        status says its writer is gone (nothing holds the runtime
        directory's lock), and what to do, after the status itself."""
        write_status(self.runtime, status(3333, [(0, 20)], 20, 81.5))
        fcntl.flock(self.lock, fcntl.LOCK_UN)
        result = subprocess.run([LATGOV, "--sysroot", self.root, "status", "--runtime-dir",
                                 self.runtime], capture_output=True, text=True, timeout=TIMEOUT)
        self.assertEqual(result.returncode, 0, result.stderr)
        self.assertTrue(result.stdout.startswith("latgovd pid 3333"), result.stdout)
        self.assertTrue(result.stdout.endswith(
            "The latgovd that wrote this status (pid 3333) is not running: the limits it shows "
            "may still be held. `latgovd --restore` puts back what its journal records.\n"),
            result.stdout)

    def test_watch_with_json_is_refused(self):
        result = subprocess.run([LATGOV, "status", "--watch", "--json", "--runtime-dir", self.runtime],
                                capture_output=True, text=True, timeout=TIMEOUT)
        self.assertEqual(result.returncode, 2)
        self.assertIn("--watch redraws the text; --json prints once", result.stderr)

    def test_interval_without_watch_is_refused(self):
        """--interval alone would be ignored (the status prints once): said,
        rather than silently taken."""
        result = subprocess.run([LATGOV, "status", "--interval", "2", "--runtime-dir",
                                 self.runtime], capture_output=True, text=True, timeout=TIMEOUT)
        self.assertEqual(result.returncode, 2)
        self.assertIn("--interval sets how often --watch redraws; give --watch too",
                      result.stderr)

    def test_sysroot_after_the_command_takes_either_spelling(self):
        # The same status as with --sysroot before the command, which the
        # other cases use, shown against the same tree: its
        # /dev/cpu_dma_latency holds 50 us, which only the tree's does.
        os.makedirs(os.path.join(self.root, "dev"))
        with open(os.path.join(self.root, "dev", "cpu_dma_latency"), "wb") as f:
            f.write(struct.pack("=i", 50))
        write_status(self.runtime, FIRST)
        before = subprocess.run([LATGOV, "--sysroot", self.root, "status", "--runtime-dir",
                                 self.runtime], capture_output=True, text=True, timeout=TIMEOUT)
        self.assertEqual(before.returncode, 0, before.stderr)
        self.assertIn(FIRST_MARK, before.stdout)
        self.assertIn("other holders (kept, not governed by latgov): /dev/cpu_dma_latency 50 us",
                      before.stdout)
        for spelling in (["--sysroot", self.root], [f"--sysroot={self.root}"]):
            result = subprocess.run([LATGOV, "status", *spelling, "--runtime-dir", self.runtime],
                                    capture_output=True, text=True, timeout=TIMEOUT)
            self.assertEqual((result.returncode, result.stdout), (0, before.stdout),
                             f"{spelling}: {result.stderr}")


if __name__ == "__main__":
    if len(sys.argv) < 2 or not os.access(sys.argv[1], os.X_OK):
        sys.exit("usage: test_status_watch.py LATGOV (an executable latgov)")
    LATGOV = sys.argv[1]
    unittest.main(argv=[sys.argv[0], "-v"])
