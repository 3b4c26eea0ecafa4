"""The measurements around a run, from two snapshots; one run with fio and
latgovd faked."""

import json
import os
from pathlib import Path
import struct

import pytest

from latgov_bench import runner
from latgov_bench.fio import round_seed
from latgov_bench.meta import Settings
from latgov_bench.results import columns
from latgov_bench.runner import Runner, Session, Snapshot, Tools, window_deltas
from latgov_bench.sysstate import (NO_CONSTRAINT, HostInfo, IdleLayout, ProcCpu, ProcEntry,
                                   disk_queues, read_percpu_qos)
from latgov_bench.target import HarnessError
from latgov_bench.target import Target
from latgov_bench.workloads import WORKLOAD_BY_NAME
from test_sysstate import put, virtio_tree

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


@pytest.mark.parametrize("sched", [None, 0.0])
def test_latgovd_cpu_without_schedstat_comes_from_its_ticks(sched):
    # No schedstat (None), or one that keeps no run time: utime + stime
    a = snap(100.0, 0, 0, 1000, 0, 1.0, ProcCpu(0.5, sched, 10, 1), {})
    b = snap(102.0, 0, 0, 1000, 0, 1.0, ProcCpu(0.52, sched, 30, 2), {})
    r = window_deltas(a, b, HOST, own=set())
    assert r["latgovd_cpu_pct_core"] == pytest.approx(1.0)
    assert r.get("latgovd_sched_cpu_s", "") == ""


def test_no_cpuidle_driver_has_no_poll_time():
    host = HostInfo([0], IdleLayout({0: []}), "none", "menu")
    a = Snapshot(0.0, {}, {0: (1.0, 0.0, 0.0)}, None, None, {})
    b = Snapshot(1.0, {}, {0: (1.9, 0.0, 0.1)}, None, None, {})
    r = window_deltas(a, b, host, set())
    assert r["poll_time_us"] == "" and r["idle_states_time_us"] == ""
    assert "disk_ios" not in r and "latgovd_cpu_s" not in r


# --------------------------------------------------------------------------
# One run, with fio and latgovd faked on a small tree

FIO_JSON = {"jobs": [{"write": {"total_ios": 10, "iops": 5.0, "clat_ns": {"mean": 1000}},
                      "sync": {"total_ios": 10, "lat_ns": {"mean": 2000, "N": 10}}}]}


class FakeSession(Session):
    """fio writes its JSON at once; latgovd is a status file."""

    def run_fio(self, job, json_path, env, seed=None, beside=None):
        self.fio_calls.append((job.name, seed, env.get("LATGOV_AB_WAITER_CPU")))
        self.besides.append(beside.name if beside else None)
        self.ramps.append(env.get("LATGOV_AB_RAMP"))
        self.qos_at_fio.append(read_percpu_qos(self.root, [0, 1]))
        self.jobs.append(job.read_text())
        out = FIO_JSON
        if job.name.endswith("warm-up.fio"):  # 10000 IOs in 2 s
            out = {"jobs": [{"write": {"total_ios": self.warm_ios, "iops": 5000.0,
                                       "clat_ns": {"mean": 1000}}, "job_runtime": 2000}]}
        json_path.write_text(json.dumps(out))
        return 0, ""

    def start_daemon(self, mode, log_path, cpus):
        status = self.runtime_dir / "status.json"
        status.write_text(json.dumps({"onset_delay": {"count": 3, "p99_us": 50.0},
                                      **self.daemon_status}))
        self.daemon = FakeDaemon()
        return status

    def stop_daemon(self):
        self.daemon = None
        return 0


class FakeDaemon:
    pid = 999999


def fake_runner(tmp_path, monkeypatch):
    root = virtio_tree(tmp_path / "root")
    put(root.root, "/proc/stat", "cpu0 1 0 1 100 0 0 0 0 0 0\ncpu1 1 0 1 100 0 0 0 0 0 0\n")
    put(root.root, "/dev/cpu_dma_latency", "")
    root.dma_latency.write_bytes(struct.pack("<i", NO_CONSTRAINT))
    host = HostInfo([0, 1], IdleLayout({0: [], 1: []}), "haltpoll", "haltpoll")
    s = FakeSession(root, Tools("fio", "latgovd", "latgov", None, 0))
    s.fio_calls = []
    s.besides = []
    s.ramps = []
    s.qos_at_fio = []
    s.jobs = []
    s.warm_ios = 10000
    s.daemon_status = {"devices": [{"name": "vda", "mode": "auto"}], "sampling_error": None}
    s.runtime_dir = tmp_path / "run"
    s.runtime_dir.mkdir()
    raw = tmp_path / "raw"
    raw.mkdir()
    target = Target("/dev/vda", "block", 1 << 30, "vda", "vda", False)
    settings = Settings(["off", "latgov"], ["waiter-fdatasync-4k"], 2, 0, 0, 0, 0)
    waiter = runner.ss.choose_waiter_cpu(host.cpus, disk_queues(root, "vda"))
    status_reads = []

    def status_after(path, since, interval):
        status_reads.append(interval)
        return json.loads(path.read_text())

    monkeypatch.setattr(runner, "status_after", status_after)
    r = Runner(s, host, target, settings, raw, columns(host), waiter, 0.25)
    return r, s, status_reads


