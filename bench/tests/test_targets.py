"""targets.toml: the shipped file loads, and a bad one is refused with the
file and key named; a latency target leaves out only what a workload's job
cannot produce."""

import pytest

from latgov_bench.aggregate import aggregate
from latgov_bench.sysstate import HostInfo, IdleLayout
from latgov_bench.report import check_row
from latgov_bench.targets import (MET, MISSED, NOT_MEASURED, TargetsError, evaluate,
                                   load_targets, median_interval)
from latgov_bench.workloads import WORKLOADS
from conftest import BENCH

GOOD = """
[[target]]
id = "t"
text = "x"
host = "any"
kind = "ratio"
mode = "latgov"
reference = "static"
workloads = ["qd1-randread-4k"]
metrics = ["read_clat_mean_us"]
max = 1.05
"""


def test_shipped_targets_load():
    ids = [t.id for t in load_targets()]
    assert ids == ["latency-vs-static", "idle-poll", "daemon-cpu", "onset",
                   "no-cpuidle-latency", "no-cpuidle-holds-nothing", "dry-run-iops"]
    by_id = {t.id: t for t in load_targets()}
    assert by_id["latency-vs-static"].max == 1.05
    assert by_id["idle-poll"].max == 0.01
    assert by_id["daemon-cpu"].max == 1.0
    assert by_id["onset"].max == 100.0
    assert by_id["no-cpuidle-latency"].max == 1.02


def test_a_good_file_loads(tmp_path):
    p = tmp_path / "t.toml"
    p.write_text(GOOD)
    [t] = load_targets(p)
    assert t.within(1.05) and not t.within(1.051)


@pytest.mark.parametrize("change,message", [
    (("max = 1.05", ""), "needs 'max' or 'min'"),
    (("max = 1.05", "max = \"1.05\""), "key 'max' must be a number"),
    (("kind = \"ratio\"", "kind = \"ratios\""), "kind must be one of"),
    (("reference = \"static\"", ""), "needs 'reference'"),
    (("[\"qd1-randread-4k\"]", "[\"qd9\"]"), "unknown workload 'qd9'"),
    (("host = \"any\"", "host = \"any\"\nhots = 1"), "unknown key 'hots'"),
    (("id = \"t\"", ""), "missing key 'id'"),
    (("max = 1.05", "max = [1"), "Failed to parse"),
])
def test_bad_files_name_file_and_key(tmp_path, change, message):
    p = tmp_path / "bad.toml"
    p.write_text(GOOD.replace(*change))
    with pytest.raises(TargetsError) as e:
        load_targets(p)
    assert message in str(e.value)
    assert str(p) in str(e.value)


def test_duplicate_ids_are_refused(tmp_path):
    p = tmp_path / "dup.toml"
    p.write_text(GOOD + GOOD)
    with pytest.raises(TargetsError, match="used twice"):
        load_targets(p)


def job_option(job, key):
    for line in (BENCH / "jobs" / job).read_text().splitlines():
        if line.split("=", 1)[0].strip() == key:
            return line.split("=", 1)[1].strip()
    return None


def test_what_each_workload_produces_follows_its_job_file():
    for w in WORKLOADS:
        rw = job_option(w.job, "rw")
        assert w.reads == ("read" in rw or "rw" in rw), w.name
        assert w.writes == ("write" in rw or "rw" in rw), w.name
        assert w.syncs == (job_option(w.job, "fdatasync") not in (None, "0")), w.name


HOST = HostInfo([0], IdleLayout({0: [(0, "POLL")]}), "haltpoll", "haltpoll")


def ok_rows(workload, **values):
    return [dict({"status": "ok", "round": str(r), "workload": workload, "mode": m}, **values)
            for r in (1, 2) for m in ("static", "latgov")]


def latency_checks(rows, workloads):
    agg = aggregate(rows, workloads, ["static", "latgov"], HOST)
    return [c for c in evaluate(load_targets(), agg, HOST) if c.target.id == "latency-vs-static"]


def test_a_latency_workload_whose_runs_all_failed_shows_not_measured():
    rows = ok_rows("qd1-randread-4k", read_lat_mean_us="10", read_lat_p99_us="20")
    rows += [dict(r, status="fio failed (1): boom")
             for r in ok_rows("waiter-fdatasync-4k", write_lat_mean_us="10")]
    checks = latency_checks(rows, ["qd1-randread-4k", "waiter-fdatasync-4k"])
    waiter = [(c.metric, c.verdict, c.reason) for c in checks
              if c.workload == "waiter-fdatasync-4k"]
    # the waiter writes and syncs, and never reads
    assert waiter == [(m, NOT_MEASURED, "no ok run of mode latgov in the medians")
                      for m in ("write_lat_mean_us", "write_lat_p99_us",
                                "sync_lat_mean_us", "sync_lat_p99_us")]
    # a read-only workload has no write or sync checks at all
    assert [c.metric for c in checks if c.workload == "qd1-randread-4k"] == \
        ["read_lat_mean_us", "read_lat_p99_us"]
    assert all(c.verdict == MET for c in checks if c.workload == "qd1-randread-4k")


