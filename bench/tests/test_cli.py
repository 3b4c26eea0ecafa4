"""bench/ab's command line keeps its flags and defaults; what it refuses
to start on, and how a failed run is recorded."""

import datetime

import pytest

from latgov_bench import cli
from latgov_bench.cli import (REPO, output_dir, parse_args, parse_size, refusals,
                              repo_relative, run_one, schedule)
from latgov_bench.runner import Interrupted, MachineConstrained
from latgov_bench.sysstate import SysRoot
from latgov_bench.target import HarnessError
from latgov_bench.workloads import WORKLOAD_BY_NAME


def test_defaults():
    a = parse_args([])
    assert a.mode_list == ["off", "static", "latgov"]
    assert a.rounds == 5 and a.runtime == 10 and a.idle_sec == 10
    assert "waiter-fdatasync-4k" in a.workload_list and "idle" in a.workload_list
    assert a.size_bytes == 1 << 30


def test_smoke_is_short_and_runs_every_mode_unless_told():
    a = parse_args(["--smoke"])
    assert (a.rounds, a.runtime, a.ramp, a.idle_sec, a.size_bytes) == (1, 2, 0, 2, 128 << 20)
    assert a.mode_list == ["off", "static", "latgov", "latgov-dryrun"]
    a = parse_args(["--smoke", "--runtime", "5", "--modes", "off,latgov"])
    assert a.runtime == 5 and a.mode_list == ["off", "latgov"]


def test_every_earlier_flag_still_parses():
    a = parse_args(["--device", "vda", "--rounds", "2", "--modes", "static,off",
                    "--workloads", "qd1-randread-4k,idle", "--latgov-config", "x.toml",
                    "--out", "o", "--latgovd", "d", "--latgov", "c", "--fio", "f",
                    "--calibrate", "--keep-calibration", "--runtime", "4", "--ramp", "0.5",
                    "--burst-sec", "2", "--idle-sec", "6", "--size", "256M",
                    "--cooldown", "0"])
    assert a.workload_list == ["qd1-randread-4k", "idle"] and a.size_bytes == 256 << 20
    assert a.calibrate and not parse_args([]).calibrate
    assert parse_args(["--resummarize", "OUT"]).resummarize == "OUT"


@pytest.mark.parametrize("argv", [["--modes", "off,bogus"], ["--modes", "off,off"],
                                  ["--workloads", "nope"], ["--rounds", "0"],
                                  ["--size", "12Q"]])
def test_bad_arguments_exit_with_usage(argv, capsys):
    with pytest.raises(SystemExit) as e:
        parse_args(argv)
    assert e.value.code == 2
    assert "bench/ab: error:" in capsys.readouterr().err


def test_static_on_some_cpus_only_with_pinned_workloads(capsys):
    a = parse_args(["--modes", "off,static-waiter,static-completion,latgov",
                    "--workloads", "waiter-fdatasync-4k,onset-isolated-reads"])
    assert a.mode_list == ["off", "static-waiter", "static-completion", "latgov"]
    with pytest.raises(SystemExit) as e:
        parse_args(["--modes", "off,static-completion",
                    "--workloads", "onset-isolated-reads,qd1-randread-4k"])
    assert e.value.code == 2
    assert ("static-completion holds the CPUs of a pinned job; qd1-randread-4k pins none: "
            "choose --workloads among waiter-fdatasync-4k, onset-isolated-reads"
            in capsys.readouterr().err)
    with pytest.raises(SystemExit):  # every workload by default
        parse_args(["--modes", "static-waiter"])
    assert ("bench/ab: error: static-waiter holds the CPUs of a pinned job; qd1-randread-4k, "
            "qd1-randrw-128k-thinktime, mixed-bssplit-randrw, idle pin none"
            in capsys.readouterr().err)


def test_sizes():
    assert parse_size("1G") == 1 << 30 and parse_size("128MiB") == 128 << 20
    assert parse_size("4096") == 4096


def test_a_binary_in_the_repository_is_recorded_relative_to_it():
    assert repo_relative(str(REPO / "build" / "daemon" / "latgovd")) == "build/daemon/latgovd"
    assert repo_relative("/usr/sbin/latgovd") == "/usr/sbin/latgovd"


def test_force_is_off_unless_given():
    assert not parse_args([]).force and parse_args(["--force"]).force


def test_a_given_out_must_be_empty_unless_forced(tmp_path):
    out = tmp_path / "run"
    assert output_dir(str(out), "vda", False) == out  # new
    out.mkdir()
    assert output_dir(str(out), "vda", False) == out  # empty
    (out / "raw").mkdir()
    with pytest.raises(HarnessError, match="is not empty.*--force"):
        output_dir(str(out), "vda", False)
    assert output_dir(str(out), "vda", True) == out


def test_the_default_out_takes_the_next_free_name(tmp_path, monkeypatch):
    monkeypatch.setattr(cli, "BENCH", tmp_path)
    first = output_dir(None, "vda", False)
    assert first.name == "%s-vda" % datetime.date.today().isoformat()
    first.mkdir(parents=True)
    assert output_dir(None, "vda", False) == first  # empty: still free
    (first / "results.csv").write_text("")
    second = output_dir(None, "vda", True)
    assert second.name == first.name + "-2"


