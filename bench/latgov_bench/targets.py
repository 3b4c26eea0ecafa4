"""Acceptance targets: read from targets.toml (data), checked against an
Aggregate (pure)."""

from __future__ import annotations

import math
import tomllib
from dataclasses import dataclass
from pathlib import Path

from .aggregate import Aggregate
from .sysstate import HostInfo
from .workloads import WORKLOAD_BY_NAME

DEFAULT_TARGETS = Path(__file__).with_name("targets.toml")
HOSTS = ("qos-acts", "no-cpuidle", "any")
KINDS = ("ratio", "value")


class TargetsError(ValueError):
    pass


@dataclass(frozen=True)
class TargetSpec:
    id: str
    text: str
    host: str
    kind: str
    mode: str
    reference: str | None
    workloads: tuple[str, ...] | None   # None: every latency workload
    metrics: tuple[str, ...]
    max: float | None
    min: float | None

    def applies(self, host: HostInfo) -> bool:
        if self.host == "any":
            return True
        return (self.host == "qos-acts") == host.qos_can_act

    def within(self, v: float) -> bool:
        return (self.max is None or v <= self.max) and (self.min is None or v >= self.min)

    def bound_text(self) -> str:
        parts = []
        if self.min is not None:
            parts.append("≥ %g" % self.min)
        if self.max is not None:
            parts.append("≤ %g" % self.max)
        return " and ".join(parts)


def _spec(raw: dict, where: str) -> TargetSpec:
    def need(key, typ):
        if key not in raw:
            raise TargetsError("%s: missing key '%s'" % (where, key))
        if not isinstance(raw[key], typ):
            raise TargetsError("%s: key '%s' must be %s, not %r"
                               % (where, key, typ.__name__, raw[key]))
        return raw[key]

    known = {"id", "text", "host", "kind", "mode", "reference", "workloads",
             "metrics", "max", "min"}
    unknown = sorted(set(raw) - known)
    if unknown:
        raise TargetsError("%s: unknown key '%s'" % (where, unknown[0]))
    tid = need("id", str)
    where = "%s (id %s)" % (where, tid)
    host, kind = need("host", str), need("kind", str)
    if host not in HOSTS:
        raise TargetsError("%s: host must be one of %s, not '%s'"
                           % (where, ", ".join(HOSTS), host))
    if kind not in KINDS:
        raise TargetsError("%s: kind must be one of %s, not '%s'"
                           % (where, ", ".join(KINDS), kind))
    reference = raw.get("reference")
    if kind == "ratio" and not isinstance(reference, str):
        raise TargetsError("%s: a ratio target needs 'reference' (a mode)" % where)
    wl = raw.get("workloads")
    if wl == "latency":
        workloads = None
    elif isinstance(wl, list) and wl and all(isinstance(w, str) for w in wl):
        for w in wl:
            if w not in WORKLOAD_BY_NAME:
                raise TargetsError("%s: unknown workload '%s'" % (where, w))
        workloads = tuple(wl)
    else:
        raise TargetsError("%s: workloads must be \"latency\" or a list of names" % where)
    metrics = need("metrics", list)
    if not metrics or not all(isinstance(m, str) for m in metrics):
        raise TargetsError("%s: metrics must be a non-empty list of column names" % where)
    bounds = {}
    for key in ("max", "min"):
        v = raw.get(key)
        if v is not None and (isinstance(v, bool) or not isinstance(v, (int, float))):
            raise TargetsError("%s: key '%s' must be a number, not %r" % (where, key, v))
        bounds[key] = None if v is None else float(v)
    if bounds["max"] is None and bounds["min"] is None:
        raise TargetsError("%s: needs 'max' or 'min'" % where)
    return TargetSpec(tid, need("text", str), host, kind, need("mode", str), reference,
                      workloads, tuple(metrics), bounds["max"], bounds["min"])


def load_targets(path: Path = DEFAULT_TARGETS) -> list[TargetSpec]:
    try:
        with open(path, "rb") as f:
            data = tomllib.load(f)
    except OSError as e:
        raise TargetsError("Failed to read %s: %s" % (path, e)) from e
    except tomllib.TOMLDecodeError as e:
        raise TargetsError("Failed to parse %s: %s" % (path, e)) from e
    raw = data.get("target")
    if not isinstance(raw, list) or not raw:
        raise TargetsError("%s: no [[target]] tables" % path)
    specs = [_spec(t, "%s: target %d" % (path, i + 1)) for i, t in enumerate(raw)]
    ids = [s.id for s in specs]
    dup = sorted({i for i in ids if ids.count(i) > 1})
    if dup:
        raise TargetsError("%s: target id '%s' is used twice" % (path, dup[0]))
    return specs


# --------------------------------------------------------------------------

MET, MISSED, NOT_MEASURED, NOT_APPLICABLE = "met", "missed", "not measured", "not applicable"


