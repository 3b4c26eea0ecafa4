"""From rows of results.csv to medians and spreads per workload and mode.
Pure: rows in, numbers out."""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field

from .results import PERCPU_MODES, measured
from .sysstate import HostInfo

# A static run must have held /dev/cpu_dma_latency at 0 in (nearly) every
# sample of its window (100 ms apart on average): the hold is written
# before the window starts and closed after it ends.
STATIC_HELD_MIN = 0.99

# (column, label) of the per-workload tables, in order.
SUMMARY_METRICS = [
    ("read_iops", "read IOPS"),
    ("read_lat_mean_us", "read lat mean (us)"),
    ("read_lat_p50_us", "read lat p50 (us)"),
    ("read_lat_p90_us", "read lat p90 (us)"),
    ("read_lat_p99_us", "read lat p99 (us)"),
    ("read_lat_p99_9_us", "read lat p99.9 (us)"),
    ("read_lat_max_us", "read lat max (us)"),
    ("read_clat_mean_us", "read clat mean (us)"),
    ("read_clat_p50_us", "read clat p50 (us)"),
    ("read_clat_p90_us", "read clat p90 (us)"),
    ("read_clat_p99_us", "read clat p99 (us)"),
    ("read_clat_p99_9_us", "read clat p99.9 (us)"),
    ("read_clat_max_us", "read clat max (us)"),
    ("write_iops", "write IOPS"),
    ("write_lat_mean_us", "write lat mean (us)"),
    ("write_lat_p50_us", "write lat p50 (us)"),
    ("write_lat_p90_us", "write lat p90 (us)"),
    ("write_lat_p99_us", "write lat p99 (us)"),
    ("write_lat_p99_9_us", "write lat p99.9 (us)"),
    ("write_lat_max_us", "write lat max (us)"),
    ("write_clat_mean_us", "write clat mean (us)"),
    ("write_clat_p50_us", "write clat p50 (us)"),
    ("write_clat_p90_us", "write clat p90 (us)"),
    ("write_clat_p99_us", "write clat p99 (us)"),
    ("write_clat_p99_9_us", "write clat p99.9 (us)"),
    ("write_clat_max_us", "write clat max (us)"),
    ("sync_ios", "fdatasync calls"),
    ("sync_lat_mean_us", "fdatasync lat mean (us)"),
    ("sync_lat_p50_us", "fdatasync lat p50 (us)"),
    ("sync_lat_p99_us", "fdatasync lat p99 (us)"),
    ("sync_lat_max_us", "fdatasync lat max (us)"),
    ("poll_time_us", "POLL time, all CPUs (us)"),
    ("idle_states_time_us", "idle-state time, all CPUs (us)"),
    ("procstat_idle_s", "/proc/stat idle, all CPUs (s)"),
    ("procstat_iowait_s", "/proc/stat iowait, all CPUs (s)"),
    ("procstat_busy_s", "/proc/stat busy, all CPUs (s)"),
    ("latgovd_cpu_pct_core", "latgovd CPU (% of one core)"),
    ("latgovd_cpu_s", "latgovd utime+stime (s)"),
    ("latgovd_vol_ctxsw", "latgovd voluntary ctx switches"),
    ("latgovd_nonvol_ctxsw", "latgovd involuntary ctx switches"),
    # latgovd's status gives quantiles per run, no samples: these rows are
    # the median of per-run quantiles, not quantiles pooled over rounds.
    ("onset_p50_us", "latgovd onset delay, per-run p50 (us)"),
    ("onset_p99_us", "latgovd onset delay, per-run p99 (us)"),
    ("onset_max_us", "latgovd onset delay, per-run max (us)"),
    ("onset_wake_p50_us", "of that, latgovd's wake-up, per-run p50 (us)"),
    ("onset_wake_p99_us", "of that, latgovd's wake-up, per-run p99 (us)"),
    ("onset_count", "latgovd onsets"),
    ("onset_on_issuing_cpu", "of those, handled on the issuing CPU"),
    ("prearm_hits", "latgovd pre-armed windows its request came in"),
    ("prearm_misses", "latgovd pre-armed windows without it"),
    ("others_cpu_s", "CPU used by other processes (s)"),
    ("foreign_held", "held by someone else (fraction)"),
    ("global_held_frac", "held: /dev/cpu_dma_latency (fraction)"),
    ("any_held_frac", "held: any constraint (fraction)"),
    ("status_held_frac", "held per latgovd status (fraction)"),
    ("held_cpu_s", "CPU-seconds held, all CPUs"),
]


