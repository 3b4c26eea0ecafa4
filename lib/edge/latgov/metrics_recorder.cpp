#include "latgov/metrics_recorder.hpp"

#include <chrono>
#include <fmt/format.h>

namespace latgov {

MetricsRecorder::MetricsRecorder(double start_time_seconds)
    : start_time_seconds_(start_time_seconds) {}

void MetricsRecorder::observe_percpu(const std::map<int, PerCpuHolder::Held>& held, TimePoint now) {
    for (auto it = open_.begin(); it != open_.end();) {
        if (held.contains(it->first)) {
            ++it;
            continue;
        }
        held_seconds_[it->first] += std::chrono::duration<double>(now - it->second).count();
        ++releases_;
        it = open_.erase(it);
    }
    for (const auto& [cpu, h] : held)
        if (open_.emplace(cpu, h.since).second)
            ++holds_;
}

MetricsSnapshot MetricsRecorder::snapshot(const StatusInput& in, IoEventsState io_events,
                                          const LogCounts& logged) const {
    MetricsSnapshot s;
    s.start_time_seconds = start_time_seconds_;
    for (const auto& cpu : in.topology.cpus) {
        CpuMetrics c;
        c.cpu = cpu.id;
        if (auto h = in.percpu.held().find(cpu.id); h != in.percpu.held().end()) {
            c.held = true;
            c.limit = h->second.written;
            if (auto why = in.holds.percpu.find(cpu.id); why != in.holds.percpu.end())
                for (const auto& q : why->second.held_for)
                    c.reason +=
                        fmt::format("{}{}/{}", c.reason.empty() ? "" : ",", q.device, q.queue);
        }
        if (auto closed = held_seconds_.find(cpu.id); closed != held_seconds_.end())
            c.held_seconds = closed->second;
        if (auto open = open_.find(cpu.id); open != open_.end())
            c.held_seconds += std::chrono::duration<double>(in.now - open->second).count();
        c.yielded = in.percpu.yielded().contains(cpu.id);
        s.cpus.push_back(std::move(c));
    }
    for (const auto& d : in.governor.devices()) {
        DeviceMetrics m{d.name,
                        std::string(to_string(d.policy.mode)),
                        std::string(to_string(d.policy.backend)),
                        d.latency.mean_us(),
                        d.limit,
                        {}};
        for (const auto& q : d.queues)
            m.queues.push_back({q.index, q.activity.active});
        s.devices.push_back(std::move(m));
    }
    s.global_held = in.global.holding();
    s.global_limit = in.global.held();
    s.holds = holds_;
    s.releases = releases_;
    s.rescans = rescans_;
    s.prearm_hits = prearm_hits_;
    s.prearm_misses = prearm_misses_;
    s.logged = logged;
    s.io_events = io_events;
    s.onset = onset_;
    return s;
}

} // namespace latgov
