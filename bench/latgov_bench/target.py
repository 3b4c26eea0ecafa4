"""The device or file the workloads run on, and the checks that keep the
harness from writing to a disk in use."""

from __future__ import annotations

import errno
import os
import stat
import struct
from dataclasses import asdict, dataclass

from .sysstate import SysRoot
from .workloads import Workload

DEFAULT_TARGET = "/var/tmp/latgov-bench.dat"
MIN_FILE = 16 << 20


class HarnessError(Exception):
    pass


@dataclass(frozen=True)
class Target:
    path: str
    kind: str          # "block" or "file"
    size: int
    disk: str | None   # whole disk the IO reaches (vda, nvme0n1)
    name: str          # for names of outputs: the disk, or "file"
    created: bool      # a file this run creates

    def info(self) -> dict:
        return asdict(self)


def block_name_of_dev(root: SysRoot, rdev: int) -> str | None:
    link = root.path("/sys/dev/block/%d:%d" % (os.major(rdev), os.minor(rdev)))
    if not link.exists():
        return None
    return os.path.basename(os.path.realpath(link))


def whole_disk_of(root: SysRoot, name: str) -> str:
    """nvme0n1p2 -> nvme0n1 (via sysfs), vda -> vda."""
    path = os.path.realpath(root.path("/sys/class/block/%s" % name))
    if os.path.exists(os.path.join(path, "partition")):
        return os.path.basename(os.path.dirname(path))
    return name


def partitions_of(root: SysRoot, name: str) -> list[str]:
    path = os.path.realpath(root.path("/sys/class/block/%s" % name))
    try:
        return [e for e in os.listdir(path)
                if os.path.exists(os.path.join(path, e, "partition"))]
    except OSError:
        return []


def dev_numbers(root: SysRoot, name: str) -> int | None:
    text = root.read("/sys/class/block/%s/dev" % name)
    if not text:
        return None
    a, b = text.split(":")
    return os.makedev(int(a), int(b))


def block_device_users(root: SysRoot, name: str, path: str) -> list[str]:
    """Reasons a block device must not be written to ([] = free)."""
    reasons = []
    names = [name] + partitions_of(root, name)
    rdevs = {}
    for n in names:
        d = dev_numbers(root, n)
        if d is not None:
            rdevs[d] = n
    for line in (root.read("/proc/mounts", "") or "").splitlines():
        fields = line.split()
        src, mnt = fields[0], fields[1].replace("\\040", " ")
        if not src.startswith("/"):
            continue
        try:
            st = os.stat(src)
        except OSError:
            continue
        if stat.S_ISBLK(st.st_mode) and st.st_rdev in rdevs:
            reasons.append("%s is mounted on %s (/proc/mounts)" % (rdevs[st.st_rdev], mnt))
    # mountinfo carries major:minor even when the source name is odd
    for line in (root.read("/proc/self/mountinfo", "") or "").splitlines():
        fields = line.split()
        a, b = fields[2].split(":")
        d = os.makedev(int(a), int(b))
        if d in rdevs:
            msg = "%s is mounted on %s" % (rdevs[d], fields[4])
            if not any(r.startswith(msg) for r in reasons):
                reasons.append(msg + " (/proc/self/mountinfo)")
    for line in (root.read("/proc/swaps", "") or "").splitlines()[1:]:
        src = line.split()[0]
        try:
            st = os.stat(src)
        except OSError:
            continue
        if stat.S_ISBLK(st.st_mode) and st.st_rdev in rdevs:
            reasons.append("%s is in use as swap" % rdevs[st.st_rdev])
    for n in names:
        try:
            holders = os.listdir(root.path("/sys/class/block/%s/holders" % n))
        except OSError:
            holders = []
        if holders:
            reasons.append("%s is held by %s (holders: device-mapper, md, bcache ...)"
                           % (n, ", ".join(sorted(holders))))
    # Last word: the kernel refuses O_EXCL on a mounted or claimed device.
    try:
        fd = os.open(path, os.O_RDONLY | os.O_EXCL)
        os.close(fd)
    except OSError as e:
        if e.errno == errno.EBUSY:
            reasons.append("%s is busy (exclusive open refused: mounted, swap or "
                           "claimed by another driver)" % path)
    return reasons


def resolve_target(root: SysRoot, spec: str, size: int, workloads: list[Workload]) -> Target:
    """--device: a disk name (vda), /dev/X, or a file (created when missing)."""
    if "/" not in spec and root.path("/sys/class/block/%s" % spec).exists():
        path = "/dev/" + spec
    else:
        path = os.path.abspath(spec)
    if os.path.exists(path):
        st = os.stat(path)
        if stat.S_ISBLK(st.st_mode):
            name = block_name_of_dev(root, st.st_rdev) or os.path.basename(path)
            bsize = int(root.read("/sys/class/block/%s/size" % name, "0") or 0) * 512
            if bsize == 0:
                raise HarnessError("block device %s has size 0" % path)
            writers = [w.name for w in workloads if w.writes_target]
            if writers:
                reasons = block_device_users(root, name, path)
                if reasons:
                    raise HarnessError(
                        "refusing to WRITE to block device %s: %s.\nThe workloads %s "
                        "write. Use a file on it instead (e.g. --device %s), or only "
                        "the read-only workloads (--workloads qd1-randread-4k,idle)."
                        % (path, "; ".join(reasons), ", ".join(writers), DEFAULT_TARGET))
            return Target(path, "block", bsize, whole_disk_of(root, name), name, False)
        if not stat.S_ISREG(st.st_mode):
            raise HarnessError("%s is neither a block device nor a regular file" % path)
        if st.st_size < MIN_FILE:
            raise HarnessError("%s is only %d bytes; use a file of at least 16 MiB "
                               "(or remove it and let bench/ab create one)"
                               % (path, st.st_size))
        fsize, created = st.st_size, False
    else:
        if os.path.dirname(path) == "/dev":
            raise HarnessError("%s does not exist (no such device)" % path)
        if not os.path.isdir(os.path.dirname(path)):
            raise HarnessError("directory %s does not exist" % os.path.dirname(path))
        fsize, created = size, True
    st = os.stat(os.path.dirname(path) if created else path)
    bname = block_name_of_dev(root, st.st_dev)
    disk = whole_disk_of(root, bname) if bname else None
    return Target(path, "file", fsize, disk, disk or "file", created)


def create_file(target: Target, log) -> None:
    """Fill a new target file with real data, so reads hit the disk."""
    if not target.created:
        return
    log("creating %s (%d MiB of real data, so reads hit the disk)"
        % (target.path, target.size >> 20))
    chunk = bytearray(os.urandom(4 << 20))
    tmp = target.path + ".partial"
    with open(tmp, "wb") as f:
        written = 0
        while written < target.size:
            n = min(len(chunk), target.size - written)
            chunk[0:8] = struct.pack("<Q", written)
            f.write(chunk[:n])
            written += n
        f.flush()
        os.fsync(f.fileno())
    os.rename(tmp, target.path)
