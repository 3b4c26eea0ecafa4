"""Running: fio, latgovd and /dev/cpu_dma_latency for one run of one
workload under one mode, and the measurements taken around it."""

from __future__ import annotations

import contextlib
import datetime
import fcntl
import hashlib
import os
import shutil
import signal
import struct
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

from . import sysstate as ss
from .fio import (FioOutputError, fio_command, job_runtime_s, offsets_read, parse_fio_file,
                  round_seed, warmup_job_text, warmup_seconds)
from .meta import Settings
from .results import PERCPU_MODES, WARMUP
from .sampler import QosSampler, status_after
from .sysstate import HostInfo, SysRoot, WaiterPlacement
from .target import HarnessError, Target
from .workloads import Workload

BENCH = Path(__file__).resolve().parent.parent
JOBS = BENCH / "jobs"
DEFAULT_CONFIG = "/etc/latgov/latgov.toml"
UNIT_FILE = BENCH.parent / "systemd" / "latgov.service"
DEFAULT_CALIBRATION = "/var/lib/latgov/calibration.toml"
DEFAULT_EVIDENCE = "/var/lib/latgov/evidence"
DEFAULT_STATUS_INTERVAL_MS = 1000
# Beside the evidence file: where the original waits while the bench runs.
EVIDENCE_SAVED_SUFFIX = ".bench-ab-saved"
ALL_MODES = ["off", "static", "latgov", "latgov-dryrun"]
DAEMON_MODES = ("latgov", "latgov-dryrun")
KNOWN_MODES = ALL_MODES + list(PERCPU_MODES)
PERCPU_HOLD = "n/a"  # a resume latency of 0 us: no idle state but polling
# What the per-CPU modes found on the CPUs they hold, while they hold them.
PERCPU_JOURNAL = "/run/latgov-bench-ab.percpu"
# Held by each bench/ab for as long as it runs.
BENCH_LOCK = "/run/latgov-bench-ab.lock"


def repo_relative(path: str) -> str:
    """`path` as the run records it: relative to the repository when it lies
    inside it (results are committed, and name no path of one machine)."""
    try:
        return str(Path(path).resolve().relative_to(BENCH.parent.resolve()))
    except ValueError:
        return path


def unit_nice() -> int:
    """The Nice= that latgov.service runs latgovd at: the bench runs it so."""
    for line in UNIT_FILE.read_text().splitlines():
        if line.startswith("Nice="):
            return int(line.split("=", 1)[1])
    raise HarnessError("%s sets no Nice=" % UNIT_FILE)


class Interrupted(Exception):
    pass


class MachineConstrained(HarnessError):
    """A CPU's PM QoS value is not back where the run found it, even after
    `latgovd --restore`: the runs that follow would measure constrained
    CPUs, so the bench stops."""


# The signals that end a bench run (Interrupted).
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


@contextlib.contextmanager
def signals_held():
    """Delivers the stop signals only after the block: a step and its
    record (a file moved aside and noted in the session) are not cut in
    between."""
    old = signal.pthread_sigmask(signal.SIG_BLOCK, STOP_SIGNALS)
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, old)


@contextlib.contextmanager
def signals_ignored():
    """The stop signals ignored for the block: the bench is stopping
    already, and a second Ctrl-C must not cut the release short."""
    old = {s: signal.signal(s, signal.SIG_IGN) for s in STOP_SIGNALS}
    try:
        yield
    finally:
        for s, handler in old.items():
            signal.signal(s, handler)


def log(msg: str) -> None:
    print("[ab %s] %s" % (time.strftime("%H:%M:%S"), msg), flush=True)


def sha256_of(path: str | Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def tail(path: Path, n: int = 15) -> str:
    try:
        with open(path) as f:
            return "".join(f.readlines()[-n:])
    except OSError:
        return ""


@dataclass(frozen=True)
class Tools:
    fio: str
    latgovd: str
    latgov: str
    latgov_config: str | None
    nice: int  # latgovd's, as the unit sets it


def visit_cpus(cpus: list[int]) -> list[int]:
    """Runs this thread on each CPU of cpus in turn: each one leaves the
    idle state it was in, and chooses its next one under the constraints
    written before. The CPUs it could not run on (a cpuset without them)."""
    allowed = os.sched_getaffinity(0)
    missed = []
    try:
        for cpu in cpus:
            try:
                os.sched_setaffinity(0, {cpu})
            except OSError:
                missed.append(cpu)
    finally:
        os.sched_setaffinity(0, allowed)
    return missed


def take_bench_lock(root: SysRoot) -> int:
    """Locks BENCH_LOCK for this process's life (the descriptor returned,
    closed by the kernel however it ends): a second bench/ab would measure
    the first one's holds, and would take a journal in use for a killed
    one's leftovers."""
    path = root.path(BENCH_LOCK)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as e:
        os.close(fd)
        raise HarnessError("another bench/ab runs (it holds %s): one at a time" % path) from e
    return fd


def write_percpu_journal(root: SysRoot, before: dict[int, str]) -> None:
    """PERCPU_JOURNAL names each CPU the bench holds and the value it
    found, as "cpuN VALUE" lines: written in full, or not at all."""
    path = root.path(PERCPU_JOURNAL)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".new")
    with open(tmp, "w") as f:
        f.write("".join("cpu%d %s\n" % kv for kv in sorted(before.items())))
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def recover_percpu(root: SysRoot) -> list[str]:
    """Puts back what a bench/ab that did not release its per-CPU holds
    (killed, or its machine's power cut: /run does not outlive a boot, nor
    does a held value) left in PERCPU_JOURNAL: each CPU that still reads
    the hold gets the value the journal names; one that reads anything
    else is someone's since, and left as it is. What it did, one line
    each."""
    path = root.path(PERCPU_JOURNAL)
    try:
        text = path.read_text()
    except FileNotFoundError:
        return []
    except OSError as e:
        raise HarnessError("cannot read %s: %s" % (path, e)) from e
    done = []
    for n, line in enumerate(text.splitlines(), 1):
        fields = line.split()
        if len(fields) != 2 or not fields[0].startswith("cpu") or \
                not fields[0][3:].isdigit():
            raise HarnessError("%s:%d: not \"cpuN VALUE\": %r" % (path, n, line))
        cpu, value = int(fields[0][3:]), fields[1]
        now = ss.read_percpu_qos(root, [cpu])[cpu]
        if now == "?":
            raise HarnessError("cannot read cpu%d pm_qos_resume_latency_us, which %s names: "
                               "put it back to %s by hand, then remove the file"
                               % (cpu, path, value))
        if now != PERCPU_HOLD:
            continue
        try:
            root.path(ss.percpu_qos_path(cpu)).write_text(value)
        except OSError as e:
            raise HarnessError("cannot put cpu%d pm_qos_resume_latency_us back to %s (%s "
                               "names it): %s" % (cpu, value, path, e)) from e
        done.append("put cpu%d pm_qos_resume_latency_us back from %s to %s, as %s of a "
                    "bench/ab that did not finish names it" % (cpu, PERCPU_HOLD, value, path))
    path.unlink()
    return done


