#include "latgov/doctor.hpp"

#include "latgov/parse.hpp"

#include <algorithm>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <sstream>

namespace latgov {

std::string mount_fstype(std::string_view mounts, std::string_view path) {
    std::string best_point, best_type;
    std::istringstream in{std::string(mounts)};
    for (std::string line; std::getline(in, line);) {
        std::istringstream fields(line);
        std::string source, point, type;
        if (!(fields >> source >> point >> type))
            continue;
        const bool covers =
            point == "/" || path == point ||
            (path.starts_with(point) && path.size() > point.size() && path[point.size()] == '/');
        if (covers && point.size() >= best_point.size()) {
            best_point = point;
            best_type = type;
        }
    }
    return best_type;
}

std::vector<Finding> diagnose(const HostFacts& f) {
    using L = Finding::Level;
    std::vector<Finding> out;

    if (f.cpuidle_driver.empty() && f.snapshot)
        out.push_back({L::note, "cpuidle driver", "unknown (not in the snapshot)", ""});
    else if (f.cpuidle_driver.empty() || f.cpuidle_driver == "none")
        out.push_back({L::attention, "cpuidle driver", "none",
                       "CPUs idle in the default idle whatever PM QoS says: latgov cannot change "
                       "wake-up latency here. Enable a cpuidle driver (intel_idle, acpi_idle; "
                       "haltpoll in KVM guests: the cpuidle_haltpoll module)."});
    else if (f.cpuidle_driver == "haltpoll")
        out.push_back({L::note, "cpuidle driver",
                       fmt::format("haltpoll (governor {})", f.cpuidle_governor),
                       "haltpoll honours only a limit of 0: latgov holds 0 or nothing."});
    else
        out.push_back({L::ok, "cpuidle driver",
                       fmt::format("{} (governor {})", f.cpuidle_driver, f.cpuidle_governor), ""});

    // A file there but unparsable is no missing file: its warning says what.
    auto unparsable = [&](std::string_view file) {
        return std::any_of(f.warnings.begin(), f.warnings.end(),
                           [&](const std::string& w) { return w.find(file) != w.npos; });
    };
    if (!f.cpu_dma_latency_known && unparsable("/dev/cpu_dma_latency"))
        out.push_back({L::note, "/dev/cpu_dma_latency", "unparsable (below)", ""});
    else if (!f.cpu_dma_latency_known && f.snapshot)
        out.push_back({L::note, "/dev/cpu_dma_latency", "unknown (not in the snapshot)", ""});
    else if (!f.cpu_dma_latency_known)
        out.push_back({L::note, "/dev/cpu_dma_latency", "not readable",
                       "Run as root to see whether another process holds a global limit."});
    else if (f.cpu_dma_latency && f.cpu_dma_latency != f.latgov_global_limit)
        out.push_back(
            {L::attention, "/dev/cpu_dma_latency",
             fmt::format("held at {} by another process", describe_limit(f.cpu_dma_latency)),
             "A global limit (tuned's force_latency, a database, an admin) applies to "
             "every CPU at all times and makes per-queue limits moot. Find the holder "
             "with `fuser -v /dev/cpu_dma_latency` (latgovd and latgov are listed too: "
             "they open it for their lock)."});
    else
        out.push_back({L::ok, "/dev/cpu_dma_latency",
                       f.cpu_dma_latency ? "held by latgov only" : "no holder", ""});

    std::vector<std::string> external;
    for (const auto& [cpu, value] : f.cpu_values)
        if (value && !f.latgov_held_cpus.contains(cpu))
            external.push_back(fmt::format("cpu{}={}", cpu, format_resume_latency(value)));
    if (!external.empty())
        out.push_back({L::attention, "per-CPU pm_qos_resume_latency_us",
                       fmt::format("set by someone else: {}", fmt::join(external, " ")),
                       "latgov keeps a stricter value someone else set and never fights a "
                       "change; those CPUs are not governed. tuned, CRI-O, sched_ext "
                       "schedulers or an admin may have written them."});
    else
        out.push_back({L::ok, "per-CPU pm_qos_resume_latency_us", "no other writer", ""});

    switch (f.tracefs_events) {
    case Found::yes:
        out.push_back({L::ok, "tracefs", "block_getrq events available", ""});
        break;
    case Found::unreadable:
        out.push_back({L::note, "tracefs", "not readable",
                       "Run as root to see whether block_getrq events are available."});
        break;
    case Found::unknown:
        out.push_back({L::note, "tracefs", "unknown (not in the snapshot)", ""});
        break;
    case Found::no:
        out.push_back({L::attention, "tracefs", "block_getrq not found",
                       "An idle latgovd cannot sleep until the first request and samples "
                       "instead. Mount tracefs: `mount -t tracefs none /sys/kernel/tracing`."});
        break;
    }
    switch (f.debugfs_block) {
    case Found::yes:
        out.push_back({L::ok, "debugfs", "mounted", ""});
        break;
    case Found::unreadable:
        out.push_back({L::note, "debugfs", "not readable",
                       "Run as root to see it; only queue_inflight = true needs it."});
        break;
    case Found::unknown:
        out.push_back({L::note, "debugfs", "unknown (not in the snapshot)", ""});
        break;
    case Found::no:
        out.push_back({L::note, "debugfs", "not mounted",
                       "Only queue_inflight = true needs it: `mount -t debugfs none "
                       "/sys/kernel/debug`."});
        break;
    }

    if (f.mounts == Found::unknown)
        out.push_back({L::note, "/run", "file system unknown (not in the snapshot)", ""});
    else if (f.run_fstype == "tmpfs" || f.run_fstype == "ramfs")
        out.push_back({L::ok, "/run", f.run_fstype, ""});
    else
        out.push_back({L::attention, "/run",
                       f.run_fstype.empty() ? "file system unknown" : "on " + f.run_fstype,
                       "latgovd's journal and status writes under /run/latgov would be IO on a "
                       "disk it governs; mount a tmpfs on /run (the shipped unit keeps them in "
                       "/run/latgov whatever runtime_dir says)."});

    if (f.has_nvme) {
        if (!f.nvme_ps_max_latency_us)
            out.push_back({L::note, "NVMe APST",
                           unparsable("default_ps_max_latency_us")
                               ? "nvme_core default_ps_max_latency_us unparsable (below)"
                           : f.snapshot ? "nvme_core default_ps_max_latency_us unknown (not in "
                                          "the snapshot)"
                                        : "nvme_core default_ps_max_latency_us unknown",
                           ""});
        else if (*f.nvme_ps_max_latency_us == 0)
            out.push_back({L::note, "NVMe APST", "disabled (default_ps_max_latency_us=0)",
                           "Drives stay in their operational power states; fine for latency, "
                           "costs idle power."});
        else
            out.push_back({L::note, "NVMe APST",
                           fmt::format("enabled, states with exit latency up to {} us",
                                       *f.nvme_ps_max_latency_us),
                           "A drive's own power-state exit adds to the first IO after idle; "
                           "latgov cannot hide it. Lower nvme_core.default_ps_max_latency_us "
                           "where that first IO matters."});
    }

    // What discovery and the facts could not read as expected; each says
    // what it left out or took as unknown.
    for (const auto& warning : f.warnings)
        out.push_back({L::note, "warning", warning, ""});

    std::vector<std::string> on_isolated;
    for (int cpu : f.isolated_cpus)
        if (auto it = f.irqs_by_cpu.find(cpu); it != f.irqs_by_cpu.end())
            on_isolated.push_back(
                fmt::format("cpu{}: {}", cpu,
                            terminal_safe_field(fmt::format("{}", fmt::join(it->second, ",")))));
    if (!on_isolated.empty())
        out.push_back({L::attention, "queue IRQs on isolated CPUs",
                       fmt::format("{}", fmt::join(on_isolated, "; ")),
                       "Holding an isolated CPU out of deep idle for IO it completes disturbs "
                       "the isolated workload; managed NVMe IRQs follow the CPU set: consider "
                       "isolcpus=managed_irq or fewer queues."});
    else if (!f.isolated_cpus.empty())
        out.push_back({L::ok, "queue IRQs on isolated CPUs", "none", ""});

    // A snapshot's latgovd does not run here: its status is what it held
    // when the snapshot was taken, whether it still runs is not this host's
    // to tell.
    if (!f.status_error.empty())
        out.push_back({L::attention, "latgovd", "status unreadable: " + f.status_error,
                       "What latgov holds cannot be told from it (`latgov status` says the same). "
                       "A running latgovd replaces it at its next status write; one that no "
                       "latgovd writes may be removed."});
    else if (f.status_from_snapshot)
        out.push_back({L::note, "latgovd",
                       f.latgov_running ? "status from the snapshot" : "no status in the snapshot",
                       ""});
    else if (f.latgov_gone_pid)
        out.push_back({L::attention, "latgovd",
                       fmt::format("not running; pid {} left its status", *f.latgov_gone_pid),
                       "A latgovd that was killed may have left its limits held: "
                       "`latgovd --restore` puts back what its journal records (the unit's "
                       "ExecStopPost= runs it), then start it: `systemctl restart latgov`."});
    else
        out.push_back({f.latgov_running ? L::ok : L::note, "latgovd",
                       f.latgov_running ? "running (status file found)" : "not running",
                       f.latgov_running ? "" : "Start it: `systemctl enable --now latgov`."});
    return out;
}

bool needs_attention(const std::vector<Finding>& findings) {
    return std::any_of(findings.begin(), findings.end(),
                       [](const Finding& f) { return f.level == Finding::Level::attention; });
}

std::string format_findings(const std::vector<Finding>& findings) {
    std::string out;
    for (const auto& f : findings) {
        const char* mark = f.level == Finding::Level::ok     ? "ok  "
                           : f.level == Finding::Level::note ? "note"
                                                             : "FIX ";
        out += fmt::format("[{}] {}: {}\n", mark, f.check, f.result);
        if (!f.advice.empty())
            out += fmt::format("       {}\n", f.advice);
    }
    return out;
}

} // namespace latgov