def test_a_workload_whose_runs_were_all_kept_out_shows_not_measured():
    rows = ok_rows("qd1-randread-4k", read_lat_mean_us="10", read_lat_p99_us="20",
                   foreign_procs="latgovd:1")
    checks = latency_checks(rows, ["qd1-randread-4k"])
    assert [(c.metric, c.verdict) for c in checks] == \
        [("read_lat_mean_us", NOT_MEASURED), ("read_lat_p99_us", NOT_MEASURED)]


def test_a_metric_a_workload_produces_but_lacks_is_not_measured():
    rows = ok_rows("qd1-randrw-128k-thinktime", read_lat_mean_us="10",
                   read_lat_p99_us="20")
    checks = latency_checks(rows, ["qd1-randrw-128k-thinktime"])
    by = {c.metric: c for c in checks}
    assert by["write_lat_mean_us"].verdict == NOT_MEASURED
    assert by["write_lat_mean_us"].reason == "no value in mode latgov"
    assert "sync_lat_mean_us" not in by


def test_a_target_over_every_latency_workload_is_not_measured_when_none_ran():
    rows = ok_rows("idle", poll_time_us="10")
    checks = latency_checks(rows, ["idle"])
    assert [(c.workload, c.verdict, c.reason) for c in checks] == \
        [("-", NOT_MEASURED, "no latency workload run")]


@pytest.mark.parametrize("n, k, coverage", [
    # The sign test's order statistics for the median (any table of them):
    # up to 5 values no k reaches 95%, and the range is the interval.
    (2, 1, 0.5), (5, 1, 0.9375), (6, 1, 0.96875), (8, 1, 0.9921875),
    (9, 2, 0.9609375), (20, 6, 0.9586105), (40, 14, 0.9615227)])
def test_median_interval_is_the_sign_tests(n, k, coverage):
    values = [float(v) for v in range(n, 0, -1)]  # given in any order
    lo, hi, cov = median_interval(values)
    assert (lo, hi) == (k, n + 1 - k)
    assert cov == pytest.approx(coverage, abs=1e-7)
    assert median_interval([1.0]) is None


def ratio_rows(workload, ratios, statics=None):
    """Rounds whose latgov/static read mean is each of `ratios` in turn,
    static's read mean each of `statics` (100 each by default)."""
    rows = []
    for r, (x, static) in enumerate(zip(ratios, statics or [100] * len(ratios)), 1):
        rows.append({"status": "ok", "round": str(r), "workload": workload,
                     "mode": "static", "read_lat_mean_us": str(static),
                     "read_lat_p99_us": "100"})
        rows.append({"status": "ok", "round": str(r), "workload": workload,
                     "mode": "latgov", "read_lat_mean_us": str(static * x),
                     "read_lat_p99_us": "100"})
    return rows


def test_many_rounds_resolve_a_bound_their_range_straddles():
    # 20 rounds, two of them far out: the range straddles 1.05 and the
    # median's interval (6th to 15th of 20) lies below it.
    ratios = [1.00, 1.01, 0.99, 1.02, 1.00, 0.98, 1.01, 1.03, 1.00, 0.99,
              1.01, 1.02, 1.00, 0.97, 1.01, 1.00, 0.99, 1.02, 0.80, 1.25]
    checks = latency_checks(ratio_rows("qd1-randread-4k", ratios), ["qd1-randread-4k"])
    mean = next(c for c in checks if c.metric == "read_lat_mean_us")
    assert mean.verdict == MET
    assert min(mean.round_ratios) < 1.05 < max(mean.round_ratios)
    lo, hi, cov = mean.round_interval()
    assert (round(lo, 6), round(hi, 6), round(cov, 4)) == (0.99, 1.01, 0.9586)
    assert not mean.bound_unresolved()
    row = check_row(mean)
    assert "per round 0.800-1.250; their median 1.000, 95% interval 0.990-1.010 |" in row
    # The same ratios over 5 rounds: the interval is their range.
    few = latency_checks(ratio_rows("qd1-randread-4k", [1.00, 0.80, 1.25, 1.01, 0.99]),
                         ["qd1-randread-4k"])
    mean = next(c for c in few if c.metric == "read_lat_mean_us")
    assert mean.bound_unresolved()
    assert "per round 0.800-1.250, the bound inside |" in check_row(mean)
    # A ratio whose interval straddles the bound is missed or met on its
    # median, and unresolved either way.
    close = [1.04, 1.06] * 10
    checks = latency_checks(ratio_rows("qd1-randread-4k", close), ["qd1-randread-4k"])
    mean = next(c for c in checks if c.metric == "read_lat_mean_us")
    assert mean.verdict in (MET, MISSED) and mean.bound_unresolved()
    assert not mean.interval_against_verdict()


