// `latgov explain DEVICE`: in plain words, why a device's limit is what it
// is. A pure text builder over the topology, the configuration, the idle
// costs in use and latgovd's status.
#pragma once

#include "latgov/config.hpp"
#include "latgov/policy.hpp"
#include "latgov/result.hpp"
#include "latgov/topology.hpp"

#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace latgov {

struct ExplainInput {
    const Topology& topology;
    const Config& config;
    const std::map<int, std::vector<IdleCost>>& costs;
    std::string cost_source;      // "declared (...)" or "measured (...)"
    const nlohmann::json& status; // latgovd's status.json, or null when it is not running
};

// An error for a device that does not exist, and for a status that is not
// what latgovd writes (naming the field, as "devices[0].limit_us").
Result<std::string> explain_device(const ExplainInput& in, std::string_view device);

} // namespace latgov
