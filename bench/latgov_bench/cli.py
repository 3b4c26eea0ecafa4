"""bench/ab's command line: parse, check the machine, run the rounds, write
the outputs. The `main` of bench/ab."""

from __future__ import annotations

import argparse
import datetime
import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

from . import sysstate as ss
from .aggregate import aggregate, num, percpu_not_held, static_cpus, static_not_held
from .fio import SEED_BASE, WARMUP_DEPTH, WARMUP_MARGIN
from .meta import DaemonInfo, RunMeta, Settings
from .report import summary_text
from .results import PERCPU_MODES, WARMUP, ResultsWriter, columns, is_warmup, read_rows
from .runner import (ALL_MODES, BENCH, DAEMON_MODES, KNOWN_MODES, EvidenceAside, Interrupted,
                     MachineConstrained, Runner, Session, Tools, calibrate, calibration_aside,
                     config_description, STOP_SIGNALS, evidence_file, log, no_calibration,
                     put_calibration_back, recover_percpu, repo_relative, signals_held,
                     status_interval, take_bench_lock, unit_nice)
from .sysstate import SysRoot
from .target import DEFAULT_TARGET, HarnessError, create_file, resolve_target
from .targets import DEFAULT_TARGETS, TargetsError, evaluate, load_targets
from .workloads import WORKLOAD_BY_NAME, WORKLOADS

REPO = BENCH.parent
PLOT_SCRIPT = BENCH / "ab_plot.py"
SYSTEM_PYTHON = "/usr/bin/python3"

DESCRIPTION = """\
Modes (each round runs every mode once per workload, after one unmeasured
warm-up of that workload; the modes' order rotated and reversed by turns):
  off            no constraint, latgovd not running
  static         /dev/cpu_dma_latency held at 0 for the whole run
  latgov         latgovd on its default policy (or --latgov-config)
  latgov-dryrun  latgovd --dry-run: observes and decides, writes nothing
Only when asked for, and only with workloads whose job is pinned
(%s):
static on some CPUs, each held at 0 us in its own pm_qos_resume_latency_us
for the whole run:
  static-waiter      the CPU the job is pinned to, where it waits
  static-completion  the CPUs that complete its queue's IO

Workloads are the fio job files in bench/jobs/ (target via LATGOV_AB_TARGET):
%s

Per run: fio IOPS and completion latency (and fdatasync latency), idle-state
and POLL time per CPU (cpuidle sysfs, or /proc/stat idle time when there is
no cpuidle driver), latgovd CPU time, context switches and onset delay (its
status gives quantiles per run: the report shows the median of per-run p99),
and the constraints held: fraction of samples (100 ms apart on average) and
CPU-seconds per CPU,
read from /dev/cpu_dma_latency and the per-CPU pm_qos_resume_latency_us
files directly. fio runs with --randseed=%d+<round>: the same offsets for
every mode within a round, others in each round. Before a round's runs of a
workload, a warm-up (mode "warm-up" in results.csv, in no statistic) goes
through those offsets once, the same job at depth %d without think time or
rate limit: the round's first mode reads no offsets cold that the later
ones find cached. A warm-up lasts as long as a run in round 1; later, as long as %gx
the most offsets a run of the workload went through take at the last
warm-up's rate, a run's length at most. The waiter workload and the
isolated reads are pinned to a CPU that does not run the completion IRQ of
the disk's queue (/proc/irq/<n>/effective_affinity_list, read again before
each run); where every CPU completes its own queue's IO the isolated reads
run unpinned, and the report says so.

latgovd's evidence file (evidence_file in its configuration and drop-ins) is
moved aside at the start and put back at exit: the first latgovd of the run
learns from nothing, and the later rounds reuse what the earlier ones learnt.
latgovd's calibration file (calibration_file) is moved aside the same way
unless --calibrate is given: latgovd starts with no calibration. Where the
configuration sets calibrate_on_start, the run's first latgovd measures one
and the later ones read it; that file is removed at exit (the machine's, if
any, put back in its place).

A static run during which /dev/cpu_dma_latency was not seen at 0 in at least
99%% of the samples is kept out of the medians, and the report says so; as is
a static-waiter or static-completion run during which a CPU it held was not
seen held in as many.

Output (--out, an empty or new directory; default bench/results/<date>-<disk>,
or the next free <date>-<disk>-N): results.csv, summary.md
(with the targets of bench/latgov_bench/targets.toml met or missed),
aggregate.json, PNG plots (bench/ab_plot.py under /usr/bin/python3 with
Debian's python3-matplotlib), raw/ (fio JSON and daemon logs).

Safety: refuses to write to a block device that holds a mounted file system,
swap, or is used by another device (holders); files are fine (created with
real data when missing). Refuses to start while another latgovd (or `latgov
calibrate`) writes PM QoS files, a CPU's pm_qos_resume_latency_us is not "0"
or /dev/cpu_dma_latency is held, and to write into a non-empty --out;
--force runs anyway (the report names what it found). Runs during which
someone else's constraint or another fio/latgovd showed are kept out of the
medians. After each latgovd it runs `latgovd --restore` and checks every CPU
is back where the run found it; if one is not, the bench stops. On exit or
Ctrl-C it stops fio and latgovd, closes /dev/cpu_dma_latency and puts back
the per-CPU values it held; what it found on them is journaled in
/run/latgov-bench-ab.percpu while it holds them, and the next bench/ab puts
back what one that was killed left.
""" % (", ".join(w.name for w in WORKLOADS if w.pin_waiter),
       "\n".join("  %-27s %s" % (w.name, w.title) for w in WORKLOADS), SEED_BASE,
       WARMUP_DEPTH, WARMUP_MARGIN)


