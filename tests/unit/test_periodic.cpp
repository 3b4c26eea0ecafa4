// Learning the period of requests after idle, and the windows held for them.
#include "latgov/periodic.hpp"

#include <doctest/doctest.h>

using namespace latgov;
using namespace std::chrono_literals;

namespace {

const TimePoint t0{};
constexpr std::uint64_t fio = 1;

// `n` requests from `source`, `period` apart from `at` on, each late by
// jitter[i % jitter.size()].
TimePoint feed(PeriodicOnsets& p, std::uint64_t source, TimePoint at,
               std::chrono::nanoseconds period, int n,
               std::vector<std::chrono::nanoseconds> jitter = {0ns}) {
    TimePoint last = at;
    for (int i = 0; i < n; ++i) {
        last = at + i * period + jitter[static_cast<size_t>(i) % jitter.size()];
        p.observe(source, last);
    }
    return last;
}

// Requests from `fio`, each `gaps[i]` after the one before, from t0 on.
// The last one's time.
TimePoint feed_gaps(PeriodicOnsets& p, std::initializer_list<std::chrono::milliseconds> gaps) {
    TimePoint at = t0;
    for (auto gap : gaps) {
        at += gap;
        p.observe(fio, at);
    }
    return at;
}

} // namespace

TEST_CASE("a steady period is learnt after six intervals, with its spread") {
    PeriodicOnsets p;
    TimePoint last = feed(p, fio, t0, 20200us, PeriodicOnsets::needed, {0us, 30us, -20us});
    CHECK_FALSE(p.period()); // five intervals
    CHECK_FALSE(p.next_window(last));
    p.observe(fio, last + 20200us + 10us);
    last += 20210us;
    REQUIRE(p.period());
    // Intervals +30, -50, +20, +30, -50, +10 us around 20.2 ms: the median
    // (the upper one of an even count) is +20. Four of six are within 10 us
    // of it: that is the spread (the two at -50 are 70 us off).
    CHECK(p.period()->period == 20220us);
    CHECK(p.period()->spread == 10us);
    CHECK(p.lead() == PeriodicOnsets::base_lead + 20us);
    CHECK(p.grace() == PeriodicOnsets::base_grace + 20us);
    auto w = p.next_window(last + 1ms);
    REQUIRE(w);
    CHECK(w->expected == last + 20220us);
    CHECK(w->opens == w->expected - p.lead());
    CHECK(w->closes == w->expected + p.grace());
}

TEST_CASE("irregular requests, too short or too long periods, have no window") {
    SUBCASE("irregular") {
        PeriodicOnsets p;
        const TimePoint at = feed_gaps(p, {20ms, 35ms, 12ms, 50ms, 20ms, 27ms, 41ms, 20ms});
        CHECK_FALSE(p.period());
        CHECK_FALSE(p.next_window(at));
    }
    SUBCASE("below min_period: a stream") {
        PeriodicOnsets p;
        feed(p, fio, t0, 1ms, 10);
        CHECK_FALSE(p.period());
    }
    SUBCASE("above max_period") {
        PeriodicOnsets p;
        feed(p, fio, t0, 11s, 10);
        CHECK_FALSE(p.period());
    }
    SUBCASE("three intervals in eight far off are too much spread") {
        PeriodicOnsets p;
        feed_gaps(p, {20ms, 20ms, 23ms, 20ms, 20ms, 17ms, 20ms, 23ms, 20ms});
        CHECK_FALSE(p.period());
    }
}

TEST_CASE("one late request in eight does not widen the windows") {
    PeriodicOnsets p;
    feed_gaps(p, {20ms, 20ms, 20ms, 22ms, 18ms, 20ms, 20ms, 20ms, 20ms});
    REQUIRE(p.period());
    CHECK(p.period()->period == 20ms);
    CHECK(p.period()->spread == 0ms);
}

TEST_CASE("requests of two sources interleaved start the series anew") {
    PeriodicOnsets p;
    TimePoint last = feed(p, fio, t0, 20ms, 8);
    REQUIRE(p.period());
    p.observe(2, last + 5ms);
    CHECK(p.source() == 2);
    CHECK_FALSE(p.period());
}

