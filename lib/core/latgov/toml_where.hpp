// Where a TOML value sits, and what it is, as latgov's errors name them.
#pragma once

#include <limits>
#include <string>
#include <toml.hpp>

namespace latgov {

// "SOURCE:LINE:COLUMN"
inline std::string toml_where(const std::string& source, const toml::source_location& location) {
    return source + ":" + std::to_string(location.line()) + ":" + std::to_string(location.column());
}

// An integer as an error quotes it. toml11 reads one beyond 64 bits as the
// nearest that fits, a number the file may not hold: at those two it says
// "or more" ("or less").
inline std::string toml_integer_text(toml::integer number) {
    if (number == std::numeric_limits<toml::integer>::max())
        return std::to_string(number) + " or more";
    if (number == std::numeric_limits<toml::integer>::min())
        return std::to_string(number) + " or less";
    return std::to_string(number);
}

} // namespace latgov
