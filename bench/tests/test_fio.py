"""fio's JSON output: latency per direction and fdatasync latency; its
command line and each round's seed."""

import json
from pathlib import Path

import pytest

from latgov_bench.fio import FioOutputError, fio_columns, fio_command, parse_fio_json, round_seed
from conftest import BENCH


def lat(mean_ns, p99_ns, max_ns):
    return {"mean": mean_ns, "max": max_ns,
            "percentile": {"50.000000": mean_ns, "90.000000": p99_ns * 0.9,
                           "99.000000": p99_ns, "99.900000": max_ns}}


def fio_json(read_ios=0, write_ios=0, sync_ios=0):
    job = {"jobname": "x",
           "read": {"total_ios": read_ios, "iops": 1000.04, "clat_ns": lat(40000, 90000, 500000)},
           "write": {"total_ios": write_ios, "iops": 250.0, "clat_ns": lat(60000, 120000, 900000)}}
    if not read_ios:
        job["read"] = {"total_ios": 0, "iops": 0.0, "clat_ns": {"mean": 0.0, "max": 0}}
    if sync_ios is not None:
        # as fio 3.33 writes it: total_ios 0, the count in lat_ns.N
        job["sync"] = {"total_ios": 0, "lat_ns": dict(lat(300000, 800000, 2000000), N=sync_ios)}
    return "note: a line fio prints first\n" + json.dumps({"fio version": "fio-3.33",
                                                            "jobs": [job]})


def test_reads_only():
    r = parse_fio_json(fio_json(read_ios=5000, write_ios=0, sync_ios=0))
    assert set(r) == set(fio_columns())
    assert r["read_iops"] == 1000.0 and r["read_ios"] == 5000
    assert r["read_clat_mean_us"] == 40.0 and r["read_clat_p99_us"] == 90.0
    assert r["read_clat_max_us"] == 500.0
    assert r["write_iops"] == "" and r["write_clat_mean_us"] == ""
    assert r["sync_ios"] == "" and r["sync_lat_p99_us"] == ""
    assert r["fio_ios"] == 5000


def test_writes_with_fdatasync():
    r = parse_fio_json(fio_json(write_ios=800, sync_ios=800))
    assert r["write_ios"] == 800 and r["write_clat_p99_us"] == 120.0
    assert r["sync_ios"] == 800
    assert (r["sync_lat_mean_us"], r["sync_lat_p99_us"], r["sync_lat_max_us"]) == \
        (300.0, 800.0, 2000.0)
    assert r["read_ios"] == "" and r["fio_ios"] == 800


@pytest.mark.parametrize("text", ["", "fio: error", "{\"jobs\": []}", "{not json"])
def test_bad_output_is_an_error_naming_the_source(text):
    with pytest.raises(FioOutputError, match="run.json"):
        parse_fio_json(text, "run.json")


def test_the_seed_is_given_before_the_job_file():
    cmd = fio_command("fio", Path("job.fio"), Path("out.json"), round_seed(3))
    assert cmd[-1] == "job.fio" and "--randseed=%d" % round_seed(3) in cmd
    assert not any(a.startswith("--randseed") for a in
                   fio_command("fio", Path("job.fio"), Path("out.json")))


def test_each_round_has_its_own_seed_and_no_job_file_sets_one():
    seeds = [round_seed(r) for r in range(1, 6)]
    assert len(set(seeds)) == 5
    for job in (BENCH / "jobs").glob("*.fio"):
        text = job.read_text()
        assert "randseed" not in text and "randrepeat" not in text, job
