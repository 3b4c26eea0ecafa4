#include "latgov/onset.hpp"

#include <algorithm>
#include <cmath>

namespace latgov {

namespace {

// Whether sorted `a` and `b` share an element.
bool meet(const std::vector<int>& a, const std::vector<int>& b) {
    return std::any_of(a.begin(), a.end(),
                       [&](int cpu) { return std::binary_search(b.begin(), b.end(), cpu); });
}

} // namespace

bool Tightened::delays(const OnsetNeeds& needs) const {
    return (global && needs.global) || meet(needs.cpus, cpus) ||
           meet(needs.dry_run_cpus, dry_run_cpus);
}

std::optional<Onset> find_onset(std::vector<IssuedRequest> activating,
                                const std::vector<LimitWrite>& writes,
                                const std::function<OnsetNeeds(const IssuedRequest&)>& needs_of,
                                std::uint64_t woken_ns) {
    // Stable: of requests stamped alike, the one drained first.
    std::stable_sort(activating.begin(), activating.end(),
                     [](const auto& a, const auto& b) { return a.time_ns < b.time_ns; });
    for (const auto& request : activating) {
        const OnsetNeeds needs = needs_of(request);
        // The last write that made stricter what it needs, once it was
        // issued: until then a limit it needs was not in place.
        const auto served = std::find_if(writes.rbegin(), writes.rend(), [&](const auto& write) {
            return request.time_ns <= write.done_ns && write.tightened.delays(needs);
        });
        if (served == writes.rend())
            continue;
        const std::uint64_t done_ns = served->done_ns;
        // Within the request's delay, whatever the clocks say.
        const std::uint64_t woken = std::clamp(woken_ns, request.time_ns, done_ns);
        using ns = std::chrono::nanoseconds;
        return Onset{request, ns(done_ns - request.time_ns), ns(woken - request.time_ns),
                     ns(done_ns - woken)};
    }
    return std::nullopt;
}

void OnsetDelays::record(std::chrono::nanoseconds delay, bool on_issuing_cpu) {
    if (capacity_ == 0)
        return;
    if (delays_.size() >= capacity_)
        delays_.erase(delays_.begin());
    delays_.push_back({static_cast<double>(delay.count()) / 1000.0, on_issuing_cpu});
}

OnsetSummary OnsetDelays::summary() const {
    OnsetSummary out;
    out.count = delays_.size();
    if (delays_.empty())
        return out;
    std::vector<double> sorted;
    sorted.reserve(delays_.size());
    for (const auto& delay : delays_) {
        sorted.push_back(delay.us);
        out.on_issuing_cpu += delay.on_issuing_cpu ? 1 : 0;
    }
    std::sort(sorted.begin(), sorted.end());
    // Nearest rank, ceil(q * n): a delay that was really observed, and one
    // that at least a fraction q of them do not exceed (of 17 onsets, the
    // p99 is the largest; the rank below would be the 16th).
    auto at = [&](double q) {
        const auto rank =
            static_cast<std::size_t>(std::ceil(q * static_cast<double>(sorted.size())));
        return sorted[std::clamp<std::size_t>(rank, 1, sorted.size()) - 1];
    };
    out.p50_us = at(0.5);
    out.p99_us = at(0.99);
    out.max_us = sorted.back();
    return out;
}

} // namespace latgov
