#include "latgov/explain.hpp"

#include "latgov/governor.hpp"
#include "latgov/json.hpp"
#include "latgov/parse.hpp"

#include <algorithm>
#include <cstdint>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <optional>
#include <stdexcept>

namespace latgov {

namespace {

// What explain uses of latgovd's status, read and checked before any of it is
// put in words.
struct HeldFor {
    std::string device;
    int queue = 0;
    std::optional<std::string> why;
};

struct LiveCpu {
    int cpu = 0;
    LatencyLimit limit; // nullopt: not held
    std::vector<HeldFor> held_for;
    // What a device with backend dry-run would hold it at, and for what;
    // nullopt: none would.
    LatencyLimit dry_run_limit;
    std::vector<HeldFor> dry_run_for;
};

struct LiveDevice {
    std::string name;
    LatencyLimit limit;
    std::optional<std::string> limit_from;
    std::optional<long> linger_ms;
    std::optional<double> observed_latency_us;
    std::vector<int> active_queues;
};

struct LiveStatus {
    std::vector<LiveDevice> devices;
    std::vector<LiveCpu> cpus;
    // The global request (/dev/cpu_dma_latency), which holds every CPU;
    // nullopt: not held.
    LatencyLimit global_limit;
    std::vector<HeldFor> global_held_for;
};

// status.json's limit_us: a number, or null for no limit.
LatencyLimit limit_at(const JsonField& object) {
    const auto limit = object.at("limit_us");
    return limit.is_null() ? std::nullopt : LatencyLimit(limit.whole<std::uint32_t>());
}

// A held_for or dry_run_for list: the queues a CPU is held for.
std::vector<HeldFor> read_held_for(const JsonField& list) {
    std::vector<HeldFor> out;
    for (const auto& q : list.items()) {
        HeldFor& held = out.emplace_back();
        held.device = q.at("device").text();
        held.queue = q.at("queue").whole<int>();
        if (auto why = q.find("why"))
            held.why = why->text();
    }
    return out;
}

// Throws std::invalid_argument naming the field that is missing or malformed.
LiveStatus read_live_status(const nlohmann::json& status) {
    const JsonField root(status);
    LiveStatus live;
    for (const auto& d : root.at("devices").items()) {
        LiveDevice& device = live.devices.emplace_back();
        device.name = d.at("name").text();
        device.limit = limit_at(d);
        if (auto from = d.find("limit_from"))
            device.limit_from = from->text();
        if (auto linger = d.find("linger_ms"))
            device.linger_ms = linger->whole<long>();
        if (auto latency = d.find("observed_latency_us"))
            device.observed_latency_us = latency->number();
        for (const auto& q : d.at("active_queues").items())
            device.active_queues.push_back(q.whole<int>());
    }
    for (const auto& c : root.at("cpus").items()) {
        LiveCpu& cpu = live.cpus.emplace_back();
        cpu.cpu = c.at("cpu").whole<int>();
        cpu.limit = limit_at(c);
        cpu.held_for = read_held_for(c.at("held_for"));
        // Only where a dry-run device would hold the CPU, and then both.
        if (auto dry = c.find("dry_run_limit_us")) {
            cpu.dry_run_limit = dry->whole<std::uint32_t>();
            cpu.dry_run_for = read_held_for(c.at("dry_run_for"));
        }
    }
    if (const auto global = root.find("global_limit_us"); global && !global->is_null()) {
        live.global_limit = global->whole<std::uint32_t>();
        live.global_held_for = read_held_for(root.at("global_held_for"));
    }
    return live;
}

// The policy in words, with the live limit and linger where latgovd runs.
std::string explain_policy(const Policy& p, const LiveDevice* live, bool status_read) {
    std::string out;
    if (p.mode == Mode::fixed && p.backend == Backend::global) {
        out += fmt::format("Mode fixed: while a queue is active every CPU holds {} (backend "
                           "global: /dev/cpu_dma_latency).\n",
                           describe_limit(p.limit_us));
    } else if (p.mode == Mode::fixed) {
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
        if (live && live->observed_latency_us) {
            const double latency = *live->observed_latency_us;
            out += fmt::format("Observed mean latency {:.1f} us, so each wake-up may cost up to "
                               "{:.1f} us.\n",
                               latency, latency * p.latency_fraction);
        } else {
            out += live          ? "No latency observed yet (idle).\n"
                   : status_read ? "No latency observed yet (not in latgovd's status).\n"
                                 : "No latency observed yet (latgovd is not running).\n";
        }
    }
    if (live) {
        out += fmt::format("Limit chosen now: {}", describe_limit(live->limit));
        if (live->limit_from)
            out += fmt::format(" ({})", *live->limit_from);
        out += ".\n";
    } else if (status_read) {
        // Governed under the configuration read here, not in latgovd's
        // status: it runs with another one (not reloaded since a change),
        // or has not mapped the device yet.
        out += "latgovd's status does not list this device: latgovd governs it under another "
               "configuration than this one (a reload applies a changed one), or has not seen "
               "it yet.\n";
    } else {
        out += "latgovd is not running: no live limit (start it, then ask again).\n";
    }
    if (!p.linger_auto)
        out += fmt::format("A queue stays active {} ms after its last IO (linger_ms).\n",
                           p.linger.count());
    else if (live && live->linger_ms)
        out += fmt::format("A queue stays active {} ms after its last IO now (linger_ms auto: "
                           "twice the mean gap between requests under {} ms, else {} ms).\n",
                           *live->linger_ms, stream_gap.count(), auto_linger_floor.count());
    else
        out += fmt::format("A queue stays active after its last IO for twice the mean gap "
                           "between requests when that is under {} ms, else {} ms (linger_ms "
                           "auto).\n",
                           stream_gap.count(), auto_linger_floor.count());
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
std::string explain_queues(const LiveStatus* status, const BlockDevice& device_info,
                           const GovernedDevice& governed_device, const LiveDevice* live,
                           std::string_view name, CpuSet& cpus) {
    std::string out;
    out += "\nQUEUE  IRQ              COMPLETES ON  ACTIVE\n";
    for (const auto& q : governed_device.queues) {
        const bool active =
            live && std::ranges::find(live->active_queues, q.index) != live->active_queues.end();
        const auto* hq = [&]() -> const HardwareQueue* {
            for (const auto& h : device_info.queues)
                if (h.index == q.index)
                    return &h;
            return nullptr;
        }();
        out += fmt::format("{:<6} {:<16} {:<13} {}\n", q.index,
                           hq && !hq->irq_name.empty() ? terminal_safe_field(hq->irq_name)
                           : q.irq                     ? fmt::format("{}", *q.irq)
                                                       : std::string("-"),
                           format_cpu_list(q.cpus), live ? (active ? "yes" : "no") : "?");
        for (int c : q.cpus)
            if (std::find(cpus.begin(), cpus.end(), c) == cpus.end())
                cpus.push_back(c);
    }
    // The CPUs above are then those that may take the interrupt, not the one
    // that does.
    if (std::ranges::any_of(device_info.queues, [](const HardwareQueue& h) {
            return h.completion_source == CompletionSource::irq_affinity;
        }))
        out += "COMPLETES ON is the IRQ's smp_affinity_list (online CPUs): this kernel has no "
               "effective_affinity_list to say which of them takes the interrupt.\n";
    // The waiter CPUs latgovd holds (or, under dry-run, would hold) for the
    // device besides its completion CPUs.
    if (status)
        for (const auto& c : status->cpus)
            for (const auto* list : {&c.held_for, &c.dry_run_for})
                for (const auto& q : *list)
                    if (q.device == name &&
                        std::find(cpus.begin(), cpus.end(), c.cpu) == cpus.end())
                        cpus.push_back(c.cpu);
    return out;
}

// "nvme0n1/0 (completes), ...".
std::string describe_held_for(const std::vector<HeldFor>& held_for) {
    std::vector<std::string> why;
    for (const auto& q : held_for)
        why.push_back(
            fmt::format("{}/{}{}", q.device, q.queue, q.why ? " (" + *q.why + ")" : std::string()));
    return fmt::format("{}", fmt::join(why, ", "));
}

// Each CPU of `cpus`: its idle states and costs, and what it holds now (or,
// under dry-run, would hold).
std::string explain_cpus(const ExplainInput& in, const LiveStatus* status, CpuSet cpus) {
    std::string out;
    std::sort(cpus.begin(), cpus.end());
    for (int cpu : cpus) {
        auto costs = in.costs.find(cpu);
        if (const Cpu* c = in.topology.cpu(cpu); c && !c->idle_states_known) {
            out += fmt::format("\nCPU {}: idle states unknown (their table could not be read): "
                               "every state but POLL is taken to cost too much\n",
                               cpu);
        } else if (costs == in.costs.end() || costs->second.empty()) {
            out += fmt::format("\nCPU {}: no idle states (no cpuidle driver)\n", cpu);
        } else {
            out += fmt::format("\nCPU {} idle states:\n  {:<16} {:>8} {:>8}  {}\n", cpu, "STATE",
                               "EXIT_US", "COST_US", "");
            for (const auto& s : costs->second)
                out += fmt::format("  {:<16} {:>8} {:>8.1f}  {}\n", terminal_safe_field(s.name),
                                   s.exit_latency_us, s.cost_us, s.disabled ? "disabled" : "");
        }
        // A fixed limit is written whatever the idle states: what is held is
        // said for every CPU.
        const auto* c = [&]() -> const LiveCpu* {
            if (status)
                for (const auto& e : status->cpus)
                    if (e.cpu == cpu)
                        return &e;
            return nullptr;
        }();
        if (c && c->limit)
            out += fmt::format("  held now at {} for {}\n", describe_limit(c->limit),
                               describe_held_for(c->held_for));
        // Decided by a device with backend dry-run, and not written.
        if (c && c->dry_run_limit)
            out += fmt::format("  would hold at {} (dry-run) for {}\n",
                               describe_limit(c->dry_run_limit), describe_held_for(c->dry_run_for));
        // The global request holds every CPU, whatever its own file says.
        if (status && status->global_limit)
            out += fmt::format("  held now at {} through /dev/cpu_dma_latency (every CPU) for {}\n",
                               describe_limit(status->global_limit),
                               describe_held_for(status->global_held_for));
        if ((!c || (!c->limit && !c->dry_run_limit)) && !(status && status->global_limit))
            out += "  not held now\n";
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
                       device->model.empty() ? "(no model)" : terminal_safe_field(device->model),
                       device->transport.empty() ? "-" : terminal_safe_field(device->transport));

    Governor governor(in.topology, in.config, in.costs);
    const GovernedDevice* governed = nullptr;
    for (const auto& d : governor.devices())
        if (d.name == name)
            governed = &d;
    // A name rule that reaches nothing is most likely a typo or a disk that
    // is gone; its device is then governed by the defaults.
    for (const auto& warning : unmatched_name_rules(in.config, device_identities(in.topology)))
        out += "Warning: " + warning + ".\n";
    if (!governed) {
        out += "Not governed: ";
        if (device->queues.empty())
            out += "it has no hardware queues of its own (a multipath head: its path disks "
                   "are governed instead).\n";
        else if (std::all_of(device->queues.begin(), device->queues.end(), [](const auto& q) {
                     return q.completion_source == CompletionSource::none;
                 }))
            out += "every hardware queue of it is a poll queue: the task that submits to it "
                   "completes it, awake, so nothing is held for it.\n";
        else
            out += "its policy is off, or its queues have no IRQ of their own and no "
                   "[[device]] entry names it.\n";
        return out;
    }
    const Policy& p = governed->policy;
    out += fmt::format("Governed by {} (mode {}, backend {}).\n", governed->rule, to_string(p.mode),
                       to_string(p.backend));

    // Null: latgovd is not running. Anything else must be what it writes.
    std::optional<LiveStatus> status;
    if (!in.status.is_null()) {
        try {
            status = read_live_status(in.status);
        } catch (const std::invalid_argument& e) {
            return make_error(fmt::format("Failed to read latgovd's status: {}", e.what()));
        }
    }
    const LiveStatus* live_status = status ? &*status : nullptr;
    const LiveDevice* live = nullptr;
    if (status)
        for (const auto& d : status->devices)
            if (!live && d.name == name)
                live = &d;
    out += explain_policy(p, live, status.has_value());
    out += explain_idle(in);

    CpuSet cpus;
    out += explain_queues(live_status, *device, *governed, live, name, cpus);
    out += explain_cpus(in, live_status, std::move(cpus));
    return out;
}

} // namespace latgov
