#include "idle_costs.hpp"

#include "latgov/calibration.hpp"
#include "latgov/calibration_file.hpp"
#include "latgov/calibration_probe.hpp"

#include <atomic>
#include <optional>
#include <spdlog/spdlog.h>
#include <systemd/sd-daemon.h>

namespace latgov {

IdleCosts load_idle_costs(const SysRoot& root, const DaemonSettings& settings,
                          const Topology& topology) {
    const auto& path = settings.calibration_file;
    std::optional<Calibration> calibration;
    std::string why;
    if (auto loaded = load_calibration(path); !loaded) {
        why = "unreadable calibration: " + loaded.error().message;
        spdlog::warn("{}; using declared exit latencies", loaded.error().message);
    } else if (!*loaded) {
        why = "no calibration at " + path.string();
    } else if ((*loaded)->machine != read_machine_identity(root, topology)) {
        why = "calibration at " + path.string() + " is for another machine or kernel";
        spdlog::warn("{}: recalibrate with `latgov calibrate`", why);
    } else {
        calibration = std::move(**loaded);
    }
    IdleCosts costs;
    costs.per_cpu = idle_costs(topology, calibration ? &*calibration : nullptr, costs.source);
    if (!calibration)
        costs.source = "declared (" + why + ")";
    if (idle_governor_kind(topology.cpuidle_driver, topology.cpuidle_governor) ==
        IdleGovernorKind::zero_only)
        costs.source += "; under haltpoll auto mode uses no cost: live IO decides (limit_from)";
    return costs;
}

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
        spdlog::warn("Failed to calibrate, using declared exit latencies: {}",
                     calibration.error().message);
        return;
    }
    if (auto saved = save_calibration(settings.calibration_file, *calibration); !saved)
        spdlog::warn("{}", saved.error().message);
}

} // namespace latgov