def left_constrained(before: dict[int, str], after: dict[int, str]) -> list[str]:
    """The CPUs whose pm_qos_resume_latency_us is not what it was before,
    as "cpuN pm_qos_resume_latency_us is V (W when the run started)"."""
    return ["cpu%d pm_qos_resume_latency_us is %s (%s when the run started)"
            % (c, "unreadable" if after.get(c, "?") == "?" else after[c], v)
            for c, v in sorted(before.items()) if after.get(c, "?") != v]


@dataclass
class EvidenceAside:
    """latgovd's learnt evidence (evidence_file), moved aside for the bench
    so that its first latgovd starts with nothing learnt, and the original
    put back at exit. Within the bench run latgovd keeps what it learns:
    each latgovd saves it at exit and the next one reuses it.

    With what="latgovd's calibration file" and remove_new=False the same
    for calibration_file: latgovd starts with no calibration (it only reads
    that file), and the machine's is put back at exit."""
    path: str
    what: str = "latgovd's evidence file"
    # At the put-back, remove a file that is there although none was at
    # the start (latgovd's evidence saved by this run).
    remove_new: bool = True
    existed: bool = False
    sha256: str = ""
    # The directories above the file that did not exist at the start,
    # innermost first: latgovd creates them, the put-back removes them.
    missing_dirs: list[str] = field(default_factory=list)
    at_end: dict = field(default_factory=dict)
    put_back_note: str = ""
    done: bool = False

    @property
    def saved(self) -> str:
        return self.path + EVIDENCE_SAVED_SUFFIX

    @staticmethod
    def move_aside(path: str, what: str = "latgovd's evidence file",
                   remove_new: bool = True) -> "EvidenceAside":
        missing, d = [], os.path.dirname(os.path.abspath(path))
        while remove_new and not os.path.lexists(d) and d != os.path.dirname(d):
            missing.append(d)
            d = os.path.dirname(d)
        ev = EvidenceAside(path, what, remove_new, missing_dirs=missing)
        if os.path.lexists(ev.saved):
            raise HarnessError(
                "%s exists: an earlier bench/ab run did not put %s back. "
                "Move it back to %s (or delete it) first" % (ev.saved, what, path))
        if os.path.lexists(path):
            try:
                ev.sha256 = sha256_of(path)
                os.rename(path, ev.saved)
            except OSError as e:
                raise HarnessError("cannot move %s %s aside: %s" % (what, path, e)) from e
            ev.existed = True
        return ev

    def record_end(self, raw: Path) -> dict:
        """What latgovd left in the file, with a copy in raw/evidence.end."""
        if os.path.exists(self.path):
            try:
                shutil.copy(self.path, raw / "evidence.end")
                self.at_end = {"existed": True, "sha256": sha256_of(self.path),
                               "copy": "raw/evidence.end"}
            except OSError as e:
                self.at_end = {"existed": True, "error": str(e)}
        else:
            self.at_end = {"existed": False}
        return self.at_end

    def put_back(self) -> str:
        """The machine's evidence as it was: this run's file removed, the
        original renamed back. Says what went wrong, "" when nothing did."""
        if self.done:
            return self.put_back_note
        # Each step can be done again: one cut short is finished by the
        # next call.
        try:
            if self.remove_new and os.path.lexists(self.path):
                os.unlink(self.path)
            if self.existed:
                os.rename(self.saved, self.path)
            elif self.remove_new:
                for d in self.missing_dirs:
                    if not os.path.lexists(d):
                        continue  # never made
                    try:
                        os.rmdir(d)
                    except OSError:
                        break  # not empty: someone else's files
        except OSError as e:
            self.put_back_note = ("FAILED to put %s back (%s): %s; the original is %s"
                                  % (self.what, self.path, e,
                                     self.saved if self.existed else "none"))
        self.done = True
        return self.put_back_note

    def to_json(self) -> dict:
        return {"file": self.path,
                "at_start": ({"existed": True, "sha256": self.sha256,
                              "moved_aside_to": self.saved} if self.existed
                             else {"existed": False}),
                "at_end": self.at_end}


