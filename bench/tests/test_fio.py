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
    # lat (the whole request) is clat plus the submission: 15 us here
    job = {"jobname": "x",
           "read": {"total_ios": read_ios, "iops": 1000.04, "clat_ns": lat(40000, 90000, 500000),
                    "lat_ns": lat(55000, 105000, 515000)},
           "write": {"total_ios": write_ios, "iops": 250.0, "clat_ns": lat(60000, 120000, 900000),
                     "lat_ns": lat(75000, 135000, 915000)}}
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
    assert r["read_lat_mean_us"] == 55.0 and r["read_lat_p99_us"] == 105.0
    assert r["read_lat_max_us"] == 515.0
    assert r["write_iops"] == "" and r["write_clat_mean_us"] == ""
    assert r["write_lat_mean_us"] == ""
    assert r["sync_ios"] == "" and r["sync_lat_p99_us"] == ""
    assert r["fio_ios"] == 5000


def test_writes_with_fdatasync():
    r = parse_fio_json(fio_json(write_ios=800, sync_ios=800))
    assert r["write_ios"] == 800 and r["write_clat_p99_us"] == 120.0
    assert r["write_lat_p99_us"] == 135.0
    assert r["sync_ios"] == 800
    assert (r["sync_lat_mean_us"], r["sync_lat_p99_us"], r["sync_lat_max_us"]) == \
        (300.0, 800.0, 2000.0)
    assert r["read_ios"] == "" and r["fio_ios"] == 800


@pytest.mark.parametrize("text", ["", "fio: error", "{\"jobs\": []}", "{not json"])
def test_bad_output_is_an_error_naming_the_source(text):
    with pytest.raises(FioOutputError, match="run.json"):
        parse_fio_json(text, "run.json")


def test_a_run_without_lat_percentiles_has_the_mean_and_no_percentiles():
    # As fio writes it without --lat_percentiles: lat_ns has no percentile
    text = fio_json(read_ios=5000)
    job = json.loads(text[text.find("{"):])
    del job["jobs"][0]["read"]["lat_ns"]["percentile"]
    r = parse_fio_json(json.dumps(job))
    assert r["read_lat_mean_us"] == 55.0 and r["read_lat_p99_us"] == ""
    assert r["read_clat_p99_us"] == 90.0


def test_a_latency_fio_did_not_report_is_no_value_not_zero():
    text = fio_json(read_ios=5000)
    job = json.loads(text[text.find("{"):])
    del job["jobs"][0]["read"]["lat_ns"]
    r = parse_fio_json(json.dumps(job))
    assert r["read_lat_mean_us"] == "" and r["read_lat_max_us"] == ""
    assert r["read_clat_mean_us"] == 40.0


def test_fio_is_asked_for_the_whole_requests_percentiles():
    assert "--lat_percentiles=1" in fio_command("fio", Path("job.fio"), Path("out.json"))


def test_the_jobs_of_another_group_are_counted_and_left_out():
    text = fio_json(read_ios=500)
    doc = json.loads(text[text.find("{"):])
    reader = dict(doc["jobs"][0], groupid=0)
    writer = json.loads(fio_json(write_ios=250).split("\n", 1)[1])["jobs"][0]
    writer.update(jobname="background-writeback", groupid=1)
    doc["jobs"] = [reader, writer]
    r = parse_fio_json(json.dumps(doc))
    assert r["read_ios"] == 500 and r["fio_ios"] == 500
    assert r["write_ios"] == "" and r["write_lat_mean_us"] == ""
    assert r["background_ios"] == 250
    # a job of the reader's own group is the reader's (fio reports it as one)
    doc["jobs"] = [reader, dict(writer, groupid=0)]
    assert parse_fio_json(json.dumps(doc))["background_ios"] == ""
    assert parse_fio_json(fio_json(read_ios=500))["background_ios"] == ""


def test_the_job_beside_comes_after_the_job():
    cmd = fio_command("fio", Path("job.fio"), Path("out.json"), round_seed(3), Path("bg.fio"))
    assert cmd[-2:] == ["job.fio", "bg.fio"]


