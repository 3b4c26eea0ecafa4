#include "latgov/onset.hpp"

#include <doctest/doctest.h>

using namespace latgov;
using namespace std::chrono_literals;

TEST_CASE("no onset yet: a count of zero") {
    OnsetDelays delays;
    CHECK(delays.summary().count == 0);
}

TEST_CASE("onset summary: median, p99 and max of the delays in microseconds") {
    OnsetDelays delays;
    for (int i = 100; i >= 1; --i) // 1..100 us, recorded out of order
        delays.record(std::chrono::microseconds(i));
    const auto s = delays.summary();
    CHECK(s.count == 100);
    CHECK(s.p50_us == doctest::Approx(50)); // nearest rank ceil(0.5 * 100) of 1..100
    CHECK(s.p99_us == doctest::Approx(99));
    CHECK(s.max_us == doctest::Approx(100));
}

TEST_CASE("onset p99 of few onsets is their largest, not the one below") {
    OnsetDelays delays;
    for (int i = 1; i <= 17; ++i) // a bench run's onsets
        delays.record(std::chrono::microseconds(10 * i));
    CHECK(delays.summary().p99_us == doctest::Approx(170));
    CHECK(delays.summary().p50_us == doctest::Approx(90)); // the 9th of 17
    OnsetDelays two;
    two.record(100us);
    two.record(2600us);
    CHECK(two.summary().p50_us == doctest::Approx(100));
    CHECK(two.summary().p99_us == doctest::Approx(2600));
}

TEST_CASE("onset summary keeps only the newest delays") {
    OnsetDelays delays(3);
    delays.record(1000us); // dropped once three more arrive
    delays.record(10us);
    delays.record(20us);
    delays.record(2500ns);
    const auto s = delays.summary();
    CHECK(s.count == 3);
    CHECK(s.max_us == doctest::Approx(20));
    CHECK(s.p50_us == doctest::Approx(10));
}

TEST_CASE("onset summary counts the onsets handled on the issuing CPU among those kept") {
    OnsetDelays delays(3);
    delays.record(10us, true); // dropped once three more arrive
    delays.record(20us, true);
    delays.record(30us, false);
    delays.record(40us, true);
    const auto s = delays.summary();
    CHECK(s.count == 3);
    CHECK(s.on_issuing_cpu == 2);
}

TEST_CASE("an onset is a request whose own limits were tightened") {
    const OnsetNeeds needs{{0, 1}, {}, false};
    CHECK(Tightened{{1}, {}, false}.delays(needs));
    CHECK(Tightened{{0, 3}, {}, false}.delays(needs));
    // Another request's waiter CPU tightened beside it: not this one's.
    CHECK_FALSE(Tightened{{2, 3}, {}, false}.delays(needs));
    // Nothing tightened (held already, a no-hold verdict, a failed write).
    CHECK_FALSE(Tightened{}.delays(needs));
    // The global limit, for a request that needs it; not for one held per CPU.
    CHECK(Tightened{{}, {}, true}.delays(OnsetNeeds{{}, {}, true}));
    CHECK_FALSE(Tightened{{}, {}, true}.delays(needs));
    // A request that needs nothing never waited.
    CHECK_FALSE(Tightened{{0, 1}, {0, 1}, true}.delays(OnsetNeeds{}));
}

TEST_CASE("a CPU logged for a dry-run device is no limit written for another") {
    const OnsetNeeds percpu{{1}, {}, false};
    const OnsetNeeds dry_run{{}, {1}, false};
    // The same CPU, logged for a dry-run device in the wake-up: the
    // per-CPU request's limit was in place already.
    CHECK_FALSE(Tightened{{}, {1}, false}.delays(percpu));
    CHECK(Tightened{{}, {1}, false}.delays(dry_run));
    // And written for a per-CPU device: the dry-run request logged nothing.
    CHECK(Tightened{{1}, {}, false}.delays(percpu));
    CHECK_FALSE(Tightened{{1}, {}, false}.delays(dry_run));
}

namespace {

// What each request needs: CPU 1 for those of device 1, CPU 2 for device 2,
// the same CPU logged for device 3 (dry-run).
OnsetNeeds needs_of(const IssuedRequest& r) {
    if (r.dev == 3)
        return {{}, {2}, false};
    return {{static_cast<int>(r.dev)}, {}, false};
}

IssuedRequest request(std::uint32_t dev, std::uint64_t time_ns, int cpu = 0) {
    return {cpu, dev, time_ns, true};
}

} // namespace

