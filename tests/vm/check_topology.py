#!/usr/bin/env python3
"""Compare latgov's topology JSON with the ground truth (ground_truth.py).

Usage: check_topology.py [--ignore-field NAME]... EXPECTED.json ACTUAL.json

EXPECTED is a subset: every device in it must be in ACTUAL with the same value
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
    diffs, ndev, nq = compare(load(args.expected), load(args.actual), set(args.ignore_field))
    if diffs:
        print(f"topology MISMATCH ({len(diffs)} differences; expected={args.expected} "
              f"actual={args.actual}):")
        for d in diffs:
            print(f"  {d}")
        return 1
    print(f"topology matches: {ndev} devices, {nq} queues")
    return 0


if __name__ == "__main__":
    sys.exit(main())
