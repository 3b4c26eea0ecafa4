"""fio: the command line of one run and the numbers of its JSON output."""

from __future__ import annotations

import json
from pathlib import Path

PERCENTILES = [("50", "50.000000"), ("90", "90.000000"),
               ("99", "99.000000"), ("99_9", "99.900000")]
PERCENTILE_LIST = "50:90:99:99.9"
LAT_FIELDS = (["iops", "ios", "clat_mean_us"]
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
    return cols + ["fio_ios"]


def _latency(stats: dict, prefix: str, key: str) -> dict:
    out = {}
    pct = stats.get("percentile", {})
    out[prefix + "mean_us"] = round(stats.get("mean", 0.0) / 1e3, 3)
    for p, k in PERCENTILES:
        v = pct.get(k)
        out["%sp%s_us" % (prefix, p)] = "" if v is None else round(v / 1e3, 3)
    out[prefix + "max_us"] = round(stats.get("max", 0) / 1e3, 3)
    return out


def parse_fio_json(text: str, source: str = "fio output") -> dict:
    """Row fields of the first job: per direction IOPS and completion
    latency, and the fsync/fdatasync latency when the job synced."""
    start = text.find("{")
    if start < 0:
        raise FioOutputError("no JSON in %s" % source)
    try:
        job = json.loads(text[start:])["jobs"][0]
    except (ValueError, KeyError, IndexError) as e:
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
        out.update(_latency(s.get("clat_ns", {}), "%s_clat_" % d, "clat"))
    sync = job.get("sync", {})
    # fio 3.33 leaves sync.total_ios at 0; the latency's sample count is right
    sync_ios = int(sync.get("total_ios", 0)) or int(sync.get("lat_ns", {}).get("N", 0))
    if sync_ios:
        out["sync_ios"] = sync_ios
        out.update(_latency(sync.get("lat_ns", {}), "sync_lat_", "lat"))
    out["fio_ios"] = total
    return out


def parse_fio_file(path: Path) -> dict:
    return parse_fio_json(path.read_text(), str(path))


SEED_BASE = 1000000


def round_seed(rnd: int) -> int:
    """fio's random seed in round `rnd`. The same for every mode within a
    round, so that the modes compared there read the same offsets; another
    in each round, so that the rounds sample other offsets (fio's default,
    randrepeat=1, gives every run the same ones)."""
    return SEED_BASE + rnd


def fio_command(fio: str, job: Path, json_path: Path, seed: int | None = None) -> list[str]:
    # A job option before the job file sets fio's defaults for its jobs:
    # the job files set no randseed of their own.
    cmd = [fio, "--output-format=json", "--output=%s" % json_path,
           "--percentile_list=" + PERCENTILE_LIST]
    if seed is not None:
        cmd.append("--randseed=%d" % seed)
    return cmd + [str(job)]