@dataclass
class Session:
    """What a run holds (fio, latgovd, /dev/cpu_dma_latency, files it
    created, latgovd's evidence moved aside); release_all() and cleanup()
    give everything back on any exit."""
    root: SysRoot
    tools: Tools
    runtime_dir: Path | None = None
    fio: subprocess.Popen | None = None
    daemon: subprocess.Popen | None = None
    dma_fd: int | None = None
    percpu_before: dict[int, str] = field(default_factory=dict)  # what hold_percpu found
    lock_fd: int | None = None  # BENCH_LOCK, held until exit
    notes: list[str] = field(default_factory=list)
    past_pids: list[int] = field(default_factory=list)   # of the current run, exited
    created_files: list[str] = field(default_factory=list)
    created_dirs: list[str] = field(default_factory=list)
    evidence: EvidenceAside | None = None
    calibration: EvidenceAside | None = None  # calibration_file moved aside
    # From a latgovd's start until `latgovd --restore` ran after it: the
    # per-CPU values it must leave as they were, and its log.
    restore_due: bool = False
    qos_before: dict[int, str] = field(default_factory=dict)
    daemon_log: Path | None = None
    keep_runtime_dir: bool = False  # its journal, for a restore by hand

    def own_pids(self) -> set[int]:
        pids = {os.getpid()}
        for p in (self.fio, self.daemon):
            if p is not None:
                pids.add(p.pid)
        return pids

    def hold_dma_zero(self, cpus: list[int]) -> None:
        """Holds /dev/cpu_dma_latency at 0 and returns once every CPU in
        cpus that this process may run on has left the idle state it was in
        when the hold was written.

        The kernel kicks idle CPUs on the write but does not wait for them,
        and an idle state's time is counted when the CPU leaves it: a CPU
        that halted before the hold and wakes only after the window's first
        snapshot would put that whole halt into the window as time deeper
        than POLL. Running this thread on each CPU in turn makes each one
        leave idle first."""
        self.dma_fd = os.open(self.root.dma_latency, os.O_WRONLY)
        if os.write(self.dma_fd, struct.pack("<i", 0)) != 4:
            raise HarnessError("short write to %s" % self.root.dma_latency)
        visit_cpus(cpus)

    def release_dma(self) -> None:
        if self.dma_fd is not None:
            os.close(self.dma_fd)
            self.dma_fd = None

    def hold_percpu(self, cpus: list[int]) -> None:
        """Holds each CPU of cpus at a resume latency of 0 us in its
        pm_qos_resume_latency_us, and returns once each has left the idle
        state it was in: unlike a write to /dev/cpu_dma_latency, a write to
        a CPU's file wakes no CPU, and one that halted before it would halt
        on, unconstrained, until something woke it. A CPU whose file holds
        a constraint already is someone else's, and one whose file cannot
        be read cannot be put back: either is left as it is, and the run
        fails. What it found is journaled first (PERCPU_JOURNAL): the
        kernel keeps a written value when the writer dies, and the next
        bench/ab puts back what one killed left (recover_percpu)."""
        found = ss.read_percpu_qos(self.root, cpus)
        taken = ["cpu%d is %s" % (c, v) for c, v in found.items()
                 if v == "?" or ss.percpu_held(v)]
        if taken:
            raise HarnessError("pm_qos_resume_latency_us is held already or unreadable (%s): "
                               "not ours to hold or release" % ", ".join(taken))
        write_percpu_journal(self.root, {**self.percpu_before, **found})
        for cpu in cpus:
            with signals_held():  # written and recorded, or neither
                self.root.path(ss.percpu_qos_path(cpu)).write_text(PERCPU_HOLD)
                self.percpu_before[cpu] = found[cpu]
        missed = visit_cpus(cpus)
        if missed:
            raise HarnessError("could not run on CPU %s to make it leave its idle state: it "
                               "would idle on unconstrained" % ",".join(map(str, missed)))

    def release_percpu(self) -> None:
        """Puts back what hold_percpu found, on each CPU that still reads
        the hold, whatever happened to the one before. A CPU that reads
        something else now is someone else's since: left alone, and noted.
        A CPU that could not be put back stays recorded (and journaled) for
        the next release, and the bench stops (MachineConstrained)."""
        failed = {}
        for cpu, value in sorted(self.percpu_before.items()):
            path = self.root.path(ss.percpu_qos_path(cpu))
            now = ss.read_percpu_qos(self.root, [cpu])[cpu]
            if now == "?":
                failed[cpu] = (value, "unreadable")
                continue
            try:
                if now == PERCPU_HOLD:
                    path.write_text(value)
                elif now != value:
                    self.notes.append("cpu%d pm_qos_resume_latency_us read %s, not the %s the "
                                      "bench held: someone else's, left as it is"
                                      % (cpu, now, PERCPU_HOLD))
            except OSError as e:
                failed[cpu] = (value, str(e))
        with signals_held():
            self.percpu_before = {c: v for c, (v, _) in failed.items()}
            if failed:
                write_percpu_journal(self.root, self.percpu_before)
            else:
                self.root.path(PERCPU_JOURNAL).unlink(missing_ok=True)
        if failed:
            raise MachineConstrained(
                "could not put pm_qos_resume_latency_us back (%s); stopping, so that no run "
                "measures constrained CPUs" % "; ".join(
                    "cpu%d to %s: %s" % (c, v, e) for c, (v, e) in failed.items()))

    def start_daemon(self, mode: str, log_path: Path, cpus: list[int]) -> Path | None:
        """Starts latgovd and waits until it is ready: its status.json, or
        under --dry-run (which writes no file) its "latgovd ready" log line.
        The status file to sample, None under --dry-run. The CPUs' PM QoS
        values now are what stop_daemon checks it left."""
        assert self.runtime_dir is not None
        self.qos_before = ss.read_percpu_qos(self.root, cpus)
        self.daemon_log = log_path
        status = self.runtime_dir / "status.json"
        status.unlink(missing_ok=True)
        # Its metrics beside its log, not in the file node_exporter serves:
        # that one would be removed at exit, and a host that never ran
        # latgov.service would alert on its absence.
        cmd = [self.tools.latgovd, "--runtime-dir", str(self.runtime_dir),
               "--metrics-file", str(log_path.with_suffix(".prom"))]
        if self.tools.latgov_config:
            cmd += ["--config", self.tools.latgov_config]
        dry_run = mode == "latgov-dryrun"
        if dry_run:
            cmd.append("--dry-run")
        with open(log_path, "w") as logf:
            nice = self.tools.nice
            self.daemon = subprocess.Popen(cmd, stdout=logf, stderr=subprocess.STDOUT,
                                           start_new_session=True,
                                           preexec_fn=lambda: os.setpriority(
                                               os.PRIO_PROCESS, 0, nice))
        self.restore_due = True
        self.past_pids.append(self.daemon.pid)
        ready_sign = "a 'latgovd ready' log line" if dry_run else str(status)

        def ready() -> bool:
            if dry_run:
                return "latgovd ready" in log_path.read_text(errors="replace")
            return status.exists()

        within = ready_within(self.tools.latgov_config)
        deadline = time.monotonic() + within
        while not ready():
            if self.daemon.poll() is not None:
                rc = self.daemon.returncode
                self.stop_daemon()  # restores what it may have written
                raise HarnessError("latgovd exited with %d before %s; log: %s\n%s"
                                   % (rc, ready_sign, log_path, tail(log_path)))
            if time.monotonic() > deadline:
                self.stop_daemon()
                raise HarnessError("latgovd wrote no %s within %d s; log: %s"
                                   % (ready_sign, within, log_path))
            time.sleep(0.02)
        return None if dry_run else status

    def stop_daemon(self) -> int | None:
        """Stops latgovd, then runs `latgovd --restore` however it ended
        (crash, error, signal) and checks every CPU is back where the run
        found it: raises MachineConstrained when one is not. latgovd's exit
        status, None when none ran."""
        p = self.daemon
        rc = None
        if p is not None:
            rc = p.poll()
            if rc is None:
                p.send_signal(signal.SIGTERM)
                try:
                    rc = p.wait(10)
                except subprocess.TimeoutExpired:
                    p.kill()
                    rc = p.wait()
                    self.notes.append("latgovd %d ignored SIGTERM for 10 s and was killed"
                                      % p.pid)
            # Only now: an interrupt in the wait leaves it to release_all.
            self.daemon = None
        if self.restore_due:
            self.restore_after_daemon()
        return rc

    def restore_command(self) -> list[str]:
        cmd = [self.tools.latgovd, "--restore", "--runtime-dir", str(self.runtime_dir)]
        if self.tools.latgov_config:
            cmd += ["--config", self.tools.latgov_config]
        return cmd

    def restore_after_daemon(self) -> None:
        """`latgovd --restore` on the run's journal (before the runtime
        directory goes), then the check of every CPU's value."""
        cmd = self.restore_command()
        try:
            p = subprocess.run(cmd, capture_output=True, text=True, timeout=30)
            rc: int | str = p.returncode
            out = (p.stdout + p.stderr).strip()
        except (OSError, subprocess.TimeoutExpired) as e:
            rc, out = "failed", str(e)
        # Done, whatever it said: the check below tells whether it worked.
        self.restore_due = False
        if self.daemon_log is not None:
            try:
                with open(self.daemon_log, "a") as f:
                    f.write("--- %s: exit %s\n%s\n"
                            % (" ".join([repo_relative(cmd[0])] + cmd[1:]), rc, out))
            except OSError:
                pass
        if rc != 0:
            self.notes.append("`%s` exited %s: %s" % (" ".join(cmd), rc, out[:200]))
        left = left_constrained(self.qos_before,
                                ss.read_percpu_qos(self.root, sorted(self.qos_before)))
        if left:
            self.keep_runtime_dir = True
            raise MachineConstrained(
                "%s after latgovd exited and `latgovd --restore` ran; stopping, so that no "
                "run measures constrained CPUs (the journal is kept in %s)"
                % ("; ".join(left), self.runtime_dir))

    def run_fio(self, job: Path, json_path: Path, env: dict, seed: int | None = None,
                beside: Path | None = None) -> tuple[int, str]:
        self.fio = subprocess.Popen(fio_command(self.tools.fio, job, json_path, seed, beside),
                                    env=env, start_new_session=True,
                                    stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                    text=True)
        self.past_pids.append(self.fio.pid)
        _, err = self.fio.communicate()
        rc = self.fio.returncode
        self.fio = None
        return rc, err

    def stop_fio(self) -> None:
        p = self.fio
        if p is None:
            return
        if p.poll() is None:
            try:
                os.killpg(p.pid, signal.SIGTERM)
                p.wait(10)
            except (OSError, subprocess.TimeoutExpired):
                try:
                    os.killpg(p.pid, signal.SIGKILL)
                except OSError:
                    pass
                p.wait()
        # Only now: an interrupt in the wait leaves it to release_all.
        self.fio = None

    def release_all(self) -> None:
        # Each one whatever happened to the one before.
        try:
            self.stop_fio()
        finally:
            try:
                self.stop_daemon()
            finally:
                try:
                    self.release_dma()
                finally:
                    self.release_percpu()

    def cleanup(self) -> None:
        with signals_ignored():
            self._cleanup()

    def _cleanup(self) -> None:
        try:
            self.release_all()
        finally:
            # The journal stays while a latgovd may still hold what it
            # names: `latgovd --restore` needs it.
            restore_pending = self.daemon is not None or self.restore_due
            if self.runtime_dir and not (self.keep_runtime_dir or restore_pending):
                shutil.rmtree(self.runtime_dir, ignore_errors=True)
            for path in self.created_files:
                try:
                    os.unlink(path)
                except OSError:
                    pass
            for path in self.created_dirs:
                try:
                    os.rmdir(path)
                except OSError:
                    pass
            for aside in (self.evidence, self.calibration):
                if aside is not None:
                    failed = aside.put_back()
                    if failed:
                        log(failed)


