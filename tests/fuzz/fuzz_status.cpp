// status.json as `latgov status` reads it: a file that is not what latgovd
// writes throws (reported as an error), never a crash or undefined
// behaviour.
#include "latgov/status_text.hpp"

#include <stdexcept>

extern "C" int LLVMFuzzerTestOneInput(const unsigned char* data, size_t size) {
    const std::string_view text(reinterpret_cast<const char*>(data), size);
    auto status = nlohmann::json::parse(text, nullptr, false);
    if (status.is_discarded())
        return 0;
    try {
        (void)latgov::format_status(status);
    } catch (const nlohmann::json::exception&) {
    } catch (const std::invalid_argument&) {
    }
    return 0;
}
