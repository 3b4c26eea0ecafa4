#include "latgov/hotplug_watch.hpp"

#include "latgov/io_events.hpp"
#include "latgov/parse.hpp"

#include <algorithm>
#include <cerrno>
#include <linux/perf_event.h>

namespace latgov {

namespace {

// A step is a record of a header alone (no sample fields); a hotplug takes
// a few hundred steps at most, a page holds 512, and the first step of a
// burst wakes the loop, which empties every ring.
constexpr std::size_t ring_pages = 1;

} // namespace

Result<HotplugWatch> HotplugWatch::open(const SysRoot& root, const std::vector<int>& cpus) {
    auto files = read_tracepoint_files(root, "cpuhp/cpuhp_enter");
    if (!files)
        return files.error();
    auto id = parse_u64(files->id);
    if (!id)
        return make_error("Failed to parse the cpuhp_enter tracepoint id: " + id.error().message);
    HotplugWatch watch;
    for (int cpu : cpus) {
        perf_event_attr attr{};
        attr.sample_period = 1;
        attr.wakeup_events = 1;
        int error = 0;
        auto event = open_tracepoint_event(attr, *id, cpu, "cpuhp_enter", &error);
        if (!event && error == ENODEV) { // gone offline since the list was read
            watch.missed_.push_back(cpu);
            continue;
        }
        if (!event)
            return event.error();
        auto ring = PerfRing::map(std::move(*event), ring_pages);
        if (!ring)
            return ring.error();
        watch.fds_.push_back(ring->fd());
        watch.rings_.push_back(std::move(*ring));
    }
    std::sort(watch.fds_.begin(), watch.fds_.end());
    return watch;
}

bool HotplugWatch::owns(int fd) const {
    return std::binary_search(fds_.begin(), fds_.end(), fd);
}

bool HotplugWatch::drain() {
    bool any = false;
    for (auto& ring : rings_) {
        const auto head = ring.head();
        any = any || head != ring.tail();
        ring.set_tail(head);
    }
    return any;
}

} // namespace latgov
