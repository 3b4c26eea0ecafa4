// /run/latgov/status.json: what latgovd holds right now, written atomically
// by the daemon and read by `latgov status` (readable by any user).
#pragma once

#include "latgov/governor.hpp"
#include "latgov/qos.hpp"
#include "latgov/result.hpp"
#include "latgov/runtime_dir.hpp"

#include <chrono>
#include <filesystem>
#include <nlohmann/json.hpp>

namespace latgov {

struct StatusInput {
    const Governor& governor;
    const Holds& holds;
    const PerCpuHolder& percpu;
    const GlobalHolder& global;
    const Topology& topology;
    std::string cost_source; // "declared" or the calibration file used
    SteadyTime now;
};

nlohmann::ordered_json build_status(const StatusInput& input);
// Atomically, as "status.json" in the runtime directory (readable by all).
Result<void> write_status(const RuntimeDir& dir, const nlohmann::ordered_json& status);

// `latgov status` without --json. A file that is not what latgovd writes
// throws (nlohmann::json::exception or std::invalid_argument).
std::string format_status(const nlohmann::json& status);

} // namespace latgov
