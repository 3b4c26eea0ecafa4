"""Where a single read's time goes, from the kernel's own trace: issue
(block_rq_issue) to the completion interrupt (irq_handler_entry of the
queue's IRQ), to the request's completion (block_rq_complete) and to the
reader's wake-up (sched_wakeup of fio). bench/trace-reads records the trace
under each mode; this module reads it."""

from __future__ import annotations

import re
import statistics
from dataclasses import dataclass, field

# "<comm>-<pid> [<cpu>] <flags> <seconds>: <event>: <fields>"
LINE = re.compile(r"\s*(?P<comm>.+?)-(?P<pid>\d+)\s+\[(?P<cpu>\d+)\]\s+\S+\s+"
                  r"(?P<ts>\d+\.\d+): (?P<event>\w+): (?P<rest>.*)")
# block_rq_issue / block_rq_complete: "<maj>,<min> <rwbs> ... <sector> + <n> ..."
SECTOR = re.compile(r"\)\s+(\d+)\s+\+\s+\d+")

# How many events after an issue its completion and wake-up may lie.
LOOKAHEAD = 2000


@dataclass
class Event:
    ts: float
    comm: str
    cpu: int
    name: str
    rest: str


@dataclass
class ReadTimes:
    """Per read, microseconds from its issue."""
    irq: list[float] = field(default_factory=list)
    complete: list[float] = field(default_factory=list)
    wake: list[float] = field(default_factory=list)

    def woken_after_complete(self) -> list[float]:
        return [w - c for w, c in zip(self.wake, self.complete)]


def parse(text: str) -> list[Event]:
    events = []
    for line in text.splitlines():
        m = LINE.match(line)
        if m:
            events.append(Event(float(m["ts"]), m["comm"], int(m["cpu"]), m["event"],
                                m["rest"]))
    return events


def read_times(events: list[Event], reader: str, irq_name: re.Pattern) -> ReadTimes:
    """The times of each request `reader` issued whose interrupt, completion
    and reader wake-up all lie within LOOKAHEAD events of it."""
    out = ReadTimes()
    for i, e in enumerate(events):
        if e.name != "block_rq_issue" or e.comm != reader:
            continue
        m = SECTOR.search(e.rest)
        if not m:
            continue
        sector = m.group(1)
        t_irq = t_done = t_wake = None
        for f in events[i + 1:i + LOOKAHEAD]:
            if t_irq is None and f.name == "irq_handler_entry" and irq_name.search(f.rest):
                t_irq = f.ts
            elif t_done is None and f.name == "block_rq_complete":
                m2 = SECTOR.search(f.rest)
                if m2 and m2.group(1) == sector:
                    t_done = f.ts
            elif (t_done is not None and f.name == "sched_wakeup"
                  and ("comm=%s " % reader) in f.rest + " "):
                t_wake = f.ts
                break
        if t_irq is None or t_done is None or t_wake is None:
            continue
        out.irq.append((t_irq - e.ts) * 1e6)
        out.complete.append((t_done - e.ts) * 1e6)
        out.wake.append((t_wake - e.ts) * 1e6)
    return out


def quantile(values: list[float], q: float) -> float:
    s = sorted(values)
    return s[min(len(s) - 1, int(q * len(s)))]


def summary(times: ReadTimes) -> dict:
    """p50 and p90 of each part, in microseconds, and the number of reads."""
    parts = {"issue_to_irq": times.irq, "issue_to_complete": times.complete,
             "issue_to_wake": times.wake, "complete_to_wake": times.woken_after_complete()}
    out: dict = {"reads": len(times.wake)}
    for name, values in parts.items():
        if values:
            out[name + "_p50"] = statistics.median(values)
            out[name + "_p90"] = quantile(values, 0.9)
    return out
