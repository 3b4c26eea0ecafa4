#include "latgov/topology.hpp"

#include <algorithm>

namespace latgov {

std::string_view to_string(QueueType type) {
    switch (type) {
    case QueueType::default_:
        return "default";
    case QueueType::read:
        return "read";
    case QueueType::poll:
        return "poll";
    }
    return "default";
}

std::string_view to_string(CompletionSource source) {
    switch (source) {
    case CompletionSource::irq_effective_affinity:
        return "irq";
    case CompletionSource::irq_affinity:
        return "irq_affinity";
    case CompletionSource::submit_cpus:
        return "submit_cpus";
    case CompletionSource::none:
        return "none";
    }
    return "none";
}

std::string_view to_string(DeviceKind kind) {
    switch (kind) {
    case DeviceKind::nvme:
        return "nvme";
    case DeviceKind::nvme_multipath_head:
        return "nvme-multipath";
    case DeviceKind::virtio_blk:
        return "virtio-blk";
    case DeviceKind::other:
        return "other";
    }
    return "other";
}

const Cpu* Topology::cpu(int id) const {
    auto it = std::find_if(cpus.begin(), cpus.end(), [id](const Cpu& c) { return c.id == id; });
    return it == cpus.end() ? nullptr : &*it;
}

const BlockDevice* Topology::device(std::string_view name) const {
    auto it = std::find_if(devices.begin(), devices.end(),
                           [name](const BlockDevice& d) { return d.name == name; });
    return it == devices.end() ? nullptr : &*it;
}

const NvmeController* Topology::controller(std::string_view name) const {
    auto it = std::find_if(controllers.begin(), controllers.end(),
                           [name](const NvmeController& c) { return c.name == name; });
    return it == controllers.end() ? nullptr : &*it;
}

} // namespace latgov
