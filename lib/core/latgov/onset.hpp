// Onset delays: from the first request that activates a queue to the
// constraint written for it, as `latgov status` reports them.
#pragma once

#include <chrono>
#include <cstddef>
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