def parse_size(text: str) -> int:
    s = text.strip().upper().rstrip("B").rstrip("I")
    mult = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}
    return int(float(s[:-1]) * mult[s[-1]]) if s[-1] in mult else int(s)


def parse_args(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        prog="bench/ab",
        description="Interleaved fio A/B of CPU latency constraint modes (off, static "
        "/dev/cpu_dma_latency=0, latgov, latgov-dryrun; static-waiter, static-completion).",
        formatter_class=argparse.RawDescriptionHelpFormatter, epilog=DESCRIPTION)
    p.add_argument("--device", default=DEFAULT_TARGET,
                   help="vda, /dev/X or a FILE (default %(default)s; a missing file is "
                   "created)")
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--modes", default=None,
                   help="comma list of %s (default off,static,latgov; --smoke: the first "
                   "four)" % ",".join(KNOWN_MODES))
    p.add_argument("--workloads", default=",".join(w.name for w in WORKLOADS),
                   help="comma list (default all: %(default)s)")
    p.add_argument("--latgov-config", default=None,
                   help="latgovd --config FILE (default: its own default)")
    p.add_argument("--out", default=None,
                   help="output dir (default bench/results/<date>-<disk>)")
    p.add_argument("--smoke", action="store_true",
                   help="a few seconds per mode, 1 round; check the outputs")
    p.add_argument("--latgovd", default=str(REPO / "build" / "daemon" / "latgovd"))
    p.add_argument("--latgov", default=str(REPO / "build" / "daemon" / "latgov"))
    p.add_argument("--fio", default="fio")
    p.add_argument("--targets", default=str(DEFAULT_TARGETS),
                   help="acceptance targets (default %(default)s)")
    p.add_argument("--resummarize", metavar="OUT",
                   help="only rebuild summary.md, aggregate.json and the plots of an "
                   "earlier run from its results.csv and run-meta.json")
    p.add_argument("--calibrate", action="store_true",
                   help="use the machine's calibration file, or run `latgov calibrate` "
                   "first when none exists (default: the file is moved aside for the run "
                   "and put back at exit; latgovd starts with no calibration, learning "
                   "what it needs, or measuring it where the configuration sets "
                   "calibrate_on_start)")
    p.add_argument("--keep-calibration", action="store_true",
                   help="with --calibrate: keep a calibration file that `latgov calibrate` "
                   "wrote for this run (default: removed at exit)")
    p.add_argument("--runtime", type=float, default=10,
                   help="measured seconds per run (default %(default)s)")
    p.add_argument("--ramp", type=float, default=1,
                   help="fio ramp_time seconds (default %(default)s); not for a workload "
                   "paced by thinktime (qd1-randrw-128k-thinktime), nor idle")
    p.add_argument("--burst-sec", type=float, default=1,
                   help="idle workload: IO burst seconds (default %(default)s)")
    p.add_argument("--idle-sec", type=float, default=10,
                   help="idle workload: seconds with no IO (default %(default)s)")
    p.add_argument("--size", default="1G",
                   help="size of a created target file (default %(default)s, --smoke 128M)")
    p.add_argument("--cooldown", type=float, default=0.5,
                   help="pause between runs, s (default %(default)s)")
    p.add_argument("--force", action="store_true",
                   help="start even when another latgovd or `latgov calibrate` writes PM QoS "
                   "files or a constraint is held (recorded in the report), and write into "
                   "a non-empty --out")
    a = p.parse_args(argv)
    if a.resummarize:
        return a
    if a.smoke:
        a.rounds = 1
        explicit = {x.split("=", 1)[0] for x in argv}
        if "--runtime" not in explicit:
            a.runtime = 2
        if "--ramp" not in explicit:
            a.ramp = 0
        if "--idle-sec" not in explicit:
            a.idle_sec = 2
        if "--size" not in explicit:
            a.size = "128M"
        if a.modes is None:
            a.modes = ",".join(ALL_MODES)
    if a.modes is None:
        a.modes = "off,static,latgov"
    a.mode_list = [m.strip() for m in a.modes.split(",") if m.strip()]
    for m in a.mode_list:
        if m not in KNOWN_MODES:
            p.error("unknown mode %r (known: %s)" % (m, ", ".join(KNOWN_MODES)))
    if len(set(a.mode_list)) != len(a.mode_list):
        p.error("a mode is listed twice")
    a.workload_list = [w.strip() for w in a.workloads.split(",") if w.strip()]
    for w in a.workload_list:
        if w not in WORKLOAD_BY_NAME:
            p.error("unknown workload %r (known: %s)" % (w, ", ".join(WORKLOAD_BY_NAME)))
    percpu = [m for m in a.mode_list if m in PERCPU_MODES]
    unpinned = [w for w in a.workload_list if not WORKLOAD_BY_NAME[w].pin_waiter]
    if percpu and unpinned:
        p.error("%s hold%s the CPUs of a pinned job; %s pin%s none: choose --workloads "
                "among %s" % (" and ".join(percpu), "" if len(percpu) > 1 else "s",
                              ", ".join(unpinned), "" if len(unpinned) > 1 else "s",
                              ", ".join(w.name for w in WORKLOADS if w.pin_waiter)))
    if a.rounds < 1:
        p.error("--rounds must be >= 1")
    try:
        a.size_bytes = parse_size(a.size)
    except (ValueError, IndexError):
        p.error("bad --size %r (e.g. 128M, 1G)" % a.size)
    return a


