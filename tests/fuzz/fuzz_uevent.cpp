// Kernel uevent datagrams: parse_uevent is total (an error value, never a
// crash), and what it accepts has the three fields it promises.
#include "latgov/uevent.hpp"

#include <cstdlib>

extern "C" int LLVMFuzzerTestOneInput(const unsigned char* data, size_t size) {
    const std::string_view text(reinterpret_cast<const char*>(data), size);
    if (auto event = latgov::parse_uevent(text)) {
        if (event->action.empty() || event->subsystem.empty() || event->devpath.empty())
            std::abort();
        (void)latgov::changes_topology(*event);
    }
    return 0;
}
