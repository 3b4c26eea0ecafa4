"""Readers of the machine on small trees: CPU lists, queues, IRQs, the
waiter CPU, and what would skew a run (other latgov processes writing PM
QoS, constraints held)."""

import os
import struct

import pytest

from latgov_bench.sysstate import (NO_CONSTRAINT, SysRoot, choose_waiter_cpu, constraints_held,
                                   disk_queues, parse_cpu_list, parse_procstat, pm_qos_writers,
                                   queue_irq_name, read_host, refresh_waiter)


@pytest.mark.parametrize("text,want", [
    ("0", [0]), ("0-3", [0, 1, 2, 3]), ("0, 1", [0, 1]), ("0-1,4,6-7", [0, 1, 4, 6, 7]),
    ("", []), ("3,1", [1, 3]),
])
def test_parse_cpu_list(text, want):
    assert parse_cpu_list(text) == want


@pytest.mark.parametrize("text", ["a", "1-", "3-1", "1-2-3"])
def test_parse_cpu_list_refuses_bad_text(text):
    with pytest.raises(ValueError):
        parse_cpu_list(text)


def test_parse_procstat():
    text = ("cpu  1 2 3 4 5 6 7 8 0 0\n"
            "cpu0 100 0 50 1000 20 5 5 0 0 0\n"
            "cpu1 10 0 10 500 0 0 0 0 0 0\nintr 1 2\n")
    out = parse_procstat(text, [0])
    hz = os.sysconf("SC_CLK_TCK")
    assert out == {0: (1000 / hz, 20 / hz, 160 / hz)}


def put(root, path, text):
    p = root / path.lstrip("/")
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(text)


def link(root, path, target):
    p = root / path.lstrip("/")
    p.parent.mkdir(parents=True, exist_ok=True)
    os.symlink(target, p)


def virtio_tree(tmp_path, completion="1"):
    """vda: one queue submitted from CPUs 0 and 1, its IRQ virtio1-req.0
    (irq 36) completing on `completion`."""
    put(tmp_path, "/sys/devices/system/cpu/online", "0-1\n")
    put(tmp_path, "/sys/devices/system/cpu/cpuidle/current_driver", "haltpoll\n")
    put(tmp_path, "/sys/devices/system/cpu/cpuidle/current_governor", "haltpoll\n")
    for cpu in (0, 1):
        for i, name in enumerate(("POLL", "haltpoll idle")):
            put(tmp_path, f"/sys/devices/system/cpu/cpu{cpu}/cpuidle/state{i}/name", name + "\n")
    (tmp_path / "sys/devices/pci0000:00/0000:00:02.0/virtio1").mkdir(parents=True)
    link(tmp_path, "/sys/block/vda/device", "../../devices/pci0000:00/0000:00:02.0/virtio1")
    put(tmp_path, "/sys/block/vda/mq/0/cpu_list", "0, 1\n")
    put(tmp_path, "/sys/kernel/irq/35/actions", "virtio1-config\n")
    put(tmp_path, "/sys/kernel/irq/36/actions", "virtio1-req.0\n")
    put(tmp_path, "/proc/irq/36/effective_affinity_list", completion + "\n")
    return SysRoot(tmp_path)


def test_host_and_idle_states(tmp_path):
    host = read_host(virtio_tree(tmp_path))
    assert host.cpus == [0, 1]
    assert host.driver == "haltpoll" and host.qos_can_act
    assert host.idle_states == "POLL;haltpoll_idle" and host.has_poll


def test_no_cpuidle_driver(tmp_path):
    put(tmp_path, "/sys/devices/system/cpu/online", "0-1\n")
    host = read_host(SysRoot(tmp_path))
    assert host.driver == "none" and not host.qos_can_act
    assert host.idle_states == "none" and not host.has_poll


def test_virtio_waiter_sleeps_off_the_completion_cpu(tmp_path):
    root = virtio_tree(tmp_path)
    [q] = disk_queues(root, "vda")
    assert (q.irq, q.irq_name, q.submit_cpus, q.completion_cpus) == \
        (36, "virtio1-req.0", [0, 1], [1])
    w = choose_waiter_cpu([0, 1], [q])
    assert w is not None and w.cpu == 0 and w.queue.irq == 36
    root = virtio_tree(tmp_path / "b", completion="0")
    assert choose_waiter_cpu([0, 1], disk_queues(root, "vda")).cpu == 1


