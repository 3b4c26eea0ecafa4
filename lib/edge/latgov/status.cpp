#include "latgov/status.hpp"

#include "latgov/json.hpp"
#include "latgov/replace_file.hpp"

#include <fmt/format.h>

namespace latgov {

namespace {

using json = nlohmann::ordered_json;

json queues_json(const std::vector<QueueKey>& keys) {
    json out = json::array();
    for (const auto& k : keys)
        out.push_back({{"device", k.device}, {"queue", k.queue}, {"why", to_string(k.role)}});
    return out;
}

double seconds_between(TimePoint since, TimePoint now) {
    return std::chrono::duration<double>(now - since).count();
}

} // namespace

json build_status(const StatusInput& in) {
    json cpus = json::array();
    for (const auto& cpu : in.topology.cpus) {
        json entry = {{"cpu", cpu.id}, {"limit_us", nullptr}, {"held_for", json::array()}};
        auto held = in.percpu.held().find(cpu.id);
        if (held != in.percpu.held().end()) {
            entry["limit_us"] = limit_json(held->second.written);
            entry["held_seconds"] = seconds_between(held->second.since, in.now);
            entry["original"] = format_resume_latency(held->second.original);
            if (auto why = in.holds.percpu.find(cpu.id); why != in.holds.percpu.end())
                entry["held_for"] = queues_json(why->second.held_for);
        }
        if (auto dry = in.holds.dry_run.find(cpu.id); dry != in.holds.dry_run.end()) {
            entry["dry_run_limit_us"] = limit_json(dry->second.limit);
            entry["dry_run_for"] = queues_json(dry->second.held_for);
        }
        cpus.push_back(std::move(entry));
    }
    json devices = json::array();
    for (const auto& d : in.governor.devices()) {
        json active = json::array();
        for (const auto& q : d.queues)
            if (q.activity.active)
                active.push_back(q.index);
        json waiters = json::array();
        for (const auto& q : d.queues)
            for (int cpu : q.waiters)
                waiters.push_back({{"queue", q.index}, {"cpu", cpu}});
        auto mean = d.latency.mean_us();
        auto gap = d.evidence.gap_us();
        devices.push_back(
            {{"name", d.name},
             {"mode", to_string(d.policy.mode)},
             {"backend", to_string(d.policy.backend)},
             {"rule", d.rule},
             {"observed_latency_us", mean ? json(*mean) : json(nullptr)},
             {"limit_us", limit_json(d.limit)},
             {"limit_from", in.governor.limit_reason(d)},
             {"gap_us", gap ? json(*gap) : json(nullptr)},
             {"experimenting", in.governor.evidence_decides(d) && d.decision.experimenting},
             {"linger_ms", in.governor.linger_of(d).count()},
             {"linger_from", d.policy.linger_auto ? "auto" : "linger_ms"},
             {"waiter_cpus", d.policy.waiter_cpus},
             {"waiters", std::move(waiters)},
             {"active_queues", std::move(active)}});
    }
    json evidence = json::array();
    for (const auto& [cls, e] : in.governor.evidence().gaps) {
        if (e.gains.pairs == 0 && e.verdict == Verdict::uncertain)
            continue;
        evidence.push_back({{"gap", gap_class_label(cls)},
                            {"verdict", to_string(e.verdict)},
                            {"pairs", e.gains.pairs},
                            {"cycle_gain", e.gains.cycle_mean()},
                            {"service_gain", e.gains.service_mean()},
                            {"device", e.device}});
    }
    json status = {
        {"schema", "latgov.status/1"},
        {"pid", ::getpid()},
        {"cpuidle_driver", in.topology.cpuidle_driver},
        {"cpuidle_governor", in.topology.cpuidle_governor},
        {"idle_costs", in.cost_source},
        {"cpus", std::move(cpus)},
        {"devices", std::move(devices)},
        {"evidence", std::move(evidence)},
        {"global_limit_us", in.global.holding() ? limit_json(in.global.held()) : json(nullptr)},
        {"global_held_for", queues_json(in.holds.global_for)}};
    if (in.global.holding())
        status["global_held_seconds"] = seconds_between(in.global.since(), in.now);
    status["io_events"] = in.io_events;
    json onset = {{"count", in.onset.count}};
    if (in.onset.count > 0) {
        onset["p50_us"] = in.onset.p50_us;
        onset["p99_us"] = in.onset.p99_us;
        onset["max_us"] = in.onset.max_us;
    }
    status["onset_delay"] = std::move(onset);
    return status;
}

Result<void> write_status(const std::filesystem::path& path, const json& status) {
    return replace_file(path, status.dump(2) + "\n");
}

std::string format_status(const nlohmann::json& s) {
    auto limit = [](const nlohmann::json& v) {
        return v.is_null()                   ? std::string("-")
               : v.get<std::uint32_t>() == 0 ? std::string("0 (poll)")
                                             : std::to_string(v.get<std::uint32_t>());
    };
    auto queues = [](const nlohmann::json& list) {
        std::string out;
        for (const auto& q : list)
            out += (out.empty() ? "" : ", ") + q["device"].get<std::string>() + "/" +
                   std::to_string(q["queue"].get<int>()) +
                   (q.contains("why") ? " (" + q["why"].get<std::string>() + ")" : "");
        return out.empty() ? std::string("-") : out;
    };
    std::string out =
        fmt::format("latgovd pid {}, cpuidle {}/{}, idle-state costs: {}\n", s["pid"].get<int>(),
                    s["cpuidle_driver"].get<std::string>(),
                    s["cpuidle_governor"].get<std::string>(), s["idle_costs"].get<std::string>());
    out +=
        fmt::format("global /dev/cpu_dma_latency held by latgov: {}", limit(s["global_limit_us"]));
    if (s.contains("global_held_seconds"))
        out += fmt::format(" for {:.1f} s because of {}", s["global_held_seconds"].get<double>(),
                           queues(s["global_held_for"]));
    out += "\n\n";
    out += fmt::format("{:<5} {:<10} {:<10} {}\n", "CPU", "LIMIT_US", "HELD_S", "BECAUSE OF");
    for (const auto& c : s["cpus"]) {
        out += fmt::format("{:<5} {:<10} {:<10} {}\n", c["cpu"].get<int>(), limit(c["limit_us"]),
                           c.contains("held_seconds")
                               ? fmt::format("{:.1f}", c["held_seconds"].get<double>())
                               : std::string("-"),
                           queues(c["held_for"]));
    }
    out += fmt::format("\n{:<12} {:<6} {:<8} {:<14} {:<9} {}\n", "DEVICE", "MODE", "BACKEND",
                       "OBSERVED_US", "LIMIT_US", "ACTIVE QUEUES");
    for (const auto& d : s["devices"]) {
        std::string active;
        for (const auto& q : d["active_queues"])
            active += (active.empty() ? "" : ",") + std::to_string(q.get<int>());
        out += fmt::format("{:<12} {:<6} {:<8} {:<14} {:<9} {}\n", d["name"].get<std::string>(),
                           d["mode"].get<std::string>(), d["backend"].get<std::string>(),
                           d["observed_latency_us"].is_null()
                               ? std::string("-")
                               : fmt::format("{:.1f}", d["observed_latency_us"].get<double>()),
                           limit(d["limit_us"]), active.empty() ? "-" : active);
    }
    out += "\n";
    for (const auto& d : s["devices"])
        if (d.contains("limit_from"))
            out += fmt::format("{}: limit from {}; linger {} ms ({})\n",
                               d["name"].get<std::string>(), d["limit_from"].get<std::string>(),
                               d["linger_ms"].get<long>(), d["linger_from"].get<std::string>());
    if (s.contains("evidence") && !s["evidence"].empty()) {
        out += "\nLearnt from live IO (held vs not, relative gain of the hold):\n";
        for (const auto& e : s["evidence"])
            out +=
                fmt::format("  gaps {:<14} {:<9} {:>3} pairs  cycle {:+.1f}%  service {:+.1f}%  "
                            "on {}\n",
                            e["gap"].get<std::string>(), e["verdict"].get<std::string>(),
                            e["pairs"].get<int>(), 100 * e["cycle_gain"].get<double>(),
                            100 * e["service_gain"].get<double>(), e["device"].get<std::string>());
    }
    return out;
}

} // namespace latgov
