#include "governed.hpp"

#include "evidence.hpp"
#include "latgov/discovery.hpp"
#include "latgov/idle_costs.hpp"
#include "logging.hpp"

#include <algorithm>
#include <fmt/format.h>
#include <spdlog/spdlog.h>

namespace latgov {

namespace {

Result<IoSampler> open_sampler(const SysRoot& root, const Config& config,
                               const Governor& governor) {
    auto sampler = IoSampler::open(root, governor.stat_sources(),
                                   config.daemon.queue_inflight ? governor.queue_tags()
                                                                : std::vector<QueueTags>{});
    if (!sampler && config.daemon.queue_inflight) {
        spdlog::warn("Failed to open per-queue in-flight counts: {}; using device counts",
                     sampler.error().message);
        sampler = IoSampler::open(root, governor.stat_sources());
    }
    if (!sampler)
        return make_error("Failed to open IO statistics: " + sampler.error().message);
    for (const auto& warning : sampler->warnings())
        spdlog::warn("{}", warning);
    return sampler;
}

struct OpenedEvents {
    std::optional<IoIssueEvents> events;
    IoEventsState kind;
    std::string state; // how an idle daemon wakes, for the status
};

OpenedEvents open_io_events(const SysRoot& root, const Config& config, const Topology& topology,
                            const Governor& governor) {
    if (!config.daemon.io_events)
        return {std::nullopt, IoEventsState::off,
                "off (configuration): sampling every idle_interval while idle"};
    if (governor.devices().empty())
        return {std::nullopt, IoEventsState::not_needed, "no device to watch"};
    if (!governor.can_hold())
        return {std::nullopt, IoEventsState::not_needed,
                fmt::format("not needed: with no cpuidle driver auto mode holds nothing, so no "
                            "request wakes latgovd; it samples every {} ms for the status alone",
                            config.daemon.status_interval.count())};
    auto events = IoIssueEvents::open(root, topology.online_cpus, governor.watched_devs());
    if (!events) {
        spdlog::warn("Failed to open the IO events: {}; sampling every {} ms while idle instead",
                     events.error().message, config.daemon.idle_interval.count());
        return {std::nullopt, IoEventsState::unavailable, "unavailable: " + events.error().message};
    }
    spdlog::info("waking on {} events while idle (filter: {})", request_tracepoint,
                 events->filter().empty() ? "none" : events->filter());
    std::string state;
    if (events->passthrough_unseen().empty()) {
        state = fmt::format("sleeping until the first request ({} events, {} for passthrough)",
                            request_tracepoint, passthrough_tracepoint);
    } else {
        spdlog::warn("{}; passthrough requests (NVMe IO commands by ioctl or io_uring) do "
                     "not wake latgovd",
                     events->passthrough_unseen());
        state = fmt::format("sleeping until the first request ({} events; passthrough requests "
                            "unseen: {})",
                            request_tracepoint, events->passthrough_unseen());
    }
    return {std::move(*events), IoEventsState::in_use, std::move(state)};
}

std::optional<IoIssueEvents> open_recorder(const SysRoot& root, const Topology& topology,
                                           const Governor& governor, bool have_events) {
    if (!have_events || !governor.learns_periods())
        return std::nullopt;
    auto recorder = IoIssueEvents::open(root, topology.online_cpus, governor.watched_devs(),
                                        IssueWakeup::never);
    if (!recorder) {
        spdlog::warn("Failed to open the request recorder: {}; nothing is held ahead of "
                     "periodic requests",
                     recorder.error().message);
        return std::nullopt;
    }
    return std::move(*recorder);
}

std::optional<IssueCounters> open_issue_counters(const SysRoot& root, const Topology& topology,
                                                 const Governor& governor) {
    // Every request on a CPU with a counter pays for it, counted or not
    // (docs/platform.md): none where no waiter will be held.
    if (!governor.holds_waiters())
        return std::nullopt;
    auto counters = IssueCounters::open(root, topology.online_cpus, governor.waiter_devs());
    if (!counters) {
        spdlog::warn("Failed to open per-CPU request counters: {}; waiter CPUs from iowait only",
                     counters.error().message);
        return std::nullopt;
    }
    return std::move(*counters);
}

// The counts an onset's baseline reads: the IRQs of the governed queues
// that count their own completions on one. None without events: no
// request then starts an activation.
IrqCounts open_irq_counts(const SysRoot& root, const Governor& governor, bool have_events) {
    std::vector<int> irqs;
    if (have_events)
        for (const auto& device : governor.devices())
            for (const auto& queue : device.queues)
                if (queue.irq && !queue.irq_shared)
                    irqs.push_back(*queue.irq);
    auto counts = IrqCounts::open(root, irqs);
    for (const auto& warning : counts.warnings())
        spdlog::warn("{}; an onset on its queue counts company from the tick before it", warning);
    return counts;
}

} // namespace

Result<GovernedState> build_governed_state(const SysRoot& root, const Config& config,
                                           const GovernedState* current) {
    auto topology = discover_topology(root);
    if (!topology)
        return make_error("Failed to discover topology: " + topology.error().message);
    return build_governed_state(root, config, std::move(*topology), current);
}

Result<GovernedState> build_governed_state(const SysRoot& root, const Config& config,
                                           Topology topology, const GovernedState* current) {
    for (const auto& w : topology.warnings)
        spdlog::warn("{}", w);
    auto costs = load_idle_costs(root, config.daemon, topology, log_warning);
    Governor governor(
        topology, config, std::move(costs.per_cpu),
        evidence_for(root, config.daemon, topology, current ? &current->governor : nullptr));
    auto sampler = open_sampler(root, config, governor);
    if (!sampler)
        return sampler.error();
    auto issue_counters = open_issue_counters(root, topology, governor);
    auto opened = open_io_events(root, config, topology, governor);
    auto recorder = open_recorder(root, topology, governor, opened.events.has_value());
    auto irq_counts = open_irq_counts(root, governor, opened.events.has_value());
    return GovernedState{std::move(topology),       std::move(governor),
                         std::move(*sampler),       std::move(irq_counts),
                         std::move(issue_counters), std::move(opened.events),
                         std::move(recorder),       opened.kind,
                         std::move(opened.state),   std::move(costs.source)};
}

void read_issue_counters(GovernedState& state, IoSample& sample) {
    CpuSet bound = state.governor.waiter_bound();
    if (!state.issue_counters || bound.empty()) {
        sample.cpu_issues.clear();
        return;
    }
    mark_unread_issues(sample.cpu_issues, bound);
    // A CPU whose wake-up event is still armed has issued no request the
    // event watches since the arm (it would have fired); reading its counter
    // would interrupt that CPU, most likely idle, so it is left as read.
    // Requests the event leaves out (kworker, jbd2, latgovd's own) but the
    // counter counts are seen late, at the first read after it fired.
    if (state.events)
        std::erase_if(bound, [&](int cpu) { return state.events->armed_on(cpu); });
    if (bound.empty())
        return;
    if (auto read = state.issue_counters->read(bound, sample.cpu_issues); !read) {
        spdlog::warn("{}; waiter CPUs from iowait only", read.error().message);
        state.issue_counters.reset();
        sample.cpu_issues.clear();
    }
}

void read_onset_baselines(GovernedState& state) {
    for (const auto& due : state.governor.onset_baselines_due()) {
        // The stat first, then the interrupts: nothing in flight there
        // means the onset's request completed, and is in the counts after.
        // One that fails takes no baseline; the next sample says why.
        auto stat = state.sampler.read_device(due.device);
        if (!stat)
            continue;
        std::map<int, std::uint64_t> irq_counts;
        for (int irq : due.irqs)
            if (auto count = state.irq_counts.read(irq))
                irq_counts.emplace(irq, *count);
        // The issue counts of the onset CPUs, after their requests', and
        // of the submit CPUs whose events are disarmed (an armed one fires
        // instead): read every tick from here on. One that fails takes
        // none, and the tick's read says why.
        std::map<int, std::uint64_t> issue_counts;
        if (state.issue_counters && state.events && !due.onset_cpus.empty()) {
            CpuSet cpus = due.onset_cpus;
            for (int cpu : due.submit_cpus)
                if (!state.events->armed_on(cpu))
                    cpus.push_back(cpu);
            std::sort(cpus.begin(), cpus.end());
            cpus.erase(std::unique(cpus.begin(), cpus.end()), cpus.end());
            std::vector<std::uint64_t> counts;
            if (state.issue_counters->read(cpus, counts))
                for (int cpu : cpus)
                    if (const auto i = static_cast<std::size_t>(cpu);
                        i < counts.size() && counts[i] != issues_unread)
                        issue_counts.emplace(cpu, counts[i]);
        }
        state.governor.take_onset_baseline(due.device, *stat, irq_counts, issue_counts);
    }
}

void log_governed_state(const GovernedState& state, const Config& config) {
    const auto& topology = state.topology;
    spdlog::info("cpuidle driver {}, governor {}; {} online CPUs", topology.cpuidle_driver,
                 topology.cpuidle_governor, topology.online_cpus.size());
    switch (idle_governor_kind(topology.cpuidle_driver, topology.cpuidle_governor)) {
    case IdleGovernorKind::none:
        spdlog::warn("no cpuidle driver: CPUs idle in the default idle whatever PM QoS says, "
                     "so auto holds nothing here (fixed limits are still written)");
        break;
    case IdleGovernorKind::zero_only:
        spdlog::info("cpuidle driver {} with governor {} honours only a limit of 0: auto holds "
                     "0 or nothing",
                     topology.cpuidle_driver, topology.cpuidle_governor);
        break;
    case IdleGovernorKind::latency_aware:
        break;
    }
    // A name rule that reaches no disk is most likely a typo (or a disk
    // that is gone): the disk it meant runs on the defaults.
    for (const auto& warning : unmatched_name_rules(config, device_identities(topology)))
        spdlog::warn("{}", warning);
    if (state.governor.devices().empty())
        spdlog::info("no device to govern");
    for (const auto& d : state.governor.devices()) {
        std::string queues;
        for (const auto& q : d.queues)
            queues += fmt::format("{}q{}->cpu{}", queues.empty() ? "" : " ", q.index,
                                  format_cpu_list(q.cpus));
        spdlog::info("governing {} (mode {}, backend {}, by {}): {}", d.name,
                     to_string(d.policy.mode), to_string(d.policy.backend), d.rule, queues);
    }
}

} // namespace latgov
