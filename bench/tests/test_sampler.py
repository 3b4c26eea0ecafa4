"""Constraints held: counted per sample, CPU-seconds integrated between
samples."""

import pytest

from latgov_bench.sampler import HeldTally, StatusTally
from latgov_bench.sysstate import NO_CONSTRAINT


def test_held_seconds_integrate_each_sample_until_the_next():
    t = HeldTally([0, 1])
    t.add(10.0, NO_CONSTRAINT, {0: "0", 1: "n/a"})   # cpu1 held
    t.add(10.1, NO_CONSTRAINT, {0: "0", 1: "0"})     # nothing
    t.add(10.2, 0, {0: "0", 1: "0"})                 # global: both
    t.add(10.5, NO_CONSTRAINT, {0: "20", 1: "0"})    # cpu0 at 20 us
    t.close(10.6)
    r = t.result()
    assert r["cpu0_held_s"] == pytest.approx(0.4)
    assert r["cpu1_held_s"] == pytest.approx(0.4)
    assert r["held_cpu_s"] == pytest.approx(0.8)
    assert r["qos_samples"] == 4
    assert r["any_held_frac"] == pytest.approx(0.75)
    assert r["global_held_frac"] == pytest.approx(0.25) and r["global_min_us"] == 0
    assert r["cpu0_percpu_held_frac"] == pytest.approx(0.25)
    assert r["cpu0_held_frac"] == pytest.approx(0.5)


def test_nothing_held_is_zero_seconds():
    t = HeldTally([0])
    t.add(0.0, NO_CONSTRAINT, {0: "0"})
    t.add(5.0, NO_CONSTRAINT, {0: "0"})
    t.close(6.0)
    assert t.result()["held_cpu_s"] == 0 and t.result()["global_min_us"] == ""


def test_status_gives_limits_and_the_last_onset_statistics():
    s = StatusTally()
    s.add({"idle_costs": "declared", "global_limit_us": None,
           "cpus": [{"cpu": 0, "limit_us": None}, {"cpu": 1, "limit_us": 0}],
           "onset_delay": {"count": 3, "p50_us": 80.0, "p99_us": 150.0, "max_us": 151.0}})
    s.add({"idle_costs": "declared", "global_limit_us": None,
           "cpus": [{"cpu": 0, "limit_us": None}, {"cpu": 1, "limit_us": None}],
           "onset_delay": {"count": 4, "p50_us": 70.0, "p99_us": 140.0, "max_us": 151.0,
                           "wake_p50_us": 40.0, "wake_p99_us": 90.0, "on_issuing_cpu": 3}})
    r = s.result()
    assert r["status_held_frac"] == 0.5
    assert r["latgovd_limits_seen"] == "cpu1=0"
    assert (r["onset_count"], r["onset_p99_us"]) == (4, 140.0)
    assert (r["onset_wake_p50_us"], r["onset_wake_p99_us"]) == (40.0, 90.0)
    assert r["onset_on_issuing_cpu"] == 3
