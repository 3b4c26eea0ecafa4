// `latgov doctor`, `latgov explain DEVICE` and `latgov status --watch`.
#pragma once

#include <chrono>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace latgov {

// Exit 0 when nothing needs attention, 1 when something does, 2 on usage.
int doctor_command(const std::string& sysroot, const std::vector<std::string>& args);
int explain_command(const std::string& sysroot, const std::vector<std::string>& args);
// Redraws `latgov status` in place every `interval` until interrupted.
int watch_status(const std::string& sysroot, const std::filesystem::path& status_file,
                 std::chrono::milliseconds interval);
// For `latgov status`: the limits others hold (/dev/cpu_dma_latency beyond
// latgov's own request, per-CPU values latgov does not hold), one line.
std::string format_other_holders(const std::string& sysroot, const nlohmann::json& status);

} // namespace latgov