def test_nvme_queue_per_cpu_has_no_waiter_cpu(tmp_path):
    (tmp_path / "sys/devices/pci0000:00/0000:00:04.0/nvme/nvme0").mkdir(parents=True)
    link(tmp_path, "/sys/block/nvme0n1/device", "../../devices/pci0000:00/0000:00:04.0/nvme/nvme0")
    for hctx in (0, 1):
        put(tmp_path, f"/sys/block/nvme0n1/mq/{hctx}/cpu_list", f"{hctx}\n")
        put(tmp_path, f"/sys/kernel/irq/{50 + hctx}/actions", f"nvme0q{hctx + 1}\n")
        put(tmp_path, f"/proc/irq/{50 + hctx}/effective_affinity_list", f"{hctx}\n")
    queues = disk_queues(SysRoot(tmp_path), "nvme0n1")
    assert [q.irq_name for q in queues] == ["nvme0q1", "nvme0q2"]
    assert choose_waiter_cpu([0, 1], queues) is None


def test_queue_irq_names():
    assert queue_irq_name("virtio3", 2) == "virtio3-req.2"
    assert queue_irq_name("nvme1", 0) == "nvme1q1"
    assert queue_irq_name("0000:00:1f.2", 0) is None


def proc(root, pid, comm, *args):
    put(root, f"/proc/{pid}/comm", comm + "\n")
    p = root / f"proc/{pid}/cmdline"
    p.write_bytes(b"\0".join(a.encode() for a in (comm,) + args) + b"\0")


def test_latgov_processes_that_write_pm_qos(tmp_path):
    proc(tmp_path, 10, "latgovd", "--config", "/etc/latgov/latgov.toml")
    proc(tmp_path, 11, "latgovd", "--dry-run")
    proc(tmp_path, 12, "latgov", "status")
    proc(tmp_path, 13, "latgov", "calibrate", "--device", "vda")
    proc(tmp_path, 14, "sshd")
    proc(tmp_path, 15, "latgovd")
    # On a captured tree they write the tree's files, not the machine's.
    proc(tmp_path, 16, "latgovd", "--sysroot", "/tmp/tree")
    proc(tmp_path, 17, "latgov", "--sysroot=/tmp/tree", "calibrate")
    proc(tmp_path, 18, "latgov", "calibrate", "--sysroot", "/")
    found = pm_qos_writers(SysRoot(tmp_path), own={15})
    assert found == ["latgovd (pid 10: latgovd --config /etc/latgov/latgov.toml)",
                     "latgov (pid 13: latgov calibrate --device vda)",
                     "latgov (pid 18: latgov calibrate --sysroot /)"]


def test_constraints_held_now(tmp_path):
    root = virtio_tree(tmp_path)
    put(tmp_path, "/sys/devices/system/cpu/cpu0/power/pm_qos_resume_latency_us", "0\n")
    put(tmp_path, "/sys/devices/system/cpu/cpu1/power/pm_qos_resume_latency_us", "n/a\n")
    put(tmp_path, "/dev/cpu_dma_latency", "")
    root.dma_latency.write_bytes(struct.pack("<i", NO_CONSTRAINT))
    assert constraints_held(root, [0, 1]) == ["cpu1 pm_qos_resume_latency_us is n/a"]
    root.dma_latency.write_bytes(struct.pack("<i", 0))
    put(tmp_path, "/sys/devices/system/cpu/cpu1/power/pm_qos_resume_latency_us", "0\n")
    assert constraints_held(root, [0, 1]) == ["/dev/cpu_dma_latency is held at 0 us"]


def test_the_waiter_follows_its_irq_when_it_moves(tmp_path):
    root = virtio_tree(tmp_path)
    first = refresh_waiter(root, "vda", [0, 1], None)
    assert first.cpu == 0 and first.queue.completion_cpus == [1]
    # the same place while the IRQ stays
    assert refresh_waiter(root, "vda", [0, 1], first) == first
    put(tmp_path, "/proc/irq/36/effective_affinity_list", "0\n")
    moved = refresh_waiter(root, "vda", [0, 1], first)
    assert moved.cpu == 1 and moved.queue.completion_cpus == [0]
    put(tmp_path, "/proc/irq/36/effective_affinity_list", "0-1\n")
    assert refresh_waiter(root, "vda", [0, 1], moved) is None
