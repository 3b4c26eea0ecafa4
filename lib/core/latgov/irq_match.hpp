// Which IRQ completes a blk-mq hardware queue, decided from facts discovery
// has read: the IRQ action names, the disk's device link and, for disks
// without a naming rule, the affinity of the PCI function's MSI IRQs.
#pragma once

#include "latgov/parse.hpp"
#include "latgov/topology.hpp"

#include <map>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

namespace latgov {

// IRQ action names -> IRQ numbers (/sys/kernel/irq/<n>/actions).
using IrqNames = std::map<std::string, int>;

struct DiskIrqFacts {
    DeviceKind kind = DeviceKind::other;
    std::string controller;  // nvme0, for an NVMe namespace or path
    std::string device_link; // basename of /sys/block/<disk>/device: virtio1, nvme0, ...
    // The disk's PCI function's MSI IRQs with their smp_affinity_list, by
    // IRQ number; read only for disks without an NVMe naming rule.
    std::vector<std::pair<int, CpuSet>> msi_affinities;
    // IRQs that carry more than one action (a shared line): read only for
    // virtio disks, whose one IRQ for every queue must be theirs alone.
    std::set<int> shared_irqs{};
};

struct QueueIrq {
    int irq = 0;
    std::string name; // its action name, empty if it has none
};

// nullopt when the queue has no IRQ of its own (a poll queue, or a device
// without per-queue IRQs). The rules, in order:
//  - poll queue: none.
//  - NVMe: hctx i is served by I/O queue i+1, IRQ "<ctrl>q<i+1>", and
//    nothing else: a controller with a single vector names that vector's
//    second action "<ctrl>q1" too ("nvme0q0,nvme0q1"), and a controller
//    being reset has freed its I/O queues' IRQs, when "<ctrl>q0" (the admin
//    queue) completes no I/O.
//  - virtio-blk: "<device>-req.<i>".
//  - otherwise (and virtio without that name): the MSI IRQ whose affinity
//    equals the queue's submitting CPUs (managed IRQs are spread that way).
//    IRQs whose every action ends in "-config" are left out; an IRQ named
//    "<device>-virtqueues" or "<device>-req.<n>" wins over the others; two
//    or more equally good ones are no match, and `warning` (when given) says
//    which.
//  - virtio-blk with no match yet: the device's one IRQ for every queue,
//    "<device>-virtqueues" or "<device>" (INTx, virtio-mmio), unless it is
//    in shared_irqs (another device's action shares the line).
std::optional<QueueIrq> match_queue_irq(const IrqNames& names, const DiskIrqFacts& disk,
                                        int queue_index, QueueType type, const CpuSet& submit_cpus,
                                        std::string* warning = nullptr);

} // namespace latgov
