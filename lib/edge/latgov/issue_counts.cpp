#include "latgov/issue_counts.hpp"

#include "latgov/io_events.hpp"

#include <algorithm>
#include <cerrno>
#include <linux/perf_event.h>
#include <sys/ioctl.h>
#include <sys/syscall.h>
#include <unistd.h>

namespace latgov {

Result<IssueCounters> IssueCounters::open(const SysRoot& root, const std::vector<int>& cpus,
                                          const WatchedDevs& watched) {
    auto tp = read_block_rq_issue_format(root);
    if (!tp)
        return tp.error();
    // Reads and synchronous writes only: asynchronous writeback (rwbs "W"
    // without "S") has nobody waiting for it. The same rule as
    // rwbs_waited() (perf_records.hpp) applies to the wake-up samples;
    // change both together.
    constexpr std::string_view waited = "(rwbs ~ \"R*\" || rwbs ~ \"*S*\")";
    // Devices that need more than a page of filter get several counters.
    const auto parts = device_filters(watched, waited.size(), max_filter_length());
    bool narrowed = true; // false once the kernel refused to glob

    IssueCounters counters;
    for (int cpu : cpus) {
        CpuCounter counter{cpu, {}};
        for (const auto& part : parts) {
            perf_event_attr attr{};
            attr.size = sizeof attr;
            attr.type = PERF_TYPE_TRACEPOINT;
            attr.config = tp->id;
            const long fd =
                ::syscall(SYS_perf_event_open, &attr, -1, cpu, -1, PERF_FLAG_FD_CLOEXEC);
            if (fd < 0)
                return make_error("Failed to open a block_rq_issue counter on cpu " +
                                  std::to_string(cpu) + ": " + errno_message(errno));
            Fd event(static_cast<int>(fd));
            std::string filter = !narrowed      ? part
                                 : part.empty() ? std::string(waited)
                                                : "(" + part + ") && " + std::string(waited);
            if (!filter.empty() &&
                ::ioctl(event.get(), PERF_EVENT_IOC_SET_FILTER, filter.c_str()) != 0) {
                if (!narrowed)
                    return make_error("Failed to set filter \"" + filter +
                                      "\": " + errno_message(errno));
                // A kernel whose filters cannot glob: count every request of the disks.
                narrowed = false;
                filter = part;
                if (!filter.empty() &&
                    ::ioctl(event.get(), PERF_EVENT_IOC_SET_FILTER, filter.c_str()) != 0)
                    return make_error("Failed to set filter \"" + filter +
                                      "\": " + errno_message(errno));
            }
            counter.fds.push_back(std::move(event));
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
            if (::read(fd.get(), &value, sizeof value) != sizeof value)
                return make_error("Failed to read the block_rq_issue counter of cpu " +
                                  std::to_string(counter.cpu) + ": " + errno_message(errno));
            total += value;
        }
        const auto i = static_cast<size_t>(counter.cpu);
        if (counts.size() <= i)
            counts.resize(i + 1, 0);
        counts[i] = total;
    }
    return {};
}

} // namespace latgov
