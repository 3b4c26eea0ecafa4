// A whole file as text, for files latgov owns (configuration, calibration,
// the status file). Machine files under a root go through SysRoot instead.
#pragma once

#include "latgov/result.hpp"

#include <filesystem>
#include <string>

namespace latgov {

// The error reads "Failed to read <path>: <reason>".
Result<std::string> read_text_file(const std::filesystem::path& path);

} // namespace latgov
