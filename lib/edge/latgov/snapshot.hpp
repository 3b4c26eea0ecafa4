// `latgov snapshot`: the files discovery and `latgov doctor` read, as a
// tar.gz that `--sysroot` reads back (symlinks kept as symlinks, as sysfs
// is mostly links).
#pragma once

#include "latgov/result.hpp"
#include "latgov/sysroot.hpp"

#include <filesystem>
#include <string_view>

namespace latgov {

// Reads through `root`, so that its capture keeps them, the files `latgov
// doctor` reads beyond the topology (host_fact_files) and latgovd's status
// file in `runtime_dir` (a path as on the captured system), those there
// are: a tree without them tells doctor "not in the snapshot".
void capture_doctor_files(const SysRoot& root, std::string_view runtime_dir);

Result<void> write_snapshot(const CaptureLog& log, const std::filesystem::path& output);

} // namespace latgov
