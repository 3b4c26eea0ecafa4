#include "latgov/onset.hpp"

#include <algorithm>

namespace latgov {

void OnsetDelays::record(std::chrono::nanoseconds delay) {
    if (capacity_ == 0)
        return;
    if (delays_us_.size() >= capacity_)
        delays_us_.erase(delays_us_.begin());
    delays_us_.push_back(static_cast<double>(delay.count()) / 1000.0);
}

OnsetSummary OnsetDelays::summary() const {
    OnsetSummary out;
    out.count = delays_us_.size();
    if (delays_us_.empty())
        return out;
    auto sorted = delays_us_;
    std::sort(sorted.begin(), sorted.end());
    // The nearest rank below: a delay that was really observed.
    auto at = [&](double q) {
        return sorted[static_cast<std::size_t>(q * static_cast<double>(sorted.size() - 1))];
    };
    out.p50_us = at(0.5);
    out.p99_us = at(0.99);
    out.max_us = sorted.back();
    return out;
}

} // namespace latgov