# --------------------------------------------------------------------------
# Measurements around a run

@dataclass(frozen=True)
class Snapshot:
    t: float
    cpuidle: dict
    procstat: dict
    disk: int | None
    daemon: ss.ProcCpu | None
    procs: dict


def snapshot(root: SysRoot, host: HostInfo, disk: str | None, daemon_pid: int | None) -> Snapshot:
    return Snapshot(time.monotonic(), ss.read_cpuidle(root, host.layout),
                    ss.read_procstat(root, host.cpus), ss.disk_ios(root, disk),
                    ss.proc_cpu(root, daemon_pid) if daemon_pid else None,
                    ss.process_table(root))


def window_deltas(a: Snapshot, b: Snapshot, host: HostInfo, own: set[int]) -> dict:
    """Row fields from two snapshots: idle-state, /proc/stat, disk, daemon
    and other processes over the window between them."""
    row: dict = {}
    window = b.t - a.t
    row["window_s"] = round(window, 3)
    poll_t = poll_u = total_t = 0
    have_poll = False
    for cpu in host.cpus:
        for name in host.layout.names(cpu):
            dt = b.cpuidle[(cpu, name, "time")] - a.cpuidle[(cpu, name, "time")]
            du = b.cpuidle[(cpu, name, "usage")] - a.cpuidle[(cpu, name, "usage")]
            row["cpu%d_%s_time_us" % (cpu, name)] = dt
            row["cpu%d_%s_usage" % (cpu, name)] = du
            total_t += dt
            if name.upper() == "POLL":
                have_poll = True
                poll_t += dt
                poll_u += du
    row["poll_time_us"] = poll_t if have_poll else ""
    row["poll_usage"] = poll_u if have_poll else ""
    row["idle_states_time_us"] = total_t if host.layout.any else ""
    tot = [0.0, 0.0, 0.0]
    for cpu in host.cpus:
        d = [b.procstat[cpu][i] - a.procstat[cpu][i] for i in range(3)]
        for i in range(3):
            tot[i] += d[i]
        row["cpu%d_procstat_idle_s" % cpu] = round(d[0], 2)
        row["cpu%d_procstat_iowait_s" % cpu] = round(d[1], 2)
        row["cpu%d_procstat_busy_s" % cpu] = round(d[2], 2)
    row["procstat_idle_s"] = round(tot[0], 2)
    row["procstat_iowait_s"] = round(tot[1], 2)
    row["procstat_busy_s"] = round(tot[2], 2)
    if a.disk is not None and b.disk is not None:
        row["disk_ios"] = b.disk - a.disk
    others, top = ss.others_cpu(a.procs, b.procs, own)
    row["others_cpu_s"], row["others_top"] = round(others, 2), top
    if a.daemon and b.daemon:
        ticks = b.daemon.cpu_s - a.daemon.cpu_s
        row["latgovd_cpu_s"] = round(ticks, 3)
        sched = (None if a.daemon.sched_s is None or b.daemon.sched_s is None
                 else b.daemon.sched_s - a.daemon.sched_s)
        # schedstat is ns-precise; ticks are 1/CLK_TCK s: prefer the former.
        # Without schedstat, or with a kernel that keeps no run time in it
        # ("0 0 0" while the ticks move), the ticks: never a 0 that was not
        # measured, which the latgovd CPU target would take for met.
        if sched is None or (sched == 0 and ticks > 0):
            row["latgovd_cpu_pct_core"] = round(100.0 * ticks / window, 4)
        else:
            row["latgovd_sched_cpu_s"] = round(sched, 6)
            row["latgovd_cpu_pct_core"] = round(100.0 * sched / window, 4)
        row["latgovd_vol_ctxsw"] = b.daemon.vol_ctxsw - a.daemon.vol_ctxsw
        row["latgovd_nonvol_ctxsw"] = b.daemon.nonvol_ctxsw - a.daemon.nonvol_ctxsw
    return row


