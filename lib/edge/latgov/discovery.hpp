// Topology discovery: reads sysfs, procfs and /dev under a root into the
// immutable Topology snapshot the core works on.
#pragma once

#include "latgov/result.hpp"
#include "latgov/sysroot.hpp"
#include "latgov/topology.hpp"

#include <optional>
#include <string>
#include <vector>

namespace latgov {

// Reads the machine (or captured tree) under `root`. Fails only when the
// machine itself cannot be read (no /sys/devices/system/cpu/online); a device
// that vanishes or reads wrong mid-scan is left out with a warning.
Result<Topology> discover_topology(const SysRoot& root);

// The first IRQ of a queue of `devices` (names) whose completion CPUs, read
// now, are not the ones `topology` found: irqbalance or an administrator
// moved it, which no uevent announces (the kernel moves only unmanaged
// IRQs: a controller's single shared vector, INTx, an MSI without
// per-queue vectors). Said as a line for the log; nullopt when none moved.
// An IRQ that cannot be read is not taken for a move.
std::optional<std::string> moved_irq(const SysRoot& root, const Topology& topology,
                                     const std::vector<std::string>& devices);

} // namespace latgov
