"""summary.md from rows, their aggregate, the run's metadata and the
targets. Pure: returns text."""

from __future__ import annotations

import shlex
import statistics

from .aggregate import SUMMARY_METRICS, Aggregate, num, per_cpu_metrics, static_not_held
from .fio import WARMUP_DEPTH
from .meta import RunMeta
from .results import is_warmup, measured
from .sampler import SAMPLE_PERIOD
from .sysstate import NO_CONSTRAINT
from .targets import MET, MISSED, NOT_APPLICABLE, NOT_MEASURED, Check
from .workloads import NO_RAMP_WHY, WORKLOAD_BY_NAME


def fmt(v: float | None) -> str:
    if v is None:
        return "-"
    a = abs(v)
    if a == 0:
        return "0"
    if a >= 1000:
        return "%.0f" % v
    if a >= 100:
        return "%.1f" % v
    if a >= 1:
        return "%.2f" % v
    return "%.3g" % v


def ratio(a: float | None, b: float | None) -> float | None:
    if a is None or b is None or b == 0:
        return None
    return a / b


def fmt_ratio(r: float | None) -> str:
    return "-" if r is None else "%.3f" % r


def check_row(c: Check) -> str:
    t = c.target
    if c.verdict == NOT_APPLICABLE:
        return "| %s | - | - | - | %s | not applicable (%s) |" % (
            t.text, t.bound_text(), c.reason)
    if c.value is None:
        shown = "-"
    elif t.kind == "ratio":
        def r(v: float) -> str:
            return ("%.3f" if abs(v) >= 0.1 else "%.3g") % v
        shown = "%s (%s %s, %s %s)" % (r(c.value), t.mode, fmt(c.mode_median),
                                       t.reference, fmt(c.reference_median))
        interval = c.round_interval()
        if interval is not None:
            lo, hi, coverage = interval
            shown += "; per round %s-%s" % (r(min(c.round_ratios)), r(max(c.round_ratios)))
            if coverage >= 0.95:
                shown += "; their median %s, 95%% interval %s-%s" % (
                    r(statistics.median(c.round_ratios)), r(lo), r(hi))
            if c.bound_unresolved():
                shown += ", the bound inside"
            elif c.interval_against_verdict():
                shown += ", the interval on the other side of the bound"
    else:
        shown = fmt(c.value)
    verdict = {MET: "**met**", MISSED: "**missed**"}.get(c.verdict, c.verdict)
    if c.reason:
        verdict += " (%s)" % c.reason
    what = "%s/%s" % (t.mode, t.reference) if t.kind == "ratio" else t.mode
    return "| %s | %s | %s | %s | %s | %s |" % (
        t.text, c.workload, c.metric, shown, "%s %s" % (what, t.bound_text()), verdict)


def targets_section(checks: list[Check]) -> list[str]:
    count = {v: sum(1 for c in checks if c.verdict == v)
             for v in (MET, MISSED, NOT_MEASURED, NOT_APPLICABLE)}
    inside = sum(1 for c in checks if c.verdict in (MET, MISSED) and c.bound_unresolved())
    L = ["## Targets: met or missed", "",
         "From bench/latgov_bench/targets.toml, on the medians over rounds: %d checks "
         "met, %d missed, %d not measured in this run; %d targets do not apply to this "
         "host." % (count[MET], count[MISSED], count[NOT_MEASURED], count[NOT_APPLICABLE])
         + " A check not measured (its workload or mode not run, or no ok run of it in "
         "the medians) counts as not met.",
         "",
         "A ratio also shows its range over the rounds, each round's ratio taken "
         "between runs of that round, minutes apart at most. From 6 rounds on it "
         "shows the median of those ratios too, with a 95%% interval for it that "
         "assumes nothing of their distribution (the sign test's: the k-th smallest "
         "and largest; the range itself up to 8 rounds). Up to 5 rounds no such "
         "interval reaches 95%%, and the range stands for it (93.75%% with 5). "
         "Where the bound lies inside the interval (%d of the checks met or missed "
         "here), the run does not resolve the check: the ratio may lie on either "
         "side of the bound, the verdict rests on the medians and may turn in a "
         "rerun; more rounds narrow the interval. Where the interval lies wholly on "
         "the other side of the bound than the verdict, which is on the ratio of the "
         "medians, the two disagree and neither settles the check." % inside,
         "",
         "| target | workload | metric | measured | bound | verdict |",
         "|---|---|---|---|---|---|"]
    L += [check_row(c) for c in checks]
    L.append("")
    return L


