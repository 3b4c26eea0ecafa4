// The calibration file (`latgov calibrate` writes it, latgovd reads it):
// never read or written through a symlink, replaced atomically.
#pragma once

#include "latgov/calibration.hpp"
#include "latgov/result.hpp"

#include <filesystem>
#include <optional>

namespace latgov {

// nullopt when there is no file; an error for a symlink, a truncated or a
// malformed file (latgovd then recalibrates or uses declared latencies).
Result<std::optional<Calibration>> load_calibration(const std::filesystem::path& path);
// Atomic (unique temporary + rename), never through a symlink; creates the
// file's directory.
Result<void> save_calibration(const std::filesystem::path& path, const Calibration& calibration);

} // namespace latgov
