// How latgov's JSON documents (topology, status) spell shared values.
#pragma once

#include "latgov/parse.hpp"

#include <nlohmann/json.hpp>

namespace latgov {

// A latency limit: the number of microseconds, or null for no limit.
inline nlohmann::ordered_json limit_json(LatencyLimit limit) {
    return limit ? nlohmann::ordered_json(*limit) : nlohmann::ordered_json(nullptr);
}

} // namespace latgov