def held_section(agg: Aggregate, meta: RunMeta) -> list[str]:
    """The energy side: how long each mode kept CPUs out of their idle
    states, and the POLL time that bought."""
    cpus, modes = meta.host.cpus, agg.modes
    L = ["## CPU-seconds held and POLL time, per mode (median over rounds)", "",
         "Held: a constraint on that CPU (its pm_qos_resume_latency_us other "
         "than \"0\", or /dev/cpu_dma_latency below %d) in the samples (%d ms apart on "
         "average), integrated over the measured window. static holds every CPU for the "
         "whole run; static-waiter and static-completion hold theirs (static_cpus in "
         "results.csv) for the whole run." % (NO_CONSTRAINT, SAMPLE_PERIOD * 1000), ""]
    hdr = "| workload | mode | window (s) | " + " | ".join(
        "cpu%d held (s)" % c for c in cpus) + " | all CPUs held (CPU-s) | POLL (s) |"
    L += [hdr, "|---|---|---|" + "---|" * len(cpus) + "---|---|"]
    for w in agg.workloads:
        for m in modes:
            if not agg.cells[w][m].n:
                continue
            cells = [fmt(agg.median(w, m, "window_s") if agg.stat(w, m, "window_s")
                         else None)]
            cells += [fmt(agg.median(w, m, "cpu%d_held_s" % c)) for c in cpus]
            cells.append(fmt(agg.median(w, m, "held_cpu_s")))
            p = agg.median(w, m, "poll_time_us")
            cells.append("-" if p is None else fmt(p / 1e6))
            L.append("| %s | %s | %s |" % (w, m, " | ".join(cells)))
    L.append("")
    return L


def evidence_line(ev: dict, per_run: bool = True) -> str:
    """What latgovd's learnt evidence was at the start and the end;
    per_run: results.csv has latgovd_evidence_before."""
    start, end = ev.get("at_start", {}), ev.get("at_end", {})
    text = "- latgovd's learnt evidence (%s): " % ev.get("file", "?")
    if start.get("existed"):
        text += ("an existing file (sha256 %s) was moved aside, so the run started with none "
                 "learnt" % start.get("sha256", "?")[:12])
    else:
        text += "none at the start"
    text += ("; within the run latgovd kept what it learnt across rounds (round 1 learns, "
             "later rounds reuse it%s)" % (": latgovd_evidence_before in results.csv"
                                          if per_run else ""))
    if end.get("existed"):
        text += "; left at the end: sha256 %s (%s)" % (end.get("sha256", "?")[:12],
                                                     end.get("copy", end.get("error", "")))
    elif end:
        text += "; none left at the end"
    if ev.get("put_back"):
        text += "; at exit: %s" % ev["put_back"]
    return text


def warmup_line(rows: list[dict], warmups: list[dict], meta: RunMeta) -> str:
    """The warm-ups as the run recorded them, or that it ran none."""
    if not warmups:
        return ("- no warm-up runs (none in results.csv): each round's first mode went "
                "through its offsets first; the later modes may have found them cached")
    took = sum(num(r.get("window_s")) or 0.0 for r in warmups)
    ok = [r for r in warmups if r["status"] == "ok"]
    covered = [r for r in rows if r.get("warmup_covered")]
    beyond = [r for r in covered if r["warmup_covered"] != "yes"]
    text = ("- warm-up: before each round's runs of a workload, one unmeasured run of the "
            "same job with the round's seed went through the offsets those runs read, in "
            "the same order, at depth %d on io_uring without think time, rate limit or "
            "fdatasync (mode `warm-up` in results.csv, in no statistic; nothing held, no "
            "latgovd; in the jobs that read and write after a ramp, fio's read/write "
            "choices may differ from it after the ramp, as between the modes' runs): "
            "%d warm-ups (%d ok), %.0f s of fio in all"
            % (WARMUP_DEPTH, len(warmups), len(ok), took))
    if meta.elapsed:
        text += ", %.0f%% of the run's time" % (100 * took / meta.elapsed)
    text += ("; %d of %d measured runs went through offsets beyond their warm-up's "
             "(warmup_covered = no%s)" % (
                 len(beyond), len(covered), ": " + ", ".join(
                     "r%s %s %s" % (r["round"], r["workload"], r["mode"])
                     for r in beyond[:8]) + (", ..." if len(beyond) > 8 else "")
                 if beyond else ""))
    return text


