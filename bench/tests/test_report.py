"""summary.md from the committed results: the same per-workload numbers as
the harness wrote before, and the targets table driven by targets.toml."""

import dataclasses
import json
import subprocess
import sys

import pytest

from latgov_bench.aggregate import aggregate
from latgov_bench.meta import RunMeta
from latgov_bench.report import summary_text
from latgov_bench.targets import (MET, MISSED, NOT_APPLICABLE, NOT_MEASURED, evaluate,
                                  load_targets)
from latgov_bench.workloads import WORKLOAD_BY_NAME
from conftest import BENCH


def on_clat(targets):
    """The shipped targets judging clat where they judge the whole request
    (read_lat_*, write_lat_*): the committed runs predate fio's lat
    percentiles, and were judged so."""
    def clat(metric):
        for d in ("read_", "write_"):
            if metric.startswith(d + "lat_"):
                return d + "clat_" + metric[len(d + "lat_"):]
        return metric
    return [dataclasses.replace(t, metrics=tuple(clat(m) for m in t.metrics)) for t in targets]


def build(run, targets=None):
    s = run.meta.settings
    agg = aggregate(run.rows, s.workloads, s.modes, run.meta.host)
    checks = evaluate(on_clat(load_targets()) if targets is None else targets, agg,
                      run.meta.host)
    return agg, checks, summary_text(run.rows, agg, run.meta, checks)


def test_a_run_without_the_whole_requests_latency_is_not_judged_on_clat(haltpoll):
    # The shipped targets take the whole request: a run that has only clat
    # p99 is not measured there, rather than judged on another measure.
    _, checks, _ = build(haltpoll, load_targets())
    lat = verdicts(checks, "latency-vs-static")
    assert lat[("qd1-randread-4k", "read_lat_p99_us")].verdict == NOT_MEASURED
    assert not any(m.startswith(("read_clat", "write_clat")) for _, m in lat)


def table_lines(text, section):
    body = text.split(section, 1)[1].split("\n## ", 1)[0]
    return [line for line in body.splitlines() if line.startswith("| ")]


def workload_sections(text):
    """{workload title: its table lines} of the per-workload tables."""
    body = text.split("## Per workload", 1)[1].split("\n## ", 1)[0]
    out = {}
    for part in body.split("\n### ")[1:]:
        title, rest = part.split("\n", 1)
        out[title.strip()] = [line for line in rest.splitlines() if line.startswith("| ")]
    return out


def test_per_workload_tables_match_what_the_earlier_harness_wrote(run):
    agg, _, text = build(run)
    # The earlier harness counted runs that are now kept out of the medians
    # (someone else's constraint held during them): their tables differ.
    kept_out = {WORKLOAD_BY_NAME[r["workload"]].title for r, _ in agg.excluded}
    old = workload_sections(run.old_summary)
    new = workload_sections(text)
    compared = [line for title, lines in old.items() if title not in kept_out
                for line in lines]
    assert len(compared) > 50
    missing = [line for title, lines in old.items() if title not in kept_out
               for line in lines if line not in set(new[title])]
    assert missing == []


def verdicts(checks, target_id):
    return {(c.workload, c.metric): c for c in checks if c.target.id == target_id}


