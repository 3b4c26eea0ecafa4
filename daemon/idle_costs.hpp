// calibrate_on_start: latgovd measures the idle states' wake-up costs itself
// when no calibration exists yet (the costs in use: latgov/idle_costs.hpp).
#pragma once

#include "latgov/config.hpp"
#include "latgov/sysroot.hpp"

namespace latgov {

// Runs the probe when no calibration file exists yet and writes its result;
// a failure is logged and leaves the declared costs.
void calibrate_if_missing(const SysRoot& root, const DaemonSettings& settings);

} // namespace latgov
