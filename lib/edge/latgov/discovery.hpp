// Topology discovery: reads sysfs, procfs and /dev under a root into the
// immutable Topology snapshot the core works on.
#pragma once

#include "latgov/result.hpp"
#include "latgov/sysroot.hpp"
#include "latgov/topology.hpp"

namespace latgov {

// Reads the machine (or captured tree) under `root`. Fails only when the
// machine itself cannot be read (no /sys/devices/system/cpu/online); a device
// that vanishes or reads wrong mid-scan is left out with a warning.
Result<Topology> discover_topology(const SysRoot& root);

} // namespace latgov
