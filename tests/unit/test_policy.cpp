#include "latgov/policy.hpp"

#include <cmath>
#include <doctest/doctest.h>
#include <string>
#include <vector>

using namespace latgov;
using namespace std::chrono_literals;

namespace {

// Results as text, so a failing check prints "none" or "4" instead of "{?}".
std::string describe(LatencyLimit limit) {
    return limit ? std::to_string(*limit) : "none";
}

// Joined into one string: doctest prints std::string but not std::vector.
std::string describe(const std::vector<HoldChange>& changes) {
    std::string text;
    for (const HoldChange& change : changes) {
        text += (text.empty() ? "cpu" : ", cpu") + std::to_string(change.cpu) + ": " +
                describe(change.from) + " -> " + describe(change.to);
    }
    return text;
}

std::string describe(const std::vector<QueueKey>& queues) {
    std::string text;
    for (const QueueKey& key : queues) {
        text += (text.empty() ? "" : " ") + key.device + "/" + std::to_string(key.queue);
    }
    return text;
}

// intel_idle on Ice Lake, costs as declared.
const std::vector<IdleCost> intel = {
    {"POLL", 0, 0, false},
    {"C1", 1, 1, false},
    {"C1E", 4, 4, false},
    {"C6", 170, 170, false},
};

// cpuidle-haltpoll in a guest: declares 1 us for what costs ~12 us here.
const std::vector<IdleCost> haltpoll_declared = {{"POLL", 0, 0, false},
                                                 {"haltpoll idle", 1, 1, false}};
const std::vector<IdleCost> haltpoll_measured = {{"POLL", 0, 0, false},
                                                 {"haltpoll idle", 1, 12.0, false}};

Policy automatic(double fraction = 0.1) {
    Policy policy;
    policy.mode = Mode::automatic;
    policy.latency_fraction = fraction;
    return policy;
}

LatencyLimit choose_on_intel(const Policy& policy, double mean_us) {
    return choose_limit(policy, mean_us, "pcie", intel, IdleGovernorKind::latency_aware);
}

const TimePoint t0 = TimePoint{} + 1h;

} // namespace

// --- Queue activity ---------------------------------------------------------

TEST_CASE("first IO activates an idle queue and later IO keeps it active") {
    QueueActivity queue;
    CHECK(update_activity(queue, true, t0, 3ms) == Transition::activated);
    CHECK(queue.active);
    CHECK(queue.active_since == t0);

    CHECK(update_activity(queue, true, t0 + 1ms, 3ms) == Transition::none);
    CHECK(queue.active_since == t0);
    CHECK(queue.last_io == t0 + 1ms);
}

TEST_CASE("an idle queue without IO stays idle") {
    QueueActivity queue;
    CHECK(update_activity(queue, false, t0, 3ms) == Transition::none);
    CHECK_FALSE(queue.active);
}

TEST_CASE("an active queue is not released before linger and is released at linger") {
    QueueActivity queue;
    REQUIRE(update_activity(queue, true, t0, 3ms) == Transition::activated);

    CHECK(update_activity(queue, false, t0 + 2999us, 3ms) == Transition::none);
    CHECK(queue.active);
    CHECK(update_activity(queue, false, t0 + 3ms, 3ms) == Transition::released);
    CHECK_FALSE(queue.active);
    CHECK(update_activity(queue, false, t0 + 4ms, 3ms) == Transition::none);
}

TEST_CASE("IO during linger restarts the linger from the last IO") {
    QueueActivity queue;
    REQUIRE(update_activity(queue, true, t0, 3ms) == Transition::activated);
    CHECK(update_activity(queue, true, t0 + 2ms, 3ms) == Transition::none);
    CHECK(update_activity(queue, false, t0 + 4ms, 3ms) == Transition::none);
    CHECK(update_activity(queue, false, t0 + 5ms, 3ms) == Transition::released);
}

