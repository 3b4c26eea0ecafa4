// Everything latgovd governs with, built from one discovery of the machine:
// the topology, the governor, the sampler that feeds it (and the single IRQ
// counts of an onset's baseline), the per-CPU issue counters that find its
// waiter CPUs and the IO events that wake it. Built whole; the daemon swaps
// it in only when the build succeeded, so a new governor never pairs with an old sampler.
#pragma once

#include "latgov/config.hpp"
#include "latgov/governor.hpp"
#include "latgov/io_events.hpp"
#include "latgov/issue_counts.hpp"
#include "latgov/metrics.hpp"
#include "latgov/sampler.hpp"
#include "latgov/sysroot.hpp"
#include "latgov/topology.hpp"

#include <optional>
#include <string>

namespace latgov {

struct GovernedState {
    Topology topology;
    Governor governor;
    IoSampler sampler;
    IrqCounts irq_counts;                        // single IRQs' counts, for onsets' baselines
    std::optional<IssueCounters> issue_counters; // none: waiter CPUs from iowait only
    std::optional<IoIssueEvents> events;         // none: sample every idle_interval while idle
    // While requests are isolated: times them without waking the daemon,
    // for the periodic ones' windows (none without events, or with no
    // device that has prearm).
    std::optional<IoIssueEvents> recorder;
    IoEventsState events_kind = IoEventsState::unavailable; // for the metrics
    std::string events_state; // for `latgov status`: how an idle daemon wakes
    std::string cost_source;  // for `latgov status`: where the idle costs came from
};

// Discovers the machine and builds the state for it, with what `current`
// (the state it replaces, if any) learnt from live IO. Fails when the
// machine cannot be read or the IO statistics cannot be opened; IO events
// or issue counters that cannot be opened are not a failure (the daemon
// samples while idle, and finds waiters from iowait).
Result<GovernedState> build_governed_state(const SysRoot& root, const Config& config,
                                           const GovernedState* current = nullptr);
// The same for a topology discovered already (to compare it with the map):
// a discovery reads every queue's and IRQ's files, so it is done once.
Result<GovernedState> build_governed_state(const SysRoot& root, const Config& config,
                                           Topology topology,
                                           const GovernedState* current = nullptr);

// The per-CPU issue counts into `sample`: only while IO runs, and only for
// the CPUs that may hold waiters, so an idle daemon reads nothing and the
// first active tick is a baseline. Counters that fail are dropped.
void read_issue_counters(GovernedState& state, IoSample& sample);

// The baselines of the onsets that request events just started
// (Governor::onset_baselines_due): read right after their holds are
// written, so the first sample counts their company from the onset on.
void read_onset_baselines(GovernedState& state);

// Logs what the state governs and how (one line per device), and warns of
// each [[device]] name rule of `config` that matches no disk.
void log_governed_state(const GovernedState& state, const Config& config);

} // namespace latgov
