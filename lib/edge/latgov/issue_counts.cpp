#include "latgov/issue_counts.hpp"

#include "latgov/io_events.hpp"
#include "latgov/sample.hpp"

#include <algorithm>
#include <cerrno>
#include <linux/perf_event.h>
#include <unistd.h>

namespace latgov {

Result<IssueCounters> IssueCounters::open(const SysRoot& root, const std::vector<int>& cpus,
                                          const WatchedDevs& watched) {
    auto tp = read_request_format(root);
    if (!tp)
        return tp.error();
    // Reads and synchronous writes only (waited_only): asynchronous
    // writeback has nobody waiting for it.
    // Devices that need more than a page of filter get several counters.
    const auto parts = device_filters(watched, waited_only.size(), max_filter_length());
    bool narrowed = true; // false once the kernel refused to glob

    IssueCounters counters;
    for (int cpu : cpus) {
        CpuCounter counter{cpu, {}};
        for (const auto& part : parts) {
            const std::string filter = part.empty()
                                           ? std::string(waited_only)
                                           : "(" + part + ") && " + std::string(waited_only);
            std::string applied;
            // Where the kernel cannot glob: every request of the disks.
            auto event =
                open_request_event(perf_event_attr{}, *tp, cpu, filter, part, narrowed, applied);
            if (!event)
                return event.error();
            counter.fds.push_back(std::move(*event));
        }
        counters.counters_.push_back(std::move(counter));
    }
    return counters;
}

Result<void> IssueCounters::read(const CpuSet& only, std::vector<std::uint64_t>& counts) {
    for (const auto& counter : counters_) {
        if (!only.empty() && !std::binary_search(only.begin(), only.end(), counter.cpu))
            continue;
        std::uint64_t total = 0;
        for (const auto& fd : counter.fds) {
            std::uint64_t value = 0;
            if (const ssize_t n = ::read(fd.get(), &value, sizeof value); n != sizeof value)
                return make_error("Failed to read the " + std::string(request_tracepoint) +
                                  " counter of cpu " + std::to_string(counter.cpu) + ": " +
                                  (n < 0 ? errno_message(errno)
                                         : "read " + std::to_string(n) + " of " +
                                               std::to_string(sizeof value) +
                                               " bytes (an event in error state)"));
            total += value;
        }
        const auto i = static_cast<size_t>(counter.cpu);
        if (counts.size() <= i)
            counts.resize(i + 1, issues_unread);
        counts[i] = total;
    }
    return {};
}

} // namespace latgov