def test_haltpoll_targets(haltpoll):
    _, checks, text = build(haltpoll)
    lat = verdicts(checks, "latency-vs-static")
    assert lat[("qd1-randread-4k", "read_clat_mean_us")].verdict == MET
    assert round(lat[("qd1-randread-4k", "read_clat_mean_us")].value, 3) == 0.953
    assert lat[("qd1-randread-4k", "read_clat_p99_us")].verdict == MET
    # 2 rounds: the p99 ratio was 1.087 in round 1 and 0.942 in round 2, so
    # the bound of 1.05 lies between them; the mean's 1.000 and 0.903 do not
    p99 = lat[("qd1-randread-4k", "read_clat_p99_us")]
    assert p99.round_ratios == pytest.approx((1.0870, 0.9424), abs=5e-5)
    assert p99.bound_unresolved()
    assert not lat[("qd1-randread-4k", "read_clat_mean_us")].bound_unresolved()
    # Round 1's latgov run of QD1 128k is kept out of the medians (someone
    # else's constraint held 2% of it): the ratio is round 2's alone. With
    # both rounds it was 1.460, per round 1.263-1.707.
    assert lat[("qd1-randrw-128k-thinktime", "read_clat_mean_us")].verdict == MISSED
    assert round(lat[("qd1-randrw-128k-thinktime", "read_clat_mean_us")].value, 3) == 1.405
    assert lat[("qd1-randrw-128k-thinktime", "read_clat_mean_us")].round_ratios == \
        pytest.approx((1.2628,), abs=5e-5)
    assert lat[("qd1-randrw-128k-thinktime", "write_clat_p99_us")].verdict == MISSED
    # reads only: no write check for QD1 4k; idle is not a latency workload
    assert ("qd1-randread-4k", "write_clat_mean_us") not in lat
    assert not any(w == "idle" for w, _ in lat)
    poll = verdicts(checks, "idle-poll")[("idle", "poll_time_us")]
    assert poll.verdict == MET and round(poll.value * 100, 3) == 0.236
    cpu = verdicts(checks, "daemon-cpu")[("qd1-randread-4k", "latgovd_cpu_pct_core")]
    assert cpu.verdict == MET
    onset = verdicts(checks, "onset")[("onset-isolated-reads", "onset_p99_us")]
    assert onset.verdict == NOT_MEASURED
    for tid in ("no-cpuidle-latency", "no-cpuidle-holds-nothing"):
        assert [c.verdict for c in checks if c.target.id == tid] == [NOT_APPLICABLE]
    dry = verdicts(checks, "dry-run-iops")
    assert [c.verdict for c in dry.values()] == [NOT_MEASURED]
    assert ("on the medians over rounds: 4 checks met, 4 missed, 2 not measured in this "
            "run; 2 targets do not apply to this host.") in text
    rows = table_lines(text, "## Targets: met or missed")
    assert rows[0].startswith("| target | workload |")
    assert any("qd1-randrw-128k-thinktime | read_clat_mean_us | 1.405 (latgov 156.2, "
               "static 111.2) |" in r and "**missed**" in r for r in rows)
    assert any("qd1-randread-4k | read_clat_p99_us | 1.020" in r
               and "per round 0.942-1.087, the bound inside |" in r for r in rows)
    assert "Where the bound lies inside the interval (1 of the checks met or missed" in text


def test_vda_without_cpuidle_driver_checks_latgov_against_off(vda):
    _, checks, text = build(vda)
    assert [c.verdict for c in checks if c.target.id == "latency-vs-static"] == \
        [NOT_APPLICABLE]
    lat = verdicts(checks, "no-cpuidle-latency")
    assert lat[("qd1-randread-4k", "read_clat_mean_us")].verdict == MET
    assert round(lat[("qd1-randread-4k", "read_clat_mean_us")].value, 3) == 1.003
    assert lat[("qd1-randread-4k", "read_clat_p99_us")].verdict == MISSED
    held = verdicts(checks, "no-cpuidle-holds-nothing")
    assert held[("qd1-randread-4k", "held_cpu_s")].verdict == MET
    assert held[("waiter-fdatasync-4k", "held_cpu_s")].verdict == NOT_MEASURED
    dry = verdicts(checks, "dry-run-iops")[("qd1-randread-4k", "read_iops")]
    assert dry.verdict == MISSED and round(dry.value, 3) == 0.971
    assert "not applicable (cpuidle driver `none`)" in text


def test_held_section_shows_static_holding_every_cpu_the_whole_window(run):
    agg, _, text = build(run)
    lines = table_lines(text, "## CPU-seconds held and POLL time")
    static = [line for line in lines if "| static |" in line]
    assert static
    for line in static:
        cells = [c.strip() for c in line.strip("|").split("|")]
        window, cpu0, cpu1, total = (float(c) for c in cells[2:6])
        assert cpu0 == window and cpu1 == window and abs(total - 2 * window) < 0.02
    off = [line for line in lines if "| off |" in line]
    assert all(line.split("|")[6].strip() == "0" for line in off)


