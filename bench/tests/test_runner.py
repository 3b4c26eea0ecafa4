"""The measurements around a run, from two snapshots."""

import pytest

from latgov_bench.runner import Snapshot, window_deltas
from latgov_bench.sysstate import HostInfo, IdleLayout, ProcCpu, ProcEntry

HOST = HostInfo([0, 1], IdleLayout({0: [(0, "POLL"), (1, "C1")], 1: [(0, "POLL"), (1, "C1")]}),
                "acpi_idle", "menu")


def snap(t, poll0, c1_0, poll1, c1_1, idle, daemon, procs):
    cpuidle = {(0, "POLL", "time"): poll0, (0, "POLL", "usage"): poll0 // 10,
               (0, "C1", "time"): c1_0, (0, "C1", "usage"): 1,
               (1, "POLL", "time"): poll1, (1, "POLL", "usage"): poll1 // 10,
               (1, "C1", "time"): c1_1, (1, "C1", "usage"): 1}
    procstat = {0: (idle, 0.0, 1.0), 1: (idle, 0.5, 2.0)}
    return Snapshot(t, cpuidle, procstat, 1000, daemon, procs)


def test_deltas_over_the_window():
    a = snap(100.0, 0, 0, 1000, 0, 1.0, ProcCpu(0.5, 0.25, 10, 1),
             {7: ProcEntry("sshd", 1.0, 1), 9: ProcEntry("fio", 3.0, 1)})
    b = snap(102.0, 500000, 100, 2000, 700, 2.5, ProcCpu(0.52, 0.27, 30, 2),
             {7: ProcEntry("sshd", 1.5, 1), 9: ProcEntry("fio", 4.0, 1)})
    b = Snapshot(b.t, b.cpuidle, b.procstat, 1500, b.daemon, b.procs)
    r = window_deltas(a, b, HOST, own={9})
    assert r["window_s"] == 2.0
    assert r["cpu0_POLL_time_us"] == 500000 and r["cpu1_POLL_time_us"] == 1000
    assert r["poll_time_us"] == 501000 and r["poll_usage"] == 50000 + 100
    assert r["idle_states_time_us"] == 501000 + 800
    assert r["procstat_idle_s"] == 3.0 and r["cpu1_procstat_idle_s"] == 1.5
    assert r["disk_ios"] == 500
    assert r["others_cpu_s"] == 0.5 and r["others_top"] == "sshd:0.50"
    assert r["latgovd_sched_cpu_s"] == pytest.approx(0.02)
    assert r["latgovd_cpu_pct_core"] == pytest.approx(1.0)
    assert (r["latgovd_vol_ctxsw"], r["latgovd_nonvol_ctxsw"]) == (20, 1)


def test_no_cpuidle_driver_has_no_poll_time():
    host = HostInfo([0], IdleLayout({0: []}), "none", "menu")
    a = Snapshot(0.0, {}, {0: (1.0, 0.0, 0.0)}, None, None, {})
    b = Snapshot(1.0, {}, {0: (1.9, 0.0, 0.1)}, None, None, {})
    r = window_deltas(a, b, host, set())
    assert r["poll_time_us"] == "" and r["idle_states_time_us"] == ""
    assert "disk_ios" not in r and "latgovd_cpu_s" not in r
