#include "idle_costs.hpp"

#include "latgov/calibration.hpp"
#include "latgov/calibration_file.hpp"
#include "latgov/calibration_probe.hpp"

#include <atomic>
#include <spdlog/spdlog.h>
#include <systemd/sd-daemon.h>

namespace latgov {

void calibrate_if_missing(const SysRoot& root, const DaemonSettings& settings) {
    if (!settings.calibrate_on_start)
        return;
    // A truncated or unreadable file is measured again, not kept for ever.
    if (auto loaded = load_calibration(settings.calibration_file); loaded && *loaded)
        return;
    spdlog::info("no usable calibration at {}: measuring idle-state costs (calibrate_on_start)",
                 settings.calibration_file.string());
    sd_notify(0, "STATUS=Calibrating idle-state costs\nEXTEND_TIMEOUT_USEC=60000000");
    CalibrateOptions options;
    options.runtime_dir = settings.runtime_dir;
    options.max_time = std::chrono::seconds(20);
    options.take_lock = false; // latgovd holds it
    std::atomic<bool> stop{false};
    auto calibration = run_calibration(root, options, stop);
    if (!calibration) {
        spdlog::warn("Failed to calibrate: {}; using declared exit latencies",
                     calibration.error().message);
        return;
    }
    if (auto saved = save_calibration(settings.calibration_file, *calibration); !saved)
        spdlog::warn("{}", saved.error().message);
}

} // namespace latgov
