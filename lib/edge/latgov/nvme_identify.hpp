// What only the NVMe controller itself can tell: its power states, from
// Identify Controller (libnvme). Live systems only; needs read access to
// /dev/nvmeN and, on older kernels, CAP_SYS_ADMIN.
#pragma once

#include "latgov/topology.hpp"

#include <string>
#include <vector>

namespace latgov {

// Empty when the controller cannot be opened or identified.
std::vector<NvmePowerState> read_nvme_power_states(const std::string& controller);

} // namespace latgov
