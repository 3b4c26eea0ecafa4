// Work that must run on one CPU, done without touching the caller's CPU
// affinity: a thread of its own is pinned and joined before the call
// returns. Pinning the calling thread instead (sched_setaffinity(0, ...))
// outlives the work on every path that forgets to undo it; latgovd, which
// probes before its loop, would then govern from one CPU for life.
#pragma once

#include "latgov/result.hpp"

#include <functional>

namespace latgov {

// Runs `work` on a new thread allowed only on `cpu` and returns its result,
// or an error naming the CPU when the thread cannot be pinned there (work
// does not run then). An exception thrown by `work` is rethrown here, after
// the join.
Result<void> run_on_cpu(int cpu, const std::function<Result<void>()>& work);

} // namespace latgov
