#include "latgov/schedule.hpp"

#include <doctest/doctest.h>

using namespace latgov;
using namespace std::chrono_literals;

namespace {

// Milliseconds since t0, so a failing check prints a number.
const TimePoint t0 = TimePoint{} + 1000s;
long long ms(TimePoint t) {
    return std::chrono::duration_cast<std::chrono::milliseconds>(t - t0).count();
}

DaemonSettings settings() {
    DaemonSettings s;
    s.sample_interval = 5ms;
    s.steady_interval = 20ms;
    s.idle_interval = 50ms;
    s.status_interval = 1000ms;
    return s;
}

// A daemon whose last tick was due at t0 and whose status is written.
ScheduleState at_t0() {
    ScheduleState state;
    state.next_tick = t0;
    state.last_status = t0;
    return state;
}

} // namespace

TEST_CASE("an active queue that just changed is sampled every sample_interval") {
    auto state = at_t0();
    state.active = true;
    state.last_change = t0;
    const auto d = next_deadline(state, settings(), t0 + 1ms);
    CHECK(ms(d.next_tick) == 5);
    CHECK(ms(d.wake) == 5);
}

TEST_CASE("active queues unchanged for steady_after are sampled every steady_interval") {
    auto state = at_t0();
    state.active = true;
    state.last_change = t0 - steady_after;
    CHECK(ms(next_deadline(state, settings(), t0).next_tick) == 20);
}

TEST_CASE("requests sparser than the linger keep active queues at sample_interval") {
    auto state = at_t0();
    state.active = true;
    state.last_change = t0 - 1s;
    state.sparse = true;
    CHECK(ms(next_deadline(state, settings(), t0).next_tick) == 5);
    state.sparse = false;
    CHECK(ms(next_deadline(state, settings(), t0).next_tick) == 20);
}

TEST_CASE("steady sampling is never faster than sample_interval") {
    auto state = at_t0();
    state.active = true;
    state.last_change = t0 - 1s;
    auto s = settings();
    s.sample_interval = 30ms; // steady_interval 20 ms is shorter
    CHECK(ms(next_deadline(state, s, t0).next_tick) == 30);
}

TEST_CASE("idle without IO events samples every idle_interval") {
    auto state = at_t0();
    CHECK(ms(next_deadline(state, settings(), t0).next_tick) == 50);
}

TEST_CASE("idle with IO events armed wakes only for housekeeping") {
    auto state = at_t0();
    state.events_armed = true;
    CHECK(ms(next_deadline(state, settings(), t0).next_tick) == 10000);
}

TEST_CASE("housekeeping wakes at the watchdog feed period when that is shorter") {
    auto state = at_t0();
    state.events_armed = true;
    state.watchdog = 6s;
    CHECK(ms(next_deadline(state, settings(), t0).next_tick) == 1500);
    state.watchdog = 60s; // a quarter of it is longer than housekeeping
    CHECK(ms(next_deadline(state, settings(), t0).next_tick) == 10000);
}

TEST_CASE("sampling while idle also wakes at the watchdog feed period when that is shorter") {
    auto state = at_t0();
    auto slow = settings();
    slow.idle_interval = 10s; // the longest idle_interval_ms allowed
    state.watchdog = 6s;
    CHECK(ms(next_deadline(state, slow, t0).next_tick) == 1500);
}

TEST_CASE("a watchdog under 4 ms still lets the loop sleep a millisecond") {
    auto state = at_t0();
    state.events_armed = true;
    state.watchdog = std::chrono::microseconds(3000); // a quarter: 750 us
    CHECK(ms(next_deadline(state, settings(), t0).next_tick) == 1);
    state.active = true; // sampling: the same floor
    CHECK(ms(next_deadline(state, settings(), t0).next_tick) == 1);
}

TEST_CASE("an idle loop feeds the watchdog well within its interval, also when a tick falls "
          "just short of the feed period") {
    // The loop feeds at a tick once watchdog_feed_period passed since the
    // last feed. Worst case: the tick after a feed comes a hair early (a
    // reload or a status flush re-based the deadline), so it does not feed,
    // and the next tick after it is late by the emulator's or a busy host's
    // scheduling delay.
    const auto watchdog = std::chrono::microseconds(5s);
    const auto period = watchdog_feed_period(watchdog);
    auto state = at_t0();
    state.events_armed = true;
    state.watchdog = watchdog;
    const auto fed = t0;
    const auto too_early = fed + period - 1ms; // not fed here
    state.next_tick = too_early;
    const auto next = next_deadline(state, settings(), too_early).next_tick;
    const auto late = 500ms;
    CHECK(next + late - fed < watchdog * 3 / 4);
}

TEST_CASE("where nothing can be held the daemon samples every status_interval, IO or not") {
    auto state = at_t0();
    state.watch_only = true;
    CHECK(ms(next_deadline(state, settings(), t0).next_tick) == 1000);
    state.active = true;
    state.last_change = t0;
    CHECK(ms(next_deadline(state, settings(), t0).next_tick) == 1000);
    state.watchdog = 2s; // fed at a quarter of it
    CHECK(ms(next_deadline(state, settings(), t0).next_tick) == 500);
}

TEST_CASE("events armed while active do not stretch the period") {
    auto state = at_t0();
    state.active = true;
    state.last_change = t0;
    state.events_armed = true;
    CHECK(ms(next_deadline(state, settings(), t0).next_tick) == 5);
}

TEST_CASE("deadlines advance from the previous deadline, not from now") {
    auto state = at_t0();
    state.active = true;
    state.last_change = t0;
    // Woken 3 ms late: the next tick is still one period after the last deadline.
    CHECK(ms(next_deadline(state, settings(), t0 + 3ms).next_tick) == 5);
}

