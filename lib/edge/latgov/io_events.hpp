// Wakes the daemon on the first block request after idle, with no periodic
// timer: perf tracepoint events on block/block_getrq per CPU, filtered
// to the governed devices (one event per filter where the devices need more
// than one page of filter), with wakeup_events=1. Passthrough requests
// (NVMe IO commands by ioctl or io_uring) make no block_getrq: each wake-up
// event has a block_rq_issue event filtered to them in its group, writing
// to its ring, enabled and disabled with it.
//
// An enabled event costs every request on its CPU a sample (and the
// passthrough event's filter test of its dispatch there), and enabling or
// disabling a CPU's event interrupts that CPU and waits for it (an idle one
// wakes). So all are armed only while everything is idle, and an event is
// disabled once it fired: a burst costs its submitting CPUs one sample and
// two interrupts each, and CPUs that issue nothing are not interrupted (but
// once, when the daemon disarms every event for isolated requests).
// Events of CPUs that have not fired stay armed while IO runs, and the
// first request from another CPU wakes the daemon too.
#pragma once

#include "latgov/fd.hpp"
#include "latgov/parse.hpp"
#include "latgov/perf_records.hpp"
#include "latgov/perf_ring.hpp"
#include "latgov/request_filter.hpp"
#include "latgov/result.hpp"
#include "latgov/sysroot.hpp"

#include <cstddef>
#include <cstdint>
#include <functional>
#include <linux/perf_event.h>
#include <string>
#include <string_view>
#include <vector>

namespace latgov {

// A tracepoint's files in tracefs (either mount point); `event` is
// "group/name".
struct TracepointFiles {
    std::string id;
    std::string format;
};
Result<TracepointFiles> read_tracepoint_files(const SysRoot& root, const std::string& event);
// request_tracepoint's format read from tracefs; shared by the onset events
// and the per-CPU issue counters.
Result<TracepointFormat> read_request_format(const SysRoot& root);
// passthrough_tracepoint's, marked as passthrough.
Result<TracepointFormat> read_passthrough_format(const SysRoot& root);
// The longest filter the kernel takes: a page less the terminating NUL.
std::size_t max_filter_length();
// The devices' filter in parts (request_filter.hpp), each short enough that
// "(part) && " and `suffix_length` more characters fit in `max_length`.
// One empty part: every disk.
std::vector<std::string> device_filters(const WatchedDevs& watched, std::size_t suffix_length,
                                        std::size_t max_length);
// `filter` narrowed to requests that this process did not issue
// ("(...) && comm != \"latgovd\"", its kick threads and the kernel's
// writeback and journal threads left out too); "" (every disk) gives the
// narrowing alone. Empty, or a chain of && whose first term is `filter`
// parenthesised.
std::string own_requests_excluded(const std::string& filter);
// A part of device_filters() made a wake-up event's filter: the requests
// latgovd did not issue (own_requests_excluded) that someone waits for
// (waited_only). An asynchronous write wakes nobody: no task sleeps on it
// as it is issued (one that waits for it later is not seen).
std::string wakeup_filter(const std::string& part);
// The filters of the wake-up events: one perf event per filter and CPU,
// each within `max_length`, together matching the requests of `watched`
// that wake latgovd (wakeup_filter). The passthrough filter of each part
// fits too.
std::vector<std::string> wakeup_filters(const WatchedDevs& watched, std::size_t max_length);
// A part of device_filters() made the filter of the passthrough_tracepoint
// event beside its wake-up event: the requests latgovd did not issue, of
// passthrough's kind ("... && rwbs ~ \"N*\"", whose submitter waits).
std::string passthrough_filter(const std::string& part);

// A perf event on the tracepoint `id` on `cpu` (`attr` says the rest),
// `name` its name for errors, in the group of `group_fd` if not -1;
// `failed_errno`, if given, gets the errno of a refused open.
Result<Fd> open_tracepoint_event(perf_event_attr attr, std::uint64_t id, int cpu,
                                 std::string_view name, int* failed_errno = nullptr,
                                 int group_fd = -1);

// A request_tracepoint perf event on `cpu` (`attr` says the rest, `tp` which
// tracepoint) with `narrowed_filter` set, or `plain` where the kernel
// refuses the narrowing. `narrowed` is the caller's, over all its events:
// false once a narrowing was refused, and then `plain` is set from the
// start. "" sets no filter. `applied` gets the filter that was set.
Result<Fd> open_request_event(perf_event_attr attr, const TracepointFormat& tp, int cpu,
                              const std::string& narrowed_filter, const std::string& plain,
                              bool& narrowed, std::string& applied);

// Whether a request wakes the reader. Waking latgovd for a request costs
// that request (on a KVM guest, isolated reads were 1.04-1.17 of their
// latency without latgovd when it woke for each), and the kernel signals
// the reader from an interrupt the issuing CPU raises on itself, an exit to
// the host in a guest (bench/trace-reads measures what that costs a read).
enum class IssueWakeup {
    each_request, // the first request after idle wakes the daemon
    never,        // recorded for the daemon to read when it wakes anyway
};

class IoIssueEvents {
  public:
    // Fails (the caller falls back to sampling) when tracefs is not mounted
    // or perf_event_open is refused (no CAP_PERFMON, seccomp, ...). Nothing
    // in `watched` watches requests of every disk.
    static Result<IoIssueEvents> open(const SysRoot& root, const std::vector<int>& cpus,
                                      const WatchedDevs& watched,
                                      IssueWakeup wakeup = IssueWakeup::each_request);

    // The fds to wait on (one per CPU and filter), each with its CPU.
    struct EventFd {
        int cpu;
        int fd;
    };
    std::vector<EventFd> fds() const;
    // Enables every event not enabled (interrupting only those CPUs).
    Result<void> arm();
    // Disables the events of `cpus` (those that fired), or of every CPU.
    // An event that cannot be disabled stays enabled, and the error names it.
    Result<void> disarm(const std::vector<int>& cpus);
    Result<void> disarm_all();
    bool armed() const;     // every CPU's event enabled
    bool any_armed() const; // at least one
    // `cpu` has events and all are enabled: no governed request (but
    // latgovd's own) was issued from it since they were armed.
    bool armed_on(int cpu) const;
    // The perf filters in use as one ("(f1) || (f2)" when split; empty:
    // every request wakes).
    const std::string& filter() const { return filter_; }
    // Why passthrough requests are not seen (the kernel refused the
    // block_rq_issue events or their filter, or a recorder, which does not
    // watch them); empty when they are.
    const std::string& passthrough_unseen() const { return passthrough_unseen_; }
    // Drains every ring buffer; the requests seen since the last call.
    std::vector<IssuedRequest> drain();

  private:
    struct CpuEvent {
        int cpu = 0;
        PerfRing ring;
        bool enabled = false;
        // The passthrough event in the ring's group, writing to it; closed
        // first.
        Fd passthrough;
    };
    IoIssueEvents() = default;
    Result<void> disable_if(const std::function<bool(int cpu)>& which);
    // Adds the passthrough event to each ring's group; false, with
    // passthrough_unseen_ set and none added, where the kernel refuses one.
    // `parts`: the devices of a CPU's events (device_filters), in their
    // order.
    bool add_passthrough_events(const TracepointFormat& tp, const std::vector<std::string>& parts,
                                const perf_event_attr& attr);
    std::string filter_;
    std::string passthrough_unseen_;
    std::vector<CpuEvent> events_;
    std::vector<TracepointFormat> formats_; // the request's, then passthrough's
};

} // namespace latgov