def test_resummarize_rebuilds_summary_and_aggregate(run, run_copy):
    p = subprocess.run([sys.executable, str(BENCH / "ab"), "--resummarize", str(run_copy)],
                       capture_output=True, text=True)
    # plotting needs matplotlib, which this interpreter may lack: the report
    # and aggregate must be written whatever happens to the plots
    assert p.returncode == 0, p.stderr
    text = (run_copy / "summary.md").read_text()
    assert "## Targets: met or missed" in text
    data = json.loads((run_copy / "aggregate.json").read_text())
    assert data["modes"] == run.meta.settings.modes
    assert {t["verdict"] for t in data["targets"]} <= {MET, MISSED, NOT_MEASURED,
                                                        NOT_APPLICABLE}


def test_report_names_latgovd_nice(run, run_copy):
    """A run records latgovd's nice (the unit's); of runs from before it
    was recorded, the report does not claim one."""
    assert run.meta.daemon.nice is None
    assert ", nice unknown (not recorded by this run)\n" in build(run)[2]
    run.meta.save(run_copy / "run-meta.json")
    assert "nice" not in json.loads((run_copy / "run-meta.json").read_text())
    run.meta.daemon = dataclasses.replace(run.meta.daemon, nice=-10)
    run.meta.save(run_copy / "run-meta.json")
    run.meta = RunMeta.load(run_copy / "run-meta.json")
    assert run.meta.daemon.nice == -10
    assert ", nice -10\n" in build(run)[2]


def test_the_report_names_the_runs_kept_out_of_the_medians(haltpoll):
    _, _, text = build(haltpoll)
    assert ("**1 of 18 runs kept out of the medians**" in text
            and "r1 qd1-randrw-128k-thinktime latgov (someone else's constraint held 2% of "
            "it)" in text)
    assert "runs in the medians per mode: off 2, static 2, latgov 1" in text
    assert "A check not measured (its workload or mode not run, or no ok run of it in the " \
        "medians) counts as not met." in text


def test_the_report_gives_the_evidence_seeds_and_what_force_ran_despite(haltpoll):
    meta = haltpoll.meta
    meta.evidence = {"file": "/var/lib/latgov/evidence",
                     "at_start": {"existed": True, "sha256": "ab" * 32,
                                  "moved_aside_to": "/var/lib/latgov/evidence.bench-ab-saved"},
                     "at_end": {"existed": True, "sha256": "cd" * 32,
                                "copy": "raw/evidence.end"},
                     "put_back": "the original put back"}
    meta.forced = ["cpu1 pm_qos_resume_latency_us is n/a"]
    meta.calibration_aside = {"file": "/var/lib/latgov/calibration.toml",
                              "at_start": {"existed": False}, "at_end": {},
                              "put_back": "removed what latgovd wrote in the run "
                                          "(calibrate_on_start); there was none at the start"}
    rows = [dict(r, fio_randseed=str(1000000 + int(r["round"]))) for r in haltpoll.rows]
    s = meta.settings
    agg = aggregate(rows, s.workloads, s.modes, meta.host)
    text = summary_text(rows, agg, meta, evaluate(load_targets(), agg, meta.host))
    assert ("latgovd's learnt evidence (/var/lib/latgov/evidence): an existing file (sha256 "
            "abababababab) was moved aside, so the run started with none learnt; within the "
            "run latgovd kept what it learnt across rounds (round 1 learns, later rounds "
            "reuse it") in text
    assert "left at the end: sha256 cdcdcdcdcdcd (raw/evidence.end)" in text
    assert "fio --randseed per round (the same for every mode within a round): r1 1000001, " \
        "r2 1000002" in text
    assert "**started with --force despite**: cpu1 pm_qos_resume_latency_us is n/a" in text
    assert ("- latgovd's calibration file (/var/lib/latgov/calibration.toml): none at the "
            "start; at exit: removed what latgovd wrote in the run (calibrate_on_start)") in text
    # A removal that failed is said too.
    meta.calibration_aside["put_back"] = "FAILED to remove /var/lib/latgov/calibration.toml"
    text = summary_text(rows, agg, meta, evaluate(load_targets(), agg, meta.host))
    assert ("none at the start; at exit: FAILED to remove /var/lib/latgov/calibration.toml"
            in text)


