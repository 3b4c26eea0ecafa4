// CPU hotplug seen as it happens, for a daemon that gets no kernel uevents
// (no netlink socket: a seccomp filter, a sandbox without AF_NETLINK): a
// perf event per online CPU on the cpuhp:cpuhp_enter tracepoint, which the
// kernel hits at each step of taking a CPU offline or bringing one online
// (on that CPU, and on the CPU that drives the change), and when a driver
// adds a hotplug step. Nothing else hits it: it costs nothing while the CPUs
// stay as they are.
//
// Why: the kernel detaches a CPU's perf events when the CPU goes offline,
// and nothing attaches them again when it returns (a new one does).
// A CPU that goes offline and comes back between two online checks reads
// the same online list, while its IO events never fire again and its
// issue counter stands still: its requests go unseen until a rescan opens
// them anew. The CPU's uevents bring that rescan; without them, this does.
#pragma once

#include "latgov/perf_ring.hpp"
#include "latgov/result.hpp"
#include "latgov/sysroot.hpp"

#include <vector>

namespace latgov {

class HotplugWatch {
  public:
    // One event per CPU of `cpus` (online ones). Fails when tracefs is not
    // mounted, the kernel has no cpuhp tracepoints, or perf_event_open is
    // refused; a CPU that is no longer online is left out (missed()).
    static Result<HotplugWatch> open(const SysRoot& root, const std::vector<int>& cpus);

    // The fds to wait on, sorted.
    const std::vector<int>& fds() const { return fds_; }
    bool owns(int fd) const;
    // Empties every ring: whether any hotplug step came since the last call.
    bool drain();
    // CPUs of open()'s list that were offline by then: a hotplug under way.
    const std::vector<int>& missed() const { return missed_; }

  private:
    HotplugWatch() = default;
    std::vector<PerfRing> rings_;
    std::vector<int> fds_;
    std::vector<int> missed_;
};

} // namespace latgov
