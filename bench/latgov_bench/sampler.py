"""What is held while a run lasts: /dev/cpu_dma_latency and the per-CPU
pm_qos_resume_latency_us files read every 100 ms on average, and latgovd's
status."""

from __future__ import annotations

import json
import os
import random
import struct
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from .sysstate import NO_CONSTRAINT, SysRoot, percpu_held, read_percpu_qos

SAMPLE_PERIOD = 0.1  # on average: each gap drawn from 0.5 to 1.5 of it


def next_sample_time(previous: float, rng: random.Random) -> float:
    """When to sample after `previous`. The gaps are random: at a fixed
    100 ms, holds that come at a period dividing it (latgovd's windows ahead
    of reads every 20 ms from a rate-paced job) fall at the same phase of
    every sample, and were counted as never held (or always)."""
    return previous + SAMPLE_PERIOD * rng.uniform(0.5, 1.5)


@dataclass
class HeldTally:
    """Counts and integrates samples of the constraints. Each sample's state
    stands for the time until the next sample (or the end of the window):
    CPU-seconds held are observed, with a resolution of one period."""
    cpus: list[int]
    samples: int = 0
    global_held: int = 0
    global_min: int | None = None
    any_held: int = 0
    percpu_held: dict[int, int] = field(default_factory=dict)
    eff_held: dict[int, int] = field(default_factory=dict)
    held_s: dict[int, float] = field(default_factory=dict)
    _last_t: float | None = None
    _last_held: set[int] = field(default_factory=set)

    def __post_init__(self) -> None:
        for c in self.cpus:
            self.percpu_held.setdefault(c, 0)
            self.eff_held.setdefault(c, 0)
            self.held_s.setdefault(c, 0.0)

    def _advance(self, t: float) -> None:
        if self._last_t is not None:
            dt = max(t - self._last_t, 0.0)
            for c in self._last_held:
                self.held_s[c] += dt
        self._last_t = t

    def add(self, t: float, glob: int, per: dict[int, str]) -> None:
        self._advance(t)
        self.samples += 1
        gheld = glob < NO_CONSTRAINT
        if gheld:
            self.global_held += 1
            self.global_min = glob if self.global_min is None else min(self.global_min, glob)
        held = set()
        for cpu in self.cpus:
            p = percpu_held(per.get(cpu, "?"))
            if p:
                self.percpu_held[cpu] += 1
            if p or gheld:
                self.eff_held[cpu] += 1
                held.add(cpu)
        if held:
            self.any_held += 1
        self._last_held = held

    def close(self, t: float) -> None:
        self._advance(t)
        self._last_held = set()

    def result(self) -> dict:
        n = max(self.samples, 1)
        r = {
            "qos_samples": self.samples,
            "global_held_frac": self.global_held / n,
            "global_min_us": "" if self.global_min is None else self.global_min,
            "any_held_frac": self.any_held / n,
            "held_cpu_s": round(sum(self.held_s.values()), 3),
        }
        for cpu in self.cpus:
            r["cpu%d_percpu_held_frac" % cpu] = self.percpu_held[cpu] / n
            r["cpu%d_held_frac" % cpu] = self.eff_held[cpu] / n
            r["cpu%d_held_s" % cpu] = round(self.held_s[cpu], 3)
        return r


