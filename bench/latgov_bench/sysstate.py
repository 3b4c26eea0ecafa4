"""Reading the machine: cpuidle, /proc/stat, PM QoS files, processes, IRQs.

Every reader takes a SysRoot (default "/") so that tests point it at a small
tree; parsing is done by pure functions over text.
"""

from __future__ import annotations

import os
import struct
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

NO_CONSTRAINT = 2000000000  # what /dev/cpu_dma_latency reads with no request
CLK_TCK = os.sysconf("SC_CLK_TCK")
PF_KTHREAD = 0x00200000


@dataclass(frozen=True)
class SysRoot:
    root: Path = Path("/")

    def path(self, absolute: str) -> Path:
        return self.root / absolute.lstrip("/")

    def read(self, absolute: str, default: str | None = None) -> str | None:
        try:
            return self.path(absolute).read_text().strip()
        except OSError:
            return default

    @property
    def cpu_sys(self) -> Path:
        return self.path("/sys/devices/system/cpu")

    @property
    def dma_latency(self) -> Path:
        return self.path("/dev/cpu_dma_latency")


# --------------------------------------------------------------------------
# Pure parsers

TRACEFS = ("/sys/kernel/tracing", "/sys/kernel/debug/tracing")


def mount_tracefs() -> tuple[str, bool]:
    """The tracefs directory with events/ (latgovd's IO events need it), and
    whether it was mounted here: at TRACEFS[0], as systemd's
    sys-kernel-tracing.mount does at boot, when neither usual place has
    events/. Raises OSError when it cannot be mounted."""
    for d in TRACEFS:
        if os.path.isdir(os.path.join(d, "events")):
            return d, False
    r = subprocess.run(["mount", "-t", "tracefs", "nodev", TRACEFS[0]],
                       capture_output=True, text=True)
    if r.returncode != 0:
        raise OSError("tracefs is not mounted and mounting it at %s failed: %s"
                      % (TRACEFS[0], r.stderr.strip()))
    return TRACEFS[0], True


def parse_cpu_list(text: str) -> list[int]:
    """"0-2,5" or "0, 1" -> sorted CPU numbers. ValueError on bad text."""
    cpus: set[int] = set()
    for part in text.replace(" ", "").split(","):
        if not part:
            continue
        if "-" in part:
            lo, hi = part.split("-", 1)
            a, b = int(lo), int(hi)
            if b < a:
                raise ValueError("bad CPU range %r" % part)
            cpus.update(range(a, b + 1))
        else:
            cpus.add(int(part))
    return sorted(cpus)


def percpu_held(value: str) -> bool:
    """pm_qos_resume_latency_us: "0" = no constraint, "n/a" = 0 us, n = n us."""
    return value not in ("0", "?")


def parse_procstat(text: str, cpus: list[int]) -> dict[int, tuple[float, float, float]]:
    """{cpu: (idle_s, iowait_s, busy_s)} from the text of /proc/stat."""
    out = {}
    for line in text.splitlines():
        if not line.startswith("cpu") or line.startswith("cpu "):
            continue
        parts = line.split()
        cpu = int(parts[0][3:])
        if cpu not in cpus:
            continue
        vals = [int(v) for v in parts[1:]]
        # user nice system idle iowait irq softirq steal (guest* are already
        # included in user/nice)
        idle, iowait = vals[3], vals[4]
        busy = sum(vals[:8]) - idle - iowait
        out[cpu] = (idle / CLK_TCK, iowait / CLK_TCK, busy / CLK_TCK)
    return out


# --------------------------------------------------------------------------
# CPUs and idle states

@dataclass(frozen=True)
class IdleLayout:
    """Per CPU, the cpuidle states as (index, sanitized name); empty lists
    when there is no cpuidle driver."""
    states: dict[int, list[tuple[int, str]]]

    def names(self, cpu: int) -> list[str]:
        return [n for _, n in self.states.get(cpu, [])]

    @property
    def any(self) -> bool:
        return any(self.states.values())


@dataclass(frozen=True)
class HostInfo:
    cpus: list[int]
    layout: IdleLayout
    driver: str
    governor: str
    node: str = ""
    kernel: str = ""

    @property
    def idle_states(self) -> str:
        names = self.layout.names(self.cpus[0]) if self.cpus else []
        return ";".join(names) if names else "none"

    @property
    def has_poll(self) -> bool:
        return any(n.upper() == "POLL" for n in
                   (self.layout.names(self.cpus[0]) if self.cpus else []))

    @property
    def qos_can_act(self) -> bool:
        """PM QoS can exclude idle states only where a cpuidle driver runs."""
        return self.driver != "none"


