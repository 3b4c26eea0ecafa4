// Which wake-up cost each idle state has for the governor: measured by a
// calibration of this very machine when one exists, declared by the kernel
// otherwise. latgovd governs with these costs and `latgov explain` shows them.
#pragma once

#include "latgov/config.hpp"
#include "latgov/policy.hpp"
#include "latgov/qos.hpp"
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
// was taken on this machine and kernel; tells `log` why it is not used when
// it exists but does not apply.
IdleCosts load_idle_costs(const SysRoot& root, const DaemonSettings& settings,
                          const Topology& topology, const LogSink& log);

} // namespace latgov
