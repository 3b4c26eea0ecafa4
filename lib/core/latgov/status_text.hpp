// `latgov status` without --json: the status file latgovd writes, as text.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

namespace latgov {

// A file that is not what latgovd writes throws (nlohmann::json::exception
// or std::invalid_argument).
std::string format_status(const nlohmann::json& status);

} // namespace latgov