def output_dir(out: str | None, name: str, force: bool) -> Path:
    """Where the run writes. A given --out must be empty (stale raw/ files
    would mix with this run's) unless --force; the default takes the next
    free name, <date>-<disk>, <date>-<disk>-2, ..."""
    if out:
        path = Path(os.path.abspath(out))
        if path.is_dir() and any(path.iterdir()) and not force:
            raise HarnessError("%s is not empty: its files would mix with this run's. Choose "
                               "another --out, or pass --force to write into it" % path)
        return path
    date = datetime.date.today().isoformat()
    base = BENCH / "results" / ("%s-%s" % (date, name))
    path, n = base, 2
    while path.exists() and (not path.is_dir() or any(path.iterdir())):
        path = base.with_name("%s-%d" % (base.name, n))
        n += 1
    return Path(os.path.abspath(path))


def refusals(root: SysRoot, cpus: list[int]) -> list[str]:
    """What stops a run from starting: another latgov process writing PM
    QoS files, or a constraint already held."""
    return ss.pm_qos_writers(root, {os.getpid()}) + ss.constraints_held(root, cpus)


def check_plotting() -> None:
    try:
        p = subprocess.run([SYSTEM_PYTHON, "-c", "import matplotlib"],
                           capture_output=True, text=True, timeout=60)
    except OSError as e:
        raise HarnessError("cannot run %s for the plots: %s" % (SYSTEM_PYTHON, e)) from e
    if p.returncode != 0:
        raise HarnessError(
            "matplotlib cannot be imported by %s (needed for the plots): %s\nInstall "
            "Debian's package: apt-get install python3-matplotlib"
            % (SYSTEM_PYTHON, p.stderr.strip().splitlines()[-1] if p.stderr.strip() else "?"))


