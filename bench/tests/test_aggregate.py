"""Aggregation of results.csv: medians, spreads and derived columns."""

import pytest

from latgov_bench.aggregate import aggregate, foreign_held, kept_out, with_derived
from latgov_bench.sysstate import HostInfo, IdleLayout


def agg_of(run):
    s = run.meta.settings
    return aggregate(run.rows, s.workloads, s.modes, run.meta.host)


def agg_with_failed_run(run, workload, mode, rnd):
    """The run's aggregate as if fio had failed in one of its runs."""
    rows = [dict(r) for r in run.rows]
    for r in rows:
        if r["workload"] == workload and r["mode"] == mode and r["round"] == rnd:
            r["status"] = "fio failed (1): boom"
    s = run.meta.settings
    return aggregate(rows, s.workloads, s.modes, run.meta.host)


def test_every_workload_and_mode_counts_its_ok_runs(run):
    agg = agg_of(run)
    out = [(r["workload"], r["mode"]) for r, _ in agg.excluded]
    for w in run.meta.settings.workloads:
        for m in run.meta.settings.modes:
            assert agg.cells[w][m].n == run.meta.settings.rounds - out.count((w, m)), (w, m)


def test_a_run_with_someone_elses_constraint_is_kept_out_of_the_medians(haltpoll):
    agg = agg_of(haltpoll)
    [(row, why)] = agg.excluded
    assert (row["round"], row["workload"], row["mode"]) == \
        ("1", "qd1-randrw-128k-thinktime", "latgov")
    assert why == "someone else's constraint held 2% of it"
    assert agg.cells["qd1-randrw-128k-thinktime"]["latgov"].n == 1
    assert sorted(agg.by_round[("qd1-randrw-128k-thinktime", "latgov",
                                "read_clat_mean_us")]) == [2]


@pytest.mark.parametrize("extra,why", [
    ({"foreign_constraint_before": "cpu1=0"}, "constraint cpu1=0 at its start"),
    ({"foreign_procs": "fio:1"}, "other processes running: fio:1"),
    ({"any_held_frac": "0.5"}, "someone else's constraint held 50% of it"),
])
def test_runs_kept_out_and_why(extra, why):
    host = HostInfo([0], IdleLayout({0: []}), "haltpoll", "haltpoll")
    base = {"status": "ok", "round": "1", "workload": "qd1-randread-4k", "mode": "off",
            "read_clat_mean_us": "10", "any_held_frac": "0"}
    rows = [dict(base), dict(base, round="2", read_clat_mean_us="30", **extra)]
    assert kept_out(rows[1], [0]) == why and kept_out(rows[0], [0]) == ""
    agg = aggregate(rows, ["qd1-randread-4k"], ["off"], host)
    assert agg.cells["qd1-randread-4k"]["off"].n == 1
    assert agg.median("qd1-randread-4k", "off", "read_clat_mean_us") == 10
    assert [(r["round"], w) for r, w in agg.excluded] == [("2", why)]


def test_medians_and_spread_of_the_committed_vda_run(vda):
    agg = agg_of(vda)
    # results.csv, QD1 4k, mode off: 26.413 25.176 26.816 26.236 25.083
    s = agg.stat("qd1-randread-4k", "off", "read_clat_mean_us")
    assert len(s.values) == 5
    assert s.median == pytest.approx(26.236)
    assert (s.min, s.max) == (pytest.approx(25.083), pytest.approx(26.816))
    assert agg.median("qd1-randread-4k", "latgov", "latgovd_cpu_pct_core") == \
        pytest.approx(0.6151)
    # a direction a workload does not have has no statistic at all
    assert agg.stat("qd1-randread-4k", "off", "write_clat_mean_us") is None


def test_haltpoll_poll_time_and_daemon_cpu(haltpoll):
    agg = agg_of(haltpoll)
    assert agg.median("idle", "static", "poll_time_us") == pytest.approx(11924560)
    assert agg.median("idle", "latgov", "poll_time_us") == pytest.approx(28114)
    assert agg.median("qd1-randread-4k", "latgov", "latgovd_cpu_pct_core") == \
        pytest.approx(0.546, abs=5e-4)


