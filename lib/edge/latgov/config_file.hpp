// The configuration files: the main file and its drop-ins, read from disk
// and parsed by the core (config.hpp).
#pragma once

#include "latgov/config.hpp"
#include "latgov/result.hpp"

#include <filesystem>

namespace latgov {

// Loads `path` and then `<dir of path>/latgov.d/*.toml` in name order; each
// drop-in's [daemon]/[defaults] keys override, its [[device]] entries are
// appended. A missing main file is not an error (embedded default), unless
// `required` is set.
Result<Config> load_config(const std::filesystem::path& path, bool required = false);

} // namespace latgov