def describe_binary(path: str) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return "%s (built %s, sha256 %s)" % (
        os.path.basename(path),
        time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(os.stat(path).st_mtime)),
        h.hexdigest()[:12])


def expected_pngs(workloads: list[str]) -> list[str]:
    return ["latency-%s.png" % w for w in workloads] + ["idle-time.png", "held.png"]


def write_report(out: Path, rows: list[dict], meta: RunMeta, targets_path: Path) -> None:
    """summary.md, aggregate.json and the plots from rows and run metadata."""
    agg = aggregate(rows, meta.settings.workloads, meta.settings.modes, meta.host)
    checks = evaluate(load_targets(targets_path), agg, meta.host)
    host = meta.host
    with open(out / "aggregate.json", "w") as f:
        json.dump({
            "modes": agg.modes,
            "workloads": [{"name": w, "title": WORKLOAD_BY_NAME[w].title,
                           "idle": WORKLOAD_BY_NAME[w].idle} for w in agg.workloads],
            "cpus": host.cpus,
            "cpuidle_driver": host.driver,
            "idle_states": {str(c): host.layout.names(c) for c in host.cpus},
            "idle_sec": meta.settings.idle_sec,
            "aggregate": agg.to_json(),
            "targets": [{"id": c.target.id, "workload": c.workload, "metric": c.metric,
                         "verdict": c.verdict, "value": c.value} for c in checks],
            "kept_out": [{"round": r["round"], "workload": r["workload"], "mode": r["mode"],
                          "why": why} for r, why in agg.excluded],
        }, f, indent=1)
    (out / "summary.md").write_text(summary_text(rows, agg, meta, checks))
    p = subprocess.run([SYSTEM_PYTHON, str(PLOT_SCRIPT), str(out)],
                       capture_output=True, text=True)
    if p.returncode != 0:
        log("plotting failed: %s" % (p.stderr.strip() or p.stdout.strip()))
    pngs = [line.strip() for line in p.stdout.splitlines() if line.endswith(".png")]
    log("wrote results.csv, summary.md, %d plots in %s (%.1f min)"
        % (len(pngs), out, meta.elapsed / 60))


def check_outputs(out: Path, cols: list[str], expected_runs: int,
                  workloads: list[str]) -> list[str]:
    problems = []
    try:
        rows = read_rows(out / "results.csv")
        with open(out / "results.csv") as f:
            header = f.readline().rstrip("\n").split(",")
    except OSError as e:
        return ["results.csv unreadable: %s" % e]
    missing = [c for c in cols if c not in header]
    if missing:
        problems.append("results.csv lacks columns: %s" % ", ".join(missing))
    if len(rows) != expected_runs:
        problems.append("results.csv has %d runs, expected %d" % (len(rows), expected_runs))
    for i, r in enumerate(rows):
        if None in r or any(v is None for v in r.values()):
            problems.append("results.csv row %d does not match the header" % (i + 1))
    sp = out / "summary.md"
    if not sp.exists() or sp.stat().st_size == 0:
        problems.append("summary.md missing or empty")
    elif "## Targets: met or missed" not in sp.read_text():
        problems.append("summary.md has no targets table")
    for png in expected_pngs(workloads):
        pp = out / png
        if not pp.exists() or pp.stat().st_size == 0:
            problems.append("%s missing or empty" % png)
    return problems


