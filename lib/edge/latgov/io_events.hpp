// Wakes the daemon on the first block request after idle, with no periodic
// timer: a perf tracepoint event on block/block_rq_issue per CPU, filtered
// to the governed devices, with wakeup_events=1. Armed only while everything
// is idle, so it costs nothing per IO while latgovd is sampling.
#pragma once

#include "latgov/fd.hpp"
#include "latgov/parse.hpp"
#include "latgov/perf_records.hpp"
#include "latgov/result.hpp"
#include "latgov/sysroot.hpp"

#include <cstdint>
#include <string>
#include <vector>

namespace latgov {

// block_rq_issue's format read from tracefs (either mount point); shared by
// the onset events and the per-CPU issue counters.
Result<TracepointFormat> read_block_rq_issue_format(const SysRoot& root);
// A perf filter matching the requests of `devs`: "dev == N || ..."; empty
// (every disk) when `devs` is.
std::string dev_filter(const std::vector<std::uint32_t>& devs);
// `filter` narrowed to requests that this process did not issue
// ("(...) && comm != \"latgovd\"").
std::string own_requests_excluded(const std::string& filter);

class IoIssueEvents {
  public:
    // Fails (the caller falls back to sampling) when tracefs is not mounted
    // or perf_event_open is refused (no CAP_PERFMON, seccomp, ...). Empty
    // `devs` watches requests of every disk.
    static Result<IoIssueEvents> open(const SysRoot& root, const std::vector<int>& cpus,
                                      const std::vector<std::uint32_t>& devs);

    // The fds to wait on (one per CPU).
    std::vector<int> fds() const;
    Result<void> arm();
    void disarm();
    bool armed() const { return armed_; }
    // The perf filter in use (empty: every request wakes).
    const std::string& filter() const { return filter_; }
    // Drains every ring buffer; the requests seen since the last call.
    std::vector<IssuedRequest> drain();

  private:
    struct CpuEvent {
        int cpu = 0;
        Fd fd;
        void* ring = nullptr;
        std::size_t ring_size = 0;
    };
    IoIssueEvents() = default;
    std::string filter_;

  public:
    IoIssueEvents(IoIssueEvents&&) noexcept;
    IoIssueEvents& operator=(IoIssueEvents&&) noexcept;
    IoIssueEvents(const IoIssueEvents&) = delete;
    IoIssueEvents& operator=(const IoIssueEvents&) = delete;
    ~IoIssueEvents();

  private:
    std::vector<CpuEvent> events_;
    std::uint32_t dev_offset_ = 0;
    bool armed_ = false;
};

} // namespace latgov
