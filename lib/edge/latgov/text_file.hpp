// A whole file as text, for files latgov owns (configuration, calibration,
// the status file). Machine files under a root go through SysRoot instead.
#pragma once

#include "latgov/result.hpp"

#include <cstddef>
#include <filesystem>
#include <string>

namespace latgov {

// Far above any configuration, evidence or status file latgov writes; a
// path that leads to /dev/zero or a FIFO is an error, not a hang.
constexpr std::size_t max_text_file_bytes = 16 * 1024 * 1024;

// The error reads "Failed to read <path>: <reason>", and
// "Failed to read <path>: larger than <max_bytes> bytes" past the cap.
Result<std::string> read_text_file(const std::filesystem::path& path,
                                   std::size_t max_bytes = max_text_file_bytes);

} // namespace latgov