TEST_CASE("a released queue is activated again by new IO with a new active_since") {
    QueueActivity queue;
    REQUIRE(update_activity(queue, true, t0, 3ms) == Transition::activated);
    REQUIRE(update_activity(queue, false, t0 + 3ms, 3ms) == Transition::released);

    CHECK(update_activity(queue, true, t0 + 10ms, 3ms) == Transition::activated);
    CHECK(queue.active);
    CHECK(queue.active_since == t0 + 10ms);
}

// --- Limit choice -----------------------------------------------------------

TEST_CASE("the cpuidle driver and governor decide how a limit is honoured") {
    CHECK(idle_governor_kind("intel_idle", "menu") == IdleGovernorKind::latency_aware);
    CHECK(idle_governor_kind("acpi_idle", "teo") == IdleGovernorKind::latency_aware);
    CHECK(idle_governor_kind("haltpoll", "haltpoll") == IdleGovernorKind::zero_only);
    // The haltpoll driver's halt declares 1 us whatever the governor: only a
    // limit of 0 excludes it, and its declared cost is not its wake-up cost.
    CHECK(idle_governor_kind("haltpoll", "menu") == IdleGovernorKind::zero_only);
    CHECK(idle_governor_kind("haltpoll", "teo") == IdleGovernorKind::zero_only);
    CHECK(idle_governor_kind("none", "menu") == IdleGovernorKind::none);
    CHECK(idle_governor_kind("", "") == IdleGovernorKind::none);
}

TEST_CASE("auto on Intel states excludes only the states that cost more than allowed") {
    // mean 100 us, fraction 0.1: 10 us allowed, C6 (170) is out, C1E (4) stays.
    CHECK(describe(choose_on_intel(automatic(), 100.0)) == "4");
    // mean 20 us: 2 us allowed, C1E is out too.
    CHECK(describe(choose_on_intel(automatic(), 20.0)) == "1");
}

TEST_CASE("auto holds nothing for a slow device where every state fits") {
    CHECK(describe(choose_on_intel(automatic(), 5000.0)) == "none");
}

TEST_CASE("auto holds poll only for a fast device where no sleeping state fits") {
    CHECK(describe(choose_on_intel(automatic(), 5.0)) == "0");
}

TEST_CASE("measured haltpoll cost changes the chosen limit where the declared one does not") {
    // virtio disk at 40 us, fraction 0.1: 4 us allowed. Declared 1 us fits.
    // The haltpoll driver is zero_only under any governor: a cost that does
    // not fit asks for 0, which excludes the halt under menu and teo too.
    for (const char* governor : {"haltpoll", "menu", "teo"}) {
        CAPTURE(governor);
        const IdleGovernorKind kind = idle_governor_kind("haltpoll", governor);
        CHECK(kind == IdleGovernorKind::zero_only);
        CHECK(describe(choose_limit(automatic(), 40.0, "virtio", haltpoll_declared, kind)) ==
              "none");
        CHECK(describe(choose_limit(automatic(), 40.0, "virtio", haltpoll_measured, kind)) == "0");
    }
}

TEST_CASE("a shallow state that costs too much excludes deeper states that fit") {
    // The kernel cannot admit C1E (4) without C1 (1), so C1's cost decides.
    const std::vector<IdleCost> states = {
        {"POLL", 0, 0, false}, {"C1", 1, 15.0, false}, {"C1E", 4, 3.0, false}};
    CHECK(describe(choose_limit(automatic(), 100.0, "pcie", states,
                                IdleGovernorKind::latency_aware)) == "0");
}

TEST_CASE("POLL fits even when its measured cost exceeds the allowance") {
    // Nothing can be shallower than POLL: its cost is the wake-up path itself.
    std::vector<IdleCost> states = intel;
    states[0].cost_us = 30.0;
    CHECK(describe(choose_limit(automatic(), 5000.0, "pcie", states,
                                IdleGovernorKind::latency_aware)) == "none");
    std::vector<IdleCost> guest = haltpoll_measured;
    guest[0].cost_us = 25.0; // 20 us allowed at 200 us: haltpoll (12) fits
    CHECK(describe(choose_limit(automatic(), 200.0, "virtio", guest,
                                IdleGovernorKind::zero_only)) == "none");
}

