#include "latgov/status.hpp"

#include "latgov/json.hpp"

#include <fmt/format.h>
#include <limits>
#include <stdexcept>
#include <unistd.h>

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
        devices.push_back({{"name", d.name},
                           {"mode", to_string(d.policy.mode)},
                           {"backend", to_string(d.policy.backend)},
                           {"rule", d.rule},
                           {"observed_latency_us", mean ? json(*mean) : json(nullptr)},
                           {"limit_us", limit_json(d.limit)},
                           {"limit_from", in.governor.limit_reason(d)},
                           {"gap_us", gap ? json(*gap) : json(nullptr)},
                           {"experimenting", in.governor.experiments(d)},
                           {"linger_ms", in.governor.linger_of(d).count()},
                           {"linger_from", d.policy.linger_auto ? "auto" : "linger_ms"},
                           {"waiter_cpus", d.policy.waiter_cpus},
                           {"prearm", d.policy.prearm},
                           {"waiters", std::move(waiters)},
                           {"active_queues", std::move(active)}});
    }
    json evidence = json::array();
    const EvidenceBook& book = in.governor.evidence();
    for (const auto& [cls, e] : book.gaps) {
        if (e.gains.pairs == 0 && e.verdict == Verdict::uncertain && !e.expired)
            continue;
        const bool stamped = e.verdict != Verdict::uncertain && e.learnt_at != 0;
        const auto waits_for = verdict_waits_for(book, cls);
        evidence.push_back(
            {{"gap", gap_class_label(cls)},
             {"verdict", to_string(e.verdict)},
             {"pairs", e.gains.pairs},
             {"pairs_gained", e.gains.wait_above},
             {"pairs_lost", e.gains.wait_below},
             {"wait_gain", e.gains.wait_mean()},
             {"service_gain", e.gains.service_mean()},
             {"carried_from",
              e.inferred_from ? json(gap_class_label(*e.inferred_from)) : json(nullptr)},
             {"device", e.device},
             {"learnt_at", stamped ? json(e.learnt_at) : json(nullptr)},
             // The first second refresh_verdicts finds it past its limit (at
             // the latest, while it waits for its source).
             {"measured_again_at",
              stamped
                  ? json(e.learnt_at + verdict_age_limit(book, cls, verdict_max_age).count() + 1)
                  : json(nullptr)},
             {"waits_for", waits_for ? json(gap_class_label(*waits_for)) : json(nullptr)},
             {"confirmations", e.confirmations},
             {"expired", e.expired ? json(to_string(*e.expired)) : json(nullptr)}});
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
    status["sampling_error"] = in.sampling_error.empty() ? json(nullptr) : json(in.sampling_error);
    json onset = {{"count", in.onset.count}, {"on_issuing_cpu", in.onset.on_issuing_cpu}};
    auto quantiles = [&](const OnsetSummary& s, const std::string& prefix) {
        if (s.count == 0)
            return;
        onset[prefix + "p50_us"] = s.p50_us;
        onset[prefix + "p99_us"] = s.p99_us;
        onset[prefix + "max_us"] = s.max_us;
    };
    quantiles(in.onset, "");
    quantiles(in.onset_wake, "wake_");
    quantiles(in.onset_work, "work_");
    status["onset_delay"] = std::move(onset);
    const auto& periodic = in.governor.periodic();
    json prearm = {{"hits", periodic.hits()}, {"misses", periodic.misses()}};
    if (auto period = periodic.period()) {
        prearm["period_us"] = static_cast<double>(period->period.count()) / 1000.0;
        prearm["spread_us"] = static_cast<double>(period->spread.count()) / 1000.0;
        prearm["lead_us"] = static_cast<double>(periodic.lead().count()) / 1000.0;
        prearm["late_us"] = static_cast<double>(periodic.late().count()) / 1000.0;
        prearm["grace_us"] = static_cast<double>(periodic.grace().count()) / 1000.0;
    }
    status["prearm"] = std::move(prearm);
    return status;
}

Result<void> write_status(const RuntimeDir& dir, const json& status) {
    // Names from the machine (a drop-in's file name, a disk model) need not
    // be UTF-8: replace bad bytes rather than throw.
    const std::string text = dump_text(status, 2) + "\n";
    return dir.write_atomic(status_file_name, text, 0644);
}

} // namespace latgov
