// Prometheus text exposition of what latgovd holds and has done, for the
// node_exporter textfile collector. The formatter is a pure function of plain
// structs; MetricsRecorder (metrics_recorder.hpp) fills them from the daemon.
#pragma once

#include "latgov/parse.hpp"
#include "latgov/rescan.hpp"

#include <array>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace latgov {

struct CpuMetrics {
    int cpu = 0;
    bool held = false;
    LatencyLimit limit;      // while held
    std::string reason;      // the queues it is held for, "nvme0n1/2,nvme0n1/3"
    double held_seconds = 0; // counter: every hold's duration, the current one included
    bool yielded = false;    // another writer changed the value; latgov leaves it
};

struct QueueMetrics {
    int index = 0;
    bool active = false;
};

struct DeviceMetrics {
    std::string name, mode, backend;
    std::optional<double> observed_latency_us;
    LatencyLimit limit;
    std::vector<QueueMetrics> queues;
};

// Bucket bounds of the onset delay histogram, in seconds.
inline constexpr std::array<double, 9> onset_buckets = {50e-6, 100e-6, 200e-6, 500e-6, 1e-3,
                                                        2e-3,  5e-3,   10e-3,  50e-3};

struct OnsetHistogram {
    std::array<std::uint64_t, onset_buckets.size()> buckets{}; // cumulative, as exposed
    std::uint64_t count = 0;
    double sum_seconds = 0;
    void observe(double seconds);
};

// How an idle latgovd learns of the first request.
enum class IoEventsState {
    in_use,      // block_getrq perf events wake it (unless paused for lone requests)
    unavailable, // refused (no tracefs, no CAP_PERFMON): it samples every idle_interval_ms
    off,         // io_events = false: it samples every idle_interval_ms
    not_needed,  // nothing can be held: no cpuidle driver and no fixed limit, or no device
};

// What latgovd logged since it started.
struct LogCounts {
    std::uint64_t warnings = 0, errors = 0;
    // messages the journal stream had no room for (it is written without
    // blocking, so that a stalled journald cannot stall the loop)
    std::uint64_t dropped_messages = 0;
};

struct MetricsSnapshot {
    std::vector<CpuMetrics> cpus;
    std::vector<DeviceMetrics> devices;
    bool global_held = false;
    LatencyLimit global_limit;
    std::uint64_t holds = 0, releases = 0;
    std::map<RescanCause, std::uint64_t> rescans; // causes not in it count 0
    std::uint64_t prearm_hits = 0, prearm_misses = 0;
    LogCounts logged;
    IoEventsState io_events = IoEventsState::unavailable;
    OnsetHistogram onset;
    double start_time_seconds = 0; // Unix time
};

// Pure: the exposition text, HELP and TYPE on every metric, base units.
std::string format_metrics(const MetricsSnapshot& snapshot);

} // namespace latgov
