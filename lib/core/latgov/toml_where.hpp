// Where a TOML value sits, as latgov's errors name it.
#pragma once

#include <string>
#include <toml.hpp>

namespace latgov {

// "SOURCE:LINE:COLUMN"
inline std::string toml_where(const std::string& source, const toml::source_location& location) {
    return source + ":" + std::to_string(location.line()) + ":" + std::to_string(location.column());
}

} // namespace latgov