# --------------------------------------------------------------------------

@dataclass
class Runner:
    session: Session
    host: HostInfo
    target: Target
    settings: Settings
    raw: Path
    columns: list[str]
    waiter: WaiterPlacement | None
    status_interval: float = DEFAULT_STATUS_INTERVAL_MS / 1000  # latgovd's, seconds
    # The warm-ups: per workload, the most offsets one of its runs went
    # through so far and the rate its last warm-up went at; per (round,
    # workload), the offsets its warm-up went through.
    warm_need: dict[str, int] = field(default_factory=dict)
    warm_rate: dict[str, float] = field(default_factory=dict)
    warmed: dict[tuple[int, str], int] = field(default_factory=dict)

    @property
    def root(self) -> SysRoot:
        return self.session.root

    def place_waiter(self, wl: Workload) -> WaiterPlacement | None:
        """The CPU to pin wl's job on for this run, from its queue IRQ's
        effective affinity as it is now: it may have moved since the last
        run. None for a workload that may run unpinned (pin_optional) where
        no CPU's queue completes elsewhere."""
        placed = ss.refresh_waiter(self.root, self.target.disk, self.host.cpus, self.waiter)
        if placed is None:
            why = ("every online CPU completes its own queue's IO (or the disk's queue IRQs "
                   "were not found)")
            if not wl.pin_optional:
                raise HarnessError("no CPU to pin %s on: %s" % (wl.name, why))
            note = "%s runs unpinned: %s" % (wl.name, why)
            if note not in self.session.notes:
                self.session.notes.append(note)
                log(note)
            return None
        if self.waiter is not None and placed.cpu != self.waiter.cpu:
            q = placed.queue
            self.session.notes.append(
                "the waiter workload moved from CPU %d to CPU %d: the IRQs' effective affinity "
                "changed (now hctx%d, IRQ %s, completes on CPU %s)"
                % (self.waiter.cpu, placed.cpu, q.index, q.irq,
                   ",".join(map(str, q.completion_cpus))))
            log(self.session.notes[-1])
        self.waiter = placed
        return placed

    def evidence_before(self) -> str:
        """What latgovd finds in its evidence file at its start: "none", or
        the file's sha256 (12 digits)."""
        ev = self.session.evidence
        if ev is None:
            return ""
        return sha256_of(ev.path)[:12] if os.path.exists(ev.path) else "none"

    def fio_env(self, runtime: float, ramp: float, waiter: WaiterPlacement | None) -> dict:
        env = dict(os.environ)
        env["LATGOV_AB_TARGET"] = self.target.path
        env["LATGOV_AB_RUNTIME"] = str(runtime)
        env["LATGOV_AB_RAMP"] = str(ramp)
        env["LATGOV_AB_BURST"] = str(self.settings.burst_sec)
        # The run's CPU, or every CPU for a job left unpinned.
        env["LATGOV_AB_WAITER_CPU"] = (str(waiter.cpu) if waiter
                                       else ",".join(map(str, self.host.cpus)))
        return env

    def foreign_before(self) -> str:
        g = ss.read_global_qos(self.root)
        foreign = ["global=%d" % g] if g < ss.NO_CONSTRAINT else []
        foreign += ["cpu%d=%s" % (c, v) for c, v in
                    ss.read_percpu_qos(self.root, self.host.cpus).items() if ss.percpu_held(v)]
        return ";".join(foreign)

    def error_row(self, rnd: int, seq: int, order: int, wl: Workload, mode: str,
                  msg: str) -> dict:
        row = {c: "" for c in self.columns}
        row.update(round=rnd, seq=seq, order_in_round=order, workload=wl.name, mode=mode,
                   device=self.target.name, target=self.target.path,
                   status="error: %s" % msg[:300])
        return row

    def measured_length(self, wl: Workload) -> tuple[float, float]:
        """(runtime, ramp) of a measured run of wl: the idle workload's fio
        is its burst alone, and a workload paced by thinktime has no ramp."""
        if wl.idle:
            return self.settings.burst_sec, 0.0
        return self.settings.runtime, self.settings.ramp if wl.ramp else 0

    def warmup(self, rnd: int, seq: int, wl: Workload) -> dict:
        """The round's warm-up of wl, before its measured runs: the same job
        with the round's seed, so the same offsets in the same order, gone
        through at depth (fio.warmup_job_text) with nothing held and no
        latgovd. Unmeasured: its row records the offsets it went through
        (warmup_ios) and how long it took (window_s), nothing else."""
        s = self.session
        waiter = self.place_waiter(wl) if wl.pin_waiter else None
        seed = round_seed(rnd)
        runtime, ramp = self.measured_length(wl)
        secs = warmup_seconds(runtime + ramp, self.warm_need.get(wl.name),
                              self.warm_rate.get(wl.name))
        tag = "r%d-%s-%s" % (rnd, wl.name, WARMUP)
        job_path = self.raw / (tag + ".fio")
        json_path = self.raw / (tag + ".fio.json")
        job_path.write_text(warmup_job_text((JOBS / wl.job).read_text(), secs, wl.writes))
        row = {c: "" for c in self.columns}
        row.update(round=rnd, seq=seq, order_in_round=0, workload=wl.name, mode=WARMUP,
                   device=self.target.name, target=self.target.path,
                   started_at=datetime.datetime.now().isoformat(timespec="seconds"),
                   fio_randseed=seed)
        if waiter is not None:
            row["waiter_cpu"] = waiter.cpu
            row["completion_cpus"] = ";".join(str(c) for c in waiter.queue.completion_cpus)
        t0 = time.monotonic()
        rc, err = s.run_fio(job_path, json_path, self.fio_env(runtime, ramp, waiter), seed)
        row["window_s"] = round(time.monotonic() - t0, 3)
        s.past_pids = []
        row["fio_rc"] = rc
        status = "ok"
        if rc != 0:
            status = "fio failed (%d): %s" % (rc, " ".join(err.split())[:200])
        else:
            try:
                got = parse_fio_file(json_path)
            except (OSError, FioOutputError) as e:
                status = "bad fio output: %s" % e
            else:
                ios = int(got["fio_ios"])
                row.update(read_ios=got["read_ios"], write_ios=got["write_ios"],
                           fio_ios=ios, warmup_ios=ios)
                self.warmed[(rnd, wl.name)] = ios
                took = job_runtime_s(json_path)
                if ios and took:
                    self.warm_rate[wl.name] = ios / took
        row["status"] = status
        return row

    def note_coverage(self, rnd: int, wl: Workload, row: dict) -> None:
        """Whether the run's offsets lay within its round's warm-up
        (warmup_covered), and the most offsets a run of wl went through,
        for the next rounds' warm-ups."""
        ios = row.get("fio_ios")
        if not ios:
            return
        runtime, ramp = self.measured_length(wl)
        need = offsets_read(float(ios), runtime, ramp)
        self.warm_need[wl.name] = max(need, self.warm_need.get(wl.name, 0))
        warm = self.warmed.get((rnd, wl.name))
        if warm is not None:
            row["warmup_ios"] = warm
            row["warmup_covered"] = "yes" if need <= warm else "no"

    def one_run(self, rnd: int, seq: int, order: int, wl: Workload, mode: str) -> dict:
        if mode == WARMUP:
            return self.warmup(rnd, seq, wl)
        s, host = self.session, self.host
        waiter = self.place_waiter(wl) if wl.pin_waiter else None
        seed = round_seed(rnd)
        row = {c: "" for c in self.columns}
        tag = "r%d-%s-%s" % (rnd, wl.name, mode)
        json_path = self.raw / (tag + ".fio.json")
        row.update(round=rnd, seq=seq, order_in_round=order, workload=wl.name, mode=mode,
                   device=self.target.name, target=self.target.path,
                   started_at=datetime.datetime.now().isoformat(timespec="seconds"),
                   cpuidle_driver=host.driver, cpuidle_governor=host.governor,
                   idle_states=host.idle_states, fio_randseed=seed)
        if waiter is not None:
            row["waiter_cpu"] = waiter.cpu
            row["completion_cpus"] = ";".join(str(c) for c in waiter.queue.completion_cpus)
        row["foreign_constraint_before"] = self.foreign_before()
        fp = [ss.foreign_processes(self.root, s.own_pids())]
        status_path = None
        daemon_pid = None
        if mode == "static":
            s.hold_dma_zero(host.cpus)
        elif mode in PERCPU_MODES:
            if waiter is None:
                raise HarnessError("%s holds the CPUs of a pinned job, and %s found no CPU to "
                                   "pin on" % (mode, wl.name))
            held = ([waiter.cpu] if mode == "static-waiter"
                    else sorted(waiter.queue.completion_cpus))
            row["static_cpus"] = ";".join(map(str, held))
            s.hold_percpu(held)
        elif mode in DAEMON_MODES:
            row["latgovd_evidence_before"] = self.evidence_before()
            status_path = s.start_daemon(mode, self.raw / (tag + ".latgovd.log"), host.cpus)
            assert s.daemon is not None
            daemon_pid = s.daemon.pid
            row["latgovd_pid"] = daemon_pid
        job = JOBS / wl.job
        sampler = QosSampler(self.root, host.cpus, status_path)
        try:
            if wl.idle:
                rc, err = s.run_fio(job, json_path, self.fio_env(0, 0, waiter), seed)
                a = snapshot(self.root, host, self.target.disk, daemon_pid)
                sampler.start()
                time.sleep(self.settings.idle_sec)
            else:
                a = snapshot(self.root, host, self.target.disk, daemon_pid)
                sampler.start()
                rc, err = s.run_fio(job, json_path,
                                    self.fio_env(*self.measured_length(wl), waiter), seed,
                                    JOBS / wl.background if wl.background else None)
            b = snapshot(self.root, host, self.target.disk, daemon_pid)
            window_end = time.time()
            sampler.finish()
            fp.append(ss.foreign_processes(self.root, s.own_pids()))
            if status_path is not None:
                # latgovd writes no status at exit: its last word on the
                # window is the first write after it.
                st = status_after(status_path, window_end, self.status_interval)
                if st is not None:
                    sampler.status.add_final(st)
        finally:
            sampler.finish()
            if mode == "static":
                s.release_dma()
            elif mode in PERCPU_MODES:
                s.release_percpu()
            elif mode in DAEMON_MODES:
                row["latgovd_rc"] = s.stop_daemon()
        row["fio_rc"] = rc
        row.update(window_deltas(a, b, host, s.own_pids() | set(s.past_pids)))
        s.past_pids = []
        row.update(sampler.result())
        if mode in DAEMON_MODES:
            row["latgovd_idle_costs"] = sampler.status.idle_costs or ""
        else:
            row["latgovd_limits_seen"] = ""
        row["foreign_procs"] = ";".join(sorted({x for x in fp if x}))
        status = "ok"
        if rc != 0:
            status = "fio failed (%d): %s" % (rc, " ".join(err.split())[:200])
        else:
            try:
                row.update(parse_fio_file(json_path))
            except (OSError, FioOutputError) as e:
                status = "bad fio output: %s" % e
            else:
                self.note_coverage(rnd, wl, row)
        if row["latgovd_rc"] not in ("", 0, None):
            status += "; latgovd exit %s" % row["latgovd_rc"]
        if mode == "latgov":  # --dry-run writes no status
            if why := sampler.status.not_governing(self.target.disk):
                status = why if status == "ok" else status + "; " + why
        row["status"] = status
        return row


