#!/usr/bin/env python3
"""Expected blk-mq / IRQ / CPU topology of the running machine, as JSON.

Written independently of latgov's C++ code (python3 stdlib only) so that the VM
tests can check `latgov topology --json` against it. It prints a subset of
latgov's schema:

  {"online_cpus": [0, 1], "cpuidle_driver": "acpi_idle", "cpuidle_governor": "menu",
   "cpus": [{"cpu": 0, "resume_latency_us": null,
             "idle_states": [{"index": 0, "name": "POLL", "exit_latency_us": 0,
                              "target_residency_us": 0, "disabled": false}, ...],
             "idle_states_known": true}],
   "devices": [{"name": "nvme0n1", "kind": "nvme", "controller": "nvme0",
                "queues": [{"index": 0, "type": "default", "irq": 25,
                            "irq_name": "nvme0q1", "completion_cpus": [2],
                            "submit_cpus": [0, 1, 2], "irq_affinity": [0, 1, 2],
                            "completion_source": "irq"}]},
               {"name": "nvme2n1", "kind": "nvme-multipath",
                "queues": [], "paths": ["nvme2c1n1", "nvme2c2n1"]}]}

Rules (Documentation: drivers/nvme/host/pci.c, drivers/virtio, block/blk-mq):
- hctx i of an NVMe namespace or path disk nvme<S>n<N> / nvme<S>c<C>n<N>,
  whose `device` link names controller nvme<C>, completes on the IRQ whose
  action is `nvme<C>q<i+1>`; when the controller has a single vector (only
  `nvme<C>q0` exists), every queue uses it.
- a queue whose debugfs type is `poll` has no IRQ: irq null, irq_name "",
  completion_cpus [] (the submitter polls for its own completions).
- a multipath head (no mq/, device -> nvme-subsys<S>) has no queues; its paths
  are the hidden disks nvme<S>c*n<N>; a path has hidden true and
  multipath_head nvme<S>n<N>; the head has no controller of its own (the field
  is left out). Device kinds and completion sources use latgov's spellings
  (nvme, nvme-multipath, virtio-blk, other; irq, submit_cpus, none).
- virtio-blk: hctx q uses the IRQ `virtio<N>-req.<q>`, virtio<N> being the
  basename of the disk's device link.
- null_blk (nullb*) and loop* have no IRQ: completion_cpus = submit_cpus.
- dev ("major:minor") from /sys/block/<disk>/dev; a hidden path disk has no
  dev file, and its dev_t is its line in /proc/diskstats ("" where that
  says 0 0 or has no line).
- completion_cpus of an IRQ queue = /proc/irq/<n>/effective_affinity_list;
  irq_affinity = smp_affinity_list.
Disks of other drivers (sd*, dm-*, ...) are not reported: their IRQ naming is
not known here.

CPUs (Documentation/admin-guide/pm/cpuidle.rst, drivers/base/power/sysfs.c):
- online_cpus from /sys/devices/system/cpu/online; cpuidle_driver and
  cpuidle_governor from /sys/devices/system/cpu/cpuidle/current_driver and
  current_governor_ro (current_governor when that is all there is); with no
  cpuidle directory the driver is "none".
- per online CPU: resume_latency_us from power/pm_qos_resume_latency_us,
  where the kernel prints "0" for no constraint (null here) and "n/a" for a
  0 us limit (0 here); idle_states from cpuidle/stateN/{name,latency,
  residency,disable} (exit_latency_us, target_residency_us, disabled), in
  index order, empty without a cpuidle driver.

Usage: ground_truth.py [--root DIR] [--indent N]
  --root DIR  read DIR/proc and DIR/sys instead of /proc and /sys (a captured tree)
"""

import argparse
import json
import os
import re
import sys

NVME_DISK = re.compile(r"^nvme(\d+)(?:c(\d+))?n(\d+)$")
NVME_CTRL = re.compile(r"^nvme(\d+)$")
NVME_SUBSYS = re.compile(r"^nvme-subsys(\d+)$")
VIRTIO_DEV = re.compile(r"^virtio\d+$")


class Machine:
    def __init__(self, root):
        self.root = root

    def path(self, p):
        return os.path.join(self.root, p.lstrip("/")) if self.root != "/" else p

    def read(self, p, default=None):
        try:
            with open(self.path(p)) as f:
                return f.read().strip()
        except OSError:
            return default

    def listdir(self, p):
        try:
            return sorted(os.listdir(self.path(p)))
        except OSError:
            return []

    def readlink_base(self, p):
        try:
            return os.path.basename(os.readlink(self.path(p)))
        except OSError:
            return None


def parse_cpu_list(text):
    """'0-2,5' or '0, 1, 2' -> sorted list of ints; None or '' -> []."""
    cpus = set()
    if not text:
        return []
    for part in re.split(r"[,\s]+", text.strip()):
        if not part:
            continue
        if "-" in part:
            lo, hi = part.split("-", 1)
            cpus.update(range(int(lo), int(hi) + 1))
        else:
            cpus.add(int(part))
    return sorted(cpus)


