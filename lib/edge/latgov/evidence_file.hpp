// The evidence file: what live IO taught about holding (cost_model.hpp),
// kept across restarts on the same machine and kernel.
#pragma once

#include "latgov/cost_model.hpp"
#include "latgov/result.hpp"

#include <filesystem>

namespace latgov {

Result<EvidenceBook> load_evidence(const std::filesystem::path& path);
// Written to a temporary file and renamed over `path`, so a crash leaves the
// old file or the new one; parent directories are created.
Result<void> save_evidence(const std::filesystem::path& path, const EvidenceBook& book);

} // namespace latgov