# --------------------------------------------------------------------------
# Calibration

def latgov_help(latgov: str) -> str:
    try:
        p = subprocess.run([latgov, "--help"], capture_output=True, text=True, timeout=10)
        return p.stdout + p.stderr
    except (OSError, subprocess.TimeoutExpired):
        return ""


def latgovd_config_files(config: str | None) -> list[str]:
    """The files latgovd reads its configuration from, in order: the main
    file (--config, or the default where it exists), then the drop-ins
    latgov.d/*.toml beside it in name order (read even when the default
    main file is missing)."""
    main = config or DEFAULT_CONFIG
    files = [main] if os.path.exists(main) else []
    drop_ins = os.path.join(os.path.dirname(main), "latgov.d")
    try:
        names = sorted(os.listdir(drop_ins))
    except OSError:
        names = []
    return files + [os.path.join(drop_ins, n) for n in names
                    if os.path.splitext(n)[1] == ".toml"
                    and os.path.isfile(os.path.join(drop_ins, n))]


def daemon_setting(config: str | None, key: str, default):
    """A [daemon] key as latgovd sees it: a drop-in's value overrides the
    files before it. A file that cannot be read or parsed is passed over
    (latgovd refuses to start on it, and the run says so)."""
    import tomllib
    value = default
    for path in latgovd_config_files(config):
        try:
            with open(path, "rb") as f:
                data = tomllib.load(f)
        except (OSError, ValueError):
            continue
        section = data.get("daemon")
        if isinstance(section, dict) and section.get(key) is not None:
            value = section[key]
    return value