def test_each_run_reads_the_waiters_irq_affinity_and_uses_the_rounds_seed(tmp_path,
                                                                          monkeypatch):
    r, s, _ = fake_runner(tmp_path, monkeypatch)
    wl = WORKLOAD_BY_NAME["waiter-fdatasync-4k"]
    row = r.one_run(1, 1, 1, wl, "off")
    assert row["status"] == "ok", row["status"]
    assert (row["waiter_cpu"], row["completion_cpus"]) == (0, "1")
    assert row["fio_randseed"] == round_seed(1)
    # irqbalance moves the queue's IRQ to CPU 0: the next run follows it
    put(r.root.root, "/proc/irq/36/effective_affinity_list", "0\n")
    row = r.one_run(1, 2, 2, wl, "off")
    assert (row["waiter_cpu"], row["completion_cpus"]) == (1, "0")
    assert any("moved from CPU 0 to CPU 1" in n for n in s.notes)
    row = r.one_run(2, 3, 1, wl, "off")
    assert row["fio_randseed"] == round_seed(2) != round_seed(1)
    assert s.fio_calls == [("waiter-fdatasync-4k.fio", round_seed(1), "0"),
                           ("waiter-fdatasync-4k.fio", round_seed(1), "1"),
                           ("waiter-fdatasync-4k.fio", round_seed(2), "1")]


def test_the_last_status_read_comes_after_the_window(tmp_path, monkeypatch):
    r, s, status_reads = fake_runner(tmp_path, monkeypatch)
    row = r.one_run(1, 1, 1, WORKLOAD_BY_NAME["qd1-randread-4k"], "latgov")
    assert row["status"] == "ok", row["status"]
    assert status_reads == [0.25]  # latgovd's status interval, from its config
    assert (row["onset_count"], row["onset_p99_us"]) == (3, 50.0)


@pytest.mark.parametrize("status, error", [
    ({"devices": [{"name": "vdb", "mode": "auto"}, {"name": "vda", "mode": "off"}]},
     "latgovd did not govern vda (governed: vdb)"),
    ({"devices": []}, "latgovd did not govern vda (governed: nothing)"),
    ({"devices": [{"name": "vda", "mode": "auto"}], "sampling_error": "Failed to read x"},
     "latgovd could not sample: Failed to read x"),
])
def test_a_latgov_run_whose_latgovd_did_not_govern_the_disk_fails(tmp_path, monkeypatch,
                                                                   status, error):
    """It would read as "off" in the results."""
    r, s, _ = fake_runner(tmp_path, monkeypatch)
    s.daemon_status = status
    row = r.one_run(1, 1, 1, WORKLOAD_BY_NAME["qd1-randread-4k"], "latgov")
    assert row["status"] == error