def online_cpus(root: SysRoot) -> list[int]:
    return parse_cpu_list(root.read("/sys/devices/system/cpu/online", "0") or "0")


def cpuidle_layout(root: SysRoot, cpus: list[int]) -> IdleLayout:
    layout = {}
    for cpu in cpus:
        base = root.cpu_sys / ("cpu%d" % cpu) / "cpuidle"
        states = []
        if base.is_dir():
            for entry in sorted(os.listdir(base)):
                if entry.startswith("state") and entry[5:].isdigit():
                    try:
                        name = (base / entry / "name").read_text().strip()
                    except OSError:
                        name = entry
                    clean = "".join(c if c.isalnum() else "_" for c in name)
                    states.append((int(entry[5:]), clean))
        states.sort()
        layout[cpu] = states
    return IdleLayout(layout)


def read_host(root: SysRoot) -> HostInfo:
    cpus = online_cpus(root)
    cpuidle = "/sys/devices/system/cpu/cpuidle/"
    return HostInfo(
        cpus=cpus, layout=cpuidle_layout(root, cpus),
        driver=root.read(cpuidle + "current_driver", "none") or "none",
        governor=root.read(cpuidle + "current_governor",
                           root.read(cpuidle + "current_governor_ro", "?")) or "?",
        node=os.uname().nodename, kernel=os.uname().release)


def read_cpuidle(root: SysRoot, layout: IdleLayout) -> dict[tuple[int, str, str], int]:
    out = {}
    for cpu, states in layout.states.items():
        for idx, name in states:
            base = "/sys/devices/system/cpu/cpu%d/cpuidle/state%d/" % (cpu, idx)
            out[(cpu, name, "time")] = int(root.read(base + "time", "0") or 0)
            out[(cpu, name, "usage")] = int(root.read(base + "usage", "0") or 0)
    return out


def read_procstat(root: SysRoot, cpus: list[int]) -> dict[int, tuple[float, float, float]]:
    return parse_procstat(root.read("/proc/stat", "") or "", cpus)


def disk_ios(root: SysRoot, disk: str | None) -> int | None:
    text = root.read("/sys/block/%s/stat" % disk) if disk else None
    if not text:
        return None
    f = text.split()
    return int(f[0]) + int(f[4])


# --------------------------------------------------------------------------
# PM QoS

def percpu_qos_path(cpu: int) -> str:
    return "/sys/devices/system/cpu/cpu%d/power/pm_qos_resume_latency_us" % cpu


def read_percpu_qos(root: SysRoot, cpus: list[int]) -> dict[int, str]:
    return {cpu: root.read(percpu_qos_path(cpu), "?") or "?" for cpu in cpus}


def read_global_qos(root: SysRoot) -> int:
    with open(root.dma_latency, "rb") as f:
        return struct.unpack("<i", f.read(4))[0]


def constraints_held(root: SysRoot, cpus: list[int]) -> list[str]:
    """The constraints held now, one text each: a per-CPU value other than
    "0" (an unreadable one cannot be told, and is left out), and
    /dev/cpu_dma_latency below its default."""
    held = ["cpu%d pm_qos_resume_latency_us is %s" % (c, v)
            for c, v in read_percpu_qos(root, cpus).items() if percpu_held(v)]
    if root.dma_latency.exists():
        g = read_global_qos(root)
        if g < NO_CONSTRAINT:
            held.append("/dev/cpu_dma_latency is held at %d us" % g)
    return held


# --------------------------------------------------------------------------
# Processes

@dataclass(frozen=True)
class ProcCpu:
    cpu_s: float     # utime + stime, 1/CLK_TCK precision
    # sum of the threads' schedstat run time, ns precision; None where no
    # thread's schedstat could be read (a kernel without CONFIG_SCHED_INFO)
    sched_s: float | None
    vol_ctxsw: int
    nonvol_ctxsw: int


