"""What bench/ab --smoke requires of its rows, on rows of the committed runs
and on rows shaped like the new workloads."""

from latgov_bench.cli import smoke_checks
from latgov_bench.sysstate import HostInfo, IdleLayout

HOST = HostInfo([0, 1], IdleLayout({0: [(0, "POLL"), (1, "haltpoll_idle")],
                                    1: [(0, "POLL"), (1, "haltpoll_idle")]}),
                "haltpoll", "haltpoll")


def row(**kw):
    r = {"status": "ok", "round": "1", "workload": "qd1-randread-4k", "mode": "off",
         "window_s": "10", "cpu0_held_s": "0", "cpu1_held_s": "0", "held_cpu_s": "0",
         "poll_time_us": "0", "idle_states_time_us": "0", "procstat_idle_s": "0",
         "procstat_iowait_s": "0"}
    r.update(kw)
    return r


def test_rows_of_a_run_before_held_seconds_existed_fail(haltpoll):
    problems = smoke_checks(haltpoll.rows, HOST)
    assert any("no CPU-seconds held" in p for p in problems)


def test_good_rows_pass():
    rows = [row(), row(mode="static", cpu0_held_s="10", cpu1_held_s="10", held_cpu_s="20",
                       poll_time_us="19000000", idle_states_time_us="19000000",
                       procstat_idle_s="19"),
            # a saturated machine: no idle time, so no POLL time either
            row(mode="static", cpu0_held_s="10", cpu1_held_s="10", held_cpu_s="20"),
            row(workload="waiter-fdatasync-4k", waiter_cpu="0", completion_cpus="1",
                sync_ios="500", write_ios="500", write_lat_p99_us="90"),
            row(workload="onset-isolated-reads", mode="latgov", onset_count="400",
                waiter_cpu="0", completion_cpus="1", read_ios="500", read_lat_p99_us="200"),
            row(workload="onset-isolated-reads", mode="static-completion", waiter_cpu="0",
                completion_cpus="1", read_ios="500", read_lat_p99_us="200", static_cpus="1",
                cpu1_percpu_held_frac="1", cpu1_haltpoll_idle_time_us="90000"),
            # where every CPU completes its own IO the isolated reads run unpinned
            row(workload="onset-isolated-reads", mode="off", read_ios="500",
                read_lat_p99_us="200"),
            row(workload="reads-beside-writeback", mode="latgov", onset_count="10",
                waiter_cpu="0", completion_cpus="1", read_ios="500", read_lat_p99_us="200",
                background_ios="250"),
            row(read_ios="5000", read_lat_p99_us="80")]
    assert smoke_checks(rows, HOST) == []


def test_each_requirement_can_fail():
    bad = [row(mode="static", cpu0_held_s="1", cpu1_held_s="1", held_cpu_s="2",
               poll_time_us="5"),
           row(mode="static", cpu0_held_s="10", cpu1_held_s="10", held_cpu_s="20",
               poll_time_us="0", procstat_idle_s="5"),
           row(mode="static", cpu0_held_s="10", cpu1_held_s="10", held_cpu_s="20",
               poll_time_us="1000000", idle_states_time_us="1900000", procstat_idle_s="2"),
           row(workload="waiter-fdatasync-4k", waiter_cpu="1", completion_cpus="1",
               sync_ios="500", write_ios="500", write_lat_p99_us="90"),
           row(workload="waiter-fdatasync-4k", waiter_cpu="0", completion_cpus="1",
               sync_ios="", write_ios="500", write_lat_p99_us="90"),
           row(workload="onset-isolated-reads", mode="latgov", onset_count="",
               waiter_cpu="0", completion_cpus="1", read_ios="500", read_lat_p99_us="200"),
           row(workload="onset-isolated-reads", mode="static-waiter", waiter_cpu="0",
               completion_cpus="1", read_ios="500", read_lat_p99_us="200", static_cpus="0",
               cpu0_percpu_held_frac="0.5"),
           row(workload="onset-isolated-reads", mode="off", waiter_cpu="0",
               completion_cpus="1", read_ios="", read_lat_p99_us=""),
           # held, yet the CPU halted (it was never made to leave its halt)
           row(workload="onset-isolated-reads", mode="static-completion", waiter_cpu="0",
               completion_cpus="1", read_ios="500", read_lat_p99_us="200", static_cpus="1",
               cpu1_percpu_held_frac="1", cpu1_haltpoll_idle_time_us="900000"),
           # unpinned (every CPU completes its own IO), and no reads
           row(workload="onset-isolated-reads", mode="off", read_ios=""),
           # the writes beside the reads did not run
           row(workload="reads-beside-writeback", mode="off", waiter_cpu="0",
               completion_cpus="1", read_ios="500", read_lat_p99_us="200", background_ios=""),
           # reads without the whole request's percentiles (fio not asked)
           row(read_ios="5000", read_lat_mean_us="60")]
    problems = smoke_checks(bad, HOST)
    assert len(problems) == 12, problems
    assert ("r1 reads-beside-writeback off: no IO beside the job in fio's output "
            "(background-writeback.fio)") in problems
    assert ("r1 onset-isolated-reads static-completion: static-completion let CPU 1 spend "
            "900000 us in states deeper than POLL") in problems
    assert ("r1 onset-isolated-reads static-waiter: static-waiter did not hold "
            "pm_qos_resume_latency_us (held cpu0 in 50.0% of the samples)") in problems
    assert "r1 onset-isolated-reads off: no read in fio's output" in problems
    assert "r1 qd1-randread-4k off: fio gave no read lat p99" in problems[-1]