def smoke_checks(rows: list[dict], host: ss.HostInfo) -> list[str]:
    """What --smoke requires of the rows beyond their columns: the new
    measurements hold values, and values that can be told from the mode."""
    problems = []
    for r in rows:
        if r["status"] != "ok":
            continue
        tag = "r%s %s %s" % (r["round"], r["workload"], r["mode"])
        if is_warmup(r):
            if not num(r.get("warmup_ios")):
                problems.append("%s: the warm-up went through no offsets" % tag)
            continue
        if r["mode"] == "static" and static_not_held(r):
            problems.append("%s: %s" % (tag, static_not_held(r)))
        held = [num(r.get("cpu%d_held_s" % c)) for c in host.cpus]
        total = num(r.get("held_cpu_s"))
        window = num(r.get("window_s")) or 0.0
        if total is None or any(h is None for h in held):
            problems.append("%s: no CPU-seconds held" % tag)
        elif r["mode"] == "static" and total < 0.8 * len(host.cpus) * window:
            problems.append("%s: static held only %.2f CPU-s of %.2f" % (
                tag, total, len(host.cpus) * window))
        if r["mode"] == "static" and host.has_poll:
            # /dev/cpu_dma_latency 0 leaves only POLL: any deeper idle state
            # time is a failure; no POLL time at all only when the CPUs idled
            # (on a saturated machine they may not idle at all)
            poll = num(r.get("poll_time_us")) or 0.0
            deeper = (num(r.get("idle_states_time_us")) or 0.0) - poll
            idle_s = (num(r.get("procstat_idle_s")) or 0.0) + \
                (num(r.get("procstat_iowait_s")) or 0.0)
            if deeper > 0.01 * len(host.cpus) * window * 1e6:
                problems.append("%s: static let CPUs spend %.0f us in states deeper than "
                                "POLL" % (tag, deeper))
            if idle_s >= 0.2 * window and poll == 0:
                problems.append("%s: static shows no POLL time in %.2f s of idle" % (
                    tag, idle_s))
        wl = WORKLOAD_BY_NAME[r["workload"]]
        for d in ("read", "write"):  # the latency the targets judge
            if num(r.get("%s_ios" % d)) and num(r.get("%s_lat_p99_us" % d)) is None:
                problems.append("%s: fio gave no %s lat p99 (the whole request's "
                                "percentiles)" % (tag, d))
        if wl.pin_waiter and (r.get("waiter_cpu") not in ("", None) or not wl.pin_optional):
            cpu = num(r.get("waiter_cpu"))
            done = [int(c) for c in (r.get("completion_cpus") or "").split(";") if c]
            if cpu is None or not done or int(cpu) in done:
                problems.append("%s: waiter CPU %s vs completion CPUs %s" % (
                    tag, r.get("waiter_cpu"), done))
        if wl.pin_waiter:  # the workloads added with the per-run checks
            missing = [d for d in ("read", "write", "sync")
                       if wl.produces(d + "_ios") and not num(r.get(d + "_ios"))]
            if missing:
                problems.append("%s: no %s in fio's output" % (tag, " or ".join(missing)))
        if r["mode"] in PERCPU_MODES and percpu_not_held(r):
            problems.append("%s: %s" % (tag, percpu_not_held(r)))
        elif r["mode"] in PERCPU_MODES and host.has_poll:
            # as for static, on the CPUs it held
            ours = static_cpus(r)
            deeper = sum(num(r.get("cpu%d_%s_time_us" % (c, n))) or 0.0
                         for c in ours for n in host.layout.names(c) if n.upper() != "POLL")
            if deeper > 0.01 * len(ours) * window * 1e6:
                problems.append("%s: %s let CPU %s spend %.0f us in states deeper than POLL"
                                % (tag, r["mode"], ",".join(map(str, ours)), deeper))
        if wl.background and not num(r.get("background_ios")):
            problems.append("%s: no IO beside the job in fio's output (%s)" % (
                tag, wl.background))
        if r["mode"] == "latgov" and wl.job == "onset-isolated-reads.fio" and \
                num(r.get("onset_count")) is None:
            problems.append("%s: latgovd's status gave no onset_delay" % tag)
    return problems


def resummarize(out: Path, targets_path: Path) -> int:
    meta = RunMeta.load(out / "run-meta.json")
    write_report(out, read_rows(out / "results.csv"), meta, targets_path)
    return 0