TEST_CASE("arming again between two ticks keeps the tick where it was") {
    auto state = at_t0();
    state.active = true;
    state.last_change = t0;
    TickCadence cadence;
    cadence.restart(t0); // an onset
    auto arm = [&](TimePoint now) {
        state.next_tick = cadence.base();
        const auto d = next_deadline(state, settings(), now);
        cadence.armed(d.next_tick);
        return ms(d.next_tick);
    };
    CHECK(arm(t0) == 5);
    // Requests from other CPUs, a uevent: each arms again before the tick.
    CHECK(arm(t0 + 1ms) == 5);
    CHECK(arm(t0 + 2ms) == 5);
    CHECK(arm(t0 + 4ms) == 5);
    cadence.ran(t0 + 5ms); // at its deadline: the next is one period on
    CHECK(arm(t0 + 5ms) == 10);
    cadence.ran(t0 + 7ms); // early, woken to write the status: from then
    CHECK(arm(t0 + 7ms) == 12);
    cadence.ran(t0 + 14ms); // late: still from its deadline
    CHECK(arm(t0 + 14ms) == 17);
    cadence.ran(t0 + 23ms); // late by more than a period: the missed one skipped
    CHECK(arm(t0 + 23ms) == 28);
    cadence.restart(t0 + 30ms); // an onset: from it
    CHECK(arm(t0 + 30ms) == 35);
    // A restart forgets the tick armed before it: a tick that then runs
    // without arming again (none does in the daemon) counts from itself.
    cadence.restart(t0 + 31ms);
    cadence.ran(t0 + 37ms);
    CHECK(ms(cadence.base()) == 37);
}

TEST_CASE("the first tick after a restart with none armed takes its own time as the base") {
    TickCadence cadence;
    cadence.restart(t0);
    cadence.ran(t0 + 1ms); // the start: a tick at once, nothing armed yet
    CHECK(ms(cadence.base()) == 1);
}

TEST_CASE("a missed period is skipped, not caught up") {
    auto state = at_t0();
    state.active = true;
    state.last_change = t0 + 10ms;
    const auto d = next_deadline(state, settings(), t0 + 12ms);
    CHECK(ms(d.next_tick) == 17);
    // Exactly on the missed deadline counts as missed too.
    CHECK(ms(next_deadline(state, settings(), t0 + 5ms).next_tick) == 10);
}

TEST_CASE("a dirty status wakes the daemon when its write is due") {
    auto state = at_t0();
    state.events_armed = true; // next tick 10 s away
    state.status_dirty = true;
    state.last_status = t0 - 400ms;
    const auto d = next_deadline(state, settings(), t0);
    CHECK(ms(d.next_tick) == 10000);
    CHECK(ms(d.wake) == 600);
}

TEST_CASE("a dirty status already overdue is written now") {
    auto state = at_t0();
    state.status_dirty = true;
    state.last_status = t0 - 5s;
    const auto d = next_deadline(state, settings(), t0 + 2ms);
    CHECK(ms(d.wake) == 2);
    CHECK(ms(d.next_tick) == 50);
}

TEST_CASE("a dirty status due after the next tick does not delay the tick") {
    auto state = at_t0();
    state.status_dirty = true;
    state.last_status = t0;
    const auto d = next_deadline(state, settings(), t0);
    CHECK(ms(d.wake) == 50);
}

TEST_CASE("a pending rescan wakes the daemon before the housekeeping tick") {
    auto state = at_t0();
    state.events_armed = true;
    state.rescan_at = t0 + 200ms;
    const auto d = next_deadline(state, settings(), t0 + 10ms);
    CHECK(ms(d.wake) == 200);
    CHECK(ms(d.next_tick) == 10000); // the tick itself keeps its period
}

TEST_CASE("a rescan already due wakes the daemon at once") {
    auto state = at_t0();
    state.rescan_at = t0 + 5ms;
    const auto d = next_deadline(state, settings(), t0 + 30ms);
    CHECK(ms(d.wake) == 30);
}

TEST_CASE("the wait until the next tick: nanoseconds for epoll_pwait2, rounded up for epoll_wait") {
    const timespec left = wait_timeout(t0 + 1500ms + 250ns, t0);
    CHECK(left.tv_sec == 1);
    CHECK(left.tv_nsec == 500000250);
    CHECK(wait_timeout_ms(left) == 1501); // never early

    const timespec exact = wait_timeout(t0 + 5ms, t0);
    CHECK(exact.tv_sec == 0);
    CHECK(exact.tv_nsec == 5000000);
    CHECK(wait_timeout_ms(exact) == 5);

    // A deadline already passed: return at once, whatever the gap.
    const timespec late = wait_timeout(t0, t0 + 3s);
    CHECK(late.tv_sec == 0);
    CHECK(late.tv_nsec == 0);
    CHECK(wait_timeout_ms(late) == 0);

    // The longest wait the loop asks for (housekeeping while idle).
    const timespec idle = wait_timeout(t0 + housekeeping_interval, t0);
    CHECK(idle.tv_sec == 10);
    CHECK(wait_timeout_ms(idle) == 10000);
}

TEST_CASE("a backoff doubles from its first wait up to its max, and starts over on reset") {
    Backoff retry{100ms, 500ms};
    CHECK(retry.next() == 100ms);
    CHECK(retry.next() == 200ms);
    CHECK(retry.next() == 400ms);
    CHECK(retry.next() == 500ms);
    CHECK(retry.next() == 500ms);
    retry.reset();
    CHECK(retry.next() == 100ms);
    CHECK(retry.next() == 200ms);
}

TEST_CASE("a backoff whose max is below its first wait waits the first each time") {
    Backoff retry{300ms, 100ms};
    CHECK(retry.next() == 300ms);
    CHECK(retry.next() == 300ms);
}
