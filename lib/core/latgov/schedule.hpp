// When latgovd wakes next. Pure: the loop passes what it knows and the time,
// and waits until the answer (its epoll's timeout).
#pragma once

#include "latgov/config.hpp"
#include "latgov/policy.hpp"

#include <algorithm>
#include <chrono>
#include <ctime>
#include <optional>

namespace latgov {

// After this long with the same active queues, sampling slows to
// steady_interval.
inline constexpr std::chrono::milliseconds steady_after{100};

// While idle with IO events armed, the daemon still wakes this often for
// housekeeping (CPU hotplug check, watchdog): far below 1/s.
inline constexpr std::chrono::seconds housekeeping_interval{10};

// How often the loop tells systemd it is alive: a quarter of WatchdogSec=.
// The loop feeds at a tick once this much passed since the last feed, and an
// idle loop ticks this often, so two feeds are at most about half the
// watchdog apart; at half (the usual advice) a tick a little early and the
// next one a little late add up to the whole interval, and the watchdog kills
// a healthy daemon.
constexpr std::chrono::microseconds watchdog_feed_period(std::chrono::microseconds watchdog) {
    return watchdog / 4;
}

struct ScheduleState {
    bool active = false;                   // some governed queue is active
    bool sparse = false;                   // Governor::sparse_requests()
    bool events_armed = false;             // idle, and the first request wakes the daemon
    bool watch_only = false;               // nothing can be held: samples serve the status
    TimePoint last_change{};               // when what the CPUs hold last changed
    TimePoint next_tick{};                 // the base: TickCadence::base()
    bool status_dirty = false;             // a status change is still to be written
    TimePoint last_status{};               // when the status file was last written
    std::chrono::microseconds watchdog{0}; // systemd's watchdog interval, 0 = none
    std::optional<TimePoint> rescan_at;    // a pending rescan (debounced uevents)
};

struct Deadline {
    TimePoint next_tick; // the tick's deadline, the base of the one after
    TimePoint wake;      // when to wake: the tick, or earlier to flush the status
};

// The period: sample_interval while a queue is active, stretched to
// steady_interval once nothing changed for steady_after, unless the last
// tick saw requests sparser than the linger (`sparse`); idle_interval while
// idle, or housekeeping_interval (at most the watchdog feed period) when IO
// events wake the daemon. Where nothing can be held (watch_only),
// status_interval (at most the watchdog feed period) whatever the IO.
// Deadlines advance by whole periods from the last one, so ticks do not
// drift; a missed period is skipped, not caught up. A dirty status is
// flushed status_interval after the last write, not later; a pending rescan
// wakes the daemon at its time.
Deadline next_deadline(const ScheduleState& state, const DaemonSettings& settings, TimePoint now);

// The base of next_deadline's tick across the loop's re-arming: the
// deadline of the last tick that ran (or when it ran, if the loop woke
// early for something else), or when sampling started again. Arming again
// between two ticks (a request, a uevent) asks the same question and gets
// the same tick; feeding next_deadline its own answer would push the tick
// back a whole period each time.
class TickCadence {
  public:
    // Sampling starts again from `now`: the start, an onset, a reload.
    void restart(TimePoint now) {
        base_ = now;
        due_ = {}; // armed before the restart: not the next tick's base
    }
    // What ScheduleState::next_tick takes.
    TimePoint base() const { return base_; }
    // The tick deadline next_deadline gave.
    void armed(TimePoint due) { due_ = due; }
    // A tick ran at `now`: the base is the deadline armed since the last
    // restart, or `now` if it ran before it or none was armed.
    void ran(TimePoint now) { base_ = due_ > base_ ? std::min(now, due_) : now; }

  private:
    TimePoint base_{};
    TimePoint due_{};
};

// How long to wait before retrying something that failed: `first`, then
// twice the last wait at each failure, up to `max`; `first` again once it
// succeeds (reset).
class Backoff {
  public:
    constexpr Backoff(std::chrono::milliseconds first, std::chrono::milliseconds max)
        : first_(first), max_(std::max(first, max)), next_(first) {}
    // The wait before the next try; the one after it is longer.
    std::chrono::milliseconds next() {
        const auto wait = next_;
        next_ = std::min(next_ * 2, max_);
        return wait;
    }
    void reset() { next_ = first_; }

  private:
    std::chrono::milliseconds first_;
    std::chrono::milliseconds max_;
    std::chrono::milliseconds next_;
};

// The time left from `now` until `wake` as epoll_pwait2's timeout; zero
// once it passed.
timespec wait_timeout(TimePoint wake, TimePoint now);
// The same for epoll_wait: whole milliseconds, rounded up so that the tick
// never comes early.
int wait_timeout_ms(const timespec& timeout);

} // namespace latgov