TEST_CASE("a machine with a single idle state either holds poll only or nothing") {
    const std::vector<IdleCost> c1_only = {{"C1", 1, 1, false}};
    CHECK(describe(choose_limit(automatic(), 5.0, "pcie", c1_only,
                                IdleGovernorKind::latency_aware)) == "0");
    CHECK(describe(choose_limit(automatic(), 100.0, "pcie", c1_only,
                                IdleGovernorKind::latency_aware)) == "none");

    const std::vector<IdleCost> poll_only = {{"POLL", 0, 0, false}};
    CHECK(describe(choose_limit(automatic(), 1.0, "pcie", poll_only,
                                IdleGovernorKind::latency_aware)) == "none");
}

TEST_CASE("a disabled idle state is ignored") {
    std::vector<IdleCost> states = intel;
    states[3].disabled = true; // C6 off: nothing left that costs too much at 10 us allowed
    CHECK(describe(choose_limit(automatic(), 100.0, "pcie", states,
                                IdleGovernorKind::latency_aware)) == "none");
    CHECK(describe(choose_on_intel(automatic(), 100.0)) == "4");
}

TEST_CASE("without a cpuidle driver auto holds nothing, even with a maximum set") {
    Policy policy = automatic();
    policy.max_limit_us = 50;
    CHECK(describe(choose_limit(policy, 5.0, "pcie", {}, IdleGovernorKind::none)) == "none");
}

TEST_CASE("min_limit_us raises a stricter auto choice") {
    Policy policy = automatic();
    policy.min_limit_us = 2;
    CHECK(describe(choose_on_intel(policy, 5.0)) == "2");   // 0 -> 2
    CHECK(describe(choose_on_intel(policy, 100.0)) == "4"); // above min: unchanged
}

TEST_CASE("max_limit_us caps a looser auto choice, including no limit") {
    Policy policy = automatic();
    policy.max_limit_us = 3;
    CHECK(describe(choose_on_intel(policy, 100.0)) == "3");  // 4 -> 3
    CHECK(describe(choose_on_intel(policy, 5000.0)) == "3"); // none -> 3
    CHECK(describe(choose_on_intel(policy, 5.0)) == "0");    // below max: unchanged
}

TEST_CASE("under haltpoll a clamped non-zero limit is kept as chosen") {
    Policy policy = automatic();
    policy.min_limit_us = 5;
    CHECK(describe(choose_limit(policy, 40.0, "virtio", haltpoll_measured,
                                IdleGovernorKind::zero_only)) == "5");
}

TEST_CASE("fixed mode holds the configured limit unclamped and off holds nothing") {
    Policy policy;
    policy.mode = Mode::fixed;
    policy.limit_us = 7;
    policy.min_limit_us = 10;
    policy.max_limit_us = 5;
    CHECK(describe(choose_on_intel(policy, 5000.0)) == "7");
    CHECK(describe(choose_limit(policy, 5000.0, "pcie", {}, IdleGovernorKind::none)) == "7");

    policy.mode = Mode::off;
    CHECK(describe(choose_on_intel(policy, 5.0)) == "none");
}

TEST_CASE("without an observation the transport's default request latency is used") {
    CHECK(default_request_latency_us("pcie") == 80.0);
    CHECK(default_request_latency_us("virtio") == 40.0);
    CHECK(default_request_latency_us("tcp") == 200.0);
    CHECK(default_request_latency_us("something-new") == 1000.0);

    // fraction 0.2: pcie 16 us allowed -> 4; unknown 200 us allowed -> every state fits.
    const Policy policy = automatic(0.2);
    const auto kind = IdleGovernorKind::latency_aware;
    CHECK(describe(choose_limit(policy, std::nullopt, "pcie", intel, kind)) == "4");
    CHECK(describe(choose_limit(policy, std::nullopt, "something-new", intel, kind)) == "none");
    // An observation wins over the default; a NaN, infinite or negative one does not count.
    CHECK(describe(choose_limit(policy, 5000.0, "pcie", intel, kind)) == "none");
    CHECK(describe(choose_limit(policy, std::nan(""), "pcie", intel, kind)) == "4");
    CHECK(describe(choose_limit(policy, HUGE_VAL, "pcie", intel, kind)) == "4");
    CHECK(describe(choose_limit(policy, -1.0, "pcie", intel, kind)) == "4");
}

