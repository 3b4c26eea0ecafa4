// The threads that wake a CPU after latgovd constrains it: a kick wakes
// the thread pinned to that CPU, it runs there, and the threads stop when
// the kicker goes.
#include "allowed_cpus.hpp"
#include "latgov/cpu_kick.hpp"

#include <chrono>
#include <doctest/doctest.h>
#include <sched.h>
#include <thread>
#include <vector>

using namespace latgov;

namespace {

// Waits up to 5 s for the thread of `cpu` to have woken `count` times.
CpuKicker::Wakes wait_for(const CpuKicker& kicker, int cpu, std::uint64_t count) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    auto wakes = kicker.wakes(cpu);
    while (wakes.count < count && std::chrono::steady_clock::now() < deadline) {
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
        wakes = kicker.wakes(cpu);
    }
    return wakes;
}

} // namespace

TEST_CASE("a kick wakes the thread of that CPU, and it runs there") {
    const auto cpus = allowed_cpus();
    auto kicker = CpuKicker::start(cpus);
    REQUIRE(kicker);
    CHECK((*kicker)->cpus() == cpus);
    for (int cpu : cpus) {
        CHECK((*kicker)->wakes(cpu).count == 0);
        REQUIRE((*kicker)->kick(cpu));
        const auto wakes = wait_for(**kicker, cpu, 1);
        CHECK(wakes.count == 1);
        CHECK(wakes.last_cpu == cpu);
    }
    // Only the CPU kicked woke.
    const int first = cpus.front();
    REQUIRE((*kicker)->kick(first));
    CHECK(wait_for(**kicker, first, 2).count == 2);
    for (int cpu : cpus)
        if (cpu != first)
            CHECK((*kicker)->wakes(cpu).count == 1);
}

TEST_CASE("a CPU without a thread is not kicked, and CPUs that refuse a thread are left out") {
    const auto cpus = allowed_cpus();
    // CPU_SETSIZE - 1 is no CPU of a machine this runs on: its thread
    // cannot be pinned, and it is left out rather than failing the rest.
    std::vector<int> asked = {cpus.front(), CPU_SETSIZE - 1};
    auto kicker = CpuKicker::start(asked);
    REQUIRE(kicker);
    CHECK((*kicker)->cpus() == std::vector<int>{cpus.front()});
    // What was asked stays known (latgovd compares it with the online CPUs
    // to tell a change), and the refusal is named for the log.
    CHECK((*kicker)->asked() == asked);
    CHECK((*kicker)->refused().find(std::to_string(CPU_SETSIZE - 1) + " (") == 0);
    CHECK_FALSE((*kicker)->kick(CPU_SETSIZE - 1));
    CHECK((*kicker)->wakes(CPU_SETSIZE - 1).count == 0);

    auto none = CpuKicker::start({CPU_SETSIZE - 1});
    REQUIRE_FALSE(none);
    CHECK(none.error().message.find("Failed to start a thread on any CPU") != std::string::npos);
    CHECK(none.error().message.find(std::to_string(CPU_SETSIZE - 1)) != std::string::npos);
}

TEST_CASE("an update stops the threads of CPUs that went and leaves the others running") {
    const auto cpus = allowed_cpus();
    auto started = CpuKicker::start({cpus.front()});
    REQUIRE(started);
    auto& kicker = **started;
    REQUIRE(kicker.kick(cpus.front()));
    REQUIRE(wait_for(kicker, cpus.front(), 1).count == 1);

    // More CPUs: the first one's thread is the same (its count is kept).
    kicker.update(cpus);
    CHECK(kicker.cpus() == cpus);
    CHECK(kicker.asked() == cpus);
    CHECK(kicker.refused().empty());
    CHECK(kicker.wakes(cpus.front()).count == 1);
    for (int cpu : cpus) {
        REQUIRE(kicker.kick(cpu));
        CHECK(wait_for(kicker, cpu, cpu == cpus.front() ? 2 : 1).last_cpu == cpu);
    }

    // The first CPU goes: its thread stops, the others keep theirs.
    const std::vector<int> rest(cpus.begin() + 1, cpus.end());
    kicker.update(rest);
    CHECK(kicker.cpus() == rest);
    CHECK_FALSE(kicker.kick(cpus.front()));
    for (int cpu : rest)
        CHECK(kicker.wakes(cpu).count == 1);

    // A CPU that refuses a thread is named, the rest still run.
    std::vector<int> with_bad = rest;
    with_bad.push_back(CPU_SETSIZE - 1);
    kicker.update(with_bad);
    CHECK(kicker.cpus() == rest);
    CHECK(kicker.refused().find(std::to_string(CPU_SETSIZE - 1) + " (") == 0);
}