def median_interval(values: tuple[float, ...] | list[float],
                    confidence: float = 0.95) -> tuple[float, float, float] | None:
    """A distribution-free interval for the median of `values` (the sign
    test's): their k-th smallest and k-th largest, with k the largest whose
    coverage, 1 - 2 P(Binomial(n, 1/2) < k), is at least `confidence`.
    Fewer than 6 values reach 95% at no k: the interval is then their
    range, with the coverage it has (93.75% for 5). Returns (low, high,
    coverage); None for fewer than 2 values."""
    n = len(values)
    if n < 2:
        return None
    s = sorted(values)

    def coverage(k: int) -> float:
        return 1 - 2 * sum(math.comb(n, i) for i in range(k)) / 2 ** n

    k = 1
    while k + 1 <= n - k and coverage(k + 1) >= confidence:
        k += 1
    return s[k - 1], s[n - k], coverage(k)


@dataclass(frozen=True)
class Check:
    target: TargetSpec
    workload: str
    metric: str
    verdict: str
    value: float | None = None      # the ratio or the value
    mode_median: float | None = None
    reference_median: float | None = None
    reason: str = ""
    round_ratios: tuple[float, ...] = ()  # a ratio target's ratio within each round

    def round_interval(self) -> tuple[float, float, float] | None:
        """The 95% interval of the per-round ratios' median, or with 5
        rounds or fewer their range, at the coverage it has: how far the
        host's drift between rounds leaves the ratio uncertain."""
        return median_interval(self.round_ratios)

    def bound_unresolved(self) -> bool:
        """The bound lies inside round_interval(): by the rounds, the ratio
        may lie on either side of it, so the verdict is as much the host's
        drift as the modes' difference, and may turn in a rerun."""
        interval = self.round_interval()
        if interval is None:
            return False
        lo, hi, _ = interval
        # A bound at the interval's end still has all of it on one side:
        # the bounds are inclusive.
        t = self.target
        return (t.max is not None and lo <= t.max < hi) or (t.min is not None and lo < t.min <= hi)

    def interval_against_verdict(self) -> bool:
        """round_interval() lies wholly on the other side of the bound than
        the verdict, which is on the ratio of the medians: the two
        statistics disagree, and neither settles the check."""
        interval = self.round_interval()
        if interval is None or self.verdict not in (MET, MISSED) or self.bound_unresolved():
            return False
        return self.target.within(interval[0]) != (self.verdict == MET)


def evaluate(specs: list[TargetSpec], agg: Aggregate, host: HostInfo) -> list[Check]:
    checks: list[Check] = []
    for t in specs:
        if not t.applies(host):
            checks.append(Check(t, "-", "-", NOT_APPLICABLE, reason=(
                "cpuidle driver `%s`" % host.driver)))
            continue
        if t.workloads is None:
            wls = [w for w in agg.workloads if WORKLOAD_BY_NAME[w].latency]
            if not wls:  # the target still counts: not measured, not gone
                checks.append(Check(t, "-", ", ".join(t.metrics), NOT_MEASURED,
                                    reason="no latency workload run"))
                continue
        else:
            wls = list(t.workloads)
        modes = [t.mode] + ([t.reference] if t.reference else [])
        missing_modes = [m for m in modes if m not in agg.modes]
        for w in wls:
            if w not in agg.workloads:
                checks.append(Check(t, w, ", ".join(t.metrics), NOT_MEASURED,
                                    reason="workload not run"))
                continue
            if missing_modes:
                checks.append(Check(t, w, ", ".join(t.metrics), NOT_MEASURED,
                                    reason="mode %s not run" % ", ".join(missing_modes)))
                continue
            for met in t.metrics:
                # Only what the job cannot give (no writes in a read-only
                # job): a workload that ran but has no ok run keeps its
                # checks, not measured.
                if t.workloads is None and not WORKLOAD_BY_NAME[w].produces(met):
                    continue
                a = agg.median(w, t.mode, met)
                b = agg.median(w, t.reference, met) if t.reference else None
                if a is None or (t.reference and b is None):
                    m = t.mode if a is None else t.reference
                    cell = agg.cells.get(w, {}).get(m)
                    why = ("no ok run of mode %s in the medians" % m
                           if cell is None or cell.n == 0 else "no value in mode %s" % m)
                    checks.append(Check(t, w, met, NOT_MEASURED, None, a, b, why))
                    continue
                rounds: tuple[float, ...] = ()
                if t.kind == "ratio":
                    if b == 0:
                        checks.append(Check(t, w, met, NOT_MEASURED, None, a, b,
                                            "%s is 0: ratio undefined" % t.reference))
                        continue
                    v = a / b
                    rounds = tuple(agg.round_ratios(w, t.mode, t.reference, met))
                else:
                    v = a
                checks.append(Check(t, w, met, MET if t.within(v) else MISSED, v, a, b,
                                    round_ratios=rounds))
    return checks
