// `latgov status` without --json: the status file latgovd writes, as text.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

namespace latgov {

// A file that is not what latgovd writes throws (nlohmann::json::exception
// or std::invalid_argument). `now_s` (wall clock, seconds since the epoch)
// says when each verdict is measured again; without it, that is left out.
std::string format_status(const nlohmann::json& status,
                          std::optional<std::int64_t> now_s = std::nullopt);

} // namespace latgov
