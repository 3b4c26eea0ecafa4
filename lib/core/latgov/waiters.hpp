// The CPUs where tasks wait for a queue's IO. A completion interrupt wakes
// the task that waits for the request; when that task sleeps on another CPU
// than the one completing the queue, its wake-up pays an idle exit too, so
// that CPU is held as well while the queue is active.
//
// Evidence that a CPU holds a waiter:
//  - requests to the governed disks were issued from it (per-CPU
//    block_getrq counters, read every tick; the request that woke an
//    idle daemon at onset): synchronous IO sleeps where it was submitted.
//    This is the main signal: exact per tick, and it sees the waits that
//    iowait misses (fdatasync sleeps on the journal commit without iowait;
//    the journal thread that issues the commit sleeps in iowait on its own
//    CPU and is found by its requests);
//  - its iowait counter in /proc/stat grew: the scheduler counts iowait on a
//    CPU only while it is idle with a task asleep in io_schedule() that last
//    ran there. Coarse (10 ms ticks) and only while the CPU is idle, but it
//    needs no perf events.
// Bounded by the queue's submit CPUs: a CPU that does not submit to the
// queue waits for another queue's IO.
#pragma once

#include "latgov/clock.hpp"
#include "latgov/parse.hpp"
#include "latgov/result.hpp"
#include "latgov/sample.hpp"

#include <chrono>
#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

namespace latgov {

// The iowait field of every "cpuN" line of /proc/stat (USER_HZ ticks),
// indexed by CPU number; CPUs without a line (offline) read 0. Pure, and
// allocation-free once `iowait` has grown.
Result<void> parse_stat_cpu_iowait(std::string_view proc_stat, std::vector<std::uint64_t>& iowait);

// Marks the counts of the CPUs outside `bound` (sorted) issues_unread, before
// the CPUs of the bound are read: a CPU read again once it is back in the
// bound then gives a baseline, not the growth of its time outside, which
// may be old and another queue's.
void mark_unread_issues(std::vector<std::uint64_t>& issues, const CpuSet& bound);

class WaiterCpus {
  public:
    // A new sample of the per-CPU iowait counters: CPUs whose counter grew
    // are seen waiting at `now`. The first sample only sets the baseline,
    // and so does one more than waiter_window after the last (the first
    // after an idle daemon slept): growth over so long a span may be old,
    // and counted now it would take a waiter that left long ago.
    void observe_iowait(std::span<const std::uint64_t> iowait, TimePoint now);
    // A new sample of the per-CPU request issue counters, likewise; a CPU
    // that reads issues_unread, now or at the last sample, grew nothing.
    void observe_issues(std::span<const std::uint64_t> issues, TimePoint now);
    // Both counters as they are now, as a baseline: what grew since the
    // last sample (a span nothing observed) shows no waiter.
    void rebase(std::span<const std::uint64_t> iowait, std::span<const std::uint64_t> issues,
                TimePoint now);
    // A request was issued from `cpu` at `now`.
    void observe_submit(int cpu, TimePoint now);
    // The CPUs of `bound` (sorted) that are waiters at `now`, sorted: seen
    // waiting or submitting within `window` before it, or within
    // returning_waiter_window for a CPU whose waiter came back (below).
    CpuSet select(const CpuSet& bound, TimePoint now, std::chrono::milliseconds window) const;
    // Whether any CPU was seen waiting within `window` before `now`.
    bool any(TimePoint now, std::chrono::milliseconds window) const;

  private:
    struct Counters {
        std::vector<std::uint64_t> previous;
        bool has_previous = false;
        TimePoint at{}; // when `previous` was read (iowait only)
    };
    void observe_growth(Counters& counters, std::span<const std::uint64_t> now_values,
                        TimePoint now);
    void seen(int cpu, TimePoint now);
    Counters iowait_;
    Counters issues_;
    std::vector<TimePoint> last_seen_; // by CPU; epoch = never
    std::vector<bool> ever_seen_;
    std::vector<bool> returning_; // its waiter left and came back (see below)
};

// How long a CPU stays a waiter after its last sign of one. /proc/stat
// counts iowait in 10 ms ticks, so a waiter asleep a fraction f of the time
// shows a tick every 10 ms / f: 300 ms keeps a waiter that sleeps 4% of the
// time (a 4k read every 1 ms with 40 us to wait) held between ticks.
constexpr std::chrono::milliseconds waiter_window{300};
// A task that is not pinned moves between the CPUs of its queue (measured
// here: fio with 1 ms of think time on 2 CPUs ran on each about half the
// time, changing every few hundred ms), and each return to a released CPU
// pays its exit until the next tick sees it: with 300 ms alone that CPU was
// held a fifth of the run. A CPU seen again within waiter_memory of a
// lapse is a returning waiter's: it stays held for returning_waiter_window
// after each sign, until it goes unseen for longer than waiter_memory.
constexpr std::chrono::milliseconds returning_waiter_window{2000};
constexpr std::chrono::milliseconds waiter_memory{5000};

} // namespace latgov
