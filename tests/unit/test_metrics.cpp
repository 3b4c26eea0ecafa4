// The Prometheus exposition of plain snapshots.
#include "latgov/metrics.hpp"

#include <doctest/doctest.h>
#include <set>
#include <sstream>
#include <string>

using namespace latgov;

namespace {

MetricsSnapshot example() {
    MetricsSnapshot s;
    s.start_time_seconds = 1.7e9;
    s.cpus = {{0, false, std::nullopt, "", 0.0, false},
              {1, true, std::uint32_t{0}, "nvme0n1/2,nvme1n1/2", 12.5, false},
              {2, false, std::nullopt, "", 3.0, true}};
    s.devices = {{"nvme0n1", "auto", "percpu", 80.0, std::uint32_t{20}, {{0, false}, {2, true}}},
                 {"vd\"a", "fixed", "dry-run", std::nullopt, std::nullopt, {{0, false}}}};
    s.holds = 7;
    s.releases = 6;
    s.rescans = {{RescanCause::start, 1}, {RescanCause::uevent, 2}};
    s.prearm_hits = 40;
    s.prearm_misses = 2;
    s.logged.warnings = 3;
    s.logged.dropped_messages = 5;
    s.io_events = IoEventsState::in_use;
    s.onset.observe(80e-6);
    s.onset.observe(300e-6);
    s.onset.observe(0.2);
    return s;
}

std::set<std::string> lines(const std::string& text) {
    std::set<std::string> out;
    std::istringstream in(text);
    for (std::string line; std::getline(in, line);)
        out.insert(line);
    return out;
}

} // namespace

TEST_CASE("every metric family has HELP and TYPE, and every sample a family") {
    const auto text = format_metrics(example());
    std::set<std::string> typed;
    std::istringstream in(text);
    for (std::string line; std::getline(in, line);) {
        if (line.starts_with("# TYPE ")) {
            auto name = line.substr(7, line.find(' ', 7) - 7);
            CHECK(text.find("# HELP " + name + " ") != std::string::npos);
            typed.insert(name);
        } else if (!line.starts_with("#")) {
            auto name = line.substr(0, line.find_first_of("{ "));
            for (auto suffix : {"_bucket", "_sum", "_count"})
                if (name.ends_with(suffix) && !typed.contains(name))
                    name.resize(name.size() - std::string_view(suffix).size());
            CHECK_MESSAGE(typed.contains(name), line);
        }
    }
    CHECK(typed.size() >= 15);
}

TEST_CASE("per-CPU limits are in seconds with the reason, counters carry _total") {
    const auto l = lines(format_metrics(example()));
    CHECK(l.contains("latgov_cpu_held{cpu=\"1\"} 1"));
    CHECK(l.contains("latgov_cpu_held{cpu=\"0\"} 0"));
    CHECK(l.contains("latgov_cpu_limit_seconds{cpu=\"1\",reason=\"nvme0n1/2,nvme1n1/2\"} 0"));
    CHECK(l.contains("latgov_cpu_held_seconds_total{cpu=\"1\"} 12.5"));
    CHECK(l.contains("latgov_cpu_yielded{cpu=\"2\"} 1"));
    CHECK(l.contains("latgov_rescans_total{cause=\"uevent\"} 2"));
    CHECK(l.contains("latgov_rescans_total{cause=\"start\"} 1"));
    CHECK(l.contains("latgov_rescans_total{cause=\"periodic\"} 0"));
    CHECK(l.contains("latgov_prearm_windows_total{result=\"hit\"} 40"));
    CHECK(l.contains("latgov_prearm_windows_total{result=\"miss\"} 2"));
    CHECK(l.contains("latgov_device_limit_seconds{device=\"nvme0n1\"} 2e-05"));
    CHECK(l.contains("latgov_device_observed_latency_seconds{device=\"nvme0n1\"} 8e-05"));
    CHECK(l.contains("latgov_queue_active{device=\"nvme0n1\",queue=\"2\"} 1"));
    CHECK(l.contains("latgov_holds_total 7"));
    CHECK(l.contains("latgov_log_messages_total{level=\"warning\"} 3"));
    CHECK(l.contains("latgov_log_messages_dropped_total 5"));
    CHECK(l.contains("latgov_io_events{state=\"in_use\"} 1"));
    CHECK(l.contains("latgov_io_events{state=\"unavailable\"} 0"));
    CHECK(l.contains("latgov_io_events{state=\"off\"} 0"));
    CHECK(l.contains("latgov_io_events{state=\"not_needed\"} 0"));
    // not held: no limit sample; no latency observed: no latency sample
    for (const auto& line : l) {
        CHECK_FALSE(line.starts_with("latgov_cpu_limit_seconds{cpu=\"0\""));
        CHECK_FALSE(line.starts_with("latgov_device_observed_latency_seconds{device=\"vd"));
    }
}

TEST_CASE("label values are escaped") {
    const auto l = lines(format_metrics(example()));
    CHECK(l.contains(R"(latgov_queue_active{device="vd\"a",queue="0"} 0)"));
}

TEST_CASE("the onset histogram is cumulative and ends with +Inf = count") {
    const auto l = lines(format_metrics(example()));
    CHECK(l.contains("latgov_onset_delay_seconds_bucket{le=\"5e-05\"} 0"));
    CHECK(l.contains("latgov_onset_delay_seconds_bucket{le=\"0.0001\"} 1"));
    CHECK(l.contains("latgov_onset_delay_seconds_bucket{le=\"0.0005\"} 2"));
    CHECK(l.contains("latgov_onset_delay_seconds_bucket{le=\"0.05\"} 2"));
    CHECK(l.contains("latgov_onset_delay_seconds_bucket{le=\"+Inf\"} 3"));
    CHECK(l.contains("latgov_onset_delay_seconds_count 3"));
}