def test_ratios_within_each_round_pair_the_modes_of_that_round(vda):
    agg = agg_of(vda)
    off = agg.by_round[("qd1-randread-4k", "off", "read_clat_mean_us")]
    latgov = agg.by_round[("qd1-randread-4k", "latgov", "read_clat_mean_us")]
    assert sorted(off) == [1, 2, 3, 4, 5]
    want = [latgov[r] / off[r] for r in range(1, 6)]
    assert agg.round_ratios("qd1-randread-4k", "latgov", "off", "read_clat_mean_us") == \
        pytest.approx(want)
    # a round where one mode failed pairs nothing
    part = agg_with_failed_run(vda, "qd1-randread-4k", "off", "3")
    assert part.round_ratios("qd1-randread-4k", "latgov", "off", "read_clat_mean_us") == \
        pytest.approx(want[:2] + want[3:])


def test_failed_runs_are_left_out(vda):
    s = vda.meta.settings
    agg = agg_with_failed_run(vda, "qd1-randread-4k", "off", "1")
    assert agg.cells["qd1-randread-4k"]["off"].n == s.rounds - 1
    assert len(agg.stat("qd1-randread-4k", "off", "read_clat_mean_us").values) == s.rounds - 1


def test_held_seconds_of_older_rows_are_fraction_times_window(vda):
    row = next(r for r in vda.rows if r["mode"] == "static")
    d = with_derived(row, vda.meta.host.cpus)
    window = float(row["window_s"])
    assert float(d["cpu0_held_s"]) == pytest.approx(window)
    assert float(d["held_cpu_s"]) == pytest.approx(2 * window)
    off = next(r for r in vda.rows if r["mode"] == "off")
    assert float(with_derived(off, vda.meta.host.cpus)["held_cpu_s"]) == 0


def test_held_seconds_measured_by_the_sampler_are_kept():
    row = {"mode": "latgov", "window_s": "10", "any_held_frac": "0.5",
           "cpu0_held_frac": "0.5", "cpu0_held_s": "4.2", "held_cpu_s": "4.2",
           "status_held_frac": "0.5"}
    d = with_derived(row, [0])
    assert d["cpu0_held_s"] == "4.2" and d["held_cpu_s"] == "4.2"


@pytest.mark.parametrize("mode,row,want", [
    ("off", {"any_held_frac": "0.25"}, 0.25),
    ("static", {"any_held_frac": "1", "cpu0_percpu_held_frac": "0",
                "cpu1_percpu_held_frac": "0.1"}, 0.1),
    ("latgov", {"any_held_frac": "0.3", "status_held_frac": "0"}, 0.3),
    ("latgov", {"any_held_frac": "0.3", "status_held_frac": "0.3"}, None),
    # Holds shorter than the status file's interval: latgovd's own counts.
    ("latgov", {"any_held_frac": "0.05", "status_held_frac": "0", "prearm_hits": "490",
                "prearm_misses": "1", "onset_count": "17"}, None),
    ("latgov", {"any_held_frac": "0.05", "status_held_frac": "0", "prearm_hits": "0",
                "prearm_misses": "0", "onset_count": "0"}, 0.05),
    # Static on some CPUs: the others' files, and /dev/cpu_dma_latency.
    ("static-waiter", {"any_held_frac": "1", "static_cpus": "0", "cpu0_percpu_held_frac": "1",
                       "cpu1_percpu_held_frac": "0", "global_held_frac": "0"}, 0.0),
    ("static-waiter", {"any_held_frac": "1", "static_cpus": "0", "cpu0_percpu_held_frac": "1",
                       "cpu1_percpu_held_frac": "0.2", "global_held_frac": "0"}, 0.2),
    ("static-completion", {"any_held_frac": "1", "static_cpus": "1",
                           "cpu0_percpu_held_frac": "0", "cpu1_percpu_held_frac": "1",
                           "global_held_frac": "0.3"}, 0.3),
])
def test_constraints_of_someone_else(mode, row, want):
    row = dict(row, mode=mode)
    assert foreign_held(row, [0, 1]) == (None if want is None else pytest.approx(want))


