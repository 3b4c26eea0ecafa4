#include "latgov/periodic.hpp"

#include <algorithm>
#include <vector>

namespace latgov {

namespace {

using std::chrono::nanoseconds;

// Whole periods in `span`, rounded to the nearest.
std::int64_t periods_in(nanoseconds span, nanoseconds period) {
    return (span.count() + period.count() / 2) / period.count();
}

} // namespace

void PeriodicOnsets::forget() {
    last_.reset();
    intervals_.clear();
    last_opened_.reset();
    opens_.reset();
    misses_in_a_row_ = 0;
}

void PeriodicOnsets::observe(std::uint64_t source, TimePoint issued) {
    if (source != source_) {
        forget();
        source_ = source;
    }
    if (!last_ || issued <= *last_) {
        last_ = issued;
        return;
    }
    const auto known = period();
    nanoseconds interval = issued - *last_;
    if (known) {
        // Requests unseen in between (a window missed, or none opened): a
        // whole number of periods is that many intervals.
        const auto k = periods_in(interval, known->period);
        const auto tolerance =
            std::chrono::duration_cast<nanoseconds>(known->period * max_relative_spread);
        if (k >= 2 && interval - k * known->period <= tolerance &&
            k * known->period - interval <= tolerance)
            interval /= k;
    }
    intervals_.push_back(interval);
    if (intervals_.size() > history)
        intervals_.pop_front();
    last_ = issued;
}

void PeriodicOnsets::hit() {
    ++hits_;
    misses_in_a_row_ = 0;
}

void PeriodicOnsets::miss() {
    ++misses_total_;
    if (++misses_in_a_row_ >= misses_allowed)
        forget();
}

std::optional<PeriodicOnsets::Period> PeriodicOnsets::period() const {
    if (intervals_.size() < needed)
        return std::nullopt;
    std::vector<nanoseconds> sorted(intervals_.begin(), intervals_.end());
    std::sort(sorted.begin(), sorted.end());
    const nanoseconds median = sorted[sorted.size() / 2];
    if (median < min_period || median > max_period)
        return std::nullopt;
    // The spread: three intervals in four are this close to the median.
    // One late request in a series (the host busy elsewhere, a page
    // fault) is a miss, not a reason to widen every window.
    std::vector<nanoseconds> off;
    for (auto interval : sorted)
        off.push_back(interval > median ? interval - median : median - interval);
    std::sort(off.begin(), off.end());
    const nanoseconds spread = off[(off.size() - 1) * 3 / 4];
    if (static_cast<double>(spread.count()) >
        max_relative_spread * static_cast<double>(median.count()))
        return std::nullopt;
    return Period{median, spread};
}

void PeriodicOnsets::opened(const PrearmWindow& window) {
    last_opened_ = window.expected;
    opens_ = window.opens;
}

void PeriodicOnsets::written(TimePoint at) {
    if (!opens_)
        return;
    late_.push_back(std::max(nanoseconds::zero(), at - *opens_));
    if (late_.size() > late_history)
        late_.pop_front();
    opens_.reset();
}

std::chrono::nanoseconds PeriodicOnsets::late() const {
    if (late_.empty())
        return nanoseconds::zero();
    std::vector<nanoseconds> sorted(late_.begin(), late_.end());
    std::sort(sorted.begin(), sorted.end());
    const nanoseconds late = sorted[(sorted.size() - 1) * 9 / 10];
    // However late latgovd is, a window stays a small part of the period.
    const auto p = period();
    return p ? std::min(late, p->period / max_late_share) : late;
}

std::chrono::nanoseconds PeriodicOnsets::lead() const {
    const auto p = period();
    return base_lead + late() + (p ? 2 * p->spread : nanoseconds::zero());
}

std::chrono::nanoseconds PeriodicOnsets::grace() const {
    const auto p = period();
    return base_grace + (p ? 2 * p->spread : nanoseconds::zero());
}

std::optional<PrearmWindow> PeriodicOnsets::next_window(TimePoint now) const {
    const auto p = period();
    if (!p || !last_)
        return std::nullopt;
    const nanoseconds period = p->period;
    const nanoseconds grace_ = grace();
    std::int64_t k = 1;
    if (last_opened_ && *last_opened_ >= *last_)
        k = std::max(k, periods_in(*last_opened_ - *last_, period) + 1);
    // Still closing after now: last + k * period + grace > now.
    if (now - grace_ >= *last_)
        k = std::max(k, (now - grace_ - *last_) / period + 1);
    const TimePoint expected = *last_ + k * period;
    return PrearmWindow{expected - lead(), expected, expected + grace_};
}

} // namespace latgov
