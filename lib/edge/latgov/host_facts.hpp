// What `latgov doctor` and `latgov status` read of the host beyond the
// topology: mounts, tracefs, NVMe power states, isolated CPUs, and the
// PM QoS values others hold.
#pragma once

#include "latgov/doctor.hpp"
#include "latgov/status_place.hpp"
#include "latgov/sysroot.hpp"
#include "latgov/topology.hpp"

#include <filesystem>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>

namespace latgov {

// The files read_host_facts reads beyond the topology, as on the live
// system; `latgov snapshot` keeps them (and /sys/kernel/debug/block, whose
// presence it checks) so that `--sysroot` gives `latgov doctor` the same.
inline constexpr std::string_view host_fact_files[] = {
    "/proc/mounts",
    "/sys/kernel/tracing/events/block/block_getrq/id", // request_tracepoint
    "/sys/kernel/debug/tracing/events/block/block_getrq/id",
    "/sys/module/nvme_core/parameters/default_ps_max_latency_us",
    "/sys/devices/system/cpu/isolated",
};
inline constexpr std::string_view host_fact_dirs[] = {"/sys/kernel/debug/block"};

// `status` is latgovd's status.json, read from `place`, when there is one,
// else null. A status whose latgovd is gone (status_writer_gone) holds
// nothing of latgov's: its CPUs count as held by someone else.
// A status that is not what latgovd writes (a "cpus" entry without a CPU
// number, a limit that is not null or a number of microseconds) is an error
// naming the file and the key ("/run/latgov/status.json: cpus[0].cpu: ...").
// Under a root other than "/" (a snapshot) the facts are the snapshot's
// (HostFacts::snapshot), and a file the tree lacks is Found::unknown
// (tracefs, debugfs, /proc/mounts) unless the tree's /proc/mounts shows
// that its file system was not mounted. A status from the snapshot
// (HostFacts::status_from_snapshot) is what its latgovd held when it was
// taken: its writer's lock is not looked at.
Result<HostFacts> read_host_facts(const SysRoot& root, const Topology& topology,
                                  const nlohmann::json& status, const StatusPlace& place);

// Whether the latgovd that wrote `status` still runs: it holds
// `runtime_dir`'s lock, as every latgovd does while it runs (a latgovd
// killed without `latgovd --restore` leaves its last status, and may have
// left its limits held). nullopt when that cannot be told: the status names
// no pid, /proc/locks cannot be read, or a holder is of another pid
// namespace. The live system's, whatever the status: read_host_facts does
// not ask it of a snapshot's status.
std::optional<bool> status_writer_running(const std::filesystem::path& runtime_dir,
                                          const nlohmann::json& status);

// The pid of the latgovd that wrote `status` when it is known not to run
// (status_writer_running false), else nullopt.
std::optional<int> status_writer_gone(const std::filesystem::path& runtime_dir,
                                      const nlohmann::json& status);

// For `latgov status`: a line saying so when the status's writer is gone,
// else "". The second form takes what status_writer_running said.
std::string format_writer_gone(const std::filesystem::path& runtime_dir,
                               const nlohmann::json& status);
std::string format_writer_gone(std::optional<bool> running, const nlohmann::json& status);

// For `latgov status`: the limits others hold (/dev/cpu_dma_latency beyond
// latgov's own request, per-CPU values latgov does not hold: neither in the
// status nor, a hold newer than it, in the journal of `place`), one line.
std::string format_other_holders(const SysRoot& root, const nlohmann::json& status,
                                 const StatusPlace& place);

} // namespace latgov
