// When latgovd maps the machine anew, and why. Pure: the loop passes what it
// saw and the time.
#pragma once

#include "latgov/policy.hpp"
#include "latgov/topology.hpp"

#include <chrono>
#include <optional>
#include <string>
#include <string_view>

namespace latgov {

enum class RescanCause {
    start,        // the first scan
    reload,       // SIGHUP
    uevent,       // the kernel said a disk, controller, CPU or PCI function changed
    hotplug,      // the online CPUs changed, or a hotplug step came (no uevent socket)
    irq_moved,    // a governed queue's IRQ completes elsewhere (irqbalance; no uevent)
    resumed,      // the host slept (suspend to RAM or disk; no CPU uevent)
    device_error, // a governed device could not be sampled (gone, mid-reset)
    periodic,     // the safety net found a different topology
};
inline constexpr RescanCause all_rescan_causes[] = {
    RescanCause::start,     RescanCause::reload,  RescanCause::uevent,       RescanCause::hotplug,
    RescanCause::irq_moved, RescanCause::resumed, RescanCause::device_error, RescanCause::periodic};
std::string_view to_string(RescanCause cause);

// A burst of changes is acted on once: uevents (a controller probe sends a
// dozen within a second), or without them the steps of a CPU hotplug. Once
// after burst_quiet without another one, and no later than burst_max_delay
// after the first, so a steady stream cannot starve it.
inline constexpr std::chrono::milliseconds burst_quiet{200};
inline constexpr std::chrono::milliseconds burst_max_delay{2000};

// Without any uevent (no netlink socket, lost messages) the topology is
// compared this often, and rescanned if it differs.
inline constexpr std::chrono::seconds periodic_check_interval{60};

// CPU hotplug moves managed IRQs, irqbalance or an administrator moves the
// others: the online CPU set and the governed queues' IRQs are compared this
// often while the daemon ticks; an idle daemon asleep on IO events compares
// them when it wakes (its first request, or housekeeping every 10 s).
inline constexpr std::chrono::seconds online_check_interval{5};

struct ChangeBurst {
    std::optional<TimePoint> first; // none: nothing pending
    TimePoint last{};
    int count = 0;
    // One of the uevents (or a lost one) is not a disk's change: rescan,
    // even if the map looks the same (may_change_nothing).
    bool must_rescan = false;
};

// The burst with one more change at `now`.
ChangeBurst add_change(ChangeBurst burst, TimePoint now);

// When the pending burst is rescanned: the debounced time, but not before
// `retry_not_before` (a failed rescan's back-off). None: nothing pending.
std::optional<TimePoint> burst_rescan_at(const ChangeBurst& burst, TimePoint retry_not_before);

// Whether to compare the online CPU set now: online_check_interval after
// the last comparison, and not while a burst is pending. A CPU's uevent
// comes with its change and the burst's rescan maps it; the comparison is
// for changes that came without one. Comparing during the burst's quiet time
// would rescan for it early, as if no uevent had come.
bool online_check_due(const ChangeBurst& pending, TimePoint last_check, TimePoint now);

// The time the host was suspended since boot, CLOCK_BOOTTIME less
// CLOCK_MONOTONIC, from CLOCK_MONOTONIC read before and after CLOCK_BOOTTIME
// (`mono_before`, `boot`, `mono_after`): the boot reading less the middle
// of the two. Nullopt when the three readings took longer than
// max_clock_reading (the thread was preempted between them), which would
// blur the result by as much.
inline constexpr std::chrono::microseconds max_clock_reading{500};
std::optional<std::chrono::nanoseconds> suspended_time(std::chrono::nanoseconds mono_before,
                                                       std::chrono::nanoseconds boot,
                                                       std::chrono::nanoseconds mono_after);

// Whether the host slept between two suspended_time() results (`before`,
// then `now`): it grows only by the time suspended. Suspend to RAM or disk
// takes every CPU but the boot one offline and back with no uevent, and the
// online CPUs read the same after it, but the perf events of those CPUs no
// longer fire and their threads are no longer pinned.
bool slept_between(std::chrono::nanoseconds before, std::chrono::nanoseconds now);

// What a rescan would change, as text: online CPUs, idle driver, governor and
// states, every device's queues with their submit and completion CPUs and
// IRQs, and what [[device]] rules match on (model, serial, wwid, transport,
// nsid: another disk under the same name may take another policy). Leaves
// out what latgovd itself writes (the PM QoS values), so equal text means
// the governed state is still right.
std::string topology_fingerprint(const Topology& topology);

} // namespace latgov
