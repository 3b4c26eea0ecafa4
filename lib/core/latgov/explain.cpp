#include "latgov/explain.hpp"

#include "latgov/governor.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

namespace latgov {

namespace {

// The string at `key` of an object, or null.
const std::string* string_at(const nlohmann::json& object, const char* key) {
    return object.is_object() && object.contains(key) ? object[key].get_ptr<const std::string*>()
                                                      : nullptr;
}

const nlohmann::json* find_named(const nlohmann::json& list, std::string_view name) {
    if (!list.is_array())
        return nullptr;
    for (const auto& entry : list)
        if (const auto* entry_name = string_at(entry, "name"); entry_name && *entry_name == name)
            return &entry;
    return nullptr;
}

// status.json's limit_us: a number, or null for no limit.
std::string limit_words(const nlohmann::json& limit) {
    return describe_limit(limit.is_number() ? LatencyLimit(limit.get<std::uint32_t>())
                                            : std::nullopt);
}

} // namespace

namespace {

// The policy in words, with the live limit and linger where latgovd runs.
std::string explain_policy(const Policy& p, const nlohmann::json* live) {
    std::string out;
    if (p.mode == Mode::fixed) {
        out += fmt::format("Mode fixed: while a queue is active its completion CPUs hold {}.\n",
                           describe_limit(p.limit_us));
    } else if (p.mode == Mode::automatic) {
        out += fmt::format("Mode auto: the wake-up cost allowed is latency_fraction {} of the "
                           "observed mean request latency",
                           p.latency_fraction);
        if (p.min_limit_us > 0 || p.max_limit_us)
            out += fmt::format(", clamped to [{}, {}] us", p.min_limit_us,
                               p.max_limit_us ? fmt::format("{}", *p.max_limit_us) : "none");
        out += fmt::format("; a mean needs {} completions in a window.\n", p.min_samples);
        if (live && live->contains("observed_latency_us") &&
            (*live)["observed_latency_us"].is_number()) {
            const double latency = (*live)["observed_latency_us"].get<double>();
            out += fmt::format("Observed mean latency {:.1f} us, so each wake-up may cost up to "
                               "{:.1f} us.\n",
                               latency, latency * p.latency_fraction);
        } else {
            out += "No latency observed yet (idle, or latgovd is not running).\n";
        }
    }
    if (live) {
        out += fmt::format("Limit chosen now: {}", limit_words((*live)["limit_us"]));
        if (const auto* from = (*live)["limit_from"].get_ptr<const std::string*>())
            out += fmt::format(" ({})", *from);
        out += ".\n";
    } else {
        out += "latgovd is not running: no live limit (start it, then ask again).\n";
    }
    if (!p.linger_auto)
        out += fmt::format("A queue stays active {} ms after its last IO (linger_ms).\n",
                           p.linger.count());
    else if (live && (*live)["linger_ms"].is_number())
        out += fmt::format("A queue stays active {} ms after its last IO now (linger_ms auto: "
                           "twice the mean gap between requests under 10 ms, else {} ms).\n",
                           (*live)["linger_ms"].get<long>(), p.linger.count());
    else
        out += fmt::format("A queue stays active after its last IO for twice the mean gap "
                           "between requests when that is under 10 ms, else {} ms (linger_ms "
                           "auto).\n",
                           p.linger.count());
    out += p.waiter_cpus ? "The CPUs where tasks wait for its IO are held too (waiter_cpus).\n"
                         : "Only the completion CPUs are held (waiter_cpus = false).\n";
    out += p.prearm ? "Requests after idle that come at a steady period are held for from "
                      "shortly before each is due (prearm).\n\n"
                    : "Nothing is held ahead of periodic requests (prearm = false).\n\n";

    return out;
}

// What PM QoS can do with this machine's cpuidle driver, and the costs used.
std::string explain_idle(const ExplainInput& in) {
    std::string out;
    out += fmt::format("cpuidle driver {}, governor {}. ", in.topology.cpuidle_driver,
                       in.topology.cpuidle_governor);
    switch (idle_governor_kind(in.topology.cpuidle_driver, in.topology.cpuidle_governor)) {
    case IdleGovernorKind::none:
        out += "With no cpuidle driver PM QoS cannot change how CPUs idle: auto holds nothing "
               "(without a fixed limit latgovd only watches, for its status).\n";
        break;
    case IdleGovernorKind::zero_only:
        out += "It honours only a limit of 0, so auto holds 0 or nothing.\n";
        break;
    case IdleGovernorKind::latency_aware:
        out += "It excludes every idle state whose exit latency exceeds the limit.\n";
        break;
    }
    out += fmt::format("Idle-state costs: {}.\n", in.cost_source);

    return out;
}

// The queue table; adds the completion CPUs, then the waiter CPUs held for
// the device, to `cpus`.
std::string explain_queues(const ExplainInput& in, const BlockDevice& device_info,
                           const GovernedDevice& governed_device, const nlohmann::json* live,
                           std::string_view name, CpuSet& cpus) {
    std::string out;
    out += "\nQUEUE  IRQ              COMPLETES ON  ACTIVE\n";
    for (const auto& q : governed_device.queues) {
        bool active = false;
        if (live)
            for (const auto& a : (*live)["active_queues"])
                active = active || a.get<int>() == q.index;
        const auto* hq = [&]() -> const HardwareQueue* {
            for (const auto& h : device_info.queues)
                if (h.index == q.index)
                    return &h;
            return nullptr;
        }();
        out += fmt::format("{:<6} {:<16} {:<13} {}\n", q.index,
                           hq && !hq->irq_name.empty() ? hq->irq_name
                           : q.irq                     ? fmt::format("{}", *q.irq)
                                                       : std::string("-"),
                           format_cpu_list(q.cpus), live ? (active ? "yes" : "no") : "?");
        for (int c : q.cpus)
            if (std::find(cpus.begin(), cpus.end(), c) == cpus.end())
                cpus.push_back(c);
    }
    // The waiter CPUs latgovd holds for the device besides its completion CPUs.
    if (in.status.is_object() && in.status.contains("cpus"))
        for (const auto& c : in.status["cpus"])
            if (c.contains("held_for") && c["held_for"].is_array())
                for (const auto& q : c["held_for"])
                    if (const auto* device_name = string_at(q, "device");
                        device_name && *device_name == name &&
                        std::find(cpus.begin(), cpus.end(), c.value("cpu", -1)) == cpus.end())
                        cpus.push_back(c.value("cpu", -1));
    return out;
}

// Each CPU of `cpus`: its idle states and costs, and what it holds now.
std::string explain_cpus(const ExplainInput& in, CpuSet cpus) {
    std::string out;
    std::sort(cpus.begin(), cpus.end());
    for (int cpu : cpus) {
        auto costs = in.costs.find(cpu);
        if (costs == in.costs.end() || costs->second.empty()) {
            out += fmt::format("\nCPU {}: no idle states (no cpuidle driver)\n", cpu);
            continue;
        }
        out += fmt::format("\nCPU {} idle states:\n  {:<16} {:>8} {:>8}  {}\n", cpu, "STATE",
                           "EXIT_US", "COST_US", "");
        for (const auto& s : costs->second)
            out += fmt::format("  {:<16} {:>8} {:>8.1f}  {}\n", s.name, s.exit_latency_us,
                               s.cost_us, s.disabled ? "disabled" : "");
        if (const auto* c = in.status.is_object() ? [&]() -> const nlohmann::json* {
                for (const auto& e : in.status["cpus"])
                    if (e.value("cpu", -1) == cpu)
                        return &e;
                return nullptr;
            }()
            : nullptr;
            c && (*c)["limit_us"].is_number()) {
            std::vector<std::string> why;
            for (const auto& q : (*c)["held_for"]) {
                const auto* role =
                    q.contains("why") ? q["why"].get_ptr<const std::string*>() : nullptr;
                why.push_back(fmt::format("{}/{}{}", q["device"].get<std::string>(),
                                          q["queue"].get<int>(),
                                          role ? " (" + *role + ")" : std::string()));
            }
            out += fmt::format("  held now at {} for {}\n", limit_words((*c)["limit_us"]),
                               fmt::join(why, ", "));
        } else {
            out += "  not held now\n";
        }
    }
    return out;
}

} // namespace

Result<std::string> explain_device(const ExplainInput& in, std::string_view name) {
    const BlockDevice* device = in.topology.device(name);
    if (!device)
        return make_error(fmt::format("no block device {} (see `latgov topology`)", name));
    std::string out;
    out += fmt::format("{}: {} {}, transport {}\n", device->name, to_string(device->kind),
                       device->model.empty() ? "(no model)" : device->model,
                       device->transport.empty() ? "-" : device->transport);

    Governor governor(in.topology, in.config, in.costs);
    const GovernedDevice* governed = nullptr;
    for (const auto& d : governor.devices())
        if (d.name == name)
            governed = &d;
    if (!governed) {
        out += "Not governed: ";
        if (device->queues.empty())
            out += "it has no hardware queues of its own (a multipath head: its path disks "
                   "are governed instead).\n";
        else
            out += "its policy is off, or its queues have no IRQ of their own and no "
                   "[[device]] entry names it.\n";
        return out;
    }
    const Policy& p = governed->policy;
    out += fmt::format("Governed by {} (mode {}, backend {}).\n", governed->rule, to_string(p.mode),
                       to_string(p.backend));

    // A pointer into the status itself: never into a temporary.
    const auto* live = in.status.is_object() && in.status.contains("devices")
                           ? find_named(in.status["devices"], name)
                           : nullptr;
    out += explain_policy(p, live);
    out += explain_idle(in);

    CpuSet cpus;
    out += explain_queues(in, *device, *governed, live, name, cpus);
    out += explain_cpus(in, std::move(cpus));
    return out;
}

} // namespace latgov
