#include "latgov/schedule.hpp"

#include <algorithm>

namespace latgov {

Deadline next_deadline(const ScheduleState& state, const DaemonSettings& settings, TimePoint now) {
    using std::chrono::milliseconds;
    milliseconds interval = state.active ? settings.sample_interval : settings.idle_interval;
    if (state.active && !state.sparse && now - state.last_change >= steady_after)
        interval = std::max(settings.sample_interval, settings.steady_interval);
    const auto fed = [&](milliseconds period) {
        if (state.watchdog.count() == 0)
            return period;
        // At least 1 ms: a WatchdogSec= under 4 ms would make it 0, a loop
        // that never sleeps.
        const auto feed = std::max(milliseconds(1), std::chrono::duration_cast<milliseconds>(
                                                        watchdog_feed_period(state.watchdog)));
        return std::min(period, feed);
    };
    if (state.watch_only)
        interval = settings.status_interval; // only the status needs samples
    else if (!state.active && state.events_armed)
        interval = housekeeping_interval; // the first request wakes the daemon
    interval = fed(interval);             // idle_interval_ms may be up to 10 s
    Deadline out;
    out.next_tick = state.next_tick + interval;
    if (out.next_tick <= now)
        out.next_tick = now + interval;
    out.wake = out.next_tick;
    if (state.status_dirty)
        out.wake = std::min(out.wake, std::max(now, state.last_status + settings.status_interval));
    if (state.rescan_at)
        out.wake = std::min(out.wake, std::max(now, *state.rescan_at));
    return out;
}

timespec wait_timeout(TimePoint wake, TimePoint now) {
    const auto left = std::max(std::chrono::nanoseconds::zero(),
                               std::chrono::duration_cast<std::chrono::nanoseconds>(wake - now));
    timespec ts{};
    ts.tv_sec = static_cast<time_t>(left.count() / 1000000000);
    ts.tv_nsec = static_cast<long>(left.count() % 1000000000);
    return ts;
}

int wait_timeout_ms(const timespec& timeout) {
    return static_cast<int>(timeout.tv_sec * 1000 + (timeout.tv_nsec + 999999) / 1000000);
}

} // namespace latgov