def per_cpu_metrics(host: HostInfo) -> list[tuple[str, str]]:
    out = []
    for cpu in host.cpus:
        for name in host.layout.names(cpu):
            out.append(("cpu%d_%s_time_us" % (cpu, name), "cpu%d %s time (us)" % (cpu, name)))
        out.append(("cpu%d_procstat_idle_s" % cpu, "cpu%d /proc/stat idle (s)" % cpu))
        out.append(("cpu%d_held_frac" % cpu, "held on cpu%d (fraction)" % cpu))
        out.append(("cpu%d_held_s" % cpu, "CPU-seconds held on cpu%d" % cpu))
    return out


def num(v) -> float | None:
    if v in ("", None):
        return None
    try:
        return float(v)
    except (TypeError, ValueError):
        return None


@dataclass(frozen=True)
class Stat:
    median: float
    min: float
    max: float
    values: list[float]

    @staticmethod
    def of(values: list[float]) -> "Stat":
        return Stat(statistics.median(values), min(values), max(values), values)


@dataclass
class Cell:
    """One workload under one mode: the runs that finished ok, less those
    kept out (kept_out)."""
    n: int
    stats: dict[str, Stat] = field(default_factory=dict)


@dataclass
class Aggregate:
    modes: list[str]
    workloads: list[str]
    cells: dict[str, dict[str, Cell]]
    # (workload, mode, metric) -> {round: value}, for ratios within a round
    by_round: dict[tuple[str, str, str], dict[int, float]] = field(default_factory=dict)
    # runs that finished ok but are kept out of the medians, and why
    excluded: list[tuple[dict, str]] = field(default_factory=list)

    def stat(self, workload: str, mode: str, metric: str) -> Stat | None:
        cell = self.cells.get(workload, {}).get(mode)
        return cell.stats.get(metric) if cell else None

    def median(self, workload: str, mode: str, metric: str) -> float | None:
        s = self.stat(workload, mode, metric)
        return s.median if s else None

    def round_ratios(self, workload: str, mode: str, reference: str,
                     metric: str) -> list[float]:
        """mode / reference within each round where both ran (interleaved,
        minutes apart at most), in round order: the spread of these shows
        how far the host's drift between rounds carries a ratio."""
        a = self.by_round.get((workload, mode, metric), {})
        b = self.by_round.get((workload, reference, metric), {})
        return [a[r] / b[r] for r in sorted(a) if r in b and b[r] != 0]

    def to_json(self) -> dict:
        out: dict = {}
        for w, per_mode in self.cells.items():
            for m, cell in per_mode.items():
                d: dict = {"n": cell.n}
                for met, s in cell.stats.items():
                    d[met] = {"median": s.median, "min": s.min, "max": s.max,
                              "values": s.values}
                out.setdefault(w, {})[m] = d
        return out


def foreign_held(row: dict, cpus: list[int]) -> float | None:
    """Fraction of the window in which a constraint NOT set by this run's
    mode was held (someone else's tuned, test, latgovd...), or None when it
    cannot be told apart (latgov mode while latgovd reports holding, or
    counts holds too short for its status file to show: onsets, windows
    held ahead of periodic requests)."""
    mode = row["mode"]
    anyh = num(row.get("any_held_frac"))
    if anyh is None:
        return None
    if mode in ("off", "latgov-dryrun"):
        return anyh
    if mode == "static":
        percpu = [num(row.get("cpu%d_percpu_held_frac" % c)) or 0.0 for c in cpus]
        return max(percpu) if percpu else 0.0
    if mode in PERCPU_MODES:
        ours = static_cpus(row)
        others = [num(row.get("cpu%d_percpu_held_frac" % c)) or 0.0
                  for c in cpus if c not in ours]
        return max(others + [num(row.get("global_held_frac")) or 0.0])
    if mode == "latgov" and num(row.get("status_held_frac")) == 0:
        brief = sum(num(row.get(k)) or 0
                    for k in ("onset_count", "prearm_hits", "prearm_misses"))
        return anyh if brief == 0 else None
    return None


