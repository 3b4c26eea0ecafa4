#include "latgov/topology_json.hpp"

#include "latgov/json.hpp"
#include "latgov/parse.hpp"

#include <fmt/format.h>

namespace latgov {

namespace {

using json = nlohmann::ordered_json;

json cpu_json(const Cpu& cpu) {
    json states = json::array();
    for (const auto& s : cpu.idle_states)
        states.push_back({{"index", s.index},
                          {"name", s.name},
                          {"exit_latency_us", s.exit_latency_us},
                          {"target_residency_us", s.target_residency_us},
                          {"disabled", s.disabled}});
    return {{"cpu", cpu.id},
            {"resume_latency_us", limit_json(cpu.resume_latency)},
            {"idle_states", std::move(states)},
            // False: a cpuidle driver is active but the table could not be
            // read in full, and idle_states (then empty) says nothing.
            {"idle_states_known", cpu.idle_states_known}};
}

json controller_json(const NvmeController& c) {
    json states = json::array();
    for (const auto& p : c.power_states)
        states.push_back({{"index", p.index},
                          {"max_power_centiwatts", p.max_power_centiwatts},
                          {"entry_latency_us", p.entry_latency_us},
                          {"exit_latency_us", p.exit_latency_us},
                          {"non_operational", p.non_operational}});
    return {{"name", c.name},
            {"transport", c.transport},
            {"address", c.address},
            {"model", c.model},
            {"serial", c.serial},
            {"firmware", c.firmware},
            {"subsystem_nqn", c.subsystem_nqn},
            {"state", c.state},
            {"queue_count", c.queue_count ? json(*c.queue_count) : json(nullptr)},
            {"power_states", std::move(states)}};
}

json queue_json(const HardwareQueue& q) {
    return {{"index", q.index},
            {"type", to_string(q.type)},
            {"irq", q.irq ? json(*q.irq) : json(nullptr)},
            {"irq_name", q.irq_name},
            {"completion_cpus", q.completion_cpus},
            {"completion_source", to_string(q.completion_source)},
            {"irq_affinity", q.irq_affinity},
            {"submit_cpus", q.submit_cpus}};
}

json device_json(const BlockDevice& d) {
    json queues = json::array();
    for (const auto& q : d.queues)
        queues.push_back(queue_json(q));
    return {{"name", d.name},
            {"dev", d.dev},
            {"kind", to_string(d.kind)},
            {"model", d.model},
            {"serial", d.serial},
            {"wwid", d.wwid},
            {"transport", d.transport},
            {"controller", d.controller},
            {"nsid", d.nsid ? json(*d.nsid) : json(nullptr)},
            {"hidden", d.hidden},
            {"multipath_head", d.multipath_head},
            {"paths", d.paths},
            {"queues", std::move(queues)}};
}

} // namespace

json to_json(const Topology& t) {
    json cpus = json::array();
    for (const auto& cpu : t.cpus)
        cpus.push_back(cpu_json(cpu));
    json controllers = json::array();
    for (const auto& c : t.controllers)
        controllers.push_back(controller_json(c));
    json devices = json::array();
    for (const auto& d : t.devices)
        devices.push_back(device_json(d));
    return {{"schema", "latgov.topology/1"},
            {"online_cpus", t.online_cpus},
            {"cpuidle_driver", t.cpuidle_driver},
            {"cpuidle_governor", t.cpuidle_governor},
            {"cpu_dma_latency_known", t.cpu_dma_latency_known},
            {"cpu_dma_latency_us", limit_json(t.cpu_dma_latency)},
            {"cpus", std::move(cpus)},
            {"controllers", std::move(controllers)},
            {"devices", std::move(devices)},
            {"warnings", t.warnings}};
}

std::string format_topology_table(const Topology& t) {
    std::string out = fmt::format("{:<12} {:>5} {:<8} {:>5} {:<16} {:<16} {}\n", "DEVICE", "QUEUE",
                                  "TYPE", "IRQ", "IRQ NAME", "COMPLETION CPUS", "SUBMIT CPUS");
    for (const auto& d : t.devices) {
        if (d.queues.empty()) {
            out += fmt::format("{:<12} {:>5} {:<8} {:>5} {:<16} paths: {}\n",
                               terminal_safe_field(d.name), "-", "-", "-", "-",
                               terminal_safe_field(fmt::format("{}", fmt::join(d.paths, ", "))));
            continue;
        }
        for (const auto& q : d.queues) {
            std::string completion;
            switch (q.completion_source) {
            case CompletionSource::irq_effective_affinity:
                completion = format_cpu_list(q.completion_cpus);
                break;
            case CompletionSource::irq_affinity:
                completion = format_cpu_list(q.completion_cpus) + " (affinity)";
                break;
            case CompletionSource::submit_cpus:
                completion = format_cpu_list(q.completion_cpus) + " (submitters)";
                break;
            case CompletionSource::none:
                completion = "- (polled)";
                break;
            }
            out += fmt::format("{:<12} {:>5} {:<8} {:>5} {:<16} {:<16} {}\n",
                               terminal_safe_field(d.name), q.index, to_string(q.type),
                               q.irq ? std::to_string(*q.irq) : "-",
                               q.irq_name.empty() ? "-" : terminal_safe_field(q.irq_name),
                               completion, format_cpu_list(q.submit_cpus));
        }
    }
    return out;
}

} // namespace latgov