def run_orders(rows: list[dict]) -> dict[int, list[str]]:
    """Each round's modes in the order they ran (of its first workload);
    rows that do not record their order are left out."""
    orders: dict[int, list[tuple[int, str]]] = {}
    first_workload: dict[int, str] = {}
    for r in rows:
        if not str(r.get("order_in_round", "")).strip():
            continue
        rnd = int(r["round"])
        if first_workload.setdefault(rnd, r["workload"]) == r["workload"]:
            orders.setdefault(rnd, []).append((int(r["order_in_round"]), r["mode"]))
    return {rnd: [m for _, m in sorted(o)] for rnd, o in sorted(orders.items())}


def round_orders(orders: dict[int, list[str]]) -> str:
    return "- order in each round: %s" % "; ".join(
        "r%d %s" % (rnd, " > ".join(o)) for rnd, o in orders.items())


def predecessors(orders: dict[int, list[str]], modes: list[str]) -> str:
    """How often each mode ran right after each other one in a round: a
    mode that mostly follows the same one carries what that one left (a
    warm CPU, a host that stopped idling)."""
    after = {m: {p: 0 for p in modes if p != m} for m in modes}
    for order in orders.values():
        for before, mode in zip(order, order[1:]):
            if mode in after and before in after[mode]:
                after[mode][before] += 1
    return "- run right after, per mode: %s" % "; ".join(
        "%s after %s" % (m, ", ".join("%s %d" % kv for kv in after[m].items())) for m in modes)


def first_slots(rows: list[dict], modes: list[str]) -> str:
    """How many rounds each mode ran first in: the same for every mode only
    when the rounds can share the first place evenly among the modes."""
    first: dict[str, set] = {m: set() for m in modes}
    rounds = set()
    for r in rows:
        rounds.add(r["round"])
        if str(r.get("order_in_round")) == "1" and r["mode"] in first:
            first[r["mode"]].add(r["round"])
    counts = [len(first[m]) for m in modes]
    text = "- first in its round: %s (of %d rounds)" % (
        ", ".join("%s %d" % (m, c) for m, c in zip(modes, counts)), len(rounds))
    if len(set(counts)) > 1:
        text += ("; unequal: this schedule does not put each of %d modes first equally "
                 "often in %d rounds (each round's order is below)" % (len(modes), len(rounds)))
    return text


