// Files latgov rewrites whole (the journal, the status, evidence and metrics
// files): written to "<path>.tmp" and renamed over `path`, so a crash leaves
// the old text or the new one, never half of either.
#pragma once

#include "latgov/result.hpp"

#include <filesystem>
#include <string_view>

namespace latgov {

// No fsync: these files guard against the daemon's death, not the
// machine's, and a flush would be IO on the disks latgov watches.
Result<void> replace_file(const std::filesystem::path& path, std::string_view text);

} // namespace latgov
