#include "latgov/request_filter.hpp"

#include <algorithm>
#include <utility>

namespace latgov {

namespace {

using Range = std::pair<std::uint32_t, std::uint32_t>; // inclusive

constexpr std::uint32_t minor_bits = 20;

std::string term(const Range& r) {
    if (r.first == r.second)
        return "dev == " + std::to_string(r.first);
    return "(dev >= " + std::to_string(r.first) + " && dev <= " + std::to_string(r.second) + ")";
}

} // namespace

std::vector<std::string> request_filter_terms(const WatchedDevs& watched) {
    std::vector<Range> ranges;
    for (auto dev : watched.devs)
        ranges.emplace_back(dev, dev);
    if (watched.hidden_paths) {
        // The extended major less the disks that are not ours: the gaps
        // hold the hidden path disks (and partitions and unused minors,
        // which no request names).
        const std::uint32_t first = block_ext_major << minor_bits;
        const std::uint32_t last = first | ((1u << minor_bits) - 1);
        std::vector<std::uint32_t> others;
        for (auto dev : watched.others)
            if (dev >= first && dev <= last)
                others.push_back(dev);
        std::sort(others.begin(), others.end());
        std::uint32_t from = first;
        for (auto other : others) {
            if (other > from)
                ranges.emplace_back(from, other - 1);
            from = other + 1;
        }
        if (others.empty() || others.back() < last)
            ranges.emplace_back(from, last);
    }
    std::sort(ranges.begin(), ranges.end());
    std::vector<Range> merged;
    for (const auto& r : ranges) {
        // Overlapping or adjacent: one range (a run of disks becomes one term).
        if (!merged.empty() && r.first <= std::uint64_t{merged.back().second} + 1)
            merged.back().second = std::max(merged.back().second, r.second);
        else
            merged.push_back(r);
    }
    std::vector<std::string> terms;
    for (const auto& r : merged)
        terms.push_back(term(r));
    return terms;
}

std::vector<std::string> join_terms_within(const std::vector<std::string>& terms,
                                           std::size_t room) {
    constexpr std::string_view separator = " || ";
    std::vector<std::string> joined(1);
    for (const auto& t : terms) {
        auto& current = joined.back();
        if (current.empty()) {
            current = t;
        } else if (current.size() + separator.size() + t.size() <= room) {
            current.append(separator).append(t);
        } else {
            joined.push_back(t); // a term longer than `room` alone: the kernel says no
        }
    }
    return joined;
}

} // namespace latgov
