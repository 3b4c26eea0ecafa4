// The calibration file: an error value for any bad input, and a parsed file
// formats back to one that parses.
#include "latgov/calibration.hpp"

#include <cstdlib>

extern "C" int LLVMFuzzerTestOneInput(const unsigned char* data, size_t size) {
    const std::string_view text(reinterpret_cast<const char*>(data), size);
    auto parsed = latgov::parse_calibration(text, "fuzz.toml");
    if (parsed && !latgov::parse_calibration(latgov::format_calibration(*parsed), "again.toml"))
        std::abort();
    return 0;
}