def irq_actions(m):
    """action name -> IRQ number, from /proc/interrupts (cross-checked with
    /sys/kernel/irq/N/actions when that exists)."""
    text = m.read("/proc/interrupts")
    if text is None:
        return irq_actions_sysfs(m)
    lines = text.splitlines()
    if not lines:
        return {}
    ncpus = len(lines[0].split())
    by_name = {}
    for line in lines[1:]:
        head, sep, rest = line.partition(":")
        if not sep or not head.strip().isdigit():
            continue  # NMI:, LOC:, ERR: ...
        irq = int(head.strip())
        fields = rest.split()
        # fields: <count per CPU> <chip name ...> <hwirq-type> <action>[, <action>...]
        tail = fields[ncpus:]
        # the actions are the last tokens (names have no spaces); the chip and
        # hwirq tokens before them never look like nvmeXqY or virtioN-req.Q
        names = {t.rstrip(",") for t in tail}
        actions = m.read(f"/sys/kernel/irq/{irq}/actions")
        if actions is not None:
            for a in actions.split(","):
                if a and a not in names:
                    problem(f"IRQ {irq}: action {a!r} of /sys/kernel/irq is not in /proc/interrupts")
        for name in names:
            by_name.setdefault(name, irq)
    return by_name


def irq_actions_sysfs(m):
    """The same from /sys/kernel/irq/N/actions alone (captured trees, such as
    `latgov snapshot` tarballs, that hold no /proc/interrupts)."""
    by_name = {}
    for n in sorted((int(x) for x in m.listdir("/sys/kernel/irq") if x.isdigit())):
        for a in (m.read(f"/sys/kernel/irq/{n}/actions") or "").split(","):
            if a:
                by_name.setdefault(a, n)
    return by_name


def queue_type(m, disk, index):
    t = m.read(f"/sys/kernel/debug/block/{disk}/hctx{index}/type")
    if t is None:
        raise SystemExit(f"ground_truth: cannot read debugfs type of {disk} hctx{index}"
                         " (debugfs not mounted, or not root)")
    return t


def irq_queue(m, irq, name):
    return {
        "irq": irq,
        "irq_name": name,
        "completion_cpus": parse_cpu_list(m.read(f"/proc/irq/{irq}/effective_affinity_list")),
        "irq_affinity": parse_cpu_list(m.read(f"/proc/irq/{irq}/smp_affinity_list")),
        "completion_source": "irq",
    }


def no_irq_queue(completion):
    return {
        "irq": None,
        "irq_name": "",
        "completion_cpus": completion,
        "irq_affinity": [],
        "completion_source": "submit_cpus" if completion else "none",
    }


QUEUE_KEYS = ["index", "type", "irq", "irq_name", "completion_cpus", "submit_cpus",
              "irq_affinity", "completion_source"]


def hw_queues(m, disk):
    """Yields the bare queues of a blk-mq disk; the caller adds the IRQ fields."""
    idx = [int(q) for q in m.listdir(f"/sys/block/{disk}/mq") if q.isdigit()]
    for i in sorted(idx):
        yield {
            "index": i,
            "type": queue_type(m, disk, i),
            "submit_cpus": parse_cpu_list(m.read(f"/sys/block/{disk}/mq/{i}/cpu_list")),
        }


def ordered(q):
    return {k: q[k] for k in QUEUE_KEYS if k in q}


def problem(msg):
    print(f"ground_truth: {msg}", file=sys.stderr)


def nvme_device(m, disk, actions, disks):
    mt = NVME_DISK.match(disk)
    subsys, nsid = mt.group(1), mt.group(3)
    link = m.readlink_base(f"/sys/block/{disk}/device")
    has_mq = os.path.isdir(m.path(f"/sys/block/{disk}/mq"))
    if link and NVME_SUBSYS.match(link) and not has_mq:
        path_re = re.compile(rf"^nvme{subsys}c\d+n{nsid}$")
        paths = sorted((d for d in disks if path_re.match(d)),
                       key=lambda d: [int(x) for x in re.findall(r"\d+", d)])
        return {"name": disk, "kind": "nvme-multipath", "nsid": int(nsid), "hidden": False,
                "multipath_head": "", "queues": [], "paths": paths}
    if not link or not NVME_CTRL.match(link):
        problem(f"{disk}: device link {link!r} is not an NVMe controller")
        return None
    ctrl = link
    is_path = mt.group(2) is not None
    dev = {"name": disk, "kind": "nvme", "controller": ctrl, "nsid": int(nsid),
           "hidden": is_path, "multipath_head": f"nvme{subsys}n{nsid}" if is_path else "",
           "paths": [], "queues": []}
    if is_path and mt.group(2) != NVME_CTRL.match(ctrl).group(1):
        problem(f"{disk}: path name says controller {mt.group(2)}, device link says {ctrl}")
    single = f"{ctrl}q0" in actions and f"{ctrl}q1" not in actions
    for q in hw_queues(m, disk):
        if q["type"] == "poll":
            q.update(no_irq_queue([]))
        else:
            name = f"{ctrl}q0" if single else f"{ctrl}q{q['index'] + 1}"
            if name not in actions:
                problem(f"{disk} hctx{q['index']}: no IRQ named {name}")
                q.update(no_irq_queue([]))
                q["irq_name"] = f"MISSING:{name}"
            else:
                q.update(irq_queue(m, actions[name], name))
        dev["queues"].append(ordered(q))
    return dev


