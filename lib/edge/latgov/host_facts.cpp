#include "latgov/host_facts.hpp"

#include "latgov/journal.hpp"
#include "latgov/parse.hpp"
#include "latgov/qos.hpp"
#include "latgov/runtime_dir.hpp"

#include <algorithm>
#include <cerrno>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <initializer_list>
#include <limits>
#include <map>
#include <set>
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

// A limit in status.json: null (none) or a whole number of microseconds
// /dev/cpu_dma_latency could hold; anything else is not what latgovd writes.
// (A struct rather than an optional of LatencyLimit, itself an optional:
// GCC 12 warns of a maybe-uninitialized member in the nested one.)
struct StatusLimit {
    bool valid = false;
    LatencyLimit limit;
};

StatusLimit status_limit(const nlohmann::json& value) {
    if (value.is_null())
        return {true, LatencyLimit{}};
    if (!value.is_number_integer() || value.get<std::int64_t>() < 0 ||
        value.get<std::uint64_t>() > std::numeric_limits<std::uint32_t>::max())
        return {};
    return {true, LatencyLimit{value.get<std::uint32_t>()}};
}

// The CPU number of one entry of status.json's "cpus", nullopt when it is
// not one.
std::optional<int> status_cpu(const nlohmann::json& entry) {
    if (!entry.is_object())
        return std::nullopt;
    const auto it = entry.find("cpu");
    if (it == entry.end() || !it->is_number_integer() || it->get<std::int64_t>() < 0 ||
        it->get<std::uint64_t>() > static_cast<std::uint64_t>(std::numeric_limits<int>::max()))
        return std::nullopt;
    return it->get<int>();
}

// The CPUs whose value the journal in `runtime_dir` says latgov may have
// written. The status lags a hold by up to status_interval_ms; the journal
// never does (a record is written before its CPU's file), so a CPU held
// since the last status is not taken for another writer's. None when the
// journal cannot be read (not root; not a regular file) or is of an earlier
// boot or of another root; only while the status's latgovd runs (the
// caller checks).
std::set<int> journaled_holds(const SysRoot& root, const std::filesystem::path& runtime_dir,
                              const std::map<int, LatencyLimit>& values) {
    const auto journal = runtime_dir / journal_file_name;
    const auto text = read_journal(journal);
    if (!text || text->boot_id != boot_id_of(root) || !check_journal_root(*text, root, journal))
        return {};
    std::set<int> cpus;
    for (const auto& entry : text->entries)
        if (auto value = values.find(entry.cpu);
            value != values.end() &&
            restore_action(entry, value->second) == RestoreAction::write_original)
            cpus.insert(entry.cpu);
    return cpus;
}

} // namespace

namespace {

// What a running latgovd's status says it holds, into `f`; what makes it
// not a status latgovd writes, as "<path>: <key>: <what>".
std::optional<std::string> read_status_holds(const nlohmann::json& status, const std::string& path,
                                             HostFacts& f) {
    auto malformed = [&](const std::string& key, std::string_view what) {
        return path + ": " + key + ": " + std::string(what);
    };
    if (const auto pid = status.find("pid"); pid == status.end())
        return malformed("pid", "missing");
    else if (!pid->is_number_integer() || pid->get<std::int64_t>() <= 0)
        return malformed("pid", "must be a process id, got " + pid->dump());
    if (const auto global = status.find("global_limit_us"); global != status.end()) {
        const auto limit = status_limit(*global);
        if (!limit.valid)
            return malformed("global_limit_us",
                             "must be null or a number of microseconds, got " + global->dump());
        f.latgov_global_limit = limit.limit;
    }
    const auto cpus = status.find("cpus");
    if (cpus != status.end() && !cpus->is_array())
        return malformed("cpus", "must be an array, got " + cpus->dump());
    for (size_t i = 0; cpus != status.end() && i < cpus->size(); ++i) {
        const auto& c = (*cpus)[i];
        const std::string key = "cpus[" + std::to_string(i) + "]";
        const auto cpu = status_cpu(c);
        if (!cpu)
            return malformed(key + ".cpu",
                             "must be a CPU number, got " + (c.is_object() && c.contains("cpu")
                                                                 ? c["cpu"].dump()
                                                                 : std::string("nothing")));
        const auto limit = c.find("limit_us");
        if (limit == c.end())
            continue;
        if (!status_limit(*limit).valid)
            return malformed(key + ".limit_us",
                             "must be null or a number of microseconds, got " + limit->dump());
        if (!limit->is_null())
            f.latgov_held_cpus.insert(*cpu);
    }
    return std::nullopt;
}

} // namespace

