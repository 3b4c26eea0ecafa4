// One immutable snapshot of what the governor needs to know about the
// machine: CPUs and their idle states, and for every blk-mq hardware queue the
// CPUs that submit to it and the CPUs that complete it.
#pragma once

#include "latgov/parse.hpp"
#include "latgov/result.hpp"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace latgov {

struct IdleState {
    int index = 0;
    std::string name;
    std::uint32_t exit_latency_us = 0;
    std::uint32_t target_residency_us = 0;
    bool disabled = false;
};

struct Cpu {
    int id = 0;
    std::vector<IdleState> idle_states;
    // Current pm_qos_resume_latency_us; nullopt = no limit.
    LatencyLimit resume_latency;
    bool resume_latency_known = false; // the file exists and parsed
    // False when a cpuidle driver is active but the table could not be read
    // in full (a state or the directory unreadable): idle_states is then
    // empty and says nothing. The governor assumes every state but POLL
    // costs too much on such a CPU.
    bool idle_states_known = true;
};

enum class QueueType { default_, read, poll };
std::string_view to_string(QueueType type);

// Where a queue's completion CPUs came from.
enum class CompletionSource {
    irq_effective_affinity, // the IRQ's effective_affinity_list
    irq_affinity,           // its smp_affinity_list, online CPUs: no effective_affinity_list
    submit_cpus,            // no IRQ of its own (null_blk, loop): submitters complete
    none,                   // poll queue: completed by the submitter polling, no IRQ
};
std::string_view to_string(CompletionSource source);

struct HardwareQueue {
    int index = 0;
    QueueType type = QueueType::default_;
    std::optional<int> irq;
    std::string irq_name;
    CpuSet submit_cpus;     // mq/N/cpu_list
    CpuSet completion_cpus; // who runs the completion
    CpuSet irq_affinity;    // smp_affinity_list, empty without IRQ
    CompletionSource completion_source = CompletionSource::none;
};

struct NvmePowerState {
    int index = 0;
    std::uint32_t max_power_centiwatts = 0;
    std::uint32_t entry_latency_us = 0;
    std::uint32_t exit_latency_us = 0;
    bool non_operational = false;
};

struct NvmeController {
    std::string name; // nvme0
    std::string transport;
    std::string address;
    std::string model;
    std::string serial;
    std::string firmware;
    std::string subsystem_nqn;
    std::string state;
    std::optional<std::uint32_t> queue_count; // as sysfs says: admin + I/O queues
    std::vector<NvmePowerState> power_states; // Identify: add_nvme_power_states, live only
};

enum class DeviceKind { nvme, nvme_multipath_head, virtio_blk, other };
std::string_view to_string(DeviceKind kind);

struct BlockDevice {
    std::string name; // vda, nvme0n1, nvme1c1n1
    std::string dev;  // "major:minor"
    DeviceKind kind = DeviceKind::other;
    std::string model;      // device/model or controller model
    std::string serial;     // NVMe serial
    std::string wwid;       // NVMe wwid / eui / nguid
    std::string transport;  // pcie, tcp, virtio, ...
    std::string controller; // nvme0 for a namespace or path
    std::optional<std::uint32_t> nsid;
    bool hidden = false;               // a multipath path disk
    std::string multipath_head;        // for a path: its head disk
    std::vector<std::string> paths;    // for a head: its path disks
    std::vector<HardwareQueue> queues; // empty for a bio-based head
};

struct Topology {
    std::vector<int> online_cpus;
    std::vector<Cpu> cpus; // online CPUs, by id
    std::string cpuidle_driver;
    std::string cpuidle_governor;
    LatencyLimit cpu_dma_latency; // the global aggregate
    bool cpu_dma_latency_known = false;
    std::vector<NvmeController> controllers;
    std::vector<BlockDevice> devices; // sorted by name
    std::vector<std::string> warnings;

    const Cpu* cpu(int id) const;
    const BlockDevice* device(std::string_view name) const;
    const NvmeController* controller(std::string_view name) const;
};

} // namespace latgov