@pytest.mark.parametrize("held,low,why", [
    ("0.95", "0", "static did not hold /dev/cpu_dma_latency at 0 (held in 95.0% of the "
     "samples)"),
    ("1", "20", "static did not hold /dev/cpu_dma_latency at 0 (at 20 us, not 0)"),
    ("0", "", "static did not hold /dev/cpu_dma_latency at 0 (held in 0.0% of the samples)"),
])
def test_a_static_run_that_did_not_hold_0_is_kept_out(held, low, why):
    host = HostInfo([0], IdleLayout({0: []}), "haltpoll", "haltpoll")
    base = {"status": "ok", "round": "1", "workload": "qd1-randread-4k", "mode": "static",
            "read_clat_mean_us": "10", "any_held_frac": "1", "global_held_frac": "1",
            "global_min_us": "0", "cpu0_percpu_held_frac": "0"}
    rows = [dict(base), dict(base, round="2", read_clat_mean_us="30",
                             global_held_frac=held, global_min_us=low)]
    assert kept_out(rows[0], [0]) == "" and kept_out(rows[1], [0]) == why
    agg = aggregate(rows, ["qd1-randread-4k"], ["static"], host)
    assert agg.cells["qd1-randread-4k"]["static"].n == 1
    assert [(r["round"], w) for r, w in agg.excluded] == [("2", why)]
    # 0.99 of the samples is enough; a row from before the sampler is taken as it is
    assert kept_out(dict(base, global_held_frac="0.99"), [0]) == ""
    assert kept_out({k: v for k, v in base.items() if not k.startswith("global")}, [0]) == ""


@pytest.mark.parametrize("row,why", [
    ({"cpu0_percpu_held_frac": "1", "cpu1_percpu_held_frac": "0"}, ""),
    ({"cpu0_percpu_held_frac": "0.99"}, ""),
    ({"cpu0_percpu_held_frac": "0.9"},
     "static-waiter did not hold pm_qos_resume_latency_us (held cpu0 in 90.0% of the samples)"),
    # Not its own then: someone else's.
    ({"cpu0_percpu_held_frac": "1", "static_cpus": ""},
     "static-waiter held no CPU; someone else's constraint held 100% of it"),
    ({"static_cpus": "0;1", "cpu0_percpu_held_frac": "1"},
     "static-waiter did not hold pm_qos_resume_latency_us (held cpu1 in 0.0% of the samples)"),
])
def test_static_on_some_cpus_that_did_not_hold_them_is_kept_out(row, why):
    base = {"status": "ok", "round": "1", "workload": "onset-isolated-reads",
            "mode": "static-waiter", "static_cpus": "0", "any_held_frac": "1",
            "global_held_frac": "0"}
    assert kept_out(dict(base, **row), [0, 1]) == why


def test_warmups_are_in_no_statistic():
    host = HostInfo([0], IdleLayout({0: []}), "haltpoll", "haltpoll")
    base = {"status": "ok", "round": "1", "workload": "qd1-randread-4k", "mode": "off",
            "read_clat_mean_us": "10", "any_held_frac": "0"}
    warm = dict(base, mode="warm-up", read_clat_mean_us="900", foreign_procs="x:1")
    agg = aggregate([warm, base], ["qd1-randread-4k"], ["off", "warm-up"], host)
    assert agg.cells["qd1-randread-4k"]["off"].n == 1
    assert agg.cells["qd1-randread-4k"]["warm-up"].n == 0
    assert agg.excluded == [] and agg.median("qd1-randread-4k", "off",
                                             "read_clat_mean_us") == 10