def calibration_file(config: str | None) -> str:
    return str(daemon_setting(config, "calibration_file", DEFAULT_CALIBRATION))


def evidence_file(config: str | None) -> str:
    return str(daemon_setting(config, "evidence_file", DEFAULT_EVIDENCE))


def status_interval(config: str | None) -> float:
    """latgovd's status_interval_ms, in seconds."""
    try:
        return float(daemon_setting(config, "status_interval_ms",
                                    DEFAULT_STATUS_INTERVAL_MS)) / 1000
    except (TypeError, ValueError):
        return DEFAULT_STATUS_INTERVAL_MS / 1000


def config_description(config: str | None) -> str:
    """latgovd's configuration as the report names it: the main file (or
    the embedded default where the default file is missing) and every
    drop-in latgovd reads beside it."""
    main = config or DEFAULT_CONFIG
    files = latgovd_config_files(config)
    desc = main if (config or main in files) else "embedded default (no %s)" % main
    drop_ins = [f for f in files if f != main]
    if drop_ins:
        desc += " with drop-ins %s" % ", ".join(drop_ins)
    return desc


def calibration_aside(config: str | None) -> EvidenceAside:
    """latgovd's calibration file moved aside for the run (put back at
    exit), so that latgovd starts with none, as the report says. With
    calibrate_on_start latgovd writes one itself: a file there at exit is
    the run's and is removed (the machine's put back in its place). Else
    latgovd only reads it, and one that appeared is someone else's."""
    return EvidenceAside.move_aside(calibration_file(config), "latgovd's calibration file",
                                    remove_new=calibrates_on_start(config))


