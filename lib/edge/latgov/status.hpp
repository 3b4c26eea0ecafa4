// /run/latgov/status.json: what latgovd holds right now, written atomically
// by the daemon and read by `latgov status` (readable by any user).
#pragma once

#include "latgov/governor.hpp"
#include "latgov/onset.hpp"
#include "latgov/qos.hpp"
#include "latgov/result.hpp"
#include "latgov/runtime_dir.hpp"
#include "latgov/status_place.hpp"
#include "latgov/status_text.hpp"

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
    // "measured (<disk>, <date>)" from a calibration of this machine, else
    // "declared (<why no calibration applies>)".
    std::string cost_source;
    std::string io_events;   // how an idle daemon wakes: events, or why it samples
    OnsetSummary onset;      // request issued -> constraint written
    OnsetSummary onset_wake; // of that, request issued -> latgovd running
    OnsetSummary onset_work; // and latgovd running -> constraint written
    TimePoint now;
    // Why the governed devices cannot be sampled (nothing is held then);
    // empty while they can.
    std::string sampling_error{};
};

// The whole status document (schema latgov.status/1): one entry per online
// CPU, one per governed device, the global hold, the IO event state and the
// onset delays.
nlohmann::ordered_json build_status(const StatusInput& input);
// Atomically, as status_file_name in the runtime directory (readable by all).
Result<void> write_status(const RuntimeDir& dir, const nlohmann::ordered_json& status);

} // namespace latgov
