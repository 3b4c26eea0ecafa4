// The governor's decisions as pure functions: when a hardware queue counts as
// active, which wake-up latency limit a device's active queue asks for, and
// what every CPU must hold as a result. No files, no clock: time is passed in,
// so each decision can be tested with plain structs.
#pragma once

#include "latgov/clock.hpp"
#include "latgov/config.hpp"
#include "latgov/parse.hpp"
#include "latgov/topology.hpp"

#include <chrono>
#include <compare>
#include <cstdint>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace latgov {

// --- Queue activity ---------------------------------------------------------

struct QueueActivity {
    bool active = false;
    TimePoint last_io{};
    TimePoint active_since{};
};

enum class Transition { none, activated, released };

// Call once per sample. IO seen activates an idle queue; an active queue is
// released once no IO has been seen for `linger` (>= linger since last_io),
// so short gaps between requests do not flap the limit on and off.
Transition update_activity(QueueActivity& activity, bool io_seen, TimePoint now,
                           std::chrono::milliseconds linger);

// --- Limit choice -----------------------------------------------------------

// One idle state as the limit choice sees it.
struct IdleCost {
    std::string name;
    std::uint32_t exit_latency_us = 0; // declared: what the kernel compares to the limit
    double cost_us = 0;                // effective wake-up cost: measured if calibrated,
                                       // else the declared exit latency
    bool disabled = false;
};

// The table with declared latencies as costs (no calibration available).
std::vector<IdleCost> declared_costs(std::span<const IdleState> states);

// How the running cpuidle governor reacts to a PM QoS limit.
enum class IdleGovernorKind {
    latency_aware, // menu, teo, ladder: exclude states whose exit latency > limit
    zero_only,     // haltpoll: only a limit of exactly 0 has an effect
    none,          // no cpuidle driver: PM QoS has no effect on idle
};

// driver "none" or "" -> none; driver or governor "haltpoll" -> zero_only;
// else latency_aware. The haltpoll governor honours only 0. The haltpoll
// driver's one state beyond POLL declares 1 us, so under menu or teo too only
// a limit of 0 excludes it, and what it declares is not its wake-up cost.
IdleGovernorKind idle_governor_kind(std::string_view driver, std::string_view governor);

// The mean request latency assumed for a transport (lower-case, as sysfs
// spells it) until enough completions have been observed:
//   pcie   80 us  NAND NVMe 4k random read at QD1 (Optane-class is ~10 us).
//   virtio 40 us  36-42 us on a 2-vCPU haltpoll guest's disk, nothing held (docs/platform.md).
//   loop   20 us  NVMe-oF loop target: in-kernel, no wire, often page cache.
//   rdma  100 us  NAND read plus ~10-20 us of RDMA fabric round trip.
//   fc    150 us  NAND read plus FC HBA and switch hops.
//   tcp   200 us  NAND read plus the kernel TCP stack on both ends.
//   other 1000 us unknown, so assume HDD-class and hold little until measured.
double default_request_latency_us(std::string_view transport);

// The limit one device asks for while its queue is active.
//  - off: nullopt. fixed: policy.limit_us exactly as configured (no clamps).
//  - automatic: allowed = latency_fraction * mean request latency (observed,
//    else the transport default). A state fits when its cost_us <= allowed;
//    POLL (declared exit latency 0) always fits; disabled states are skipped.
//    Every enabled state fits -> nullopt (a slow disk needs no constraint).
//    Otherwise the largest declared exit latency that admits only fitting
//    states (the kernel excludes states whose exit latency > limit), or 0
//    when that admits no state besides POLL. Then clamped: a number below
//    min_limit_us becomes min_limit_us; nullopt or a number above
//    max_limit_us becomes max_limit_us (max wins if min > max).
//  - zero_only governor: 0 when any enabled state does not fit, else
//    nullopt, then clamped; a clamped non-zero value is kept but haltpoll
//    ignores it, so min_limit_us > 0 effectively disables the limit there.
//  - none governor: nullopt, unclamped: no idle state to exclude, and writing
//    a limit would only occupy the CPU's one user-space slot for nothing.
LatencyLimit choose_limit(const Policy& policy, std::optional<double> observed_mean_us,
                          std::string_view transport, std::span<const IdleCost> states,
                          IdleGovernorKind kind);

// --- Per-CPU aggregation ----------------------------------------------------

// Why a queue holds a CPU: it runs the queue's completions, or a task that
// waits for the queue's IO sleeps there.
enum class HoldRole { completes, waits };
std::string_view to_string(HoldRole role);

struct QueueKey {
    std::string device; // nvme0n1
    int queue = 0;      // hardware queue index
    HoldRole role = HoldRole::completes;
    auto operator<=>(const QueueKey&) const = default;
};

// What one active queue asks of the CPUs that complete it.
struct QueueDemand {
    QueueKey queue;
    std::vector<int> cpus;
    LatencyLimit limit; // nullopt demands nothing
};

struct CpuHold {
    LatencyLimit limit;
    // The queues whose demand equals `limit`, sorted: the ones that explain
    // the value. Queues asking for something looser are not listed, since
    // dropping them would not change what the CPU holds.
    std::vector<QueueKey> held_for;
};

// The stricter of two limits; nullopt (no limit) is the loosest.
LatencyLimit strictest(LatencyLimit a, LatencyLimit b);

// Per CPU, the strictest limit among the demands that set one. CPUs that no
// queue demands anything of are absent: they hold nothing.
std::map<int, CpuHold> aggregate_cpu_limits(std::span<const QueueDemand> demands);

// --- Changes to apply -------------------------------------------------------

struct HoldChange {
    int cpu = 0;
    LatencyLimit from;
    LatencyLimit to;
};

// The CPUs whose limit value changed, by CPU id; a CPU absent from a map holds
// nothing (nullopt). A change of held_for alone is not a change: the value
// written to the CPU stays the same, so it is not rewritten.
std::vector<HoldChange> diff_holds(const std::map<int, CpuHold>& before,
                                   const std::map<int, CpuHold>& after);

} // namespace latgov
