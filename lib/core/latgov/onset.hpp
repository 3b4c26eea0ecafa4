// Onset delays: from the first request that activates a queue to the
// constraint written for it, as `latgov status` reports them. A request is
// issued, here and in IssuedRequest, when the kernel makes it (its
// block_getrq sample); behind an IO scheduler it reaches the driver later.
#pragma once

#include "latgov/perf_records.hpp"

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <vector>

namespace latgov {

struct OnsetSummary {
    std::size_t count = 0;
    // Meaningful only when count > 0.
    double p50_us = 0;
    double p99_us = 0;
    double max_us = 0;
    // Of `count`, those latgovd handled on the CPU that issued the request.
    std::size_t on_issuing_cpu = 0;
};

// What a request after idle needs held: the CPUs its device holds for it
// (its queues' completion CPUs and its waiter's), written per CPU or, for a
// dry-run device, logged; or the global limit instead.
struct OnsetNeeds {
    std::vector<int> cpus;         // sorted
    std::vector<int> dry_run_cpus; // sorted
    bool global = false;
};

// What one application of the holds made stricter: the CPUs held anew or
// more strictly, written or (dry-run) logged, and whether the global limit
// was. A CPU logged for one device is not one written for another.
struct Tightened {
    std::vector<int> cpus;         // sorted
    std::vector<int> dry_run_cpus; // sorted
    bool global = false;
    // Whether a request that needs `needs` waited for this: a limit it needs
    // was not in place before. A request whose limits were in place already
    // delays nothing, even if another request's were tightened beside it.
    bool delays(const OnsetNeeds& needs) const;
};

// One onset: the request that waited and its delay to the constraint,
// split into latgovd's wake-up (zero for a request issued once latgovd was
// awake) and its own work (drain, decide, write).
struct Onset {
    IssuedRequest request;
    std::chrono::nanoseconds delay{};
    std::chrono::nanoseconds wake{};
    std::chrono::nanoseconds work{};
};

// One write of the limits in a wake-up: what it made stricter, and when
// it was done (CLOCK_MONOTONIC).
struct LimitWrite {
    Tightened tightened;
    std::uint64_t done_ns = 0;
};

// The onset among `activating`, the requests that activated a queue in one
// drain, if any: the earliest that waited (`needs_of` gives what each
// needs). `writes` are the wake-up's writes so far, in order, the drain's
// own last: a request waited for the last of them that made stricter what
// it needs and was done after the request was issued. One that came while
// an earlier drain wrote waited for that write, though its own drain finds
// its limits in place; one whose needs two writes tightened, for both. A
// request whose limits were in place already, whose device holds nothing
// or whose write failed waited for nothing; so did one stamped after every
// write that could serve it. `woken_ns`: CLOCK_MONOTONIC when latgovd woke.
std::optional<Onset> find_onset(std::vector<IssuedRequest> activating,
                                const std::vector<LimitWrite>& writes,
                                const std::function<OnsetNeeds(const IssuedRequest&)>& needs_of,
                                std::uint64_t woken_ns);

class OnsetDelays {
  public:
    // Keeps the newest `capacity` delays.
    explicit OnsetDelays(std::size_t capacity = 1000) : capacity_(capacity) {}
    void record(std::chrono::nanoseconds delay, bool on_issuing_cpu = false);
    OnsetSummary summary() const;

  private:
    struct Delay {
        double us;
        bool on_issuing_cpu;
    };
    std::size_t capacity_;
    std::vector<Delay> delays_; // newest last
};

} // namespace latgov
