// What `latgov doctor` and `latgov status` read of the host beyond the
// topology: mounts, tracefs, NVMe power states, isolated CPUs, and the
// PM QoS values others hold.
#pragma once

#include "latgov/doctor.hpp"
#include "latgov/sysroot.hpp"
#include "latgov/topology.hpp"

#include <nlohmann/json.hpp>
#include <optional>
#include <string>

namespace latgov {

// `status` is latgovd's status.json when there is one, else null.
HostFacts read_host_facts(const SysRoot& root, const Topology& topology,
                          const nlohmann::json& status);

// The pid of the latgovd that wrote `status` when that process is gone (a
// latgovd killed without `latgovd --restore` leaves its last status, and
// may have left its limits held); nullopt while it runs, or when the status
// names no pid.
std::optional<int> status_writer_gone(const SysRoot& root, const nlohmann::json& status);

// For `latgov status`: a line saying so when the status's writer is gone,
// else "".
std::string format_writer_gone(const SysRoot& root, const nlohmann::json& status);

// For `latgov status`: the limits others hold (/dev/cpu_dma_latency beyond
// latgov's own request, per-CPU values latgov does not hold), one line.
std::string format_other_holders(const SysRoot& root, const nlohmann::json& status);

} // namespace latgov
