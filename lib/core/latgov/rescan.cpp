#include "latgov/rescan.hpp"

#include <algorithm>
#include <fmt/format.h>

namespace latgov {

std::string_view to_string(RescanCause cause) {
    switch (cause) {
    case RescanCause::start:
        return "start";
    case RescanCause::reload:
        return "reload";
    case RescanCause::uevent:
        return "uevent";
    case RescanCause::hotplug:
        return "hotplug";
    case RescanCause::irq_moved:
        return "irq_moved";
    case RescanCause::resumed:
        return "resumed";
    case RescanCause::device_error:
        return "device_error";
    case RescanCause::periodic:
        return "periodic";
    }
    return "unknown";
}

ChangeBurst add_change(ChangeBurst burst, TimePoint now) {
    if (!burst.first)
        burst.first = now;
    burst.last = std::max(burst.last, now);
    ++burst.count;
    return burst;
}

std::optional<TimePoint> burst_rescan_at(const ChangeBurst& burst, TimePoint retry_not_before) {
    if (!burst.first)
        return std::nullopt;
    const auto debounced = std::min(burst.last + burst_quiet, *burst.first + burst_max_delay);
    return std::max(debounced, retry_not_before);
}

bool online_check_due(const ChangeBurst& pending, TimePoint last_check, TimePoint now) {
    return !pending.first && now - last_check >= online_check_interval;
}

std::optional<std::chrono::nanoseconds> suspended_time(std::chrono::nanoseconds mono_before,
                                                       std::chrono::nanoseconds boot,
                                                       std::chrono::nanoseconds mono_after) {
    if (mono_after < mono_before || mono_after - mono_before > max_clock_reading)
        return std::nullopt;
    return boot - (mono_before + (mono_after - mono_before) / 2);
}

bool slept_between(std::chrono::nanoseconds before, std::chrono::nanoseconds now) {
    // Far above what max_clock_reading leaves of skew, far below any suspend.
    constexpr std::chrono::milliseconds skew{10};
    return now - before > skew;
}

std::string topology_fingerprint(const Topology& t) {
    std::string out = fmt::format("online {}\nidle {} {}\n", format_cpu_list(t.online_cpus),
                                  t.cpuidle_driver, t.cpuidle_governor);
    for (const auto& cpu : t.cpus) {
        out += fmt::format("cpu {}", cpu.id);
        for (const auto& s : cpu.idle_states)
            out += fmt::format(" {}:{}:{}:{}", s.name, s.exit_latency_us, s.target_residency_us,
                               s.disabled ? 1 : 0);
        out += '\n';
    }
    for (const auto& d : t.devices) {
        // What [[device]] rules match on too: another disk under the same
        // name may take another policy.
        out += fmt::format("dev {} {} {} ctrl={} hidden={} head={} paths={} model={:?} "
                           "serial={:?} wwid={:?} transport={} nsid={}\n",
                           d.name, d.dev, to_string(d.kind), d.controller, d.hidden ? 1 : 0,
                           d.multipath_head, fmt::join(d.paths, ","), d.model, d.serial, d.wwid,
                           d.transport, d.nsid ? std::to_string(*d.nsid) : "-");
        for (const auto& q : d.queues)
            out += fmt::format("  q{} {} irq={} {} submit={} complete={} ({})\n", q.index,
                               to_string(q.type), q.irq ? std::to_string(*q.irq) : "-", q.irq_name,
                               format_cpu_list(q.submit_cpus), format_cpu_list(q.completion_cpus),
                               to_string(q.completion_source));
    }
    return out;
}

} // namespace latgov
