import shutil
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(BENCH))

from latgov_bench.meta import RunMeta  # noqa: E402
from latgov_bench.results import read_rows  # noqa: E402

RUNS = {
    # 5 rounds, cpuidle driver none (PM QoS cannot act), four modes
    "vda": BENCH / "results" / "2026-11-30-vda",
    # 2 rounds, cpuidle driver haltpoll (PM QoS acts), three modes
    "haltpoll": BENCH / "tests" / "fixtures" / "haltpoll-2026-11-30",
}


class Run:
    def __init__(self, path: Path):
        self.path = path
        self.rows = read_rows(path / "results.csv")
        self.meta = RunMeta.load(path / "run-meta.json")
        self.old_summary = (path / "summary.md").read_text()


@pytest.fixture(params=sorted(RUNS))
def run(request):
    return Run(RUNS[request.param])


@pytest.fixture
def vda():
    return Run(RUNS["vda"])


@pytest.fixture
def haltpoll():
    return Run(RUNS["haltpoll"])


@pytest.fixture
def run_copy(tmp_path, run):
    """A copy of a run's results.csv and run-meta.json to rebuild outputs in."""
    for name in ("results.csv", "run-meta.json"):
        shutil.copy(run.path / name, tmp_path / name)
    return tmp_path