@dataclass
class StatusTally:
    """latgovd's own view, from its status.json."""
    samples: int = 0
    held: int = 0
    limits_seen: set[str] = field(default_factory=set)
    idle_costs: str | None = None
    onset: dict = field(default_factory=dict)
    prearm: dict = field(default_factory=dict)
    governed: set[str] = field(default_factory=set)  # devices in a mode other than off
    sampling_error: str = ""  # the last one a status named

    def add(self, st: dict) -> None:
        self.samples += 1
        for d in st.get("devices", []):
            if isinstance(d, dict) and d.get("mode") not in (None, "off"):
                self.governed.add(str(d.get("name")))
        if st.get("sampling_error"):
            self.sampling_error = str(st["sampling_error"])
        self.idle_costs = st.get("idle_costs", self.idle_costs)
        if isinstance(st.get("onset_delay"), dict):
            self.onset = st["onset_delay"]
        if isinstance(st.get("prearm"), dict):
            self.prearm = st["prearm"]
        held = st.get("global_limit_us") is not None
        if held:
            self.limits_seen.add("global=%s" % st["global_limit_us"])
        for c in st.get("cpus", []):
            if c.get("limit_us") is not None:
                held = True
                self.limits_seen.add("cpu%s=%s" % (c.get("cpu"), c["limit_us"]))
        if held:
            self.held += 1

    def add_final(self, st: dict) -> None:
        """A status latgovd wrote after the window: its counters (onsets,
        pre-armed windows) up to the window's end. Not a sample of what
        was held during the window."""
        self.idle_costs = st.get("idle_costs", self.idle_costs)
        if isinstance(st.get("onset_delay"), dict):
            self.onset = st["onset_delay"]
        if isinstance(st.get("prearm"), dict):
            self.prearm = st["prearm"]

    def not_governing(self, disk: str | None) -> str:
        """Why latgovd did not govern `disk` during the window, as a run's
        status; "" when it did. A latgov run that did not is no latgov
        result: it would read as "off"."""
        if self.samples == 0:
            return "latgovd wrote no status during the window"
        if self.sampling_error:
            return "latgovd could not sample: %s" % self.sampling_error
        if disk and disk not in self.governed:
            return "latgovd did not govern %s (governed: %s)" % (
                disk, ", ".join(sorted(self.governed)) or "nothing")
        return ""

    def result(self) -> dict:
        return {
            "status_samples": self.samples,
            "status_held_frac": self.held / self.samples if self.samples else "",
            "latgovd_limits_seen": ";".join(sorted(self.limits_seen)),
            "onset_count": self.onset.get("count", ""),
            "onset_p50_us": self.onset.get("p50_us", ""),
            "onset_p99_us": self.onset.get("p99_us", ""),
            "onset_max_us": self.onset.get("max_us", ""),
            "onset_wake_p50_us": self.onset.get("wake_p50_us", ""),
            "onset_wake_p99_us": self.onset.get("wake_p99_us", ""),
            "onset_on_issuing_cpu": self.onset.get("on_issuing_cpu", ""),
            "prearm_hits": self.prearm.get("hits", ""),
            "prearm_misses": self.prearm.get("misses", ""),
        }


def read_status(path: Path) -> dict | None:
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def status_after(path: Path, since: float, interval: float, margin: float = 0.3,
                 clock=time.time, sleep=time.sleep) -> dict | None:
    """latgovd's status once it holds everything up to `since` (wall-clock
    time, as file times are), or None without one.

    latgovd rewrites its status at most every `interval` seconds and not at
    exit (it removes the file), so onsets in the last moments of a window
    show only in its next write. A status with something new is written
    `interval` after the one before at the latest (the loop wakes for it):
    wait for a write after `since`, or until that time has passed without
    one, when nothing was left to write and the last status is current."""
    def mtime() -> float | None:
        try:
            return os.stat(path).st_mtime
        except OSError:
            return None

    last = mtime()
    due = since if last is None else max(since, last + interval)
    deadline = due + margin
    while True:
        m = mtime()
        if m is not None and m >= since:
            break
        if clock() >= deadline:
            break
        sleep(0.02)
    return read_status(path)


class QosSampler(threading.Thread):
    def __init__(self, root: SysRoot, cpus: list[int], status_path: Path | None = None):
        super().__init__(daemon=True)
        self.root = root
        self.cpus = cpus
        self.status_path = status_path
        self.stop_event = threading.Event()
        self.rng = random.Random()
        self.held = HeldTally(cpus)
        self.status = StatusTally()
        self.fd = os.open(root.dma_latency, os.O_RDONLY) if root.dma_latency.exists() else None

    def sample_once(self) -> None:
        glob = NO_CONSTRAINT
        if self.fd is not None:
            try:
                glob = struct.unpack("<i", os.pread(self.fd, 4, 0))[0]
            except OSError:
                pass
        self.held.add(time.monotonic(), glob, read_percpu_qos(self.root, self.cpus))
        if self.status_path:
            st = read_status(self.status_path)
            if st is not None:
                self.status.add(st)

    def run(self) -> None:
        nxt = time.monotonic()
        while not self.stop_event.is_set():
            self.sample_once()
            nxt = next_sample_time(nxt, self.rng)
            delay = nxt - time.monotonic()
            if delay < 0:
                nxt = time.monotonic()
                delay = 0
            self.stop_event.wait(delay)

    def finish(self) -> None:
        if self.stop_event.is_set():
            return
        self.stop_event.set()
        if self.is_alive():
            self.join()
        self.held.close(time.monotonic())
        if self.status_path:  # the last onset statistics before the stop
            st = read_status(self.status_path)
            if st is not None:
                self.status.add(st)
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None

    def result(self) -> dict:
        r = self.held.result()
        s = self.status.result()
        if not self.status_path:
            s = {k: "" for k in s}
        r.update(s)
        return r
