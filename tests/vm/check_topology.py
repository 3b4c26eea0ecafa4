#!/usr/bin/env python3
"""Compare latgov's topology JSON with the ground truth (ground_truth.py).

Usage: check_topology.py [--ignore-field NAME]... EXPECTED.json ACTUAL.json

EXPECTED is a subset: each top-level field it gives besides "devices" and
"cpus" (online_cpus, cpuidle_driver, cpuidle_governor) must be equal in
ACTUAL; every CPU in its "cpus" must be in ACTUAL with the same
resume_latency_us and the same idle states (every field EXPECTED gives, in
order), and the CPU sets must be equal; every device in it must be in ACTUAL with the same value
for each field EXPECTED gives (paths compare as sets), and the same hardware
queues (matched by index) with the same value for each queue field EXPECTED
gives (CPU lists compare as sets). The sets of nvme* and nullb* devices must
be equal on both sides. Fields ACTUAL has beyond EXPECTED are not checked.
Exit 0 and "topology matches: D devices, Q queues" on success; otherwise a
list of differences on stdout and exit 1 (2 for unreadable input).
"""

import argparse
import json
import re
import sys

CHECKED_SET = re.compile(r"^(nvme|nullb)")
SET_FIELDS = {"paths", "completion_cpus", "submit_cpus", "irq_affinity"}


def load(path):
    try:
        with open(path) as f:
            doc = json.load(f)
    except (OSError, ValueError) as e:
        print(f"check_topology: cannot read {path}: {e}", file=sys.stderr)
        sys.exit(2)
    if not isinstance(doc, dict) or not isinstance(doc.get("devices"), list):
        print(f"check_topology: {path}: no \"devices\" list", file=sys.stderr)
        sys.exit(2)
    return doc


def norm(field, value):
    if field in SET_FIELDS and isinstance(value, list):
        try:
            return sorted(value)
        except TypeError:
            return value
    return value


def compare_cpus(expected, actual, ignore):
    diffs = []
    for field, want in expected.items():
        if field in ("devices", "cpus") or field in ignore:
            continue
        if actual.get(field, "<absent>") != want:
            diffs.append(f"{field}: expected {json.dumps(want)}, "
                         f"actual {json.dumps(actual.get(field, '<absent>'))}")
    if "cpus" not in expected or "cpus" in ignore:
        return diffs, 0
    exp = {c["cpu"]: c for c in expected["cpus"]}
    act = {c.get("cpu"): c for c in actual.get("cpus") or []}
    for n in sorted(set(exp) - set(act)):
        diffs.append(f"cpu {n}: missing from actual")
    for n in sorted(set(act) - set(exp), key=str):
        diffs.append(f"cpu {n}: in actual but not expected")
    nstates = 0
    for n in sorted(set(exp) & set(act)):
        for field, want in exp[n].items():
            if field in ("cpu", "idle_states") or field in ignore:
                continue
            got = act[n].get(field, "<absent>")
            if got != want:
                diffs.append(f"cpu {n}.{field}: expected {json.dumps(want)}, "
                             f"actual {json.dumps(got)}")
        want_states = exp[n].get("idle_states", [])
        got_states = act[n].get("idle_states") or []
        if len(want_states) != len(got_states):
            diffs.append(f"cpu {n}: {len(want_states)} idle states expected, "
                         f"{len(got_states)} in actual")
        for ws, gs in zip(want_states, got_states):
            nstates += 1
            for field, want in ws.items():
                if field not in ignore and gs.get(field, "<absent>") != want:
                    diffs.append(f"cpu {n} state{ws.get('index')}.{field}: expected "
                                 f"{json.dumps(want)}, actual "
                                 f"{json.dumps(gs.get(field, '<absent>'))}")
    return diffs, nstates


def compare(expected, actual, ignore):
    diffs = []
    exp_devs = {d["name"]: d for d in expected["devices"]}
    act_devs = {}
    for d in actual["devices"]:
        name = d.get("name")
        if name in act_devs:
            diffs.append(f"{name}: listed twice by actual")
        act_devs[name] = d

    exp_set = {n for n in exp_devs if CHECKED_SET.match(n)}
    act_set = {n for n in act_devs if isinstance(n, str) and CHECKED_SET.match(n)}
    for n in sorted(exp_set - act_set):
        diffs.append(f"{n}: missing from actual")
    for n in sorted(act_set - exp_set):
        diffs.append(f"{n}: in actual but not expected")

    nqueues = 0
    for name, exp in exp_devs.items():
        act = act_devs.get(name)
        if act is None:
            if name not in exp_set:
                diffs.append(f"{name}: missing from actual")
            continue
        for field, want in exp.items():
            if field in ("name", "queues") or field in ignore:
                continue
            if field not in act:
                diffs.append(f"{name}.{field}: missing from actual (expected {json.dumps(want)})")
            elif norm(field, act[field]) != norm(field, want):
                diffs.append(f"{name}.{field}: expected {json.dumps(want)}, "
                             f"actual {json.dumps(act[field])}")
        exp_q = {q["index"]: q for q in exp.get("queues", [])}
        act_q = {}
        for q in act.get("queues") or []:
            act_q[q.get("index")] = q
        if "queues" in exp and "queues" not in act:
            diffs.append(f"{name}.queues: missing from actual")
        for i in sorted(set(exp_q) - set(act_q), key=str):
            diffs.append(f"{name} hctx{i}: missing from actual "
                         f"(expected {json.dumps(exp_q[i], separators=(',', ':'))})")
        for i in sorted(set(act_q) - set(exp_q), key=str):
            diffs.append(f"{name} hctx{i}: in actual but not expected")
        for i in sorted(set(exp_q) & set(act_q)):
            nqueues += 1
            for field, want in exp_q[i].items():
                if field in ignore:
                    continue
                got = act_q[i].get(field, "<absent>")
                if norm(field, got) != norm(field, want):
                    diffs.append(f"{name} hctx{i}.{field}: expected {json.dumps(want)}, "
                                 f"actual {json.dumps(got)}")
    return diffs, len(exp_devs), nqueues


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("expected")
    ap.add_argument("actual")
    ap.add_argument("--ignore-field", action="append", default=[], metavar="NAME",
                    help="do not compare this device or queue field (repeatable)")
    args = ap.parse_args()
    expected, actual = load(args.expected), load(args.actual)
    diffs, ndev, nq = compare(expected, actual, set(args.ignore_field))
    cpu_diffs, nstates = compare_cpus(expected, actual, set(args.ignore_field))
    diffs += cpu_diffs
    if diffs:
        print(f"topology MISMATCH ({len(diffs)} differences; expected={args.expected} "
              f"actual={args.actual}):")
        for d in diffs:
            print(f"  {d}")
        return 1
    ncpus = len(expected.get("cpus", []))
    print(f"topology matches: {ndev} devices, {nq} queues, {ncpus} CPUs, "
          f"{nstates} idle states")
    return 0


if __name__ == "__main__":
    sys.exit(main())
