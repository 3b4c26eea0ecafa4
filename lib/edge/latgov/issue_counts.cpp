#include "latgov/issue_counts.hpp"

#include "latgov/io_events.hpp"
#include "latgov/perf_records.hpp"

#include <algorithm>
#include <cerrno>
#include <linux/perf_event.h>
#include <sys/ioctl.h>
#include <sys/syscall.h>
#include <unistd.h>

namespace latgov {

namespace {

constexpr std::size_t data_pages = 4; // 2048 requests between reads; a power of two

} // namespace

Result<IssueCounters> IssueCounters::open(const SysRoot& root, const std::vector<int>& cpus,
                                          const WatchedDevs& watched) {
    auto tp = read_block_rq_issue_format(root);
    if (!tp)
        return tp.error();
    // Reads and synchronous writes only: asynchronous writeback (rwbs "W"
    // without "S") has nobody waiting for it.
    constexpr std::string_view waited = "(rwbs ~ \"R*\" || rwbs ~ \"*S*\")";
    // Devices that need more than a page of filter get several counters.
    const auto parts = device_filters(watched, waited.size(), max_filter_length());
    bool narrowed = true; // false once the kernel refused to glob

    const auto page = static_cast<std::size_t>(::sysconf(_SC_PAGESIZE));
    IssueCounters counters;
    for (int cpu : cpus) {
        CpuCounter counter{cpu, {}, 0};
        for (const auto& part : parts) {
            // A sample of nothing but its header per request, read from the
            // mapped ring: reading a counting event instead interrupts its
            // CPU (an idle one wakes) at every tick. The ring wakes nobody
            // until it is full; a request dropped then is still counted, in
            // the PERF_RECORD_LOST that follows.
            perf_event_attr attr{};
            attr.size = sizeof attr;
            attr.type = PERF_TYPE_TRACEPOINT;
            attr.config = tp->id;
            attr.sample_period = 1;
            attr.watermark = 1;
            attr.wakeup_watermark = static_cast<std::uint32_t>(data_pages * page);
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
            auto ring = PerfRing::map(std::move(event), data_pages);
            if (!ring)
                return ring.error();
            counter.rings.push_back(std::move(*ring));
        }
        counters.counters_.push_back(std::move(counter));
    }
    return counters;
}

void IssueCounters::read(const CpuSet& only, std::vector<std::uint64_t>& counts) {
    for (auto& counter : counters_) {
        if (!only.empty() && !std::binary_search(only.begin(), only.end(), counter.cpu))
            continue;
        for (auto& ring : counter.rings) {
            const auto count =
                count_ring_samples(ring.data(), ring.data_size(), ring.tail(), ring.head());
            ring.set_tail(count.tail);
            counter.total += count.samples;
        }
        const auto i = static_cast<size_t>(counter.cpu);
        if (counts.size() <= i)
            counts.resize(i + 1, 0);
        counts[i] = counter.total;
    }
}

} // namespace latgov