def header(rows: list[dict], meta: RunMeta, agg: Aggregate) -> list[str]:
    warmups = [r for r in rows if is_warmup(r)]
    rows = measured(rows)
    h, s, t = meta.host, meta.settings, meta.target_info
    L = ["# latgov A/B: %s" % t.get("name", "?"), ""]
    if meta.note:
        L += ["**%s**" % meta.note, ""]
    L.append("- command: `%s`" % " ".join(shlex.quote(a) for a in meta.command))
    L.append("- started %s, took %.1f min; %d runs (%d ok)" % (
        meta.started, meta.elapsed / 60, len(rows),
        sum(1 for r in rows if r["status"] == "ok")))
    L.append("- target: %s (%s, %d MiB, disk %s)%s" % (
        t.get("path"), t.get("kind"), int(t.get("size", 0)) >> 20, t.get("disk") or "?",
        "; created by this run" if t.get("created") else ""))
    L.append("- machine: %s, %d online CPUs, kernel %s" % (h.node, len(h.cpus), h.kernel))
    L.append("- cpuidle: driver `%s`, governor `%s`, states: %s" % (
        h.driver, h.governor, h.idle_states))
    if h.driver == "none":
        L.append("  - **no cpuidle driver**: there are no idle states, so no per-state or "
                 "POLL time; idle time comes from /proc/stat (idle, iowait) instead, and "
                 "PM QoS limits have nothing to act on.")
    # %g: the settings are numbers, ints as the run had them, floats once
    # run-meta.json is read back by --resummarize.
    L.append("- fio %s; per run %g s measured after %g s ramp (idle workload: %g s burst, "
             "then %g s with no IO, measured)" % (meta.fio_version, s.runtime, s.ramp,
                                                  s.burst_sec, s.idle_sec))
    if s.ramp and meta.no_ramp:
        L.append("  - no ramp for %s: %s" % (", ".join(meta.no_ramp), NO_RAMP_WHY))
    L.append("- modes, interleaved: %s; rounds: %d" % (", ".join(s.modes), s.rounds))
    if rows:
        orders = run_orders(rows)
        if orders:
            L.append(round_orders(orders))
        L.append(first_slots(rows, s.modes))
        if orders:
            L.append(predecessors(orders, s.modes))
    seeds = sorted({(int(r["round"]), r["fio_randseed"]) for r in rows
                    if r.get("fio_randseed")})
    if seeds:
        L.append("- fio --randseed per round (the same for every mode within a round): %s"
                 % ", ".join("r%d %s" % kv for kv in seeds))
    L.append(warmup_line(rows, warmups, meta))
    # What only runs from a later harness did, claimed only where the
    # run's own files show it.
    per_run = bool(rows) and "latgovd_evidence_before" in rows[0]
    if meta.waiter:
        L.append("- waiter workload: %s (%s)" % (
            meta.waiter, "at the start; read again before each run, its waiter_cpu and "
            "completion_cpus in results.csv" if meta.waiter_per_run or per_run
            else "chosen at the start"))
    if meta.daemon:
        d = meta.daemon
        L.append("- latgovd: %s (source tree git %s), config: %s, %s"
                 % (d.latgovd, d.git, d.config_desc, "nice unknown (not recorded by this "
                    "run)" if d.nice is None else "nice %d" % d.nice))
        L.append("- binaries: %s" % d.binaries)
        L.append("- wake-up costs: %s; daemon status reported idle_costs = %s" % (
            d.calibration, ", ".join(sorted({r["latgovd_idle_costs"] for r in rows
                                             if r.get("latgovd_idle_costs")})) or "-"))
        seen = sorted({x for r in rows if r["mode"] == "latgov"
                       for x in (r.get("latgovd_limits_seen") or "").split(";") if x})
        L.append("- limits latgovd reported holding (status file): %s"
                 % (", ".join(seen) if seen else "none"))
        ca = meta.calibration_aside
        if ca.get("at_start", {}).get("existed"):
            L.append("- latgovd's calibration file (%s): moved aside for the run (sha256 %s), "
                     "at exit: %s" % (ca.get("file", "?"),
                                      ca["at_start"].get("sha256", "?")[:12],
                                      ca.get("put_back", "?")))
        elif ca.get("put_back") not in (None, "", "there was none"):
            L.append("- latgovd's calibration file (%s): none at the start; at exit: %s"
                     % (ca.get("file", "?"), ca["put_back"]))
        if meta.evidence:
            L.append(evidence_line(meta.evidence, per_run))
    L.append("- constraints before the harness started: /dev/cpu_dma_latency %s; per-CPU %s"
             % (meta.dma_before, meta.percpu_before))
    if meta.forced:
        L.append("- **started with --force despite**: " + "; ".join(meta.forced))
    bad = [r for r in rows + warmups if r["status"] != "ok"]
    if bad:
        L.append("- **failed runs**: " + "; ".join(
            "r%s %s %s: %s" % (r["round"], r["workload"], r["mode"], r["status"])
            for r in bad))
    out = agg.excluded
    unheld = [r for r, _ in out if r["mode"] == "static" and static_not_held(r)]
    if unheld:
        L.append("- **%d static runs did not hold /dev/cpu_dma_latency at 0** (in at least "
                 "99%% of the samples, %d ms apart on average, and at 0): kept out of the "
                 "medians, below"
                 % (len(unheld), SAMPLE_PERIOD * 1000))
    if out:
        L.append("- **%d of %d runs kept out of the medians**: someone else's constraint held "
                 "at their start or during them (seen by the sampler, every %d ms on average, "
                 "where the run's mode sets nothing, or nothing per CPU), another fio/latgovd "
                 "running meanwhile, or a static mode not holding what it holds: %s" % (
                     len(out), len(rows), SAMPLE_PERIOD * 1000, "; ".join(
                         "r%s %s %s (%s)" % (r["round"], r["workload"], r["mode"], why)
                         for r, why in out)))
    ncpu = max(len(h.cpus), 1)
    hi = [r for r in rows if (num(r.get("others_cpu_s")) or 0) >
          0.1 * ncpu * (num(r.get("window_s")) or 1)]
    if hi:
        share = [100 * (num(r["others_cpu_s"]) or 0) / (ncpu * (num(r["window_s"]) or 1))
                 for r in hi]
        tops: dict[str, float] = {}
        for r in hi:
            for item in (r.get("others_top") or "").split(";"):
                if item:
                    c, v = item.rsplit(":", 1)
                    tops[c] = tops.get(c, 0.0) + float(v)
        L.append("- **other processes used more than 10%% of the machine's CPU in %d of %d "
                 "runs** (median %.0f%%, max %.0f%% of all CPUs; mostly %s). Treat "
                 "differences smaller than the min-max spread as noise." % (
                     len(hi), len(rows), statistics.median(share), max(share),
                     ", ".join("%s (%.0f s)" % kv for kv in sorted(
                         tops.items(), key=lambda kv: -kv[1])[:4])))
    for n in meta.notes:
        L.append("- note: " + n)
    L.append("")
    return L


