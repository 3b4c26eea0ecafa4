// What latgovd's metrics count across its run (holds, releases, rescans, the
// onset histogram), and the snapshot of them with what it holds now, for
// format_metrics (metrics.hpp).
#pragma once

#include "latgov/metrics.hpp"
#include "latgov/qos.hpp"
#include "latgov/rescan.hpp"
#include "latgov/status.hpp"

#include <cstdint>
#include <map>

namespace latgov {

// Counters the daemon feeds at its transitions.
class MetricsRecorder {
  public:
    explicit MetricsRecorder(double start_time_seconds);
    // After every PerCpuHolder::apply: counts holds and releases, sums held time.
    void observe_percpu(const std::map<int, PerCpuHolder::Held>& held, TimePoint now);
    void observe_onset(double seconds) { onset_.observe(seconds); }
    void count_rescan(RescanCause cause) { ++rescans_[cause]; }
    // Windows held ahead of periodic requests that ended since the last call.
    void count_windows(std::uint64_t hits, std::uint64_t misses) {
        prearm_hits_ += hits;
        prearm_misses_ += misses;
    }

    // What latgov holds now (the same input as the status document), with
    // whether an idle daemon sleeps on IO events and the lines logged so far.
    MetricsSnapshot snapshot(const StatusInput& in, IoEventsState io_events,
                             const LogCounts& logged) const;

  private:
    std::map<int, double> held_seconds_; // closed holds
    std::map<int, TimePoint> open_;      // current holds, since
    std::uint64_t holds_ = 0, releases_ = 0;
    std::map<RescanCause, std::uint64_t> rescans_;
    std::uint64_t prearm_hits_ = 0, prearm_misses_ = 0;
    OnsetHistogram onset_;
    double start_time_seconds_;
};

} // namespace latgov
