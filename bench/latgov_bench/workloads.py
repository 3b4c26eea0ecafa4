"""The workloads: fio job files in bench/jobs and what the harness does
around them."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Workload:
    name: str
    job: str               # file name in bench/jobs
    title: str
    writes: bool = False   # refused on a block device in use
    idle: bool = False     # a short burst, then a measured window with no IO
    pin_waiter: bool = False  # pinned to a CPU that does not complete its IO
    pin_optional: bool = False  # unpinned where every CPU completes its own IO
    reads: bool = True     # its job reads (rw= in the job file)
    syncs: bool = False    # its job calls fdatasync (fdatasync= in the job file)
    # Run after fio's ramp_time (--ramp). Not a job paced by thinktime
    # (NO_RAMP_WHY).
    ramp: bool = True
    # A job file (in bench/jobs) that fio runs beside the job in measured
    # runs, as a reporting group of its own: IO nobody waits for, which the
    # statistics leave out (results.csv counts it in background_ios). Not in
    # the warm-up.
    background: str = ""

    @property
    def writes_target(self) -> bool:
        """It writes to the target: its job, or the IO beside it."""
        return self.writes or bool(self.background)

    @property
    def without_ramp(self) -> bool:
        """Run with no ramp where --ramp asks for one (the idle workload's
        fio is its burst alone: never ramped, and not counted here)."""
        return not self.ramp and not self.idle

    @property
    def latency(self) -> bool:
        """Its request latency is what the latency targets compare."""
        return not self.idle

    def produces(self, metric: str) -> bool:
        """Whether the job can give `metric` a value at all: a read-only
        job has no write latency, a job that never syncs no fdatasync
        latency. A metric it produces but did not measure is a failure,
        not an absence."""
        for prefix, has in (("read_", self.reads), ("write_", self.writes),
                            ("sync_", self.syncs)):
            if metric.startswith(prefix):
                return has
        return True


# Why a workload paced by thinktime runs with no ramp (fio pull request
# 1549, merged after 3.33).
NO_RAMP_WHY = ("paced by thinktime, and fio 3.33 ends a ramp with as many IOs back to back "
               "as the ramp had (fio pull request 1549)")

WORKLOADS = [
    Workload("qd1-randread-4k", "qd1-randread-4k.fio",
             "1: QD1 4k randread (seed 004)"),
    Workload("qd1-randrw-128k-thinktime", "qd1-randrw-128k-thinktime.fio",
             "2: QD1 128k randrw, thinktime 1 ms (seed 001)", writes=True, ramp=False),
    Workload("mixed-bssplit-randrw", "mixed-bssplit-randrw.fio",
             "3: bssplit randrw at depth 16 (seed 003, scaled)", writes=True),
    Workload("idle", "idle-burst.fio", "4: idle (short burst, then no IO)",
             idle=True),
    Workload("waiter-fdatasync-4k", "waiter-fdatasync-4k.fio",
             "5: waiter: QD1 4k write + fdatasync, pinned off the completion CPU",
             writes=True, pin_waiter=True, reads=False, syncs=True),
    Workload("onset-isolated-reads", "onset-isolated-reads.fio",
             "6: onset: single 4k reads 20 ms apart", pin_waiter=True, pin_optional=True),
    Workload("reads-beside-writeback", "onset-isolated-reads.fio",
             "7: workload 6's reads beside 4k writes written back, never waited for",
             pin_waiter=True, pin_optional=True, background="background-writeback.fio"),
]
WORKLOAD_BY_NAME = {w.name: w for w in WORKLOADS}