def proc_cpu(root: SysRoot, pid: int) -> ProcCpu | None:
    text = root.read("/proc/%d/stat" % pid)
    if not text:
        return None
    try:
        rest = text.rsplit(")", 1)[1].split()
        cpu_s = (int(rest[11]) + int(rest[12])) / CLK_TCK
    except (IndexError, ValueError):
        return None
    sched: float | None = None
    vol = nonvol = 0
    try:
        tids = os.listdir(root.path("/proc/%d/task" % pid))
    except OSError:
        tids = []
    for tid in tids:
        base = "/proc/%d/task/%s/" % (pid, tid)
        st = root.read(base + "schedstat")
        if st:
            sched = (sched or 0.0) + int(st.split()[0]) / 1e9
        for line in (root.read(base + "status", "") or "").splitlines():
            if line.startswith("voluntary_ctxt_switches:"):
                vol += int(line.split()[1])
            elif line.startswith("nonvoluntary_ctxt_switches:"):
                nonvol += int(line.split()[1])
    return ProcCpu(cpu_s, sched, vol, nonvol)


@dataclass(frozen=True)
class ProcEntry:
    comm: str
    cpu_s: float
    ppid: int


def process_table(root: SysRoot) -> dict[int, ProcEntry]:
    """User-space processes with their CPU time so far."""
    out = {}
    for entry in os.listdir(root.path("/proc")):
        if not entry.isdigit():
            continue
        text = root.read("/proc/%s/stat" % entry)
        if not text or ")" not in text:
            continue
        head, rest = text.rsplit(")", 1)
        comm = head.split("(", 1)[1]
        f = rest.split()
        try:
            ppid, flags = int(f[1]), int(f[6])
            cpu = (int(f[11]) + int(f[12])) / CLK_TCK
        except (IndexError, ValueError):
            continue
        if flags & PF_KTHREAD or ppid == 2 or entry == "2":
            continue
        out[int(entry)] = ProcEntry(comm, cpu, ppid)
    return out


def others_cpu(a: dict[int, ProcEntry], b: dict[int, ProcEntry],
               own: set[int]) -> tuple[float, str]:
    """CPU seconds used between two tables by processes not ours, and the
    top three by name."""
    per: dict[str, float] = {}
    for pid, e in b.items():
        if pid in own or e.ppid in own:
            continue
        prev = a.get(pid)
        d = e.cpu_s - prev.cpu_s if prev and prev.comm == e.comm else e.cpu_s
        if d > 0:
            per[e.comm] = per.get(e.comm, 0.0) + d
    total = sum(per.values())
    top = sorted(per.items(), key=lambda kv: -kv[1])[:3]
    return total, ";".join("%s:%.2f" % kv for kv in top if kv[1] >= 0.01)


def foreign_processes(root: SysRoot, own: set[int]) -> str:
    """Other fio / latgovd processes running now (they would skew a run)."""
    counts: dict[str, int] = {}
    for entry in os.listdir(root.path("/proc")):
        if not entry.isdigit() or int(entry) in own:
            continue
        comm = root.read("/proc/%s/comm" % entry)
        if comm not in ("fio", "latgovd"):
            continue
        st = root.read("/proc/%s/stat" % entry)
        try:
            ppid = int(st.rsplit(")", 1)[1].split()[1]) if st else None
        except (IndexError, ValueError):
            ppid = None
        if ppid in own:  # fio forks its job workers
            continue
        counts[comm] = counts.get(comm, 0) + 1
    return ";".join("%s:%d" % kv for kv in sorted(counts.items()))


def writes_pm_qos(comm: str, args: list[str]) -> bool:
    """A latgov process that writes this machine's PM QoS files: latgovd
    unless it only observes or checks, and `latgov calibrate`, which steps
    the limits; neither when it reads a captured tree (--sysroot other
    than /)."""
    for i, a in enumerate(args):
        root = (args[i + 1] if a == "--sysroot" and i + 1 < len(args)
                else a[len("--sysroot="):] if a.startswith("--sysroot=") else None)
        if root is not None and os.path.realpath(root) != "/":
            return False
    if comm == "latgovd":
        return not {"--dry-run", "--check-config", "--help", "-h"} & set(args)
    return comm == "latgov" and "calibrate" in args