TEST_CASE("declared_costs uses the declared exit latency as the cost") {
    const std::vector<IdleState> states = {{0, "POLL", 0, 0, false}, {1, "C6", 170, 600, true}};
    const std::vector<IdleCost> costs = declared_costs(states);
    REQUIRE(costs.size() == 2);
    CHECK(costs[1].name == "C6");
    CHECK(costs[1].exit_latency_us == 170);
    CHECK(costs[1].cost_us == 170.0);
    CHECK(costs[1].disabled);
}

// --- Per-CPU aggregation ----------------------------------------------------

TEST_CASE("strictest treats no limit as the loosest") {
    CHECK(describe(strictest(std::nullopt, std::nullopt)) == "none");
    CHECK(describe(strictest(std::nullopt, 4u)) == "4");
    CHECK(describe(strictest(4u, std::nullopt)) == "4");
    CHECK(describe(strictest(4u, 0u)) == "0");
}

TEST_CASE("each CPU holds the strictest limit of its queues, for the queues that set it") {
    const std::vector<QueueDemand> demands = {
        {{"nvme0n1", 0}, {0, 1}, 4u},       {{"nvme1n1", 2}, {1, 2}, 0u},
        {{"vda", 0}, {2, 3}, std::nullopt}, {{"nvme2n1", 1}, {1}, 0u},
        {{"nvme3n1", 0}, {0}, 10u}, // looser than what CPU 0 already holds
    };
    const std::map<int, CpuHold> holds = aggregate_cpu_limits(demands);

    REQUIRE(holds.size() == 3); // CPU 3 is demanded nothing
    CHECK(describe(holds.at(0).limit) == "4");
    CHECK(describe(holds.at(0).held_for) == "nvme0n1/0");
    CHECK(describe(holds.at(1).limit) == "0");
    CHECK(describe(holds.at(1).held_for) == "nvme1n1/2 nvme2n1/1");
    CHECK(describe(holds.at(2).limit) == "0");
    CHECK(describe(holds.at(2).held_for) == "nvme1n1/2");
}

TEST_CASE("held_for is sorted and names each queue once whatever the order of the demands") {
    const std::vector<QueueDemand> demands = {{{"nvme1n1", 0}, {5}, 10u},
                                              {{"nvme0n1", 3}, {5}, 10u},
                                              {{"nvme0n1", 1}, {5, 5}, 10u}, // CPU listed twice
                                              {{"nvme0n1", 3}, {5}, 10u}};   // queue given twice
    const std::map<int, CpuHold> holds = aggregate_cpu_limits(demands);
    REQUIRE(holds.count(5) == 1);
    CHECK(describe(holds.at(5).held_for) == "nvme0n1/1 nvme0n1/3 nvme1n1/0");
}

// --- Changes to apply -------------------------------------------------------

TEST_CASE("diff_holds reports only CPUs whose limit value changed") {
    const std::map<int, CpuHold> before = {
        {0, {4u, {{"nvme0n1", 0}}}},
        {1, {0u, {{"nvme0n1", 1}}}},
        {2, {10u, {{"nvme0n1", 2}}}},
    };
    const std::map<int, CpuHold> after = {
        {0, {4u, {{"nvme1n1", 0}}}}, // same value, other queue: not rewritten
        {1, {2u, {{"nvme0n1", 1}}}},
        {3, {0u, {{"nvme0n1", 3}}}},
    };
    CHECK(describe(diff_holds(before, after)) == "cpu1: 0 -> 2, cpu2: 10 -> none, cpu3: none -> 0");
    CHECK(diff_holds(after, after).empty());
}
