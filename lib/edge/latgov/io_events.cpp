#include "latgov/io_events.hpp"

#include "latgov/cpu_kick.hpp"
#include "latgov/parse.hpp"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <functional>
#include <limits>
#include <linux/perf_event.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

namespace latgov {

namespace {

constexpr std::size_t ring_pages = 8; // data pages; a power of two

bool set_filter(const Fd& event, const std::string& filter) {
    return filter.empty() || ::ioctl(event.get(), PERF_EVENT_IOC_SET_FILTER, filter.c_str()) == 0;
}

} // namespace

Result<TracepointFiles> read_tracepoint_files(const SysRoot& root, const std::string& event) {
    std::string why; // each place's failure: not mounted, or refused (lockdown)
    for (const char* tracefs : {"/sys/kernel/tracing", "/sys/kernel/debug/tracing"}) {
        const std::string dir = std::string(tracefs) + "/events/" + event;
        auto id = root.read(dir + "/id");
        auto format = root.read(dir + "/format");
        if (id && format)
            return TracepointFiles{std::move(*id), std::move(*format)};
        why += (why.empty() ? "" : "; ") + (id ? format : id).error().message;
    }
    return make_error("Failed to read the " + event + " tracepoint (is tracefs mounted?): " + why);
}

namespace {

Result<TracepointFormat> read_block_format(const SysRoot& root, std::string_view name) {
    auto files = read_tracepoint_files(root, "block/" + std::string(name));
    if (!files)
        return files.error();
    auto tp = parse_tracepoint_format(files->id, files->format);
    if (!tp)
        return make_error("Failed to parse the " + std::string(name) +
                          " format: " + tp.error().message);
    return tp;
}

} // namespace

Result<TracepointFormat> read_request_format(const SysRoot& root) {
    return read_block_format(root, request_tracepoint);
}

Result<TracepointFormat> read_passthrough_format(const SysRoot& root) {
    auto tp = read_block_format(root, passthrough_tracepoint);
    if (tp)
        tp->passthrough = true;
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
        return filter.empty() ? filter : "(" + filter + ")";
    // latgovd's kick threads (cpu_kick.hpp) write too. Kernel writeback and
    // journal commits (ext4's jbd2) are what latgovd's own writes turn
    // into; no task sleeps on them at the moment they start.
    const std::string self = std::string("comm != \"") + comm + "\" && !(comm ~ \"" +
                             std::string(kick_thread_prefix) +
                             "*\") && !(comm ~ \"kworker/*\") && !(comm ~ \"jbd2/*\")";
    return filter.empty() ? self : "(" + filter + ") && " + self;
}

namespace {

// What follows the devices in a wake-up filter. The passthrough filter
// beside it has the same start and a shorter kind: a part that fits the one
// fits the other.
static_assert(passthrough_only.size() <= waited_only.size());
std::size_t wakeup_suffix_length() {
    return wakeup_filter("").size();
}

} // namespace

std::vector<std::string> wakeup_filters(const WatchedDevs& watched, std::size_t max_length) {
    std::vector<std::string> filters;
    for (const auto& part : device_filters(watched, wakeup_suffix_length(), max_length))
        filters.push_back(wakeup_filter(part));
    return filters;
}

namespace {

// own_requests_excluded() is empty or a chain of && (its devices
// parenthesised): one more term needs no parentheses.
std::string with_kind(const std::string& part, std::string_view kind) {
    const std::string own = own_requests_excluded(part);
    return own.empty() ? std::string(kind) : own + " && " + std::string(kind);
}

} // namespace

std::string wakeup_filter(const std::string& part) {
    return with_kind(part, waited_only);
}

std::string passthrough_filter(const std::string& part) {
    return with_kind(part, passthrough_only);
}

Result<Fd> open_tracepoint_event(perf_event_attr attr, std::uint64_t id, int cpu,
                                 std::string_view name, int* failed_errno, int group_fd) {
    attr.size = sizeof attr;
    attr.type = PERF_TYPE_TRACEPOINT;
    attr.config = id;
    const long fd = ::syscall(SYS_perf_event_open, &attr, -1, cpu, group_fd, PERF_FLAG_FD_CLOEXEC);
    if (fd < 0) {
        const int error = errno;
        if (failed_errno)
            *failed_errno = error;
        return make_error("Failed to open a " + std::string(name) + " perf event on cpu " +
                          std::to_string(cpu) + ": " + errno_message(error));
    }
    return Fd(static_cast<int>(fd));
}

Result<Fd> open_request_event(perf_event_attr attr, const TracepointFormat& tp, int cpu,
                              const std::string& narrowed_filter, const std::string& plain,
                              bool& narrowed, std::string& applied) {
    auto opened = open_tracepoint_event(attr, tp.id, cpu, request_tracepoint);
    if (!opened)
        return opened.error();
    Fd event = std::move(*opened);
    if (narrowed && set_filter(event, narrowed_filter)) {
        applied = narrowed_filter;
        return event;
    }
    narrowed = false; // refused once: not asked again
    if (!set_filter(event, plain))
        return make_error("Failed to set filter \"" + plain + "\": " + errno_message(errno));
    applied = plain;
    return event;
}

Result<IoIssueEvents> IoIssueEvents::open(const SysRoot& root, const std::vector<int>& cpus,
                                          const WatchedDevs& watched, IssueWakeup wakeup) {
    auto tp = read_request_format(root);
    if (!tp)
        return tp.error();
    // Passthrough requests wake latgovd, and are not for a recorder: armed
    // while requests come one at a time, its events see every request of
    // their CPUs, and a block_rq_issue event beside each would cost every
    // request a second record and filter.
    const Result<TracepointFormat> passthrough = wakeup == IssueWakeup::each_request
                                                     ? read_passthrough_format(root)
                                                     : make_error("not recorded");
    // latgovd's own writes (status, journal, evidence, metrics) must not
    // wake it: where its runtime directory sits on a governed disk, each
    // write would take a hold whose release is written again, for ever.
    // ext4 submits a file replaced by rename in the renaming task, so the
    // request carries our comm; what the kernel's threads write back later
    // is left out with all their requests (own_requests_excluded). Nor does
    // an asynchronous write wake it, whoever issued it (wakeup_filter).
    // Devices that need more than a page of filter get several events; the
    // passthrough filter of each fits too.
    const auto parts = device_filters(watched, wakeup_suffix_length(), max_filter_length());
    bool narrowed = true; // false once the kernel refused to filter on comm

    perf_event_attr attr{};
    attr.sample_period = 1;
    attr.sample_type = PERF_SAMPLE_TIME | PERF_SAMPLE_RAW;
    if (wakeup == IssueWakeup::each_request) {
        attr.wakeup_events = 1;
    } else {
        // A watermark past the ring's size is clamped to it: a wake-up
        // once per ring's worth of samples, and nobody waits for it.
        attr.watermark = 1;
        attr.wakeup_watermark = std::numeric_limits<std::uint32_t>::max();
    }
    attr.disabled = 1;
    attr.use_clockid = 1;
    attr.clockid = CLOCK_MONOTONIC;

    IoIssueEvents events;
    events.formats_.push_back(*tp);
    std::vector<std::string> filters(parts.size());
    for (int cpu : cpus) {
        for (std::size_t i = 0; i < parts.size(); ++i) {
            // The devices alone where the kernel cannot filter on comm:
            // then the samples' rwbs tells what has a waiter. A format
            // without rwbs (no kernel seen here) could not take its glob.
            const std::string narrowing =
                tp->rwbs_size > 0 ? wakeup_filter(parts[i]) : own_requests_excluded(parts[i]);
            auto event =
                open_request_event(attr, *tp, cpu, narrowing, parts[i], narrowed, filters[i]);
            if (!event)
                return event.error();
            auto ring = PerfRing::map(std::move(*event), ring_pages);
            if (!ring)
                return ring.error();
            events.events_.push_back(CpuEvent{cpu, std::move(*ring), false, Fd()});
        }
    }
    if (filters.size() == 1) {
        events.filter_ = filters.front();
    } else {
        for (const auto& f : filters)
            events.filter_ += (events.filter_.empty() ? "(" : " || (") + f + ")";
    }
    if (!passthrough)
        events.passthrough_unseen_ = passthrough.error().message;
    else if (!narrowed)
        // The kernel that refused the comm globs refuses the rwbs glob too.
        events.passthrough_unseen_ =
            "the kernel refused to filter " + std::string(passthrough_tracepoint) + " events";
    else if (events.add_passthrough_events(*passthrough, parts, attr))
        events.formats_.push_back(*passthrough);
    return events;
}

bool IoIssueEvents::add_passthrough_events(const TracepointFormat& tp,
                                           const std::vector<std::string>& parts,
                                           const perf_event_attr& ring_attr) {
    // In the ring event's group, enabled with it: enabling or disabling
    // that one event takes both, in one interrupt of its CPU. The same
    // sampling and wake-up rules, so that its samples wake as the ring's own.
    perf_event_attr attr = ring_attr;
    attr.disabled = 0;
    std::string why;
    for (std::size_t i = 0; i < events_.size() && why.empty(); ++i) {
        auto& e = events_[i];
        const std::string filter = passthrough_filter(parts[i % parts.size()]);
        auto event =
            open_tracepoint_event(attr, tp.id, e.cpu, passthrough_tracepoint, nullptr, e.ring.fd());
        if (!event)
            why = event.error().message;
        else if (!set_filter(*event, filter))
            why = "Failed to set filter \"" + filter + "\": " + errno_message(errno);
        else if (::ioctl(event->get(), PERF_EVENT_IOC_SET_OUTPUT, e.ring.fd()) != 0)
            why = "Failed to direct the " + std::string(passthrough_tracepoint) + " event of cpu " +
                  std::to_string(e.cpu) + " to its ring: " + errno_message(errno);
        else
            e.passthrough = std::move(*event);
    }
    if (why.empty())
        return true;
    passthrough_unseen_ = why;
    for (auto& e : events_)
        e.passthrough = Fd();
    return false;
}

std::vector<IoIssueEvents::EventFd> IoIssueEvents::fds() const {
    std::vector<EventFd> fds;
    for (const auto& e : events_)
        fds.push_back({e.cpu, e.ring.fd()});
    return fds;
}

Result<void> IoIssueEvents::arm() {
    for (auto& e : events_) {
        // An enabled event's requests are still to be taken; those of a
        // disabled one came before it was disabled, and are dropped.
        if (e.enabled)
            continue;
        e.ring.set_tail(e.ring.head());
        if (::ioctl(e.ring.fd(), PERF_EVENT_IOC_ENABLE, 0) != 0)
            return make_error("Failed to enable the perf event on cpu " + std::to_string(e.cpu) +
                              ": " + errno_message(errno));
        e.enabled = true;
    }
    return {};
}

bool IoIssueEvents::armed() const {
    return std::all_of(events_.begin(), events_.end(), [](const auto& e) { return e.enabled; });
}

bool IoIssueEvents::any_armed() const {
    return std::any_of(events_.begin(), events_.end(), [](const auto& e) { return e.enabled; });
}

bool IoIssueEvents::armed_on(int cpu) const {
    bool found = false;
    for (const auto& e : events_) {
        if (e.cpu != cpu)
            continue;
        if (!e.enabled)
            return false;
        found = true;
    }
    return found;
}

// An event that cannot be disabled stays enabled, and is named.
Result<void> IoIssueEvents::disable_if(const std::function<bool(int cpu)>& which) {
    std::string failed;
    for (auto& e : events_) {
        if (!e.enabled || !which(e.cpu))
            continue;
        if (::ioctl(e.ring.fd(), PERF_EVENT_IOC_DISABLE, 0) == 0)
            e.enabled = false;
        else
            failed += (failed.empty() ? "" : ", ") + std::to_string(e.cpu) + " (" +
                      errno_message(errno) + ")";
    }
    if (!failed.empty())
        return make_error("Failed to disable the " + std::string(request_tracepoint) +
                          " perf event on cpu " + failed +
                          "; it still wakes latgovd on each request");
    return {};
}

Result<void> IoIssueEvents::disarm(const std::vector<int>& cpus) {
    return disable_if(
        [&](int cpu) { return std::find(cpus.begin(), cpus.end(), cpu) != cpus.end(); });
}

Result<void> IoIssueEvents::disarm_all() {
    return disable_if([](int) { return true; });
}

std::vector<IssuedRequest> IoIssueEvents::drain() {
    std::vector<IssuedRequest> requests;
    for (auto& e : events_)
        e.ring.set_tail(read_issue_samples(e.ring.data(), e.ring.data_size(), e.ring.tail(),
                                           e.ring.head(), formats_, e.cpu, requests));
    return requests;
}

} // namespace latgov