def test_a_foreign_latgovd_or_constraint_is_named(tmp_path):
    proc = tmp_path / "proc" / "77"
    proc.mkdir(parents=True)
    (proc / "comm").write_text("latgovd\n")
    (proc / "cmdline").write_bytes(b"/usr/sbin/latgovd\0")
    qos = tmp_path / "sys/devices/system/cpu/cpu0/power/pm_qos_resume_latency_us"
    qos.parent.mkdir(parents=True)
    qos.write_text("n/a\n")
    assert refusals(SysRoot(tmp_path), [0]) == [
        "latgovd (pid 77: /usr/sbin/latgovd)", "cpu0 pm_qos_resume_latency_us is n/a"]


def test_the_schedule_rotates_and_reverses_the_modes_by_turns():
    plan = schedule(2, ["a", "b"], ["off", "static", "latgov"])
    assert plan[:3] == [(1, "a", 1, "off"), (1, "a", 2, "static"), (1, "a", 3, "latgov")]
    assert plan[6:9] == [(2, "a", 1, "latgov"), (2, "a", 2, "static"), (2, "a", 3, "off")]
    assert len(plan) == 12
    modes = ["off", "static", "latgov"]
    orders = [[m for r, w, _, m in schedule(6, ["a"], modes) if r == rnd]
              for rnd in range(1, 7)]
    assert orders[2] == ["static", "latgov", "off"]  # round 3: rotated by one
    # Over six rounds: each mode once per place per two rounds, and right
    # after each other mode twice.
    for place in range(3):
        assert sorted(o[place] for o in orders) == sorted(modes * 2)
    pairs = [(o[i], o[i + 1]) for o in orders for i in range(2)]
    assert {p: pairs.count(p) for p in set(pairs)} == {
        (a, b): 2 for a in modes for b in modes if a != b}
    # Five rounds, as the targets ask: latgov follows static at most twice
    # (a plain rotation: four times), and follows off too.
    five = pairs[:10]
    assert five.count(("static", "latgov")) == 2 and five.count(("off", "latgov")) == 1


def test_each_rounds_runs_of_a_workload_follow_its_warmup():
    plan = cli.with_warmups(schedule(2, ["a", "b"], ["off", "static", "latgov"]))
    assert len(plan) == 12 + 4
    assert plan[:4] == [(1, "a", 0, "warm-up"), (1, "a", 1, "off"), (1, "a", 2, "static"),
                        (1, "a", 3, "latgov")]
    assert plan[4] == (1, "b", 0, "warm-up") and plan[8] == (2, "a", 0, "warm-up")
    assert [p for p in plan if p[3] != "warm-up"] == schedule(2, ["a", "b"],
                                                              ["off", "static", "latgov"])


def test_static_not_holding_0_fails_the_smoke_too():
    from latgov_bench.sysstate import HostInfo, IdleLayout
    host = HostInfo([0], IdleLayout({0: []}), "none", "menu")
    r = {"status": "ok", "round": "1", "workload": "qd1-randread-4k", "mode": "static",
         "window_s": "2", "cpu0_held_s": "2", "held_cpu_s": "2",
         "global_held_frac": "0.5", "global_min_us": "0"}
    assert cli.smoke_checks([r], host) == [
        "r1 qd1-randread-4k static: static did not hold /dev/cpu_dma_latency at 0 (held in "
        "50.0% of the samples)"]
    w = {"status": "ok", "round": "1", "workload": "qd1-randread-4k", "mode": "warm-up",
         "warmup_ios": "0"}
    assert cli.smoke_checks([w], host) == [
        "r1 qd1-randread-4k warm-up: the warm-up went through no offsets"]
    assert cli.smoke_checks([dict(w, warmup_ios="9000")], host) == []


class FakeRunner:
    """one_run raises what the test gives it; error_row as the Runner's."""

    def __init__(self, error):
        self.error = error
        self.released = 0
        self.session = self
        self.past_pids = [1]

    def one_run(self, *args):
        raise self.error

    def release_all(self):
        self.released += 1

    def error_row(self, rnd, seq, order, wl, mode, msg):
        return {"round": rnd, "workload": wl.name, "mode": mode, "status": "error: " + msg}


WL = WORKLOAD_BY_NAME["qd1-randread-4k"]


@pytest.mark.parametrize("error,status", [
    (OSError(2, "No such file or directory"),
     "error: FileNotFoundError: [Errno 2] No such file or directory"),
    (KeyError(3), "error: KeyError: 3"),
    (HarnessError("latgovd exited with 78"), "error: latgovd exited with 78"),
])
def test_any_failure_of_a_run_is_its_error_row_and_the_bench_goes_on(error, status):
    r = FakeRunner(error)
    row, stop = run_one(r, 1, 1, 1, WL, "latgov")
    assert row["status"] == status and stop is None
    assert r.released == 1 and r.past_pids == []


def test_a_cpu_left_constrained_is_the_runs_error_and_stops_the_bench():
    e = MachineConstrained("cpu1 pm_qos_resume_latency_us is n/a (0 when the run started)")
    row, stop = run_one(FakeRunner(e), 1, 1, 1, WL, "latgov")
    assert stop is e and "cpu1 pm_qos_resume_latency_us is n/a" in row["status"]


def test_a_release_that_leaves_a_cpu_constrained_stops_the_bench_too():
    r = FakeRunner(OSError("cpu1 went offline"))

    def release_all():
        raise MachineConstrained("cpu1 pm_qos_resume_latency_us is 0 (n/a when ...)")

    r.release_all = release_all
    row, stop = run_one(r, 1, 1, 1, WL, "static")
    assert isinstance(stop, MachineConstrained)
    assert "cpu1 went offline; cpu1 pm_qos" in row["status"]


def test_an_interrupt_is_not_a_runs_error():
    with pytest.raises(Interrupted):
        run_one(FakeRunner(Interrupted("SIGINT")), 1, 1, 1, WL, "off")