TEST_CASE("the onset of a drain is its earliest request that waited") {
    // Device 1's request came first, but its CPU was held already: device
    // 2's is the one that waited.
    const auto onset = find_onset({request(2, 1'300, 1), request(1, 1'000)},
                                  {{Tightened{{2}, {}, false}, 5'000}}, needs_of, 2'000);
    REQUIRE(onset);
    CHECK(onset->request.dev == 2);
    CHECK(onset->request.cpu == 1);
    CHECK(onset->delay == 3'700ns);
    CHECK(onset->wake == 700ns); // issued, then latgovd woke
    CHECK(onset->work == 3'000ns);
    // Both waited: the earlier one, whatever the order drained.
    const auto both = find_onset({request(2, 1'300), request(1, 1'000)},
                                 {{Tightened{{1, 2}, {}, false}, 5'000}}, needs_of, 2'000);
    REQUIRE(both);
    CHECK(both->request.dev == 1);
    CHECK(both->delay == 4'000ns);
    // A dry-run device's request waited for the CPU logged for it.
    CHECK(find_onset({request(3, 1'000)}, {{Tightened{{}, {2}, false}, 5'000}}, needs_of, 2'000));
    // Stamped alike: the one drained first.
    const auto alike = find_onset({request(2, 1'000, 1), request(2, 1'000, 0)},
                                  {{Tightened{{2}, {}, false}, 5'000}}, needs_of, 2'000);
    REQUIRE(alike);
    CHECK(alike->request.cpu == 1);
}

TEST_CASE("a request issued once latgovd was awake has no wake-up part") {
    // A later drain's request, or one whose event came after the wake-up.
    const auto onset =
        find_onset({request(1, 3'000)}, {{Tightened{{1}, {}, false}, 5'000}}, needs_of, 2'000);
    REQUIRE(onset);
    CHECK(onset->delay == 2'000ns);
    CHECK(onset->wake == 0ns);
    CHECK(onset->work == 2'000ns);
    // A wake-up stamped after the write (clocks read out of order) leaves
    // the work part empty, not negative.
    const auto late =
        find_onset({request(1, 1'000)}, {{Tightened{{1}, {}, false}, 5'000}}, needs_of, 6'000);
    REQUIRE(late);
    CHECK(late->wake == 4'000ns);
    CHECK(late->work == 0ns);
}

TEST_CASE("no onset where nobody waited or the clock says the request came after") {
    // Nothing tightened that these need: a dry-run CPU is not a written one.
    CHECK_FALSE(find_onset({request(1, 1'000), request(2, 1'100)},
                           {{Tightened{{3}, {1, 2}, false}, 5'000}}, needs_of, 2'000));
    // Stamped after the write: not one that waited for it.
    CHECK_FALSE(
        find_onset({request(1, 6'000)}, {{Tightened{{1}, {}, false}, 5'000}}, needs_of, 2'000));
    CHECK_FALSE(find_onset({}, {{Tightened{{1}, {}, false}, 5'000}}, needs_of, 2'000));
}

TEST_CASE("a request that came while an earlier drain wrote waited for that write") {
    // The first drain wrote CPU 1 at 5000; the second drain's request for
    // device 1, issued at 4000 while that write ran, finds CPU 1 held and
    // its own write tightens nothing, yet it waited until 5000.
    const std::vector<LimitWrite> writes{{Tightened{{1}, {}, false}, 5'000}, {Tightened{}, 9'000}};
    const auto onset = find_onset({request(1, 4'000)}, writes, needs_of, 2'000);
    REQUIRE(onset);
    CHECK(onset->delay == 1'000ns);
    CHECK(onset->wake == 0ns); // issued once latgovd was awake
    CHECK(onset->work == 1'000ns);
    // Issued after that write landed: its limit stood, it waited for
    // nothing, and the later write that tightened nothing serves nobody.
    CHECK_FALSE(find_onset({request(1, 6'000)}, writes, needs_of, 2'000));
    // A request the second write tightened for is timed to that write;
    // the first, which tightened nothing it needs, did not serve it.
    const std::vector<LimitWrite> both{{Tightened{{1}, {}, false}, 5'000},
                                       {Tightened{{2}, {}, false}, 9'000}};
    const auto second = find_onset({request(2, 4'000)}, both, needs_of, 2'000);
    REQUIRE(second);
    CHECK(second->delay == 5'000ns);
    // Both writes tightened what it needs (CPU 1 held anew, then more
    // strictly; or two of its CPUs, one each): its limits were all in
    // place at the second only.
    const std::vector<LimitWrite> twice{{Tightened{{1}, {}, false}, 5'000},
                                        {Tightened{{1}, {}, false}, 9'000}};
    const auto last = find_onset({request(1, 4'000)}, twice, needs_of, 2'000);
    REQUIRE(last);
    CHECK(last->delay == 5'000ns);
    // Of two requests in a drain, the earlier that waited, each timed to
    // the write that served it.
    const auto earlier = find_onset({request(2, 4'500), request(1, 4'000)}, both, needs_of, 2'000);
    REQUIRE(earlier);
    CHECK(earlier->request.dev == 1);
    CHECK(earlier->delay == 1'000ns);
}
