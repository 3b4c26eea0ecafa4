"""targets.toml: the shipped file loads, and a bad one is refused with the
file and key named."""

import pytest

from latgov_bench.targets import TargetsError, load_targets

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
