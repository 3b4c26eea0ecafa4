"""results.csv: one row per run, every column."""

from __future__ import annotations

import csv
from pathlib import Path

from .fio import fio_columns
from .sysstate import HostInfo

# The mode column of a warm-up row: the round's offsets gone through once
# before the round's runs of a workload, unmeasured. In no statistic.
WARMUP = "warm-up"
# Static on some CPUs only, each held in its own pm_qos_resume_latency_us for
# the whole run: the CPU a pinned job waits on, or the CPUs that complete its
# queue. They tell apart what each CPU's hold buys.
PERCPU_MODES = ("static-waiter", "static-completion")


def is_warmup(row: dict) -> bool:
    return row.get("mode") == WARMUP


def measured(rows: list[dict]) -> list[dict]:
    """The rows of measured runs: all but the warm-ups."""
    return [r for r in rows if not is_warmup(r)]


def columns(host: HostInfo) -> list[str]:
    cols = ["round", "seq", "order_in_round", "workload", "mode", "device",
            "target", "started_at", "window_s", "status", "fio_rc", "fio_randseed",
            "warmup_ios", "warmup_covered", "waiter_cpu", "completion_cpus", "static_cpus"]
    cols += fio_columns()
    cols += ["disk_ios"]
    cols += ["cpuidle_driver", "cpuidle_governor", "idle_states",
             "poll_time_us", "poll_usage", "idle_states_time_us"]
    for cpu in host.cpus:
        for name in host.layout.names(cpu):
            cols += ["cpu%d_%s_time_us" % (cpu, name), "cpu%d_%s_usage" % (cpu, name)]
    cols += ["procstat_idle_s", "procstat_iowait_s", "procstat_busy_s"]
    for cpu in host.cpus:
        cols += ["cpu%d_procstat_idle_s" % cpu, "cpu%d_procstat_iowait_s" % cpu,
                 "cpu%d_procstat_busy_s" % cpu]
    cols += ["latgovd_pid", "latgovd_cpu_s", "latgovd_cpu_pct_core",
             "latgovd_sched_cpu_s", "latgovd_vol_ctxsw", "latgovd_nonvol_ctxsw",
             "latgovd_rc", "latgovd_idle_costs", "latgovd_limits_seen",
             "latgovd_evidence_before",
             "onset_count", "onset_p50_us", "onset_p99_us", "onset_max_us",
             "onset_wake_p50_us", "onset_wake_p99_us", "onset_on_issuing_cpu",
             "prearm_hits", "prearm_misses"]
    cols += ["qos_samples", "global_held_frac", "global_min_us"]
    for cpu in host.cpus:
        cols += ["cpu%d_percpu_held_frac" % cpu, "cpu%d_held_frac" % cpu,
                 "cpu%d_held_s" % cpu]
    cols += ["held_cpu_s", "any_held_frac", "status_samples", "status_held_frac",
             "foreign_procs", "foreign_constraint_before", "others_cpu_s", "others_top"]
    return cols


def read_rows(path: Path) -> list[dict]:
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


class ResultsWriter:
    """Appends rows as runs finish, so an interrupted run keeps what it did."""

    def __init__(self, path: Path, cols: list[str]):
        self.cols = cols
        self.f = open(path, "w", newline="")
        self.w = csv.DictWriter(self.f, fieldnames=cols)
        self.w.writeheader()
        self.f.flush()

    def blank(self) -> dict:
        return {c: "" for c in self.cols}

    def write(self, row: dict) -> None:
        self.w.writerow(row)
        self.f.flush()

    def close(self) -> None:
        self.f.close()
