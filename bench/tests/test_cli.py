"""bench/ab's command line keeps its flags and defaults."""

import pytest

from latgov_bench.cli import REPO, parse_args, parse_size, repo_relative


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


def test_sizes():
    assert parse_size("1G") == 1 << 30 and parse_size("128MiB") == 128 << 20
    assert parse_size("4096") == 4096


def test_a_binary_in_the_repository_is_recorded_relative_to_it():
    assert repo_relative(str(REPO / "build" / "daemon" / "latgovd")) == "build/daemon/latgovd"
    assert repo_relative("/usr/sbin/latgovd") == "/usr/sbin/latgovd"
