// `latgov snapshot`: the files discovery read, as a tar.gz that `--sysroot`
// reads back (symlinks kept as symlinks, as sysfs is mostly links).
#pragma once

#include "latgov/result.hpp"
#include "latgov/sysroot.hpp"

#include <filesystem>

namespace latgov {

Result<void> write_snapshot(const CaptureLog& log, const std::filesystem::path& output);

} // namespace latgov