def calibrates_on_start(config: str | None) -> bool:
    return daemon_setting(config, "calibrate_on_start", False) is True


# How long latgovd may take to write its first status: its start, and with
# calibrate_on_start the idle-cost probe it runs before, for which it asks
# the service manager for 60 s more (calibration_timeout_extension).
START_S = 15
CALIBRATE_ON_START_S = 60


def ready_within(config: str | None) -> int:
    return START_S + (CALIBRATE_ON_START_S if calibrates_on_start(config) else 0)


def put_calibration_back(aside: EvidenceAside) -> str:
    """The calibration file as the machine had it; what was done, for the
    report (what went wrong where something did)."""
    written = not aside.existed and aside.remove_new and os.path.lexists(aside.path)
    failed = aside.put_back()
    if failed:
        return failed
    if aside.existed:
        return "the original put back"
    if written:
        return ("removed what latgovd wrote in the run (calibrate_on_start); there was none "
                "at the start")
    return "there was none"


def no_calibration(aside: EvidenceAside) -> str:
    """What latgovd starts with when the bench runs no calibration: none,
    the machine's file moved aside for the run. With calibrate_on_start
    (remove_new) the first latgovd measures the costs and writes the file,
    which the later ones read."""
    if aside.remove_new:
        return ("measured by the run's first latgovd (calibrate_on_start) into %s, which "
                "the later ones read; removed at exit%s (--calibrate was not given)"
                % (aside.path, ", the machine's (sha256 %s) put back" % aside.sha256[:12]
                   if aside.existed else ""))
    if aside.existed:
        return ("none: the machine's %s (sha256 %s) was moved aside to %s for the run and "
                "put back at exit; latgovd learns from live IO (--calibrate was not given)"
                % (aside.path, aside.sha256[:12], aside.saved))
    return ("none: no %s, latgovd learns from live IO (--calibrate was not given)"
            % aside.path)


def calibrate(session: Session, raw: Path, target: Target, keep: bool) -> str:
    """Run `latgov calibrate` when no calibration file exists; describe what
    happened for the report."""
    tools = session.tools
    path = calibration_file(tools.latgov_config)
    if os.path.exists(path):
        return "calibration file %s already existed (not re-run)" % path
    helptext = latgov_help(tools.latgov)
    if "calibrate" not in helptext:
        return ("declared: `latgov calibrate` is not available (not in `latgov --help`) "
                "and %s does not exist" % path)
    cmd = [tools.latgov, "calibrate"]
    if tools.latgov_config and "--config" in helptext:
        cmd += ["--config", tools.latgov_config]
    if target.disk and "--device" in helptext:
        cmd += ["--device", target.disk]
    if target.kind == "file" and "--file" in helptext:
        # the raw device may be unopenable (mounted, sandboxed): read the
        # benchmark file on it instead
        cmd += ["--file", target.path]
    if "--output" in helptext:
        cmd += ["--output", path]
    if "--runtime-dir" in helptext and session.runtime_dir:
        cmd += ["--runtime-dir", str(session.runtime_dir)]
    existed_dir = os.path.isdir(os.path.dirname(path))
    log("running %s" % " ".join(cmd))
    logp = raw / "calibrate.log"
    with open(logp, "w") as f:
        try:
            rc: int | str = subprocess.run(cmd, stdout=f, stderr=subprocess.STDOUT,
                                           timeout=300).returncode
        except subprocess.TimeoutExpired:
            rc = "timeout"
    if os.path.exists(path):
        shutil.copy(path, raw / "calibration.toml")
        if not keep:
            session.created_files.append(path)
            if not existed_dir:
                session.created_dirs.append(os.path.dirname(path))
    if rc == 0:
        return "ran `%s` (log raw/calibrate.log): %s" % (
            " ".join(cmd), ("wrote %s (copy in raw/calibration.toml%s)" % (
                path, "; removed again at exit, --keep-calibration keeps it"
                if not keep else "")) if os.path.exists(path)
            else "but no %s appeared" % path)
    first = tail(logp, 3).strip().replace("\n", " / ")
    return "declared: `%s` failed (exit %s: %s; log raw/calibrate.log)" % (
        " ".join(cmd), rc, first[:200])
