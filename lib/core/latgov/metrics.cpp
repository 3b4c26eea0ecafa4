#include "latgov/metrics.hpp"

#include <fmt/format.h>

namespace latgov {

namespace {

// Label values escape backslash, double quote and newline.
std::string label_value(std::string_view text) {
    std::string out;
    for (char c : text) {
        if (c == '\\' || c == '"')
            out += '\\';
        if (c == '\n') {
            out += "\\n";
            continue;
        }
        out += c;
    }
    return out;
}

class Exposition {
  public:
    void family(std::string_view name, std::string_view type, std::string_view help) {
        text_ += fmt::format("# HELP {} {}\n# TYPE {} {}\n", name, help, name, type);
    }
    void sample(std::string_view name, std::string_view labels, double value) {
        text_ += labels.empty() ? fmt::format("{} {}\n", name, value)
                                : fmt::format("{}{{{}}} {}\n", name, labels, value);
    }
    std::string take() { return std::move(text_); }

  private:
    std::string text_;
};

double limit_seconds(LatencyLimit limit) {
    return static_cast<double>(limit.value_or(0)) / 1e6;
}

std::string cpu_label(int cpu) {
    return fmt::format("cpu=\"{}\"", cpu);
}

} // namespace

void OnsetHistogram::observe(double seconds) {
    for (size_t i = 0; i < onset_buckets.size(); ++i)
        if (seconds <= onset_buckets[i])
            ++buckets[i];
    ++count;
    sum_seconds += seconds;
}

std::string format_metrics(const MetricsSnapshot& s) {
    Exposition e;
    e.family("latgov_start_time_seconds", "gauge", "Unix time latgovd started.");
    e.sample("latgov_start_time_seconds", "", s.start_time_seconds);

    e.family("latgov_cpu_held", "gauge",
             "1 while latgov holds a wake-up latency limit on the CPU.");
    for (const auto& c : s.cpus)
        e.sample("latgov_cpu_held", cpu_label(c.cpu), c.held ? 1 : 0);
    e.family("latgov_cpu_limit_seconds", "gauge",
             "Wake-up latency limit latgov holds on the CPU (0 = poll only); reason = the "
             "queues (device/queue) it is held for.");
    for (const auto& c : s.cpus)
        if (c.held)
            e.sample("latgov_cpu_limit_seconds",
                     fmt::format("{},reason=\"{}\"", cpu_label(c.cpu), label_value(c.reason)),
                     limit_seconds(c.limit));
    e.family("latgov_cpu_held_seconds_total", "counter",
             "Time latgov has held a limit on the CPU since it started.");
    for (const auto& c : s.cpus)
        e.sample("latgov_cpu_held_seconds_total", cpu_label(c.cpu), c.held_seconds);
    e.family("latgov_cpu_yielded", "gauge",
             "1 when another writer changed the CPU's pm_qos_resume_latency_us while latgov "
             "held it; latgov leaves that value alone.");
    for (const auto& c : s.cpus)
        e.sample("latgov_cpu_yielded", cpu_label(c.cpu), c.yielded ? 1 : 0);

    e.family("latgov_global_held", "gauge",
             "1 while latgov holds /dev/cpu_dma_latency (backend global).");
    e.sample("latgov_global_held", "", s.global_held ? 1 : 0);
    if (s.global_held) {
        e.family("latgov_global_limit_seconds", "gauge",
                 "Limit latgov holds on /dev/cpu_dma_latency.");
        e.sample("latgov_global_limit_seconds", "", limit_seconds(s.global_limit));
    }

    e.family("latgov_device_info", "gauge", "A governed device, its mode and backend.");
    for (const auto& d : s.devices)
        e.sample("latgov_device_info",
                 fmt::format("device=\"{}\",mode=\"{}\",backend=\"{}\"", label_value(d.name),
                             label_value(d.mode), label_value(d.backend)),
                 1);
    e.family("latgov_device_observed_latency_seconds", "gauge",
             "Mean request latency latgov observed on the device in its last window.");
    for (const auto& d : s.devices)
        if (d.observed_latency_us)
            e.sample("latgov_device_observed_latency_seconds",
                     fmt::format("device=\"{}\"", label_value(d.name)),
                     *d.observed_latency_us / 1e6);
    e.family("latgov_device_limit_seconds", "gauge",
             "Wake-up latency limit latgov chose for the device (absent: none).");
    for (const auto& d : s.devices)
        if (d.limit)
            e.sample("latgov_device_limit_seconds",
                     fmt::format("device=\"{}\"", label_value(d.name)), limit_seconds(d.limit));
    e.family("latgov_queue_active", "gauge",
             "1 while the hardware queue has IO outstanding (or within linger_ms of it).");
    for (const auto& d : s.devices)
        for (const auto& q : d.queues)
            e.sample("latgov_queue_active",
                     fmt::format("device=\"{}\",queue=\"{}\"", label_value(d.name), q.index),
                     q.active ? 1 : 0);

    e.family("latgov_onset_delay_seconds", "histogram",
             "Time from the first request after idle to its limit written (requests whose "
             "limits were in place already, or whose write failed, are not counted).");
    for (size_t i = 0; i < onset_buckets.size(); ++i)
        e.sample("latgov_onset_delay_seconds_bucket", fmt::format("le=\"{}\"", onset_buckets[i]),
                 static_cast<double>(s.onset.buckets[i]));
    e.sample("latgov_onset_delay_seconds_bucket", "le=\"+Inf\"",
             static_cast<double>(s.onset.count));
    e.sample("latgov_onset_delay_seconds_sum", "", s.onset.sum_seconds);
    e.sample("latgov_onset_delay_seconds_count", "", static_cast<double>(s.onset.count));

    e.family("latgov_holds_total", "counter", "Per-CPU limits taken.");
    e.sample("latgov_holds_total", "", static_cast<double>(s.holds));
    e.family("latgov_releases_total", "counter", "Per-CPU limits released.");
    e.sample("latgov_releases_total", "", static_cast<double>(s.releases));
    e.family("latgov_rescans_total", "counter",
             "Topology scans by cause: start, reload, uevent (a disk, controller or CPU "
             "changed), hotplug, irq_moved (a governed queue's IRQ completes elsewhere), "
             "resumed (the host was suspended), device_error, periodic (the safety net found "
             "a change).");
    for (auto cause : all_rescan_causes) {
        const auto it = s.rescans.find(cause);
        e.sample("latgov_rescans_total", fmt::format("cause=\"{}\"", to_string(cause)),
                 static_cast<double>(it == s.rescans.end() ? 0 : it->second));
    }
    e.family("latgov_prearm_windows_total", "counter",
             "Windows held ahead of periodic isolated requests, by whether their request came "
             "in them (hit) or not (miss).");
    e.sample("latgov_prearm_windows_total", "result=\"hit\"", static_cast<double>(s.prearm_hits));
    e.sample("latgov_prearm_windows_total", "result=\"miss\"",
             static_cast<double>(s.prearm_misses));
    e.family("latgov_log_messages_total", "counter", "Warnings and errors latgovd logged.");
    e.sample("latgov_log_messages_total", "level=\"warning\"",
             static_cast<double>(s.logged.warnings));
    e.sample("latgov_log_messages_total", "level=\"error\"", static_cast<double>(s.logged.errors));
    e.family("latgov_log_messages_dropped_total", "counter",
             "Log messages dropped because the journal stream was full.");
    e.sample("latgov_log_messages_dropped_total", "",
             static_cast<double>(s.logged.dropped_messages));
    e.family("latgov_io_events", "gauge",
             "How an idle latgovd learns of the first block request, 1 for the state it is in: "
             "in_use (perf events wake it, unless paused while requests come alone), unavailable "
             "(refused: it samples every "
             "idle_interval_ms), off (io_events = false: it samples), not_needed (nothing can "
             "be held here: it only watches).");
    for (auto [state, name] :
         {std::pair{IoEventsState::in_use, "in_use"},
          std::pair{IoEventsState::unavailable, "unavailable"},
          std::pair{IoEventsState::off, "off"}, std::pair{IoEventsState::not_needed, "not_needed"}})
        e.sample("latgov_io_events", fmt::format("state=\"{}\"", name),
                 s.io_events == state ? 1 : 0);
    return e.take();
}

} // namespace latgov
