#include "latgov/irq_match.hpp"

#include <algorithm>

namespace latgov {

namespace {

bool ends_with(std::string_view text, std::string_view suffix) {
    return text.size() >= suffix.size() && text.substr(text.size() - suffix.size()) == suffix;
}

} // namespace

std::optional<QueueIrq> match_queue_irq(const IrqNames& names, const DiskIrqFacts& disk,
                                        int queue_index, QueueType type, const CpuSet& submit_cpus,
                                        std::string* warning) {
    auto lookup = [&](const std::string& name) -> std::optional<QueueIrq> {
        auto it = names.find(name);
        if (it == names.end())
            return std::nullopt;
        return QueueIrq{it->second, name};
    };
    if (type == QueueType::poll)
        return std::nullopt;
    if (disk.kind == DeviceKind::nvme)
        return lookup(disk.controller + "q" + std::to_string(queue_index + 1));
    if (disk.kind == DeviceKind::virtio_blk && !disk.device_link.empty())
        if (auto irq = lookup(disk.device_link + "-req." + std::to_string(queue_index)))
            return irq;
    // The MSI IRQs whose affinity is the queue's submitters. A configuration
    // interrupt ("virtio1-config") completes no request; among the rest a
    // request interrupt of the device ("virtio1-virtqueues", "virtio1-req.N")
    // is preferred; several equally good ones tell nothing.
    std::vector<QueueIrq> candidates;
    std::vector<QueueIrq> preferred;
    for (const auto& [irq, affinity] : disk.msi_affinities) {
        if (affinity != submit_cpus)
            continue;
        std::vector<std::string> irq_names;
        for (const auto& [n, number] : names)
            if (number == irq)
                irq_names.push_back(n);
        if (!irq_names.empty() &&
            std::all_of(irq_names.begin(), irq_names.end(),
                        [](const std::string& n) { return ends_with(n, "-config"); }))
            continue;
        const std::string prefix = disk.device_link + "-";
        auto request = std::find_if(irq_names.begin(), irq_names.end(), [&](const std::string& n) {
            return !disk.device_link.empty() && n.starts_with(prefix) &&
                   (n == prefix + "virtqueues" || n.starts_with(prefix + "req."));
        });
        if (request != irq_names.end()) {
            preferred.push_back({irq, *request});
            continue;
        }
        candidates.push_back({irq, irq_names.empty() ? std::string() : irq_names.back()});
    }
    const auto& pool = preferred.empty() ? candidates : preferred;
    if (pool.size() == 1)
        return pool.front();
    // A virtio device without a vector per queue has one IRQ for them all:
    // "<device>-virtqueues" (one MSI-X vector for every queue) or "<device>"
    // (a legacy INTx line, or virtio-mmio), taken only when it carries no
    // other action: another device's interrupts would count as the disk's.
    if (pool.empty() && disk.kind == DeviceKind::virtio_blk && !disk.device_link.empty())
        for (const auto& name : {disk.device_link + "-virtqueues", disk.device_link})
            if (auto irq = lookup(name); irq && !disk.shared_irqs.contains(irq->irq))
                return irq;
    if (pool.size() > 1 && warning) {
        std::string irqs;
        for (const auto& c : pool)
            irqs += (irqs.empty() ? "" : ", ") + std::to_string(c.irq) +
                    (c.name.empty() ? "" : " (" + c.name + ")");
        *warning = "hardware queue " + std::to_string(queue_index) + ": MSI IRQs " + irqs +
                   " all have the queue's CPUs as affinity; none is taken as its own";
    }
    return std::nullopt;
}

} // namespace latgov
