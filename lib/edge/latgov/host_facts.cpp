#include "latgov/host_facts.hpp"

#include "latgov/parse.hpp"
#include "latgov/runtime_dir.hpp"

#include <algorithm>
#include <cerrno>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <initializer_list>
#include <limits>
#include <sys/stat.h>
#include <vector>

namespace latgov {

namespace {

// Found if one of `paths` is; unreadable if none is and one of them could
// not be looked up for want of permission (only a live root can tell).
Found found_any(const SysRoot& root, std::initializer_list<std::string_view> paths) {
    bool denied = false;
    for (auto path : paths) {
        if (root.exists(path))
            return Found::yes;
        struct stat st {};
        denied = denied ||
                 (root.is_live() && ::stat(std::string(path).c_str(), &st) != 0 && errno == EACCES);
    }
    return denied ? Found::unreadable : Found::no;
}

} // namespace

HostFacts read_host_facts(const SysRoot& root, const Topology& topology,
                          const nlohmann::json& status, const std::filesystem::path& runtime_dir) {
    HostFacts f;
    f.cpuidle_driver = topology.cpuidle_driver;
    f.cpuidle_governor = topology.cpuidle_governor;
    f.cpu_dma_latency_known = topology.cpu_dma_latency_known;
    f.cpu_dma_latency = topology.cpu_dma_latency;
    for (const auto& cpu : topology.cpus)
        if (cpu.resume_latency_known)
            f.cpu_values[cpu.id] = cpu.resume_latency;
    if (status.is_object())
        f.latgov_gone_pid = status_writer_gone(runtime_dir, status);
    if (status.is_object() && !f.latgov_gone_pid) {
        f.latgov_running = true;
        if (status.contains("global_limit_us") && status["global_limit_us"].is_number())
            f.latgov_global_limit = status["global_limit_us"].get<std::uint32_t>();
        for (const auto& c : status.value("cpus", nlohmann::json::array()))
            if (c.contains("limit_us") && !c["limit_us"].is_null())
                f.latgov_held_cpus.insert(c["cpu"].get<int>());
    }
    f.tracefs_events =
        found_any(root, {"/sys/kernel/tracing/events/block/block_rq_issue/id",
                         "/sys/kernel/debug/tracing/events/block/block_rq_issue/id"});
    f.debugfs_block = found_any(root, {"/sys/kernel/debug/block"});
    if (auto mounts = root.read("/proc/mounts"))
        f.run_fstype = mount_fstype(*mounts, "/run");
    if (auto ps = root.read("/sys/module/nvme_core/parameters/default_ps_max_latency_us"))
        if (auto value = parse_u64(trim(*ps)))
            f.nvme_ps_max_latency_us = static_cast<long>(*value);
    f.has_nvme = !topology.controllers.empty();
    if (auto isolated = root.read("/sys/devices/system/cpu/isolated"))
        if (auto cpus = parse_cpu_list(trim(*isolated)))
            f.isolated_cpus.insert(cpus->begin(), cpus->end());
    for (const auto& device : topology.devices)
        for (const auto& q : device.queues)
            if (q.irq)
                for (int cpu : q.completion_cpus)
                    f.irqs_by_cpu[cpu].push_back(q.irq_name.empty() ? fmt::format("{}", *q.irq)
                                                                    : q.irq_name);
    return f;
}

namespace {

std::optional<int> status_pid(const nlohmann::json& status) {
    if (!status.is_object())
        return std::nullopt;
    const auto& pid = status.value("pid", nlohmann::json());
    if (!pid.is_number_integer() || pid.get<long long>() <= 0 ||
        pid.get<long long>() > std::numeric_limits<int>::max())
        return std::nullopt;
    return pid.get<int>();
}

} // namespace

std::optional<bool> status_writer_running(const std::filesystem::path& runtime_dir,
                                          const nlohmann::json& status) {
    const auto pid = status_pid(status);
    if (!pid)
        return std::nullopt;
    // The lock's holders, not the pid alone: a pid may be reused, hidden
    // (hidepid) or of another namespace, and the binary may run under
    // another name. /proc/locks is none of these.
    const auto holders = runtime_dir_lock_holders(runtime_dir);
    if (!holders)
        return std::nullopt;
    if (std::find(holders->begin(), holders->end(), *pid) != holders->end())
        return true;
    // A holder in another pid namespace (0) may be it.
    if (std::find(holders->begin(), holders->end(), 0) != holders->end())
        return std::nullopt;
    // Nobody, or another process: `latgov calibrate`, which runs only while
    // no latgovd does, or a latgovd that has not written its status yet.
    return false;
}

std::optional<int> status_writer_gone(const std::filesystem::path& runtime_dir,
                                      const nlohmann::json& status) {
    if (status_writer_running(runtime_dir, status) == false)
        return status_pid(status);
    return std::nullopt;
}

std::string format_writer_gone(const std::filesystem::path& runtime_dir,
                               const nlohmann::json& status) {
    const auto pid = status_writer_gone(runtime_dir, status);
    if (!pid)
        return "";
    return fmt::format("The latgovd that wrote this status (pid {}) is not running: the limits "
                       "it shows may still be held. `latgovd --restore` puts back what its "
                       "journal records.\n",
                       *pid);
}

std::string format_other_holders(const SysRoot& root, const nlohmann::json& status) {
    std::vector<std::string> others;
    if (auto bytes = root.read("/dev/cpu_dma_latency"))
        if (auto global = parse_cpu_dma_latency(*bytes); global && *global) {
            const auto& own = status.value("global_limit_us", nlohmann::json());
            if (!own.is_number() || own.get<std::uint32_t>() != **global)
                others.push_back(fmt::format("/dev/cpu_dma_latency {} us", **global));
        }
    for (const auto& c : status.value("cpus", nlohmann::json::array())) {
        if (!c.value("limit_us", nlohmann::json()).is_null())
            continue; // latgov's own
        const int cpu = c.value("cpu", -1);
        auto text = root.read(fmt::format("/sys/devices/system/cpu/cpu{}/power/"
                                          "pm_qos_resume_latency_us",
                                          cpu));
        if (!text)
            continue;
        if (auto value = parse_resume_latency(trim(*text)); value && *value)
            others.push_back(fmt::format("cpu{} {}", cpu, format_resume_latency(*value)));
    }
    return others.empty() ? "other holders: none\n"
                          : fmt::format("other holders (kept, not governed by latgov): {}\n",
                                        fmt::join(others, ", "));
}

} // namespace latgov
