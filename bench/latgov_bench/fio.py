"""fio: the command line of one run and the numbers of its JSON output."""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

PERCENTILES = [("50", "50.000000"), ("90", "90.000000"),
               ("99", "99.000000"), ("99_9", "99.900000")]
PERCENTILE_LIST = "50:90:99:99.9"
# Per direction: lat, the whole request (from the submit call to the
# completion seen), which the targets judge; and clat, from the submit
# call's return, which leaves out the submission (an io_uring or libaio
# submit's system call, latgovd's tracepoint on the issue path) and with it
# any cost a mode adds or saves there. A psync job's submission is the
# call itself: its clat is the whole request, as lat is.
LAT_FIELDS = (["iops", "ios", "lat_mean_us"]
              + ["lat_p%s_us" % p for p, _ in PERCENTILES] + ["lat_max_us", "clat_mean_us"]
              + ["clat_p%s_us" % p for p, _ in PERCENTILES] + ["clat_max_us"])
SYNC_FIELDS = (["ios", "lat_mean_us"]
               + ["lat_p%s_us" % p for p, _ in PERCENTILES] + ["lat_max_us"])
DIRECTIONS = ("read", "write")


class FioOutputError(ValueError):
    pass


def fio_columns() -> list[str]:
    cols = []
    for d in DIRECTIONS:
        cols += ["%s_%s" % (d, f) for f in LAT_FIELDS]
    cols += ["sync_%s" % f for f in SYNC_FIELDS]
    return cols + ["fio_ios", "background_ios"]


def _latency(stats: dict, prefix: str, key: str) -> dict:
    if "mean" not in stats:  # not reported (disable_lat, another fio): no value, not 0
        return {}
    out = {}
    pct = stats.get("percentile", {})
    out[prefix + "mean_us"] = round(stats.get("mean", 0.0) / 1e3, 3)
    for p, k in PERCENTILES:
        v = pct.get(k)
        out["%sp%s_us" % (prefix, p)] = "" if v is None else round(v / 1e3, 3)
    out[prefix + "max_us"] = round(stats.get("max", 0) / 1e3, 3)
    return out


def parse_fio_json(text: str, source: str = "fio output") -> dict:
    """Row fields of the first job: per direction IOPS, the whole
    request's latency (lat) and the completion latency (clat), and the
    fsync/fdatasync latency when the job synced. A run made without
    --lat_percentiles has lat's mean and max, no percentiles. The requests
    of jobs in other reporting groups (Workload.background) are counted in
    background_ios, and nothing else of theirs is kept."""
    start = text.find("{")
    if start < 0:
        raise FioOutputError("no JSON in %s" % source)
    try:
        jobs = json.loads(text[start:])["jobs"]
        job = jobs[0]
        beside = [j for j in jobs[1:] if j.get("groupid") != job.get("groupid")]
    except (ValueError, KeyError, IndexError, TypeError) as e:
        raise FioOutputError("bad JSON in %s: %s" % (source, e)) from e
    out: dict = {c: "" for c in fio_columns()}
    total = 0
    for d in DIRECTIONS:
        s = job.get(d, {})
        ios = int(s.get("total_ios", 0))
        total += ios
        if ios == 0:
            continue
        out["%s_iops" % d] = round(s.get("iops", 0.0), 1)
        out["%s_ios" % d] = ios
        out.update(_latency(s.get("lat_ns", {}), "%s_lat_" % d, "lat"))
        out.update(_latency(s.get("clat_ns", {}), "%s_clat_" % d, "clat"))
    sync = job.get("sync", {})
    # fio 3.33 leaves sync.total_ios at 0; the latency's sample count is right
    sync_ios = int(sync.get("total_ios", 0)) or int(sync.get("lat_ns", {}).get("N", 0))
    if sync_ios:
        out["sync_ios"] = sync_ios
        out.update(_latency(sync.get("lat_ns", {}), "sync_lat_", "lat"))
    out["fio_ios"] = total
    if beside:
        out["background_ios"] = sum(int(j.get(d, {}).get("total_ios", 0))
                                    for j in beside for d in DIRECTIONS)
    return out


def parse_fio_file(path: Path) -> dict:
    return parse_fio_json(path.read_text(), str(path))


def job_runtime_s(path: Path) -> float | None:
    """fio's own measure of how long the first job ran, in seconds."""
    text = path.read_text()
    try:
        ms = json.loads(text[text.find("{"):])["jobs"][0]["job_runtime"]
        return float(ms) / 1000 if ms else None
    except (ValueError, KeyError, IndexError, TypeError):
        return None