def onset_rows():
    rows = []
    for rnd, (count, p99, top) in enumerate([(8, 60.0, 70.0), (9, 80.0, 240.0)], 1):
        for m in ("off", "latgov"):
            r = {"status": "ok", "round": str(rnd), "workload": "onset-isolated-reads",
                 "mode": m, "read_clat_mean_us": "100"}
            if m == "latgov":
                r.update(onset_count=str(count), onset_p99_us=str(p99), onset_max_us=str(top))
            rows.append(r)
    return rows


def test_onset_figures_say_they_are_medians_of_per_run_quantiles(haltpoll):
    meta = haltpoll.meta
    meta.settings = dataclasses.replace(meta.settings, modes=["off", "latgov"],
                                        workloads=["onset-isolated-reads"])
    rows = onset_rows()
    agg = aggregate(rows, ["onset-isolated-reads"], ["off", "latgov"], meta.host)
    checks = evaluate(load_targets(), agg, meta.host)
    text = summary_text(rows, agg, meta, checks)
    assert "| latgovd onset delay, per-run p99 (us) | - | 70.00 [60.00-80.00] |" in text
    assert ("the onset p99 shown is the median of per-run p99 (each over that run's onsets), "
            "not a p99 pooled over rounds. Pooled over the runs in the medians: latgov 17 "
            "onsets, the longest 240.0 us.") in text
    onset = verdicts(checks, "onset")[("onset-isolated-reads", "onset_p99_us")]
    assert onset.verdict == MET and onset.value == 70.0
    assert "(median of per-run p99)" in onset.target.text


def test_evidence_and_force_survive_run_meta(run, run_copy):
    run.meta.evidence = {"file": "/e", "at_start": {"existed": False}}
    run.meta.forced = ["x"]
    run.meta.save(run_copy / "run-meta.json")
    back = RunMeta.load(run_copy / "run-meta.json")
    assert back.evidence == run.meta.evidence and back.forced == ["x"]


def test_workloads_run_without_the_ramp_survive_run_meta_and_are_named(haltpoll, run_copy):
    assert haltpoll.meta.no_ramp == []  # recorded by no run before: all had the ramp
    assert "no ramp for" not in build(haltpoll)[2]
    haltpoll.meta.no_ramp = ["qd1-randrw-128k-thinktime"]
    haltpoll.meta.save(run_copy / "run-meta.json")
    assert RunMeta.load(run_copy / "run-meta.json").no_ramp == ["qd1-randrw-128k-thinktime"]
    assert "  - no ramp for qd1-randrw-128k-thinktime: paced by thinktime" in build(haltpoll)[2]


def test_old_runs_are_not_credited_with_what_they_did_not_record(haltpoll):
    """--resummarize of a run from before the waiter was placed again per
    run and before latgovd_evidence_before: no claim of either."""
    meta = haltpoll.meta
    meta.waiter = "pinned to CPU 0; its queue hctx0 completes on CPU 1"
    meta.evidence = {"file": "/var/lib/latgov/evidence", "at_start": {"existed": False}}
    text = build(haltpoll)[2]
    assert "- waiter workload: pinned to CPU 0; its queue hctx0 completes on CPU 1 (chosen " \
        "at the start)\n" in text
    assert "read again before each run" not in text
    assert "latgovd_evidence_before" not in text
    # a run whose results.csv has the column (the same harness change)
    rows = [dict(r, latgovd_evidence_before="") for r in haltpoll.rows]
    s = meta.settings
    agg = aggregate(rows, s.workloads, s.modes, meta.host)
    text = summary_text(rows, agg, meta, evaluate(load_targets(), agg, meta.host))
    assert "(at the start; read again before each run, its waiter_cpu" in text
    assert "reuse it: latgovd_evidence_before in results.csv)" in text


