// calibrate_on_start: latgovd measures the idle states' wake-up costs itself
// when no calibration exists yet (the costs in use: latgov/idle_costs.hpp).
#pragma once

#include "latgov/config.hpp"
#include "latgov/runtime_dir.hpp"
#include "latgov/sysroot.hpp"

namespace latgov {

// Runs the probe when the calibration file is missing, unreadable or of
// another machine or kernel, and writes its result; a failure is logged and
// leaves the declared costs. The probe reads a disk the configuration
// governs; its journal is in `runtime_dir`, which latgovd holds locked.
void calibrate_if_unusable(const SysRoot& root, const Config& config,
                           const RuntimeDir& runtime_dir);

} // namespace latgov