def test_a_warmup_goes_through_the_rounds_offsets_before_its_runs(tmp_path, monkeypatch):
    from latgov_bench.fio import WARMUP_MARGIN, offsets_read
    r, s, _ = fake_runner(tmp_path, monkeypatch)
    r.settings = Settings(["off", "latgov"], ["waiter-fdatasync-4k"], 2, 10, 1, 1, 10)
    wl = WORKLOAD_BY_NAME["waiter-fdatasync-4k"]
    warm = r.one_run(1, 1, 0, wl, "warm-up")
    assert warm["status"] == "ok", warm["status"]
    assert (warm["mode"], warm["order_in_round"], warm["fio_randseed"]) == \
        ("warm-up", 0, round_seed(1))
    assert warm["warmup_ios"] == 10000 and warm["waiter_cpu"] == 0
    assert warm["read_iops"] == "" and warm["write_clat_mean_us"] == ""  # no statistic
    assert s.fio_calls[0] == ("r1-waiter-fdatasync-4k-warm-up.fio", round_seed(1), "0")
    job = (r.raw / "r1-waiter-fdatasync-4k-warm-up.fio").read_text()
    assert "runtime=11000ms" in job  # round 1: as long as a run, ramp included
    assert "iodepth=32" in job and "fdatasync=0" in job
    row = r.one_run(1, 2, 1, wl, "off")  # 10 writes
    assert (row["warmup_ios"], row["warmup_covered"]) == (10000, "yes")
    # round 2: twice the offsets round 1's run went through, at round 1's
    # warm-up rate (5000/s)
    s.warm_ios = 20
    r.one_run(2, 3, 0, wl, "warm-up")
    need = offsets_read(10, 10, 1)
    assert "runtime=%dms" % round(max(0.5, WARMUP_MARGIN * need / 5000) * 1000) in s.jobs[-1]
    row = r.one_run(2, 4, 1, wl, "latgov")
    assert (row["warmup_ios"], row["warmup_covered"]) == (20, "no")  # 10 + ramp + queue


def test_the_io_beside_a_job_runs_in_its_measured_runs_not_its_warmup(tmp_path, monkeypatch):
    r, s, _ = fake_runner(tmp_path, monkeypatch)
    r.settings = Settings(["off"], ["reads-beside-writeback"], 1, 10, 1, 1, 10)
    wl = WORKLOAD_BY_NAME["reads-beside-writeback"]
    assert r.one_run(1, 1, 0, wl, "warm-up")["status"] == "ok"
    assert r.one_run(1, 2, 1, wl, "off")["status"] == "ok"
    assert [c[0] for c in s.fio_calls] == ["r1-reads-beside-writeback-warm-up.fio",
                                           "onset-isolated-reads.fio"]
    assert s.besides == [None, "background-writeback.fio"]
    # the warm-up is the job's alone
    assert "[onset-isolated-reads]" in s.jobs[0] and "[background-writeback]" not in s.jobs[0]


def test_a_workload_paced_by_thinktime_runs_without_fios_ramp(tmp_path, monkeypatch):
    """fio 3.33 ends a ramp with as many IOs back to back as the ramp had
    where thinktime paces the job: workload 2 is measured from its start,
    and its warm-up is as long as its run alone."""
    r, s, _ = fake_runner(tmp_path, monkeypatch)
    r.settings = Settings(["off"], ["qd1-randrw-128k-thinktime", "qd1-randread-4k"],
                          1, 10, 1, 1, 10)
    for name in ("qd1-randrw-128k-thinktime", "qd1-randread-4k"):
        wl = WORKLOAD_BY_NAME[name]
        assert r.one_run(1, 1, 0, wl, "warm-up")["status"] == "ok"
        assert r.one_run(1, 2, 1, wl, "off")["status"] == "ok"
    assert s.ramps == ["0", "0", "1", "1"]
    assert "runtime=10000ms" in s.jobs[0] and "runtime=11000ms" in s.jobs[2]
    assert not WORKLOAD_BY_NAME["qd1-randrw-128k-thinktime"].ramp


QOS = "/sys/devices/system/cpu/cpu%d/power/pm_qos_resume_latency_us"


def percpu_tree(r, monkeypatch, values=("0", "0")):
    """The CPUs' files at `values`; visit_cpus records what they read when
    the harness runs on them."""
    for cpu, value in enumerate(values):
        put(r.root.root, QOS % cpu, value + "\n")
    visits = []

    def visit(cpus):
        visits.append((list(cpus), read_percpu_qos(r.root, [0, 1])))
        return []

    monkeypatch.setattr(runner, "visit_cpus", visit)
    return visits


def journal(r):
    path = r.root.path(runner.PERCPU_JOURNAL)
    return path.read_text() if path.exists() else None