def move_aside(session: Session, config: str | None, use_calibration: bool) -> None:
    """latgovd's evidence file, and its calibration file unless the user
    asked to use one (--calibrate), moved aside before anything runs
    latgovd; the session's cleanup puts them back whatever happens."""
    with signals_held():  # moved and noted, or neither
        session.evidence = EvidenceAside.move_aside(evidence_file(config))
    if not use_calibration:
        with signals_held():
            session.calibration = calibration_aside(config)
    for aside in (session.evidence, session.calibration):
        if aside is not None and aside.existed:
            log("moved %s %s aside to %s (put back at exit)"
                % (aside.what, aside.path, aside.saved))


def place_waiter(root: SysRoot, host: ss.HostInfo,
                 disk: str | None) -> tuple[ss.WaiterPlacement | None, str]:
    """The CPU for the waiter workload, and a line for the report."""
    queues = ss.disk_queues(root, disk) if disk else []
    waiter = ss.choose_waiter_cpu(host.cpus, queues)
    if waiter is None:
        return None, ("no CPU found whose queue completes elsewhere (disk %s, queues: %s)"
                      % (disk, "; ".join("hctx%d cpus %s irq %s -> cpus %s" % (
                          q.index, q.submit_cpus, q.irq_name or "?", q.completion_cpus)
                          for q in queues) or "none found"))
    q = waiter.queue
    return waiter, ("pinned to CPU %d; its queue hctx%d completes on CPU %s (IRQ %d %s, "
                    "/proc/irq/%d/effective_affinity_list)"
                    % (waiter.cpu, q.index, ",".join(map(str, q.completion_cpus)), q.irq,
                       q.irq_name, q.irq))


def ensure_tracefs() -> None:
    """latgovd's IO events need tracefs: a machine booted without it would
    measure a daemon that samples while idle instead."""
    try:
        d, mounted = ss.mount_tracefs()
    except OSError as e:
        raise HarnessError(str(e)) from e
    if mounted:
        log("mounted tracefs at %s (latgovd's IO events need it)" % d)


