// Which wake-up cost each idle state has for the governor: measured by a
// calibration of this very machine when one exists, declared by the kernel
// otherwise.
#pragma once

#include "latgov/config.hpp"
#include "latgov/policy.hpp"
#include "latgov/sysroot.hpp"
#include "latgov/topology.hpp"

#include <map>
#include <string>
#include <vector>

namespace latgov {

struct IdleCosts {
    std::map<int, std::vector<IdleCost>> per_cpu;
    std::string source; // for `latgov status`: "measured (...)" or "declared (<why>)"
};

// Reads the calibration file named by the configuration and checks that it
// was taken on this machine and kernel; logs why it is not used.
IdleCosts load_idle_costs(const SysRoot& root, const DaemonSettings& settings,
                          const Topology& topology);

// calibrate_on_start: runs the probe when no calibration file exists yet and
// writes its result; a failure is logged and leaves the declared costs.
void calibrate_if_missing(const SysRoot& root, const DaemonSettings& settings);

} // namespace latgov
