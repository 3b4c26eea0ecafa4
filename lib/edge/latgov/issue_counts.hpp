// Per-CPU counts of block requests issued to the governed disks: a perf
// tracepoint event on block/block_getrq per CPU in counting mode (no
// samples, no ring buffer, no wake-ups), filtered to the governed devices
// and to reads and synchronous writes (someone waits for those).
// Read every tick, a count that grew names a CPU where a task submitted IO
// and, for synchronous IO, sleeps until it completes: a waiter CPU. The
// kernel only increments a counter per request.
#pragma once

#include "latgov/fd.hpp"
#include "latgov/parse.hpp"
#include "latgov/request_filter.hpp"
#include "latgov/result.hpp"
#include "latgov/sysroot.hpp"

#include <cstdint>
#include <vector>

namespace latgov {

class IssueCounters {
  public:
    // Fails when tracefs is not mounted or perf_event_open is refused; the
    // caller then finds waiters from iowait alone. Nothing in `watched`
    // counts the requests of every disk.
    static Result<IssueCounters> open(const SysRoot& root, const std::vector<int>& cpus,
                                      const WatchedDevs& watched);
    // counts[cpu] = requests issued from `cpu` so far, for the CPUs of
    // `only` (sorted; every opened CPU when empty); others keep their value.
    Result<void> read(const CpuSet& only, std::vector<std::uint64_t>& counts);

  private:
    struct CpuCounter {
        int cpu = 0;
        std::vector<Fd> fds; // one per filter, when the devices need several
    };
    std::vector<CpuCounter> counters_;
};

} // namespace latgov
