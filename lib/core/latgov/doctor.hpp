// `latgov doctor`: what on this host keeps latgov from working well, and what
// to do about it. The checks are pure over facts that host_facts.hpp reads.
#pragma once

#include "latgov/parse.hpp"

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

namespace latgov {

// Whether a file was found; `unreadable` when a directory on the way is
// closed to this user (tracefs and debugfs are 0700 where mounted);
// `unknown` when a captured tree (`--sysroot`) lacks it: the snapshot did
// not keep it, which says nothing of the host it was taken on.
enum class Found { no, yes, unreadable, unknown };

struct HostFacts {
    // Read from a captured tree (`--sysroot` other than /), not this host.
    bool snapshot = false;
    // latgovd's state is the snapshot's status file, not a process here
    // (a snapshot read with a runtime directory of this host has a status
    // of this host).
    bool status_from_snapshot = false;
    std::string cpuidle_driver, cpuidle_governor;
    bool cpu_dma_latency_known = false;
    LatencyLimit cpu_dma_latency;           // the aggregate of every holder
    bool latgov_running = false;            // a status file, its writer running
                                            // (in a snapshot: a status file)
    std::optional<int> latgov_gone_pid;     // a status file, its writer gone
    std::string status_error;               // a status file there that could not be read or parsed
    LatencyLimit latgov_global_limit;       // what latgov itself holds there
    std::map<int, LatencyLimit> cpu_values; // each CPU's pm_qos_resume_latency_us
    std::set<int> latgov_held_cpus;   // CPUs latgov holds (status, or a newer hold in its journal)
    Found tracefs_events = Found::no; // block_getrq id (request_tracepoint)
    Found debugfs_block = Found::no;  // /sys/kernel/debug/block
    std::string run_fstype;           // file system of /run
    Found mounts = Found::yes;        // /proc/mounts (unknown: not in the snapshot)
    std::optional<std::uint64_t> nvme_ps_max_latency_us; // nvme_core default_ps_max_latency_us
    bool has_nvme = false;
    std::set<int> isolated_cpus;
    // completion CPU -> the queue IRQs completing there ("nvme0q3")
    std::map<int, std::vector<std::string>> irqs_by_cpu;
    // What could not be read as the kernel writes it, each naming its file:
    // discovery's warnings, then the facts' own.
    std::vector<std::string> warnings;
};

// The file system type of the mount that holds `path`, from /proc/mounts'
// text: the longest mount point that is a prefix of it, the last such entry
// when several are stacked. Empty when none covers it.
std::string mount_fstype(std::string_view mounts, std::string_view path);

struct Finding {
    enum class Level { ok, note, attention };
    Level level = Level::ok;
    std::string check;  // what was looked at
    std::string result; // what was found
    std::string advice; // what to do (empty when nothing)
};

std::vector<Finding> diagnose(const HostFacts& facts);
std::string format_findings(const std::vector<Finding>& findings);
bool needs_attention(const std::vector<Finding>& findings);

} // namespace latgov
