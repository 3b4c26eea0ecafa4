// The metrics file, rewritten whole (the journal, status, evidence and
// calibration files go through runtime_dir.hpp): written to a unique
// temporary file and renamed over `path`, so a crash leaves the old text or
// the new one, never half of either, and a symlink planted at `path` is
// replaced, not followed.
#pragma once

#include "latgov/result.hpp"

#include <filesystem>
#include <string_view>

namespace latgov {

// No fsync (Durability::process_crash): the file guards against the
// daemon's death, not the machine's, and a flush would be IO on the disks
// latgov watches.
Result<void> replace_file(const std::filesystem::path& path, std::string_view text);

} // namespace latgov
