// The counters MetricsRecorder keeps from hold transitions.
#include "latgov/metrics_recorder.hpp"

#include <doctest/doctest.h>

using namespace latgov;
using namespace std::chrono_literals;

TEST_CASE(
    "the recorder counts holds, releases and windows, and sums held time, the open hold too") {
    MetricsRecorder recorder(0);
    const TimePoint t0{};
    std::map<int, PerCpuHolder::Held> held;
    held[1] = {std::nullopt, std::uint32_t{0}, t0, std::nullopt, 1};
    recorder.observe_percpu(held, t0);
    recorder.observe_percpu(held, t0 + 1s); // still the same hold
    held.clear();
    recorder.observe_percpu(held, t0 + 2s); // released after 2 s
    held[1] = {std::nullopt, std::uint32_t{0}, t0 + 5s, std::nullopt, 2};
    recorder.observe_percpu(held, t0 + 5s);

    Topology topology;
    topology.cpus.resize(2);
    topology.cpus[0].id = 0;
    topology.cpus[1].id = 1;
    Config config;
    Governor governor(topology, config, {});
    Holds holds;
    SysRoot root("/nonexistent");
    PerCpuHolder percpu(root, std::filesystem::path("/nonexistent/journal"),
                        [](const std::string&) {});
    GlobalHolder global(root, [](const std::string&) {});
    const StatusInput input{governor, holds, percpu, global, topology, "", "", {}, {}, {}, t0 + 8s};
    recorder.count_windows(3, 1);
    recorder.count_windows(2, 0); // counted on: a rescan's governor starts from 0
    auto s = recorder.snapshot(input, IoEventsState::unavailable, {});
    CHECK(s.prearm_hits == 5);
    CHECK(s.prearm_misses == 1);
    CHECK(s.holds == 2);
    CHECK(s.releases == 1);
    REQUIRE(s.cpus.size() == 2);
    CHECK(s.cpus[1].held_seconds == doctest::Approx(2.0 + 3.0));
    CHECK(s.cpus[0].held_seconds == 0.0);
}
