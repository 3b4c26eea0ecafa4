#include "latgov/io_events.hpp"

#include "latgov/parse.hpp"

#include <cerrno>
#include <cstring>
#include <linux/perf_event.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

namespace latgov {

namespace {

constexpr std::size_t ring_pages = 8; // data pages; a power of two

long perf_event_open(perf_event_attr* attr, int cpu) {
    return ::syscall(SYS_perf_event_open, attr, -1, cpu, -1, PERF_FLAG_FD_CLOEXEC);
}

} // namespace

Result<TracepointFormat> read_block_rq_issue_format(const SysRoot& root) {
    Result<std::string> id = make_error("");
    Result<std::string> format = make_error("");
    for (const char* tracefs : {"/sys/kernel/tracing", "/sys/kernel/debug/tracing"}) {
        const std::string dir = std::string(tracefs) + "/events/block/block_rq_issue";
        id = root.read(dir + "/id");
        format = root.read(dir + "/format");
        if (id && format)
            break;
    }
    if (!id || !format)
        return make_error("tracefs is not mounted (no events/block/block_rq_issue under "
                          "/sys/kernel/tracing or /sys/kernel/debug/tracing)");
    auto tp = parse_tracepoint_format(*id, *format);
    if (!tp)
        return make_error("Failed to parse block_rq_issue format: " + tp.error().message);
    return tp;
}

std::size_t max_filter_length() {
    const long page = ::sysconf(_SC_PAGESIZE);
    return static_cast<std::size_t>(page > 0 ? page : 4096) - 1;
}

std::vector<std::string> device_filters(const WatchedDevs& watched, std::size_t suffix_length,
                                        std::size_t max_length) {
    constexpr std::size_t wrapping = std::string_view("() && ").size();
    const std::size_t room =
        max_length > suffix_length + wrapping ? max_length - suffix_length - wrapping : 0;
    return join_terms_within(request_filter_terms(watched), room);
}

std::string own_requests_excluded(const std::string& filter) {
    char comm[17] = {};
    if (::prctl(PR_GET_NAME, comm) != 0 || comm[0] == '\0')
        return filter;
    // Kernel writeback and journal commits (ext4's jbd2) are what latgovd's
    // own writes turn into; no task sleeps on them at the moment they start.
    const std::string self =
        std::string("comm != \"") + comm + "\" && !(comm ~ \"kworker/*\") && !(comm ~ \"jbd2/*\")";
    return filter.empty() ? self : "(" + filter + ") && " + self;
}

std::vector<std::string> wakeup_filters(const WatchedDevs& watched, std::size_t max_length) {
    std::vector<std::string> filters;
    for (const auto& part : device_filters(watched, own_requests_excluded("").size(), max_length))
        filters.push_back(own_requests_excluded(part));
    return filters;
}

Result<IoIssueEvents> IoIssueEvents::open(const SysRoot& root, const std::vector<int>& cpus,
                                          const WatchedDevs& watched) {
    auto tp = read_block_rq_issue_format(root);
    if (!tp)
        return tp.error();
    // latgovd's own writes (status, journal, evidence, metrics) must not
    // wake it: where its runtime directory sits on a governed disk, each
    // write would take a hold whose release is written again, for ever.
    // ext4 submits a file replaced by rename in the renaming task, so the
    // request carries our comm; writeback by kernel threads still counts.
    // Devices that need more than a page of filter get several events.
    const auto parts =
        device_filters(watched, own_requests_excluded("").size(), max_filter_length());
    bool narrowed = true; // false once the kernel refused to filter on comm

    IoIssueEvents events;
    events.dev_offset_ = tp->dev_offset;
    std::vector<std::string> filters(parts.size());
    const long page = ::sysconf(_SC_PAGESIZE);
    for (int cpu : cpus) {
        for (std::size_t i = 0; i < parts.size(); ++i) {
            perf_event_attr attr{};
            attr.size = sizeof attr;
            attr.type = PERF_TYPE_TRACEPOINT;
            attr.config = tp->id;
            attr.sample_period = 1;
            attr.sample_type = PERF_SAMPLE_TIME | PERF_SAMPLE_RAW;
            attr.wakeup_events = 1;
            attr.disabled = 1;
            attr.use_clockid = 1;
            attr.clockid = CLOCK_MONOTONIC;
            long fd = perf_event_open(&attr, cpu);
            if (fd < 0)
                return make_error("Failed to open a block_rq_issue perf event on cpu " +
                                  std::to_string(cpu) + ": " + errno_message(errno));
            CpuEvent event{cpu, Fd(static_cast<int>(fd)), nullptr, 0};
            std::string filter = narrowed ? own_requests_excluded(parts[i]) : parts[i];
            if (!filter.empty() &&
                ::ioctl(event.fd.get(), PERF_EVENT_IOC_SET_FILTER, filter.c_str()) != 0) {
                if (!narrowed)
                    return make_error("Failed to set filter \"" + filter +
                                      "\": " + errno_message(errno));
                // A kernel that cannot filter on comm: the devices alone.
                narrowed = false;
                filter = parts[i];
                if (!filter.empty() &&
                    ::ioctl(event.fd.get(), PERF_EVENT_IOC_SET_FILTER, filter.c_str()) != 0)
                    return make_error("Failed to set filter \"" + filter +
                                      "\": " + errno_message(errno));
            }
            filters[i] = filter;
            event.ring_size = static_cast<std::size_t>(page) * (ring_pages + 1);
            event.ring = ::mmap(nullptr, event.ring_size, PROT_READ | PROT_WRITE, MAP_SHARED,
                                event.fd.get(), 0);
            if (event.ring == MAP_FAILED) {
                event.ring = nullptr;
                return make_error("Failed to map the perf ring buffer: " + errno_message(errno));
            }
            events.events_.push_back(std::move(event));
        }
    }
    if (filters.size() == 1) {
        events.filter_ = filters.front();
    } else {
        for (const auto& f : filters)
            events.filter_ += (events.filter_.empty() ? "(" : " || (") + f + ")";
    }
    return events;
}

IoIssueEvents::IoIssueEvents(IoIssueEvents&& other) noexcept
    : filter_(std::move(other.filter_)), events_(std::move(other.events_)),
      dev_offset_(other.dev_offset_), armed_(other.armed_) {
    other.events_.clear();
}

IoIssueEvents& IoIssueEvents::operator=(IoIssueEvents&& other) noexcept {
    if (this != &other) {
        for (auto& e : events_)
            if (e.ring)
                ::munmap(e.ring, e.ring_size);
        filter_ = std::move(other.filter_);
        events_ = std::move(other.events_);
        other.events_.clear();
        dev_offset_ = other.dev_offset_;
        armed_ = other.armed_;
    }
    return *this;
}

IoIssueEvents::~IoIssueEvents() {
    for (auto& e : events_)
        if (e.ring)
            ::munmap(e.ring, e.ring_size);
}

std::vector<int> IoIssueEvents::fds() const {
    std::vector<int> fds;
    for (const auto& e : events_)
        fds.push_back(e.fd.get());
    return fds;
}

Result<void> IoIssueEvents::arm() {
    drain(); // forget requests seen before arming
    for (auto& e : events_)
        if (::ioctl(e.fd.get(), PERF_EVENT_IOC_ENABLE, 0) != 0)
            return make_error("Failed to enable the perf event on cpu " + std::to_string(e.cpu) +
                              ": " + errno_message(errno));
    armed_ = true;
    return {};
}

void IoIssueEvents::disarm() {
    for (auto& e : events_)
        ::ioctl(e.fd.get(), PERF_EVENT_IOC_DISABLE, 0);
    armed_ = false;
}

std::vector<IssuedRequest> IoIssueEvents::drain() {
    std::vector<IssuedRequest> requests;
    for (auto& e : events_) {
        auto* meta = static_cast<perf_event_mmap_page*>(e.ring);
        auto* data = static_cast<unsigned char*>(e.ring) + meta->data_offset;
        const std::uint64_t head = __atomic_load_n(&meta->data_head, __ATOMIC_ACQUIRE);
        const std::uint64_t tail = read_issue_samples(data, meta->data_size, meta->data_tail, head,
                                                      dev_offset_, e.cpu, requests);
        __atomic_store_n(&meta->data_tail, tail, __ATOMIC_RELEASE);
    }
    return requests;
}

} // namespace latgov
