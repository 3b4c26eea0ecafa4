// Requests after idle that come at a steady period: a heartbeat read, a
// periodic flush, a poller. Each finds the CPUs released and pays an idle
// exit before latgovd can wake and hold (its own wake-up is an idle exit
// too), so the only way to spare them the exit is to hold before they are
// issued. PeriodicOnsets learns the period from the issue times of such
// requests and says when to hold for the next one: a window from `lead`
// before the expected time to `grace` after it. A window that sees no
// request is a miss; two in a row and the period is forgotten.
#pragma once

#include "latgov/policy.hpp"

#include <chrono>
#include <cstdint>
#include <deque>
#include <optional>

namespace latgov {

struct PrearmWindow {
    TimePoint opens;    // hold from here
    TimePoint expected; // when the request is due
    TimePoint closes;   // a miss if it has not come by then
};

class PeriodicOnsets {
  public:
    // Intervals kept, and how many a period needs.
    static constexpr std::size_t history = 8;
    static constexpr std::size_t needed = 6;
    // The interval spread a period tolerates, as a share of it (a lead
    // and a grace of twice that make a window of at most a fifth of it).
    static constexpr double max_relative_spread = 0.05;
    // Periods outside these bounds are not predicted: shorter ones are
    // streams (latgovd's linger holds through them), longer ones too rare
    // for a window to matter.
    static constexpr std::chrono::milliseconds min_period{5};
    static constexpr std::chrono::seconds max_period{10};
    // The lead covers latgovd's timer wake-up, its write and the wake-up
    // of the CPUs it holds, each an exit from halt on a guest: traced on a
    // KVM guest, the last of them was running 200-400 us after the timer
    // was due. The grace covers a late request. Each grows by twice the
    // spread of the intervals, and the lead by how late latgovd wrote its
    // holds after a window opened: the 90th percentile of the last
    // `late_history` windows (a host slow to wake it, a CPU-bound task
    // where its timer fired), up to a tenth of the period.
    static constexpr std::chrono::microseconds base_lead{500};
    static constexpr std::chrono::microseconds base_grace{500};
    static constexpr int misses_allowed = 2;
    static constexpr std::size_t late_history = 16;
    static constexpr int max_late_share = 10;

    struct Period {
        std::chrono::nanoseconds period;
        // How far from the median three intervals in four are.
        std::chrono::nanoseconds spread;
    };

    // A request after idle from `source` (a device's queue) at `issued`.
    // Another source starts the series anew: requests of two sources
    // interleaved have no period of their own.
    void observe(std::uint64_t source, TimePoint issued);
    // The window opened last (see next_window) saw its request, or not.
    void hit();
    void miss();
    // The window whose expected time comes first after the last one opened
    // and that still closes after `now`; none without a period.
    std::optional<PrearmWindow> next_window(TimePoint now) const;
    // Marks `window` as opened: the next one comes a period later.
    void opened(const PrearmWindow& window);
    // The holds of the window opened last were written at `at`.
    void written(TimePoint at);

    std::optional<Period> period() const;
    std::uint64_t source() const { return source_; }
    std::uint64_t hits() const { return hits_; }
    std::uint64_t misses() const { return misses_total_; }
    std::chrono::nanoseconds lead() const;
    std::chrono::nanoseconds grace() const;
    // How late the holds are written after a window opens: the part of
    // the lead that covers it (see base_lead); zero before any window.
    std::chrono::nanoseconds late() const;

  private:
    void forget();

    std::uint64_t source_ = 0;
    std::optional<TimePoint> last_;
    std::deque<std::chrono::nanoseconds> intervals_; // newest last
    std::optional<TimePoint> last_opened_;
    std::optional<TimePoint> opens_; // the window opened last, until written()
    // Kept when a period is forgotten: they are latgovd's, not the series'.
    std::deque<std::chrono::nanoseconds> late_; // newest last
    int misses_in_a_row_ = 0;
    std::uint64_t hits_ = 0;
    std::uint64_t misses_total_ = 0;
};

} // namespace latgov