SEED_BASE = 1000000


def round_seed(rnd: int) -> int:
    """fio's random seed in round `rnd`. The same for every mode within a
    round, so that the modes compared there read the same offsets; another
    in each round, so that the rounds sample other offsets (fio's default,
    randrepeat=1, gives every run the same ones)."""
    return SEED_BASE + rnd


def fio_command(fio: str, job: Path, json_path: Path, seed: int | None = None,
                beside: Path | None = None) -> list[str]:
    # A job option before the job files sets fio's defaults for the first
    # file's jobs (fio resets them before each further file, so the job
    # beside gets none: the same offsets in every run, and it is not
    # measured); the job files set no randseed of their own. The job comes
    # first, so that it is the output's first job (parse_fio_json).
    cmd = [fio, "--output-format=json", "--output=%s" % json_path,
           "--percentile_list=" + PERCENTILE_LIST, "--lat_percentiles=1"]
    if seed is not None:
        cmd.append("--randseed=%d" % seed)
    return cmd + [str(job)] + ([str(beside)] if beside is not None else [])


# --------------------------------------------------------------------------
# The warm-up: the round's offsets read (and written) once before its runs

# fio draws a job's offsets, block sizes and read/write choices from random
# states seeded by --randseed, one I/O after another as it issues them:
# neither the queue depth, the I/O engine, think time nor fdatasync changes
# the sequence, only how fast it is gone through (checked with fio 3.33's
# write_iolog for every job in bench/jobs; test_fio runs that check where
# fio can). The warm-up runs the job so, as fast as the disk takes it.
# One limit: fio resets its read/write counts when a ramp ends, after a
# number of I/Os that depends on time, so in a job that both reads and
# writes after a ramp the choices after it may differ from the warm-up's
# (as they differ between two modes' runs of the round): in randrw:2 the
# offset that follows on the last one of a direction differs too (the
# random ones keep their order). Workload 2 (128k randrw) runs without a
# ramp (Workload.ramp), so it follows the warm-up throughout.
WARMUP_DEPTH = 32
WARMUP_MIN_S = 0.5
WARMUP_MARGIN = 2.0


def warmup_job_text(job_text: str, runtime_s: float, writes: bool) -> str:
    """A job file's text made into its warm-up: the same job (file, block
    sizes, read/write mix, distribution, pinning) without think time, rate
    limit or fdatasync, at depth WARMUP_DEPTH on io_uring, no ramp, for runtime_s
    seconds; a job that writes flushes them at its end (end_fsync), so that
    no write-back of the warm-up falls into the first measured run."""
    over = {"thinktime": "0", "rate_iops": "0", "fdatasync": "0", "ioengine": "io_uring",
            "iodepth": str(WARMUP_DEPTH), "ramp_time": "0", "time_based": "1",
            "runtime": "%dms" % max(1, round(runtime_s * 1000))}
    if writes:
        over["end_fsync"] = "1"
    out, placed = [], False
    for line in job_text.splitlines():
        m = re.match(r"\s*([A-Za-z_]+)\s*=", line)
        if m and m.group(1) in over:
            continue
        out.append(line)
        if not placed and line.strip() == "[global]":
            out += ["%s=%s" % kv for kv in over.items()]
            placed = True
    if not placed:
        raise ValueError("job file has no [global] section")
    return "\n".join(out) + "\n"


def offsets_read(fio_ios: float, runtime: float, ramp: float) -> int:
    """How many offsets of the round's sequence a run went through: its
    measured I/Os, and those of its ramp (not in fio's counts; taken at a
    quarter above the measured rate, and a full queue in flight at its end)."""
    ramp_ios = 1.25 * fio_ios * ramp / runtime if runtime > 0 else 0.0
    return int(math.ceil(fio_ios + ramp_ios)) + WARMUP_DEPTH


def warmup_seconds(cap: float, need: int | None, rate: float | None) -> float:
    """How long a warm-up runs: long enough for WARMUP_MARGIN x the offsets
    the workload's runs went through in the earlier rounds, at the rate its
    last warm-up went; the length of a measured run (cap) when either is not
    known yet (round 1), and never longer."""
    if not need or not rate:
        return cap
    return min(cap, max(WARMUP_MIN_S, WARMUP_MARGIN * need / rate))
