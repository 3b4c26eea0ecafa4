#include "latgov/calibration.hpp"

#include <doctest/doctest.h>

using namespace latgov;

namespace {

Cpu intel_cpu() {
    Cpu cpu;
    cpu.idle_states = {{0, "POLL", 0, 0, false},
                       {1, "C1", 1, 1, false},
                       {2, "C1E", 4, 8, false},
                       {3, "C6", 170, 600, false}};
    return cpu;
}

std::vector<double> around(double median, int n = 101) {
    std::vector<double> v;
    for (int i = 0; i < n; ++i)
        v.push_back(median - 5 + 10.0 * i / (n - 1));
    return v;
}

} // namespace

TEST_CASE("levels step from poll only through each state to no limit") {
    auto levels = calibration_levels(intel_cpu(), IdleGovernorKind::latency_aware);
    REQUIRE(levels.size() == 4);
    CHECK(levels[0].name == "poll");
    CHECK(levels[0].limit == LatencyLimit{0});
    CHECK(levels[1].name == "C1");
    CHECK(levels[1].limit == LatencyLimit{1});
    CHECK(levels[2].name == "C1E");
    CHECK(levels[2].limit == LatencyLimit{4});
    CHECK(levels[3].name == "none"); // C6 allowed = no limit at all
    CHECK_FALSE(levels[3].limit);
}

TEST_CASE("under haltpoll, or with no cpuidle states, only poll and none are probed") {
    Cpu haltpoll;
    haltpoll.idle_states = {{0, "POLL", 0, 0, false}, {1, "haltpoll idle", 1, 1, false}};
    auto levels = calibration_levels(haltpoll, IdleGovernorKind::zero_only);
    REQUIRE(levels.size() == 2);
    CHECK(levels[0].name == "poll");
    CHECK(levels[1].name == "none");
    CHECK(calibration_levels(Cpu{}, IdleGovernorKind::none).size() == 2);
}

TEST_CASE("a state's cost is the median growth over poll when it is first allowed") {
    Calibration c;
    c.levels = calibration_levels(intel_cpu(), IdleGovernorKind::latency_aware);
    c.levels[0].samples_us = around(25);
    c.levels[1].samples_us = around(26);
    c.levels[2].samples_us = around(24); // faster than poll: never a negative cost
    c.levels[3].samples_us = around(60);
    for (const auto& s : intel_cpu().idle_states)
        c.states.push_back({s.name, s.exit_latency_us, 0});
    summarize(c);
    CHECK(c.levels[0].median_us == doctest::Approx(25));
    CHECK(c.levels[3].p99_us == doctest::Approx(64.9));
    CHECK(c.states[0].measured_cost_us == doctest::Approx(0));  // POLL
    CHECK(c.states[1].measured_cost_us == doctest::Approx(1));  // C1
    CHECK(c.states[2].measured_cost_us == doctest::Approx(0));  // C1E
    CHECK(c.states[3].measured_cost_us == doctest::Approx(35)); // C6
}

TEST_CASE("haltpoll's measured cost replaces its declared 1 us") {
    Cpu haltpoll;
    haltpoll.id = 1;
    haltpoll.idle_states = {{0, "POLL", 0, 0, false}, {1, "haltpoll idle", 1, 1, false}};
    Calibration c;
    c.device = "vda";
    c.date = "2026-11-30T00:00:00Z";
    c.levels = calibration_levels(haltpoll, IdleGovernorKind::zero_only);
    c.levels[0].samples_us = around(26);
    c.levels[1].samples_us = around(38);
    c.states = {{"POLL", 0, 0}, {"haltpoll idle", 1, 0}};
    summarize(c);
    CHECK(c.states[1].measured_cost_us == doctest::Approx(12));

    Topology t;
    t.cpus = {haltpoll};
    std::string source;
    auto declared = idle_costs(t, nullptr, source);
    CHECK(source == "declared");
    CHECK(declared.at(1)[1].cost_us == doctest::Approx(1));
    auto measured = idle_costs(t, &c, source);
    CHECK(source == "measured (vda, 2026-11-30T00:00:00Z)");
    CHECK(measured.at(1)[1].cost_us == doctest::Approx(12));
    CHECK(measured.at(1)[1].exit_latency_us == 1); // what the kernel compares stays declared
}

