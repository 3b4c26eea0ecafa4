// latgov's one clock: steady_clock is CLOCK_MONOTONIC, the clock the block
// tracepoints' perf samples are stamped with, read in the vDSO.
#pragma once

#include <chrono>

namespace latgov {

using TimePoint = std::chrono::steady_clock::time_point;

} // namespace latgov