def static_not_held(row: dict) -> str:
    """Why a static run did not measure static, "" when it did: the
    sampler saw /dev/cpu_dma_latency at 0 in fewer than STATIC_HELD_MIN of
    its samples, or at a value other than 0. Rows without the sampler's
    columns (runs before it) are taken as recorded."""
    frac, low = num(row.get("global_held_frac")), row.get("global_min_us")
    if frac is None:
        return ""
    why = []
    if frac < STATIC_HELD_MIN:
        why.append("held in %.1f%% of the samples" % (100 * frac))
    if low not in ("", None) and num(low) != 0:
        why.append("at %s us, not 0" % low)
    return ("static did not hold /dev/cpu_dma_latency at 0 (%s)" % ", ".join(why)
            if why else "")


def static_cpus(row: dict) -> list[int]:
    """The CPUs a static-waiter or static-completion run held."""
    return [int(c) for c in (row.get("static_cpus") or "").split(";") if c]


def percpu_not_held(row: dict) -> str:
    """Why a static-waiter or static-completion run did not measure what
    its mode says, "" when it did: the sampler saw one of the CPUs it held
    unconstrained in more than 1 - STATIC_HELD_MIN of its samples, or the
    run names no CPU it held."""
    ours = static_cpus(row)
    if not ours:
        return "%s held no CPU" % row.get("mode")
    low = ["cpu%d in %.1f%%" % (c, 100 * f) for c in ours
           if (f := num(row.get("cpu%d_percpu_held_frac" % c)) or 0.0) < STATIC_HELD_MIN]
    return ("%s did not hold pm_qos_resume_latency_us (held %s of the samples)"
            % (row.get("mode"), ", ".join(low)) if low else "")


def kept_out(row: dict, cpus: list[int]) -> str:
    """Why a run that finished ok is kept out of the medians, "" when it is
    not: someone else's constraint held at its start or while it ran, or
    another fio or latgovd running meanwhile (either skews the very thing
    the modes are compared on), or a static run that did not hold 0."""
    why = []
    if row.get("mode") == "static":
        held = static_not_held(row)
        if held:
            why.append(held)
    elif row.get("mode") in PERCPU_MODES:
        held = percpu_not_held(row)
        if held:
            why.append(held)
    if row.get("foreign_constraint_before"):
        why.append("constraint %s at its start" % row["foreign_constraint_before"])
    fh = foreign_held(row, cpus)
    if fh:
        why.append("someone else's constraint held %.0f%% of it" % (100 * fh))
    if row.get("foreign_procs"):
        why.append("other processes running: %s" % row["foreign_procs"])
    return "; ".join(why)


def with_derived(row: dict, cpus: list[int]) -> dict:
    """A copy of a row with the columns the report derives. Rows of runs
    that predate the integrated held seconds get them as held fraction x
    window (the same samples, without the per-sample timing)."""
    r = dict(row)
    fh = foreign_held(r, cpus)
    r["foreign_held"] = "" if fh is None else fh
    window = num(r.get("window_s"))
    total = 0.0
    have = False
    for c in cpus:
        key = "cpu%d_held_s" % c
        if num(r.get(key)) is None:
            frac = num(r.get("cpu%d_held_frac" % c))
            if frac is not None and window is not None:
                r[key] = frac * window
        v = num(r.get(key))
        if v is not None:
            total += v
            have = True
    if num(r.get("held_cpu_s")) is None and have:
        r["held_cpu_s"] = total
    return r


def aggregate(rows: list[dict], workloads: list[str], modes: list[str],
              host: HostInfo) -> Aggregate:
    metrics = ([m for m, _ in SUMMARY_METRICS] + [m for m, _ in per_cpu_metrics(host)]
               + ["window_s"])
    rows = [with_derived(r, host.cpus) for r in measured(rows)]
    excluded = [(r, why) for r in rows if r["status"] == "ok"
                for why in [kept_out(r, host.cpus)] if why]
    out = {id(r) for r, _ in excluded}
    cells: dict[str, dict[str, Cell]] = {}
    by_round: dict[tuple[str, str, str], dict[int, float]] = {}
    for w in workloads:
        for m in modes:
            sel = [r for r in rows if r["workload"] == w and r["mode"] == m
                   and r["status"] == "ok" and id(r) not in out]
            cell = Cell(len(sel))
            for met in metrics:
                vals = [v for v in (num(r.get(met)) for r in sel) if v is not None]
                if vals:
                    cell.stats[met] = Stat.of(vals)
                rounds = {int(r["round"]): num(r.get(met)) for r in sel}
                by_round[(w, m, met)] = {k: v for k, v in rounds.items() if v is not None}
            cells.setdefault(w, {})[m] = cell
    return Aggregate(list(modes), list(workloads), cells, by_round, excluded)
