"""What a run was: the machine, the settings, the binaries. Written as
run-meta.json next to results.csv (flat keys, as earlier runs wrote it) so
that --resummarize can rebuild the report of any run."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from .sysstate import HostInfo, IdleLayout


@dataclass(frozen=True)
class Settings:
    modes: list[str]
    workloads: list[str]
    rounds: int
    runtime: float
    ramp: float
    burst_sec: float
    idle_sec: float


@dataclass(frozen=True)
class DaemonInfo:
    latgovd: str
    git: str
    config_desc: str
    calibration: str
    binaries: str
    nice: int | None  # None: the run did not record it


@dataclass
class RunMeta:
    host: HostInfo
    settings: Settings
    target_info: dict
    command: list[str]
    started: str
    fio_version: str
    dma_before: int | str
    percpu_before: str
    daemon: DaemonInfo | None = None
    waiter: str = ""                 # where the waiter workload was pinned
    notes: list[str] = field(default_factory=list)
    elapsed: float = 0.0
    note: str = ""                   # INTERRUPTED or STOPPED ... when cut short
    # latgovd's evidence file: whether one existed at the start (moved
    # aside, put back at exit) and what latgovd left in it at the end
    evidence: dict = field(default_factory=dict)
    forced: list[str] = field(default_factory=list)  # what --force ran despite
    # latgovd's calibration file moved aside for the run (without
    # --calibrate): whether one existed, and how it was put back
    calibration_aside: dict = field(default_factory=dict)
    # The waiter's CPU chosen again before each run from its queue IRQ's
    # affinity (runs from before that chose it once).
    waiter_per_run: bool = True
    # Workloads run without fio's ramp (Workload.ramp; runs from before
    # that ran every one after it).
    no_ramp: list[str] = field(default_factory=list)

    def to_json(self) -> dict:
        h, s = self.host, self.settings
        out = {
            "cpus": h.cpus, "driver": h.driver, "governor": h.governor,
            "idle_states": h.idle_states, "has_poll": h.has_poll,
            "runtime": s.runtime, "ramp": s.ramp, "idle_sec": s.idle_sec,
            "burst_sec": s.burst_sec, "rounds": s.rounds,
            "started": self.started, "fio_version": self.fio_version,
            "dma_before": self.dma_before, "percpu_before": self.percpu_before,
            "target_info": self.target_info,
            "layout": {str(c): h.layout.states[c] for c in h.cpus},
            "command": self.command, "node": h.node, "kernel": h.kernel,
            "notes": self.notes, "elapsed": self.elapsed, "note": self.note,
            "modes": s.modes, "workloads": s.workloads, "waiter": self.waiter,
            "evidence": self.evidence, "forced": self.forced,
            "calibration_aside": self.calibration_aside,
            "waiter_per_run": self.waiter_per_run, "no_ramp": self.no_ramp,
        }
        if self.daemon:
            out.update(latgovd=self.daemon.latgovd, git=self.daemon.git,
                       config_desc=self.daemon.config_desc,
                       calibration=self.daemon.calibration,
                       binaries=self.daemon.binaries)
            if self.daemon.nice is not None:
                out["nice"] = self.daemon.nice
        return out

    @staticmethod
    def from_json(d: dict) -> "RunMeta":
        cpus = [int(c) for c in d["cpus"]]
        layout = IdleLayout({int(c): [(int(i), str(n)) for i, n in v]
                             for c, v in d.get("layout", {}).items()})
        for c in cpus:
            layout.states.setdefault(c, [])
        host = HostInfo(cpus, layout, d.get("driver", "?"), d.get("governor", "?"),
                        d.get("node", ""), d.get("kernel", ""))
        settings = Settings(list(d["modes"]), list(d["workloads"]), int(d["rounds"]),
                            float(d["runtime"]), float(d["ramp"]),
                            float(d["burst_sec"]), float(d["idle_sec"]))
        daemon = None
        if d.get("latgovd"):
            nice = d.get("nice")
            daemon = DaemonInfo(d["latgovd"], d.get("git", "?"), d.get("config_desc", "?"),
                                d.get("calibration", "?"), d.get("binaries", "?"),
                                None if nice is None else int(nice))
        return RunMeta(host, settings, d.get("target_info", {}), list(d.get("command", [])),
                       d.get("started", "?"), d.get("fio_version", "?"),
                       d.get("dma_before", "?"), d.get("percpu_before", "?"), daemon,
                       d.get("waiter", ""), list(d.get("notes", [])),
                       float(d.get("elapsed", 0.0)), d.get("note", ""),
                       dict(d.get("evidence") or {}), list(d.get("forced", [])),
                       dict(d.get("calibration_aside") or {}),
                       # Not recorded before: read again before each run
                       # only in runs whose results.csv has
                       # latgovd_evidence_before (the same change).
                       bool(d.get("waiter_per_run", False)),
                       list(d.get("no_ramp", [])))

    def save(self, path: Path) -> None:
        with open(path, "w") as f:
            json.dump(self.to_json(), f, indent=1)

    @staticmethod
    def load(path: Path) -> "RunMeta":
        try:
            with open(path) as f:
                return RunMeta.from_json(json.load(f))
        except (OSError, ValueError, KeyError, TypeError) as e:
            raise ValueError("Failed to read run metadata %s: %s" % (path, e)) from e