def pm_qos_writers(root: SysRoot, own: set[int]) -> list[str]:
    """Other latgovd / latgov processes running now that write PM QoS
    files, as "latgovd (pid N: its command line)"."""
    found = []
    for entry in sorted(os.listdir(root.path("/proc")), key=lambda e: (len(e), e)):
        if not entry.isdigit() or int(entry) in own:
            continue
        comm = root.read("/proc/%s/comm" % entry)
        if comm not in ("latgovd", "latgov"):
            continue
        try:
            raw = root.path("/proc/%s/cmdline" % entry).read_bytes()
        except OSError:
            continue  # gone meanwhile
        args = [a.decode(errors="replace") for a in raw.split(b"\0") if a]
        if writes_pm_qos(comm, args[1:]):
            found.append("%s (pid %s: %s)" % (comm, entry, " ".join(args)))
    return found


# --------------------------------------------------------------------------
# Queues, their IRQs and the CPUs that complete them

@dataclass(frozen=True)
class HardwareQueue:
    index: int
    submit_cpus: list[int]            # /sys/block/<disk>/mq/<n>/cpu_list
    irq: int | None = None
    irq_name: str = ""
    completion_cpus: list[int] = field(default_factory=list)


@dataclass(frozen=True)
class WaiterPlacement:
    """Where to pin a task so that it sleeps on a CPU that does not complete
    its own IO: the completion interrupt then wakes it across CPUs."""
    cpu: int
    queue: HardwareQueue


def queue_irq_name(device_name: str, hctx: int) -> str | None:
    """IRQ name of hardware queue `hctx` of a disk whose `device` link ends in
    device_name: virtio-blk names them virtio<N>-req.<q>; NVMe nvme<C>q<qid>
    with qid = hctx + 1 (qid 0 is the admin queue)."""
    if device_name.startswith("virtio") and device_name[6:].isdigit():
        return "%s-req.%d" % (device_name, hctx)
    if device_name.startswith("nvme") and device_name[4:].isdigit():
        return "%sq%d" % (device_name, hctx + 1)
    return None


def irq_names(root: SysRoot) -> dict[str, int]:
    """{action name: irq} from /sys/kernel/irq/<n>/actions."""
    out = {}
    base = root.path("/sys/kernel/irq")
    try:
        entries = os.listdir(base)
    except OSError:
        return out
    for entry in entries:
        if not entry.isdigit():
            continue
        for name in (root.read("/sys/kernel/irq/%s/actions" % entry, "") or "").split(","):
            if name:
                out[name.strip()] = int(entry)
    return out


def disk_queues(root: SysRoot, disk: str) -> list[HardwareQueue]:
    device = os.path.basename(os.path.realpath(root.path("/sys/block/%s/device" % disk)))
    names = irq_names(root)
    mq = root.path("/sys/block/%s/mq" % disk)
    try:
        entries = sorted((e for e in os.listdir(mq) if e.isdigit()), key=int)
    except OSError:
        return []
    queues = []
    for e in entries:
        hctx = int(e)
        submit = parse_cpu_list(root.read("/sys/block/%s/mq/%d/cpu_list" % (disk, hctx), "") or "")
        name = queue_irq_name(device, hctx)
        irq = names.get(name) if name else None
        completion: list[int] = []
        if irq is not None:
            completion = parse_cpu_list(
                root.read("/proc/irq/%d/effective_affinity_list" % irq, "") or "")
        queues.append(HardwareQueue(hctx, submit, irq, name or "", completion))
    return queues


def waits_elsewhere(cpu: int, q: HardwareQueue) -> bool:
    """Whether a task on `cpu` submits to `q` and its IRQ completes on
    another CPU: the waiter's case."""
    return cpu in q.submit_cpus and bool(q.completion_cpus) and cpu not in q.completion_cpus


def choose_waiter_cpu(cpus: list[int], queues: list[HardwareQueue]) -> WaiterPlacement | None:
    """The lowest online CPU whose queue's IRQ completes on another CPU."""
    for cpu in cpus:
        for q in queues:
            if waits_elsewhere(cpu, q):
                return WaiterPlacement(cpu, q)
    return None


def refresh_waiter(root: SysRoot, disk: str | None, cpus: list[int],
                   previous: WaiterPlacement | None) -> WaiterPlacement | None:
    """The waiter's place for the next run, from the IRQs' effective
    affinity as it is now (irqbalance, or a CPU going offline, moves it):
    the same CPU while its queue still completes elsewhere, else the one
    choose_waiter_cpu takes."""
    queues = disk_queues(root, disk) if disk else []
    if previous is not None:
        for q in queues:
            if previous.cpu in cpus and waits_elsewhere(previous.cpu, q):
                return WaiterPlacement(previous.cpu, q)
    return choose_waiter_cpu(cpus, queues)