def virtio_device(m, disk, actions):
    vdev = m.readlink_base(f"/sys/block/{disk}/device")
    dev = {"name": disk, "kind": "virtio-blk", "queues": []}
    for q in hw_queues(m, disk):
        name = f"{vdev}-req.{q['index']}"
        if q["type"] == "poll":
            q.update(no_irq_queue([]))
        elif name in actions:
            q.update(irq_queue(m, actions[name], name))
        else:
            problem(f"{disk} hctx{q['index']}: no IRQ named {name}")
            q.update(no_irq_queue([]))
            q["irq_name"] = f"MISSING:{name}"
        dev["queues"].append(ordered(q))
    return dev


def irqless_device(m, disk):
    dev = {"name": disk, "kind": "other", "queues": []}
    for q in hw_queues(m, disk):
        q.update(no_irq_queue([] if q["type"] == "poll" else list(q["submit_cpus"])))
        dev["queues"].append(ordered(q))
    return dev


def resume_latency(text):
    if text is None:
        problem("no pm_qos_resume_latency_us")
        return None
    if text == "n/a":
        return 0
    value = int(text)
    return None if value == 0 else value


def cpus(m):
    base = "/sys/devices/system/cpu"
    online = parse_cpu_list(m.read(f"{base}/online"))
    out = {"online_cpus": online}
    driver = m.read(f"{base}/cpuidle/current_driver")
    out["cpuidle_driver"] = driver if driver else "none"
    gov = m.read(f"{base}/cpuidle/current_governor_ro")
    if gov is None:
        gov = m.read(f"{base}/cpuidle/current_governor")
    if gov is not None:
        out["cpuidle_governor"] = gov
    out["cpus"] = []
    for cpu in online:
        states = []
        idx = sorted(int(e[len("state"):]) for e in m.listdir(f"{base}/cpu{cpu}/cpuidle")
                     if re.fullmatch(r"state\d+", e))
        for i in idx:
            d = f"{base}/cpu{cpu}/cpuidle/state{i}"
            states.append({"index": i, "name": m.read(f"{d}/name"),
                           "exit_latency_us": int(m.read(f"{d}/latency")),
                           "target_residency_us": int(m.read(f"{d}/residency")),
                           "disabled": m.read(f"{d}/disable") != "0"})
        out["cpus"].append({
            "cpu": cpu,
            "resume_latency_us": resume_latency(
                m.read(f"{base}/cpu{cpu}/power/pm_qos_resume_latency_us")),
            "idle_states": states,
            # Every state above was read: the table is known.
            "idle_states_known": True})
    return out


def disk_devs(m, disks):
    """Each disk's "major:minor": its sysfs dev file, or for a hidden multipath
    path (which has none) its line in /proc/diskstats; "" when neither."""
    listed = {}
    for line in (m.read("/proc/diskstats") or "").splitlines():
        fields = line.split()
        if len(fields) >= 3 and fields[0] != "0":  # 0 0: the kernel gave it none
            listed[fields[2]] = f"{fields[0]}:{fields[1]}"
    return {d: m.read(f"/sys/block/{d}/dev") or listed.get(d, "") for d in disks}


def ground_truth(m):
    actions = irq_actions(m)
    disks = m.listdir("/sys/block")
    devs = disk_devs(m, disks)
    devices = []
    for disk in disks:
        if NVME_DISK.match(disk):
            dev = nvme_device(m, disk, actions, disks)
        elif re.match(r"^(nullb|loop)\d+$", disk):
            if not os.path.isdir(m.path(f"/sys/block/{disk}/mq")):
                continue  # bio-based null_blk (queue_mode=0)
            dev = irqless_device(m, disk)
        elif re.match(r"^vd[a-z]+$", disk) and VIRTIO_DEV.match(
                m.readlink_base(f"/sys/block/{disk}/device") or ""):
            dev = virtio_device(m, disk, actions)
        else:
            continue
        if dev is not None:
            devices.append({"name": disk, "dev": devs[disk], **dev})
    return dict(cpus(m), devices=devices)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--root", default="/")
    ap.add_argument("--indent", type=int, default=2, help="0: one line")
    args = ap.parse_args()
    json.dump(ground_truth(Machine(args.root)), sys.stdout, indent=args.indent or None)
    print()


if __name__ == "__main__":
    main()