@pytest.mark.parametrize("mode,held,under", [
    ("static-waiter", "0", {0: "n/a", 1: "0"}),
    ("static-completion", "1", {0: "0", 1: "n/a"}),
])
def test_static_on_some_cpus_holds_them_for_the_run_and_puts_them_back(tmp_path, monkeypatch,
                                                                      mode, held, under):
    r, s, _ = fake_runner(tmp_path, monkeypatch)
    visits = percpu_tree(r, monkeypatch)
    journaled = []
    run_fio = s.run_fio
    s.run_fio = lambda *a, **k: (journaled.append(journal(r)), run_fio(*a, **k))[1]
    row = r.one_run(1, 1, 1, WORKLOAD_BY_NAME["onset-isolated-reads"], mode)
    assert row["status"] == "ok", row["status"]
    assert (row["waiter_cpu"], row["completion_cpus"], row["static_cpus"]) == (0, "1", held)
    assert s.fio_calls == [("onset-isolated-reads.fio", round_seed(1), "0")]
    assert "\ncpus_allowed=${LATGOV_AB_WAITER_CPU}\n" in s.jobs[0]  # pinned
    assert s.qos_at_fio == [under]
    # visited once written, so that a halted CPU chooses again under the hold
    assert visits == [([int(held)], under)]
    assert journaled == ["cpu%s 0\n" % held]
    assert read_percpu_qos(r.root, [0, 1]) == {0: "0", 1: "0"}
    assert s.percpu_before == {} and journal(r) is None


@pytest.mark.parametrize("values,why", [
    (("0", "20"), r"held already or unreadable \(cpu1 is 20\)"),
    (("0", "n/a"), r"held already or unreadable \(cpu1 is n/a\)"),
    (("0",), r"held already or unreadable \(cpu1 is \?\)"),  # no file to read
])
def test_static_on_a_cpu_someone_else_holds_fails_and_leaves_it_alone(tmp_path, monkeypatch,
                                                                     values, why):
    r, s, _ = fake_runner(tmp_path, monkeypatch)
    visits = percpu_tree(r, monkeypatch, values)
    before = read_percpu_qos(r.root, [0, 1])
    with pytest.raises(HarnessError, match=why):
        r.one_run(1, 1, 1, WORKLOAD_BY_NAME["onset-isolated-reads"], "static-completion")
    assert read_percpu_qos(r.root, [0, 1]) == before
    assert s.percpu_before == {} and journal(r) is None and visits == []
    assert s.fio_calls == []


def test_a_value_someone_else_wrote_over_the_hold_is_left_alone(tmp_path, monkeypatch):
    r, s, _ = fake_runner(tmp_path, monkeypatch)
    percpu_tree(r, monkeypatch)
    s.hold_percpu([0, 1])
    put(r.root.root, QOS % 1, "20\n")  # tuned, say
    s.release_percpu()
    assert read_percpu_qos(r.root, [0, 1]) == {0: "0", 1: "20"}
    assert any("cpu1 pm_qos_resume_latency_us read 20" in n for n in s.notes)
    assert journal(r) is None


def test_a_cpu_that_cannot_be_put_back_stops_the_bench_and_stays_journaled(tmp_path,
                                                                         monkeypatch):
    r, s, _ = fake_runner(tmp_path, monkeypatch)
    percpu_tree(r, monkeypatch)
    s.hold_percpu([0, 1])
    assert journal(r) == "cpu0 0\ncpu1 0\n"
    real = Path.write_text

    def refuse_cpu1(path, text, *a, **k):
        if str(path).endswith(QOS % 1):
            raise PermissionError("refused")
        return real(path, text, *a, **k)

    monkeypatch.setattr(Path, "write_text", refuse_cpu1)
    with pytest.raises(runner.MachineConstrained, match="cpu1 to 0: refused"):
        s.release_all()
    assert read_percpu_qos(r.root, [0, 1]) == {0: "0", 1: "n/a"}
    assert s.percpu_before == {1: "0"} and journal(r) == "cpu1 0\n"
    monkeypatch.setattr(Path, "write_text", real)
    s.release_all()  # the next try puts it back
    assert read_percpu_qos(r.root, [0, 1]) == {0: "0", 1: "0"} and journal(r) is None


def test_a_cpu_the_harness_cannot_run_on_fails_the_hold(tmp_path, monkeypatch):
    r, s, _ = fake_runner(tmp_path, monkeypatch)
    percpu_tree(r, monkeypatch)
    monkeypatch.setattr(runner, "visit_cpus", lambda cpus: [1])
    with pytest.raises(HarnessError, match="could not run on CPU 1"):
        s.hold_percpu([1])
    s.release_all()
    assert read_percpu_qos(r.root, [0, 1]) == {0: "0", 1: "0"} and journal(r) is None


def test_a_cpu_unreadable_at_the_release_stays_recorded_and_stops_the_bench(tmp_path,
                                                                          monkeypatch):
    r, s, _ = fake_runner(tmp_path, monkeypatch)
    percpu_tree(r, monkeypatch)
    s.hold_percpu([1])
    r.root.path(QOS % 1).unlink()  # the CPU went offline, say
    with pytest.raises(runner.MachineConstrained, match="cpu1 to 0: unreadable"):
        s.release_all()
    assert s.percpu_before == {1: "0"} and journal(r) == "cpu1 0\n"


