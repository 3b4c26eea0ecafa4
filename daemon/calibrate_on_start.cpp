#include "calibrate_on_start.hpp"

#include "latgov/calibration.hpp"
#include "latgov/calibration_file.hpp"
#include "latgov/calibration_probe.hpp"
#include "latgov/discovery.hpp"

#include <atomic>
#include <chrono>
#include <spdlog/spdlog.h>
#include <systemd/sd-daemon.h>

namespace latgov {

namespace {

// The probe's longest run, and how much the service manager's start-up
// timeout is extended for it: room for the discovery and the file writes
// around it too.
constexpr std::chrono::seconds calibration_max_time{20};
constexpr std::chrono::seconds calibration_timeout_extension = 3 * calibration_max_time;

} // namespace

void calibrate_if_unusable(const SysRoot& root, const Config& config,
                           const RuntimeDir& runtime_dir) {
    const DaemonSettings& settings = config.daemon;
    if (!settings.calibrate_on_start)
        return;
    // A truncated or unreadable file is measured again, not kept for ever,
    // and so is one of another machine or kernel (an upgrade), which
    // load_idle_costs would not use.
    const auto& path = settings.calibration_file;
    if (auto loaded = load_calibration(path); loaded && *loaded) {
        auto topology = discover_topology(root);
        if (!topology) // the probe's own discovery says why, if it fails too
            spdlog::info("Failed to check that the calibration at {} is for this machine: {}; "
                         "measuring idle-state costs again (calibrate_on_start)",
                         path.string(), topology.error().message);
        else if ((*loaded)->machine == read_machine_identity(root, *topology))
            return;
        else
            spdlog::info("calibration at {} is for another machine or kernel: measuring "
                         "idle-state costs again (calibrate_on_start)",
                         path.string());
    } else {
        spdlog::info("no usable calibration at {}: measuring idle-state costs (calibrate_on_start)",
                     path.string());
    }
    sd_notifyf(0, "STATUS=Calibrating idle-state costs\nEXTEND_TIMEOUT_USEC=%llu",
               static_cast<unsigned long long>(
                   std::chrono::microseconds(calibration_timeout_extension).count()));
    CalibrateOptions options;
    options.config = config;
    options.locked_runtime_dir = &runtime_dir;
    options.max_time = calibration_max_time;
    std::atomic<bool> stop{false};
    auto calibration = run_calibration(root, options, stop);
    if (!calibration) {
        spdlog::warn("Failed to calibrate: {}; using declared exit latencies",
                     calibration.error().message);
        return;
    }
    if (auto saved = save_calibration(path, *calibration); !saved)
        spdlog::warn("{}", saved.error().message);
}

} // namespace latgov