def run(args: argparse.Namespace, session: Session, root: SysRoot) -> int:
    if os.geteuid() != 0:
        raise HarnessError("run as root: the harness writes /dev/cpu_dma_latency and "
                           "latgovd writes PM QoS files")
    # One bench/ab at a time, and what one that was killed left held put
    # back first, before anything else can fail.
    session.lock_fd = take_bench_lock(root)
    for line in recover_percpu(root):
        log(line)
        session.notes.append(line)
    check_plotting()
    if not shutil.which(args.fio):
        raise HarnessError("fio not found (%s)" % args.fio)
    targets_path = Path(args.targets)
    load_targets(targets_path)  # a bad targets file fails before the runs
    wls = [WORKLOAD_BY_NAME[w] for w in args.workload_list]
    daemon_modes = [m for m in args.mode_list if m in DAEMON_MODES]
    if daemon_modes:
        for b in (args.latgovd, args.latgov):
            if not os.access(b, os.X_OK):
                raise HarnessError("%s is not an executable (build with cmake --build "
                                   "build, or pass --latgovd/--latgov)" % b)
        if args.latgov_config and not os.path.exists(args.latgov_config):
            raise HarnessError("no such config %s" % args.latgov_config)
    if not root.dma_latency.exists():
        raise HarnessError("%s missing" % root.dma_latency)
    found = refusals(root, ss.online_cpus(root))
    if found and not args.force:
        raise HarnessError("refusing to start: %s. Measurements would mix with someone else's "
                           "constraints; stop or release them, or pass --force to run anyway"
                           % "; ".join(found))
    for f in found:
        log("--force: running despite %s" % f)
    if daemon_modes:
        ensure_tracefs()

    target = resolve_target(root, args.device, args.size_bytes, wls)
    out = output_dir(args.out, target.name, args.force)
    raw = out / "raw"
    raw.mkdir(parents=True, exist_ok=True)
    create_file(target, log)
    try:
        os.close(os.open(target.path, os.O_RDONLY | os.O_DIRECT))
    except OSError as e:
        raise HarnessError("cannot open %s for direct IO: %s" % (target.path, e)) from e

    host = ss.read_host(root)
    waiter, waiter_desc = None, ""
    if any(w.pin_waiter for w in wls):
        waiter, waiter_desc = place_waiter(root, host, target.disk)
        log("waiter workload: %s" % waiter_desc)

    settings = Settings(args.mode_list, args.workload_list, args.rounds, args.runtime,
                        args.ramp, args.burst_sec, args.idle_sec)
    fio_version = subprocess.run([args.fio, "--version"], capture_output=True,
                                 text=True).stdout.strip()
    daemon = None
    if daemon_modes:
        session.runtime_dir = Path("/dev/shm/latgov-ab.%d" % os.getpid())
        session.runtime_dir.mkdir(parents=True, exist_ok=True)
        git = subprocess.run(["git", "-C", str(REPO), "describe", "--always", "--dirty"],
                             capture_output=True, text=True).stdout.strip() or "?"
        config_desc = config_description(args.latgov_config)
        move_aside(session, args.latgov_config, args.calibrate)
        cal = (calibrate(session, raw, target, args.keep_calibration) if args.calibrate
               else no_calibration(session.calibration))
        log("wake-up costs: %s" % cal)
        daemon = DaemonInfo(repo_relative(args.latgovd), git, config_desc, cal, "; ".join(
            describe_binary(b) for b in (args.latgovd, args.latgov)), session.tools.nice)
    meta = RunMeta(host, settings, target.info(), list(sys.argv),
                   datetime.datetime.now().isoformat(timespec="seconds"), fio_version,
                   ss.read_global_qos(root), ", ".join(
                       "cpu%d=%s" % kv for kv in ss.read_percpu_qos(root, host.cpus).items()),
                   daemon, waiter_desc, session.notes, forced=found,
                   no_ramp=[w.name for w in wls if w.without_ramp])

    cols = columns(host)
    runner = Runner(session, host, target, settings, raw, cols, waiter,
                    status_interval(args.latgov_config))
    rows: list[dict] = []
    t0 = time.monotonic()
    plan = with_warmups(schedule(args.rounds, [w.name for w in wls], args.mode_list))
    total = len(plan)
    log("target %s (%s, disk %s), out %s, %d runs" % (target.path, target.kind, target.disk,
                                                     out, total))
    writer = ResultsWriter(out / "results.csv", cols)
    stopped: MachineConstrained | None = None
    try:
        for seq, (rnd, name, order, mode) in enumerate(plan, 1):
            log("run %d/%d: round %d, %s, %s" % (seq, total, rnd, name, mode))
            row, stopped = run_one(runner, rnd, seq, order, WORKLOAD_BY_NAME[name], mode)
            rows.append(row)
            writer.write(row)
            if row["status"] == "ok" and is_warmup(row):
                log("  warm-up: %s offsets in %.1f s" % (row["warmup_ios"], row["window_s"]))
            elif row["status"] == "ok":
                log("  read %s IOPS mean %s p99 %s us | write %s | sync p99 %s | "
                    "held %.2f CPU-s | daemon %s%%" % (
                        row["read_iops"] or "-", row["read_lat_mean_us"] or "-",
                        row["read_lat_p99_us"] or "-", row["write_iops"] or "-",
                        row["sync_lat_p99_us"] or "-", row["held_cpu_s"],
                        row["latgovd_cpu_pct_core"] or "-"))
            else:
                log("  " + row["status"])
            if stopped:
                break
            time.sleep(args.cooldown)
    except Interrupted as e:
        meta.note = "INTERRUPTED by %s after %d of %d runs" % (e, len(rows), total)
        log(meta.note)
    finally:
        try:
            session.release_all()
        except MachineConstrained as e:
            stopped = stopped or e
        writer.close()
    if stopped:
        stop = "STOPPED after %d of %d runs: %s" % (len(rows), total, stopped)
        log(stop)
        meta.note = "; ".join(n for n in (meta.note, stop) if n)
    if session.evidence is not None:
        ev = session.evidence
        ev.record_end(raw)
        failed = ev.put_back()
        meta.evidence = dict(ev.to_json(), put_back=failed or (
            "the original put back" if ev.existed else "removed: there was none at the start"))
    if session.calibration is not None:
        ca = session.calibration
        meta.calibration_aside = dict(ca.to_json(), put_back=put_calibration_back(ca))
    meta.elapsed = time.monotonic() - t0
    meta.save(out / "run-meta.json")
    write_report(out, rows, meta, targets_path)
    problems = check_outputs(out, cols, total, args.workload_list)
    if args.smoke:
        problems += smoke_checks(rows, host)
    if meta.note:
        problems.append(meta.note)
    problems += ["run r%s %s %s: %s" % (r["round"], r["workload"], r["mode"], r["status"])
                 for r in rows if r["status"] != "ok"]
    if problems:
        for pr in problems:
            log("FAIL: " + pr)
        return 1
    if args.smoke:
        log("smoke OK: %d columns, %d runs, summary.md and plots present"
            % (len(cols), len(rows)))
    return 0