def test_one_bench_at_a_time(tmp_path, monkeypatch):
    r, s, _ = fake_runner(tmp_path, monkeypatch)
    fd = runner.take_bench_lock(r.root)
    with pytest.raises(HarnessError, match="another bench/ab runs"):
        runner.take_bench_lock(r.root)
    os.close(fd)
    os.close(runner.take_bench_lock(r.root))


def test_what_a_killed_bench_left_held_is_put_back_at_the_next_start(tmp_path, monkeypatch):
    r, s, _ = fake_runner(tmp_path, monkeypatch)
    percpu_tree(r, monkeypatch)
    s.hold_percpu([0, 1])  # and killed: nothing released
    put(r.root.root, QOS % 0, "20\n")  # someone's since
    assert runner.recover_percpu(r.root) == [
        "put cpu1 pm_qos_resume_latency_us back from n/a to 0, as %s of a bench/ab that did "
        "not finish names it" % r.root.path(runner.PERCPU_JOURNAL)]
    assert read_percpu_qos(r.root, [0, 1]) == {0: "20", 1: "0"} and journal(r) is None
    assert runner.recover_percpu(r.root) == []  # nothing left to do
    put(r.root.root, runner.PERCPU_JOURNAL, "cpu1 0\nbogus\n")
    with pytest.raises(HarnessError, match=r"percpu:2: not \"cpuN VALUE\": 'bogus'"):
        runner.recover_percpu(r.root)
    put(r.root.root, runner.PERCPU_JOURNAL, "cpu7 0\n")  # no such CPU: cannot be read
    with pytest.raises(HarnessError, match="cannot read cpu7 .* by hand"):
        runner.recover_percpu(r.root)
    assert journal(r) == "cpu7 0\n"  # kept for whoever puts it back


def test_a_bench_takes_the_lock_and_puts_back_a_killed_ones_holds_before_all_else(
        tmp_path, monkeypatch):
    from latgov_bench import cli
    r, s, _ = fake_runner(tmp_path, monkeypatch)
    percpu_tree(r, monkeypatch)
    s.hold_percpu([1])  # and killed: nothing released
    s.notes = []
    monkeypatch.setattr(cli.os, "geteuid", lambda: 0)

    def first_other_step():
        # the first step that can fail after them: both already done
        with pytest.raises(HarnessError, match="another bench/ab runs"):
            runner.take_bench_lock(r.root)
        assert read_percpu_qos(r.root, [0, 1]) == {0: "0", 1: "0"} and journal(r) is None
        raise HarnessError("stopped here")

    monkeypatch.setattr(cli, "check_plotting", first_other_step)
    s.lock_fd = None
    try:
        with pytest.raises(HarnessError, match="stopped here"):
            cli.run(cli.parse_args([]), s, r.root)
    finally:
        if s.lock_fd is not None:
            os.close(s.lock_fd)
    assert s.notes == ["put cpu1 pm_qos_resume_latency_us back from n/a to 0, as %s of a "
                       "bench/ab that did not finish names it"
                       % r.root.path(runner.PERCPU_JOURNAL)]


def test_an_optional_pin_runs_unpinned_where_every_cpu_completes_its_own_io(tmp_path,
                                                                          monkeypatch):
    r, s, _ = fake_runner(tmp_path, monkeypatch)
    put(r.root.root, "/proc/irq/36/effective_affinity_list", "0-1\n")
    r.waiter = None
    row = r.one_run(1, 1, 1, WORKLOAD_BY_NAME["onset-isolated-reads"], "off")
    assert row["status"] == "ok" and row["waiter_cpu"] == ""
    assert s.fio_calls == [("onset-isolated-reads.fio", round_seed(1), "0,1")]
    assert s.notes == ["onset-isolated-reads runs unpinned: every online CPU completes its "
                       "own queue's IO (or the disk's queue IRQs were not found)"]
    with pytest.raises(HarnessError, match="no CPU to pin waiter-fdatasync-4k on"):
        r.one_run(1, 2, 1, WORKLOAD_BY_NAME["waiter-fdatasync-4k"], "off")
    with pytest.raises(HarnessError, match="static-waiter holds the CPUs of a pinned job, and "
                       "onset-isolated-reads found no CPU to pin on"):
        r.one_run(1, 3, 1, WORKLOAD_BY_NAME["onset-isolated-reads"], "static-waiter")