TEST_CASE("the CPU model of a machine's identity, on x86, arm64 and ppc64") {
    CHECK(cpu_model_of("processor\t: 0\nvendor_id\t: AuthenticAMD\nmodel name\t: AMD EPYC 7B13\n"
                       "\nprocessor\t: 1\nmodel name\t: AMD EPYC 7B13\n") == "AMD EPYC 7B13");
    // arm64 names no model: its first CPU's IDs, not a later core's.
    CHECK(cpu_model_of("processor\t: 0\nBogoMIPS\t: 50.00\nCPU implementer\t: 0x41\n"
                       "CPU architecture: 8\nCPU variant\t: 0x3\nCPU part\t: 0xd0c\n"
                       "CPU revision\t: 1\n\nprocessor\t: 1\nCPU implementer\t: 0x41\n"
                       "CPU part\t: 0xd40\n") ==
          "CPU implementer 0x41 part 0xd0c variant 0x3 revision 1");
    CHECK(cpu_model_of("processor\t: 0\ncpu\t\t: POWER9 (raw), altivec supported\n") ==
          "POWER9 (raw), altivec supported");
    CHECK(cpu_model_of("processor\t: 0\n").empty());
    CHECK(cpu_model_of("").empty());
}

namespace {

// A probe's result on a haltpoll guest, as the file keeps it.
Calibration haltpoll_calibration() {
    Calibration c;
    c.machine = {"AMD \"EPYC\"", "6.1.0-57-amd64", "haltpoll", "haltpoll"};
    c.device = "vda";
    c.cpu = 1;
    c.submit_cpu = 0;
    c.rounds = 5;
    c.ios_per_level = 1000;
    c.date = "2026-11-30T12:00:00Z";
    c.levels = {{"poll", LatencyLimit{0}, {}, {25.5, 26.0}, 25.75, 40.25},
                {"none", LatencyLimit{}, {}, {37.0, 38.0}, 37.5, 55.0}};
    c.states = {{"haltpoll idle", 1, 11.75}};
    return c;
}

} // namespace

TEST_CASE("the calibration file round-trips") {
    const Calibration c = haltpoll_calibration();
    auto parsed = parse_calibration(format_calibration(c), "cal.toml");
    REQUIRE(parsed);
    CHECK(parsed->machine == c.machine);
    CHECK(parsed->device == "vda");
    CHECK(parsed->submit_cpu == 0);
    REQUIRE(parsed->levels.size() == 2);
    CHECK(parsed->levels[0].limit == LatencyLimit{0});
    CHECK_FALSE(parsed->levels[1].limit);
    CHECK(parsed->levels[1].round_medians_us == std::vector<double>{37.0, 38.0});
    REQUIRE(parsed->states.size() == 1);
    CHECK(parsed->states[0].measured_cost_us == doctest::Approx(11.75));
}

TEST_CASE("a calibration file's costs and counts are checked, naming file, line and key") {
    const std::string good = format_calibration(haltpoll_calibration());
    auto with = [&](std::string_view from, std::string_view to) {
        std::string text = good;
        const auto at = text.find(from);
        REQUIRE(at != std::string::npos);
        return parse_calibration(text.replace(at, from.size(), to), "cal.toml");
    };
    // A cost written as a whole number is a cost.
    auto whole = with("measured_cost_us = 11.75", "measured_cost_us = 150");
    REQUIRE(whole);
    CHECK(whole->states.at(0).measured_cost_us == 150);
    struct Bad {
        std::string_view from, to, says;
    };
    for (const Bad& bad : {
             Bad{"measured_cost_us = 11.75", "measured_cost_us = -50.0", "must be a finite"},
             Bad{"measured_cost_us = 11.75", "measured_cost_us = nan", "must be a finite"},
             Bad{"measured_cost_us = 11.75", "measured_cost_us = \"x\"", "expected a number"},
             Bad{"declared_exit_latency_us = 1", "declared_exit_latency_us = -5", "must be in"},
             Bad{"rounds = 5", "rounds = -1", "must be in 0.."},
         }) {
        CAPTURE(bad.to);
        auto parsed = with(bad.from, bad.to);
        REQUIRE_FALSE(parsed);
        const auto& message = parsed.error().message;
        CHECK(message.find("cal.toml:") == 0);
        CHECK(message.find(std::string(bad.to.substr(0, bad.to.find(' ')))) != std::string::npos);
        CHECK(message.find(bad.says) != std::string::npos);
    }
}

TEST_CASE("a malformed calibration file is an error naming the file") {
    auto bad = parse_calibration("[machine]\ncpu_model = 3\n", "cal.toml");
    REQUIRE_FALSE(bad);
    CHECK(bad.error().message.find("cal.toml") != std::string::npos);
}