TEST_CASE("windows: one per period, the missed one counts, two misses forget the period") {
    PeriodicOnsets p;
    TimePoint last = feed(p, fio, t0, 20ms, 8);
    auto w = p.next_window(last);
    REQUIRE(w);
    CHECK(w->expected == last + 20ms);
    p.opened(*w);
    // Once opened, the next window is a period later, not the same one.
    auto next = p.next_window(w->opens);
    REQUIRE(next);
    CHECK(next->expected == last + 40ms);

    // The request comes in the window: a hit, and the series goes on from it.
    p.observe(fio, w->expected + 100us);
    p.hit();
    CHECK(p.hits() == 1);
    last = w->expected + 100us;
    w = p.next_window(last);
    REQUIRE(w);
    CHECK(w->expected == last + 20ms);

    // A miss: the window after it is a period later still, and a request
    // two periods after the last counts as one interval of one period.
    p.opened(*w);
    p.miss();
    CHECK(p.misses() == 1);
    REQUIRE(p.period());
    auto after_miss = p.next_window(w->closes);
    REQUIRE(after_miss);
    CHECK(after_miss->expected == last + 40ms);
    p.opened(*after_miss);
    p.observe(fio, last + 40ms);
    p.hit(); // and the misses in a row start again from 0
    CHECK(p.hits() == 2);
    REQUIRE(p.period());
    CHECK(p.period()->period == 20ms);

    // Two misses in a row: the period is forgotten.
    w = p.next_window(last + 40ms);
    REQUIRE(w);
    p.opened(*w);
    p.miss();
    w = p.next_window(w->closes);
    REQUIRE(w);
    p.opened(*w);
    p.miss();
    CHECK(p.misses() == 3);
    CHECK_FALSE(p.period());
    CHECK_FALSE(p.next_window(w->closes));
}

TEST_CASE("a window asked for late is the next one that still closes after now") {
    PeriodicOnsets p;
    TimePoint last = feed(p, fio, t0, 20ms, 8);
    // 65 ms after the last request: the windows at +20, +40 and +60 ms are
    // over, the one at +80 ms is next.
    auto w = p.next_window(last + 65ms);
    REQUIRE(w);
    CHECK(w->expected == last + 80ms);
    // Inside a window's grace it is still that window.
    w = p.next_window(last + 20ms + 100us);
    REQUIRE(w);
    CHECK(w->expected == last + 20ms);
}

TEST_CASE("windows whose holds were written late widen the lead by that lateness") {
    PeriodicOnsets p;
    TimePoint last = feed(p, fio, t0, 20ms, 8); // no spread
    CHECK(p.late() == 0ns);
    CHECK(p.lead() == PeriodicOnsets::base_lead);
    // Opens one window after another; the holds of each are written
    // late_of(i) after it opened, and its request comes on time.
    auto run = [&](int windows, auto late_of) {
        for (int i = 0; i < windows; ++i) {
            auto w = p.next_window(last);
            REQUIRE(w);
            p.opened(*w);
            p.written(w->opens + late_of(i));
            last = w->expected;
            p.observe(fio, last);
            p.hit();
        }
    };
    // Written before the window opened (epoll_wait's early millisecond):
    // not late at all.
    run(4, [](int) { return -300us; });
    CHECK(p.late() == 0ns);
    // Late by 100 us, and 1 ms in one window of eight: the 90th percentile
    // of the last 16 is 100 us (one late outlier in ten is not the rule).
    run(16, [](int i) { return i % 8 == 7 ? 1000us : 100us; });
    CHECK(p.late() == 100us);
    // Late by 1 ms in every second window: it is.
    run(16, [](int i) { return i % 2 ? 1000us : 100us; });
    CHECK(p.late() == 1000us);
    auto w = p.next_window(last);
    REQUIRE(w);
    CHECK(p.lead() == PeriodicOnsets::base_lead + 1000us);
    CHECK(w->opens == w->expected - PeriodicOnsets::base_lead - 1000us);
    // A write with no window opened since the last one counts nothing.
    p.written(w->opens + 5s);
    CHECK(p.late() == 1000us);
    // However late latgovd is, the lead takes at most a tenth of the period.
    {
        PeriodicOnsets slow = p;
        auto v = slow.next_window(last);
        REQUIRE(v);
        for (int i = 0; i < 16; ++i) {
            slow.opened(*v);
            slow.written(v->opens + 5ms);
        }
        CHECK(slow.late() == 2ms);
        CHECK(slow.lead() == PeriodicOnsets::base_lead + 2ms);
    }
    // Forgetting the period keeps what latgovd's own lateness was.
    p.opened(*w);
    p.miss();
    p.opened(*p.next_window(w->closes));
    p.miss();
    REQUIRE_FALSE(p.period());
    CHECK(p.late() == 1000us);
}
