#include "latgov/metrics.hpp"

#include "latgov/fd.hpp"

#include <cerrno>
#include <chrono>
#include <fcntl.h>
#include <fmt/format.h>
#include <mutex>
#include <spdlog/sinks/base_sink.h>
#include <unistd.h>

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
             "Time from the first request after idle to the limit written.");
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
             "Topology scans (start, reload, CPU hotplug, device changes).");
    e.sample("latgov_rescans_total", "", static_cast<double>(s.rescans));
    e.family("latgov_log_messages_total", "counter", "Warnings and errors latgovd logged.");
    e.sample("latgov_log_messages_total", "level=\"warning\"", static_cast<double>(s.warnings));
    e.sample("latgov_log_messages_total", "level=\"error\"", static_cast<double>(s.errors));
    e.family("latgov_io_events", "gauge",
             "1 when an idle latgovd sleeps until the first block request (perf events); 0 "
             "when it samples every idle_interval_ms instead.");
    e.sample("latgov_io_events", "", s.io_events ? 1 : 0);
    return e.take();
}

Result<void> write_metrics_file(const std::filesystem::path& path, const std::string& text) {
    const std::string tmp = path.string() + ".tmp";
    Fd fd(::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644));
    if (!fd || ::write(fd.get(), text.data(), text.size()) != static_cast<ssize_t>(text.size()))
        return make_error("Failed to write " + tmp + ": " + errno_message(errno));
    fd.reset();
    if (::rename(tmp.c_str(), path.c_str()) != 0)
        return make_error("Failed to rename " + tmp + ": " + errno_message(errno));
    return {};
}

struct MetricsRecorder::LogCounts : spdlog::sinks::base_sink<std::mutex> {
    std::pair<std::uint64_t, std::uint64_t> counts() {
        std::lock_guard lock(mutex_);
        return {warnings, errors};
    }

  protected:
    void sink_it_(const spdlog::details::log_msg& msg) override {
        if (msg.level == spdlog::level::warn)
            ++warnings;
        else if (msg.level >= spdlog::level::err && msg.level != spdlog::level::off)
            ++errors;
    }
    void flush_() override {}

  private:
    std::uint64_t warnings = 0, errors = 0;
};

MetricsRecorder::MetricsRecorder()
    : log_counts_(std::make_shared<LogCounts>()),
      start_time_seconds_(
          std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch())
              .count()) {}

std::shared_ptr<spdlog::sinks::sink> MetricsRecorder::log_counter() {
    return log_counts_;
}

void MetricsRecorder::observe_percpu(const std::map<int, PerCpuHolder::Held>& held,
                                     SteadyTime now) {
    for (auto it = open_.begin(); it != open_.end();) {
        if (held.contains(it->first)) {
            ++it;
            continue;
        }
        held_seconds_[it->first] += std::chrono::duration<double>(now - it->second).count();
        ++releases_;
        it = open_.erase(it);
    }
    for (const auto& [cpu, h] : held)
        if (open_.emplace(cpu, h.since).second)
            ++holds_;
}

MetricsSnapshot MetricsRecorder::snapshot(const Inputs& in) const {
    MetricsSnapshot s;
    s.start_time_seconds = start_time_seconds_;
    for (const auto& cpu : in.topology.cpus) {
        CpuMetrics c;
        c.cpu = cpu.id;
        if (auto h = in.percpu.held().find(cpu.id); h != in.percpu.held().end()) {
            c.held = true;
            c.limit = h->second.written;
            if (auto why = in.holds.percpu.find(cpu.id); why != in.holds.percpu.end())
                for (const auto& q : why->second.held_for)
                    c.reason +=
                        fmt::format("{}{}/{}", c.reason.empty() ? "" : ",", q.device, q.queue);
        }
        if (auto closed = held_seconds_.find(cpu.id); closed != held_seconds_.end())
            c.held_seconds = closed->second;
        if (auto open = open_.find(cpu.id); open != open_.end())
            c.held_seconds += std::chrono::duration<double>(in.now - open->second).count();
        c.yielded = in.percpu.yielded().contains(cpu.id);
        s.cpus.push_back(std::move(c));
    }
    for (const auto& d : in.governor.devices()) {
        DeviceMetrics m{d.name,
                        std::string(to_string(d.policy.mode)),
                        std::string(to_string(d.policy.backend)),
                        d.latency.mean_us(),
                        d.limit,
                        {}};
        for (const auto& q : d.queues)
            m.queues.push_back({q.index, q.activity.active});
        s.devices.push_back(std::move(m));
    }
    s.global_held = in.global.holding();
    s.global_limit = in.global.held();
    s.holds = holds_;
    s.releases = releases_;
    s.rescans = rescans_;
    std::tie(s.warnings, s.errors) = log_counts_->counts();
    s.io_events = in.io_events;
    s.onset = onset_;
    return s;
}

} // namespace latgov
