#include "latgov/policy.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <iterator>
#include <utility>

namespace latgov {

Transition update_activity(QueueActivity& activity, bool io_seen, TimePoint now,
                           std::chrono::milliseconds linger) {
    if (io_seen) {
        activity.last_io = now;
        if (activity.active) {
            return Transition::none;
        }
        activity.active = true;
        activity.active_since = now;
        return Transition::activated;
    }
    if (activity.active && now - activity.last_io >= linger) {
        activity.active = false;
        return Transition::released;
    }
    return Transition::none;
}

std::vector<IdleCost> declared_costs(std::span<const IdleState> states) {
    std::vector<IdleCost> costs;
    costs.reserve(states.size());
    for (const IdleState& state : states) {
        costs.push_back({state.name, state.exit_latency_us,
                         static_cast<double>(state.exit_latency_us), state.disabled});
    }
    return costs;
}

IdleGovernorKind idle_governor_kind(std::string_view driver, std::string_view governor) {
    if (driver.empty() || driver == "none") {
        return IdleGovernorKind::none;
    }
    if (driver == "haltpoll" || governor == "haltpoll") {
        return IdleGovernorKind::zero_only;
    }
    return IdleGovernorKind::latency_aware;
}

double default_request_latency_us(std::string_view transport) {
    // Reasons in policy.hpp.
    static constexpr std::array<std::pair<std::string_view, double>, 6> defaults{{
        {"pcie", 80.0},
        {"virtio", 40.0},
        {"loop", 20.0},
        {"rdma", 100.0},
        {"fc", 150.0},
        {"tcp", 200.0},
    }};
    for (const auto& [name, latency_us] : defaults) {
        if (name == transport) {
            return latency_us;
        }
    }
    return 1000.0;
}

namespace {

LatencyLimit clamp_limit(LatencyLimit limit, const Policy& policy) {
    if (!limit) {
        return policy.max_limit_us;
    }
    std::uint32_t value = std::max(*limit, policy.min_limit_us);
    if (policy.max_limit_us) {
        value = std::min(value, *policy.max_limit_us);
    }
    return value;
}

} // namespace

LatencyLimit choose_limit(const Policy& policy, std::optional<double> observed_mean_us,
                          std::string_view transport, std::span<const IdleCost> states,
                          IdleGovernorKind kind) {
    switch (policy.mode) {
    case Mode::off:
        return std::nullopt;
    case Mode::fixed:
        return policy.limit_us;
    case Mode::automatic:
        break;
    }
    if (kind == IdleGovernorKind::none) {
        return std::nullopt;
    }

    // A NaN, infinite or negative mean is bad data: fall back to the transport
    // default rather than let it force poll-only or lift every constraint.
    const bool observed =
        observed_mean_us && std::isfinite(*observed_mean_us) && *observed_mean_us >= 0.0;
    const double mean_us = observed ? *observed_mean_us : default_request_latency_us(transport);
    const double allowed_us = policy.latency_fraction * mean_us;
    // POLL never leaves the CPU; its "cost" as measured is the wake-up path
    // itself, which no limit can remove.
    const auto fits = [allowed_us](const IdleCost& state) {
        return state.exit_latency_us == 0 || state.cost_us <= allowed_us;
    };

    // The kernel can only exclude by declared exit latency, so the limit must
    // stay below the smallest declared latency of any state that costs too much.
    std::optional<std::uint32_t> first_misfit_us;
    for (const IdleCost& state : states) {
        if (!state.disabled && !fits(state)) {
            first_misfit_us =
                std::min(first_misfit_us.value_or(state.exit_latency_us), state.exit_latency_us);
        }
    }
    if (!first_misfit_us) {
        return clamp_limit(std::nullopt, policy);
    }
    if (kind == IdleGovernorKind::zero_only) {
        return clamp_limit(0, policy);
    }

    // The deepest fitting state below the first misfit; 0 (POLL only) if none.
    std::uint32_t limit_us = 0;
    for (const IdleCost& state : states) {
        if (!state.disabled && fits(state) && state.exit_latency_us < *first_misfit_us) {
            limit_us = std::max(limit_us, state.exit_latency_us);
        }
    }
    return clamp_limit(limit_us, policy);
}

std::string_view to_string(HoldRole role) {
    return role == HoldRole::completes ? "completes" : "waits";
}

LatencyLimit strictest(LatencyLimit a, LatencyLimit b) {
    if (!a) {
        return b;
    }
    if (!b) {
        return a;
    }
    return std::min(*a, *b);
}

std::map<int, CpuHold> aggregate_cpu_limits(std::span<const QueueDemand> demands) {
    std::map<int, CpuHold> holds;
    for (const QueueDemand& demand : demands) {
        if (!demand.limit) {
            continue;
        }
        for (int cpu : demand.cpus) {
            auto it = holds.find(cpu);
            if (it == holds.end()) {
                holds.emplace(cpu, CpuHold{demand.limit, {demand.queue}});
                continue;
            }
            CpuHold& hold = it->second;
            if (*demand.limit < *hold.limit) {
                hold = CpuHold{demand.limit, {demand.queue}};
            } else if (*demand.limit == *hold.limit) {
                hold.held_for.push_back(demand.queue);
            }
        }
    }
    // Sorted and unique so that the status output is stable whatever the
    // order of the demands (and a CPU listed twice by a queue counts once).
    for (auto& [cpu, hold] : holds) {
        std::sort(hold.held_for.begin(), hold.held_for.end());
        hold.held_for.erase(std::unique(hold.held_for.begin(), hold.held_for.end()),
                            hold.held_for.end());
    }
    return holds;
}

std::vector<HoldChange> diff_holds(const std::map<int, CpuHold>& before,
                                   const std::map<int, CpuHold>& after) {
    const auto limit_of = [](const std::map<int, CpuHold>& holds, int cpu) -> LatencyLimit {
        const auto it = holds.find(cpu);
        return it == holds.end() ? std::nullopt : it->second.limit;
    };
    std::vector<int> before_cpus;
    std::vector<int> after_cpus;
    for (const auto& [cpu, hold] : before) {
        before_cpus.push_back(cpu);
    }
    for (const auto& [cpu, hold] : after) {
        after_cpus.push_back(cpu);
    }
    std::vector<int> cpus;
    std::set_union(before_cpus.begin(), before_cpus.end(), after_cpus.begin(), after_cpus.end(),
                   std::back_inserter(cpus));

    std::vector<HoldChange> changes;
    for (int cpu : cpus) {
        const LatencyLimit from = limit_of(before, cpu);
        const LatencyLimit to = limit_of(after, cpu);
        if (from != to) {
            changes.push_back({cpu, from, to});
        }
    }
    return changes;
}

} // namespace latgov
