// What one tick observes of IO, as the governor consumes it. Filled by the
// IoSampler at the edge; plain values here so the governor stays pure.
#pragma once

#include "latgov/parse.hpp"

#include <cstdint>
#include <string>
#include <vector>

namespace latgov {

struct IoSample {
    std::vector<std::uint64_t> irq_counts; // indexed by IRQ number
    std::vector<BlockStat> devices;        // parallel to the sampler's device list
    // Requests in flight per hardware queue (debugfs hctxN/tags busy=),
    // parallel to the sampler's queue list; empty when not read.
    std::vector<std::uint64_t> queue_busy;
    // Per-CPU iowait (USER_HZ ticks) from the same read of /proc/stat,
    // indexed by CPU: where tasks sleep waiting for IO.
    std::vector<std::uint64_t> cpu_iowait;
    // Per-CPU requests issued to the governed disks (IssueCounters), indexed
    // by CPU; empty where perf events are not available. A CPU not read
    // reads issues_unread (mark_unread_issues), or where it was left unread
    // on purpose its last count.
    std::vector<std::uint64_t> cpu_issues;
};

// A count next to one of these is a baseline, not growth.
inline constexpr std::uint64_t issues_unread = UINT64_MAX;

// A hardware queue whose debugfs tags file is read every tick.
struct QueueTags {
    std::string disk;
    int hctx = 0;
};

} // namespace latgov