def test_every_job_file_is_a_workloads_job_or_what_runs_beside_one():
    from latgov_bench.workloads import WORKLOADS
    used = {w.job for w in WORKLOADS} | {w.background for w in WORKLOADS if w.background}
    assert {p.name for p in (BENCH / "jobs").glob("*.fio")} == used


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


# --------------------------------------------------------------------------
# The warm-up job

def test_the_warmup_is_the_same_job_at_depth_without_think_time():
    from latgov_bench.fio import WARMUP_DEPTH, warmup_job_text
    text = (BENCH / "jobs" / "waiter-fdatasync-4k.fio").read_text()
    w = warmup_job_text(text, 2.5, writes=True)
    opts = [line for line in w.splitlines() if "=" in line and not line.startswith(";")]
    keys = [o.split("=", 1)[0] for o in opts]
    assert len(keys) == len(set(keys)), "an option given twice"
    got = dict(o.split("=", 1) for o in opts)
    assert (got["ioengine"], got["iodepth"], got["fdatasync"]) == \
        ("io_uring", str(WARMUP_DEPTH), "0")
    assert (got["runtime"], got["ramp_time"], got["time_based"]) == ("2500ms", "0", "1")
    assert got["end_fsync"] == "1"  # its writes flushed before the first run
    # what picks the offsets is kept: file, pattern, block size, pinning
    for k in ("filename", "rw", "bs", "cpus_allowed"):
        assert got[k] == dict(line.split("=", 1) for line in text.splitlines()
                              if "=" in line and not line.startswith(";"))[k]
    r = warmup_job_text((BENCH / "jobs" / "onset-isolated-reads.fio").read_text(), 11,
                        writes=False)
    assert "rate_iops=0" in r and "rate_iops=50" not in r and "end_fsync" not in r
    assert r.count("rate_iops=") == 1
    job = (BENCH / "jobs" / "onset-isolated-reads.fio").read_text()
    assert "\nrate_iops=50\n" in job and "\nthinktime" not in job  # fio 3.33's burst
    r = warmup_job_text((BENCH / "jobs" / "qd1-randrw-128k-thinktime.fio").read_text(), 11,
                        writes=True)
    assert "thinktime=0" in r and "thinktime=1000" not in r


def test_warmup_length_from_the_earlier_rounds():
    from latgov_bench.fio import offsets_read, warmup_seconds
    assert warmup_seconds(11, None, None) == 11  # round 1: as long as a run
    assert warmup_seconds(11, 200000, 100000.0) == 4.0  # twice the offsets
    assert warmup_seconds(11, 2000000, 100000.0) == 11  # never longer than a run
    assert warmup_seconds(11, 10, 100000.0) == 0.5
    # 10 s measured after 1 s ramp: the ramp's offsets counted too
    assert offsets_read(100000, 10, 1) == 100000 + 12500 + 32
    assert offsets_read(500, 1, 0) == 532


def fio_target(tmp_path):
    """A 16 MiB file fio reads with O_DIRECT and io_uring, as the jobs do.
    fio is a test dependency: without it, or where the file refuses the
    jobs' IO, the test fails (naming why) rather than skip. The file goes
    in LATGOV_TEST_SCRATCH_DIR (the build tree, set by CTest) where given:
    /tmp may be a tmpfs without O_DIRECT."""
    import os
    import shutil
    import subprocess
    import tempfile
    if not shutil.which("fio"):
        pytest.fail("fio is not installed (a test dependency: scripts/deps.sh test)")
    scratch = os.environ.get("LATGOV_TEST_SCRATCH_DIR")
    base = Path(tempfile.mkdtemp(prefix="fio-", dir=scratch)) if scratch else tmp_path
    if scratch:
        import atexit
        atexit.register(shutil.rmtree, base, True)
    data = base / "target.dat"
    with open(data, "wb") as f:
        f.write(bytes(range(256)) * (16 << 12))  # 16 MiB of data
    p = subprocess.run(["fio", "--name=probe", "--filename=%s" % data, "--direct=1",
                        "--rw=read", "--bs=4k", "--size=4k", "--ioengine=io_uring",
                        "--output=/dev/null"], capture_output=True, text=True)
    if p.returncode != 0:
        pytest.fail("fio cannot read %s with O_DIRECT and io_uring: %s" % (data, p.stderr))
    return data


