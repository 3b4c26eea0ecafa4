#include "latgov/irq_match.hpp"

namespace latgov {

std::optional<QueueIrq> match_queue_irq(const IrqNames& names, const DiskIrqFacts& disk,
                                        int queue_index, QueueType type,
                                        const CpuSet& submit_cpus) {
    auto lookup = [&](const std::string& name) -> std::optional<QueueIrq> {
        auto it = names.find(name);
        if (it == names.end())
            return std::nullopt;
        return QueueIrq{it->second, name};
    };
    if (type == QueueType::poll)
        return std::nullopt;
    if (disk.kind == DeviceKind::nvme) {
        if (auto irq = lookup(disk.controller + "q" + std::to_string(queue_index + 1)))
            return irq;
        if (!lookup(disk.controller + "q1"))
            return lookup(disk.controller + "q0");
        return std::nullopt;
    }
    if (disk.kind == DeviceKind::virtio_blk && !disk.device_link.empty())
        if (auto irq = lookup(disk.device_link + "-req." + std::to_string(queue_index)))
            return irq;
    for (const auto& [irq, affinity] : disk.msi_affinities) {
        if (affinity != submit_cpus)
            continue;
        std::string name;
        for (const auto& [n, number] : names)
            if (number == irq)
                name = n;
        return QueueIrq{irq, name};
    }
    return std::nullopt;
}

} // namespace latgov
