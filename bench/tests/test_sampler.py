"""Constraints held: counted per sample, CPU-seconds integrated between
samples; latgovd's status, read once more after the window."""

import os

import pytest

from latgov_bench.sampler import HeldTally, StatusTally, status_after
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


def test_a_status_tells_whether_latgovd_governed_the_disk():
    s = StatusTally()
    assert s.not_governing("vda") == "latgovd wrote no status during the window"
    s.add({"devices": [{"name": "vda", "mode": "fixed"}], "sampling_error": None})
    assert s.not_governing("vda") == ""
    assert s.not_governing("nvme0n1") == "latgovd did not govern nvme0n1 (governed: vda)"
    s.add({"devices": [], "sampling_error": "Failed to parse /proc/stat"})
    assert s.not_governing("vda") == "latgovd could not sample: Failed to parse /proc/stat"


def test_a_final_status_gives_counters_not_a_held_sample():
    s = StatusTally()
    s.add({"cpus": [{"cpu": 0, "limit_us": 0}], "onset_delay": {"count": 3, "p99_us": 90.0}})
    s.add_final({"cpus": [], "onset_delay": {"count": 5, "p99_us": 120.0},
                 "prearm": {"hits": 2, "misses": 0}})
    r = s.result()
    assert r["status_samples"] == 1 and r["status_held_frac"] == 1.0
    assert (r["onset_count"], r["onset_p99_us"], r["prearm_hits"]) == (5, 120.0, 2)


class Clock:
    """Wall-clock time that moves only when slept, and a status file that
    latgovd rewrites at `write_at`."""

    def __init__(self, path, now, write_at=None):
        self.path, self.now, self.write_at = path, now, write_at

    def time(self):
        return self.now

    def sleep(self, dt):
        self.now += dt
        if self.write_at is not None and self.now >= self.write_at:
            self.path.write_text('{"onset_delay": {"count": 9}}')
            os.utime(self.path, (self.write_at, self.write_at))
            self.write_at = None


def status_file(tmp_path, written_at):
    p = tmp_path / "status.json"
    p.write_text('{"onset_delay": {"count": 8}}')
    os.utime(p, (written_at, written_at))
    return p


def test_the_last_status_is_latgovds_first_write_after_the_window(tmp_path):
    # written 0.4 s before the window ended; the next write comes 0.6 s after it
    p = status_file(tmp_path, 1000.0)
    c = Clock(p, 1000.4, write_at=1001.0)
    st = status_after(p, 1000.4, 1.0, clock=c.time, sleep=c.sleep)
    assert st["onset_delay"]["count"] == 9
    assert c.now == pytest.approx(1001.0, abs=0.03)


def test_without_a_write_it_waits_one_interval_after_the_last(tmp_path):
    p = status_file(tmp_path, 1000.0)
    c = Clock(p, 1000.4)
    st = status_after(p, 1000.4, 1.0, margin=0.3, clock=c.time, sleep=c.sleep)
    assert st["onset_delay"]["count"] == 8
    assert c.now == pytest.approx(1001.3, abs=0.03)
    # written long before the window ended: nothing was left to write
    c = Clock(p, 1010.0)
    status_after(p, 1010.0, 1.0, margin=0.3, clock=c.time, sleep=c.sleep)
    assert c.now == pytest.approx(1010.3, abs=0.03)


def test_a_status_written_after_the_window_is_read_at_once(tmp_path):
    p = status_file(tmp_path, 1000.5)
    c = Clock(p, 1000.6)
    assert status_after(p, 1000.4, 1.0, clock=c.time, sleep=c.sleep)["onset_delay"]["count"] == 8
    assert c.now == 1000.6


def test_sample_times_are_random_so_that_a_period_dividing_them_is_not_aliased():
    """Holds of 1.5 ms every 20 ms (windows ahead of rate-paced reads): at a
    fixed 100 ms every sample fell on the same phase of them."""
    import random
    import statistics
    from latgov_bench.sampler import SAMPLE_PERIOD, next_sample_time

    def held_share(times):
        return sum(round(t * 1e6) % 20000 < 1500 for t in times) / len(times)

    fixed = [k * SAMPLE_PERIOD for k in range(600)]
    assert held_share(fixed) in (0.0, 1.0)
    rng, times = random.Random(7), [0.0]
    while len(times) < 600:
        times.append(next_sample_time(times[-1], rng))
    assert 0.05 < held_share(times) < 0.10  # 0.075 held
    gaps = [b - a for a, b in zip(times, times[1:])]
    assert 0.095 < statistics.mean(gaps) < 0.105
    assert min(gaps) >= 0.05 and max(gaps) <= 0.15


def test_the_sampler_waits_the_random_gaps(tmp_path, monkeypatch):
    import threading
    from latgov_bench import sampler
    from latgov_bench.sysstate import SysRoot
    calls = []
    done = threading.Event()

    def gap(previous, rng):
        calls.append(previous)
        if len(calls) >= 3:
            done.set()
        return previous + 0.001

    monkeypatch.setattr(sampler, "next_sample_time", gap)
    s = sampler.QosSampler(SysRoot(tmp_path), [0])
    s.start()
    assert done.wait(5)
    s.finish()
    assert s.held.samples >= 3
