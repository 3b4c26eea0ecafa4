// The TOML configuration: an error value for any bad input, never a throw
// or a crash.
#include "latgov/config.hpp"

extern "C" int LLVMFuzzerTestOneInput(const unsigned char* data, size_t size) {
    const std::string_view text(reinterpret_cast<const char*>(data), size);
    auto config = latgov::parse_config(text, "fuzz.toml");
    (void)config;
    return 0;
}
