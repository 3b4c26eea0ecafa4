// What only the NVMe controller itself can tell: its power states, from
// Identify Controller (libnvme). Live systems only; needs read access to
// /dev/nvmeN and, on older kernels, CAP_SYS_ADMIN.
#pragma once

#include "latgov/sysroot.hpp"
#include "latgov/topology.hpp"

#include <string>
#include <vector>

namespace latgov {

// Empty when the controller cannot be opened or identified.
std::vector<NvmePowerState> read_nvme_power_states(const std::string& controller);

// Fills every controller's power states on a live system (an ioctl per
// controller); a captured tree has none to read. Only what prints power
// states (`latgov topology`) asks for them: the daemon does not use them.
void add_nvme_power_states(const SysRoot& root, Topology& topology);

} // namespace latgov