Result<HostFacts> read_host_facts(const SysRoot& root, const Topology& topology,
                                  const nlohmann::json& status, const StatusPlace& place) {
    HostFacts f;
    f.cpuidle_driver = topology.cpuidle_driver;
    f.cpuidle_governor = topology.cpuidle_governor;
    f.cpu_dma_latency_known = topology.cpu_dma_latency_known;
    f.cpu_dma_latency = topology.cpu_dma_latency;
    for (const auto& cpu : topology.cpus)
        if (cpu.resume_latency_known)
            f.cpu_values[cpu.id] = cpu.resume_latency;
    f.snapshot = !root.is_live();
    f.status_from_snapshot = !place.of_this_host();
    if (status.is_object() && place.of_this_host())
        f.latgov_gone_pid = status_writer_gone(place.dir(), status);
    if (status.is_object() && !f.latgov_gone_pid) {
        f.latgov_running = true;
        // A status that is not what latgovd writes tells nothing of what it
        // holds: a FIX naming the field, as one that does not parse; the
        // journal still tells which values are latgov's.
        const auto path = (place.dir() / status_file_name).string();
        if (auto error = read_status_holds(status, path, f)) {
            f.status_error = std::move(*error);
            f.latgov_held_cpus.clear();
            f.latgov_global_limit.reset();
        }
        if (place.of_this_host())
            f.latgov_held_cpus.merge(journaled_holds(root, place.dir(), f.cpu_values));
    }
    const auto mounts = root.read("/proc/mounts");
    if (mounts)
        f.run_fstype = mount_fstype(*mounts, "/run");
    else if (f.snapshot)
        f.mounts = Found::unknown;
    // In a snapshot a file it lacks may have been there uncaptured: unknown,
    // unless its /proc/mounts shows nothing mounted to hold it.
    auto may_be_mounted = [&](std::string_view path, std::string_view fstype) {
        return !mounts || mount_fstype(*mounts, path) == fstype;
    };
    f.tracefs_events = found_any(root, {"/sys/kernel/tracing/events/block/block_getrq/id",
                                        "/sys/kernel/debug/tracing/events/block/block_getrq/id"});
    if (f.snapshot && f.tracefs_events == Found::no &&
        (may_be_mounted("/sys/kernel/tracing/events", "tracefs") ||
         may_be_mounted("/sys/kernel/debug/tracing/events", "tracefs")))
        f.tracefs_events = Found::unknown;
    f.debugfs_block = found_any(root, {"/sys/kernel/debug/block"});
    if (f.snapshot && f.debugfs_block == Found::no &&
        may_be_mounted("/sys/kernel/debug/block", "debugfs"))
        f.debugfs_block = Found::unknown;
    f.warnings = topology.warnings;
    // Missing, they are unknown; there and unparsable, a warning says so.
    auto parsed = [&](const std::string& path, auto parse) -> decltype(parse(std::string_view{})) {
        auto text = root.read(path);
        if (!text)
            return text.error();
        auto value = parse(*text);
        if (!value)
            f.warnings.push_back("Failed to parse " + path + ": " + value.error().message);
        return value;
    };
    if (auto ps = parsed("/sys/module/nvme_core/parameters/default_ps_max_latency_us", parse_u64))
        f.nvme_ps_max_latency_us = *ps;
    f.has_nvme = !topology.controllers.empty();
    if (auto cpus = parsed("/sys/devices/system/cpu/isolated", parse_cpu_list))
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
    return format_writer_gone(status_writer_running(runtime_dir, status), status);
}

std::string format_writer_gone(std::optional<bool> running, const nlohmann::json& status) {
    const auto pid = running == false ? status_pid(status) : std::nullopt;
    if (!pid)
        return "";
    return fmt::format("The latgovd that wrote this status (pid {}) is not running: the limits "
                       "it shows may still be held. `latgovd --restore` puts back what its "
                       "journal records.\n",
                       *pid);
}

std::string format_other_holders(const SysRoot& root, const nlohmann::json& status,
                                 const StatusPlace& place) {
    std::vector<std::string> others;
    std::string unknown; // what could not be read, said rather than taken for no holder
    if (auto bytes = root.read("/dev/cpu_dma_latency")) {
        if (auto global = parse_cpu_dma_latency(*bytes); global && *global) {
            const auto own = status.is_object()
                                 ? status_limit(status.value("global_limit_us", nlohmann::json()))
                                 : StatusLimit{};
            if (!own.valid || own.limit != *global)
                others.push_back(fmt::format("/dev/cpu_dma_latency {} us", **global));
        }
    } else if (root.exists("/dev/cpu_dma_latency")) {
        unknown = "; /dev/cpu_dma_latency not known (" + bytes.error().message + ")";
    }
    const auto cpus = status.is_object() ? status.value("cpus", nlohmann::json::array())
                                         : nlohmann::json::array();
    std::map<int, LatencyLimit> values; // of the CPUs the status does not show held
    for (const auto& c : cpus.is_array() ? cpus : nlohmann::json::array()) {
        const auto cpu = status_cpu(c);
        if (!cpu)
            continue; // not what latgovd writes: `latgov doctor` says so
        if (!c.value("limit_us", nlohmann::json()).is_null())
            continue; // latgov's own
        auto text = root.read(fmt::format("/sys/devices/system/cpu/cpu{}/power/"
                                          "pm_qos_resume_latency_us",
                                          *cpu));
        if (!text)
            continue;
        if (auto value = parse_resume_latency(trim(*text)); value && *value)
            values[*cpu] = *value;
    }
    const auto journaled =
        place.of_this_host() && status.is_object() && !status_writer_gone(place.dir(), status)
            ? journaled_holds(root, place.dir(), values)
            : std::set<int>{};
    for (const auto& [cpu, value] : values)
        if (!journaled.contains(cpu))
            others.push_back(fmt::format("cpu{} {}", cpu, format_resume_latency(value)));
    return others.empty() ? "other holders: none" + unknown + "\n"
                          : fmt::format("other holders (kept, not governed by latgov): {}{}\n",
                                        fmt::join(others, ", "), unknown);
}

} // namespace latgov