def io_offsets(log):
    """(direction, offset, length) of each IO in a write_iolog file."""
    out = []
    for line in log.read_text().splitlines():
        f = line.split()
        if len(f) == 5 and f[2] in ("read", "write"):
            out.append(tuple(f[2:]))
    return out


def workload_jobs():
    from latgov_bench.workloads import WORKLOADS
    return sorted({w.job for w in WORKLOADS})


@pytest.mark.parametrize("job", workload_jobs())
def test_the_warmup_goes_through_the_runs_offsets_in_their_order(job, tmp_path):
    """With fio at hand: the measured job's IOs (ramp included) are the
    first IOs of its warm-up, with the same seed. A job that both reads and
    writes is run without ramp: fio resets its read/write counts when the
    ramp ends, after a number of IOs that depends on time, and from there
    its read/write choices may differ from the warm-up's (as from another
    mode's run of the round)."""
    import os
    import subprocess
    from latgov_bench.fio import warmup_job_text
    from latgov_bench.workloads import WORKLOADS
    data = fio_target(tmp_path)
    wl = next(w for w in WORKLOADS if w.job == job)
    env = dict(os.environ, LATGOV_AB_TARGET=str(data), LATGOV_AB_RUNTIME="300ms",
               LATGOV_AB_RAMP="0" if wl.reads and wl.writes else "200ms",
               LATGOV_AB_BURST="300ms",
               LATGOV_AB_WAITER_CPU=str(min(os.sched_getaffinity(0))))
    warm = tmp_path / "warm.fio"
    warm.write_text(warmup_job_text((BENCH / "jobs" / job).read_text(), 0.8, wl.writes))
    logs = []
    for name, path in (("run", BENCH / "jobs" / job), ("warm", warm)):
        log = tmp_path / (name + ".iolog")
        cmd = fio_command("fio", path, tmp_path / (name + ".json"), round_seed(2))
        p = subprocess.run(cmd[:-1] + ["--write_iolog=%s" % log, cmd[-1]], env=env,
                           capture_output=True, text=True)
        assert p.returncode == 0, p.stderr
        logs.append(io_offsets(log))
    run, warmup = logs
    assert run and len(warmup) >= len(run), (len(run), len(warmup))
    assert warmup[:len(run)] == run


def test_a_job_beside_runs_with_the_job_in_a_group_of_its_own(tmp_path):
    """With fio at hand: a workload's job beside (Workload.background) runs
    with its job in one fio, at the same time (one after the other, the two
    1 s jobs would take 2 s at least), and its requests are counted apart
    (background_ios), none of them in the job's own figures."""
    import os
    import subprocess
    import time
    from latgov_bench.fio import parse_fio_file
    from latgov_bench.workloads import WORKLOADS
    data = fio_target(tmp_path)
    env = dict(os.environ, LATGOV_AB_TARGET=str(data), LATGOV_AB_RUNTIME="1",
               LATGOV_AB_RAMP="0", LATGOV_AB_WAITER_CPU=str(min(os.sched_getaffinity(0))))
    beside = [w for w in WORKLOADS if w.background]
    assert beside
    for wl in beside:
        out = tmp_path / (wl.name + ".json")
        cmd = fio_command("fio", BENCH / "jobs" / wl.job, out, round_seed(1),
                          BENCH / "jobs" / wl.background)
        started = time.monotonic()
        p = subprocess.run(cmd, env=env, capture_output=True, text=True)
        took = time.monotonic() - started
        assert p.returncode == 0, p.stderr
        assert took < 2.0, "%s: the job beside ran after the job (%.1f s)" % (wl.name, took)
        r = parse_fio_file(out)
        assert r["read_ios"] and r["background_ios"], (wl.name, r)
        assert r["write_ios"] == "" and r["fio_ios"] == r["read_ios"], (wl.name, r)