def schedule(rounds: int, workloads: list[str],
             modes: list[str]) -> list[tuple[int, str, int, str]]:
    """(round, workload, order in round, mode) of every run, in the order
    they run: each round every workload under every mode. The modes'
    order alternates between a rotation and its reverse: the modes as
    given, reversed, rotated by one, that reversed, and so on. Over
    2 x len(modes) rounds each mode runs in each place equally often, and
    with three modes also right after each other mode equally often: no
    mode mostly follows the same one, as under a plain rotation (where
    latgov would follow static in every round but one of three)."""
    plan = []
    for rnd in range(1, rounds + 1):
        k = (rnd - 1) // 2 % len(modes)
        order = modes[k:] + modes[:k]
        if rnd % 2 == 0:
            order = order[::-1]
        for w in workloads:
            for i, mode in enumerate(order):
                plan.append((rnd, w, i + 1, mode))
    return plan


def with_warmups(plan: list[tuple[int, str, int, str]]) -> list[tuple[int, str, int, str]]:
    """The plan with a warm-up (order 0, mode WARMUP) before each round's
    runs of each workload."""
    out: list[tuple[int, str, int, str]] = []
    for rnd, w, order, mode in plan:
        if not out or out[-1][:2] != (rnd, w):
            out.append((rnd, w, 0, WARMUP))
        out.append((rnd, w, order, mode))
    return out


def run_one(runner: Runner, rnd: int, seq: int, order: int, wl, mode: str
            ) -> tuple[dict, MachineConstrained | None]:
    """One run's row. Any failure of the run is an error row for it, with
    the machine released, and the bench goes on; a failure that leaves a
    CPU constrained is returned too, and stops the bench."""
    session = runner.session
    try:
        return runner.one_run(rnd, seq, order, wl, mode), None
    except Interrupted:
        raise
    except MachineConstrained as e:
        log("run failed: %s" % e)
        return runner.error_row(rnd, seq, order, wl, mode, str(e)), e
    except Exception as e:  # noqa: BLE001 - an OSError, KeyError...: this run only
        msg = str(e) if isinstance(e, HarnessError) else "%s: %s" % (type(e).__name__, e)
        log("run failed: %s" % msg)
        session.past_pids = []
        try:
            session.release_all()
        except MachineConstrained as c:
            return runner.error_row(rnd, seq, order, wl, mode, "%s; %s" % (msg, c)), c
        return runner.error_row(rnd, seq, order, wl, mode, msg), None


def on_signal(signum, frame):
    raise Interrupted(signal.Signals(signum).name)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    args = parse_args(argv)
    try:
        if args.resummarize:
            return resummarize(Path(args.resummarize), Path(args.targets))
    except (ValueError, OSError) as e:
        print("bench/ab: %s" % e, file=sys.stderr)
        return 2
    for s in STOP_SIGNALS:
        signal.signal(s, on_signal)
    root = SysRoot()
    try:
        nice = unit_nice()
    except (HarnessError, OSError) as e:
        print("bench/ab: %s" % e, file=sys.stderr)
        return 2
    session = Session(root, Tools(args.fio, args.latgovd, args.latgov, args.latgov_config, nice))
    try:
        try:
            return run(args, session, root)
        finally:
            # A CPU left constrained here is an error like any other.
            session.cleanup()
    except (HarnessError, TargetsError) as e:
        print("bench/ab: %s" % e, file=sys.stderr)
        return 2
    except Interrupted as e:
        print("bench/ab: interrupted (%s); everything released" % e, file=sys.stderr)
        return 130
