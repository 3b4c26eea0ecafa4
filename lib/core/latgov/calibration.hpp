// Measured wake-up cost of each idle state in the IO path (`latgov
// calibrate`), and its file, which latgovd prefers over the kernel's
// declared exit latencies when it was measured on the running machine.
#pragma once

#include "latgov/policy.hpp"
#include "latgov/result.hpp"
#include "latgov/topology.hpp"

#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace latgov {

// What a calibration is only valid for.
struct MachineIdentity {
    std::string cpu_model;
    std::string kernel;
    std::string cpuidle_driver;
    std::string cpuidle_governor;
    bool operator==(const MachineIdentity&) const = default;
};

// The CPU model /proc/cpuinfo names for its first CPU: x86's "model name";
// where there is none, arm64's implementer, part, variant and revision
// ("CPU implementer 0x41 part 0xd0c variant 0x3 revision 1") or ppc64's
// "cpu". Empty when it names none: two such machines are not told apart.
std::string cpu_model_of(std::string_view cpuinfo);

// One step of the probe: the CPU's limit while it ran.
struct CalibrationLevel {
    std::string name;               // "poll", "C1", ..., "none"
    LatencyLimit limit;             // what was written: 0 = poll only, nullopt = no limit
    std::vector<double> samples_us; // completion latencies, every round
    std::vector<double> round_medians_us;
    double median_us = 0;
    double p99_us = 0;
};

struct StateCost {
    std::string name;
    std::uint32_t declared_exit_latency_us = 0;
    double measured_cost_us = 0;
};

struct Calibration {
    MachineIdentity machine;
    std::string device;
    int cpu = 0;        // the completion CPU whose limit was stepped
    int submit_cpu = 0; // where the probe submitted
    int rounds = 0;
    int ios_per_level = 0;
    std::string date;
    std::vector<CalibrationLevel> levels; // poll first, none last
    std::vector<StateCost> states;
};

// Median and p99 of each level, and each state's cost: how much the median
// completion latency grows, over poll-only, when the limit lets the CPU go
// as deep as that state (never negative).
void summarize(Calibration& calibration);

// The probe's steps for a CPU's idle table: poll only, then up to each
// enabled state, then no limit; under haltpoll only 0 or nothing matters.
std::vector<CalibrationLevel> calibration_levels(const Cpu& cpu, IdleGovernorKind kind);

std::string format_calibration(const Calibration& calibration);
Result<Calibration> parse_calibration(std::string_view text, const std::string& source_name);
// The file's last line: a file without it was cut short.
constexpr std::string_view calibration_end_marker = "# end of calibration\n";
// parse_calibration() of a whole file: an error when the end marker is
// missing (a file cut short can still be valid TOML with a state missing).
Result<Calibration> parse_calibration_file(std::string_view text, const std::string& source_name);

// Per CPU: measured costs where the calibration names the state, declared
// latencies otherwise. `source` says which were used, for `latgov status`.
std::map<int, std::vector<IdleCost>>
idle_costs(const Topology& topology, const Calibration* calibration, std::string& source);

} // namespace latgov
