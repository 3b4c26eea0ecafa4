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
from conftest import BENCH


def build(run):
    s = run.meta.settings
    agg = aggregate(run.rows, s.workloads, s.modes, run.meta.host)
    checks = evaluate(load_targets(), agg, run.meta.host)
    return agg, checks, summary_text(run.rows, agg, run.meta, checks)


def table_lines(text, section):
    body = text.split(section, 1)[1].split("\n## ", 1)[0]
    return [line for line in body.splitlines() if line.startswith("| ")]


def test_per_workload_tables_match_what_the_earlier_harness_wrote(run):
    _, _, text = build(run)
    old = table_lines(run.old_summary, "## Per workload")
    new = set(table_lines(text, "## Per workload"))
    assert len(old) > 50
    missing = [line for line in old if line not in new]
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
    assert p99.bound_within_rounds()
    assert not lat[("qd1-randread-4k", "read_clat_mean_us")].bound_within_rounds()
    assert lat[("qd1-randrw-128k-thinktime", "read_clat_mean_us")].verdict == MISSED
    assert round(lat[("qd1-randrw-128k-thinktime", "read_clat_mean_us")].value, 3) == 1.460
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
    assert any("qd1-randrw-128k-thinktime | read_clat_mean_us | 1.460" in r
               and "per round 1.263-1.707 |" in r and "**missed**" in r for r in rows)
    assert any("qd1-randread-4k | read_clat_p99_us | 1.020" in r
               and "per round 0.942-1.087, the bound inside |" in r for r in rows)
    assert "Where the bound lies inside that range (1 of the checks met or missed" in text


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
    """A run records latgovd's nice (the unit's); runs from before it was
    recorded ran latgovd at 0."""
    assert run.meta.daemon.nice == 0
    assert ", nice 0\n" in build(run)[2]
    run.meta.daemon = dataclasses.replace(run.meta.daemon, nice=-10)
    run.meta.save(run_copy / "run-meta.json")
    run.meta = RunMeta.load(run_copy / "run-meta.json")
    assert run.meta.daemon.nice == -10
    assert ", nice -10\n" in build(run)[2]