def test_six_rounds_show_the_median_with_the_range_as_its_interval():
    checks = latency_checks(ratio_rows("qd1-randread-4k", [1.00, 0.80, 1.25, 1.01, 0.99, 1.02]),
                            ["qd1-randread-4k"])
    mean = next(c for c in checks if c.metric == "read_lat_mean_us")
    assert mean.round_interval()[2] == pytest.approx(0.96875)
    assert "per round 0.800-1.250; their median 1.005, 95% interval 0.800-1.250, " \
        "the bound inside |" in check_row(mean)


def test_a_bound_at_the_end_of_the_interval_is_resolved():
    # The bounds are inclusive: an interval 1.00-1.05 is all within <= 1.05.
    ratios = [1.05, 1.00, 1.05, 1.00, 1.02, 1.03, 1.04, 1.01, 1.02]
    checks = latency_checks(ratio_rows("qd1-randread-4k", ratios), ["qd1-randread-4k"])
    mean = next(c for c in checks if c.metric == "read_lat_mean_us")
    assert mean.round_interval()[:2] == pytest.approx((1.00, 1.05))
    assert mean.verdict == MET and not mean.bound_unresolved()
    assert not mean.interval_against_verdict()


def test_a_lower_bound_is_resolved_and_unresolved_as_an_upper_one():
    def dry_run_iops(ratios):
        rows = []
        for r, x in enumerate(ratios, 1):
            rows.append({"status": "ok", "round": str(r), "workload": "qd1-randread-4k",
                         "mode": "off", "read_iops": "20000"})
            rows.append({"status": "ok", "round": str(r), "workload": "qd1-randread-4k",
                         "mode": "latgov-dryrun", "read_iops": str(20000 * x)})
        agg = aggregate(rows, ["qd1-randread-4k"], ["off", "latgov-dryrun"], HOST)
        return next(c for c in evaluate(load_targets(), agg, HOST)
                    if c.target.id == "dry-run-iops")

    # >= 0.98: 0.98 at the interval's low end is within it
    resolved = dry_run_iops([0.98, 1.00, 0.99, 1.01, 0.98, 1.02, 0.97, 1.03, 1.00])
    assert resolved.round_interval()[:2] == pytest.approx((0.98, 1.02))
    assert resolved.verdict == MET and not resolved.bound_unresolved()
    unresolved = dry_run_iops([0.97, 1.00, 0.96, 1.01, 0.98, 1.02, 0.97, 1.03, 1.00])
    assert unresolved.round_interval()[:2] == pytest.approx((0.97, 1.02))
    assert unresolved.bound_unresolved()


def test_a_missed_check_whose_interval_lies_within_the_bound_is_shown():
    # latgov 1.02 of static in 15 of 20 rounds and 3 times it in the 5
    # where static was fastest: the medians' ratio is 1.066 (missed), the
    # per-round ratios' median and its interval 1.02.
    rows = ratio_rows("qd1-randread-4k", [3.0] * 5 + [1.02] * 15, range(101, 121))
    mean = next(c for c in latency_checks(rows, ["qd1-randread-4k"])
                if c.metric == "read_lat_mean_us")
    assert mean.verdict == MISSED and round(mean.value, 3) == 1.066
    assert mean.round_interval()[:2] == pytest.approx((1.02, 1.02))
    assert mean.interval_against_verdict()
    assert ", the interval on the other side of the bound |" in check_row(mean)


def test_an_interval_wholly_past_the_bound_of_a_met_check_is_shown():
    # latgov 1.06 of static in 15 of 20 rounds and half of it in the last
    # 5, where static was slowest: the medians' ratio is 1.012 (met), while
    # the median of the rounds' ratios and its interval (6th to 15th) are
    # 1.06, above the bound.
    rows = ratio_rows("qd1-randread-4k", [1.06] * 15 + [0.5] * 5, range(101, 121))
    checks = latency_checks(rows, ["qd1-randread-4k"])
    mean = next(c for c in checks if c.metric == "read_lat_mean_us")
    lo, hi, _ = mean.round_interval()
    assert mean.verdict == MET and round(mean.value, 3) == 1.012 and lo > 1.05
    assert not mean.bound_unresolved() and mean.interval_against_verdict()
    assert ", the interval on the other side of the bound |" in check_row(mean)