def test_the_report_counts_first_slots_and_says_when_no_warmup_ran(haltpoll):
    text = build(haltpoll)[2]
    assert ("- first in its round: off 1, static 1, latgov 0 (of 2 rounds); unequal: this "
            "schedule does not put each of 3 modes first equally often in 2 rounds (each "
            "round's order is below)\n" in text)
    # What the run did, from its rows (a plain rotation then).
    assert "- order in each round: r1 off > static > latgov; r2 static > latgov > off\n" in text
    assert ("- run right after, per mode: off after static 0, latgov 1; static after off 1, "
            "latgov 0; latgov after off 0, static 2\n" in text)
    assert "- no warm-up runs (none in results.csv)" in text


def with_warmups(rows, covered="yes"):
    """rows with a warm-up row before each round's runs of a workload."""
    out, seen = [], set()
    for r in rows:
        key = (r["round"], r["workload"])
        if key not in seen:
            seen.add(key)
            out.append({"round": r["round"], "workload": r["workload"], "mode": "warm-up",
                        "order_in_round": "0", "status": "ok", "window_s": "2.5",
                        "warmup_ios": "50000", "fio_ios": "50000",
                        "read_clat_mean_us": "99999"})
        out.append(dict(r, warmup_ios="50000", warmup_covered=covered))
    return out


def test_warmups_are_described_and_in_no_statistic(haltpoll):
    meta = haltpoll.meta
    s = meta.settings
    _, _, plain = build(haltpoll)
    rows = with_warmups(haltpoll.rows)
    rows[1]["warmup_covered"] = "no"
    agg = aggregate(rows, s.workloads, s.modes, meta.host)
    text = summary_text(rows, agg, meta, evaluate(on_clat(load_targets()), agg, meta.host))
    assert "; 18 runs (18 ok)" in text  # the measured runs only
    assert workload_sections(text) == workload_sections(plain)
    assert table_lines(text, "## Targets") == table_lines(plain, "## Targets")
    assert ("- warm-up: before each round's runs of a workload, one unmeasured run of the "
            "same job with the round's seed went through the offsets those runs read, in "
            "the same order, at depth 32 on io_uring without think time, rate limit or "
            "fdatasync (mode "
            "`warm-up` in results.csv, in no statistic; nothing held, no latgovd; in the "
            "jobs that read and write after a ramp, fio's read/write choices may differ "
            "from it after the ramp, as between the modes' runs): 6 warm-ups (6 ok), 15 s "
            "of fio in all, "
            "13% of the run's time") in text
    assert "; 1 of 18 measured runs went through offsets beyond their warm-up's " \
        "(warmup_covered = no: r1 qd1-randread-4k off)" in text
    failed = [dict(r) for r in rows]
    failed[0]["status"] = "fio failed (1): boom"
    agg = aggregate(failed, s.workloads, s.modes, meta.host)
    text = summary_text(failed, agg, meta, evaluate(load_targets(), agg, meta.host))
    assert "**failed runs**: r1 qd1-randread-4k warm-up: fio failed (1): boom" in text


def test_the_report_says_when_static_did_not_hold(haltpoll):
    meta = haltpoll.meta
    s = meta.settings
    rows = [dict(r) for r in haltpoll.rows]
    [bad] = [r for r in rows if r["mode"] == "static" and r["round"] == "2"
             and r["workload"] == "idle"]
    bad["global_held_frac"] = "0.5"
    agg = aggregate(rows, s.workloads, s.modes, meta.host)
    text = summary_text(rows, agg, meta, evaluate(load_targets(), agg, meta.host))
    assert "- **1 static runs did not hold /dev/cpu_dma_latency at 0** (in at least 99% of " \
        "the samples, 100 ms apart on average, and at 0): kept out of the medians, below" in text
    assert "r2 idle static (static did not hold /dev/cpu_dma_latency at 0 (held in 50.0% " \
        "of the samples))" in text
    assert "**2 of 18 runs kept out of the medians**" in text
