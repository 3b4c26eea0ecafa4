// Files other programs read while latgovd rewrites them (the status file,
// the metrics file): written beside and renamed over, so a reader never
// sees half a file.
#pragma once

#include "latgov/sysroot.hpp"

#include <filesystem>
#include <string>

namespace latgov {

// Writes `text` to `<path>.tmp` (mode 0644) and renames it to `path`.
Result<void> replace_file(const std::filesystem::path& path, const std::string& text);

} // namespace latgov
