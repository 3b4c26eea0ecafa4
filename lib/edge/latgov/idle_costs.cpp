#include "latgov/idle_costs.hpp"

#include "latgov/calibration.hpp"
#include "latgov/calibration_file.hpp"
#include "latgov/calibration_probe.hpp"

#include <optional>

namespace latgov {

IdleCosts load_idle_costs(const SysRoot& root, const DaemonSettings& settings,
                          const Topology& topology, const LogSink& log) {
    const auto& path = settings.calibration_file;
    std::optional<Calibration> calibration;
    std::string why;
    if (auto loaded = load_calibration(path); !loaded) {
        why = "unreadable calibration: " + loaded.error().message;
        log(loaded.error().message + "; using declared exit latencies");
    } else if (!*loaded) {
        why = "no calibration at " + path.string();
    } else if ((*loaded)->machine != read_machine_identity(root, topology)) {
        why = "calibration at " + path.string() + " is for another machine or kernel";
        log(why + ": recalibrate with `latgov calibrate`");
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

} // namespace latgov