def onset_note(agg: Aggregate, w: str) -> str:
    """What the onset rows are, where latgovd reported onsets: latgovd's
    status gives quantiles per run and no samples, so a p99 pooled over
    rounds cannot be had; the runs' maxima and counts do pool."""
    parts = []
    for m in agg.modes:
        count, longest = agg.stat(w, m, "onset_count"), agg.stat(w, m, "onset_max_us")
        if count and sum(count.values):
            part = "%s %d onsets" % (m, sum(count.values))
            if longest:
                part += ", the longest %s us" % fmt(longest.max)
            parts.append(part)
    if not parts:
        return ""
    return ("Onset rows: latgovd's status gives quantiles per run, not its samples, so "
            "the onset p99 shown is the median of per-run p99 (each over that run's "
            "onsets), not a p99 pooled over rounds. Pooled over the runs in the medians: "
            "%s." % "; ".join(parts))


def workload_tables(agg: Aggregate, meta: RunMeta) -> list[str]:
    modes = agg.modes
    L = ["## Per workload: median [min-max] over rounds", ""]
    ratios = [(a, b) for a, b in (("latgov", "static"), ("latgov", "off"))
              if a in modes and b in modes]
    metrics = list(SUMMARY_METRICS) + per_cpu_metrics(meta.host)
    for w in agg.workloads:
        wl = WORKLOAD_BY_NAME[w]
        L += ["### %s" % wl.title, ""]
        if wl.idle:
            L += ["Latency rows: the %g s burst. Idle, held and daemon rows: the %g s "
                  "with no IO after it." % (meta.settings.burst_sec, meta.settings.idle_sec),
                  ""]
        onset = onset_note(agg, w)
        if onset:
            L += [onset, ""]
        L.append("| metric | " + " | ".join(modes)
                 + "".join(" | %s/%s" % r for r in ratios) + " |")
        L.append("|---|" + "---|" * (len(modes) + len(ratios)))
        for met, label in metrics:
            cells = []
            for m in modes:
                s = agg.stat(w, m, met)
                if s is None:
                    cells.append("-")
                elif s.min == s.max:
                    cells.append(fmt(s.median))
                else:
                    cells.append("%s [%s-%s]" % (fmt(s.median), fmt(s.min), fmt(s.max)))
            if all(c == "-" for c in cells):
                continue
            cells += [fmt_ratio(ratio(agg.median(w, a, met), agg.median(w, b, met)))
                      for a, b in ratios]
            L.append("| %s | %s |" % (label, " | ".join(cells)))
        L += ["", "runs in the medians per mode: " + ", ".join(
            "%s %d" % (m, agg.cells[w][m].n) for m in modes), ""]
    return L


def summary_text(rows: list[dict], agg: Aggregate, meta: RunMeta,
                 checks: list[Check]) -> str:
    L = header(rows, meta, agg)
    L += targets_section(checks)
    L += held_section(agg, meta)
    L += workload_tables(agg, meta)
    L += ["## Files", "",
          "results.csv (every run, every column), aggregate.json, latency-<workload>.png, "
          "idle-time.png, held.png, raw/ (fio JSON and latgovd logs per run).", "",
          "Held fractions and CPU-seconds come from sampling /dev/cpu_dma_latency and "
          "cpuN/power/pm_qos_resume_latency_us every %d ms on average during the measured "
          "window (any "
          "value other than \"0\" per CPU, or a global value below %d, counts as held). "
          "POLL time is the delta of cpuN/cpuidle/state0/time (the POLL state). latgovd CPU "
          "is the sum of its threads' schedstat run time over the window (ns precise); "
          "utime+stime from /proc/<pid>/stat is in latgovd_cpu_s. The onset delay is "
          "latgovd's own status (onset_delay: request issue to constraint written), read "
          "once more after the window, from latgovd's first status write after it (it "
          "writes none at exit); its p50 and p99 are per run, and the tables and targets "
          "show the median of per-run p99. Context switches are summed over "
          "/proc/<pid>/task/*/status."
          % (SAMPLE_PERIOD * 1000, NO_CONSTRAINT)]
    return "\n".join(L) + "\n"
